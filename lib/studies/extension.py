"""Which claims more seeds could decide, and what that would take: the two-look extensions ``lib.decide`` plans
(its module docstring says how), and the table of them that the report shows (:func:`what_next`).

The planning lives here, below the studies' registry, rather than in ``lib.decide``, so that ``lib.report`` can
build its "What it would take" table from the very functions ``lib.decide`` uses: ``lib.decide`` stands on
``lib.dispatch``, and the report importing it would deepen every chain of imports past eight modules
(tests/test_imports.py). Nothing here imports the registry: callers pass the studies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from lib.core import sequential
from lib.core.config import as_dict
from lib.core.verdicts import OUT_OF_REGIME, TARGET_POWER
from lib.run.plans import load_plans
from lib.run.results import FINISHED_STATUSES, ResultsStore
from lib.studies.study import Study, is_central
from lib.studies.variants import PROJECT_ROOT, open_store, resolve_command

BUDGET_HOURS = 8.0  # the README's budget of wall hours: lib.decide's default and the report's table
BEYOND = "beyond two looks here"  # a claim whose two-look power stays under 80% at sequential.MAX_SEEDS
IN_PLAN = "in plan"  # a claim an extension plan holds already: the report's ledger shows it
UNDECIDED = ("inconclusive", OUT_OF_REGIME)  # the verdicts a reader wants the way out of

TESTS = {"one_sample": "one_sample", "paired_difference": "paired", "mean_difference": "welch", "ratio": "welch",
         "variance_ratio": sequential.VARIANCE_RATIO}


@dataclass
class Candidate:
    """A claim of a decided table, with what extending it would take."""

    study: Study
    id: str  # the claim's id (lib.core.verdicts.Claim.id): the key of plans and looks
    quantity: str  # for people
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
    seeds_needed: int | None = None  # one look: seeds per arm for 80% power at the published value (the table's)
    profile: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.study.name, self.id

    def as_dict(self) -> dict:
        return {"id": self.id, "quantity": self.quantity, "measure": self.measure, "test": TESTS[self.measure],
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


def in_cells(row: pd.Series, cells: list[dict]) -> bool:
    """Whether a runs frame's ``row`` lies in one of a claim's ``cells`` (each a mapping column -> value)."""
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


def candidates(studies: list[Study], profile: str, *, results_dir: str = "results",
               data_root: str | None = None) -> list[Candidate]:
    """Every claim of the profile's decided tables of ``studies``, with its design and cost, or why it is not
    proposed. It takes the studies rather than their names so that this module stands below the registry
    (``lib.studies``), where ``lib.report`` can reach it without deepening its chain of imports."""
    results = PROJECT_ROOT / results_dir
    planned = {(study, claim["id"]): plan["plan_id"] for plan in load_plans(results, profile)
               for study, part in plan["studies"].items() for claim in part["claims"]}
    found = []
    for study in studies:
        settings, _ = resolve_command(study, profile=profile, parameters={}, data_root=data_root,
                                      results_dir=results_dir)
        store, _ = open_store(study, settings, [], results_dir, None)
        records = store.verdict_records()  # the typed records: no verdict text, no rounded number is read
        if records is None:
            continue
        measured = None  # the study's finished runs and their seconds, read once a claim needs them
        for record in (r for r in records if r["kind"] == "claim"):
            candidate = Candidate(
                study, record["id"], record["quantity"], record["measure"], record["verdict"], _number(record["p"]),
                _number(record["level"]), min(record["n"], default=0), _effect(record), record["cells"],
                record["seeds_parameters"], is_central(record["id"], study.module),
                seeds_needed=record.get("seeds_needed"), profile=profile)
            candidate.why_not = _why_not(candidate, planned, settings.get("operating_points") or [])
            if not candidate.why_not:
                measured = measured or _median_seconds(study, store)
                _plan_look_two(candidate, settings, store, *measured)
            if candidate.why_not.startswith(BEYOND):
                candidate.why_not += "; " + paper_cost(candidate, settings, results_dir)
            found.append(candidate)
    return found


def _why_not(c: Candidate, planned: dict, points: list[str] = ()) -> str:
    """Why no two-look design is proposed for ``c``; "" where one can be. ``points``: the profile's operating points
    (issue 49), where a claim out of the paper's regime at the shipped setting is read again."""
    if c.key in planned:
        return f"{IN_PLAN} {planned[c.key]}: a claim has two looks, no more"
    if c.verdict == "not measured":
        return "not measured"
    if c.verdict == OUT_OF_REGIME and points and c.id.partition("@")[2] not in points:
        return (f"out of the paper's regime at the shipped setting, which more seeds would not reach: read again at "
                f"the profile's operating point ({', '.join(points)}: its rows in the table)")
    if c.verdict == OUT_OF_REGIME:
        return ("out of the paper's regime, which more seeds at this setting would not reach: python -m lib.regime "
                "looks for a setting that does (its table is in the report)")
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
        one_look = f"{c.seeds_needed:,} seeds per arm for 80% in one look" if c.seeds_needed else \
            "more seeds per arm for 80% than the power functions count"
        c.why_not = (f"{BEYOND}: {one_look} (two looks reach power {power:.0%} at {sequential.MAX_SEEDS} seeds "
                     f"per arm, {effect} at α = {c.alpha:.2g})")
        return
    c.design = replace(sequential.boundaries(c.n1, n2, c.alpha), planned_power=round(power, 4))
    c.power = power
    if c.p < c.design.level1 and c.verdict != "inconclusive":
        c.why_not = f"decided at look 1 under the design: p {c.p:.2g} < {c.design.level1:.2g}"
        return
    fresh = _fresh_seeds(c, settings, store, n2)
    if fresh is None:
        c.why_not = (f"its runs do not grow with {', '.join(c.seeds_parameters)}: the study's plan gives its cells no "
                     f"seeds beyond {c.n1}")
        return
    for run_id, cfg in fresh.items():
        c.configs[run_id] = cfg
        row = _frame(c.study, [cfg]).iloc[0]
        same = done[[in_cells(r, [{k: row[k] for k in c.cells[0] if k in row}]) for _, r in done.iterrows()]] \
            if len(done) else done
        seconds = float(same.wall_s.median()) if len(same) else typical
        c.seconds[run_id] = seconds if math.isfinite(seconds) else typical


def _fresh_seeds(c: Candidate, settings: dict, store, n2: int) -> dict | None:
    """The runs of the claim's arms for n₂ - n₁ seeds from n₁ on, none of which has a record yet: a seed any of whose
    runs was recorded before the plan (another plan's) was seen already, so it is skipped in every arm (a paired
    design keeps its pairs) and named in ``c.excluded``; the next seed takes its place, so that look 2 holds n₂.
    None where widening the claim's seeds parameters adds no run to its cells (a plan whose cells ignore them)."""
    extra = 0
    while extra <= sequential.MAX_SEEDS:
        wider = {**settings, **{name: n2 + extra for name in c.seeds_parameters}}
        configs = [cfg for cfg in c.study.module.plan(wider) if as_dict(cfg)["seed"] >= c.n1]
        frame = _frame(c.study, configs)
        arms = [(as_dict(cfg)["seed"], store.run_id(cfg), cfg)
                for cfg, (_, row) in zip(configs, frame.iterrows()) if in_cells(row, c.cells)]
        seen = {seed for seed, run_id, _ in arms if store.load(run_id) is not None}
        fresh = sorted({seed for seed, _, _ in arms} - seen)[:n2 - c.n1]
        if len(fresh) == n2 - c.n1:
            c.excluded = {run_id for seed, run_id, _ in arms if seed in seen and seed < max(fresh)}
            return {run_id: cfg for seed, run_id, cfg in arms if seed in fresh}
        extra += n2 - c.n1 - len(fresh)
    return None


def workers_of(study: Study, profile: str) -> int:
    settings, _ = resolve_command(study, profile=profile, parameters={})
    return int(study.module.sweep_options(settings).get("workers", 1))


def select(found: list[Candidate], budget_hours: float,
           workers: dict[str, int]) -> tuple[list[Candidate], dict, dict]:
    """The claims the budget decides, central ones first, then each time the cheapest in runs not yet
    planned; for every other proposable claim, why it was left out; and for every proposable claim, chosen or
    not, its cost when the budget weighed it (new runs, wall hours), so that whoever shows a claim's cost shows
    the number the choice was made on."""
    open_ = [c for c in found if not c.why_not]
    chosen, runs, spent, left, costs = [], {}, 0.0, {}, {}

    def cost(c):
        return sum(s for rid, s in c.seconds.items() if rid not in runs) / workers[c.study.name] / 3600

    for central in (True, False):
        pool = [c for c in open_ if c.central == central]
        while pool:
            best = min(pool, key=cost)
            pool.remove(best)
            hours = cost(best)
            costs[best.key] = (sum(1 for rid in best.seconds if rid not in runs), hours)
            if spent + hours > budget_hours:
                left[best.key] = (f"over the budget: {costs[best.key][0]} runs, {hours:.2f} more hours "
                                  f"({spent:.2f} of {budget_hours:g} planned)")
                continue
            chosen.append(best)
            spent += hours
            runs.update(best.seconds)
    return chosen, left, costs


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




def _runs_per_seed(c: Candidate, settings: dict) -> int:
    """How many runs one seed adds to the claim's arms in its profile's plan (its cells, every config of them)."""
    configs = c.study.module.plan(settings)
    frame = _frame(c.study, configs)
    arms = [as_dict(cfg)["seed"] for cfg, (_, row) in zip(configs, frame.iterrows()) if in_cells(row, c.cells)]
    return round(len(arms) / len(set(arms))) if arms else 0


def paper_cost(c: Candidate, settings: dict, results_dir: str | Path = "results") -> str:
    """What the one-look experiment of a claim beyond two looks would cost at the paper profile, said plainly: its
    runs (the claim's seeds for 80% times the runs a seed adds to its arms) and their GPU-hours at the median
    measured time of a paper run of its cells, or that no run at the paper profile has measured that time yet. The
    seeds come from the verdict table and are never passed through a command's parameter check, whose limits are
    there to stop a typo, not to price an experiment."""
    if not c.seeds_needed:
        return "its cost at the paper profile unknown (no seed count reaches 80%)"
    runs = c.seeds_needed * _runs_per_seed(c, settings)
    store = ResultsStore(PROJECT_ROOT / results_dir, c.study.name, "paper")
    done, typical = _median_seconds(c.study, store)
    same = done[[in_cells(row, c.cells) for _, row in done.iterrows()]] if len(done) else done
    seconds = float(same.wall_s.median()) if len(same) else typical
    if not math.isfinite(seconds):
        return f"{runs:,} runs at the paper profile, time per run unknown (no run recorded there)"
    return f"≈ {runs * seconds / 3600:,.0f} GPU-hours at the paper profile ({runs:,} runs at {seconds:.0f} s each)"


def budget_for(c: Candidate, found: list[Candidate], workers: dict[str, int]) -> int:
    """The smallest whole number of wall hours whose plan takes the claim: the budget to ask ``lib.decide`` for.
    It is searched rather than added up because the plan takes central claims first: a larger budget can let a
    dearer central claim in ahead of this one."""
    total = sum(sum(o.seconds.values()) / workers[o.study.name] / 3600 for o in found if not o.why_not)
    for hours in range(1, math.ceil(total) + 2):
        chosen, _, _ = select(found, hours, workers)
        if c.key in {o.key for o in chosen}:
            return hours
    raise AssertionError(f"no budget takes {c.key}, not even all of them together ({total:.2f} h)")


WHAT_NEXT_COLUMNS = ["study", "profile", "claim", "central", "verdict", "decides", "runs", "hours", "command"]


def what_next(found: list[Candidate], budget_hours: float, workers: dict[str, int]) -> pd.DataFrame:
    """The claims a reader would want the way out of, as ``lib.decide --budget <budget_hours> --dry-run`` weighs
    them: every claim a two-look design can decide (in the budget's plan, or over the budget), and every claim still
    inconclusive or out of the paper's regime with why no two-look design decides it. Claims decided already,
    claims not measured at this profile and claims an extension plan holds (the report's ledger) are left out.
    Columns: :data:`WHAT_NEXT_COLUMNS`; ``decides`` is the design or the reason, ``runs`` and ``hours`` (new runs
    and wall hours, as the budget counted them) and ``command`` are empty where no design does."""
    chosen, left, costs = select(found, budget_hours, workers)
    taken = {c.key for c in chosen}
    rows = []
    for c in found:
        wanted = not c.why_not or (c.verdict in UNDECIDED and not c.why_not.startswith(IN_PLAN))
        if not wanted:
            continue
        runs, hours, command = None, float("nan"), ""
        if c.why_not:
            decides = c.why_not
        else:
            runs, hours = costs[c.key]
            design = (f"{c.design.n1} → {c.design.n2} seeds per arm, two looks (look 1 {c.design.rule(1)}, "
                      f"look 2 {c.design.rule(2)}, α = {c.alpha:.2g}); planned power {c.power:.0%}")
            budget = budget_hours if c.key in taken else budget_for(c, found, workers)
            decides = design if c.key in taken else f"{design}; {left[c.key]}"
            command = f"python -m lib.decide --profile {c.profile} --budget {budget:g}"
        rows.append({"study": c.study.name, "profile": c.profile, "claim": c.quantity, "central": c.central,
                     "verdict": c.verdict, "decides": decides, "runs": runs, "hours": hours, "command": command})
    return pd.DataFrame(rows, columns=WHAT_NEXT_COLUMNS)
