"""Live progress (lib.core.progress): the sweep's bar counts its runs, moves with their steps (in this process
or relayed from pool workers), says nothing time-dependent when every run is recorded, and lib.run_all
streams it while a notebook executes."""
import dataclasses
import re
import subprocess
import sys
import threading
import time

import pytest

from lib import PROJECT_ROOT
from lib.core import progress
from lib.core.config import Config
from lib.run.results import ResultsStore
from lib.run.sweep import run_sweep

STEPS = 20


@dataclasses.dataclass(frozen=True)
class _Toy(Config):
    seed: int = 0
    dataset: str = "none"
    step_s: float = 0.0


def _train_toy(config: _Toy, *, data_root=None, progress=None) -> dict:
    """STEPS steps of ``step_s`` seconds, reported as a training loop reports them."""
    from lib.core.progress import steps

    bar = steps(STEPS, f"toy seed {config.seed}", progress)
    for _ in range(STEPS):
        time.sleep(config.step_s)
        bar.update()
    bar.close()
    return {"status": "ok", "seed": config.seed}


def _bar_lines(text: str, desc: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{desc}:") and "%|" in line]


@pytest.fixture
def every_update(monkeypatch):
    """A line for every change of the bar (the lines style otherwise waits TEXT_INTERVAL_S between two)."""
    monkeypatch.setattr(progress, "TEXT_INTERVAL_S", 0.0)
    monkeypatch.setattr(progress, "TEXT_STEP", 0.0)


def test_the_bar_counts_the_runs_to_train_and_ends_with_all_of_them(tmp_path, capsys, every_update):
    store = ResultsStore(tmp_path, "toy", "smoke")
    configs = [_Toy(seed=s) for s in range(5)]
    run_sweep(store, configs[:2], _train_toy, progress=False)  # two recorded before
    capsys.readouterr()
    run_sweep(store, configs, _train_toy, progress=True)
    lines = _bar_lines(capsys.readouterr().err, "toy [smoke]")
    assert lines[0].startswith("toy [smoke]:   0%") and "0/3 runs" in lines[0]
    assert lines[-1].startswith("toy [smoke]: 100%") and lines[-1].endswith("3/3 runs]")
    done = [int(re.search(r"(\d+)/3 runs", line).group(1)) for line in lines]
    assert done == sorted(done) and set(done) == {0, 1, 2, 3}
    in_flight = [line for line in lines if "; toy seed" in line]  # a run's steps move the bar before it ends
    assert in_flight and all(re.search(r"toy seed [234] \d+%", line) for line in in_flight)


def test_a_sweep_with_every_run_recorded_prints_one_line_without_time(tmp_path, capsys):
    store = ResultsStore(tmp_path, "toy", "smoke")
    configs = [_Toy(seed=s) for s in range(3)]
    run_sweep(store, configs, _train_toy, progress=False)
    assert capsys.readouterr() == ("", "")
    outputs = []
    for _ in range(2):
        run_sweep(store, configs, _train_toy, progress=True)
        outputs.append(capsys.readouterr())
    assert outputs[0] == outputs[1] == ("toy [smoke]: all 3 runs recorded, nothing to train\n", "")


def test_progress_false_prints_nothing(tmp_path, capsys):
    run_sweep(ResultsStore(tmp_path, "toy", "smoke"), [_Toy(seed=s) for s in range(2)], _train_toy, progress=False)
    assert capsys.readouterr() == ("", "")


def test_pool_workers_relay_their_runs_steps_to_the_sweeps_bar(tmp_path, capsys, every_update):
    """Two runs of about 2 s in two worker processes: the bar shows them in flight before they end."""
    configs = [_Toy(seed=s, step_s=0.1) for s in range(2)]
    records = run_sweep(ResultsStore(tmp_path, "toy", "smoke"), configs, _train_toy, workers=2, progress=True)
    assert [r["status"] for r in records] == ["ok", "ok"]
    lines = _bar_lines(capsys.readouterr().err, "toy [smoke]")
    partial = [line for line in lines if re.search(r"toy seed [01] ([1-9]\d?)%", line)]
    assert partial, "no line showed a worker's run part-way"
    assert lines[-1].endswith("2/2 runs]")


def test_a_batched_cell_counts_its_seeds(tmp_path, capsys, every_update):
    def batched(cell, *, data_root=None, device="cpu", progress=None):
        return [_train_toy(c, progress=progress) for c in cell]

    configs = [_Toy(seed=s) for s in range(3)]
    run_sweep(ResultsStore(tmp_path, "toy", "smoke"), configs, _train_toy, batched_fn=batched, progress=True)
    lines = _bar_lines(capsys.readouterr().err, "toy [smoke]")
    assert lines[-1].startswith("toy [smoke]: 100%") and lines[-1].endswith("3/3 runs]")


def test_a_loop_outside_a_sweep_shows_its_own_bar_of_steps(capsys, every_update):
    _train_toy(_Toy(seed=7), progress=True)
    lines = _bar_lines(capsys.readouterr().err, "toy seed 7")
    assert lines and lines[-1].startswith("toy seed 7: 100%") and f"{STEPS}/{STEPS}" in lines[-1]


# ------------------------------------------------------------------------------- lib.run_all streams it

NOTEBOOK = "01"  # its runs report their training steps (study 6's runs are too short to have steps reported)
STREAMED_WITHIN_S = 10


def test_run_all_streams_progress_within_10_s_of_a_run_starting(tmp_path):
    """``python -m lib.run_all`` at the smoke profile on a throw-away results folder: the sweep's bar appears when
    its first run starts (0 of N) and the next line of progress follows within 10 s — a run in flight on a
    loaded machine, or the finished sweep on a fast one (smoke runs can all end within 5 s)."""
    command = [sys.executable, "-m", "lib.run_all", "--profile", "smoke", "--only", NOTEBOOK,
               "--results-dir", str(tmp_path / "results")]
    proc = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: seen.extend((time.monotonic(), line.rstrip()) for line in proc.stdout))
    reader.start()
    try:
        assert proc.wait(timeout=900) == 0, "\n".join(line for _, line in seen[-30:])
    finally:
        proc.kill()
        reader.join()
    bars = [(t, line) for t, line in seen if re.match(r"\S+ \[smoke\]: +\d+%\|", line)]
    log = "\n".join(f"{t - seen[0][0]:7.1f} s  {line}" for t, line in seen)
    assert len(bars) >= 2 and re.search(r"\| \[00:00<\?, 0/\d+ runs", bars[0][1]), f"no bar at the start:\n{log}"
    assert re.search(r"100%\|.* (\d+)/\1 runs", bars[-1][1]), f"the bar did not end with every run:\n{log}"
    assert bars[1][0] - bars[0][0] <= STREAMED_WITHIN_S, log
