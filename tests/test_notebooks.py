"""Every notebook runs under papermill with the smoke profile, and bad parameters fail first."""

import jupytext
import nbformat
import pandas as pd
import papermill
import pytest

from lib import PROJECT_ROOT
from lib.params import ParameterError
from lib.run_all import notebooks
from lib.studies import margin_factorial
from lib.studies import stop_gradient

NOTEBOOKS = notebooks()


def test_every_notebook_has_a_parameters_cell_and_no_outputs():
    assert NOTEBOOKS, "no notebooks found"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: exactly one cell tagged 'parameters'"
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} is committed with outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_jupytext_pair_is_in_sync(path):
    paired = path.with_suffix(".py")
    assert paired.exists(), f"{paired.name} (jupytext percent pair) is missing"
    from_py = jupytext.read(paired)
    from_ipynb = nbformat.read(path, as_version=4)
    assert [c.source for c in from_py.cells] == [c.source for c in from_ipynb.cells], \
        f"{path.name} and {paired.name} differ: run jupytext --sync {path}"


def test_notebook_01_smoke_writes_records_and_tables(tmp_path):
    out = tmp_path / "01.ipynb"
    papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / "01_margin_factorial.ipynb"), str(out),
                               parameters={"profile": "smoke", "results_dir": str(tmp_path)},
                               cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    runs = list((tmp_path / "runs" / margin_factorial.STUDY / "smoke").glob("*.json"))
    settings = margin_factorial.resolve({**_defaults(), "profile": "smoke"})
    assert len(runs) == len(margin_factorial.plan(settings))
    table = pd.read_csv(tmp_path / "tables" / f"{margin_factorial.STUDY}_smoke.csv")
    assert len(table) == len(runs) and set(table.status) == {"ok"}
    verdicts = pd.read_csv(tmp_path / "tables" / f"{margin_factorial.STUDY}_smoke_paper_vs_reproduced.csv")
    assert {"quantity", "ours", "paper", "evidence", "verdict"} <= set(verdicts.columns)


def _defaults() -> dict:
    """The parameters cell of notebook 01, as a dict."""
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / "01_margin_factorial.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


@pytest.mark.parametrize("name,value", [("dataset", "imagenet"), ("m0", -0.2), ("margin_modes", ["clamp", "clip"]),
                                        ("profile", "huge"), ("seeds", 0), ("stabilizers", []), ("lr", "fast"),
                                        ("device", "gpu")])
def test_bad_parameter_fails_before_training_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        margin_factorial.resolve({**_defaults(), name: value})


def test_bad_parameter_fails_in_the_notebook_before_any_run(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="m0"):
        papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / "01_margin_factorial.ipynb"), str(tmp_path / "bad.ipynb"),
                                   parameters={"profile": "smoke", "m0": -0.5, "results_dir": str(tmp_path)},
                                   cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- notebook 06

NOTEBOOK_06 = PROJECT_ROOT / "notebooks" / "06_stop_gradient_collapse.ipynb"


def _parameters_06() -> dict:
    """The parameters cell of notebook 06, as a dict."""
    nb = nbformat.read(NOTEBOOK_06, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def test_notebook_06_smoke_writes_records_and_tables(tmp_path):
    out = tmp_path / "06.ipynb"
    papermill.execute_notebook(str(NOTEBOOK_06), str(out), parameters={"profile": "smoke", "results_dir": str(tmp_path)},
                               cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    runs = list((tmp_path / "runs" / stop_gradient.STUDY / "smoke").glob("*.json"))
    settings = stop_gradient.resolve({**_parameters_06(), "profile": "smoke"})
    assert len(runs) == len(stop_gradient.plan(settings))
    table = pd.read_csv(tmp_path / "tables" / f"{stop_gradient.STUDY}_smoke.csv")
    assert len(table) == len(runs) and set(table.status) == {"ok"}
    assert set(table["config.experiment"]) == set(stop_gradient.EXPERIMENTS)
    verdicts = pd.read_csv(tmp_path / "tables" / f"{stop_gradient.STUDY}_smoke_paper_vs_reproduced.csv")
    assert {"quantity", "ours", "paper", "evidence", "verdict"} <= set(verdicts.columns) and len(verdicts) > 1
    for name in ("rates", "w2_spectrum", "teacher_student", "real"):
        assert (tmp_path / "tables" / f"{stop_gradient.STUDY}_smoke_{name}.csv").exists()


@pytest.mark.parametrize("name,value", [("profile", "huge"), ("r_values", [0.2, 1.0]), ("r_values", [0.03]),
                                        ("r_values", []), ("dim", 2), ("num_classes", 1), ("dt", 5.0),
                                        ("gamma", "fast"), ("seeds", 0), ("steps", 1.5), ("real_dataset", "imagenet"),
                                        ("head_rate", -1.0), ("readout_noise", -0.1), ("samples_per_class", 1)])
def test_notebook_06_bad_parameter_fails_before_any_run_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        stop_gradient.resolve({**_parameters_06(), name: value})


def test_notebook_06_bad_parameter_fails_in_the_notebook_before_any_run(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="r_values"):
        papermill.execute_notebook(str(NOTEBOOK_06), str(tmp_path / "bad.ipynb"),
                                   parameters={"profile": "smoke", "r_values": [0.5, 1.5], "results_dir": str(tmp_path)},
                                   cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ notebooks 02 and 03

from lib.studies import cross_dataset, difficulty_sweep  # noqa: E402

STUDIES_2_3 = {"02_cross_dataset_reversal": cross_dataset, "03_difficulty_sweep": difficulty_sweep}


def _parameters_cell(name: str) -> dict:
    """The parameters cell of a notebook, as a dict."""
    nb = nbformat.read(PROJECT_ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


@pytest.mark.parametrize("name,extra_tables", [("02_cross_dataset_reversal", ["per_dataset"]),
                                               ("03_difficulty_sweep", ["per_level"])])
def test_notebooks_02_03_smoke_write_records_and_tables(tmp_path, name, extra_tables):
    study = STUDIES_2_3[name]
    papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"), str(tmp_path / "out.ipynb"),
                               parameters={"profile": "smoke", "results_dir": str(tmp_path)},
                               cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    runs = list((tmp_path / "runs" / study.STUDY / "smoke").glob("*.json"))
    assert len(runs) == len(study.plan(study.resolve({**_parameters_cell(name), "profile": "smoke"})))
    table = pd.read_csv(tmp_path / "tables" / f"{study.STUDY}_smoke.csv")
    assert len(table) == len(runs) and set(table.status) == {"ok"}
    for extra in extra_tables:
        assert len(pd.read_csv(tmp_path / "tables" / f"{study.STUDY}_smoke_{extra}.csv")) >= 2
    verdicts = pd.read_csv(tmp_path / "tables" / f"{study.STUDY}_smoke_paper_vs_reproduced.csv")
    assert {"quantity", "ours", "paper", "evidence", "verdict"} <= set(verdicts.columns) and len(verdicts) >= 4


@pytest.mark.parametrize("name,value", [("datasets", ["cifar10", "imagenet"]), ("datasets", []), ("seeds", 1),
                                        ("skip_missing", "yes"), ("stabilizer", "none"), ("margin_modes", ["clamp"]),
                                        ("shapes_options", {"num_classes": 7}), ("profile", "huge"), ("lr", -1.0)])
def test_notebook_02_bad_parameter_fails_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        cross_dataset.resolve({**_parameters_cell("02_cross_dataset_reversal"), name: value})


@pytest.mark.parametrize("name,value", [("levels", [0, 9]), ("levels", "0,1"), ("knob", "noise"), ("seeds", 0),
                                        ("dataset", "imagenet"), ("m0", 2.0), ("layers", 0)])
def test_notebook_03_bad_parameter_fails_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        difficulty_sweep.resolve({**_parameters_cell("03_difficulty_sweep"), name: value})


@pytest.mark.parametrize("name,parameters,message", [
    ("02_cross_dataset_reversal", {"datasets": ["cifar100"], "skip_missing": True}, "datasets"),
    ("03_difficulty_sweep", {"levels": [0, 5]}, "levels"),
])
def test_notebooks_02_03_bad_parameter_fail_before_any_run(tmp_path, name, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError, match=message):
        papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"), str(tmp_path / "bad.ipynb"),
                                   parameters={"profile": "smoke", "results_dir": str(tmp_path),
                                               "data_root": str(tmp_path), **parameters},
                                   cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name,parameters", [("02_cross_dataset_reversal", {"datasets": ["shapes10", "svhn"]}),
                                             ("03_difficulty_sweep", {"dataset": "svhn", "levels": [0, 4]})])
def test_notebooks_02_03_missing_dataset_fails_before_training_with_the_data_layers_message(tmp_path, monkeypatch,
                                                                                          name, parameters):
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))  # inherited by the kernel
    with pytest.raises(papermill.PapermillExecutionError, match="DatasetNotFoundError") as err:
        papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"), str(tmp_path / "missing.ipynb"),
                                   parameters={"profile": "smoke", "results_dir": str(tmp_path),
                                               "data_root": str(tmp_path), **parameters},
                                   cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    assert "'svhn' was not found" in str(err.value)
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- notebook 04

from lib.studies import embedding_norms  # noqa: E402

NOTEBOOK_04 = "04_embedding_norms"


def test_notebook_04_smoke_writes_records_and_tables(tmp_path):
    papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{NOTEBOOK_04}.ipynb"), str(tmp_path / "04.ipynb"),
                               parameters={"profile": "smoke", "results_dir": str(tmp_path)},
                               cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    settings = embedding_norms.resolve({**_parameters_cell(NOTEBOOK_04), "profile": "smoke"})
    runs = list((tmp_path / "runs" / embedding_norms.STUDY / "smoke").glob("*.json"))
    assert len(runs) == len(embedding_norms.plan(settings))
    table = pd.read_csv(tmp_path / "tables" / f"{embedding_norms.STUDY}_smoke.csv")
    assert len(table) == len(runs) and set(table.status) == {"ok"}
    assert set(table["config.method"]) == set(settings["methods"])
    for name in ("convergence", "latent_classes", "interventions", "confidence", "ood"):
        assert len(pd.read_csv(tmp_path / "tables" / f"{embedding_norms.STUDY}_smoke_{name}.csv")) >= 2, name
    verdicts = pd.read_csv(tmp_path / "tables" / f"{embedding_norms.STUDY}_smoke_paper_vs_reproduced.csv")
    assert {"quantity", "ours", "paper", "evidence", "verdict"} <= set(verdicts.columns) and len(verdicts) >= 5
    nb = nbformat.read(tmp_path / "04.ipynb", as_version=4)
    key = [c for c in nb.cells if "key-figure" in c.metadata.get("tags", [])]
    assert len(key) == 1 and any("image/png" in o.get("data", {}) for o in key[0].outputs)


@pytest.mark.parametrize("name,value", [("profile", "huge"), ("radii", [1.0]), ("radii", [1.0, -2.0]), ("pairs", 1),
                                        ("tolerance", 0.0), ("class_weights", [1, 0]), ("latent_seeds", 0),
                                        ("dataset", "imagenet"), ("methods", ["simclr", "byol"]),
                                        ("interventions", ["default", "dropout"]), ("imbalance_base", 0.5),
                                        ("simclr_loss", "ntxent"), ("simclr_weight_decays", [1e-6]),
                                        ("cut_simsiam", 0.0), ("grad_scale_power", "one"), ("epochs", 0),
                                        ("width", 0.001), ("ood", ["imagenet"]), ("ood", ["digits", "digits"]),
                                        ("warmup_epochs", 1000.0), ("simsiam_lr", -0.1)])
def test_notebook_04_bad_parameter_fails_before_any_run_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        embedding_norms.resolve({**_parameters_cell(NOTEBOOK_04), name: value})


def test_notebook_04_bad_parameter_fails_in_the_notebook_before_any_run(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="interventions"):
        papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{NOTEBOOK_04}.ipynb"), str(tmp_path / "bad.ipynb"),
                                   parameters={"profile": "smoke", "interventions": ["default", "dropout"],
                                               "results_dir": str(tmp_path)},
                                   cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "tables").exists()


# --------------------------------------------------------------------------- notebook 05

from lib.studies import flatnce_batch  # noqa: E402

NOTEBOOK_05 = "05_flatnce_batch_size"


def test_notebook_05_smoke_writes_records_and_tables(tmp_path):
    papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{NOTEBOOK_05}.ipynb"), str(tmp_path / "out.ipynb"),
                               parameters={"profile": "smoke", "results_dir": str(tmp_path)},
                               cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    settings = flatnce_batch.resolve({**_parameters_cell(NOTEBOOK_05), "profile": "smoke"})
    runs = list((tmp_path / "runs" / flatnce_batch.STUDY / "smoke").glob("*.json"))
    assert len(runs) == len(flatnce_batch.plan(settings))
    tables = tmp_path / "tables"
    table = pd.read_csv(tables / f"{flatnce_batch.STUDY}_smoke.csv")
    assert len(table) == len(runs) and set(table.status) == {"ok"}
    assert set(table["config.loss"]) == set(settings["losses"])
    assert set(table["config.batch_size"]) == set(settings["batch_sizes"])
    per_cell = pd.read_csv(tables / f"{flatnce_batch.STUDY}_smoke_per_cell.csv")
    assert len(per_cell) == len(settings["batch_sizes"]) * len(settings["losses"])
    assert (per_cell.info_nce_ceiling.diff().dropna() >= 0).all()  # log(2N - 1) grows with the batch
    comparison = pd.read_csv(tables / f"{flatnce_batch.STUDY}_smoke_flatnce_vs_infonce.csv")
    assert list(comparison.batch_size) == settings["batch_sizes"]
    verdicts = pd.read_csv(tables / f"{flatnce_batch.STUDY}_smoke_paper_vs_reproduced.csv")
    assert {"quantity", "ours", "paper", "evidence", "verdict"} <= set(verdicts.columns) and len(verdicts) >= 9
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    key = [c for c in executed.cells if "key-figure" in c.metadata.get("tags", [])]
    assert len(key) == 1 and any("image/png" in o.get("data", {}) for o in key[0].outputs)


@pytest.mark.parametrize("name,value", [("profile", "huge"), ("batch_sizes", [16, 1]), ("batch_sizes", []),
                                        ("batch_sizes", [16, 16]), ("batch_sizes", "16,32"), ("losses", ["infonce", "nce"]),
                                        ("losses", []), ("lr_scaling", "cube"), ("optimizer", "rmsprop"), ("epochs", 0),
                                        ("seeds", 0), ("width", 0.0), ("dataset", "imagenet"), ("temperature", -0.1),
                                        ("warmup_epochs", 50.0), ("lr", "fast"), ("device", "gpu"), ("workers", 0)])
def test_notebook_05_bad_parameter_fails_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        flatnce_batch.resolve({**_parameters_cell(NOTEBOOK_05), name: value})


@pytest.mark.parametrize("parameters,message", [({"losses": ["infonce", "nce"]}, "losses"),
                                                ({"batch_sizes": [16, 4096]}, "batch_sizes")])
def test_notebook_05_bad_parameter_fails_in_the_notebook_before_any_run(tmp_path, parameters, message):
    # a batch of 4096 passes every check but the one against the 128 smoke images, made after loading them
    with pytest.raises(papermill.PapermillExecutionError, match=f"ParameterError.*parameter {message}="):
        papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{NOTEBOOK_05}.ipynb"), str(tmp_path / "bad.ipynb"),
                                   parameters={"profile": "smoke", "results_dir": str(tmp_path), **parameters},
                                   cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    assert not (tmp_path / "runs").exists()
