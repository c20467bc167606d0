"""Run a study's plan here or on a Slurm cluster; the notebook then only collects and analyses.

    python -m lib.dispatch 01 --profile cpu --data-root ../shared/data             # a process pool here
    python -m lib.dispatch 02 --profile cpu -p seeds 10 --dry-run                   # show the plan, run nothing
    python -m lib.dispatch 01 --profile paper --backend slurm --partition gpu \\
        --gpus-per-node 1 --max-parallel 20 --timeout-min 120                       # one array task per run
    python -m lib.run_all --only 01 --profile paper                                 # then: collect, analyse, render

A study's *plan* is every run its notebook's parameters imply (the notebook's defaults, the
profile, and ``-p name value`` overrides, as papermill would pass them), minus the runs that
already have a finished record. The plan is checked by the notebook's own validator, so a bad
value or an unknown parameter name fails here, before anything is submitted. Re-submitting after any
failure (a crashed run, a killed pool, a cancelled array) runs exactly what is missing.

Overrides that change the profile's settings write a variant, by the notebook's own rule
(``lib.studies.variants.variant_of``): ``-p m0 0.3`` writes ``results/variants/m0-0.3/``, ``--variant NAME``
names it; the shipped results are never written. A variant's plan copies the records of the runs
it shares with the canonical results (also on ``--dry-run``; the variant folder is git-ignored).

Backends:

- ``local``: a process pool sized to the machine (``lib.run.sweep.run_sweep``), the cores divided
  among the processes so that their threads do not fight.
- ``slurm``: one Slurm array task per run through submitit, at most ``--max-parallel`` at once.
  A run that is preempted or reaches its time limit is requeued and starts over (a run writes its
  record only when it ends). Each task writes its own record atomically into the shared results
  folder. ``--submitit-cluster local`` runs the same path with submitit's local executor, on
  this machine (the tests use it); it has no array throttle, so there the runs go in waves of
  ``--max-parallel``.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import submitit

from lib import PROJECT_ROOT
from lib.core import params
from lib.core.data import DatasetNotFoundError
from lib.core.params import PROFILE_METAVAR, PROFILE_NAMES, ParameterError, profile_option
from lib.run import datasets
from lib.run.results import FINISHED_STATUSES, ResultsStore
from lib.run.sweep import RecordRun, run_sweep
from lib.studies import STUDIES, find_study
from lib.studies.study import Study
from lib.studies.variants import check_data, download_datasets, open_store, relative, resolve_command

BACKENDS = ("local", "slurm")
SUBMITIT_CLUSTERS = ("slurm", "local")


@dataclass
class Plan:
    """The runs a study's parameters imply, and those of them still to run."""

    study: Study
    settings: dict  # the notebook's checked settings (study.module.resolve)
    store: ResultsStore
    configs: list[dict]  # every run, in the notebook's order
    missing: list[dict] = field(default_factory=list)  # runs without a finished record (all with force)
    data_root: str | None = None
    variant: str | None = None  # None: the profile's canonical results (lib.studies.variants.variant_of)
    extra: dict = field(default_factory=dict)  # written into every record (lib.decide: {"plan": its id})

    @property
    def train_fn(self) -> Callable[..., dict]:
        return self.study.train_fn

    def summary(self) -> str:
        writes = f"variant {self.variant}" if self.variant else "canonical"
        return (f"{self.study.notebook} [{self.store.profile}, {writes}: {relative(self.store.runs_dir)}]: "
                f"{len(self.configs)} runs, "
                f"{len(self.configs) - len(self.missing)} recorded, {len(self.missing)} to run")


def make_plan(study: str | Study, *, profile: str = "quick", parameters: dict | None = None,
              data_root: str | None = None, results_dir: str = "results", variant: str | None = None,
              download: bool = False) -> Plan:
    """Check a study's parameters as its notebook would and list its runs (no training happens here).

    Parameters that differ from the profile's own make the plan write a variant, as the notebook would
    (``lib.studies.variants.variant_of``); a variant reuses the canonical runs it shares by copying their records.
    """
    study = study if isinstance(study, Study) else find_study(study)
    if profile not in PROFILE_NAMES:
        raise ParameterError(f"profile={profile!r} is not allowed: one of {', '.join(PROFILE_NAMES)}")
    settings, variant = resolve_command(study, profile=profile, parameters=dict(parameters or {}),
                                        data_root=data_root, results_dir=results_dir, variant=variant)
    download_datasets(study, settings, data_root, download)
    # as the notebook does: a dataset no missing run trains on is described from the facts recorded with the
    # canonical runs, so that a plan whose runs are all recorded is listed without the arrays (study 2's check_data);
    # checked before a variant's store copies anything
    canonical, _ = open_store(study, settings, [], results_dir, None)
    check_data(study, settings, [canonical], data_root)
    configs = study.module.plan(settings)
    store, _ = open_store(study, settings, configs, results_dir, variant)
    unique = {store.run_id(c): c for c in configs}
    missing = [c for c in unique.values() if settings.get("force") or not store.is_finished(c)]
    datasets.load_datasets(missing, data_root)
    return Plan(study, settings, store, configs, missing, data_root, variant)


# ------------------------------------------------------------------------------- local


def run_local(plan: Plan, *, workers: int | None = None) -> list[dict]:
    """The missing runs in a process pool of ``workers`` (default: the study's setting, else one per core),
    with their progress and ETA on stderr (``lib.core.progress``: a bar on a terminal, lines in a log)."""
    options = plan.study.module.sweep_options(plan.settings)
    if workers is not None:
        options["workers"] = workers
    elif "workers" not in options and "batched_fn" not in options:
        options["workers"] = max(1, min(os.cpu_count() or 1, len(plan.missing)))
    return run_sweep(plan.store, plan.configs, plan.train_fn, data_root=plan.data_root, progress=True,
                     extra=plan.extra or None, **options)


# ------------------------------------------------------------------------------- slurm


def slurm_executor(folder: Path, *, name: str, cluster: str = "slurm", timeout_min: float = 60,
                   cpus_per_task: int = 1, gpus_per_node: int = 0, mem_gb: float | None = None,
                   partition: str | None = None, max_num_timeout: int = 3,
                   signal_delay_s: int = 90) -> submitit.Executor:
    """A submitit executor for one array of runs (``cluster='local'``: submitit's local executor)."""
    if cluster not in SUBMITIT_CLUSTERS:
        raise ParameterError(f"submitit cluster={cluster!r} is not allowed: one of {', '.join(SUBMITIT_CLUSTERS)}")
    params.integer("cpus_per_task", cpus_per_task, 1)
    if not (isinstance(timeout_min, (int, float)) and timeout_min > 0):
        raise ParameterError(f"timeout_min={timeout_min!r} is not allowed: a number of minutes > 0")
    if cluster == "local":
        executor = submitit.LocalExecutor(folder, max_num_timeout=max_num_timeout)
        executor.update_parameters(timeout_min=timeout_min, signal_delay_s=signal_delay_s, gpus_per_node=gpus_per_node)
        return executor
    executor = submitit.SlurmExecutor(folder, max_num_timeout=max_num_timeout)
    executor.update_parameters(job_name=name, time=max(1, round(timeout_min)), cpus_per_task=cpus_per_task,
                               signal_delay_s=signal_delay_s,
                               **({"gpus_per_node": gpus_per_node} if gpus_per_node else {}),
                               **({"mem": f"{mem_gb:g}GB"} if mem_gb else {}),
                               **({"partition": partition} if partition else {}))
    return executor


def submit_slurm(plan: Plan, executor: submitit.Executor, *, max_parallel: int = 16, wait: bool = False,
                 device: str = "cpu", task: RecordRun | None = None) -> list[submitit.Job]:
    """Submit the plan's missing runs as one array, at most ``max_parallel`` running at once
    (``wait``: until every task has ended).

    ``device`` is passed to train functions whose config does not hold it (CFF studies); the
    thread count of each task is the executor's ``cpus_per_task``.
    """
    params.integer("max_parallel", max_parallel, 1)
    if not plan.missing:
        return []
    on_slurm = isinstance(executor, submitit.SlurmExecutor)
    threads = int(executor.parameters.get("cpus_per_task", 1)) if on_slurm else 1
    task = task or RecordRun(plan.store, plan.train_fn, plan.data_root, device, threads, plan.extra or None)
    if on_slurm:
        executor.update_parameters(array_parallelism=max_parallel)  # sbatch --array=0-N%max_parallel
        jobs = executor.map_array(task, plan.missing)
        if wait:
            for job in jobs:
                job.wait()
        return jobs
    jobs = []  # the local executor runs every job at once: submit in waves instead
    for start in range(0, len(plan.missing), max_parallel):
        wave = executor.map_array(task, plan.missing[start:start + max_parallel])
        for job in wave:
            job.wait()
        jobs += wave
    return jobs


# ------------------------------------------------------------------------------- command line


def parse_value(text: str):
    """A ``-p`` value: a Python literal when it is one (``3``, ``[1, 2]``, ``None``), else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", help=f"one of {', '.join(STUDIES)} or a notebook name")
    parser.add_argument("--profile", default="quick", type=profile_option, metavar=PROFILE_METAVAR)
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a notebook parameter, as papermill's -p")
    parser.add_argument("--data-root", help="folder of <name>.npz arrays (else $DATA_ROOT, then torchvision's cache)")
    parser.add_argument("--download", action="store_true", help="let torchvision download missing datasets")
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    parser.add_argument("--variant", help="name of the variant the runs write (default: derived from the -p overrides)")
    add_backend_arguments(parser)
    args = parser.parse_args(argv)
    data_root = str(Path(args.data_root).resolve()) if args.data_root else None
    try:
        plan = make_plan(args.study, profile=args.profile, data_root=data_root, results_dir=args.results_dir,
                         parameters={name: parse_value(value) for name, value in args.parameter}, variant=args.variant,
                         download=args.download)
    except ParameterError as err:
        parser.error(str(err))
    except DatasetNotFoundError as err:  # what was tried and what to do, without a traceback
        print(err, file=sys.stderr)
        return 1
    print(plan.summary(), flush=True)
    if args.dry_run or not plan.missing:
        return 0
    return execute(plan, args)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say where a plan runs (``lib.dispatch`` and ``lib.decide`` share them)."""
    parser.add_argument("--backend", default="local", choices=BACKENDS)
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    local = parser.add_argument_group("local")
    local.add_argument("--workers", type=int, help="processes (default: the study's setting, else one per core)")
    slurm = parser.add_argument_group("slurm")
    slurm.add_argument("--submitit-cluster", default="slurm", choices=SUBMITIT_CLUSTERS,
                       help="local: submitit's local executor on this machine, to try the slurm path")
    slurm.add_argument("--max-parallel", type=int, default=16, help="array tasks running at once")
    slurm.add_argument("--timeout-min", type=float, default=60, help="time limit of one run; then it is requeued")
    slurm.add_argument("--partition")
    slurm.add_argument("--cpus-per-task", type=int, default=4)
    slurm.add_argument("--gpus-per-node", type=int, default=0)
    slurm.add_argument("--mem-gb", type=float)
    slurm.add_argument("--log-dir", help="submitit's folder (default .submitit/<study>_<profile>)")
    slurm.add_argument("--wait", action="store_true", help="wait until every array task has ended")


def execute(plan: Plan, args: argparse.Namespace) -> int:
    """Run a plan's missing runs on the backend the command line chose; the exit status."""
    if args.backend == "local":
        records = run_local(plan, workers=args.workers)
        failed = sum(r is None or r["status"] not in FINISHED_STATUSES for r in records)
        print(f"{len(records) - failed} runs recorded, {failed} failed (re-run this command to retry them)")
        return 1 if failed else 0
    name = f"{plan.study.notebook}_{plan.store.profile}" + (f"_{plan.variant}" if plan.variant else "")
    folder = Path(args.log_dir) if args.log_dir else PROJECT_ROOT / ".submitit" / name
    executor = slurm_executor(folder, name=name, cluster=args.submitit_cluster, timeout_min=args.timeout_min,
                              cpus_per_task=args.cpus_per_task, gpus_per_node=args.gpus_per_node, mem_gb=args.mem_gb,
                              partition=args.partition)
    jobs = submit_slurm(plan, executor, max_parallel=args.max_parallel, wait=args.wait,
                        device="cuda" if args.gpus_per_node else "cpu")
    print(f"submitted {len(jobs)} runs (first job {jobs[0].job_id}); logs in {folder}. "
          f"Re-run this command after any failure: it submits exactly what is missing.")
    if not args.wait:
        return 0
    outcomes = Counter(job.result() if job.exception() is None else "crashed" for job in jobs)
    print(", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())))
    return 0 if set(outcomes) <= {*FINISHED_STATUSES, "recorded"} else 1


if __name__ == "__main__":
    sys.exit(main())
