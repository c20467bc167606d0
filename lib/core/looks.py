"""The two-look reading of a study's verdict table: which claims are read at which look, on which runs.

A claim that ``lib.decide`` extended (a :class:`PlannedClaim` of a plan recorded under ``results/plans``,
``lib.run.plans``) is read at look 1 on the shipped runs against its look-1 boundary while its look 2 runs, and once
every run of its look 2 has finished, again on its planned seeds alone against its look-2 boundary
(``lib.core.sequential``): a look read on part of its seeds, or on more, would be a look that no boundary accounts
for. :func:`two_looks` builds the table that way from the study's own verdict table of a set of runs; the ``look``
column says where each row was read, and :func:`look_progress` reads a running look back from it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from lib.core.sequential import Boundaries, Look


@dataclass(frozen=True)
class PlannedClaim:
    """A claim a plan extends, and how far its look 2 has run."""

    quantity: str
    plan_id: str
    design: Boundaries
    runs: tuple[str, ...]  # the run ids look 2 adds to its arms
    finished: int  # how many of them have a finished record
    look1: dict  # its verdict and p at look 1, as the plan found them
    excluded: tuple[str, ...] = ()  # its planned runs recorded before the plan was written: left out of look 2

    @property
    def complete(self) -> bool:
        return self.finished == len(self.runs)

    def look_text(self) -> str:
        """The verdict table's ``look`` column for this claim; :func:`look_progress` reads it back."""
        if self.complete:
            left_out = (f"; {len(self.excluded)} run(s) recorded before the plan left out, {self.design.n2} seeds"
                        if self.excluded else "")
            return f"2 of 2 (plan {self.plan_id}{left_out})"
        return (f"1 of 2 (look 2: {self.design.n1} → {self.design.n2} seeds per arm, {self.finished} of "
                f"{len(self.runs)} runs; plan {self.plan_id})")


_PROGRESS = re.compile(r"look 2: \d+ → \d+ seeds per arm, (\d+) of (\d+) runs;")


def look_progress(look: str) -> tuple[int, int] | None:
    """How many of look 2's runs a verdict table's ``look`` cell says it read, as (finished, planned); None for
    a cell of a claim whose look 2 is complete or was never planned. The inverse of
    :meth:`PlannedClaim.look_text`, kept beside it so that the two change together."""
    found = _PROGRESS.search(look)
    return (int(found[1]), int(found[2])) if found else None


def two_looks(table_of: Callable[[pd.DataFrame, dict], pd.DataFrame], runs: pd.DataFrame,
              claims: list[PlannedClaim]) -> pd.DataFrame:
    """A study's verdict table over two looks. ``runs``: its runs frame over the shipped records and the finished
    runs of its planned ``claims`` (a ``run_id`` column); ``table_of(runs, looks)``: its verdict table on those
    runs, the claims in ``looks`` (quantity -> Boundaries) read at look 2. Every claim is read on the shipped runs:
    a planned claim whose look 2 is still running at its look-1 boundary (under the design, a p between that
    boundary and the family's α/m decides nothing yet), every other claim as a one-look test. Each planned claim
    whose look-2 runs have all finished is read again on the shipped runs and its own look-2 runs (seeds up to its
    planned n₂, no more) against its look-2 boundary, and that row replaces its look-1 row (a claim found at look 1
    but not once at look 2 is an error, never a row labelled look 2 that was read at look 1). The ``look`` column
    says at which look a row was read."""
    shipped = runs[~runs.run_id.isin({run_id for c in claims for run_id in c.runs})]

    def rows_of(frame: pd.DataFrame, c: PlannedClaim) -> pd.Index:  # a claim's rows, by the name its plan knows
        keys = frame.plan_key if "plan_key" in frame else frame.quantity
        return frame.index[keys == c.quantity]

    table = table_of(shipped, {c.quantity: Look(c.design, 1) for c in claims if not c.complete})
    table["look"] = ["1" if kind == "claim" else "–" for kind in table.kind]
    complete = [c for c in claims if c.complete]
    for n2 in sorted({c.design.n2 for c in complete}):
        group = [c for c in complete if c.design.n2 == n2]
        ids = {run_id for c in group for run_id in c.runs}
        second = table_of(runs[runs.run_id.isin(set(shipped.run_id) | ids)],
                          {c.quantity: Look(c.design, 2) for c in group})
        for c in group:
            row = second.loc[rows_of(second, c)]
            where = rows_of(table, c)
            if not len(where):  # a claim the study's table no longer makes: no row to read again
                continue
            if len(row) != 1 or len(where) != 1:  # never label a row look 2 that was not read there
                raise ValueError(f"plan {c.plan_id}: the claim {c.quantity!r} is in the verdict table "
                                 f"{len(where)} time(s) at look 1 and {len(row)} at look 2, where it must be once in "
                                 "each: a claim's name must not depend on the runs of its look")
            table.loc[where[0], row.columns] = row.iloc[0].values
    for c in claims:
        table.loc[rows_of(table, c), "look"] = c.look_text()
    return table
