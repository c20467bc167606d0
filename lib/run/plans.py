"""Extension plans in the results store: the design of a second look, fixed before its runs.

    <results>/plans/<profile>/<plan_id>.json

A plan (written by ``lib.decide``) names, per study, the claims it extends and for each the seeds of both
looks, the test, the claim's level and the nominal levels of the two looks (``lib.core.sequential``), the
planned power, and the verdict the claim had at look 1; and the runs that make look 2, each with its config.
The plan id is the hash of that design, so the same design always has the same id; the file also keeps the
commit, versions and time it was written at, like a run's record. The runs of a plan are recorded in the
study's own runs folder with ``extra.plan`` = the plan id.

A study's look 2 is read only when every run the plan gives it has a finished record: a look read on part
of its seeds would be a third look that no boundary accounts for.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from lib.run.results import (
    FINISHED_STATUSES,
    ResultsStore,
    atomic_write_text,
    config_hash,
    environment,
    results_folder,
    utc_now,
)

SCHEMA_VERSION = 1


def plans_dir(results: os.PathLike | str, profile: str) -> Path:
    return Path(results) / "plans" / profile


def write_plan(results: os.PathLike | str, profile: str, design: dict) -> dict:
    """Record ``design`` (``{"studies": {study: {"claims": [...], "runs": [...]}}, ...}``) as a plan of
    ``profile``; returns the plan with its id. Writing the same design again changes nothing."""
    plan_id = config_hash({"profile": profile, **design})
    path = plans_dir(results, profile) / f"{plan_id}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    plan = {"schema_version": SCHEMA_VERSION, "plan_id": plan_id, "profile": profile, **design,
            "environment": environment(exclude=[results_folder(Path(results))]), "written_at": utc_now()}
    atomic_write_text(path, json.dumps(plan, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False) + "\n")
    return plan


def load_plans(results: os.PathLike | str, profile: str) -> list[dict]:
    """Every plan of ``profile``, oldest first."""
    folder = plans_dir(results, profile)
    plans = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")] if folder.is_dir() else []
    return sorted(plans, key=lambda plan: plan["written_at"])


def study_extension(plans: list[dict], study: str) -> tuple[dict, dict] | None:
    """The plan that extends ``study`` and its part of it (claims, runs), or None. A claim is extended by at
    most one plan (``lib.decide`` never plans a claim twice); a study's claims may come from several plans,
    of which the newest is returned here with the claims of all of them."""
    parts = [(plan, plan["studies"][study]) for plan in plans if study in plan["studies"]]
    if not parts:
        return None
    claims = [claim for _, part in parts for claim in part["claims"]]
    runs = [run for _, part in parts for run in part["runs"]]
    return parts[-1][0], {"claims": claims, "runs": runs}


def finished_runs(store: ResultsStore, part: dict) -> tuple[list[dict], list[dict]]:
    """The plan's runs of this study that have a finished record (the records) and those still to run
    (their configs)."""
    done, todo = [], []
    for run in part["runs"]:
        record = store.load(run["run_id"])
        if record is not None and record["status"] in FINISHED_STATUSES:
            done.append(record)
        else:
            todo.append(run["config"])
    return done, todo
