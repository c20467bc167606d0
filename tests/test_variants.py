"""A user's experiments never touch the shipped results: the variant rule, the study registry, and the
notebooks', run_all's and dispatch's rejection of unknown parameter names (issue 15, items 3 and 5)."""
import shutil

import pytest

from lib import PROJECT_ROOT, dispatch, run_all
from lib.core.params import ParameterError
from lib.core.settings import check_variant
from lib.notebook import injected_names
from lib.run.provenance import load_train_function, train_function_name
from lib.studies import STUDIES, find_study
from lib.studies.study import StudyModule
from lib.studies.variants import derive_name, notebook_defaults, open_store, variant_of

STUDY_01 = find_study("01")
# the README: papermill notebooks/01_... -p profile quick ...
README_TWEAK = {"profile": "quick", "seeds": 3, "m0": 0.3}


def decide(study, **parameters):
    p = {**notebook_defaults(study), **parameters}
    return variant_of(study, p, study.module.resolve(p))


# ------------------------------------------------------------------------------ the registry


@pytest.mark.parametrize("number", list(STUDIES))
def test_every_study_module_provides_the_interface_and_its_notebook_exists(number):
    study = STUDIES[number]
    assert isinstance(study.module, StudyModule), f"{study.module.__name__} lacks part of lib.studies.study.StudyModule"
    assert (PROJECT_ROOT / "notebooks" / f"{study.notebook}.ipynb").exists()
    assert study.notebook.startswith(number) and study.name == study.notebook  # results are named after the notebook
    assert load_train_function(train_function_name(study.train_fn)) is study.train_fn  # what records name
    assert find_study(study.module) is find_study(study.notebook) is study


# ------------------------------------------------------------------------------ the rule


def test_the_readme_tweak_is_a_variant_named_after_its_overrides():
    variant, changes = decide(STUDY_01, **README_TWEAK)
    assert variant == "m0-0.3_seeds-3" and changes == {"m0": 0.3, "seeds": 3}


@pytest.mark.parametrize("parameters", [{}, {"seeds": 5}, {"m0": 0.4, "lr": 0.004}, {"workers": 1, "force": True},
                                        {"device": "cpu", "data_root": "/elsewhere", "results_dir": "other"}])
def test_the_profiles_own_parameters_and_operational_ones_write_the_canonical_results(parameters):
    assert decide(STUDY_01, profile="quick", **parameters) == (None, {})  # quick's seeds 5, m0 0.4, epochs 6


def test_a_variant_can_be_named_and_a_bad_name_fails_naming_the_parameter():
    assert decide(STUDY_01, profile="quick", variant="low-margin", m0=0.3)[0] == "low-margin"
    for bad in ("../shipped", "a/b", "", ".hidden", "x" * 81, 3):
        with pytest.raises(ParameterError, match="variant"):
            check_variant(bad)


def test_derived_names_are_file_name_safe_and_bounded():
    name = derive_name({"dataset_options": {"num_classes": 100, "difficulty": 0.5}, "margin_modes": ["clamp"],
                        "levels": list(range(40)), "lr": 1e-06, "epochs": 3.0})
    assert len(name) <= 80 and check_variant(name) == name
    assert derive_name({"epochs": 3.0, "dataset": "digits"}) == "dataset-digits_epochs-3"


def test_a_changed_dataset_names_the_variant_after_the_parameter_given():
    variant, changes = decide(STUDY_01, profile="quick", dataset="digits")
    assert variant == "dataset-digits" and set(changes) == {"dataset", "dataset_options"}


def test_injected_names_are_read_from_papermills_cell_only():
    history = ["", 'profile: str = "quick"  # ...\nseeds = None', '# Parameters\nprofile = "quick"\nseedz = 3\n',
               "x = 1"]
    assert injected_names(history) == ["profile", "seedz"]


def test_a_variant_reuses_the_canonical_runs_it_shares_by_copying_their_records(tmp_path):
    shutil.copytree(PROJECT_ROOT / "results" / "runs" / STUDY_01.name / "quick",
                    tmp_path / "runs" / STUDY_01.name / "quick")
    p = {**notebook_defaults(STUDY_01), **README_TWEAK}
    settings = STUDY_01.module.resolve(p)
    configs = STUDY_01.module.plan(settings)
    store, reused = open_store(STUDY_01, settings, configs, tmp_path, "m0-0.3_seeds-3")
    assert store.root == tmp_path / "variants" / "m0-0.3_seeds-3"
    dose = [c for c in configs if c.m0 == settings["dose_m0"]]  # the dose-response runs do not depend on m0 or seeds
    assert sorted(reused) == sorted(store.run_id(c) for c in dose) and len(dose) == settings["dose_seeds"]
    for run_id in reused:
        assert store.path(run_id).read_bytes() == (
            tmp_path / "runs" / STUDY_01.name / "quick" / f"{run_id}.json").read_bytes()
    assert open_store(STUDY_01, settings, configs, tmp_path, "m0-0.3_seeds-3")[1] == []  # already there


def test_simulations_are_recorded_once_read_back_and_reused_by_a_variant(tmp_path):
    """Study 4's sphere simulations through Setup.simulate: recorded in the store's simulations part (never
    among the study's runs), a second call reads the same records without writing, and a variant that shares
    a config copies its record instead of simulating it again."""
    from lib.notebook import SIMULATIONS, Setup
    from lib.ssl.simulations import simulate_sphere

    study = find_study("04")
    settings = study.module.resolve({**notebook_defaults(study), "profile": "smoke"})
    configs = study.module.sphere_configs(settings)
    store, _ = open_store(study, settings, [], tmp_path, None)
    nb = Setup(study, settings, [], store, None, results_dir=tmp_path)
    first = nb.simulate(simulate_sphere, configs)
    folder = store.runs_dir / SIMULATIONS
    files = sorted(folder.glob("*.json"))
    assert len(first) == len(files) == len(settings["radii"]) and store.records() == []
    assert {r["status"] for r in first} == {"ok"} and [r["config"]["rho"] for r in first] == settings["radii"]
    assert first[0]["extra"]["train"] == train_function_name(simulate_sphere)
    written = {p: p.read_bytes() for p in files}
    assert nb.simulate(simulate_sphere, configs) == first
    assert {p: p.read_bytes() for p in sorted(folder.glob("*.json"))} == written  # nothing simulated again
    wider = [c.replace(pairs=c.pairs + 1) for c in configs[:1]]
    variant = Setup(study, settings, [], store, "wider", results_dir=tmp_path)
    shared = variant.simulate(simulate_sphere, configs[:1] + wider)
    assert shared[0] == first[0] and shared[1]["config"]["pairs"] == configs[0].pairs + 1
    assert len(list(folder.glob("*.json"))) == len(files)  # the variant wrote under variants/, not here


# ------------------------------------------------------------------------------ run_all and dispatch


@pytest.mark.parametrize("main, argv", [(run_all.main, ["--only", "01"]), (dispatch.main, ["01", "--dry-run"])])
def test_an_unknown_parameter_fails_in_run_all_and_dispatch_naming_it(tmp_path, capsys, main, argv):
    with pytest.raises(SystemExit):
        main([*argv, "--profile", "smoke", "--results-dir", str(tmp_path), "-p", "seedz", "3"])
    assert "seedz (did you mean seeds?)" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_dispatch_and_run_all_write_the_variant_the_notebook_would(tmp_path):
    shutil.copytree(PROJECT_ROOT / "results" / "runs" / STUDY_01.name / "quick",
                    tmp_path / "runs" / STUDY_01.name / "quick")
    plan = dispatch.make_plan("01", profile="quick", parameters={"seeds": 3, "m0": 0.3}, results_dir=str(tmp_path))
    job = run_all.plan_job(STUDY_01, profile="quick", results_dir=str(tmp_path), parameters={"seeds": 3, "m0": 0.3})
    assert plan.variant == job.variant == "m0-0.3_seeds-3"
    assert plan.store.root == job.output_dir.parent == tmp_path / "variants" / "m0-0.3_seeds-3"
    # 12 factorial, 5 dose-response and 6 layer-0 trajectory runs; the 5 shipped dose-response runs are reused
    assert len(plan.configs) == 23 and len(plan.missing) == 18
