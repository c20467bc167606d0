"""The dispatcher: resume after a kill, failures recorded and retried, parallel workers."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from lib.cff import cff_config, train_cff
from lib.results import ResultsStore
from lib.sweep import run_sweep

from tests.conftest import TINY_CFF

SWEEP_SCRIPT = textwrap.dedent("""
    import sys
    from lib.cff import cff_config, train_cff
    from lib.results import ResultsStore
    from lib.sweep import run_sweep
    from tests.conftest import TINY_CFF
    store = ResultsStore(sys.argv[1], "sweep_test", "smoke")
    configs = [cff_config(seed=s, **TINY_CFF) for s in range(6)]
    run_sweep(store, configs, train_cff, progress=False)
""")


def test_killed_sweep_resumes_and_records_every_run_once(tmp_path):
    root = Path(__file__).resolve().parents[1]
    runs = tmp_path / "runs" / "sweep_test" / "smoke"
    cmd = [sys.executable, "-c", SWEEP_SCRIPT, str(tmp_path)]
    proc = subprocess.Popen(cmd, cwd=root, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(runs.glob("*.json"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-sweep, no chance to clean up
    proc.wait()
    before = {p.name: p.read_text() for p in runs.glob("*.json")}
    assert 2 <= len(before) < 6, "the kill should land part-way through the sweep"
    subprocess.run(cmd, cwd=root, check=True)
    after = {p.name: p.read_text() for p in runs.glob("*.json")}
    assert len(after) == 6
    assert not list(runs.glob(".*"))  # no temp file left behind
    for name, text in before.items():
        assert after[name] == text  # finished runs were not re-run
    records = [json.loads(t) for t in after.values()]
    assert sorted(r["seed"] for r in records) == list(range(6))
    assert all(r["status"] == "ok" for r in records)


def _flaky(*, data_root=None, progress=None, **config):
    if config["seed"] == 1:
        raise RuntimeError("boom")
    return {"status": "ok", "top1": 0.5 + config["seed"]}


def test_failed_run_is_recorded_and_retried(tmp_path):
    store = ResultsStore(tmp_path, "sweep_test", "smoke")
    configs = [cff_config(seed=s, **TINY_CFF) for s in range(3)]
    records = run_sweep(store, configs, _flaky, progress=False)
    assert [r["status"] for r in records] == ["ok", "failed", "ok"]
    assert "boom" in records[1]["error"]
    calls = []

    def counting(**kw):
        calls.append(kw["seed"])
        return {"status": "ok", "top1": 1.0}

    run_sweep(store, configs, counting, progress=False)
    assert calls == [1]  # only the failed run is done again


def test_parallel_workers_give_the_same_records_as_one_process(tmp_path):
    configs = [cff_config(seed=s, **TINY_CFF) for s in range(2)]
    serial = run_sweep(ResultsStore(tmp_path / "a", "t", "smoke"), configs, train_cff, progress=False)
    parallel = run_sweep(ResultsStore(tmp_path / "b", "t", "smoke"), configs, train_cff, workers=2, progress=False)
    for s, p in zip(serial, parallel):
        assert s["run_id"] == p["run_id"]
        assert s["metrics"]["curves"] == p["metrics"]["curves"]
        assert s["metrics"]["top1"] == p["metrics"]["top1"]


STABLE_COLUMNS_DROPPED = ("started_at", "wall_s", "git_commit", "git_dirty")  # when and where, not what


@pytest.mark.parametrize("trial", range(4))
def test_kill_at_a_random_moment_then_resume_gives_the_uninterrupted_table(tmp_path, trial):
    """Fault trial: SIGKILL the sweep's whole process group after a random delay (seeded per trial),
    re-run it, and compare with a sweep that was never interrupted."""
    root = Path(__file__).resolve().parents[1]
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cmd = [sys.executable, "-c", SWEEP_SCRIPT]
    delay = random.Random(trial).uniform(0.5, 8.0)
    proc = subprocess.Popen(cmd + [str(killed)], cwd=root, start_new_session=True)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    subprocess.run(cmd + [str(killed)], cwd=root, check=True)
    subprocess.run(cmd + [str(clean)], cwd=root, check=True)

    runs = killed / "runs" / "sweep_test" / "smoke"
    assert not list(runs.glob(".*")), "a temporary file survived the kill"
    records = [json.loads(p.read_text()) for p in sorted(runs.glob("*.json"))]  # every file parses
    assert sorted(r["seed"] for r in records) == list(range(6)), "each run recorded exactly once"
    tables = [ResultsStore(r, "sweep_test", "smoke").table().drop(columns=list(STABLE_COLUMNS_DROPPED))
              for r in (killed, clean)]
    pd.testing.assert_frame_equal(tables[0], tables[1])


def test_every_record_carries_the_command_that_reproduces_it(tmp_path):
    root = Path(__file__).resolve().parents[1]
    [record] = run_sweep(ResultsStore(tmp_path, "t", "smoke"), [cff_config(seed=2, **TINY_CFF)], train_cff, progress=False)
    assert record["extra"]["train"] == "lib.cff.train_cff"
    shell = subprocess.run(record["extra"]["rerun"], shell=True, cwd=root, capture_output=True, text=True, check=True)
    from_file = subprocess.run([sys.executable, "-m", "lib.rerun", str(tmp_path / "runs" / "t" / "smoke" /
                                                                       f"{record['run_id']}.json")],
                               cwd=root, capture_output=True, text=True, check=True)
    for output in (shell.stdout, from_file.stdout):
        rerun = json.loads(output)
        assert rerun["top1"] == record["metrics"]["top1"]
        assert rerun["curves"] == record["metrics"]["curves"]
