"""Study 5 (FlatNCE against InfoNCE across batch sizes): the plan, the analysis and the verdicts."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from lib import PROJECT_ROOT
from lib.core import stats, verdicts
from lib.core.params import ParameterError
from lib.run.results import config_hash
from lib.ssl.training import build_model, nce_diagnostics, start_run
from lib.studies import flatnce_batch as study

PARAMETERS = dict(profile="smoke", losses=["infonce", "flatnce"], temperature=0.1, device="cpu")


def test_plan_crosses_rules_batch_sizes_losses_and_seeds_into_distinct_runs():
    s = study.resolve({**PARAMETERS, "batch_sizes": [64, 16, 32], "seeds": 3, "lr_rules": ["sqrt", "linear"]})
    configs = study.plan(s)
    assert s["batch_sizes"] == [16, 32, 64] and s["lr_rules"] == ["linear", "sqrt"]  # FLAT's arm first
    assert len(configs) == 2 * 3 * 2 * 3 == len({config_hash(c) for c in configs})
    assert {(c.lr_scaling, c.batch_size, c.loss, c.seed) for c in configs} == {
        (rule, b, loss, seed) for rule in ("linear", "sqrt") for b in (16, 32, 64) for loss in ("infonce", "flatnce")
        for seed in range(3)}
    assert all(c.temperature == 0.1 and c.device == "cpu" and not c.projector_bn for c in configs)


def test_the_two_losses_of_a_seed_share_its_initialisation_and_data_order():
    """What pairs the verdicts by seed: FlatNCE's and InfoNCE's configs of one seed differ in the loss alone, so the
    seeded start of a run (the weights, then the generator of the data order and augmentation) is the same."""
    s = study.resolve({**PARAMETERS, "batch_sizes": [16], "seeds": 2})
    by_loss = {c.loss: c for c in study.plan(s) if c.seed == 1}
    infonce, flatnce = by_loss["infonce"], by_loss["flatnce"]
    assert {k for k, v in vars(infonce).items() if vars(flatnce)[k] != v} == {"loss"}
    starts = []
    for c in (infonce, flatnce):
        ds, _, generator = start_run(c, None)
        weights = build_model(c, ds.channels).state_dict()
        starts.append((weights, torch.randperm(len(ds.y_train), generator=generator)))
    (w_info, order_info), (w_flat, order_flat) = starts
    assert w_info.keys() == w_flat.keys() and all(torch.equal(w_info[k], w_flat[k]) for k in w_info)
    assert torch.equal(order_info, order_flat)


def test_each_arm_runs_its_rate_by_hand():
    """linear: FLAT's 0.3 x B / 256; sqrt: ours, 0.6 x sqrt(B); read from the rate a run trains at."""
    from lib.core.optim import scaled_lr

    s = study.resolve({**PARAMETERS, "batch_sizes": [16, 64, 256], "lr_rules": ["linear", "sqrt"]})
    by_hand = {"linear": lambda b: 0.3 * b / 256, "sqrt": lambda b: 0.6 * math.sqrt(b)}
    for c in study.plan(s):
        assert scaled_lr(c.lr, c.batch_size, c.lr_scaling) == pytest.approx(by_hand[c.lr_scaling](c.batch_size),
                                                                            rel=1e-12)


@pytest.mark.parametrize("profile,rules,batches,runs", [("smoke", ["linear"], [16, 32], 8),
                                                        ("quick", ["linear", "sqrt"], [16, 64, 256], 24),
                                                        # 2 rules x 3 batch sizes x 2 losses x 2 seeds, then the
                                                        # small-batch point: 2 rules x 2 losses x 3 seeds
                                                        ("cpu", ["linear", "sqrt"], [32, 128, 512], 24 + 12),
                                                        ("paper", ["linear"], None, None)])
def test_profiles_run_flats_arm_first_and_the_sqrt_arm_where_the_budget_allows(profile, rules, batches, runs):
    s = study.resolve({**PARAMETERS, "profile": profile})
    assert s["lr_rules"] == rules
    if batches is not None:
        assert s["batch_sizes"] == batches and len(study.plan(s)) == runs


@pytest.mark.parametrize("value", [[], ["linear", "linear"], ["cube"], "linear", ["linear", 1], ["LINEAR"], 0])
def test_a_bad_lr_rules_fails_naming_it_and_the_allowed_rules(value):
    with pytest.raises(ParameterError, match=r"lr_rules.*linear, sqrt"):
        study.resolve({**PARAMETERS, "lr_rules": value})


def test_parameters_left_as_none_take_the_profile_and_given_ones_win():
    s = study.resolve({**PARAMETERS, "profile": "cpu", "epochs": None, "width_multiplier": 0.5})
    assert s["epochs"] == study.PROFILES["cpu"]["epochs"] and s["width_multiplier"] == 0.5 and s["dataset"] == "cifar10"


def test_a_batch_larger_than_the_training_set_fails_naming_batch_sizes():
    s = study.resolve({**PARAMETERS, "batch_sizes": [16, 256]})
    with pytest.raises(ParameterError, match="batch_sizes"):
        study.check_batch_sizes(s, train_images=128)
    assert study.check_batch_sizes(s, train_images=256) == 256
    assert study.check_batch_sizes({**s, "train_subset": 300}, train_images=1000) == 300


def test_ceilings_are_the_diagnostics_of_equal_similarities():
    for n in (2, 5, 16):
        z = torch.ones(n, 3, dtype=torch.float64)  # every cosine similarity is 1
        measured = dict(zip(("info_nce", "grad_scale", "negative_entropy"), nce_diagnostics(z, z, 0.1).tolist()))
        for key, value in study.ceilings(n).items():
            assert math.isclose(measured[key], value, rel_tol=1e-12), key


def test_gradient_identity_holds_to_rounding_for_any_temperature():
    for tau in (0.05, 0.1, 1.0):
        assert study.gradient_identity_error(temperature=tau, seed=3) < 1e-12


@pytest.mark.parametrize("wrong", ["negated", "infonce", "infonce_value"])
def test_gradient_identity_fails_when_the_librarys_flatnce_is_wrong(monkeypatch, wrong):
    """The check runs through the library itself: a FlatNCE whose gradient is negated, or is InfoNCE's
    (right direction, wrong per-anchor weights), or runs that report a wrong InfoNCE value, are caught."""
    from lib.core import losses
    from lib.ssl import training as ssl

    right, right_diagnostics = losses.flat_nce, ssl.nce_diagnostics

    def broken(z1, z2, temperature=0.1):
        if wrong == "negated":
            return 2 - right(z1, z2, temperature)
        info = losses.info_nce(z1, z2, temperature)
        return 1 + info - info.detach()

    if wrong == "infonce_value":
        monkeypatch.setattr(ssl, "nce_diagnostics", lambda *args: 1.01 * right_diagnostics(*args))
    else:
        monkeypatch.setattr(losses, "flat_nce", broken)
    assert study.gradient_identity_error(seed=3) > 1e-3


def fake_runs(effect_by_batch: dict, seeds: int = 4, noise: float = 0.5, rule: str = "linear") -> pd.DataFrame:
    """A runs frame of one arm with InfoNCE at 50% and FlatNCE at 50% + effect points, plus seeded noise."""
    rng = np.random.default_rng(0)
    rows = []
    for b, effect in effect_by_batch.items():
        for loss, shift in (("infonce", 0.0), ("flatnce", effect)):
            for seed in range(seeds):
                acc = (50 + shift + noise * rng.standard_normal()) / 100
                rows.append(dict(run_id=f"{rule}{b}{loss}{seed}", status="ok", lr_rule=rule, loss=loss, batch_size=b,
                                 seed=seed,
                                 knn_top1=acc, probe_top1=acc, info_nce_final=math.log(2 * b - 1) - 0.5,
                                 info_nce_ceiling=math.log(2 * b - 1),
                                 grad_scale_final=1 - math.exp(0.5 - math.log(2 * b - 1)),
                                 negative_entropy_final=math.log(2 * b - 2), steps=1000 // b, lr=0.1, train_s=1.0))
    return pd.DataFrame(rows)


def test_analysis_differences_are_flatnce_minus_infonce_with_welch_tests():
    runs = fake_runs({16: 4.0, 64: 1.0})
    s = study.resolve({**PARAMETERS, "batch_sizes": [16, 64]})
    out = study.analyze(runs, s)
    assert len(out["cells"]) == 4 and set(out["cells"].runs) == {4}
    for r in out["comparison"].itertuples():
        here = runs[runs.batch_size == r.batch_size]
        flat = 100 * here[here.loss == "flatnce"].probe_top1.to_numpy()
        info = 100 * here[here.loss == "infonce"].probe_top1.to_numpy()
        assert r.probe_diff == pytest.approx(flat.mean() - info.mean())
        assert r.probe_welch_p == pytest.approx(stats.welch_t_test(flat, info).p_value)
    assert {"loss", "batch_size", "loss:batch_size"} <= set(out["anova"]["linear"]["probe"].index)


def test_a_run_that_is_not_ok_is_left_out_of_the_analysis():
    runs = fake_runs({16: 4.0, 64: 1.0})
    runs.loc[0, ["status", "probe_top1", "knn_top1"]] = ["diverged", np.nan, np.nan]
    out = study.analyze(runs, study.resolve({**PARAMETERS, "batch_sizes": [16, 64]}))
    assert out["n_not_ok"] == 1 and out["cells"].runs.sum() == len(runs) - 1


@pytest.mark.parametrize("effects,central,small", [
    ({16: 6.0, 64: 3.0}, "reproduced", "reproduced"),  # 4.5 points on average, 3 more at the small batch
    ({16: -6.0, 64: -3.0}, "contradicted", "contradicted")])
def test_verdicts_follow_the_measured_differences(effects, central, small):
    s = study.resolve({**PARAMETERS, "batch_sizes": [16, 64], "dataset": "cifar10", "profile": "cpu",
                       "operating_points": []})
    out = study.analyze(fake_runs(effects), s)
    table = study.paper_vs_reproduced(out, s, study.gradient_identity_error())
    first = table.iloc[0]
    assert first["id"] == study.CENTRAL  # the report's summary finds FLAT's arm, first
    assert first.verdict == central
    assert table[table.quantity.str.contains("largest at small batches")].iloc[0].verdict == small


def test_a_profile_of_two_seeds_reads_no_claim_however_large_the_difference():
    """Issue 49: no claim is read on 2 seeds an arm. A 6-point gain on 2 seeds is *not measured*, saying why (and
    what reads it), not an inconclusive row; the same gain on 3 seeds is read, and reproduced."""
    s = study.resolve({**PARAMETERS, "batch_sizes": [16, 64], "dataset": "cifar10", "profile": "cpu",
                       "lr_rules": ["linear"], "operating_points": []})
    claims = {}
    for seeds in (2, 3):
        table = study.paper_vs_reproduced(study.analyze(fake_runs({16: 6.0, 64: 6.0}, seeds=seeds), s), s, 0.0)
        claims[seeds] = table[(table.kind == "claim") & ~table.quantity.str.contains("ImageNet")]
    two, three = claims[2], claims[3]
    assert len(two) == len(three) > 0 and (two.verdict == "not measured").all()
    assert two.ours.str.contains("2 seeds per arm at this profile, fewer than 3: not read here").all()
    assert three.iloc[0].verdict == "reproduced"


def test_every_published_number_has_a_row_with_an_evidence_tag():
    s = study.resolve(PARAMETERS)
    table = study.paper_vs_reproduced(study.analyze(fake_runs({16: 1.0, 32: 1.0}), s), s, 1e-16)
    assert list(table.columns) == ["quantity", "ours", "ci_level", "paper", "evidence", "n", "p", "p_holm", "power",
                                   "seeds_needed", "verdict", "kind", "seeds_parameters",
                                   "measure", "level", "effect_sd", "cells", "published", "id", "record"]
    text = " ".join(table.paper)
    for number in ("56.74", "54.62", "56.25", "53.98", "+0.28", "+0.36", "+1.69"):
        assert number in text
    assert table.evidence.str.match(r"^\[").all()
    # measured on shapes, every measured claim says it is a stand-in
    measured = table[(table.verdict != "not measured") & (table.kind == "claim")]
    assert len(measured) and measured.quantity.str.endswith("(on shapes, not CIFAR-10)").all()


def test_runs_and_curves_frames_read_the_records():
    record = dict(run_id="r1", status="ok", timings={"train_s": 2.0},
                  config=dict(loss="flatnce", batch_size=32, seed=1, lr_scaling="sqrt", lr=0.6),
                  metrics=dict(knn_top1=0.5, probe_top1=0.6, info_nce_final=3.0, grad_scale_final=0.95, steps=10,
                               lr=0.2,
                               curves=dict(info_nce=[4.0, 3.0], grad_scale=[0.98, 0.95], negative_entropy=[4.1, 4.0],
                                           lr=[0.2, 0.0])))
    runs = study.runs_frame([record])
    assert runs.iloc[0].negative_entropy_final == 4.0 and runs.iloc[0].info_nce_ceiling == pytest.approx(math.log(63))
    assert runs.iloc[0].lr_rule == "sqrt"  # the arm is the config's rule
    curves = study.curves_frame([record])
    assert len(curves) == 8 and set(curves.epoch) == {1, 2} and set(curves.lr_rule) == {"sqrt"}
    assert curves[(curves.metric == "info_nce") & (curves.epoch == 2)].value.item() == 3.0


# --------------------------------------------------- the benchmark's SimCLR row (lib.bench, last section)


def test_bench_simclr_rows_cover_the_widths_with_speedups_over_width_1():
    from lib.bench import SIMCLR_WIDTHS, simclr_width_rates

    x = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    rows = simclr_width_rates(x, repeat=1, batch=4)
    assert [r["width_multiplier"] for r in rows] == list(SIMCLR_WIDTHS) and rows[0]["speedup"] == 1.0
    for r in rows:
        assert r["batch"] == 4 and r["images_per_s"] > 0
        assert r["speedup"] == pytest.approx(r["images_per_s"] / rows[0]["images_per_s"])
        # convolutions dominate and scale as width^2 (the stem and the heads less): FLOPs track it
        width = r["width_multiplier"]
        assert 0.7 * width ** 2 <= r["gflop_per_image"] / rows[0]["gflop_per_image"] <= 1.3 * width ** 2


def test_the_regime_search_changes_one_setting_of_the_smallest_batchs_infonce_run_and_reads_its_factor():
    """Each search run is the shipped InfoNCE run at the profile's smallest batch (seed 0, under each rule) with one
    change of REGIME_SEARCH (the warm-up follows the epochs, the options the dataset); the table's factor is
    1 - e^(-InfoNCE) of the final epoch and a setting is in the regime where it is at most the threshold."""
    s = study.resolve({"profile": "cpu"})
    shipped = {(c.lr_scaling, c.batch_size): c for c in study.plan(s) if c.loss == "infonce" and c.seed == 0}
    configs = study.regime_search_configs(s)
    assert len(configs) == len(study.REGIME_SEARCH) * len(s["lr_rules"])
    for config, (change, rule) in zip(configs, [(c, r) for c in study.REGIME_SEARCH for r in s["lr_rules"]]):
        base = shipped[(rule, s["batch_sizes"][0])]
        differs = {k for k in vars(base) if getattr(config, k) != getattr(base, k)}
        assert differs == {k for k, v in change.items() if getattr(base, k) != v}, change
        assert config.warmup_epochs == pytest.approx(0.1 * config.epochs)  # FLAT's 10% warm-up at every length
    losses = {"linear": 0.2, "sqrt": -math.log(0.29)}  # factors 1 - e^-l: 0.181, then 0.71 (just above 0.7)
    records = [dict(config=vars(c), metrics={"info_nce_final": losses[c.lr_scaling], "probe_top1": 0.4},
                    timings={"wall_s": 100.0}) for c in configs[:2]]
    table = study.regime_table(records, pd.DataFrame(), s)
    searched = table[~table.setting.str.startswith("shipped")]
    assert list(searched.setting) == ["epochs = 12"] * 2
    assert searched.info_nce_factor.tolist() == pytest.approx([1 - math.exp(-0.2), 0.71])
    assert searched.in_regime.tolist() == [True, False] and study.FACTOR_THRESHOLD == 0.7
    assert not table[table.setting.str.startswith("shipped")].in_regime.any()  # no shipped runs: nothing reached


# --------------------------------------------------- the main figure: FlatNCE - InfoNCE per batch size

QUICK_RECORDS = PROJECT_ROOT / "results" / "runs" / study.STUDY / "quick"


def by_hand_gains(records: list[dict]) -> dict:
    """``{(rule, accuracy, batch size): sorted FlatNCE - InfoNCE of each seed, in points}``, read from the records
    themselves, without the study's frames: the runs of one seed and batch size under one rule, one per loss."""
    runs = {}
    for r in records:
        if r["status"] == "ok":
            c = r["config"]
            runs[(c["lr_scaling"], c["batch_size"], c["seed"], c["loss"])] = r["metrics"]
    gains = {}
    for (rule, b, seed, loss), metrics in runs.items():
        infonce = runs.get((rule, b, seed, "infonce"))
        if loss == "flatnce" and infonce is not None:
            for metric in ("probe_top1", "knn_top1"):
                gains.setdefault((rule, metric, b), []).append(100 * (metrics[metric] - infonce[metric]))
    return {key: sorted(values) for key, values in gains.items()}


def plotted(fig, gid: str) -> dict:
    """``{(rule, accuracy, batch size): sorted heights}`` of the points a figure of :func:`study.plot_gains` draws as
    ``gid`` (``seeds`` or ``mean without interval``), each panel's rule read from its title and each point's batch size
    from the tick it stands beside."""
    rules = {label: rule for rule, label in study.ARM_LABELS.items()}
    points = {}
    for ax in fig.axes:
        rule = rules[ax.get_title()]
        sizes = [int(label.get_text().split("\n")[0]) for label in ax.get_xticklabels()]
        artists = [(c.get_gid(), c.get_offsets()) for c in ax.collections]
        artists += [(line.get_gid(), np.column_stack([line.get_xdata(), line.get_ydata()])) for line in ax.lines]
        for name, xy in artists:
            if name and name.startswith(gid + ":"):
                metric = name.split(":")[1]
                for x, y in xy:
                    points.setdefault((rule, metric, sizes[round(float(x))]), []).append(float(y))
    return {key: sorted(values) for key, values in points.items()}


def test_the_main_figure_draws_each_seeds_paired_difference_of_the_shipped_quick_runs_without_intervals():
    """The shipped quick records (2 seeds per arm): each seed's FlatNCE - InfoNCE, computed here from the records, is
    what the figure draws, at its rule's panel and its batch size; the means are drawn hollow, no interval is drawn,
    and the legend says why (nothing is read from fewer than 3 seeds)."""
    import json

    import matplotlib.pyplot as plt

    records = [json.loads(path.read_text()) for path in sorted(QUICK_RECORDS.glob("*.json"))]
    assert len(records) == 24
    s = study.resolve({"profile": "quick"})
    runs = study.runs_frame(records)
    table = study.paper_vs_reproduced(study.analyze(runs, s), s, 0.0)
    gains = study.seed_gains(runs, s)
    fig = study.plot_gains(gains, study.gain_intervals(gains, table), "quick")
    try:
        expected = by_hand_gains(records)
        assert len(expected) == 2 * 2 * 3 and all(len(v) == 2 for v in expected.values())
        seeds = plotted(fig, "seeds")
        assert seeds.keys() == expected.keys()
        for key, values in expected.items():
            assert seeds[key] == pytest.approx(values, abs=1e-9), key
        means = plotted(fig, "mean without interval")
        assert {key: v[0] for key, v in means.items()} == pytest.approx(
            {key: float(np.mean(v)) for key, v in expected.items()}, abs=1e-9)
        assert all(not ax.containers for ax in fig.axes)  # no error bar anywhere
        legend = " ".join(text.get_text() for text in fig.legends[0].get_texts())
        assert "no interval: 2 seeds per arm, and nothing is read from fewer than 3" in legend
    finally:
        plt.close(fig)


def test_the_figures_intervals_are_the_verdicts_at_their_level_and_absent_below_3_seeds():
    """4 seeds at B = 16 and 64, 2 at B = 256: at 16 and 64 each accuracy's bar is the paired t interval at the level
    of that batch size's verdict, alpha / m with m = 2 measured claims (the two batch sizes), checked here by hand, and
    the linear probe's is the verdict row's own; at 256 the means stand without a bar, saying why."""
    import json

    import matplotlib.pyplot as plt
    from scipy import stats as st

    s = study.resolve({**PARAMETERS, "batch_sizes": [16, 64, 256], "dataset": "cifar10", "profile": "cpu",
                       "lr_rules": ["linear"], "operating_points": []})
    runs = fake_runs({16: 3.0, 64: 1.0, 256: 0.5}, seeds=4, noise=1.0)
    runs = runs[(runs.batch_size < 256) | (runs.seed < 2)].reset_index(drop=True)
    table = study.paper_vs_reproduced(study.analyze(runs, s), s, 0.0)
    records = {r["id"]: r for r in map(json.loads, table.record) if r["kind"] == "claim"}
    measured = sorted(key for key, r in records.items() if r["ci"] is not None)
    assert measured == ["s5.gain_at_batch:linear/B16", "s5.gain_at_batch:linear/B64"]
    gains = study.seed_gains(runs, s)
    intervals = study.gain_intervals(gains, table).set_index(["metric", "batch_size"])
    for b in (16, 64):
        verdict = records[f"s5.gain_at_batch:linear/B{b}"]
        probe = intervals.loc[("probe_top1", b)]
        assert [probe.ci_low, probe.ci_high] == pytest.approx(verdict["ci"], rel=1e-9)
        for metric in ("probe_top1", "knn_top1"):
            row = intervals.loc[(metric, b)]
            here = runs[runs.batch_size == b].pivot(index="seed", columns="loss", values=metric)
            differences = 100 * (here.flatnce - here.infonce).to_numpy()
            half = st.t.ppf(1 - 0.05 / 2 / 2, 3) * differences.std(ddof=1) / 2  # alpha / m, 3 df, sqrt(4 seeds)
            assert row.level == verdict["level"] == pytest.approx(0.05 / 2) and row.seeds == 4
            assert [row.ci_low, row.ci_high] == pytest.approx([differences.mean() - half, differences.mean() + half])
    for metric in ("probe_top1", "knn_top1"):
        assert math.isnan(intervals.loc[(metric, 256)].ci_low) and intervals.loc[(metric, 256)].seeds == 2
    fig = study.plot_gains(gains, intervals.reset_index(), "fake")
    try:
        (ax,) = fig.axes
        bars = {c.get_label(): c.lines[2][0].get_segments() for c in ax.containers}
        assert set(bars) == {"_interval:probe_top1", "_interval:knn_top1"}
        for metric in ("probe_top1", "knn_top1"):
            drawn = [(segment[0][1], segment[1][1]) for segment in bars[f"_interval:{metric}"]]
            expected = [(intervals.loc[(metric, b)].ci_low, intervals.loc[(metric, b)].ci_high) for b in (16, 64)]
            assert len(drawn) == len(expected) == 2  # every interval, both ends (approx compares flat lists only)
            assert [v for pair in drawn for v in pair] == pytest.approx([v for pair in expected for v in pair])
        assert set(plotted(fig, "mean without interval")) == {("linear", "probe_top1", 256),
                                                              ("linear", "knn_top1", 256)}
        legend = " ".join(text.get_text() for text in fig.legends[0].get_texts())
        assert "97.5% interval (the verdict's level)" in legend and "2 seeds per arm" in legend
    finally:
        plt.close(fig)


def test_the_small_batch_point_is_read_apart_paired_by_seed_beside_the_shipped_rows():
    """Issue 49: the cpu profile's operating point (the regime search's closest setting, B = 16) is not a cell of the
    tables by batch size; its central claim is FlatNCE - InfoNCE paired by seed on its own 3 seeds (the mean of the
    per-seed differences, computed here by hand), named as the central claim at that point, with the factor its
    InfoNCE runs reached as a check beside it; a batch size the grid holds cannot be a point."""
    s = study.resolve({**PARAMETERS, "profile": "cpu", "dataset": "cifar10", "lr_rules": ["linear"]})
    assert s["operating_points"] == ["small-batch"] and 16 not in s["batch_sizes"]
    shipped = fake_runs({32: 0.0, 128: 0.0}, seeds=2).assign(operating_point="")
    point = fake_runs({16: 3.0}, seeds=3, noise=1.0).assign(operating_point="small-batch")
    out = study.analyze(pd.concat([shipped, point], ignore_index=True), s)
    assert set(out["cells"].batch_size) == {32, 128} and len(out["points"]["small-batch"]) == 6
    table = study.paper_vs_reproduced(out, s, 0.0)
    row = table[table.quantity.str.startswith("[small-batch: batch size 16, epochs 6] ")].iloc[0]
    assert row["id"] == verdicts.point_id(study.CENTRAL, "small-batch") and row.n == "3 vs 3"
    by_seed = point.pivot(index="seed", columns="loss", values="probe_top1")
    estimate = float(json.loads(row.record)["estimate"])
    assert estimate == pytest.approx(100 * (by_seed.flatnce - by_seed.infonce).mean(), rel=1e-9)
    check = table[table.quantity.str.contains("small-batch") & (table.kind == "check")].iloc[0]
    factors = -np.expm1(-point[point.loss == "infonce"].info_nce_final)
    assert check.ours.startswith(f"{factors.mean():.3f} over 3 seeds")
    with pytest.raises(ParameterError, match="operating_points"):
        study.resolve({**PARAMETERS, "profile": "cpu", "batch_sizes": [16, 64]})
