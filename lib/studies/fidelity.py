"""Fidelity tables: how a study's runs differ from the original code, one row per setting, built from
the live run configs so that a table cannot drift from the code.

Each row gives the setting, our value, the original's, the file of the original code it is read in (or the
paper), the evidence tag, and a note: ``matches`` when the two values read the same, else ``[ours]: <why>``.
The tables live beside their studies, one module per original codebase: ``lib.studies.cff_fidelity``
(studies 1-3, CFF's code), ``lib.studies.norms_fidelity`` (study 4, the NORMS authors' code) and
``lib.studies.flat_fidelity`` (study 5, FLAT's code); this module is what they share.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from IPython.display import HTML

COLUMNS = ("setting", "ours", "original", "source", "evidence", "note")

# Why a profile's scale differs from the published one (README, "Profiles").
PROFILE_REASONS = {
    "smoke": "smoke profile: the smallest scale that exercises every code path (tests, CI)",
    "quick": "quick profile: embedded data and a small model, enough to show each mechanism qualitatively",
    "cpu": "cpu profile: reduced scale to fit 2 h per study on 2 cores",
}
SET_FOR_THIS_RUN = "set for this run (the published value is the original's)"

# The reason a dataset outside the papers is run [ours].
STAND_INS = {
    "mnist": "MNIST stands in for SVHN (a digit set near its accuracy ceiling) where SVHN is not at hand",
    "shapes": "the procedural embedded stand-in (no download; classes and difficulty are parameters)",
    "digits": "scikit-learn's embedded 8x8 digits (no download)",
}


def scale_reason(profile: str | None) -> str:
    """Why a value of scale differs from the published one: the profile's reason, else set for this run."""
    return PROFILE_REASONS.get(profile, SET_FOR_THIS_RUN)


def constants(mean: Sequence[float], std: Sequence[float]) -> str:
    return f"mean ({', '.join(f'{m:.4f}' for m in mean)}), std ({', '.join(f'{s:.4f}' for s in std)})"


def shown(value: Any) -> str:
    """A value as the table shows it (and compares it): yes / no, floats in their shortest form."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def row(setting, ours, original, source, evidence, reason="") -> dict:
    return dict(setting=setting, ours=shown(ours), original=shown(original), source=source, evidence=evidence,
                reason=reason)


def as_html(table: pd.DataFrame) -> HTML:
    """A fidelity table as a notebook shows it: folded under a one-line summary (how many settings differ from
    the original, ``[ours]``), left-aligned, no index column, and the same bytes on every render (a fixed table
    id where pandas would draw a random one; an HTML object, whose plain-text form carries no memory address)."""
    ours = int(table["note"].str.startswith("[ours]").sum()) if "note" in table else 0
    body = (table.style.set_uuid("fidelity").set_properties(**{"text-align": "left"}).hide(axis="index")
            .to_html())
    return HTML(f"<details><summary>{len(table)} settings beside the original's, {ours} of them ours ([ours], "
                f"with the reason): open to read them</summary>\n{body}</details>")


def fidelity_frame(rows: list[dict]) -> pd.DataFrame:
    """The fidelity table: a row matches when our value equals the original's, else it is marked [ours]."""
    table = pd.DataFrame(rows)
    matches = table.ours == table.original
    table["note"] = ["matches" if same else f"[ours]: {reason}" for same, reason in zip(matches, table.reason)]
    return table[list(COLUMNS)]
