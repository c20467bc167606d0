"""A verdict table (:func:`lib.core.verdicts.table`) as a reader sees it, in the notebooks and in the report.

Headers in words (:data:`HEADERS`); methods and datasets by their names (:func:`human`); the study's central claim
marked; the rows of one arm (a quantity that starts
with the arm's name in brackets, as study 5's learning-rate rules) under a heading of their own, the name taken
out of each row; a paper column that repeats the row above says so; every row carries its verdict's CSS class,
and every cell its column's header (``data-label``) for the narrow screen, where each row becomes a card.
"""
from __future__ import annotations

import html
import json
import re
from typing import Callable

import pandas as pd

from lib.core.data import DATASETS
from lib.core.verdicts import CLASSES

HEADERS = {"quantity": "claim", "ours": "ours [interval]", "ci_level": "interval's level", "paper": "paper",
           "evidence": "evidence", "n": "seeds", "p": "p", "p_holm": "p, Holm-adjusted",
           "power": "power at the paper's value", "seeds_needed": "seeds per arm for 80% power", "verdict": "verdict",
           "look": "look"}
CENTRAL = "central claim"  # the mark of the study's central claim, before its quantity
ARM = re.compile(r"^(\[[^\]]+\]) ")  # an arm's name opening a quantity: "[FLAT's rule 0.3 × B / 256] ..."
SAME = "as above"


# A quantity names methods, datasets and splits as the code does; a reader gets their names. Display only: the
# tables keep the code's words, which plans and the report match claims by.
NAMES = [(re.compile(r"\b([a-z0-9]+)_classes(\d+)-(\d+)\b"), lambda m: f"{DATASETS[m[1]].display_name} classes "
          f"{m[2]}–{m[3]}" if m[1] in DATASETS else m[0]),
         (re.compile(r"\bsimclr\b"), lambda m: "SimCLR"), (re.compile(r"\bsimsiam\b"), lambda m: "SimSiam"),
         (re.compile(r"\b(" + "|".join(n for n, info in DATASETS.items() if info.fetched) + r")\b"),
          lambda m: DATASETS[m[1]].display_name),
         (re.compile(r"([\w-]+) \(\1\)"), lambda m: m[1])]  # "CIFAR-10 (cifar10)" said once


def human(text: str) -> str:
    """``text`` with the code's names of methods, real datasets and held-out splits as a reader knows them."""
    for pattern, name in NAMES:
        text = pattern.sub(name, text)
    return text


def header(column: str) -> str:
    return HEADERS.get(column, column.replace("_", " "))


def record_css(row: pd.Series) -> str:
    """A verdict-table row's CSS class: its typed record's verdict's (:data:`lib.core.verdicts.CLASSES`), never parsed
    from the verdict's text; "other" for a row without a record."""
    record = row.get("record")
    return CLASSES.get(json.loads(record)["verdict"], "other") if isinstance(record, str) else "other"


def table_html(frame: pd.DataFrame, columns: list[str], *, central: Callable[[str], bool] | None = None,
               css: Callable[[pd.Series], str] | None = None, table_class: str = "verdict-table",
               links: list[tuple[str, str] | None] | None = None) -> str:
    """``frame``'s ``columns`` as an HTML table (no style): one ``<tr>`` per row, with the class ``css(row)``
    (default: its typed record's verdict's, :func:`record_css`); ``central``: whether a row's ``id`` is the study's
    central claim's (``lib.studies.study.is_central``), whose row is marked. ``links``: per row of ``frame``, (escaped
    href, text) or None, shown in a last column "records" (the report links each claim to the run records it reads)."""
    css = css or record_css
    head = "".join(f"<th>{html.escape(header(c))}</th>" for c in columns) + ("<th>records</th>" if links else "")
    width = len(columns) + bool(links)
    rows, arm, paper_above = [], None, None
    for i, (_, row) in enumerate(frame.iterrows()):
        quantity = str(row["quantity"])
        match = ARM.match(quantity)
        if (match[1] if match else None) != arm:
            arm, paper_above = (match[1] if match else None), None
            if arm:
                rows.append(f'<tr class="arm"><td colspan="{width}">{html.escape(arm[1:-1])}</td></tr>')
        is_central = central is not None and central(str(row.get("id", "")))
        cells = []
        for c in columns:
            text = str(row[c])
            if c == "quantity":
                text = html.escape(human(quantity[len(arm) + 1:] if arm else quantity))
                text = f"<b>{CENTRAL}</b>: {text}" if is_central else text
            elif c == "paper":
                text, paper_above = (SAME if text == paper_above and text else text), text
                text = html.escape(text)
            else:
                text = html.escape(text)
            cells.append(f'<td class="{c}" data-label="{html.escape(header(c))}">{text}</td>')
        if links:
            link = f'<a href="{links[i][0]}">{html.escape(links[i][1])}</a>' if links[i] else ""
            cells.append(f'<td class="records" data-label="records">{link}</td>')
        rows.append(f'<tr class="{css(row)}{" central" if is_central else ""}">{"".join(cells)}</tr>')
    return (f'<table class="{table_class}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')
