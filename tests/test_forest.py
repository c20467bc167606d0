"""The forest plot of the claims (lib.core.forest): what it draws, where, and that its bytes do not depend on a CPU."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from matplotlib.lines import Line2D

from lib import PROJECT_ROOT
from lib.core import forest
from lib.core.verdicts import COLOURS
from lib.execute import numpy_held_to_avx2


def record(quantity, measure, estimate, ci, published, *, verdict="inconclusive", null=None, kind="claim",
           conditions=()):
    return {"quantity": quantity, "measure": measure, "estimate": estimate, "ci": list(ci), "published": published,
            "verdict": verdict, "null": null if null is not None else (1.0 if measure == "variance_ratio" else 0.0),
            "kind": kind, "conditions": list(conditions), "id": quantity}


def CENTRAL(claim_id: str) -> bool:  # the central claim's row, by its id (here the records' ids are their quantities)
    return claim_id.startswith("VR = Var(clamp)")


CAR = {"measured": "layer-0 CAR of the clamp arm, final epoch (%)", "bound": 50.0, "at_least": True, "value": 32.35,
       "holds": False}
RECORDS = [record("VR = Var(clamp)/Var(subtract)", "variance_ratio", 0.346, (0.0275, 4.35), 5.9,
                  verdict="not in the paper's regime", conditions=[CAR]),
           record("mean top-1 difference clamp - subtract (points)", "equivalence", 2.0, (0.2, 3.9), 0.0),
           record("gradient ratio", "ratio", 0.163, (0.125, 0.214), 4.0, verdict="contradicted"),
           record("CIFAR-100: VR", "variance_ratio", None, (None, None), 5.9, verdict="not measured"),
           record("a check of ours", "one_sample", 60.0, (50.0, 70.0), 60.7, kind="check", verdict="check")]


def dots(ax) -> list[Line2D]:
    return [line for line in ax.get_lines() if line.get_marker() == "o"]


def test_claims_split_by_scale_checks_left_out_and_claims_without_an_estimate_counted():
    found = forest.panels({"study 1": RECORDS})
    assert [(scale, [r["quantity"] for r in rows], undrawn) for _, scale, rows, undrawn in found] == [
        ("ratio", ["VR = Var(clamp)/Var(subtract)", "gradient ratio"], 1),
        ("difference", ["mean top-1 difference clamp - subtract (points)"], 0)]
    assert forest.panels({"study 5": [RECORDS[3]]}) == [("study 5", "", [], 1)]


def test_a_ratio_is_drawn_at_its_log_and_its_interval_in_its_verdicts_colour():
    figure = forest.forest_figure({"study 1": RECORDS})
    ratio = figure.axes[0]
    estimates = [line.get_xdata()[0] for line in dots(ratio)]
    assert estimates == pytest.approx([math.log10(0.346), math.log10(0.163)], abs=1e-12)
    low, high = ratio.get_xlim()
    bar = next(line for line in ratio.get_lines() if line.get_linewidth() == 3 and line.get_ydata()[0] == 1)
    assert bar.get_xdata() == pytest.approx([math.log10(0.125), math.log10(0.214)])
    assert bar.get_color() == COLOURS["contradicted"]
    paper = [line.get_xdata()[0] for line in ratio.get_lines() if line.get_marker() == "D"]
    assert paper == pytest.approx([math.log10(5.9), math.log10(4.0)])
    assert low < math.log10(0.125) and high > math.log10(5.9)
    ticks = {label.get_text(): position for position, label in zip(ratio.get_xticks(), ratio.get_xticklabels())}
    assert ticks["1"] == 0 and ticks["0.1"] == pytest.approx(-1) and all(
        math.log10(float(text)) == pytest.approx(position) for text, position in ticks.items())


def test_a_run_outside_the_regime_is_hollow_and_its_label_names_the_missed_condition():
    figure = forest.forest_figure({"study 1": RECORDS}, {"study 1": CENTRAL})
    ratio = figure.axes[0]
    hollow, filled = dots(ratio)
    assert hollow.get_markerfacecolor() == "white" and filled.get_markerfacecolor() != "white"
    first = ratio.get_yticklabels()[0]
    assert first.get_text().endswith("not in regime: layer-0 CAR of the clamp arm, final epoch (%) 32.4 < 50")
    assert first.get_fontweight() == "bold" and ratio.get_yticklabels()[1].get_fontweight() != "bold"


def test_an_interval_past_the_axis_ends_in_an_arrow_at_the_edge():
    wide = record("VR on one seed too few", "variance_ratio", 1.3, (1e-4, 1.8e4), 0.25)
    ax = forest.forest_figure({"study 2": [wide]}).axes[0]
    low, high = ax.get_xlim()
    assert math.log10(1e-4) < low and math.log10(1.8e4) > high
    arrows = sorted((line.get_marker(), line.get_xdata()[0]) for line in ax.get_lines()
                    if line.get_marker() in ("<", ">"))
    assert arrows == [("<", low), (">", high)]


def test_the_png_is_the_same_with_numpy_held_to_avx2_and_under_any_plotting_theme():
    """The bytes a render ships: with numpy's AVX-512 loops on and off (:func:`lib.execute.numpy_held_to_avx2`,
    what the notebooks' kernel runs with), and after seaborn's theme (the notebooks set one), identical. On a CPU
    without AVX-512 the two processes run the same loops, and the test still checks the theme."""
    records = json.loads((PROJECT_ROOT / "results" / "tables" / "01_margin_factorial_cpu_verdicts.json").read_text())
    code = ("import sys, json; import seaborn; from lib.core.forest import forest_png\n"
            "records = json.load(open(sys.argv[1]))\n"
            "if sys.argv[2] == 'themed': seaborn.set_theme(style='whitegrid', context='talk')\n"
            "sys.stdout.buffer.write(forest_png({'01': records}, {'01': lambda i: i.startswith('VR = Var(clamp)')}))")
    path = PROJECT_ROOT / "results" / "tables" / "01_margin_factorial_cpu_verdicts.json"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    outputs = [subprocess.run([sys.executable, "-c", code, str(path), theme], env={**env, **held}, cwd=PROJECT_ROOT,
                              capture_output=True, check=True, timeout=300).stdout
               for held, theme in (({}, "plain"), (numpy_held_to_avx2(env), "plain"), ({}, "themed"))]
    assert outputs[0][:8] == b"\x89PNG\r\n\x1a\n" and len(records) > 0
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    assert b"Software" not in outputs[0]


def test_a_notebooks_verdict_table_opens_with_the_plot_of_its_own_records():
    """The findings cell shows the verdict table (lib.notebook.frame_html): its first element is the forest plot of
    the table's typed records, the central claim in bold; a table without records gets none."""
    import base64
    import re

    import pandas as pd

    from lib.notebook import frame_html

    frame = pd.DataFrame({"quantity": [r["quantity"] for r in RECORDS], "verdict": [r["verdict"] for r in RECORDS],
                          "kind": [r["kind"] for r in RECORDS], "power": ["–"] * len(RECORDS),
                          "record": [json.dumps(r) for r in RECORDS]})
    shown = frame_html(frame, central=CENTRAL)
    image = re.search(r'<img src="data:image/png;base64,([^"]+)"', shown)
    assert image and shown.index("<img") < shown.index("<table")
    assert base64.b64decode(image[1]) == forest.forest_png({"": RECORDS}, {"": CENTRAL})
    assert "<img" not in frame_html(frame.drop(columns="record"), central=CENTRAL)


def test_on_a_phone_each_label_sits_above_its_row_and_keeps_the_measured_condition():
    """The narrow layout (the index's picture below 40rem) writes each claim's label inside its panel, above its
    row, with the same claims and the value of the missed condition; no label column."""
    ax = forest.forest_figure({"study 1": RECORDS}, {"study 1": CENTRAL}, forest.NARROW).axes[0]
    labels = [text for text in ax.texts]
    assert len(labels) == 2 and list(ax.get_yticks()) == []
    assert "32.4 < 50" in labels[0].get_text().replace("\n", " ") and labels[0].get_fontweight() == "bold"
    assert [label.xy[1] for label in labels] == pytest.approx([-0.12, 0.88])  # just above rows 0 and 1


def test_a_table_whose_claims_have_no_estimate_opens_without_a_plot():
    """Study 5 at quick reads no claim (2 seeds an arm): its findings open with the table, not an empty figure."""
    import pandas as pd

    from lib.notebook import frame_html

    unmeasured = [RECORDS[3], RECORDS[4]]  # a claim not measured and a check
    frame = pd.DataFrame({"quantity": [r["quantity"] for r in unmeasured],
                          "verdict": [r["verdict"] for r in unmeasured], "kind": [r["kind"] for r in unmeasured],
                          "power": ["–"] * 2,
                          "record": [json.dumps(r) for r in unmeasured]})
    assert "<img" not in frame_html(frame) and "<table" in frame_html(frame)
