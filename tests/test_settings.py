"""The studies' settings classes (lib.core.settings): each parameter declared once, its notebook cell written from it.

What must hold: a notebook's ``parameters`` cell reads exactly as its study's class declares it (the test fails,
printing the difference, when one of them changes alone); a parameter left as None takes the profile's value,
else the run config's default (never another family's); a parameter is checked in one place, the study's check
or the run config's; and a config field declared in the class reaches every run config without another edit.
"""
import ast
import dataclasses
import difflib
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lib.cff.training import CFFConfig
from lib.core import settings
from lib.core.params import ParameterError
from lib.core.settings import StudySettings, setting
from lib.notebook import parameters_cell
from lib.ssl.training import SSLConfig
from lib.studies import STUDIES
from lib.studies import flatnce_batch as flat
from lib.studies.variants import notebook_defaults

DECLARED = [s for s in STUDIES.values() if s.settings is not None]


@pytest.mark.parametrize("study", DECLARED, ids=[s.notebook for s in DECLARED])
def test_the_notebook_cell_reads_as_the_settings_class(study):
    cell, declared = parameters_cell(study), study.settings.cell()
    diff = "\n".join(difflib.unified_diff(cell.splitlines(), declared.splitlines(), "notebook", "settings class",
                                          lineterm=""))
    assert cell == declared, (f"notebooks/{study.notebook}.py's parameters cell differs from {study.settings.__name__}"
                              f" (python -m lib.notebook --parameters {study.number} --write):\n{diff}")
    namespace: dict = {}
    exec(cell, namespace)  # the cell's literals are the declared defaults, value for value
    assert {k: namespace[k] for k in study.settings.declared} == notebook_defaults(study)


def test_study_5_is_declared_by_its_class():
    assert STUDIES["05"].settings is flat.Settings


def test_a_none_parameter_takes_the_profile_then_the_config_default():
    s = flat.resolve({"profile": "cpu"})
    assert s["epochs"] == flat.PROFILES["cpu"]["epochs"]  # the profile sets it
    # the profile does not set the temperature: SSLConfig's default, not CFF's (0.15)
    assert s["temperature"] == SSLConfig.temperature != CFFConfig.temperature
    assert flat.resolve({"profile": "cpu", "epochs": 2, "warmup_epochs": 0.5})["epochs"] == 2


def test_the_profile_options_belong_to_the_profile_dataset():
    assert flat.resolve({"profile": "smoke"})["dataset_options"] == flat.PROFILES["smoke"]["dataset_options"]
    assert flat.resolve({"profile": "smoke", "dataset": "cifar10"})["dataset_options"] == {}


def test_a_config_field_fails_in_the_config_naming_the_parameter():
    with pytest.raises(ParameterError, match="epochs"):
        flat.resolve({"profile": "smoke", "epochs": 0})
    with pytest.raises(ParameterError, match="optimizer"):
        flat.resolve({"profile": "smoke", "optimizer": "adagrad"})


def test_a_new_config_hyperparameter_reaches_every_run(monkeypatch):
    """Adding an SSLConfig field to study 5 is one line in its class (and the cell written from it)."""
    class WithCrop(flat.Settings):
        crop_min_scale: Optional[float] = setting(None, "RandomResizedCrop's smallest scale")

    monkeypatch.setattr(flat, "Settings", WithCrop)
    default = flat.plan(flat.resolve({"profile": "smoke"}))
    assert {c.crop_min_scale for c in default} == {SSLConfig.crop_min_scale}
    configs = flat.plan(flat.resolve({"profile": "smoke", "crop_min_scale": 0.3}))
    assert {c.crop_min_scale for c in configs} == {0.3}
    assert "crop_min_scale: Optional[float] = None  # RandomResizedCrop's smallest scale" in WithCrop.cell()
    with pytest.raises(ParameterError, match="crop_min_scale"):
        flat.resolve({"profile": "smoke", "crop_min_scale": 0.0})  # SSLConfig's check, once


def test_an_unchecked_parameter_must_be_a_config_field():
    with pytest.raises(TypeError, match="nothing would check it"):
        class Unchecked(StudySettings):
            config = SSLConfig
            arms: Optional[list] = setting(None, "no check, no SSLConfig field")


def test_a_profile_sets_only_declared_parameters():
    with pytest.raises(TypeError, match="does not declare"):
        class Undeclared(StudySettings):
            profiles = {"quick": {"seeds": 2, "epochs": 3}}
            config = SSLConfig
            seeds: int = setting(None, "seeds", settings.seed_count())


def test_a_setting_needs_its_type():
    with pytest.raises(TypeError, match="annotation"):
        class Untyped(StudySettings):
            seeds = setting(None, "seeds", settings.seed_count())


def test_the_shared_options_come_last_and_a_study_may_redeclare_one():
    names = list(flat.Settings.declared)
    assert names[0] == "profile"
    assert names[-7:] == [n for n in settings.ParallelRuns.declared if n != "profile"]
    assert "on a GPU" in flat.Settings.declared["device"].help  # study 5's own help, in RunOptions' place


def test_config_values_are_the_declared_config_fields():
    fields = {f.name for f in dataclasses.fields(SSLConfig)}
    assert set(flat.Settings.config_fields()) == set(flat.Settings.declared) & fields
    assert "seeds" not in flat.Settings.config_fields() and "device" in flat.Settings.config_fields()


plain = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
nested = st.recursive(plain, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                      max_leaves=8)


@given(nested)
def test_a_literal_reads_back_as_its_value(value):
    assert ast.literal_eval(settings.literal(value)) == value


def test_a_value_without_a_literal_is_refused():
    with pytest.raises(ValueError, match="literal"):
        settings.literal([1.0, float("inf")])


def test_the_writer_puts_the_class_cell_into_both_files_of_the_pair(tmp_path, monkeypatch):
    """A cell edited by hand is written back from the class in the .py and the .ipynb; nothing else changes."""
    import shutil

    import nbformat

    from lib import notebook
    from lib.studies import find_study

    study = find_study("05")
    (tmp_path / "notebooks").mkdir()
    for suffix in (".py", ".ipynb"):
        shutil.copy(notebook.PROJECT_ROOT / "notebooks" / f"{study.notebook}{suffix}", tmp_path / "notebooks")
    monkeypatch.setattr(notebook, "PROJECT_ROOT", tmp_path)
    py, ipynb = tmp_path / "notebooks" / f"{study.notebook}.py", tmp_path / "notebooks" / f"{study.notebook}.ipynb"
    original = py.read_text()
    assert notebook.write_parameters_cell(study) == []  # already as the class writes it
    py.write_text(original.replace("seeds: Optional[int] = None", "seeds: Optional[int] = 5"))
    nb = nbformat.read(ipynb, as_version=4)
    next(c for c in nb.cells if "parameters" in c.metadata.get("tags", [])).source = "profile = 'cpu'"
    nbformat.write(nb, ipynb)
    assert notebook.write_parameters_cell(study) == [py, ipynb]
    assert py.read_text() == original
    nb = nbformat.read(ipynb, as_version=4)
    assert next(c for c in nb.cells if "parameters" in c.metadata.get("tags", [])).source == study.settings.cell()
    # a notebook without a parameters cell (a new study's first draft) gets one after its title cell, whose first
    # line says where the parameters are declared
    py.write_text(notebook.PARAMETERS_CELL.sub("", original))
    nb.cells = [c for c in nb.cells if "parameters" not in c.metadata.get("tags", [])]
    nbformat.write(nb, ipynb)
    assert notebook.write_parameters_cell(study) == [py, ipynb]
    assert py.read_text() == original
    nb = nbformat.read(ipynb, as_version=4)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert tagged == [1] and nb.cells[1].source == study.settings.cell()
    assert nb.cells[1].source.startswith("# From lib/studies/flatnce_batch.py (Settings): edit there")


@pytest.mark.parametrize("text, value", [("[16, 32]", [16, 32]), (" [16,32] ", [16, 32])])
def test_a_list_parameter_given_as_papermills_text_is_its_list(text, value):
    """papermill's -p hands a list over as its text; the settings parse it where the declared type is a list."""
    s = flat.Settings.resolve({"profile": "smoke", "batch_sizes": text})
    assert s["batch_sizes"] == value == ast.literal_eval(text.strip())
    with pytest.raises(ParameterError, match=r"batch_sizes=\[0, 16\] is not allowed: a non-empty list of distinct"):
        flat.Settings.resolve({"profile": "smoke", "batch_sizes": "[0, 16]"})
    with pytest.raises(ParameterError, match="batch_sizes='16, 32' is not allowed"):  # not a literal list: refused
        flat.Settings.resolve({"profile": "smoke", "batch_sizes": "16, 32"})


def test_a_dict_parameter_given_as_text_is_its_dict():
    module = STUDIES["01"].module
    s = module.Settings.resolve({"profile": "smoke", "dataset_options": '{"num_classes": 10}'})
    assert s["dataset_options"] == {"num_classes": 10}


def test_a_mistyped_choice_names_its_close_match():
    with pytest.raises(ParameterError, match=r"profile='quikc' is not allowed: one of .*\(did you mean quick\?\)"):
        flat.Settings.resolve({"profile": "quikc"})
    close = difflib.get_close_matches("quikc", list(flat.Settings.profiles), n=2)
    assert close == ["quick"]
    with pytest.raises(ParameterError, match=r"did you mean linear\?"):
        flat.Settings.resolve({"profile": "smoke", "lr_rules": ["linaer"]})


def test_no_help_copies_a_run_configs_default_by_hand():
    """Issue 40: a help text that names a run config's default reads it from the declaration ({default}), so the
    parameters cell says the default the runs use, whatever it becomes."""
    import dataclasses
    import re

    from lib.core.settings import help_value
    from lib.studies import STUDIES

    for study in STUDIES.values():
        settings_class = study.module.Settings
        config = getattr(settings_class, "config", None)
        for name, declared in settings_class.declared.items():
            named = re.search(r"\((?:[A-Za-z]*Config|config): ([^,)\s]+)", declared.help)
            if named is None:
                continue
            assert config is not None and name in {f.name for f in dataclasses.fields(config)}, (study.name, name)
            assert named[1] == help_value(config.__dataclass_fields__[name].default), (study.name, name)


def test_no_help_copies_what_a_none_becomes_by_hand():
    """Issue 40: a help text that says what a None parameter becomes ("(None: 0.3)") says the value the settings
    resolve to at every profile: it is read from the constant the fill reads (study 4's per-method learning rates,
    cut divisors and GradScale power), so the cell cannot drift from the runs."""
    import re

    from lib.core.settings import help_value
    from lib.studies import STUDIES

    said = 0
    for study in STUDIES.values():
        settings_class = study.module.Settings
        for profile in settings_class.profiles:
            resolved = settings_class.resolve({"profile": profile})
            for name, declared in settings_class.declared.items():
                named = re.search(r"\(None: ([^\s)]+)\)", declared.help)
                if named is not None:
                    assert help_value(resolved[name]) == named[1], (study.name, profile, name, declared.help)
                    said += 1
    assert said >= 5 * 4  # study 4's two learning rates, two divisors and GradScale power, at its four profiles


def test_no_help_copies_the_paper_profiles_value_by_hand():
    """Issue 40: a help text that says the paper's value ("(paper: 512)") reads it from the study's ``paper``
    profile ({paper}), so it says what that profile runs; a study whose paper profile changes says the new value,
    and a {paper} the profile does not set is refused when the class is declared."""
    import re
    from typing import Optional

    from lib.core.settings import help_value, setting
    from lib.studies import STUDIES
    from lib.studies.common import CFFSettings

    said = 0
    for study in STUDIES.values():
        settings_class = study.module.Settings
        paper = settings_class.profiles["paper"]
        for name, declared in settings_class.declared.items():
            assert "{paper}" not in declared.help, (study.name, name)
            named = re.search(r"\(paper: ([^;)]+?)(?:,? (?:with|512 features)[^)]*)?\)|the paper: (.+)$", declared.help)
            if named is None:
                continue
            assert name in paper, (study.name, name)
            assert (named[1] or named[2]) == help_value(paper[name]), (study.name, name, declared.help)
            said += 1
        for name, declared in settings_class.declared.items():  # the original code's values, run by the paper profile
            named = re.search(r"(?:authors:|FLAT's code:|\[code:|CFF default) ([0-9][0-9.e-]*)", declared.help)
            if named is not None:
                assert named[1] == help_value(paper[name]), (study.name, name, declared.help)
                said += 1
    assert said >= 30  # the CFF encoder's sizes and epochs in three studies, study 4's eleven, study 5's four, ...

    class Scratch(CFFSettings):  # a family's help filled from another paper profile
        profiles = {"paper": {"layers": 12, "embed_dim": 256, "heads": 8, "patch": 2, "batch_size": 1024, "epochs": 300,
                              "probe_epochs": 40}}
    assert Scratch.declared["layers"].help == "encoder layers (paper: 12)"
    assert Scratch.declared["batch_size"].help.endswith("(paper: 1024)")
    assert Scratch.declared["probe_epochs"].help == "linear-probe epochs [code: 40]"

    with pytest.raises(TypeError, match=r"seeds: its help names \{paper\}, but the paper profile does not set it"):
        class Unset(CFFSettings):
            profiles = {"paper": {}}
            seeds: Optional[int] = setting(None, "seeds (paper: {paper})")


def test_m0_temperature_and_batch_sizes_are_each_checked_in_one_place():
    """Issue 40: a value has one range, checked where it is declared. m0, m_last and temperature are run config
    fields: no settings-level check, the config's (lib.cff.training.MARGIN_RANGE for margins) rejects a bad one by
    name when resolve builds the plan; study 5's batch sizes take SSLConfig's smallest batch."""
    from lib.cff.training import MARGIN_RANGE
    from lib.core.params import ParameterError
    from lib.ssl.training import MIN_BATCH
    from lib.studies import STUDIES

    for number in ("01", "02", "03"):
        declared = STUDIES[number].module.Settings.declared
        assert all(declared[name].check is None for name in ("m0", "m_last", "temperature")), number
        defaults = STUDIES[number].settings.defaults()
        STUDIES[number].module.resolve({**defaults, "profile": "smoke", "m0": MARGIN_RANGE[1]})
        with pytest.raises(ParameterError, match=r"parameter m0=1\.5 is not allowed"):
            STUDIES[number].module.resolve({**defaults, "profile": "smoke", "m0": 1.5})
    flat = STUDIES["05"]
    assert flat.module.Settings.declared["temperature"].check is None
    with pytest.raises(ParameterError, match=rf"batch_sizes=\[{MIN_BATCH - 1}, 16\].*>= {MIN_BATCH}"):
        flat.module.resolve({**flat.settings.defaults(), "profile": "smoke", "batch_sizes": [MIN_BATCH - 1, 16]})
