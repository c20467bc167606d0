"""Run a list of configs, skipping those already recorded: the local run dispatcher.

Each finished run is written to the results store the moment it ends, so a sweep that is killed
loses only the runs in flight, and running it again does exactly what is missing.
"""
from __future__ import annotations

import os
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Callable

import torch
from tqdm import tqdm  # plain bar: disable=None hides it off a terminal, e.g. under papermill

from lib.results import ResultsStore, utc_now


def _run_one(train_fn: Callable, config: dict, data_root: str | None) -> tuple[str, dict, dict, str | None]:
    """Run one config; never raises, so one broken run cannot take down a sweep."""
    started_at = utc_now()
    t0 = time.perf_counter()
    try:
        metrics = dict(train_fn(data_root=data_root, progress=False, **config))
        status, error = metrics.pop("status"), None
    except Exception:  # recorded as "failed" and retried by the next sweep
        metrics, status, error = {}, "failed", traceback.format_exc()
    timings = {"started_at": started_at, "wall_s": time.perf_counter() - t0}
    for key in ("train_s", "eval_s"):
        if key in metrics:
            timings[key] = metrics.pop(key)
    return status, metrics, timings, error


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def run_sweep(store: ResultsStore, configs: list[dict], train_fn: Callable, *, workers: int = 1,
              force: bool = False, data_root: str | None = None, progress: bool | None = None) -> list[dict]:
    """Run every config that has no finished record (all of them if ``force``); return all records.

    ``workers > 1`` runs configs in that many processes, with the machine's cores divided among
    them so that they do not fight over threads. Records are written by this process only.
    """
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"workers={workers!r} is not allowed: an integer >= 1")
    unique = {store.run_id(c): c for c in configs}
    todo = [c for c in unique.values() if force or not store.is_finished(c)]
    bar = tqdm(total=len(todo), desc=f"{store.study} [{store.profile}]", disable=None if progress is None else not progress)

    def record(config, outcome):
        status, metrics, timings, error = outcome
        store.write(config, seed=config["seed"], dataset=config["dataset"], status=status,
                    metrics=metrics, timings=timings, error=error)
        bar.update()

    if workers == 1 or len(todo) <= 1:
        for config in todo:
            record(config, _run_one(train_fn, config, data_root))
    else:
        threads = max(1, (os.cpu_count() or 1) // workers)
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker,
                                 initargs=(threads,)) as pool:
            futures = {pool.submit(_run_one, train_fn, c, data_root): c for c in todo}
            for future in as_completed(futures):
                record(futures[future], future.result())
    bar.close()
    return [store.load(run_id) for run_id in unique]
