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

Within ``--budget`` wall hours the plan takes each study's central claim (its ``CENTRAL`` id) first, cheapest
first, then the other claims, each time the one whose runs not yet planned cost least: the most claims for
the budget. ``--dry-run`` prints the plan and every claim left out, with why. Otherwise the plan is recorded
(``lib.run.plans``) and its runs, and those of earlier plans still missing, go to ``lib.dispatch``'s backends
(a process pool here, or Slurm) with ``extra.plan`` in each record. A claim is planned once: a claim in a
plan, decided at its look 2 or not, is never planned again (two looks are all its design has). *Not reproduced*
stops nothing at look 1: it is read at a design's last look only (lib.core.verdicts). A run of the look-2 seeds that
has a record already (another plan's) was seen before the plan: its seed is skipped, the next one takes its
place, and the plan names the skipped runs under ``excluded``.

The planning itself (the candidates, their designs and costs, the budget's choice) is ``lib.studies.extension``, so
that the report's "What it would take" is built from the same functions and says what this command says.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from lib import PROJECT_ROOT
from lib.core.params import PROFILE_METAVAR, ParameterError, profile_option
from lib.dispatch import Plan, add_backend_arguments, execute
from lib.run.plans import finished_runs, load_plans, write_plan
from lib.studies import STUDIES, extension, find_study
from lib.studies.extension import (
    BUDGET_HOURS,
    Candidate,
    budget_for,
    design_of,
    select,
    what_would_decide,
    workers_of,
)
from lib.studies.variants import open_store, resolve_command


def candidates(profile: str, *, results_dir: str = "results", only: list[str] | None = None,
               data_root: str | None = None) -> list[Candidate]:
    """Every claim of the profile's decided tables (of the ``only`` studies, by number or name; default every
    study), with its design and cost, or why it is not proposed (:func:`lib.studies.extension.candidates`)."""
    studies = [find_study(s) for s in (only or STUDIES)]
    return extension.candidates(studies, profile, results_dir=results_dir, data_root=data_root)


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
                     f"       {c.design.n1} → {c.design.n2} seeds per arm; look 1 {c.design.rule(1)}, "
                     f"look 2 {c.design.rule(2)} (α = {c.alpha:.2g}); planned power {c.power:.0%}; "
                     f"{len(new)} new runs, {hours:.2f} h (total {spent:.2f} h){left_out}")
    if not chosen:
        lines.append("    " + what_would_decide(found, budget_hours, workers))
    lines.append(f"{len(runs)} runs, {spent:.2f} wall hours.")
    lines.append("Not proposed:")
    for c in found:
        why = c.why_not or left.get(c.key)
        if c.key in left:
            why += f"; --budget {budget_for(c, found, workers)} takes it"
        if why:
            lines.append(f"  - {c.study.number} {c.quantity}: {why}")
    return "\n".join(lines)


def pending(profile: str, results_dir: str, data_root: str | None, only: list[str] | None = None) -> list[Plan]:
    """The runs of recorded plans that have no finished record, one ``lib.dispatch`` plan per study (of the
    ``only`` studies, by number, when given: so that a central claim's plan can run before an older plan's rest)."""
    results = PROJECT_ROOT / results_dir
    plans = load_plans(results, profile)
    out = []
    for plan in plans:
        for name in plan["order"]:
            study = find_study(name)
            if only is not None and study.number not in only:
                continue
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
    parser.add_argument("--budget", type=float, default=BUDGET_HOURS, help="wall hours the new plan may take")
    parser.add_argument("--only", nargs="*",
                        help="study numbers or notebook names, for the new plan and the recorded plans' runs "
                             "(default: every study)")
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
    chosen, left, _ = select(found, args.budget, workers)
    print(describe(chosen, left, found, args.budget, workers), flush=True)
    if not args.dry_run and chosen:
        plan = write_plan(PROJECT_ROOT / args.results_dir, args.profile, design_of(chosen, args.budget, workers))
        print(f"recorded plan {plan['plan_id']}", flush=True)
    queue = pending(args.profile, args.results_dir, data_root, only)
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
