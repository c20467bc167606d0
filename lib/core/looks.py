"""The two-look reading of a study's verdict table: which claims are read at which look, on which runs.

A claim that ``lib.decide`` extended (a :class:`PlannedClaim` of a plan recorded under ``results/plans``,
``lib.run.plans``) is read at look 1 on the shipped runs against its look-1 boundary while its look 2 runs, and once
every run of its look 2 has finished, again on its planned seeds alone against its look-2 boundary
(``lib.core.sequential``): a look read on part of its seeds, or on more, would be a look that no boundary accounts
for. :func:`two_looks` builds the table that way from the study's own verdict table of a set of runs; the ``look``
column says where each row was read, for people, and ``look_runs`` how far a running look 2 is, for programs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from lib.core.sequential import Boundaries, Look


class ReadAsRegisteredError(ValueError):
    """A planned claim whose verdict row would be read under another test or on other cells than its plan registered:
    a claim changed after its data were seen is a new claim (a new id), on fresh seeds."""


@dataclass(frozen=True)
class PlannedClaim:
    """A claim a plan extends, keyed by its id, and how far its look 2 has run; ``measure`` and ``cells`` as the plan
    registered them, which the row read at either look must have."""

    id: str
    quantity: str  # as the plan wrote it: for people, never for joining
    measure: str
    cells: tuple[tuple[tuple[str, object], ...], ...]
    plan_id: str
    design: Boundaries
    runs: tuple[str, ...]  # the run ids look 2 adds to its arms
    finished: int  # how many of them have a finished record
    look1: dict  # its verdict and p at look 1, as the plan found them
    excluded: tuple[str, ...] = ()  # its planned runs recorded before the plan was written: left out of look 2

    @property
    def complete(self) -> bool:
        return self.finished == len(self.runs)

    @property
    def runs_read(self) -> list[int] | None:
        """The table's ``look_runs`` column: [finished, planned] runs of look 2 while it runs; None once complete."""
        return None if self.complete else [self.finished, len(self.runs)]

    def look_text(self) -> str:
        """The verdict table's ``look`` column for this claim, for people (:attr:`runs_read` for programs)."""
        if self.complete:
            left_out = (f"; {len(self.excluded)} run(s) recorded before the plan left out, {self.design.n2} seeds"
                        if self.excluded else "")
            return f"2 of 2 (plan {self.plan_id}{left_out})"
        return (f"1 of 2 (look 2: {self.design.n1} → {self.design.n2} seeds per arm, {self.finished} of "
                f"{len(self.runs)} runs; plan {self.plan_id})")


def cells_key(cells: list[dict]) -> tuple[tuple[tuple[str, object], ...], ...]:
    """A claim's cells (each a mapping column -> value, as records and plans write them) in one comparable form:
    each cell as :func:`lib.core.verdicts.cell` makes it, in sorted order."""
    return tuple(sorted(tuple(sorted(cell.items())) for cell in cells))


def _as_registered(row: pd.Series, c: PlannedClaim) -> None:
    """Refuse a planned claim's row that reads another measure or other cells than its plan registered."""
    record = json.loads(row["record"])
    cells = cells_key(record["cells"])
    if record["measure"] != c.measure or cells != c.cells:
        raise ReadAsRegisteredError(
            f"plan {c.plan_id} registered {c.id} as {c.measure} on {len(c.cells)} cell(s); its row reads "
            f"{record['measure']} on {len(cells)} cell(s): a claim changed after its data were seen is a new claim "
            "with an id of its own, planned on fresh seeds")


def _same_cells(table: pd.DataFrame, complete: list[PlannedClaim], planned: set[str]) -> list:
    """The rows of ``table`` that no plan holds and that read exactly the cells of a ``complete`` planned claim: they
    are read on every seed of those cells, the plans' included, as their declaration says (a claim reads all seeds
    of its cells), in one look of their own."""
    done = {c.cells for c in complete}
    records = (json.loads(text) for text in table["record"])
    return [i for i, record in zip(table.index, records)
            if record["id"] not in planned and record["cells"] and cells_key(record["cells"]) in done]


def two_looks(table_of: Callable[[pd.DataFrame, dict], pd.DataFrame], runs: pd.DataFrame,
              claims: list[PlannedClaim]) -> pd.DataFrame:
    """A study's verdict table over two looks. ``runs``: its runs frame over the shipped records and the finished
    runs of its planned ``claims`` (a ``run_id`` column); ``table_of(runs, looks)``: its verdict table on those
    runs, ``looks`` (id -> Look) every planned claim and the look it is read at (a study may show beside a planned
    claim the version of it that its plan did not register: ``lib.core.verdicts`` *exploratory*); rows are joined
    on the table's ``id``. A row no plan holds that reads a complete planned claim's cells is read again, once, on
    every finished seed of its cells, the complete plans' included (:func:`_same_cells`): a claim reads every seed
    of its cells. Every claim is read on the shipped runs:
    a planned claim whose look 2 is still running at its look-1 boundary (under the design, a p between that
    boundary and the family's α/m decides nothing yet), every other claim as a one-look test. Each planned claim
    whose look-2 runs have all finished is read again on the shipped runs and its own look-2 runs (seeds up to its
    planned n₂, no more) against its look-2 boundary, and that row replaces its look-1 row (a claim found at look 1
    but not once at look 2 is an error, never a row labelled look 2 that was read at look 1). A planned claim's row
    must read the measure and cells its plan registered (:class:`ReadAsRegisteredError`). The ``look`` column says
    at which look a row was read."""
    shipped = runs[~runs.run_id.isin({run_id for c in claims for run_id in c.runs})]

    def rows_of(frame: pd.DataFrame, c: PlannedClaim) -> pd.Index:  # a claim's rows, by its id (a check of that id
        # shows an experiment another study decides: not the planned claim's row)
        where = frame.index[(frame["id"] == c.id) & (frame["kind"] == "claim")]
        for i in where:
            _as_registered(frame.loc[i], c)
        return where

    table = table_of(shipped, {c.id: Look(c.design, 1) for c in claims})  # a complete one is read again below
    table["look"] = ["1" if kind == "claim" else "–" for kind in table.kind]
    complete = [c for c in claims if c.complete]
    # every pass is told every planned claim and its look, so that a study makes the same rows in each
    looks_now = {c.id: Look(c.design, 2 if c.complete else 1) for c in claims}
    for n2 in sorted({c.design.n2 for c in complete}):
        group = [c for c in complete if c.design.n2 == n2]
        ids = {run_id for c in group for run_id in c.runs}
        second = table_of(runs[runs.run_id.isin(set(shipped.run_id) | ids)], looks_now)
        for c in group:
            row = second.loc[rows_of(second, c)]
            where = rows_of(table, c)
            if not len(where):  # a claim the study's table no longer makes: no row to read again
                continue
            if len(row) != 1 or len(where) != 1:  # never label a row look 2 that was not read there
                raise ValueError(f"plan {c.plan_id}: the claim {c.id} is in the verdict table {len(where)} time(s) at "
                                 f"look 1 and {len(row)} at look 2, where it must be once in each: a claim's id must "
                                 "not depend on the runs of its look")
            table.loc[where[0], row.columns] = row.iloc[0].values
    # a row no plan holds reads every finished seed of its cells (:func:`_same_cells`), complete plans' included:
    # one reading on all of them, whichever plans added them
    unplanned = _same_cells(table, complete, planned={c.id for c in claims})
    if unplanned:
        done = set(shipped.run_id) | {run_id for c in complete for run_id in c.runs}
        every = table_of(runs[runs.run_id.isin(done)], looks_now)
        for i in unplanned:
            again = every[every["id"] == table.at[i, "id"]]
            table.loc[i, again.columns] = again.iloc[0].values
            table.at[i, "look"] = "one look, on every finished seed of its cells (its plans' included)"
    table["look_runs"] = None
    for c in claims:
        for i in rows_of(table, c):
            table.at[i, "look"] = c.look_text()
            table.at[i, "look_runs"] = c.runs_read
    return table
