"""Extension plans in the results store: the design of a second look, fixed before its runs.

    <results>/plans/<profile>/<plan_id>.json

A plan (written by ``lib.decide``) names, per study, the claims it extends and for each the seeds of both
looks, the test, the claim's level and the nominal levels of the two looks (``lib.core.sequential``), the
planned power, and the verdict the claim had at look 1; and the runs that make look 2, each with its config.
The plan id is the hash of that design, so the same design always has the same id; the file also keeps the
commit, versions and time it was written at, like a run's record. The runs of a plan are recorded in the
study's own runs folder with ``extra.plan`` = the plan id.

A claim's look 2 is read only when every run the plan gives its arms has a finished record, and then on its
planned seeds alone (:func:`lib.core.looks.two_looks`, given :func:`extension`'s claims): a look read on part of
its seeds, or on more, would be a look that no boundary accounts for.

A plan comes before its runs. :func:`write_plan` refuses a design any of whose runs already has a record, unless
the design names it under ``excluded``; and a plan is read without every run whose record was written before the
plan (one shipped plan, 78732a2131d025fb, was written after 8 of its runs, another plan's, had finished): its look 2
then holds that many fewer seeds, and its boundary spends the rest of α at the information it does hold
(:func:`lib.core.sequential.look_two_boundary`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from lib.core.looks import PlannedClaim, cells_key
from lib.core.sequential import Boundaries, look_two_boundary
from lib.run.files import atomic_write_text
from lib.run.provenance import environment
from lib.run.results import (
    FINISHED_STATUSES,
    ResultsStore,
    config_hash,
    results_folder,
    utc_now,
)

SCHEMA_VERSION = 1


def plans_dir(results: os.PathLike | str, profile: str) -> Path:
    return Path(results) / "plans" / profile


class PlanAfterRunsError(ValueError):
    """A plan whose runs already have records: it would be a look chosen after seeing them."""


def write_plan(results: os.PathLike | str, profile: str, design: dict) -> dict:
    """Record ``design`` (``{"studies": {study: {"claims": [...], "runs": [...]}}, ...}``) as a plan of
    ``profile``; returns the plan with its id. Writing the same design again changes nothing. A design any of whose
    runs already has a record is refused (:class:`PlanAfterRunsError`) unless the design lists that run id under
    ``excluded``, which the reading leaves out."""
    plan_id = config_hash({"profile": profile, **design})
    path = plans_dir(results, profile) / f"{plan_id}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    excluded = set(design.get("excluded", ()))
    for study, part in design["studies"].items():
        store = ResultsStore(results, study, profile)
        early = [run["run_id"] for run in part["runs"] if run["run_id"] not in excluded and store.load(run["run_id"])]
        if early:
            raise PlanAfterRunsError(f"plan {plan_id} of {study}: {len(early)} of its runs already have a record "
                                     f"({', '.join(early[:3])}{', ...' if len(early) > 3 else ''}); a plan is written "
                                     "before its runs: plan other seeds, or list these under 'excluded'")
    plan = {"schema_version": SCHEMA_VERSION, "plan_id": plan_id, "profile": profile, **design,
            "environment": environment(exclude=[results_folder(Path(results))]), "written_at": utc_now()}
    atomic_write_text(path, json.dumps(plan, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False) + "\n")
    return plan


def registered_id(plan: dict) -> str:
    """The id a plan's registered design hashes to (:func:`write_plan`). Plans written before claims had ids
    (before 2026-12-07) gained an ``id`` per claim afterwards, their design otherwise unchanged, so their id is the
    hash of the design without those: a plan's content is what it registered (``tests/test_decide.py``)."""
    design = {k: v for k, v in plan.items() if k not in ("schema_version", "plan_id", "environment", "written_at")}
    if plan.get("ids_added_after"):
        design.pop("ids_added_after")
        design["studies"] = {study: {**part, "claims": [{k: v for k, v in claim.items() if k != "id"}
                                                        for claim in part["claims"]]}
                             for study, part in design["studies"].items()}
    return config_hash(design)


def load_plans(results: os.PathLike | str, profile: str) -> list[dict]:
    """Every plan of ``profile``, oldest first."""
    folder = plans_dir(results, profile)
    plans = [json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")] if folder.is_dir() else []
    return sorted(plans, key=lambda plan: plan["written_at"])


@dataclass
class Extension:
    """A study's extension in one profile: its finished records and its planned claims."""

    records: list[dict] = field(default_factory=list)
    claims: list[PlannedClaim] = field(default_factory=list)

    @property
    def run_ids(self) -> set[str]:
        return {run_id for claim in self.claims for run_id in claim.runs}


def extension(store: ResultsStore) -> Extension:
    """The extension plans of the store's study and profile (the store's results folder), with the records of
    their runs that have finished."""
    out = Extension()
    seen = set()
    for plan in load_plans(store.root, store.profile):
        part = plan["studies"].get(store.study)
        if part is None:
            continue
        done, _ = finished_runs(store, part)
        finished = {r["run_id"] for r in done}
        out.records += [r for r in done if r["run_id"] not in seen]
        seen |= finished
        early = {r["run_id"] for r in done if r["written_at"] < plan["written_at"]} | set(plan.get("excluded", ()))
        for claim in part["claims"]:
            design = Boundaries(claim["n1"], claim["n2"], claim["alpha"], claim["level1"], claim["level2"],
                                claim["planned_power"])
            runs = tuple(run_id for run_id in claim["runs"] if run_id not in early)
            excluded = tuple(run_id for run_id in claim["runs"] if run_id in early)
            if excluded:  # the arm that lost them holds at most n2 - len(excluded) seeds: read at that information
                design = replace(look_two_boundary(design.n1, design.n2 - len(excluded), design.alpha, design.level1),
                                 planned_power=design.planned_power)
            if "id" not in claim:
                raise ValueError(f"plan {plan['plan_id']}: its claim {claim['quantity']!r} carries no id; every plan's "
                                 "claims are keyed by the ids docs/claims.md lists")
            out.claims.append(PlannedClaim(claim["id"], claim["quantity"], claim["measure"], cells_key(claim["cells"]),
                                           plan["plan_id"], design, runs, sum(run_id in finished for run_id in runs),
                                           claim["look1"], excluded))
    return out


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
