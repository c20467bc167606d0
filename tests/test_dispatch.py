"""lib.dispatch: run plans, the local process pool, and the Slurm path through submitit's local executor.

Study 6's smoke runs (seconds each, no dataset download) stand in for any study: the dispatcher
never looks inside a run.
"""
import os
import pickle
import time
from datetime import datetime

import pytest

from lib import dispatch
from lib.collapse.training import CollapseConfig
from lib.core.config import as_dict
from lib.core.params import ParameterError
from lib.run.sweep import run_sweep
from lib.studies import find_study, stop_gradient
from lib.studies.variants import notebook_defaults

FAST = {"student_steps": 10}  # study 6 smoke, its real-data students shortened to 10 steps
ONE_CELL = {"r_values": [0.2], "slow_head_rate": 0.0}  # 7 runs: one of each experiment and mode


def plan(tmp_path, **parameters):
    return dispatch.make_plan("06", profile="smoke", parameters={**FAST, **parameters},
                              results_dir=str(tmp_path / "res"))


def records(store) -> dict[str, dict]:
    return {r["run_id"]: r for r in store.records()}


def test_plan_is_what_the_notebook_would_run(tmp_path):
    p = plan(tmp_path)
    defaults = notebook_defaults(find_study("06"))
    settings = stop_gradient.resolve({**defaults, **FAST, "profile": "smoke"})
    assert p.configs == stop_gradient.plan(settings)
    assert p.missing == p.configs and p.summary().endswith(f"{len(p.configs)} to run")
    # the same study by its notebook or study name
    assert dispatch.find_study("06_stop_gradient_collapse") is dispatch.find_study(stop_gradient.STUDY)


@pytest.mark.parametrize("key", list(dispatch.STUDIES))
def test_every_study_has_a_plan(tmp_path, key):
    p = dispatch.make_plan(key, profile="smoke", results_dir=str(tmp_path))
    assert p.configs and len(p.missing) == len({p.store.run_id(c) for c in p.configs})
    assert p.study.module.sweep_options(p.settings)["force"] is False


@pytest.mark.parametrize("study, parameters, named", [
    ("07", {}, "study='07'"),
    ("06", {"seedz": 3}, "seedz"),
    ("06", {"profile": "paper"}, "profile"),
    ("06", {"seeds": 0}, "seeds=0"),
    ("06", {"r_values": [1.5]}, "r_values"),
])
def test_bad_input_is_named_before_any_run(tmp_path, study, parameters, named):
    with pytest.raises(ParameterError, match=named.replace("[", r"\[")):
        dispatch.make_plan(study, profile="smoke", parameters=parameters, results_dir=str(tmp_path))
    assert not (tmp_path / "runs").exists()


def test_parse_value_reads_literals_and_keeps_words():
    assert dispatch.parse_value("3") == 3 and dispatch.parse_value("[0.1, 0.2]") == [0.1, 0.2]
    assert dispatch.parse_value("None") is None and dispatch.parse_value("digits") == "digits"


def test_local_backend_runs_exactly_what_is_missing(tmp_path):
    first = plan(tmp_path)
    dispatch.run_local(first, workers=2)
    done = records(first.store)
    assert len(done) == len(first.configs) and all(r["status"] == "ok" for r in done.values())
    lost = sorted(done)[:3]  # e.g. a node died before these were written
    for run_id in lost:
        first.store.path(run_id).unlink()
    again = plan(tmp_path)
    assert sorted(again.store.run_id(c) for c in again.missing) == lost
    dispatch.run_local(again, workers=2)
    after = records(again.store)
    assert sorted(after) == sorted(done)
    for run_id, record in after.items():  # the others were not touched
        assert (record["written_at"] == done[run_id]["written_at"]) == (run_id not in lost)
    assert plan(tmp_path).missing == []


def intervals(store) -> list[tuple[float, float]]:
    out = []
    for r in store.records():
        start = datetime.fromisoformat(r["timings"]["started_at"]).timestamp()
        out.append((start, start + r["timings"]["wall_s"]))
    return out


def most_at_once(spans) -> int:
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_slurm_path_on_submitit_local_executor(tmp_path):
    """The array path end to end: each task records its run; failures are re-submitted, nothing else."""
    p = plan(tmp_path, **ONE_CELL)
    assert len(p.configs) == 7

    def fails_for_the_head(config: CollapseConfig, **options):  # pickled by value into each task
        if config.experiment == "head":
            raise RuntimeError("node lost")
        return stop_gradient.TRAIN(config, **options)

    executor = dispatch.slurm_executor(tmp_path / "logs", name="t", cluster="local", timeout_min=5)
    task = dispatch.RecordRun(p.store, fails_for_the_head, None, "cpu", threads=1)
    jobs = dispatch.submit_slurm(p, executor, max_parallel=3, task=task)
    assert len(jobs) == 7 and [j.result() for j in jobs].count("failed") == 2
    assert most_at_once(intervals(p.store)) <= 3  # the concurrency cap
    failed = {r["run_id"] for r in p.store.records() if r["status"] == "failed"}
    assert all("node lost" in r["error"] for r in p.store.records() if r["status"] == "failed")

    retry = plan(tmp_path, **ONE_CELL)
    assert {retry.store.run_id(c) for c in retry.missing} == failed
    jobs = dispatch.submit_slurm(retry, executor, max_parallel=3)
    assert len(jobs) == 2 and {j.result() for j in jobs} == {"ok"}
    assert plan(tmp_path, **ONE_CELL).missing == []

    # the records are those of an ordinary in-process sweep
    reference = plan(tmp_path / "ref", **ONE_CELL)
    run_sweep(reference.store, reference.configs, reference.train_fn, progress=False)
    ours, theirs = records(p.store), records(reference.store)
    assert sorted(ours) == sorted(theirs)
    for run_id in ours:
        assert ours[run_id]["metrics"] == theirs[run_id]["metrics"]
    for run_id in failed:  # re-run by the study's own train function, so re-runnable by its command
        assert ours[run_id]["extra"] == theirs[run_id]["extra"]


def test_a_run_reaching_its_time_limit_is_requeued_and_recorded_once(tmp_path):
    p = plan(tmp_path, **ONE_CELL)
    p.missing = p.missing[:1]
    marker = tmp_path / "first_attempt"

    def slow_first_time(config: CollapseConfig, **options):
        if not marker.exists():
            marker.touch()
            time.sleep(120)  # the time limit strikes here
        return stop_gradient.TRAIN(config, **options)

    # 40 s per attempt: a requeued attempt (a fresh interpreter importing torch, then the run) must fit
    # even on a loaded machine; at 15 s it timed out again when two other test processes ran beside it
    executor = dispatch.slurm_executor(tmp_path / "logs", name="t", cluster="local", timeout_min=40 / 60,
                                       signal_delay_s=5, max_num_timeout=2)
    task = dispatch.RecordRun(p.store, slow_first_time, None, "cpu", threads=1)
    (job,) = dispatch.submit_slurm(p, executor, task=task)
    assert job.result() == "ok"
    assert marker.exists() and "timed-out" in job.stderr()
    (record,) = p.store.records()
    assert record["status"] == "ok" and record["config"] == as_dict(p.missing[0])


def test_checkpoint_resubmits_the_same_run(tmp_path):
    p = plan(tmp_path)
    task = dispatch.RecordRun(p.store, p.train_fn, None, "cpu", threads=1)
    again = task.checkpoint(p.configs[0])
    assert again.function is task and again.args == (p.configs[0],)


def test_slurm_array_script(tmp_path, monkeypatch):
    """What sbatch is given: one array over the missing runs with the cap, the time limit and the signal."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\ncp "$1" {tmp_path}/job.sh\necho "Submitted batch job 4242"\n')
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")  # submitit looks for it
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    p = plan(tmp_path)
    executor = dispatch.slurm_executor(tmp_path / "logs", name="06_smoke", timeout_min=90,
                                       cpus_per_task=2, gpus_per_node=1, partition="gpu", mem_gb=8)
    jobs = dispatch.submit_slurm(p, executor, max_parallel=4, device="cuda")
    script = (tmp_path / "job.sh").read_text()
    n = len(p.missing)
    for line in (f"--array=0-{n - 1}%4", "--time=90", "--cpus-per-task=2", "--gpus-per-node=1", "--partition=gpu",
                 "--mem=8GB", "--signal=USR2@90", "--job-name=06_smoke"):
        assert f"#SBATCH {line}\n" in script
    assert [j.job_id for j in jobs] == [f"4242_{i}" for i in range(n)]
    for i in (0, n - 1):  # task i trains run i of the plan, on the GPU with the task's cores
        delayed = pickle.loads((tmp_path / "logs" / f"4242_{i}_submitted.pkl").read_bytes())
        assert delayed.args == (p.missing[i],)
        assert (delayed.function.device, delayed.function.threads) == ("cuda", 2)


def test_command_line_dry_run_changes_nothing(tmp_path, capsys):
    assert dispatch.main(["06", "--profile", "smoke", "-p", "student_steps", "10", "--results-dir",
                          str(tmp_path), "--dry-run"]) == 0
    assert "16 runs, 0 recorded, 16 to run" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()
    with pytest.raises(SystemExit):
        dispatch.main(["06", "--profile", "smoke", "-p", "seeds", "-1", "--dry-run"])
    assert "seeds=-1" in capsys.readouterr().err


def test_a_missing_dataset_fails_before_anything_is_submitted(tmp_path, monkeypatch):
    from lib.core.data import DatasetNotFoundError

    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))  # wherever this machine keeps CIFAR
    with pytest.raises(DatasetNotFoundError, match="cifar10"):
        dispatch.make_plan("01", profile="smoke", parameters={"dataset": "cifar10"}, data_root=str(tmp_path / "empty"),
                           results_dir=str(tmp_path))


def test_a_recorded_plan_is_listed_without_the_arrays(tmp_path, monkeypatch):
    """Study 2 narrows its plan to the datasets it finds; a dataset no missing run trains on is described from the
    facts recorded with its runs, as the notebook does, so the shipped cpu plan lists as complete on a clone with
    no data folder. A run still to train needs its arrays, and the error names why the first dataset was skipped."""
    monkeypatch.delenv("DATA_ROOT", raising=False)
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))
    plan = dispatch.make_plan("02", profile="cpu", data_root=str(tmp_path / "empty"))
    assert plan.configs and plan.missing == []
    assert {"cifar10", "fashion_mnist", "mnist"} <= set(plan.settings["available"])
    with pytest.raises(ParameterError, match=r"all were skipped; the first: dataset 'cifar10' was not found"):
        dispatch.make_plan("02", profile="cpu", parameters={"seeds": 40}, data_root=str(tmp_path / "empty"),
                           results_dir=str(tmp_path))
