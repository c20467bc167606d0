"""Tests of lib.run.results: hashing, record round trip, atomic writes, corruption, table."""
from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.core import config as config_module
from lib.core.config import Config
from lib.core.params import ParameterError
from lib.run import provenance as P
from lib.run import results as R
from lib.run.results import (
    FINISHED_STATUSES,
    ResultsStore,
    ResultsStoreError,
    ResultsStoreWarning,
    atomic_write_text,
    canonical_json,
    config_hash,
)

FAKE_ENV = {"git_commit": "abc", "git_dirty": False, "python": "3", "torch": "t", "torchvision": None,
            "numpy": "n", "platform": "p", "hostname": "h", "device": "cpu", "torch_threads": 1}

CFG = {"loss": "supcon", "lr": 0.1, "seed": 0, "dataset": "cifar10", "betas": (0.9, 0.99)}


@pytest.fixture
def store(tmp_path):
    # environment() spawns git; its own test is separate, keep the others fast.
    with mock.patch.object(R, "environment", lambda exclude=(): dict(FAKE_ENV)):
        yield ResultsStore(tmp_path / "res", "study1", "fast")


def _write(store, config=CFG, status="ok", metrics=None, **kw):
    return store.write(config, seed=config.get("seed", 0), dataset=config.get("dataset", "d"),
                       status=status, metrics=metrics if metrics is not None else {"acc": 0.5},
                       timings={"started_at": "2025-01-01T00:00:00.000+00:00", "wall_s": 1.5}, **kw)


def _tmp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------- hashing

def test_config_hash_independent_of_key_order():
    a = {"a": 1, "b": {"x": 1.5, "y": [1, 2]}, "c": "s"}
    b = {"c": "s", "b": {"y": [1, 2], "x": 1.5}, "a": 1}
    assert list(a) != list(b)
    assert config_hash(a) == config_hash(b)
    assert canonical_json(a) == canonical_json(b) == '{"a":1,"b":{"x":1.5,"y":[1,2]},"c":"s"}'
    assert len(config_hash(a)) == 16 and int(config_hash(a), 16) >= 0


@pytest.mark.parametrize("key,new", [("a", 2), ("b", 1.5000000000000002), ("c", "t"),
                                     ("d", [1, 3]), ("e", None), ("f", False)])
def test_config_hash_changes_with_any_value(key, new):
    base = {"a": 1, "b": 1.5, "c": "s", "d": [1, 2], "e": {"n": 1}, "f": True}
    changed = dict(base, **{key: new})
    assert config_hash(changed) != config_hash(base)
    assert config_hash(dict(base, extra=0)) != config_hash(base)  # an added key changes it


def test_config_hash_normalises_numbers_but_not_flags_and_tuples_are_lists():
    # 10 and 10.0 are one config (issue 15); a flag is not a number; a non-integral float stays itself
    assert config_hash({"epochs": 10}) == config_hash({"epochs": 10.0})
    assert config_hash({"x": {"n": [0.0, 2]}}) == config_hash({"x": {"n": [-0.0, 2.0]}})
    assert config_hash({"lr": 1}) != config_hash({"lr": 1.5})
    assert config_hash({"flag": True}) != config_hash({"flag": 1})
    # but the hash is stable for each: same type, same hash, also through numpy scalars
    assert config_hash({"lr": 1.0}) == config_hash({"lr": np.float64(1.0)})
    assert config_hash({"n": 3}) == config_hash({"n": np.int64(3)})
    assert config_hash({"b": (1, 2)}) == config_hash({"b": [1, 2]})
    assert canonical_json({"x": 0.1}) == '{"x":0.1}'  # repr-exact float


def test_config_rejects_nonfinite_and_non_str_keys():
    with pytest.raises(ValueError, match="non-finite"):
        config_hash({"clip": float("inf")})
    with pytest.raises(TypeError, match="must be a str"):
        config_hash({1: "a"})


# --------------------------------------------------------------------------- round trip

def test_record_round_trips_with_nonfinite_and_curves(store):
    metrics = {"acc": 0.9123456789012345, "loss_final": float("nan"), "grad_max": float("inf"),
               "grad_min": float("-inf"), "n": 7, "name": "x",
               "curves": {"train_loss": [1.0, float("nan"), 0.5], "per_layer": {"l0": [0.1, 0.2]}},
               "epoch_acc": [0.1, 0.2, float("inf")]}
    rec = _write(store, metrics=metrics, error=None, extra={"note": "hi", "v": float("nan")})
    path = store.runs_dir / f"{rec['run_id']}.json"
    text = path.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON token {c}"))
    loaded = store.load(rec["run_id"])
    assert set(loaded) == R._RECORD_KEYS
    assert loaded["schema_version"] == R.SCHEMA_VERSION
    assert loaded["run_id"] == loaded["config_hash"] == config_hash(CFG) == store.run_id(CFG)
    assert loaded["config"] == {**CFG, "betas": [0.9, 0.99]}
    assert (loaded["study"], loaded["profile"], loaded["seed"], loaded["dataset"]) == \
        ("study1", "fast", 0, "cifar10")
    m = loaded["metrics"]
    assert m["acc"] == metrics["acc"] and m["n"] == 7 and m["name"] == "x"
    assert isinstance(m["loss_final"], float) and math.isnan(m["loss_final"])
    assert m["grad_max"] == math.inf and m["grad_min"] == -math.inf
    assert m["curves"]["train_loss"][0] == 1.0 and math.isnan(m["curves"]["train_loss"][1])
    assert m["curves"]["per_layer"] == {"l0": [0.1, 0.2]}
    assert m["epoch_acc"] == [0.1, 0.2, math.inf]
    assert loaded["extra"]["note"] == "hi" and math.isnan(loaded["extra"]["v"])
    assert loaded["environment"] == FAKE_ENV
    assert loaded["timings"]["wall_s"] == 1.5
    # write() returns what load() gives back (modulo nan identity)
    assert canonical_json({k: v for k, v in rec.items() if k not in ("metrics", "extra")}) == \
        canonical_json({k: v for k, v in loaded.items() if k not in ("metrics", "extra")})


@pytest.mark.parametrize("status,finished", [("ok", True), ("diverged", True), ("failed", False)])
def test_is_finished_by_status(store, status, finished):
    assert not store.is_finished(CFG)  # absent
    _write(store, status=status, error="Traceback..." if status == "failed" else None)
    assert store.is_finished(CFG) is finished
    assert (status in FINISHED_STATUSES) is finished
    assert not store.is_finished(dict(CFG, lr=0.2))  # another config is still absent


def test_write_rejects_bad_status_and_contradicting_seed(store):
    with pytest.raises(ValueError, match="status"):
        _write(store, status="done")
    with pytest.raises(ValueError, match="seed"):
        store.write(CFG, seed=1, dataset="cifar10", status="ok", metrics={}, timings={})
    assert store.records() == []


# --------------------------------------------------------------------------- atomicity

def test_crash_during_replace_keeps_old_file_and_no_temp(store, monkeypatch):
    rec = _write(store, metrics={"acc": 0.5})
    path = store.path(rec["run_id"])
    before = path.read_bytes()

    def boom(*a, **k):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(R.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        _write(store, metrics={"acc": 0.99})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _tmp_files(store.root) == []
    assert store.load(rec["run_id"])["metrics"]["acc"] == 0.5


def test_crash_during_serialisation_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "a" / "f.txt"
    atomic_write_text(path, "old\n")

    real_fdopen = os.fdopen

    def fdopen(fd, *a, **k):  # the file object fails half way through the write
        f = real_fdopen(fd, *a, **k)
        real_write = f.write

        class Wrapper:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                f.close()

            def write(self, text):
                real_write(text[:3])
                f.flush()
                raise RuntimeError("serialisation failed")

            def __getattr__(self, name):
                return getattr(f, name)

        return Wrapper()

    monkeypatch.setattr(R.os, "fdopen", fdopen)
    with pytest.raises(RuntimeError, match="serialisation failed"):
        atomic_write_text(path, "new content\n")
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert _tmp_files(tmp_path) == []


def test_disk_full_raises_store_error_naming_path(store, monkeypatch):
    rec = _write(store)
    path = store.path(rec["run_id"])
    before = path.read_bytes()

    def fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(R.os, "fsync", fsync)
    with pytest.raises(ResultsStoreError) as ei:
        _write(store, metrics={"acc": 0.7})
    monkeypatch.undo()
    assert str(path) in str(ei.value) and "No space left" in str(ei.value)
    assert ei.value.path == path and ei.value.cause.errno == errno.ENOSPC
    assert path.read_bytes() == before and _tmp_files(store.root) == []


def _writes_blocked(folder: Path) -> bool:
    try:
        (folder / ".probe").write_text("x")
    except PermissionError:
        return True
    (folder / ".probe").unlink()
    return False


def test_read_only_folder_raises_store_error_and_keeps_records(store, monkeypatch):
    rec = _write(store)
    path = store.path(rec["run_id"])
    before = path.read_bytes()
    folder = store.runs_dir
    os.chmod(folder, 0o555)
    try:
        if not _writes_blocked(folder):  # running as root: chmod does not stop writes; simulate
            real_open = os.open

            def ro_open(p, flags, *a, **k):
                if Path(p).parent == folder and flags & os.O_CREAT:
                    raise PermissionError(errno.EACCES, "Permission denied", str(p))
                return real_open(p, flags, *a, **k)

            monkeypatch.setattr(R.os, "open", ro_open)
        with pytest.raises(ResultsStoreError) as ei:
            _write(store, metrics={"acc": 0.8})
        assert str(path) in str(ei.value)
        assert isinstance(ei.value.cause, PermissionError)
        with pytest.raises(ResultsStoreError, match="Permission denied"):
            _write(store, config=dict(CFG, lr=0.3))  # a new record cannot be created either
    finally:
        monkeypatch.undo()
        os.chmod(folder, 0o755)
    assert path.read_bytes() == before
    assert [r["run_id"] for r in store.records()] == [rec["run_id"]]
    assert _tmp_files(store.root) == []


# --------------------------------------------------------------------------- corruption

@pytest.mark.parametrize("content", [b'{"schema_version": 1, "run_id": "ab', b"", b"\xff\xfe",
                                     b"[1, 2]", b'{"schema_version": 1}'])
def test_corrupt_record_warned_and_skipped(store, content):
    good = _write(store)
    bad_id = "0123456789abcdef"
    bad = store.runs_dir / f"{bad_id}.json"
    bad.write_bytes(content)
    with pytest.warns(ResultsStoreWarning, match=str(bad).replace("\\", "\\\\")):
        assert store.load(bad_id) is None
    with pytest.warns(ResultsStoreWarning, match=str(bad).replace("\\", "\\\\")):
        recs = store.records()
    assert [r["run_id"] for r in recs] == [good["run_id"]]
    with pytest.warns(ResultsStoreWarning):
        t = store.table()
    assert list(t["run_id"]) == [good["run_id"]]


def test_truncated_real_record_is_corrupt_and_not_finished(store):
    rec = _write(store)
    path = store.path(rec["run_id"])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(ResultsStoreWarning, match="corrupt"):
        assert not store.is_finished(CFG)
    with pytest.warns(ResultsStoreWarning):
        assert store.records() == []


def test_record_under_wrong_name_is_corrupt(store):
    rec = _write(store)
    other = store.runs_dir / "ffffffffffffffff.json"
    other.write_bytes(store.path(rec["run_id"]).read_bytes())
    with pytest.warns(ResultsStoreWarning, match="differs from the file name"):
        assert len(store.records()) == 1


@pytest.mark.parametrize("version", [0, 1, 3, "2", None])
def test_record_of_another_schema_version_is_not_read_nor_finished(store, version):
    """A record written under another schema may mean other things by the same keys: never read as ours."""
    rec = _write(store)
    path = store.path(rec["run_id"])
    text = json.loads(path.read_text())
    text["schema_version"] = version
    path.write_text(json.dumps(text))
    with pytest.warns(ResultsStoreWarning, match=f"schema_version {version!r} != {R.SCHEMA_VERSION}"):
        assert store.load(rec["run_id"]) is None
    with pytest.warns(ResultsStoreWarning, match="schema_version"):
        assert not store.is_finished(CFG)
    with pytest.warns(ResultsStoreWarning, match="schema_version"):
        assert store.records() == []


def test_a_record_holding_another_config_under_this_hash_is_not_finished(store):
    """The hash-collision guard: a record found under a config's run id whose stored config differs
    (a collision of the 16-hex-digit hash, or a hand-edited file) does not count as that run done."""
    rec = _write(store)
    path = store.path(rec["run_id"])
    text = json.loads(path.read_text())
    text["config"] = dict(CFG, lr=0.2)  # same run_id and file name, another config
    path.write_text(json.dumps(text))
    assert store.load(rec["run_id"])["config"]["lr"] == 0.2  # a valid record otherwise
    with pytest.warns(ResultsStoreWarning, match="holds another config with the same hash"):
        assert not store.is_finished(CFG)


# --------------------------------------------------------------------------- table

def _fill(store):
    cfgs = [dict(seed=s, dataset="cifar10", loss=loss, lr=lr)
            for s in (0, 1) for loss, lr in (("supcon", 0.1), ("margin", 0.05))]
    cfgs[1]["extra_key"] = [1, 2]
    for i, c in enumerate(cfgs):
        _write(store, config=c, status="ok" if i != 2 else "diverged",
               metrics={"acc": 0.1 * i, "zloss": float("nan") if i == 3 else 1.0,
                        "curve": [1.0, 2.0], "per": {"a": [1]}})
    return cfgs


def test_table_columns_order_rows_and_csv_stability(store):
    _fill(store)
    t = store.table()
    assert list(t.columns) == [
        "study", "profile", "run_id", "seed", "dataset", "status",
        "config.dataset", "config.extra_key", "config.loss", "config.lr", "config.seed",
        "metric.acc", "metric.zloss",
        "git_commit", "git_dirty", "torch", "device", "started_at", "wall_s"]
    assert list(t["run_id"]) == sorted(t["run_id"]) and len(t) == 4
    assert set(t["status"]) == {"ok", "diverged"}
    assert t["config.extra_key"].dropna().tolist() == ["[1,2]"]
    p1 = store.write_table()
    assert p1 == store.root / "tables" / "study1_fast.csv"
    first = p1.read_bytes()
    p2 = store.write_table()
    assert p2 == p1 and p2.read_bytes() == first
    back = pd.read_csv(p1)
    assert list(back.columns) == list(t.columns)
    assert list(back["run_id"]) == sorted(back["run_id"])
    assert b"\r\n" not in first
    assert _tmp_files(store.root) == []


def test_table_of_empty_store_has_fixed_columns(store):
    t = store.table()
    assert len(t) == 0
    assert list(t.columns) == [*R.TABLE_LEAD_COLUMNS, *R.TABLE_TAIL_COLUMNS]


# --------------------------------------------------------------------------- environment

def test_environment_fields():
    env = P.environment()
    assert set(env) == {"git_commit", "git_dirty", "python", "torch", "torchvision", "numpy",
                        "platform", "hostname", "device", "torch_threads",
                        "cpu_model", "cpu_flags", "cpu_capability", "cpu_count", "blas", "onednn", "kernel_env", "cuda"}
    assert isinstance(env["git_dirty"], bool)
    assert env["git_commit"] == "unknown" or len(env["git_commit"]) == 40
    import torch  # the device is the CUDA device's name when there is one, else "cpu"
    assert env["device"] == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")


def test_environment_names_the_hardware_and_the_kernels_torch_runs():
    import os

    import torch
    env = P.environment()
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["cpu_count"] == os.cpu_count() and isinstance(env["cpu_model"], str) and env["cpu_model"]
    assert env["cuda"] == (torch.version.cuda if torch.cuda.is_available() else None)
    config = torch.__config__.show()
    assert (env["onednn"] is None) == ("MKL-DNN v" not in config and "oneDNN v" not in config)
    if env["onednn"] is not None:
        assert f"v{env['onednn']}" in config
    assert env["kernel_env"] == {k: os.environ[k] for k in P.KERNEL_ENV_VARS if k in os.environ}


def test_a_kernel_variable_or_a_lower_capability_shows_in_a_fresh_process():
    """ATEN_CPU_CAPABILITY lowers torch's kernels and a BLAS variable is recorded: both are in the
    environment of a process started under them (both are read when the process starts)."""
    import subprocess
    import sys
    code = "import json; from lib.run.provenance import hardware; print(json.dumps(hardware()))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env=dict(__import__("os").environ, ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE"))
    there = json.loads(run.stdout)
    assert there["cpu_capability"] == "DEFAULT" and there["kernel_env"].get("MKL_CBWR") == "COMPATIBLE"
    here = P.hardware()  # this process: its own capability, and MKL_CBWR as it found it
    assert ("MKL_CBWR" in here["kernel_env"]) or any(line.startswith("kernel_env:")
                                                       for line in P.numerics_differences(there, here))


def test_numerics_differences_name_each_differing_key_and_nothing_else():
    here = {"cpu_capability": "AVX2", "torch": "2.14.1", "numpy": "2.4.6", "torch_threads": 2}
    assert P.numerics_differences(dict(here), here, keys=here) == []
    there = dict(here, cpu_capability="AVX512", torch_threads=1)
    assert P.numerics_differences(there, here, keys=here) == ["cpu_capability: AVX512 (recorded) vs AVX2 (here)",
                                                            "torch_threads: 1 (recorded) vs 2 (here)"]
    assert P.numerics_differences({"torch": "2.14.1"}, here, keys=["numpy"]) == [
        "numpy: not recorded (recorded) vs 2.4.6 (here)"]


def test_environment_without_git(monkeypatch):
    monkeypatch.setattr(P, "_git", lambda args, cwd: None)
    env = P.environment()
    assert env["git_commit"] == "unknown" and env["git_dirty"] is False


def test_git_dirty_speaks_of_the_code_not_of_results_in_any_store(tmp_path, monkeypatch):
    """In a real git repository holding lib/: untracked records anywhere under results/ (another store's,
    canonical ones not yet committed) leave a variant's record clean; an untracked or changed code file
    marks it dirty. (A variant's store once excluded only its own root, so the cpu queue's copies of
    landed records made every record of a variant say dirty.)"""
    import shutil
    import subprocess
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    (repo / "lib" / "code.py").write_text("x = 1\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "code"], check=True)
    monkeypatch.setattr(P, "_LIB_DIR", repo / "lib")
    results = repo / "results"
    assert R.results_folder(R.variant_root(results, "seeds-3")) == results
    assert R.results_folder(results) == results

    canonical = R.ResultsStore(results, "study", "cpu")
    canonical.write({"a": 1}, seed=0, dataset="d", status="ok", metrics={}, timings={})  # untracked
    variant = R.ResultsStore(R.variant_root(results, "seeds-3"), "study", "cpu")

    def dirty(config):
        record = variant.write(config, seed=0, dataset="d", status="ok", metrics={}, timings={})
        return record["environment"]["git_dirty"]

    assert dirty({"a": 2}) is False
    (repo / "lib" / "new.py").write_text("y = 2\n")
    assert dirty({"a": 3}) is True
    (repo / "lib" / "new.py").unlink()
    (repo / "lib" / "code.py").write_text("x = 2\n")
    assert dirty({"a": 4}) is True


# --------------------------------------------------------------------------- property

json_scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=3) | st.tuples(kids, kids)
    | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=10)
configs = st.dictionaries(st.text(max_size=6), json_values, max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs)
def test_any_json_config_round_trips(store, config):
    config = {k: v for k, v in config.items() if k not in ("seed", "dataset")}
    rec = store.write(config, seed=3, dataset="d", status="ok", metrics={}, timings={})
    loaded = store.load(rec["run_id"])
    assert loaded is not None
    assert canonical_json(loaded["config"]) == canonical_json(config)
    assert config_hash(loaded["config"]) == config_hash(config) == loaded["run_id"]
    assert store.is_finished(config)


# ------------------------------------------------------------------------- typed configs, migration

@dataclasses.dataclass(frozen=True)
class _Toy(Config):
    seed: int = 0
    dataset: str = "shapes"
    epochs: int = 3
    lr: float = 0.5

    @classmethod
    def from_legacy(cls, values: dict) -> "_Toy":  # schema 1 called lr "rate"
        values = dict(values)
        if "rate" in values:
            values["lr"] = values.pop("rate")
        return cls.from_dict(values)


def _train_toy(config: _Toy, *, data_root=None, progress=None) -> dict:
    return {"status": "ok", "product": config.epochs * config.lr}


def test_a_typed_config_and_its_dict_form_are_one_run(store):
    typed = _Toy(seed=2, lr=2.0)
    assert store.run_id(typed) == store.run_id({"seed": 2, "dataset": "shapes", "epochs": 3, "lr": 2})
    store.write(typed, seed=2, dataset="shapes", status="ok", metrics={}, timings={})
    assert store.is_finished(typed) and store.is_finished(typed.as_dict())
    assert config_module.build(_train_toy, store.records()[0]["config"]) == typed


def test_from_dict_names_an_unknown_field_and_its_close_match():
    with pytest.raises(ParameterError, match=r"epochz \(did you mean epochs\?\)"):
        _Toy.from_dict({"epochz": 3})


def test_migration_renames_fields_moves_the_run_id_and_is_idempotent(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path, "toy", "quick")
    rec = store.write({"seed": 1, "dataset": "shapes", "epochs": 3.0, "rate": 0.5}, seed=1, dataset="shapes",
                      status="ok", metrics={"acc": 0.25}, timings={"wall_s": 1.0})
    old_path = store.path(rec["run_id"])
    legacy = json.loads(old_path.read_text())
    legacy["schema_version"] = 1  # as written before typed configs
    old_path.write_text(json.dumps(legacy))
    with pytest.warns(ResultsStoreWarning, match="lib.migrate"):
        assert store.records() == []

    def upgrade(record):
        return config_module.build(_train_toy, record["config"], legacy=True), {"train": "toy"}

    assert store.migrate(upgrade) == [(rec["run_id"], store.run_id(_Toy(seed=1)))]
    [migrated] = store.records()
    assert not old_path.exists() and migrated["run_id"] == store.run_id(_Toy(seed=1))
    assert migrated["config"] == {"seed": 1, "dataset": "shapes", "epochs": 3, "lr": 0.5}
    assert migrated["extra"] == {"train": "toy", "legacy_run_id": rec["run_id"]}
    assert {k: migrated[k] for k in ("metrics", "timings", "environment", "written_at")} == \
        {k: rec[k] for k in ("metrics", "timings", "environment", "written_at")}
    assert store.is_finished(_Toy(seed=1))
    assert store.migrate(upgrade) == []  # a second migration changes nothing


def test_a_variant_store_lives_apart_and_copies_only_finished_runs_it_lacks(store):
    """``variant_root`` never resolves to the canonical folder; ``copy_finished`` copies records byte for byte."""
    assert R.variant_root(store.root, None) == store.root
    assert R.variant_root(store.root, "m0-0.3") == store.root / "variants" / "m0-0.3"
    for bad in ("..", "../results", "a/b", ""):
        with pytest.raises(ValueError, match="variant"):
            R.variant_root(store.root, bad)
    ok, failed, absent = ({"seed": s, "lr": 0.1} for s in range(3))
    store.write(ok, seed=0, dataset="d", status="ok", metrics={}, timings={})
    store.write(failed, seed=1, dataset="d", status="failed", metrics={}, timings={})
    variant = ResultsStore(R.variant_root(store.root, "v"), store.study, store.profile)
    assert variant.copy_finished(store, [ok, failed, absent, ok]) == [store.run_id(ok)]
    assert variant.path(store.run_id(ok)).read_bytes() == store.path(store.run_id(ok)).read_bytes()
    assert variant.copy_finished(store, [ok]) == []


def test_the_numerics_key_names_the_cpu_flags_that_mkl_and_onednn_dispatch_by(tmp_path, monkeypatch):
    """The model string alone cannot say "same numerics": an AVX-512 machine held to ATEN_CPU_CAPABILITY=avx2 keeps
    MKL's and oneDNN's AVX-512 paths. The key carries the CPU's instruction-set flags, read from /proc/cpuinfo; a
    record whose flags differ, or that lacks them, is never compared bit for bit."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw\n")
    real_path = P.Path
    monkeypatch.setattr(P, "Path", lambda p: cpuinfo if str(p) == "/proc/cpuinfo" else real_path(p))
    assert P._cpu_flags() == "avx avx2 fma avx512f avx512bw"
    assert "cpu_flags" in P.NUMERICS_KEYS and "cpu_flags" in P.hardware()
    here = {"cpu_model": "AMD EPYC", "cpu_capability": "AVX2", "cpu_flags": "avx avx2 fma avx512f avx512bw"}
    avx2_only = dict(here, cpu_flags="avx avx2 fma")
    assert P.numerics_differences(avx2_only, here, keys=here) == [
        "cpu_flags: avx avx2 fma (recorded) vs avx avx2 fma avx512f avx512bw (here)"]
    older = {k: v for k, v in here.items() if k != "cpu_flags"}
    assert P.numerics_differences(older, here, keys=here)[0].startswith("cpu_flags: not recorded")


def test_a_run_another_study_computed_is_recorded_from_it_not_trained_again(tmp_path):
    """One experiment, trained once: study 2's MNIST entry at cpu (train_subset 9,000) computes what study 3's easiest
    level computed (train_subset 0: all 9,000 images the split leaves), so the store finds study 3's record for it and
    a sweep records it from there, naming the source; a smaller subset is another experiment."""
    import json as _json
    import shutil

    from lib import PROJECT_ROOT
    shipped = ResultsStore(PROJECT_ROOT / "results", "03_difficulty_sweep", "cpu")
    level0 = next(r for r in shipped.records()
                  if (r["config"]["aug_level"], r["config"]["seed"], r["config"]["margin_mode"]) == (0, 0, "clamp")
                  and "plan" not in r["extra"])
    folder = tmp_path / "runs" / "03_difficulty_sweep" / "cpu"
    folder.mkdir(parents=True)
    shutil.copy(shipped.path(level0["run_id"]), folder)
    study2 = ResultsStore(tmp_path, "02_cross_dataset_reversal", "cpu")
    config = {**level0["config"], "train_subset": 9000}
    assert level0["metrics"]["train_images"] == 9000
    assert study2.same_computation(config)["run_id"] == level0["run_id"]
    assert study2.same_computation({**config, "train_subset": 5000}) is None  # fewer images: another experiment
    assert study2.adopt_same_computations([config, {**config, "train_subset": 5000}]) == [study2.run_id(config)]
    adopted = study2.load(study2.run_id(config))
    assert adopted["config"] == config and adopted["metrics"] == level0["metrics"]
    assert adopted["extra"]["same_computation"] == f"03_difficulty_sweep/{level0['run_id']}"
    assert _json.loads(study2.path(study2.run_id(config)).read_text())["environment"] == level0["environment"]
    assert study2.is_finished(config)
