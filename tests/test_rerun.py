"""Every shipped record stays re-runnable: ``python -m lib.rerun --check <record>`` builds its config and
loads its data (a sample of each study and profile: the first and the last record by run id)."""
import json

import pytest

from lib import PROJECT_ROOT, rerun
from lib.core.data import DATASETS
from lib.run import provenance
from tests.conftest import SHARED_DATA, missing_data

EMBEDDED = ("shapes", "digits")  # generated, or shipped with scikit-learn: no data folder needed
# each study's and profile's runs, and the simulations recorded beside them (lib.notebook.Setup.simulate)
STORES = sorted(p for p in (PROJECT_ROOT / "results" / "runs").glob("*/*") if p.is_dir())
STORES += sorted((PROJECT_ROOT / "results" / "runs").glob("*/*/simulations"))


def _first_and_last(store):
    files = sorted(store.glob("*.json"))
    return files[:1] + files[-1:]


SAMPLE = [path for store in STORES for path in _first_and_last(store)]


def test_the_sample_covers_every_shipped_study_and_profile():
    stores = {p.parent for p in SAMPLE}
    assert len(stores) == len(STORES) >= 11


@pytest.mark.parametrize("record", SAMPLE, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}/{p.stem[:6]}")
def test_every_shipped_record_builds_and_finds_its_data(record, capsys):
    config = json.loads(record.read_text())["config"]
    names = {config.get("dataset"), *(o["dataset"] for o in config.get("ood") or [])} & set(DATASETS)
    if not names <= set(EMBEDDED) and not SHARED_DATA.is_dir():
        pytest.skip(missing_data(f"its data ({', '.join(sorted(names - set(EMBEDDED)))})"))
    assert rerun.main(["--check", str(record), "--data-root", str(SHARED_DATA)]) == 0
    out = capsys.readouterr().out
    named = json.loads(record.read_text())["extra"]["train"]  # as it was written: an old name resolves through RENAMED
    assert out.startswith(f"ok: {provenance.train_function_name(provenance.load_train_function(named))}(")
    assert all(name in out for name in names)  # (study 6's simulations name generated data, not a dataset)


@pytest.mark.parametrize("old, today", [("lib.cff.train_cff", "lib.cff.training.train_cff"),
                                        ("lib.collapse_train.train_collapse", "lib.collapse.training.train_collapse"),
                                        ("lib.ssl.train_simclr", "lib.ssl.training.train_ssl"),
                                        ("lib.ssl.training.train_ssl", "lib.ssl.training.train_ssl")])
def test_a_moved_or_renamed_training_function_is_found_by_its_recorded_name(old, today):
    assert provenance.train_function_name(provenance.load_train_function(old)) == today


def test_a_record_shows_its_machine_beside_this_one_and_the_agreement_to_expect():
    """Planted environments: the same numerics and commit -> bit for bit; another commit -> bit for bit
    there; another CPU capability -> not bit for bit, the row marked; a record without the hardware keys
    -> not known, naming them."""
    from lib.run.provenance import NUMERICS_KEYS

    here = {key: f"{key}-here" for key in NUMERICS_KEYS} | {"git_commit": "a" * 40, "git_dirty": False}
    assert rerun.expected_agreement(dict(here), here).endswith("expect: bit for bit (the same numerics and the "
                                                                "record's commit).")
    moved = rerun.expected_agreement(dict(here, git_commit="b" * 40), here)
    assert f"bit for bit at the record's commit {'b' * 40}" in moved.splitlines()[-1]
    other = rerun.expected_agreement(dict(here, cpu_capability="AVX512"), here).splitlines()
    assert [line for line in other if "<- differs" in line] == [
        next(line for line in other if line.startswith("cpu_capability"))]
    assert other[-1].startswith("expect: not bit for bit (1 numerics differ)")
    old = {key: value for key, value in here.items() if key not in ("cpu_model", "cpu_capability")}
    assert rerun.expected_agreement(old, here).splitlines()[-1].startswith(
        "expect: not known; the record predates cpu_model, cpu_capability.")
