"""Interactive explorers for the notebooks (ipywidgets; JupyterLab and classic Notebook alike).

    from lib import explore
    explore.collapse_explorer()                     # study 6's minimal model: r, gamma, dt, head_rate
    explore.sphere_explorer()                       # study 4's sphere: rho, lr, pairs, dim
    explore.results_explorer(study, profile="quick")  # any study: profile, variant, metric, curve, layer, cell

Each returns an :class:`Explorer`: its controls above an output holding the figure (and a table). Every
change of a control recomputes the view; ``explorer.data`` holds what is shown now (arrays and frames),
so a test can read it. Where widgets cannot render (a static HTML render, a viewer without a kernel) the
explorer's display falls back to its ``text/html``: the view of the default settings, table and figure.

The module runs past 400 lines because it holds the notebooks' three explorers (the collapse model's, the
sphere's and the results explorer), each a figure with its controls and the redraw they share.
"""
from __future__ import annotations

import base64
import io
import json
import math
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from lib import PROJECT_ROOT
from lib.collapse import model
from lib.collapse.theory import closed_form_min_label_distance, slow_rate
from lib.core.params import ParameterError
from lib.run.results import VARIANTS_DIR, ResultsStore, variant_root
from lib.ssl.simulations import sphere_convergence
from lib.studies import find_study

CANONICAL = "(canonical)"  # the variant control's name for the shipped results
ALL_CELLS = "(all cells)"
NO_CURVE = "(none)"
# The metric shown first, the first of these a study's records have (else the first in name order).
PREFERRED_METRICS = ("top1", "probe_top1", "knn_top1", "test_accuracy_final", "accuracy_final")


class Explorer(widgets.VBox):
    """Controls above an output widget that holds the current view.

    ``data``: what the view shows now; ``seconds``: the CPU time of its last recomputation (the figure
    included); ``static_html``: the view as plain HTML, which frontends without widgets show instead;
    ``controls``: name -> widget.
    """

    data: dict
    seconds: float
    static_html: str
    controls: dict[str, widgets.Widget]

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = self.static_html
        # The controls' values only: ipywidgets' own text lists every option, and the variant control's options
        # are the variants on this machine, which would then change a shipped render after a user's experiment.
        bundle["text/plain"] = "Explorer(" + ", ".join(f"{name}={w.value!r}" for name, w in self.controls.items()) + ")"
        return bundle


@contextmanager
def _one_thread():
    """Run torch on one thread: the simulations' tensors are tiny, and on a busy machine the idle threads of
    a parallel region wait so long for a core that a 0.1 s recomputation took 20 s with two threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


SHOWN_DIGITS = 4  # what a curve of these figures can show: a pixel is about 1/400 of an axis


def _shown(values) -> np.ndarray:
    """``values`` rounded to :data:`SHOWN_DIGITS` significant digits before they are drawn: a view recomputed at
    render time differs between CPUs (MKL's and OpenBLAS's kernels, AVX2 and AVX-512) in the last bits, which moved
    15 pixels of a shipped PNG (issue 57); rounded to what the figure can show, every CPU draws the same image."""
    return np.array([float(f"{v:.{SHOWN_DIGITS}g}") for v in np.asarray(values, dtype=float).ravel()])


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80, metadata={"Software": None})
    return buffer.getvalue()


def _explorer(controls: dict[str, widgets.Widget], view: Callable[..., tuple[dict, Figure, pd.DataFrame | None]],
              *, before: Callable[[dict], None] | None = None) -> Explorer:
    """Wire ``controls`` (name -> widget) to ``view(**values) -> (data, figure, table or None)``.

    ``before(values)`` may adjust other controls first (e.g. the profiles a variant has)."""
    output = widgets.Output()
    box = Explorer([widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap")), output])
    box.controls = controls

    busy = []  # set while redrawing: ``before`` changing a control must not start a redraw of its own

    def redraw(_=None):
        if busy:
            return
        busy.append(True)
        try:
            values = {name: w.value for name, w in controls.items()}
            if before is not None:
                before(values)
                values = {name: w.value for name, w in controls.items()}
            start = time.process_time()
            data, fig, table = view(**values)
            png = base64.b64encode(_png(fig)).decode()
            box.data, box.seconds = data, time.process_time() - start
        finally:
            busy.clear()
        table_html = "" if table is None else table.to_html(float_format=lambda x: f"{x:.4g}", na_rep="")
        box.static_html = f"<img alt=\"the view\" src=\"data:image/png;base64,{png}\"/>{table_html}"  # its table below
        # Set the output widget's contents, rather than capture a display into it: the same in every frontend,
        # and nbclient (papermill) fails on captured output when it keeps no widget state.
        shown = [{"output_type": "display_data", "metadata": {},
                  "data": {"image/png": png, "text/plain": "<figure>"}}]
        if table is not None:
            shown.append({"output_type": "display_data", "metadata": {},
                          "data": {"text/html": table_html, "text/plain": table.to_string()}})
        output.outputs = tuple(shown)

    for w in controls.values():
        w.observe(redraw, names="value")
    redraw()
    return box


# --------------------------------------------------------------------------- study 6: the minimal model


def collapse_view(*, r: float, gamma: float, dt: float, steps: int, head_rate: float, num_classes: int = 4,
                  samples_per_class: int = 10, embed_dim: int = 8, seed: int = 0) -> tuple[dict, Figure, None]:
    """The minimal model (:mod:`lib.collapse.model`) from one random start: the minimum inter-label distance
    (relative to its start) and the nearest-label accuracy over time, for no head (gradient descent and
    the closed form), the head with stop-gradient and the head without it. Small on purpose (n = 4 classes
    of m = 10, d = 8, Euler steps of the hand-written flow) so that a slider recomputes it at once."""
    att = model.balanced_attachment(num_classes, samples_per_class, r)
    u0, v0 = model.init_embeddings(att, embed_dim, torch.Generator().manual_seed(seed))
    record = model.record_steps(steps, points=30)
    data = {}
    with _one_thread():
        for mode in model.MODES:
            W0 = None if mode == "none" else model.head_start(embed_dim, 1.0)
            run = model.simulate(att, u0, v0, W0, mode=mode, gamma=gamma, dt=dt, steps=steps, head_rate=head_rate,
                                 integrator="euler", record=record)
            data[mode] = {"t": np.asarray(run["t"]), "min_label_distance": np.asarray(run["min_label_distance"]),
                          "accuracy": np.asarray(run["accuracy"])}
        t = data["none"]["t"]
        data["closed_form"] = {"t": t, "min_label_distance": np.asarray(
            closed_form_min_label_distance(att, u0, v0, gamma, t))}
    labels = {"none": "no head", "sg": "head + stop-gradient", "no_sg": "head, no stop-gradient"}
    fig = Figure(figsize=(11, 3.8))
    left, right = fig.subplots(1, 2)
    for mode, label in labels.items():
        d = data[mode]
        left.plot(d["t"], _shown(d["min_label_distance"] / d["min_label_distance"][0]), label=label)
        right.plot(d["t"][1:], _shown(d["accuracy"][1:]), label=label)
    cf = data["closed_form"]["min_label_distance"]
    left.plot(t, _shown(cf / cf[0]), "k:", label="closed form (no head)")
    left.plot(t, np.exp(-slow_rate(r, gamma) * t), color="grey", linestyle="--", lw=0.8,
              label=f"exp(−γ(1 − √(1 − r)) t), rate {slow_rate(r, gamma):.3g}")
    left.set(yscale="log", xlabel="time t", ylabel="min inter-label distance / start",
             title=f"r = {r:g}, γ = {gamma:g}, dt = {dt:g}, head rate {head_rate:g}γ")
    left.legend(fontsize=7, loc="lower left")
    right.axhline(1 - r + r / num_classes, color="grey", linestyle=":", label="1 − r + r/n")
    right.set(xscale="log", xlabel="time t", ylabel="nearest-label accuracy", ylim=(0, 1.05))
    right.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return data, fig, None


def collapse_explorer(*, r: float = 0.2, gamma: float = 1.0, dt: float = 0.1, steps: int = 300,
                      head_rate: float = 10.0) -> Explorer:
    """Sliders for study 6's minimal model (:func:`collapse_view`), named as in ``lib.collapse.model``: r (the
    frustrated fraction, a multiple of 1/10 here), gamma, dt (gamma dt stays <= 0.5), steps, head_rate."""
    slider = {"continuous_update": False, "style": {"description_width": "initial"}}
    controls = {
        "r": widgets.FloatSlider(value=r, min=0.0, max=0.9, step=0.1, description="r", **slider),
        "gamma": widgets.FloatSlider(value=gamma, min=0.1, max=2.0, step=0.1, description="γ", **slider),
        "dt": widgets.FloatSlider(value=dt, min=0.01, max=0.25, step=0.01, description="dt", **slider),
        "steps": widgets.IntSlider(value=steps, min=50, max=600, step=50, description="steps", **slider),
        "head_rate": widgets.FloatSlider(value=head_rate, min=0.5, max=20.0, step=0.5, description="head_rate",
                                         **slider),
    }
    return _explorer(controls, collapse_view)


# --------------------------------------------------------------------------- study 4: the sphere


def sphere_view(*, rho: float, lr: float, pairs: int, dim: int, max_steps: int = 1000,
                seed: int = 0) -> tuple[dict, Figure, None]:
    """:func:`lib.ssl.simulations.sphere_convergence` at one starting norm rho: the mean norm of the points at
    every step until the pairs align (mean cos >= 1 - 1e-3) or ``max_steps``. Steps to align grow as rho^2 for
    a fixed lr / pairs, and no step shrinks a norm."""
    with _one_thread():
        run = sphere_convergence([rho], pairs=pairs, dim=dim, lr=lr, max_steps=max_steps, seed=seed)
    norms, steps = run["mean_norm"][0], int(run["steps"][0])
    data = {"step": np.arange(len(norms)), "mean_norm": norms, "steps": steps,
            "min_norm_change": float(run["min_norm_change"][0])}
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.subplots()
    ax.plot(data["step"], _shown(norms), color="tab:blue")
    aligned = f"aligned after {steps} steps (steps / ρ² = {steps / rho ** 2:.4g})" if steps >= 0 else \
        f"not aligned within {max_steps} steps"
    if steps >= 0:
        ax.axvline(steps, color="grey", linestyle=":")
    ax.set(xlabel="gradient step", ylabel="mean norm of the points",
           title=f"ρ = {rho:g}, lr = {lr:g}, {pairs} pairs in {dim} dimensions: {aligned}")
    ax.title.set_fontsize(9)
    fig.tight_layout()
    return data, fig, None


def sphere_explorer(*, rho: float = 1.0, lr: float = 2.0, pairs: int = 100, dim: int = 20) -> Explorer:
    """Sliders for study 4's sphere simulation (:func:`sphere_view`), named as in ``lib.ssl.simulations``."""
    slider = {"continuous_update": False}
    controls = {
        "rho": widgets.FloatLogSlider(value=rho, base=2, min=-2, max=1, step=0.25, description="ρ", **slider),
        "lr": widgets.FloatLogSlider(value=lr, base=10, min=-1, max=1.5, step=0.1, description="lr", **slider),
        "pairs": widgets.IntSlider(value=pairs, min=10, max=500, step=10, description="pairs", **slider),
        "dim": widgets.IntSlider(value=dim, min=2, max=64, step=1, description="dim", **slider),
    }
    return _explorer(controls, sphere_view)


# --------------------------------------------------------------------------- every study: the results


def available(study_name: str, results: Path) -> dict[str, list[str]]:
    """{variant (CANONICAL for the shipped results): the profiles with records of the study}."""
    found = {}
    roots = [(CANONICAL, results)] + [(p.name, p) for p in sorted((results / VARIANTS_DIR).glob("*"))]
    for variant, root in roots:
        profiles = sorted(p.parent.name for p in (root / "runs" / study_name).glob("*/*.json"))
        if profiles:
            found[variant] = sorted(set(profiles))
    return found


def _cell_value(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


CELL_VALUE_CHARS = 16  # a factor's value in a cell label is cut here: lists and options would fill a figure's axis
CELL_LABEL_CHARS = 72  # and the whole label here


def naming_factors(factors: list[str], configs: list[dict]) -> list[str]:
    """The fewest factors that still tell every cell apart, chosen greedily (each step the factor that splits the
    cells most, the shorter values first on a tie), in ``factors`` order: a factor set by another (a learning rate
    that follows the method) names nothing new."""
    def distinct(keys):
        return len({tuple(c.get(k) for k in keys) for c in configs})
    goal, chosen = distinct(factors), []
    while distinct(chosen) < goal:
        chosen.append(max((k for k in factors if k not in chosen),
                          key=lambda k: (distinct([*chosen, k]), -max(len(str(c.get(k))) for c in configs))))
    return [k for k in factors if k in chosen]


def short_cells(cells: list[str], factors: list[str], configs: list[dict]) -> list[str]:
    """Cell labels short enough for a figure's axis: the factors that tell the cells apart
    (:func:`naming_factors`), each value cut at :data:`CELL_VALUE_CHARS`, the label at :data:`CELL_LABEL_CHARS`;
    where cutting makes two cells look alike, each gets its number (#1, #2, ...)."""
    def cut(text: str, limit: int) -> str:
        return text if len(text) <= limit else text[:limit - 1] + "…"
    naming = naming_factors(factors, configs)
    short = [", ".join(f"{k}={cut(str(c.get(k)), CELL_VALUE_CHARS)}" for k in naming) or "all runs"
             for c in configs]
    return numbered([cut(s, CELL_LABEL_CHARS) for s in short], cells)


def numbered(names: list[str], cells: list[str]) -> list[str]:
    """``names`` of the runs' ``cells``, where one name stands for two cells each of them with its number
    (#1, #2, ...: the cell's place among all cells), so that no two cells look alike."""
    cells_of: dict[str, set[str]] = {}
    for name, cell in zip(names, cells):
        cells_of.setdefault(name, set()).add(cell)
    number = {cell: i + 1 for i, cell in enumerate(sorted(set(cells)))}
    return [f"{name} #{number[cell]}" if len(cells_of[name]) > 1 else name for name, cell in zip(names, cells)]


def records_frames(records: list[dict], cell_name: Callable[[dict], str] | None = None) -> dict:
    """The generic view of a study's records: which config keys make its cells, its scalar metrics and
    curves, and their long tables. A cell is one combination of the config keys that differ between the
    records, the seed left out (its ``settings``); it is named by the study's ``cell_name(config)`` where it has
    one (its own words: "simclr · grad_scale · imbalanced"), else by :func:`short_cells`. A curve is an entry of
    ``metrics.curves`` (per epoch, or over ``t``), per layer where each epoch holds a list (studies 1-3)."""
    configs = [{k: _cell_value(v) for k, v in r["config"].items()} for r in records]
    keys = sorted({k for c in configs for k in c} - {"seed"})
    factors = [k for k in keys if len({c.get(k) for c in configs}) > 1]
    settings = [", ".join(f"{k}={c.get(k)}" for k in factors) or "all runs" for c in configs]
    cells = (short_cells(settings, factors, configs) if cell_name is None
             else numbered([cell_name(r["config"]) for r in records], settings))
    scalars, curves, layers = [], [], 0
    rows = []
    for rec, cell, full in zip(records, cells, settings):
        row = {"run_id": rec["run_id"], "status": rec["status"], "cell": cell, "settings": full, "seed": rec["seed"]}
        for name, value in rec["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[name] = value
        rows.append(row)
        for name, values in rec["metrics"].get("curves", {}).items():
            if name != "t" and values:
                curves.append(name)
                if isinstance(values[0], list):
                    layers = max(layers, max(len(v) for v in values))
    runs = pd.DataFrame(rows)
    scalars = sorted(set(runs.columns) - {"run_id", "status", "cell", "settings", "seed"})
    return {"runs": runs, "factors": factors, "metrics": scalars, "curves": sorted(set(curves)), "layers": layers}


def curve_frame(records: list[dict], runs: pd.DataFrame, curve: str, layer: int) -> pd.DataFrame:
    """Long table of one curve (at ``layer`` where it has layers): run_id, cell, seed, x, value. x is the
    epoch (1-based) or the record's own time axis ``t``."""
    cell = dict(zip(runs.run_id, runs.cell))
    frames = []
    for rec in records:
        curves = rec["metrics"].get("curves", {})
        values = curves.get(curve)
        if not values:
            continue
        if isinstance(values[0], list):
            values = [v[layer] if layer < len(v) else math.nan for v in values]
        x = curves["t"][: len(values)] if "t" in curves else list(range(1, len(values) + 1))
        frames.append(pd.DataFrame({"run_id": rec["run_id"], "cell": cell[rec["run_id"]], "seed": rec["seed"],
                                    "x": x, "value": pd.to_numeric(pd.Series(values, dtype=object),
                                                                   errors="coerce")}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", "cell", "seed", "x",
                                                                                       "value"])


def results_view(records: list[dict], frames: dict, *, metric: str, curve: str, layer: int, cell: str,
                 title: str) -> tuple[dict, Figure, pd.DataFrame]:
    """Per-seed values of ``metric`` in every cell (table: cells by seeds, with mean and std), and the
    chosen curve of every run, coloured by cell; ``cell`` (or ALL_CELLS) narrows both. ``frames``: the
    records' :func:`records_frames`."""
    runs = frames["runs"]
    if cell != ALL_CELLS:
        runs = runs[runs.cell == cell]
    seeds = runs[["cell", "seed", "run_id", "status"]].assign(value=runs.get(metric, np.nan))
    table = seeds.pivot_table(index="cell", columns="seed", values="value", aggfunc="first", dropna=False)
    table.columns = [f"seed {s}" for s in table.columns]
    table = table.assign(n=seeds.groupby("cell").value.count(), mean=seeds.groupby("cell").value.mean(),
                         std=seeds.groupby("cell").value.std(),
                         settings=runs.groupby("cell").settings.first())  # the cell's whole config difference
    curves = (curve_frame([r for r in records if r["run_id"] in set(runs.run_id)], runs, curve, layer)
              if curve != NO_CURVE else curve_frame([], runs, curve, layer))
    fig = Figure(figsize=(13, 0.9 + 0.3 * max(len(table), 8)), layout="constrained")
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    order = list(table.index)
    colours = {c: f"C{i % 10}" for i, c in enumerate(order)}
    position = {c: i for i, c in enumerate(order)}
    left.scatter(seeds.value, seeds.cell.map(position), c=seeds.cell.map(colours), s=25, alpha=0.8)
    left.scatter(table["mean"], range(len(order)), marker="|", s=300, color="black", label="mean")
    left.set_yticks(range(len(order)), order, fontsize=7)
    left.invert_yaxis()
    left.set(xlabel=metric, title=f"{title}: {metric}, one dot per seed")
    left.title.set_fontsize(9)
    for _, line in curves.groupby("run_id", sort=True):
        right.plot(line.x, line.value, color=colours[line.cell.iloc[0]], lw=1, alpha=0.8)
    positive = curves.value[np.isfinite(curves.value)]
    if len(positive) and (positive > 0).all() and positive.max() / positive.min() > 1e3:
        right.set_yscale("log")
    right.set(xlabel="t" if curve != NO_CURVE and any("t" in r["metrics"].get("curves", {}) for r in records)
              else "epoch", ylabel=curve, title="no curve" if curve == NO_CURVE else
              f"{curve}" + (f", layer {layer}" if frames["layers"] else "") + ", one line per run")
    right.title.set_fontsize(9)
    return {"seeds": seeds.reset_index(drop=True), "cells": table, "curves": curves}, fig, table


def results_explorer(study, *, profile: str | None = None, variant: str | None = None,
                     results_dir: str | Path = "results") -> Explorer:
    """The results explorer of one study (its module, number or name): choose the variant (CANONICAL or a
    variant under ``<results>/variants/``), the profile, the metric, the curve, the layer (studies whose
    curves have layers) and the cell; see the per-seed values of every cell and the curves of every run.
    ``profile`` / ``variant``: the first view (default: the first found). ``results_dir`` is relative to
    the project root, as the notebooks' parameter is."""
    found_study = find_study(study)
    name, cell_name = found_study.name, found_study.cell_name
    results = PROJECT_ROOT / results_dir
    found = available(name, results)
    if not found:
        raise ParameterError(f"results_dir={str(results_dir)!r} holds no records of study {name}: "
                             "run its notebook (or lib.dispatch) first")
    first_variant = CANONICAL if variant is None else variant
    if first_variant not in found:
        raise ParameterError(f"variant={variant!r} has no records of {name} under {results_dir}: "
                             f"one of {', '.join(map(str, found))}")
    profiles = found[first_variant]
    first_profile = profile if profile in profiles else profiles[0]
    cache: dict = {}

    def load(v: str, p: str) -> tuple[list[dict], dict]:
        """The records of a variant and profile and their frames, read once."""
        if (v, p) not in cache:
            records = ResultsStore(variant_root(results, None if v == CANONICAL else v), name, p).records()
            cache[v, p] = records, records_frames(records, cell_name)
        return cache[v, p]

    def choices(v: str, p: str) -> dict:
        frames = load(v, p)[1]
        metric = next((m for m in PREFERRED_METRICS if m in frames["metrics"]), (frames["metrics"] or [""])[0])
        return {"metrics": frames["metrics"] or [""], "metric": metric,
                "curves": frames["curves"] or [NO_CURVE], "layers": frames["layers"],
                "cells": [ALL_CELLS, *sorted(frames["runs"].cell.unique())]}

    start = choices(first_variant, first_profile)
    style = {"description_width": "initial"}
    controls = {
        "variant": widgets.Dropdown(options=list(found), value=first_variant, description="variant", style=style),
        "profile": widgets.Dropdown(options=profiles, value=first_profile, description="profile", style=style),
        "metric": widgets.Dropdown(options=start["metrics"], value=start["metric"], description="metric",
                                   style=style),
        "curve": widgets.Dropdown(options=start["curves"], value=start["curves"][0], description="curve", style=style),
        "layer": widgets.Dropdown(options=list(range(max(start["layers"], 1))), value=0, description="layer",
                                  disabled=not start["layers"], style=style),
        "cell": widgets.Dropdown(options=start["cells"], value=ALL_CELLS, description="cell", style=style,
                                 layout=widgets.Layout(width="40em")),
    }
    shown = {"source": (first_variant, first_profile)}

    def before(values: dict) -> None:
        """A new variant or profile brings its own profiles, metrics, curves, layers and cells."""
        v = values["variant"]
        if list(controls["profile"].options) != found[v]:
            controls["profile"].options = found[v]
        p = controls["profile"].value
        if shown["source"] == (v, p):
            return
        shown["source"] = (v, p)
        new = choices(v, p)
        for key, options, value in (("metric", new["metrics"], new["metric"]), ("curve", new["curves"], None),
                                    ("layer", list(range(max(new["layers"], 1))), 0),
                                    ("cell", new["cells"], ALL_CELLS)):
            controls[key].options = options
            controls[key].value = value if value in options else options[0]
        controls["layer"].disabled = not new["layers"]

    def view(*, variant: str, profile: str, metric: str, curve: str, layer: int, cell: str):
        title = f"{name} · {profile}" + ("" if variant == CANONICAL else f" · variant {variant}")
        return results_view(*load(variant, profile), metric=metric, curve=curve, layer=layer, cell=cell, title=title)

    return _explorer(controls, view, before=before)
