"""The claims at a glance: a forest plot of typed verdict records, the first thing the index and each report show.

    from lib.core.forest import forest_png
    png = forest_png({"01 margin factorial": records}, central={"01 margin factorial": lambda id: id == "s1.vr"})

One row per tested claim (``kind == "claim"``) that has an estimate: the estimate as a dot and its interval at the
level the claim was decided at (the record's ``ci``, Holm's α/m), coloured by the verdict (``verdicts.COLOURS``,
the tables' colours), the paper's value as a black diamond, and the null as a grey line. Claims in different units
never share an axis: each study gets one panel per scale — ratios (variance ratios, gradient ratios, their
contrasts) on a log axis, differences and single values on linear ones. A claim outside the paper's regime is
drawn hollow, its label naming the condition it misses with the value we measured ("layer-0 CAR ... 32.4 < 50");
the central claim's label is bold. Claims without an estimate are counted under their panel, never drawn.

Why ``math.log10`` and a linear axis instead of matplotlib's log scale: numpy's float64 log10 rounds differently
in the last bit on AVX-512 CPUs, and a log axis takes it of every point, so a pixel would flip between machines
(docs/notes/portability.md). The Python C library's log10 and matplotlib's affine transforms give the same bytes
on every x86-64 CPU. The figure is drawn on its own canvas, in its own style, so that a notebook's theme leaves it
as it is; the PNG carries no software version.
"""
from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lib.core.verdict_html import human
from lib.core.verdicts import CLASSES, COLOURS, OUT_OF_REGIME, RATIO_SCALE

DPI = 100


@dataclass(frozen=True)
class Layout:
    """How the figure is laid out for a screen: ``wide`` puts the labels in a column left of the panels (the
    index's 80rem column, each report); ``narrow`` (a phone, 390 px) writes each label above its row."""
    width: float  # inches; at DPI, the pixels a browser scales to its column
    labels: float  # inches of the labels' column; 0: each label above its row
    row: float  # inches per claim
    label_chars: int  # a label's line
    legend: float  # inches above the first panel for the legend
    legend_columns: int
    gap: float  # inches between panels: a panel's title above it, the axis of the one before


WIDE = Layout(width=11.0, labels=5.0, row=0.4, label_chars=72, legend=0.45, legend_columns=8, gap=0.75)
NARROW = Layout(width=4.4, labels=0.0, row=0.75, label_chars=58, legend=1.0, legend_columns=2, gap=1.3)


# The scales a claim can be drawn on: (what the axis says, the null's value on it, drawn on a log axis).
SCALES = {"ratio": ("ratio (log scale; 1 = no effect)", 1.0, True),
          "difference": ("difference (0 = no effect)", 0.0, False),
          "value": ("value (correlation, AUROC; | = no effect)", None, False)}


def scale_of(measure: str) -> str:
    """The scale a measure's estimates are drawn on (:data:`SCALES`)."""
    if measure in RATIO_SCALE:
        return "ratio"
    return "value" if measure == "one_sample" else "difference"


def missed_condition(record: dict) -> str:
    """The first condition of the paper's regime the run misses, as "what we measured: value < bound"; "" where
    every condition holds or none was measured."""
    missed = [c for c in record.get("conditions", []) if c.get("holds") is False]
    if not missed:
        return ""
    c = missed[0]
    more = f" (and {len(missed) - 1} more)" if len(missed) > 1 else ""
    return f"{human(c['measured'])} {c['value']:.3g} {'<' if c['at_least'] else '>'} {c['bound']:g}{more}"


def _line(text: str, chars: int) -> str:
    """``text`` cut to one label line of ``chars`` characters."""
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _lines(text: str, chars: int, most: int) -> list[str]:
    """``text`` wrapped to lines of ``chars`` characters, at most ``most`` of them, the last cut short if need be."""
    lines = textwrap.wrap(text, chars)
    return lines[:most - 1] + [_line(" ".join(lines[most - 1:]), chars)] if len(lines) > most else lines


def _label(record: dict, chars: int = WIDE.label_chars) -> str:
    """A row's label: the claim in a reader's words, two lines; where the run misses a condition of the paper's
    regime, one line of the claim and then that condition with the value we measured (two lines where needed)."""
    missed = missed_condition(record)
    if missed:
        return "\n".join(_lines(human(record["quantity"]), chars, 1) + _lines("not in regime: " + missed, chars, 2))
    return "\n".join(_lines(human(record["quantity"]), chars, 2))


def _drawn(record: dict) -> bool:
    estimate, ci = record.get("estimate"), record.get("ci") or [None, None]
    return (record.get("kind") == "claim" and estimate is not None and math.isfinite(estimate)
            and all(x is not None and math.isfinite(x) for x in ci))


def panels(studies: dict[str, list[dict]]) -> list[tuple[str, str, list[dict], int]]:
    """(study, scale, the claims drawn, the claims not drawn) per panel: a study's claims split by scale, in the
    records' order; a study with no claim drawn keeps one empty panel so that the figure says so."""
    out = []
    for study, records in studies.items():
        claims = [r for r in records if r.get("kind") == "claim"]
        drawn = [r for r in claims if _drawn(r)]
        undrawn = len(claims) - len(drawn)
        scales = list(dict.fromkeys(scale_of(r["measure"]) for r in drawn))
        if not scales:
            out.append((study, "", [], undrawn))
        for i, name in enumerate(scales):
            out.append((study, name, [r for r in drawn if scale_of(r["measure"]) == name], undrawn if i == 0 else 0))
    return out


def _position(x: float, log: bool) -> float:
    return math.log10(x) if log else x


def _limits(rows: list[dict], null: float | None, log: bool) -> tuple[float, float]:
    """The axis' range: every estimate and the paper's values, widened by the intervals as far as twice that span
    (an interval reaching past it is drawn to the edge with an arrow)."""
    core = [_position(r["estimate"], log) for r in rows]
    core += [_position(r["published"], log) for r in rows if r.get("published") is not None]
    core += [_position(null, log)] if null is not None else [r["null"] for r in rows if r.get("null") is not None]
    low, high = min(core), max(core)
    span = max(high - low, 0.5 if log else 1e-3 + 0.1 * max(abs(low), abs(high)))
    reach = [_position(v, log) for r in rows for v in r["ci"] if not log or v > 0]
    low = max(min(reach + [low]), low - 2 * span) - 0.05 * span
    high = min(max(reach + [high]), high + 2 * span) + 0.05 * span
    return low, high


def _ratio_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """Ticks of a log axis drawn linearly: 1, 2, 5 per decade within (low, high), as positions and labels."""
    ticks = []
    for decade in range(math.floor(low), math.ceil(high) + 1):
        for step in (1, 2, 5) if high - low < 3 else (1,):
            value = step * 10.0 ** decade
            if low <= math.log10(value) <= high:
                ticks.append((math.log10(value), f"{value:g}"))
    return ticks


def _draw(ax, study: str, scale: str, rows: list[dict], undrawn: int, central: Callable[[str], bool] | None,
          layout: Layout) -> None:
    joint = " · " if layout.labels else "\n"  # a narrow panel's title takes two lines
    ax.set_title(joint.join(p for p in (study, SCALES[scale][0] if scale else "") if p), loc="left", fontsize=10,
                 fontweight="bold")
    if undrawn:  # under the axis, where a long title has no room for it
        ax.set_xlabel(f"and {undrawn} claim{'s' if undrawn > 1 else ''} not measured here (no estimate)", loc="left",
                      fontsize=8, color="#555")
    if not rows:
        ax.text(0.0, 0.5, f"none of its {undrawn} claims has an estimate at this profile (not measured)",
                transform=ax.transAxes, va="center", fontsize=9, color="#555")
        ax.set_axis_off()
        return
    _, null, log = SCALES[scale]
    low, high = _limits(rows, null, log)
    ax.set_xlim(low, high)
    ax.set_ylim(len(rows) - 0.5, -0.5 if layout.labels else -0.95)  # room for the first row's label above it
    if null is not None:
        ax.axvline(_position(null, log), color="#888", linestyle="--", linewidth=1)
    for y, r in enumerate(rows):
        css = CLASSES.get(r["verdict"], "inconclusive")
        colour, hollow = COLOURS[css], r["verdict"] == OUT_OF_REGIME
        left, right = (_position(v, log) if v > 0 or not log else -math.inf for v in r["ci"])
        ax.plot([max(left, low), min(right, high)], [y, y], color=colour, linewidth=3, solid_capstyle="butt")
        for end, edge, marker in ((left, low, "<"), (right, high, ">")):
            if (end < edge) if marker == "<" else (end > edge):
                ax.plot([edge], [y], marker=marker, color=colour, markersize=6)
        ax.plot([_position(r["estimate"], log)], [y], marker="o", markersize=7, color=colour,
                markerfacecolor="white" if hollow else colour, markeredgewidth=1.5, linestyle="none")
        if null is None and r.get("null") is not None:  # values with nulls of their own (rho 0, AUROC 0.5)
            ax.plot([r["null"]], [y], marker="|", markersize=12, color="#888", linestyle="none")
        if r.get("published") is not None and (not log or r["published"] > 0):
            ax.plot([_position(r["published"], log)], [y], marker="D", markersize=6, color="black",
                    markerfacecolor="none", linestyle="none")
    labels = [_label(r, layout.label_chars) for r in rows]
    bold = [central is not None and central(r.get("id", "")) for r in rows]
    if layout.labels:
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels, fontsize=8)
        for tick, strong in zip(ax.get_yticklabels(), bold):
            tick.set_fontweight("bold" if strong else "normal")
    else:  # above each row, from the panel's left edge: the whole width is the axis
        ax.set_yticks([])
        for y, (label, strong) in enumerate(zip(labels, bold)):
            ax.annotate(label, (0.01, y - 0.12), xycoords=("axes fraction", "data"), va="bottom", fontsize=7.5,
                        fontweight="bold" if strong else "normal", color="#333")
    if log:
        ticks = _ratio_ticks(low, high)
        ax.set_xticks([t for t, _ in ticks])
        ax.set_xticklabels([label for _, label in ticks])
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#e5e5e5")
    ax.set_axisbelow(True)


def forest_figure(studies: dict[str, list[dict]], central: dict[str, Callable[[str], bool]] | None = None,
                  layout: Layout = WIDE) -> Figure:
    """The forest plot of ``studies`` (a title -> its typed verdict records), one panel per study and scale
    (:func:`panels`); ``central`` maps a title to whether a row's id is its central claim's, whose label is bold."""
    found = panels(studies)
    heights = [max(len(rows), 1) * layout.row for _, _, rows, _ in found]
    total = sum(heights) + len(found) * layout.gap + layout.legend
    figure = Figure(figsize=(layout.width, total), dpi=DPI)
    FigureCanvasAgg(figure)
    # hspace is a fraction of the mean panel's height: the gap between panels is layout.gap whatever their sizes
    grid = figure.add_gridspec(len(found), 1, height_ratios=heights, left=max(layout.labels, 0.15) / layout.width,
                               right=1 - 0.2 / layout.width, top=1 - (layout.legend + layout.gap * 0.5) / total,
                               bottom=layout.gap * 0.5 / total, hspace=layout.gap / (sum(heights) / len(found)))
    for i, (study, scale, rows, undrawn) in enumerate(found):
        _draw(figure.add_subplot(grid[i]), study, scale, rows, undrawn, (central or {}).get(study), layout)
    shown = list(dict.fromkeys(CLASSES.get(r["verdict"], "inconclusive") for _, _, rows, _ in found for r in rows))
    names = {css: word for word, css in CLASSES.items()}
    handles = [Line2D([], [], color=COLOURS[css], marker="o", linewidth=3, label=names[css]) for css in shown]
    handles.append(Line2D([], [], color="black", marker="D", markerfacecolor="none", linestyle="none",
                          label="the paper's value"))
    figure.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.01, 1.0), ncol=layout.legend_columns,
                  fontsize=8, frameon=False, handlelength=1.8)
    return figure


def forest_png(studies: dict[str, list[dict]], central: dict[str, Callable[[str], bool]] | None = None,
               layout: Layout = WIDE) -> bytes:
    """:func:`forest_figure` as PNG bytes, the same on every x86-64 CPU (no software version in the file)."""
    buffer = io.BytesIO()
    with matplotlib.style.context("default"):  # matplotlib's own style, whatever theme the caller has set
        forest_figure(studies, central, layout).savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()
