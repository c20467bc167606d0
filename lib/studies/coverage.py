"""How much of a study's plan at a profile is recorded, and whether its shipped tables are today's.

A profile's *plan* is the runs its notebook's defaults imply today (``lib.studies.variants.resolve_command`` and the
study's ``plan``; no data are loaded). Its *tables* are what the last render wrote,
``results/tables/<study>_<profile>.csv``, one row per run it analysed. The two part when the settings
change: until every planned run is recorded and the notebook is rendered again, the shipped tables come
from *superseded* runs. :func:`coverage` says how far the re-run got and what changed; :meth:`Coverage.banner`
is the sentence the report, the rendered notebook and the README show (none once the tables are today's).
:func:`experiment` says what a change of parameters would cost in new runs and run-hours.

A study whose plan depends on the data found (``check_data``: study 2 leaves out a dataset that is not
there) is planned over the datasets its records show were there: no records, no such narrowing.
Every function takes one :class:`~lib.studies.study.Study`; ``python -m lib.coverage`` prints every study's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lib.core.config import as_dict
from lib.run.results import FINISHED_STATUSES, ResultsStore
from lib.studies.study import Study
from lib.studies.variants import PROJECT_ROOT, resolve_command

SHOWN_CHANGES = 5  # settings named in a banner; more are counted


@dataclass
class Coverage:
    """A profile's plan against its records and its shipped tables."""

    study: str
    profile: str
    planned: int  # run ids in today's plan
    recorded: int  # of them, with a finished record
    tabled: int  # runs in the shipped run table (0: none written)
    tabled_in_plan: int  # of them, in today's plan
    table_commits: list[tuple[str, int]] = field(default_factory=list)  # (commit, runs) of the table's runs
    changes: list[str] = field(default_factory=list)  # "batch_size 256 → 512", superseded against planned

    @property
    def complete(self) -> bool:
        return self.recorded == self.planned

    @property
    def current(self) -> bool:
        """The shipped tables analyse exactly today's plan, every run of it recorded."""
        return self.complete and self.tabled == self.tabled_in_plan == self.planned

    def short(self) -> str | None:
        """The banner in a few words (the report's summary row); None once the tables are today's."""
        if self.current:
            return None
        return (f"{self.profile} re-run: {self.recorded} of {self.planned} runs at today's settings; "
                + ("tables from superseded settings" if self.tabled else "no tables yet"))

    def banner(self) -> str | None:
        """The sentence shipped tables carry while they are not today's; None once they are."""
        if self.current:
            return None
        progress = (f"{self.profile} re-run in progress: {self.recorded} of {self.planned} runs at today's settings"
                    if not self.complete else
                    f"{self.profile} re-run recorded ({self.planned} of {self.planned} runs at today's settings), "
                    "not yet rendered")
        if not self.tabled:
            return f"{progress}; no {self.profile} tables shipped yet."
        if self.tabled_in_plan == self.tabled:
            return f"{progress}; its shipped tables hold {self.tabled} of them."
        commits = ("commits " if len(self.table_commits) > 1 else "commit ") + ", ".join(
            f"{commit} ({runs} runs)" for commit, runs in self.table_commits)
        what = "; ".join(self.changes[:SHOWN_CHANGES]) or "the same settings, other run ids"
        if len(self.changes) > SHOWN_CHANGES:
            what += f"; and {len(self.changes) - SHOWN_CHANGES} more"
        return f"{progress}; its shipped tables come from superseded settings ({commits}): {what}."


def planned_configs(study: Study, profile: str, datasets: set[str] | None = None,
                    parameters: dict | None = None) -> list[dict]:
    """The run configs of ``study``'s notebook defaults at ``profile`` (no data loaded), or of ``parameters``
    changed from them; with ``datasets``, those of a study that narrows its plan to the data found
    (``check_data``) kept to these datasets."""
    settings, _ = resolve_command(study, profile=profile, parameters=dict(parameters or {}))
    configs = list(study.module.plan(settings))
    if study.check_data is not None and datasets is not None:
        configs = [c for c in configs if as_dict(c).get("dataset") in datasets]
    return configs


_ABSENT = object()  # a config key a run does not have


def _shown(value) -> str:
    """A config value as a banner shows it: JSON for lists and dicts, cut at 40 characters."""
    text = "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) \
        else str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _order(shown: str):
    """Numbers in numeric order, before text."""
    try:
        return (0, float(shown), "")
    except ValueError:
        return (1, 0.0, shown)


def setting_changes(old: list[dict], new: list[dict]) -> list[str]:
    """``"key old → new"`` for each config key whose values differ between the ``old`` runs and the ``new``
    ones (the seed left out; a key with several values shows up to three of them), sorted by key."""
    def values(configs: list[dict], key: str) -> list[str]:
        return sorted({_shown(c.get(key, _ABSENT)) for c in configs}, key=_order)

    def listed(shown: list[str]) -> str:
        return ", ".join(shown[:3]) + (f" (+{len(shown) - 3})" if len(shown) > 3 else "")

    changes = []
    for key in sorted({k for c in old + new for k in c} - {"seed"}):
        was, now = values(old, key), values(new, key)
        if was != now:
            changes.append(f"{key} {listed(was)} → {listed(now)}")
    return changes


def coverage(study: Study, profile: str = "cpu", results_dir: str | Path = "results") -> Coverage:
    """How much of ``study``'s plan at ``profile`` is recorded under ``results_dir``, and what its shipped
    run table holds (:class:`Coverage`)."""
    results = Path(results_dir) if Path(results_dir).is_absolute() else PROJECT_ROOT / results_dir
    store = ResultsStore(results, study.name, profile)
    records = {r["run_id"]: r for r in store.records()}
    datasets = {r["config"].get("dataset") for r in records.values()} or None
    planned = {store.run_id(c): as_dict(c) for c in planned_configs(study, profile, datasets)}
    recorded = sum(1 for run_id in planned if records.get(run_id, {}).get("status") in FINISHED_STATUSES)
    table_path = results / "tables" / f"{study.name}_{profile}.csv"
    tabled: list[str] = []
    commits: list[tuple[str, int]] = []
    if table_path.exists():
        table = pd.read_csv(table_path, dtype=str)
        extension = {run_id for run_id, r in records.items() if r.get("extra", {}).get("plan")}
        tabled = [run_id for run_id in table["run_id"] if run_id not in extension]  # lib.decide's runs: its own plan
        if "git_commit" in table:
            counts = table["git_commit"].fillna("unknown").str[:10].value_counts()
            commits = sorted(((c, int(n)) for c, n in counts.items()), key=lambda cn: (-cn[1], cn[0]))
    superseded = [records[run_id]["config"] for run_id in tabled if run_id not in planned and run_id in records]
    return Coverage(study.name, profile, planned=len(planned), recorded=recorded, tabled=len(tabled),
                    tabled_in_plan=sum(run_id in planned for run_id in tabled), table_commits=commits,
                    changes=setting_changes(superseded, list(planned.values())) if superseded else [])


def experiment(study: Study, profile: str, parameters: dict, results_dir: str | Path = "results") -> dict:
    """What running ``study`` at ``profile`` with ``parameters`` (e.g. ``{"seeds": 12}``) would cost: the
    ``planned`` runs, the ``new`` ones among them (not recorded yet), the median ``seconds_per_run`` of the
    recorded runs of that plan (None without any: a superseded setting's time would mislead) and the
    ``run_hours`` of the new runs (None when unknown)."""
    results = Path(results_dir) if Path(results_dir).is_absolute() else PROJECT_ROOT / results_dir
    store = ResultsStore(results, study.name, profile)
    records = {r["run_id"]: r for r in store.records()}
    datasets = {r["config"].get("dataset") for r in records.values()} or None
    configs = planned_configs(study, profile, datasets, parameters)  # a plan never holds a run twice (tests)
    # Only a config with a recorded seed can be a recorded run, so only those are hashed: the experiments that
    # would decide a claim plan thousands of seeds, and hashing them all took seconds per study.
    seeds = {r["config"].get("seed") for r in records.values()}
    recorded = [records[run_id] for run_id in (store.run_id(c) for c in configs if getattr(c, "seed", None) in seeds)
                if records.get(run_id, {}).get("status") in FINISHED_STATUSES]
    walls = sorted(r["timings"]["wall_s"] for r in recorded if r.get("timings", {}).get("wall_s"))
    seconds = walls[len(walls) // 2] if walls else None
    new = len(configs) - len(recorded)
    return {"planned": len(configs), "new": new, "seconds_per_run": seconds,
            "run_hours": None if seconds is None else new * seconds / 3600}
