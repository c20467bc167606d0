"""Run a list of configs, skipping those already recorded: the local run dispatcher.

Each finished run is written to the results store the moment it ends, so a sweep that is killed
loses only the runs in flight, and running it again does exactly what is missing.

On the CPU, runs go to a pool of processes with the cores divided among them. On a GPU, a
``batched_fn`` (e.g. ``lib.cff.batched.train_cff_seeds``) trains the seeds of each cell as one stacked
model: the paper's model is far too small to fill a GPU on its own. It falls back to training the
seeds one by one only for what that is for, and says so in each record's ``extra.batched``.
:class:`RecordRun` is the same run-and-record step as one task of a Slurm array (``lib.dispatch``).
"""
from __future__ import annotations

import inspect
import json
import os
import queue
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from multiprocessing.queues import Queue as ProcessQueue
from typing import Callable

import submitit
import torch

from lib.core.config import as_dict, call
from lib.core.progress import Sweep, reporting
from lib.run.provenance import rerun_command, train_function_name
from lib.run.results import ResultsStore, utc_now


def run_one(train_fn: Callable, config, data_root: str | None,
            device: str = "cpu") -> tuple[str, dict, dict, str | None]:
    """Run one config; never raises, so one broken run cannot take down a sweep."""
    started_at = utc_now()
    t0 = time.perf_counter()
    try:
        # CFF takes the device as an argument; a method whose config holds it (SSL) ignores the sweep's.
        takes_device = "device" in inspect.signature(train_fn).parameters
        on_device = {"device": device} if device != "cpu" and takes_device else {}
        metrics = dict(call(train_fn, config, data_root=data_root, progress=None, **on_device))
    except Exception:  # recorded as "failed" and retried by the next sweep
        return "failed", {}, {"started_at": started_at, "wall_s": time.perf_counter() - t0}, traceback.format_exc()
    return _outcome(metrics, started_at, time.perf_counter() - t0)


def _outcome(metrics: dict, started_at: str, wall_s: float) -> tuple[str, dict, dict, None]:
    """(status, metrics, timings, error) of a finished run, its timings moved out of the metrics."""
    metrics = dict(metrics)
    timings = {"started_at": started_at, "wall_s": wall_s}
    for key in ("train_s", "eval_s"):
        if key in metrics:
            timings[key] = metrics.pop(key)
    return metrics.pop("status"), metrics, timings, None


def _cells(configs: list[dict]) -> list[list[dict]]:
    """Group configs into cells: same config but for the seed."""
    cells: dict[str, list[dict]] = {}
    for c in configs:
        cells.setdefault(json.dumps({k: v for k, v in as_dict(c).items() if k != "seed"}, sort_keys=True), []).append(c)
    return list(cells.values())


NON_FINITE = "a seed's loss turned non-finite, which stops the step for every seed of the cell"


def _run_cell(batched_fn: Callable, train_fn: Callable, cell: list, data_root: str | None,
              device: str) -> list[tuple[tuple, dict]]:
    """One cell's seeds as one batched model: ``(outcome, extra.batched)`` per seed.

    The seeds are trained one by one instead only when ``batched_fn`` returns None (a seed's loss
    turned non-finite: the single runs record which seed diverged and let the others finish) or
    the stacked model does not fit in GPU memory. Any other exception is a bug in the batched path:
    every seed of the cell is recorded as failed with its traceback, never retried silently.
    """
    started_at = utc_now()
    t0 = time.perf_counter()
    try:
        results = batched_fn(cell, data_root=data_root, device=device, progress=None)
        fallback = NON_FINITE if results is None else None
    except torch.OutOfMemoryError as err:
        torch.cuda.empty_cache()
        fallback = f"out of GPU memory for {len(cell)} stacked seeds ({str(err).splitlines()[0]})"
    except Exception:  # recorded as "failed" below, with the traceback
        timings = {"started_at": started_at, "wall_s": (time.perf_counter() - t0) / len(cell)}
        error = traceback.format_exc()
        return [(("failed", {}, timings, error), {"seeds": len(cell), "failed": True}) for _ in cell]
    if fallback is not None:
        return [(run_one(train_fn, c, data_root, device), {"seeds": len(cell), "fallback": fallback}) for c in cell]
    wall_s = (time.perf_counter() - t0) / len(cell)
    return [(_outcome(m, started_at, wall_s), {"seeds": len(cell)}) for m in results]


def record_run(store: ResultsStore, train_fn: Callable, config, outcome: tuple, data_root: str | None,
               batched: dict | None = None, extra: dict | None = None) -> dict:
    """Write one run's record: its outcome (from :func:`run_one`), the command that re-runs it, ``extra``
    (e.g. the id of the extension plan it belongs to, ``{"plan": ...}``) and, for a run of a batched cell,
    ``extra.batched`` (the cell's size, and why it fell back if it did)."""
    status, metrics, timings, error = outcome
    config = as_dict(config)
    provenance = {**(extra or {}), "train": train_function_name(train_fn),
                  "rerun": rerun_command(train_fn, config, data_root)}
    if batched is not None:
        provenance["batched"] = batched
    # a simulation's config names no dataset: it generates its data
    return store.write(config, seed=config["seed"], dataset=config.get("dataset", "generated"), status=status,
                       metrics=metrics, timings=timings, error=error, extra=provenance)


class RecordRun(submitit.helpers.Checkpointable):
    """One array task: train one config and write its record, unless it is recorded already.

    Checkpointable: on preemption or at the time limit submitit calls ``checkpoint``, which
    resubmits this same call, so the run is requeued and starts over.
    """

    def __init__(self, store: ResultsStore, train_fn: Callable, data_root: str | None, device: str, threads: int,
                 extra: dict | None = None):
        self.store, self.train_fn, self.data_root = store, train_fn, data_root
        self.device, self.threads, self.extra = device, threads, extra

    def __call__(self, config: dict) -> str:
        if self.store.is_finished(config):  # a requeued or duplicate task whose run was recorded meanwhile
            return "recorded"
        torch.set_num_threads(self.threads)
        outcome = run_one(self.train_fn, config, self.data_root, self.device)
        record_run(self.store, self.train_fn, config, outcome, self.data_root, extra=self.extra)
        return outcome[0]


_reports: ProcessQueue | None = None  # in a pool worker: where its runs' progress goes to the sweep's process


def _init_worker(threads: int, reports: ProcessQueue) -> None:
    global _reports
    torch.set_num_threads(threads)
    reports.cancel_join_thread()  # a worker exits without waiting for reports nobody reads any more
    _reports = reports


def _run_in_worker(train_fn: Callable, config, data_root: str | None, key: str) -> tuple:
    """:func:`run_one` in a pool worker; its progress goes to the sweep's process as ``(key, done, total, label)``."""
    with reporting(lambda done, total, desc: _reports.put((key, done, total, desc))):
        return run_one(train_fn, config, data_root)


def _relay_reports(reports: ProcessQueue, sweep: Sweep) -> None:
    """Pass the pool workers' reports received so far to the sweep's bar."""
    while True:
        try:
            key, done, total, desc = reports.get_nowait()
        except queue.Empty:
            return
        sweep.listener(key)(done, total, desc)


REFRESH_S = 1.0  # how often the sweep's process passes on its workers' progress


def run_sweep(store: ResultsStore, configs: list[dict], train_fn: Callable, *, workers: int = 1,
              force: bool = False, data_root: str | None = None, progress: bool | None = None,
              device: str = "cpu", batched_fn: Callable | None = None, extra: dict | None = None) -> list[dict]:
    """Run every config that has no finished record (all of them if ``force``); return all records. A config that
    another study's run computed already is recorded from that run instead (``ResultsStore.adopt_same_computations``).

    ``workers > 1`` runs configs in that many processes, with the machine's cores divided among
    them so that they do not fight over threads. With ``batched_fn`` (meant for a GPU ``device``) the
    seeds of each cell run as one batched model instead, in this process. Records are written by this
    process only. ``progress``: the bar over the runs (``lib.core.progress``; None: in a notebook or on a
    terminal), which every run's steps move as they train, in this process or in a worker. ``extra`` goes
    into every record this sweep writes (``lib.decide``: the plan's id).
    """
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers={workers!r} is not allowed: an integer >= 1")
    store.remove_stale_temp_files()  # left by a sweep killed mid-write; its process is gone
    unique = {store.run_id(c): c for c in configs}
    if not force:  # a run another study computed already is recorded from it, not trained again
        store.adopt_same_computations(unique.values())
    todo = [c for c in unique.values() if force or not store.is_finished(c)]
    sweep = Sweep(len(todo), f"{store.study} [{store.profile}]", enabled=progress, recorded=len(unique) - len(todo))

    def record(config, outcome, batched=None, key=None):
        record_run(store, train_fn, config, outcome, data_root, batched, extra)
        sweep.finished(key or store.run_id(config))

    if batched_fn is not None:
        for cell in _cells(todo):
            key = store.run_id(cell[0])
            with reporting(sweep.listener(key, runs=len(cell))):
                outcomes = _run_cell(batched_fn, train_fn, cell, data_root, device)
            for config, (outcome, batched) in zip(cell, outcomes):
                record(config, outcome, batched, key)
    elif workers == 1 or len(todo) <= 1:
        for config in todo:
            key = store.run_id(config)
            with reporting(sweep.listener(key)):
                outcome = run_one(train_fn, config, data_root)
            record(config, outcome, key=key)
    else:
        threads = max(1, (os.cpu_count() or 1) // workers)
        context = get_context("spawn")
        reports = context.Queue()
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                 initargs=(threads, reports)) as pool:
            futures = {pool.submit(_run_in_worker, train_fn, c, data_root, store.run_id(c)): c for c in todo}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=REFRESH_S, return_when=FIRST_COMPLETED)
                _relay_reports(reports, sweep)
                for future in done:
                    record(futures[future], future.result())
    sweep.close()
    return [store.load(run_id) for run_id in unique]
