"""Decide what can be decided: plan the seeds that would settle a profile's open claims, within a budget,
as a two-look design fixed before its runs, and run it.

    python -m lib.decide --profile cpu --budget 8 --dry-run                      # the plan; nothing is written
    python -m lib.decide --profile cpu --budget 8 --data-root ../shared/data     # write the plan, run it here
    python -m lib.decide --profile paper --budget 200 --backend slurm --partition gpu --gpus-per-node 1

It reads each study's typed verdict records (``results/tables/<study>_<profile>_verdicts.json``: never the reader's
CSV, its verdict text or its rounded numbers) and the run records' measured seconds per run. A claim is a candidate
when more seeds could decide it: measured, in the paper's regime, tested by a t-based measure or a variance ratio
whose arms are runs (its ``cells``), and not decided at look 1 under the design (``lib.core.sequential``: the
shipped seeds are look 1, read against O'Brien–Fleming's look-1 boundary; a claim decided at the family level α/m
but not at that boundary is re-read at look 2, or the two looks together would spend more than α/m). Its look-2
seeds are the fewest whose simulated two-look power at the published value reaches 80% (its effect in the SDs the
table's power used; a variance ratio's, log R of the published ratio, with the rule the verdicts apply simulated);
its cost, the runs its arms lack at that many seeds times their median seconds in the records, divided among the
study's parallel processes.

Within ``--budget`` wall hours the plan takes each study's central claim (its ``HEADLINE``) first, cheapest
first, then the other claims, each time the one whose runs not yet planned cost least: the most claims for
the budget. ``--dry-run`` prints the plan and every claim left out, with why. Otherwise the plan is recorded
(``lib.run.plans``) and its runs, and those of earlier plans still missing, go to ``lib.dispatch``'s backends
(a process pool here, or Slurm) with ``extra.plan`` in each record. A claim is planned once: a claim in a
plan, decided at its look 2 or not, is never planned again (two looks are all its design has). *Not reproduced*
stops nothing at look 1: it is read at a design's last look only (lib.core.verdicts). A run of the look-2 seeds that
has a record already (another plan's) was seen before the plan: its seed is skipped, the next one takes its
place, and the plan names the skipped runs under ``excluded``.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from lib import PROJECT_ROOT
from lib.core import sequential
from lib.core.config import as_dict
from lib.core.params import PROFILE_METAVAR, ParameterError, profile_option
from lib.core.verdicts import OUT_OF_REGIME, TARGET_POWER
from lib.dispatch import Plan, add_backend_arguments, execute
from lib.run.plans import finished_runs, load_plans, write_plan
from lib.run.results import FINISHED_STATUSES
from lib.studies import STUDIES, find_study
from lib.studies.study import Study
from lib.studies.variants import open_store, resolve_command

TESTS = {"one_sample": "one_sample", "paired_difference": "paired", "mean_difference": "welch", "ratio": "welch",
         "variance_ratio": sequential.VARIANCE_RATIO}


@dataclass
class Candidate:
    """A claim of a decided table, with what extending it would take."""

    study: Study
    quantity: str
    measure: str
    verdict: str  # at look 1, a word of the grammar (lib.core.verdicts.VERDICTS)
    p: float
    alpha: float  # the claim's two-sided level in its family (α / m)
    n1: int  # seeds per arm at look 1
    effect: float  # the published effect on its test's scale: SDs (the table's), log R for a variance ratio
    cells: list[dict]
    seeds_parameters: list[str]
    central: bool
    why_not: str = ""  # empty: it can be proposed
    design: sequential.Boundaries | None = None
    power: float = float("nan")  # planned two-look power at the published value
    configs: dict = field(default_factory=dict)  # run id -> config: the runs look 2 adds to its arms
    seconds: dict = field(default_factory=dict)  # run id -> median measured seconds of its cell
    excluded: set = field(default_factory=set)  # runs of seeds recorded already (another plan's): skipped
    plan_key: str = ""  # the name plans know the claim by (the table's plan_key), where it differs from quantity

    @property
    def key(self) -> tuple[str, str]:
        return self.study.name, self.plan_key or self.quantity

    def as_dict(self) -> dict:
        return {"quantity": self.plan_key or self.quantity, "measure": self.measure, "test": TESTS[self.measure],
                "central": self.central, "effect": self.effect, "look1": {"verdict": self.verdict, "p": self.p},
                "cells": self.cells, "runs": sorted(self.configs), **self.design.as_dict()}


def _number(value) -> float:
    return float("nan") if value is None else float(value)


def _effect(record: dict) -> float:
    """The published effect a claim's two-look power is simulated at: its effect in SDs, or for a variance ratio
    log R of the published ratio."""
    if record["measure"] == "variance_ratio":
        ratio = _number(record.get("published"))
        return math.log(ratio) if math.isfinite(ratio) and ratio > 0 else float("nan")
    return _number(record.get("effect_sd"))


def _matches(row: pd.Series, cells: list[dict]) -> bool:
    return any(all(str(row.get(k)) == str(v) for k, v in cell.items()) for cell in cells)


def _frame(study: Study, configs: list) -> pd.DataFrame:
    """The study's runs frame of configs not yet run (no metrics): the columns its cells name."""
    records = [{"config": as_dict(c), "metrics": {}, "run_id": "", "status": ""} for c in configs]
    return study.module.runs_frame(records)


def _median_seconds(study: Study, store) -> tuple[pd.DataFrame, float]:
    """The study's finished runs frame with each run's measured wall seconds, and their median."""
    records = [r for r in store.records() if r["status"] in FINISHED_STATUSES]
    frame = study.module.runs_frame(records) if records else pd.DataFrame()
    seconds = [r["timings"].get("wall_s", float("nan")) for r in records]
    if len(frame):
        frame = frame.assign(wall_s=seconds)
    return frame, float(np.nanmedian(seconds)) if seconds else float("nan")


def candidates(profile: str, *, results_dir: str = "results", only: list[str] | None = None,
               data_root: str | None = None) -> list[Candidate]:
    """Every claim of the profile's decided tables (of the ``only`` studies), with its design and cost, or
    why it is not proposed."""
    results = PROJECT_ROOT / results_dir
    planned = {(study, claim["quantity"]): plan["plan_id"] for plan in load_plans(results, profile)
               for study, part in plan["studies"].items() for claim in part["claims"]}
    found = []
    for study in (find_study(s) for s in (only or STUDIES)):
        settings, _ = resolve_command(study, profile=profile, parameters={}, data_root=data_root,
                                      results_dir=results_dir)
        store, _ = open_store(study, settings, [], results_dir, None)
        records = store.verdict_records()  # the typed records: no verdict text, no rounded number is read
        if records is None:
            continue
        measured = None  # the study's finished runs and their seconds, read once a claim needs them
        for record in (r for r in records if r["kind"] == "claim"):
            candidate = Candidate(
                study, record["quantity"], record["measure"], record["verdict"], _number(record["p"]),
                _number(record["level"]), min(record["n"], default=0), _effect(record), record["cells"],
                record["seeds_parameters"], record["quantity"].startswith(study.module.HEADLINE),
                plan_key=record["plan_key"])
            candidate.why_not = _why_not(candidate, planned)
            if not candidate.why_not:
                measured = measured or _median_seconds(study, store)
                _plan_look_two(candidate, settings, store, *measured)
            found.append(candidate)
    return found


def _why_not(c: Candidate, planned: dict) -> str:
    if c.key in planned:
        return f"in plan {planned[c.key]}: a claim has two looks, no more"
    if c.verdict == "not measured":
        return "not measured"
    if c.verdict == OUT_OF_REGIME:
        return (f"{OUT_OF_REGIME}: more seeds at this setting would not reach the paper's regime "
                "(the regime search in the report)")
    if c.measure not in TESTS:
        return f"its measure ({c.measure}) has no two-look design here: t-based measures and variance ratios do"
    if not c.cells:
        return "its claim names no cells of runs to extend (simulations or numbers derived from several cells)"
    if not (math.isfinite(c.effect) and c.effect != 0 and c.n1 >= 2):
        return "no spread to plan with" if c.measure != "variance_ratio" else "no published ratio to plan with"
    return ""


def _plan_look_two(c: Candidate, settings: dict, store, done: pd.DataFrame, typical: float) -> None:
    """Fill in the candidate's look-2 seeds, boundaries, planned power and the runs it lacks (or why not)."""
    n2, power = sequential.look_two_seeds(TESTS[c.measure], c.effect, c.n1, c.alpha)
    if n2 is None:
        effect = (f"ratio {math.exp(c.effect):.2g}" if c.measure == "variance_ratio"
                  else f"effect {c.effect:.2g} SD")
        c.why_not = f"power {power:.0%} even at {sequential.MAX_SEEDS} seeds per arm ({effect} at α = {c.alpha:.2g})"
        return
    c.design = replace(sequential.boundaries(c.n1, n2, c.alpha), planned_power=round(power, 4))
    c.power = power
    if c.p < c.design.level1 and c.verdict != "inconclusive":
        c.why_not = f"decided at look 1 under the design: p {c.p:.2g} < {c.design.level1:.2g}"
        return
    for run_id, cfg in _fresh_seeds(c, settings, store, n2).items():
        c.configs[run_id] = cfg
        row = _frame(c.study, [cfg]).iloc[0]
        same = done[[_matches(r, [{k: row[k] for k in c.cells[0] if k in row}]) for _, r in done.iterrows()]] \
            if len(done) else done
        seconds = float(same.wall_s.median()) if len(same) else typical
        c.seconds[run_id] = seconds if math.isfinite(seconds) else typical


def _fresh_seeds(c: Candidate, settings: dict, store, n2: int) -> dict:
    """The runs of the claim's arms for n₂ - n₁ seeds from n₁ on, none of which has a record yet: a seed any of whose
    runs was recorded before the plan (another plan's) was seen already, so it is skipped in every arm (a paired
    design keeps its pairs) and named in ``c.excluded``; the next seed takes its place, so that look 2 holds n₂."""
    extra = 0
    while True:
        wider = {**settings, **{name: n2 + extra for name in c.seeds_parameters}}
        configs = [cfg for cfg in c.study.module.plan(wider) if as_dict(cfg)["seed"] >= c.n1]
        frame = _frame(c.study, configs)
        arms = [(as_dict(cfg)["seed"], store.run_id(cfg), cfg)
                for cfg, (_, row) in zip(configs, frame.iterrows()) if _matches(row, c.cells)]
        seen = {seed for seed, run_id, _ in arms if store.load(run_id) is not None}
        fresh = sorted({seed for seed, _, _ in arms} - seen)[:n2 - c.n1]
        if len(fresh) == n2 - c.n1:
            c.excluded = {run_id for seed, run_id, _ in arms if seed in seen and seed < max(fresh)}
            return {run_id: cfg for seed, run_id, cfg in arms if seed in fresh}
        extra += n2 - c.n1 - len(fresh)


def workers_of(study: Study, profile: str) -> int:
    settings, _ = resolve_command(study, profile=profile, parameters={})
    return int(study.module.sweep_options(settings).get("workers", 1))


def select(found: list[Candidate], budget_hours: float, workers: dict[str, int]) -> tuple[list[Candidate], dict]:
    """The claims the budget decides, central ones first, then each time the cheapest in runs not yet
    planned; and, for every other proposable claim, why it was left out."""
    open_ = [c for c in found if not c.why_not]
    chosen, runs, spent, left = [], {}, 0.0, {}

    def cost(c):
        return sum(s for rid, s in c.seconds.items() if rid not in runs) / workers[c.study.name] / 3600

    for central in (True, False):
        pool = [c for c in open_ if c.central == central]
        while pool:
            best = min(pool, key=cost)
            pool.remove(best)
            hours = cost(best)
            if spent + hours > budget_hours:
                left[best.key] = f"over the budget: {hours:.2f} more hours ({spent:.2f} of {budget_hours:g} planned)"
                continue
            chosen.append(best)
            spent += hours
            runs.update(best.seconds)
    return chosen, left


def design_of(chosen: list[Candidate], budget_hours: float, workers: dict[str, int]) -> dict:
    """The plan as ``lib.run.plans`` records it: per study its claims and the runs of look 2."""
    studies: dict[str, dict] = {}
    for c in chosen:
        part = studies.setdefault(c.study.name, {"claims": [], "runs": {}, "workers": workers[c.study.name]})
        part["claims"].append(c.as_dict())
        for run_id, config in c.configs.items():
            part["runs"][run_id] = {"run_id": run_id, "config": as_dict(config), "seconds": c.seconds.get(run_id, 0.0)}
    first = {}  # each run's first claim in the plan's order: the runs of the claims chosen first run first
    for i, c in enumerate(chosen):
        for run_id in c.configs:
            first.setdefault(run_id, i)
    for part in studies.values():
        part["runs"] = sorted(part["runs"].values(),
                              key=lambda run: (first[run["run_id"]], run["config"]["seed"], run["run_id"]))
        part["hours"] = round(sum(run["seconds"] for run in part["runs"]) / part["workers"] / 3600, 3)
    excluded = sorted(set().union(*(c.excluded for c in chosen)))
    return {"budget_hours": budget_hours, "spending": sequential.SPENDING, "target_power": TARGET_POWER,
            "order": list(studies), "studies": studies, **({"excluded": excluded} if excluded else {})}


def what_would_decide(found: list[Candidate], budget_hours: float, workers: dict[str, int]) -> str:
    """When the budget decides nothing, what would: the cheapest claim a two-look design can decide, its design and
    its wall hours (the budget to ask for), or that no budget can at this profile (each claim's reason below)."""
    open_ = [c for c in found if not c.why_not]
    if not open_:
        return ("nothing any budget can decide at this profile: every claim is decided, planned, out of the "
                "paper's regime or beyond 64 seeds per arm (each one's reason below)")

    def hours(c: Candidate) -> float:
        return sum(c.seconds.values()) / workers[c.study.name] / 3600
    cheapest = min(open_, key=hours)
    return (f"nothing within {budget_hours:g} wall hours; the cheapest claim a two-look design can decide is "
            f"{cheapest.study.number} {cheapest.quantity}: {cheapest.design.n1} → {cheapest.design.n2} seeds per arm, "
            f"{len(cheapest.seconds)} runs, {hours(cheapest):.2f} wall hours (--budget {math.ceil(hours(cheapest))})")


def describe(chosen: list[Candidate], left: dict, found: list[Candidate], budget_hours: float,
             workers: dict[str, int]) -> str:
    lines, spent, runs = [f"Plan within {budget_hours:g} wall hours (central claims first):"], 0.0, {}
    for i, c in enumerate(chosen, 1):
        new = {rid: s for rid, s in c.seconds.items() if rid not in runs}
        hours = sum(new.values()) / workers[c.study.name] / 3600
        spent += hours
        runs.update(new)
        left_out = (f"; {len(c.excluded)} run(s) of seeds recorded already (another plan's) skipped"
                    if c.excluded else "")
        lines.append(f"{i:>3}. {c.study.number} {'[central] ' if c.central else ''}{c.quantity}\n"
                     f"       {c.design.n1} → {c.design.n2} seeds per arm; look 1 p < {c.design.level1:.2g}, "
                     f"look 2 p < {c.design.level2:.2g} (α = {c.alpha:.2g}); planned power {c.power:.0%}; "
                     f"{len(new)} new runs, {hours:.2f} h (total {spent:.2f} h){left_out}")
    if not chosen:
        lines.append("    " + what_would_decide(found, budget_hours, workers))
    lines.append(f"{len(runs)} runs, {spent:.2f} wall hours.")
    lines.append("Not proposed:")
    for c in found:
        why = c.why_not or left.get(c.key)
        if why:
            lines.append(f"  - {c.study.number} {c.quantity}: {why}")
    return "\n".join(lines)


def pending(profile: str, results_dir: str, data_root: str | None) -> list[Plan]:
    """The runs of recorded plans that have no finished record, one ``lib.dispatch`` plan per study."""
    results = PROJECT_ROOT / results_dir
    plans = load_plans(results, profile)
    out = []
    for plan in plans:
        for name in plan["order"]:
            study = find_study(name)
            settings, _ = resolve_command(study, profile=profile, parameters={}, data_root=data_root,
                                          results_dir=results_dir)
            store, _ = open_store(study, settings, [], results_dir, None)
            _, todo = finished_runs(store, plan["studies"][name])
            if todo:
                out.append(Plan(study, settings, store, todo, todo, data_root, None, {"plan": plan["plan_id"]}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu", type=profile_option, metavar=PROFILE_METAVAR)
    parser.add_argument("--budget", type=float, default=8.0, help="wall hours the new plan may take")
    parser.add_argument("--only", nargs="*", help="study numbers or notebook names (default: every study)")
    parser.add_argument("--data-root", help="folder of <name>.npz arrays (else $DATA_ROOT, then torchvision's cache)")
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    add_backend_arguments(parser)
    args = parser.parse_args(argv)
    if not (math.isfinite(args.budget) and args.budget > 0):
        parser.error(f"--budget {args.budget!r} is not allowed: wall hours > 0")
    data_root = str(Path(args.data_root).resolve()) if args.data_root else None
    try:
        only = [find_study(s).number for s in args.only] if args.only else None
        found = candidates(args.profile, results_dir=args.results_dir, only=only, data_root=data_root)
    except (ParameterError, KeyError) as err:
        parser.error(str(err))
    workers = {c.study.name: workers_of(c.study, args.profile) for c in found}
    chosen, left = select(found, args.budget, workers)
    print(describe(chosen, left, found, args.budget, workers), flush=True)
    if not args.dry_run and chosen:
        plan = write_plan(PROJECT_ROOT / args.results_dir, args.profile, design_of(chosen, args.budget, workers))
        print(f"recorded plan {plan['plan_id']}", flush=True)
    queue = pending(args.profile, args.results_dir, data_root)
    for item in queue:
        print(f"{item.study.notebook} [{args.profile}] plan {item.extra['plan']}: {len(item.missing)} runs to run",
              flush=True)
    if args.dry_run:
        return 0
    status = 0
    for item in queue:
        status = max(status, execute(item, args))
    return status


if __name__ == "__main__":
    sys.exit(main())
