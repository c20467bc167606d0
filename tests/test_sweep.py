"""The dispatcher: resume after a kill, failures recorded and retried, parallel workers."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from lib.cff.training import CFFConfig, train_cff
from lib.core.config import Config
from lib.run.results import ResultsStore
from lib.run.sweep import run_sweep
from tests.conftest import TINY_CFF

SWEEP_SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import lib.run.sweep
    from lib.cff.training import CFFConfig, train_cff
    from lib.run.results import ResultsStore
    from lib.run.sweep import run_sweep
    from tests.conftest import TINY_CFF

    # argv: results root, then optionally where to stop and wait for the kill: "run:K" (before run
    # K starts, K records written) or "write:K" (inside the write of record K + 1, its temp file
    # written, not yet renamed over the record). The sweep runs seeds 0-5 in order, in one process.
    root, pause = Path(sys.argv[1]), (sys.argv[2] if len(sys.argv) > 2 else "")
    store = ResultsStore(root, "sweep_test", "smoke")

    def wait_for_the_kill():
        (root / "paused").write_text(str(os.getpid()))
        time.sleep(600)

    if pause.startswith("run:"):
        run_one, at = lib.run.sweep.run_one, int(pause[4:])
        def paused_run_one(train_fn, config, *args):
            if config.seed == at:
                wait_for_the_kill()
            return run_one(train_fn, config, *args)
        lib.run.sweep.run_one = paused_run_one
    elif pause.startswith("write:"):
        replace, at = os.replace, int(pause[6:])
        def paused_replace(src, dst):
            if Path(dst).parent == store.runs_dir and len(list(store.runs_dir.glob("*.json"))) == at:
                wait_for_the_kill()
            replace(src, dst)
        os.replace = paused_replace

    run_sweep(store, [CFFConfig(seed=s, **TINY_CFF) for s in range(6)], train_cff, progress=False)
""")



def _flaky(config: CFFConfig, *, data_root=None, progress=None):
    if config.seed == 1:
        raise RuntimeError("boom")
    return {"status": "ok", "top1": 0.5 + config.seed}


def test_failed_run_is_recorded_and_retried(tmp_path):
    store = ResultsStore(tmp_path, "sweep_test", "smoke")
    configs = [CFFConfig(seed=s, **TINY_CFF) for s in range(3)]
    records = run_sweep(store, configs, _flaky, progress=False)
    assert [r["status"] for r in records] == ["ok", "failed", "ok"]
    assert "boom" in records[1]["error"]
    calls = []

    def counting(config: CFFConfig, **kw):
        calls.append(config.seed)
        return {"status": "ok", "top1": 1.0}

    run_sweep(store, configs, counting, progress=False)
    assert calls == [1]  # only the failed run is done again


def test_parallel_workers_give_the_same_records_as_one_process(tmp_path):
    configs = [CFFConfig(seed=s, **TINY_CFF) for s in range(2)]
    serial = run_sweep(ResultsStore(tmp_path / "a", "t", "smoke"), configs, train_cff, progress=False)
    parallel = run_sweep(ResultsStore(tmp_path / "b", "t", "smoke"), configs, train_cff, workers=2, progress=False)
    assert len(serial) == len(parallel) == len(configs)
    for s, p in zip(serial, parallel, strict=True):
        assert s["run_id"] == p["run_id"]
        assert s["metrics"]["curves"] == p["metrics"]["curves"]
        assert s["metrics"]["top1"] == p["metrics"]["top1"]


STABLE_COLUMNS_DROPPED = ("started_at", "wall_s", "git_commit", "git_dirty")  # when and where, not what
ROOT = Path(__file__).resolve().parents[1]


def _sweep(results: Path, pause: str = "", **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SWEEP_SCRIPT, str(results), pause], cwd=ROOT, **popen)


def _table(results: Path) -> pd.DataFrame:
    return ResultsStore(results, "sweep_test", "smoke").table().drop(columns=list(STABLE_COLUMNS_DROPPED))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The table of the same sweep, never interrupted."""
    results = tmp_path_factory.mktemp("clean")
    assert _sweep(results).wait() == 0
    return _table(results)


@pytest.mark.parametrize("where,count", [("run", 0), ("run", 2), ("run", 5), ("write", 0), ("write", 3), ("write", 5)])
def test_a_sweep_killed_where_chosen_resumes_to_the_uninterrupted_table(tmp_path, uninterrupted, where, count):
    """Fault trial: SIGKILL the sweep's process group at a chosen moment -- before run ``count``
    starts, or inside the write of record ``count`` + 1 (its temp file complete, not yet renamed) --
    check what the kill left, re-run the sweep, and compare with the sweep that was never killed."""
    runs = tmp_path / "runs" / "sweep_test" / "smoke"
    proc = _sweep(tmp_path, f"{where}:{count}", start_new_session=True)
    deadline = time.time() + 120
    while not (tmp_path / "paused").exists():
        assert proc.poll() is None and time.time() < deadline, "the sweep ended before reaching the pause"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up
    proc.wait()

    before = {p.name: p.read_text() for p in runs.glob("*.json")}
    assert len(before) == count, "the kill landed where the trial says"
    temp = list(runs.glob(".*.tmp"))
    if where == "write":  # killed between the temp file's fsync and its rename
        assert len(temp) == 1
        written = json.loads(temp[0].read_text())
        assert written["seed"] == count and f"{written['run_id']}.json" not in before
    else:
        assert temp == []
    assert len(ResultsStore(tmp_path, "sweep_test", "smoke").records()) == count  # the temp file is no record

    assert _sweep(tmp_path).wait() == 0
    assert not list(runs.glob(".*")), "the killed writer's temp file survived the resume"
    after = {p.name: p.read_text() for p in runs.glob("*.json")}
    assert all(after[name] == text for name, text in before.items()), "a finished run was re-run"
    records = [json.loads(text) for text in after.values()]  # every file parses
    assert sorted(r["seed"] for r in records) == list(range(6)), "each run recorded exactly once"
    pd.testing.assert_frame_equal(_table(tmp_path), uninterrupted)


def test_a_live_writers_temp_file_is_kept(tmp_path):
    """Only temp files of dead writers on this host are removed: a live process's (this one's), or
    another host's, may be mid-write."""
    import socket

    from lib.run.files import remove_stale_temp_files

    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    files = {name: tmp_path / name for name in (
        f".a.json.{host}.{dead.pid}.0123456789ab.tmp",      # dead writer, this host: removed
        f".b.json.{host}.{os.getpid()}.0123456789ab.tmp",   # live writer: kept
        f".c.json.another-host.{dead.pid}.0123456789ab.tmp")}  # unknown writer: kept
    for path in files.values():
        path.write_text("{}")
    assert remove_stale_temp_files(tmp_path) == [files[f".a.json.{host}.{dead.pid}.0123456789ab.tmp"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(list(files)[1:])


def test_every_record_carries_the_command_that_reproduces_it(tmp_path):
    root = Path(__file__).resolve().parents[1]
    [record] = run_sweep(ResultsStore(tmp_path, "t", "smoke"), [CFFConfig(seed=2, **TINY_CFF)], train_cff,
                         progress=False)
    assert record["extra"]["train"] == "lib.cff.training.train_cff"
    shell = subprocess.run(record["extra"]["rerun"], shell=True, cwd=root, capture_output=True, text=True, check=True)
    from_file = subprocess.run([sys.executable, "-m", "lib.rerun", str(tmp_path / "runs" / "t" / "smoke" /
                                                                       f"{record['run_id']}.json")],
                               cwd=root, capture_output=True, text=True, check=True)
    for output in (shell.stdout, from_file.stdout):
        rerun = json.loads(output)
        assert rerun["top1"] == record["metrics"]["top1"]
        assert rerun["curves"] == record["metrics"]["curves"]


def test_a_gpu_sweep_passes_its_device_only_to_a_method_that_takes_it():
    """CFF takes ``device=``; SSL holds the device in its config and must not be handed a second one."""
    from lib.run.sweep import run_one

    assert run_one(_takes_device, {"seed": 0}, None, "cuda")[1]["device"] == "cuda"
    status, _, _, error = run_one(_holds_device, {"seed": 0}, None, "cuda")
    assert (status, error) == ("ok", None)


@dataclasses.dataclass(frozen=True)
class _Seed(Config):
    seed: int = 0


def _takes_device(config: _Seed, *, data_root=None, progress=None, device="cpu") -> dict:
    return {"status": "ok", "device": device}


def _holds_device(config: _Seed, *, data_root=None, progress=None) -> dict:
    return {"status": "ok"}


def test_a_function_that_is_not_a_training_function_is_refused_saying_why():
    """lib.core.config.build names what failed: an annotation that does not resolve, no `config`, or a `config`
    that is not a Config dataclass."""
    from lib.core.config import build

    def unresolved(config: "NoSuchConfig") -> dict:  # noqa: F821
        return {}

    def untyped(x) -> dict:
        return {}

    def not_a_config(config: dict) -> dict:
        return {}

    with pytest.raises(TypeError, match=r"do not resolve \(NameError: name 'NoSuchConfig' is not defined\)"):
        build(unresolved, {})
    with pytest.raises(TypeError, match="no parameter `config`"):
        build(untyped, {})
    with pytest.raises(TypeError, match="annotated <class 'dict'>, not a Config dataclass"):
        build(not_a_config, {})


def test_a_sweeps_extra_goes_into_every_record_it_writes(tmp_path):
    """lib.decide's runs carry their plan's id; the provenance keys stay the sweep's own."""
    configs = [CFFConfig(seed=s, **TINY_CFF) for s in range(2)]
    records = run_sweep(ResultsStore(tmp_path, "t", "smoke"), configs, train_cff, progress=False,
                        extra={"plan": "0123456789abcdef"})
    assert [r["extra"]["plan"] for r in records] == ["0123456789abcdef"] * 2
    assert all(r["extra"]["train"] == "lib.cff.training.train_cff" for r in records)
    reread = ResultsStore(tmp_path, "t", "smoke").load(records[0]["run_id"])
    assert reread["extra"]["plan"] == "0123456789abcdef"
