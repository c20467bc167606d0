"""Every notebook runs under papermill with the smoke profile, and bad parameters fail first."""
import ast
import hashlib
import html
import inspect
import json
import re
import shutil
import subprocess

import jupytext
import nbformat
import pandas as pd
import papermill
import pytest

from lib import PROJECT_ROOT
from lib.core.params import ParameterError
from lib.execute import notebooks
from lib.report import write_variants_index
from lib.studies import (
    cross_dataset,
    difficulty_sweep,
    embedding_norms,
    find_study,
    flatnce_batch,
    margin_factorial,
    stop_gradient,
)
from lib.studies.variants import notebook_defaults

NOTEBOOKS = notebooks()
NOTEBOOK_01 = "01_margin_factorial"
NOTEBOOK_04 = "04_embedding_norms"
NOTEBOOK_05 = "05_flatnce_batch_size"
NOTEBOOK_06 = "06_stop_gradient_collapse"
STUDIES_2_3 = {"02_cross_dataset_reversal": cross_dataset, "03_difficulty_sweep": difficulty_sweep}


def _parameters_cell(name: str) -> dict:
    """The parameters cell of a notebook, as a dict."""
    return notebook_defaults(find_study(name))


def _execute(name: str, tmp_path, out: str = "out.ipynb", **parameters) -> nbformat.NotebookNode:
    """Run notebook ``name`` under papermill with the smoke profile, writing under ``tmp_path``."""
    papermill.execute_notebook(str(PROJECT_ROOT / "notebooks" / f"{name}.ipynb"), str(tmp_path / out),
                               parameters={"profile": "smoke", "results_dir": str(tmp_path), **parameters},
                               cwd=str(PROJECT_ROOT), kernel_name="python3", progress_bar=False)
    return nbformat.read(tmp_path / out, as_version=4)


def _check_smoke_outputs(name: str, study, tmp_path, min_verdicts: int, **parameters) -> tuple[dict, pd.DataFrame]:
    """One record per planned run, all ok, in the collected table; a paper-vs-reproduced table."""
    settings = study.resolve({**_parameters_cell(name), **parameters, "profile": "smoke"})
    runs = list((tmp_path / "runs" / study.STUDY / "smoke").glob("*.json"))
    assert len(runs) == len(study.plan(settings))
    table = pd.read_csv(tmp_path / "tables" / f"{study.STUDY}_smoke.csv")
    assert len(table) == len(runs) and set(table.status) == {"ok"}
    verdicts = pd.read_csv(tmp_path / "tables" / f"{study.STUDY}_smoke_paper_vs_reproduced.csv")
    assert {"quantity", "ours", "paper", "evidence", "verdict"} <= set(verdicts.columns)
    assert len(verdicts) >= min_verdicts
    return settings, table


def _has_key_figure(executed: nbformat.NotebookNode) -> bool:
    key = [c for c in executed.cells if "key-figure" in c.metadata.get("tags", [])]
    return len(key) == 1 and any("image/png" in o.get("data", {}) for o in key[0].outputs)


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
def test_papermill_sees_every_name_the_parameters_cell_assigns(path):
    """papermill parses the cell line by line and silently drops a line it cannot read (e.g. a comment
    holding a second "="): that parameter would then never be injected nor checked for typos."""
    cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assigned = {node.target.id if isinstance(node, ast.AnnAssign) else node.targets[0].id
                for node in ast.parse(cell.source).body if isinstance(node, (ast.Assign, ast.AnnAssign))}
    assert set(papermill.inspect_notebook(str(path))) == assigned


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_jupytext_pair_is_in_sync(path):
    paired = path.with_suffix(".py")
    assert paired.exists(), f"{paired.name} (jupytext percent pair) is missing"
    from_py = jupytext.read(paired)
    from_ipynb = nbformat.read(path, as_version=4)
    assert [c.source for c in from_py.cells] == [c.source for c in from_ipynb.cells], \
        f"{path.name} and {paired.name} differ: run jupytext --sync {path}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_two_look_reading_is_the_study_modules_verdict_table_given_its_context_by_name(path):
    """A notebook reads its verdicts over two looks through ``nb.two_looks(records, **context)``, no function of its
    own: the table is its study module's ``verdict_table``, whose keyword-only parameters are the context the
    notebook passes, every one of them and no other."""
    tree = ast.parse(path.with_suffix(".py").read_text(encoding="utf-8"))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "two_looks"]
    if not calls:
        return  # a study with no planned claims to extend (06's are simulations)
    (call,) = calls
    assert not any(isinstance(node, ast.Lambda) for node in ast.walk(call)), "no lambda: the module declares it"
    module = find_study(path.stem).module
    keywords = {name for name, parameter in inspect.signature(module.verdict_table).parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {k.arg for k in call.keywords} == keywords


# --------------------------------------------------------------------------- notebook 01

# the README: papermill notebooks/01_margin_factorial.ipynb out.ipynb -p profile quick -p seeds 3 -p m0 0.3
README_TWEAK = {"seeds": 3, "m0": 0.3}


def _hashes(root, files=None) -> dict:
    files = files if files is not None else [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    return {str(f): hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files}


def test_notebook_01_readme_tweak_writes_its_variant_and_leaves_every_shipped_file_byte_identical(tmp_path):
    """The README's tweak with results_dir at a copy of results/, at the smoke profile: at quick it trains
    12 runs (minutes on two cores), and its decision, the same function's, is checked at quick in
    tests/test_variants.py. Every tracked file of the project and every file of the copy outside
    variants/ stays byte-identical; the variant holds one record per planned run and its tables."""
    results = tmp_path / "results"
    # a render in progress here (lib.execute's .rendering-* folder) is not shipped, and may vanish while copied
    shutil.copytree(PROJECT_ROOT / "results", results, ignore=shutil.ignore_patterns(".rendering-*"))
    tracked = subprocess.run(["git", "ls-files"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    def shipped(hashes):  # a user's own variants, if results/ holds any, are theirs: only the rest must not move
        return {f: h for f, h in hashes.items() if not f.startswith("variants/")}
    project_before, copy_before = _hashes(PROJECT_ROOT, tracked), shipped(_hashes(results))
    executed = _execute(NOTEBOOK_01, results, "../out.ipynb", **README_TWEAK)
    assert _hashes(PROJECT_ROOT, tracked) == project_before
    assert shipped(_hashes(results)) == copy_before
    _check_smoke_outputs(NOTEBOOK_01, margin_factorial, results / "variants" / "m0-0.3_seeds-3", 1, **README_TWEAK)
    header = executed.cells[3].outputs[0]["data"]["text/markdown"]
    assert "**Writes variant `m0-0.3_seeds-3`**" in header and "results/variants/m0-0.3_seeds-3/" in header
    # papermill rendered it elsewhere (../out.ipynb): the variants page still lists it, with the command that
    # renders it here from its records, and the shipped page stays as it was
    shipped_index = (results / "index.html").read_bytes()
    page = write_variants_index(results, results / "variants")
    assert page is not None and (results / "index.html").read_bytes() == shipped_index
    text = html.unescape(page.read_text())
    command = ("python -m lib.run_all --only 01 --profile smoke -p m0 0.3 -p seeds 3 --variant m0-0.3_seeds-3")
    assert "m0-0.3_seeds-3" in text and command in text


@pytest.mark.parametrize("name,value", [("dataset", "imagenet"), ("m0", -0.2), ("margin_modes", ["clamp", "clip"]),
                                        ("profile", "huge"), ("seeds", 0), ("stabilizers", []), ("lr", "fast"),
                                        ("device", "gpu")])
def test_bad_parameter_fails_before_training_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        margin_factorial.resolve({**_parameters_cell(NOTEBOOK_01), name: value})


def test_a_misspelt_parameter_fails_in_the_notebook_before_any_run(tmp_path):
    """A name the parameters cell does not declare fails in the notebook's set-up, naming the one it resembles.
    (A bad value fails there the same way: ``setup`` runs the checks that the tests above call directly, and
    each other notebook has one such kernel test; one per kind keeps the suite's kernels few.)"""
    with pytest.raises(papermill.PapermillExecutionError, match=r"seedz \(did you mean seeds\?\)"):
        _execute(NOTEBOOK_01, tmp_path, "bad.ipynb", seedz=3)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "variants").exists()


# --------------------------------------------------------------------------- notebook 06

def test_notebook_06_smoke_writes_records_and_tables(tmp_path):
    _execute(NOTEBOOK_06, tmp_path)
    _, table = _check_smoke_outputs(NOTEBOOK_06, stop_gradient, tmp_path, min_verdicts=2)
    assert set(table["config.experiment"]) == set(stop_gradient.EXPERIMENTS)
    for name in ("rates", "w2_spectrum", "teacher_student", "real"):
        assert (tmp_path / "tables" / f"{stop_gradient.STUDY}_smoke_{name}.csv").exists()


@pytest.mark.parametrize("name,value", [("profile", "huge"), ("r_values", [0.2, 1.0]), ("r_values", [0.03]),
                                        ("r_values", []), ("embed_dim", 2), ("num_classes", 1), ("dt", 5.0),
                                        ("gamma", "fast"), ("seeds", 0), ("steps", 1.5), ("real_dataset", "imagenet"),
                                        ("head_rate", -1.0), ("readout_noise", -0.1), ("samples_per_class", 1)])
def test_notebook_06_bad_parameter_fails_before_any_run_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        stop_gradient.resolve({**_parameters_cell(NOTEBOOK_06), name: value})


def test_notebook_06_bad_parameter_fails_in_the_notebook_before_any_run(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="r_values"):
        _execute(NOTEBOOK_06, tmp_path, "bad.ipynb", r_values=[0.5, 1.5])
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------ notebooks 02 and 03

@pytest.mark.parametrize("name,extra_tables", [("02_cross_dataset_reversal", ["per_dataset"]),
                                               ("03_difficulty_sweep", ["per_level"])])
def test_notebooks_02_03_smoke_write_records_and_tables(tmp_path, name, extra_tables):
    study = STUDIES_2_3[name]
    _execute(name, tmp_path)
    _check_smoke_outputs(name, study, tmp_path, min_verdicts=4)
    for extra in extra_tables:
        assert len(pd.read_csv(tmp_path / "tables" / f"{study.STUDY}_smoke_{extra}.csv")) >= 2


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
        _execute(name, tmp_path, "bad.ipynb", data_root=str(tmp_path), **parameters)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name,parameters", [("02_cross_dataset_reversal", {"datasets": ["shapes10", "svhn"]}),
                                             ("03_difficulty_sweep", {"dataset": "svhn", "levels": [0, 4]})])
def test_notebooks_02_03_missing_dataset_fails_before_training_with_the_data_layers_message(tmp_path, monkeypatch,
                                                                                          name, parameters):
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))  # inherited by the kernel
    with pytest.raises(papermill.PapermillExecutionError, match="DatasetNotFoundError") as err:
        _execute(name, tmp_path, "missing.ipynb", data_root=str(tmp_path), **parameters)
    assert "'svhn' was not found" in str(err.value)
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- notebook 04

def test_notebook_04_smoke_writes_records_and_tables(tmp_path):
    executed = _execute(NOTEBOOK_04, tmp_path)
    settings, table = _check_smoke_outputs(NOTEBOOK_04, embedding_norms, tmp_path, min_verdicts=5)
    assert set(table["config.method"]) == set(settings["methods"])
    for name in ("convergence", "latent_classes", "interventions", "confidence", "ood"):
        assert len(pd.read_csv(tmp_path / "tables" / f"{embedding_norms.STUDY}_smoke_{name}.csv")) >= 2, name
    assert _has_key_figure(executed)


@pytest.mark.parametrize("name,value", [("profile", "huge"), ("radii", [1.0]), ("radii", [1.0, -2.0]), ("pairs", 1),
                                        ("tolerance", 0.0), ("class_weights", [1, 0]), ("latent_seeds", 0),
                                        ("dataset", "imagenet"), ("methods", ["simclr", "byol"]),
                                        ("interventions", ["default", "dropout"]), ("imbalance_base", 0.5),
                                        ("simclr_loss", "ntxent"), ("simclr_weight_decays", [1e-6]),
                                        ("cut_simsiam", 0.0), ("grad_scale_power", "one"), ("epochs", 0),
                                        ("width_multiplier", 0.001), ("ood", ["imagenet"]),
                                        ("ood", ["digits", "digits"]), ("warmup_epochs", 1000.0), ("simsiam_lr", -0.1)])
def test_notebook_04_bad_parameter_fails_before_any_run_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        embedding_norms.resolve({**_parameters_cell(NOTEBOOK_04), name: value})


def test_notebook_04_bad_parameter_fails_in_the_notebook_before_any_run(tmp_path):
    with pytest.raises(papermill.PapermillExecutionError, match="interventions"):
        _execute(NOTEBOOK_04, tmp_path, "bad.ipynb", interventions=["default", "dropout"])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "tables").exists()


# --------------------------------------------------------------------------- notebook 05

def test_notebook_05_smoke_writes_records_and_tables(tmp_path):
    executed = _execute(NOTEBOOK_05, tmp_path)
    settings, table = _check_smoke_outputs(NOTEBOOK_05, flatnce_batch, tmp_path, min_verdicts=9)
    assert set(table["config.loss"]) == set(settings["losses"])
    assert set(table["config.batch_size"]) == set(settings["batch_sizes"])
    tables = tmp_path / "tables"
    per_cell = pd.read_csv(tables / f"{flatnce_batch.STUDY}_smoke_per_cell.csv")
    assert len(per_cell) == len(settings["batch_sizes"]) * len(settings["losses"])
    assert (per_cell.info_nce_ceiling.diff().dropna() >= 0).all()  # log(2N - 1) grows with the batch
    comparison = pd.read_csv(tables / f"{flatnce_batch.STUDY}_smoke_flatnce_vs_infonce.csv")
    assert list(comparison.batch_size) == settings["batch_sizes"]
    assert _has_key_figure(executed)


@pytest.mark.parametrize("name,value", [("profile", "huge"), ("batch_sizes", [16, 1]), ("batch_sizes", []),
                                        ("batch_sizes", [16, 16]), ("batch_sizes", "16,32"),
                                        ("losses", ["infonce", "nce"]), ("losses", []), ("lr_rules", ["cube"]),
                                        ("optimizer", "rmsprop"), ("epochs", 0), ("seeds", 0),
                                        ("width_multiplier", 0.0), ("dataset", "imagenet"), ("temperature", -0.1),
                                        ("warmup_epochs", 50.0), ("lr_rules", "linear"), ("lr_rules", []),
                                        ("device", "gpu"), ("workers", 0)])
def test_notebook_05_bad_parameter_fails_naming_it(name, value):
    with pytest.raises(ParameterError, match=name):
        flatnce_batch.resolve({**_parameters_cell(NOTEBOOK_05), name: value})


def test_notebook_05_a_batch_larger_than_the_data_fails_in_the_notebook_before_any_run(tmp_path):
    # a batch of 4096 passes every check but the one against the 128 smoke images, made after loading them
    with pytest.raises(papermill.PapermillExecutionError, match="ParameterError.*parameter batch_sizes="):
        _execute(NOTEBOOK_05, tmp_path, "bad.ipynb", batch_sizes=[16, 4096])
    assert not (tmp_path / "runs").exists()


def test_tables_indexed_by_row_number_show_no_index_column():
    """lib.notebook.frame_html, the notebooks' HTML for a DataFrame: no index column where the index is only
    0..n-1, pandas' own table (index kept) where it names something; the cells and precision as pandas'."""
    import pandas as pd

    from lib.notebook import frame_html

    frame = pd.DataFrame({"quantity": ["VR", "p"], "ours": [1.23456, 0.5]})
    with pd.option_context("display.precision", 3):
        plain, named = frame_html(frame), frame_html(frame.set_index("quantity"))
        assert named == frame.set_index("quantity").to_html(notebook=True, border=0)
    assert "<th>0</th>" not in plain and "<td>VR</td>" in plain and "<td>1.235</td>" in plain
    assert plain == frame.to_html(index=False, notebook=True, border=0, float_format="{:.3f}".format)


def test_an_anova_table_shows_no_nan():
    """Issue 50: statsmodels leaves the residual row's F and p NaN; a notebook's table (lib.notebook.frame_html, the
    formatter every DataFrame goes through) shows them as lib.notebook.MISSING, and the effects' values as pandas'."""
    import numpy as np

    from lib.core import stats
    from lib.notebook import MISSING, frame_html

    rng = np.random.default_rng(0)
    runs = pd.DataFrame({"top1_pct": rng.normal(50, 5, 12), "margin_mode": ["clamp", "subtract"] * 6,
                         "stabilizer": ["detach", "detach", "none", "none", "ema", "ema"] * 2})
    anova = stats.two_way_anova(runs, "top1_pct", "margin_mode", "stabilizer")
    assert anova.loc["Residual", ["F", "PR(>F)"]].isna().all()  # what statsmodels gives
    with pd.option_context("display.precision", 3):
        page = frame_html(anova)
    assert "nan" not in page.lower()
    residual = re.search(r"<th>Residual</th>(.*?)</tr>", page, re.S)[1]
    assert re.findall(r"<td>(.*?)</td>", residual)[2:] == [MISSING, MISSING]
    assert f"<td>{anova.loc['margin_mode', 'PR(>F)']:.3f}</td>" in page


def test_a_verdict_table_is_coloured_by_verdict_as_in_the_report():
    """lib.notebook.frame_html on a table of lib.core.verdicts: the reader's columns, no index, each row's class its
    typed record's verdict word's (lib.core.verdict_html.record_css, lib.core.verdicts.CLASSES, which the report uses
    too; never parsed from the verdict's sentence), and the cells escaped."""
    import html
    import json
    import re

    import numpy as np

    from lib.core import verdict_html, verdicts
    from lib.notebook import frame_html

    z = np.random.default_rng(5).normal(size=5)
    a = {i: float(x) * 2 for i, x in enumerate(z)}
    b = {i: float(x) for i, x in enumerate(z)}
    table = verdicts.table(verdicts.decide([
        verdicts.evaluate(verdicts.Claim("VR <clamp>", "variance_ratio", 5.9, id="s1.vr"), a, b),
        verdicts.evaluate(verdicts.Claim("CIFAR-100 VR", "variance_ratio", 0.39, id="s2.cifar100_vr")),
        verdicts.evaluate(verdicts.Claim("VR <clamp>, all seeds", "variance_ratio", 5.9, kind="exploratory",
                                         id="s1.vr_all"), a, b),
        verdicts.check("twins", "5/5 identical")]))
    assert table.verdict[0].startswith("inconclusive (power ")  # a sentence: its class comes from the record's word
    page = frame_html(table)
    rows = re.findall(r'<tr class="([a-z-]+)">(.*?)</tr>', page)
    assert [css for css, _ in rows] == ["inconclusive", "not-measured", "exploratory", "check"]
    assert [verdict_html.record_css(row) for _, row in table.iterrows()] == [css for css, _ in rows]
    assert [verdicts.CLASSES[json.loads(record)["verdict"]] for record in table.record] == [css for css, _ in rows]
    assert verdict_html.record_css(table.drop(columns="record").iloc[0]) == "other"  # no record: no verdict's class
    header = re.search(r"<thead><tr>(.*?)</tr></thead>", page)[1]
    assert re.findall(r"<th>(.*?)</th>", header) == [html.escape(verdict_html.header(c)) for c in verdicts.SHOWN]
    assert "p, Holm-adjusted" in header and "p_holm" not in header  # headers in words
    assert "VR &lt;clamp&gt;" in page and f"border-left: 6px solid {verdicts.COLOURS['inconclusive']}" in page


def test_a_verdict_table_marks_the_central_claim_and_groups_an_arms_rows_under_its_name():
    """The reader's verdict table (lib.core.verdict_html): the rows whose quantity opens with an arm's name in
    brackets come under one heading row with that name, taken out of each row; a paper text equal to the row
    above's reads "as above"; the row of the study's central claim is marked, and only that one."""
    import re

    import pandas as pd

    from lib.core import verdict_html

    frame = pd.DataFrame({"quantity": ["[rule A] gain, mean", "[rule A] gain at B = 16", "[rule B] gain, mean",
                                       "identity"],
                          "paper": ["> 0", "> 0", "> 0", ""], "verdict": ["inconclusive", "reproduced",
                                                                            "contradicted", "check"],
                          "id": ["s5.gain:A", "s5.gain_at:A/16", "s5.gain:B", "identity"]})
    frame["record"] = [json.dumps({"verdict": v}) for v in frame.verdict]
    page = verdict_html.table_html(frame, ["quantity", "paper", "verdict"], central=lambda i: i == "s5.gain:A")
    rows = re.findall(r'<tr class="([a-z -]+)">(.*?)</tr>', page)
    assert [css for css, _ in rows] == ["arm", "inconclusive central", "reproduced", "arm", "contradicted", "check"]
    assert ">rule A</td>" in rows[0][1] and ">rule B</td>" in rows[3][1]
    quantities = re.findall(r'<td class="quantity"[^>]*>(.*?)</td>', page)
    assert quantities == [f"<b>{verdict_html.CENTRAL}</b>: gain, mean", "gain at B = 16", "gain, mean", "identity"]
    papers = re.findall(r'<td class="paper"[^>]*>(.*?)</td>', page)
    assert papers == ["&gt; 0", verdict_html.SAME, "&gt; 0", ""]  # a new arm starts over
