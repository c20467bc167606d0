"""Value tests of the analyses of studies 4 (embedding norms) and 5 (FlatNCE across batch sizes).

Every runs frame here is planted: its cell means, differences, slopes and orderings are known by
construction, so each table value and each verdict string is checked against an answer derived
from the plant (or from an independent reference: a hand ANOVA formula, numpy OLS, brute-force
AUROC), never against the code's own output.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from sklearn.metrics import roc_auc_score
from statsmodels.stats.power import TTestPower

from lib.core.stats import auroc, auroc_test, loglog_slope, rank_correlation
from lib.studies import embedding_norms as norms_study
from lib.studies import flatnce_batch as flat_study

# =============================================================================== study 5

# Accuracies on a grid of 1/64: 100 * m / 64 = 1.5625 m is exact in binary, and so are the cell
# means over 4 seeds, so planted differences come back exactly (ties between batch sizes are ties).
UNIT = 100 / 64  # percentage points per grid step
DEVS = np.array([-2, -1, 1, 2])  # within-cell deviations (grid steps), the same in every cell: mean 0
# FlatNCE's run of seed i sits PAIR[i] further off than InfoNCE's: the two losses of a seed share its initialisation
# and data order (DEVS) but not all of their luck, so the per-seed differences are gain + PAIR, with mean the gain.
PAIR = np.array([1, -1, -1, 1])
BATCHES = [16, 64, 256]
BASE = {16: 30, 64: 36, 256: 40}  # InfoNCE's probe accuracy per batch size (grid steps): a batch main effect


def planted_flatnce_runs(probe_gain: dict, knn_gain: dict | None = None, grad_scale: dict | None = None,
                         batches=BATCHES, rule: str = "linear") -> pd.DataFrame:
    """Runs frame of study 5 (the columns of ``flat_study.runs_frame``), all in the learning-rate arm
    ``rule``: per batch size b and seed,
    InfoNCE's probe accuracy is BASE[b] + DEVS[seed] and FlatNCE's BASE[b] + probe_gain[b] + DEVS[seed] + PAIR[seed]
    (grid steps, stored as fractions); kNN is 8 steps lower with its own gains. ``grad_scale`` maps
    (loss, b) to the final gradient-scale factor (default 0.95)."""
    knn_gain = probe_gain if knn_gain is None else knn_gain
    grad_scale = grad_scale or {}
    rows = []
    for b in batches:
        for loss in ("infonce", "flatnce"):
            for seed, dev in enumerate(DEVS):
                if loss == "flatnce":
                    dev = dev + PAIR[seed]
                probe = BASE[b] + dev + (probe_gain[b] if loss == "flatnce" else 0)
                knn = BASE[b] - 8 + dev + (knn_gain[b] if loss == "flatnce" else 0)
                g = grad_scale.get((loss, b), 0.95)
                rows.append(dict(run_id=f"{rule}-{loss}-{b}-{seed}", status="ok", lr_rule=rule, loss=loss,
                                 batch_size=b, seed=seed, knn_top1=knn / 64, probe_top1=probe / 64,
                                 info_nce_final=-math.log(1 - g), info_nce_ceiling=math.log(2 * b - 1),
                                 grad_scale_final=g, negative_entropy_final=math.log(2 * b - 2), steps=4096 // b,
                                 lr=0.6, train_s=1.0))
    return pd.DataFrame(rows)


def flat_settings(batches=BATCHES, dataset="cifar10", rules=("linear",)):
    return flat_study.resolve({"profile": "cpu", "losses": ["infonce", "flatnce"], "batch_sizes": list(batches),
                               "dataset": dataset, "temperature": 0.1, "device": "cpu", "lr_rules": list(rules),
                               "operating_points": []})  # the cpu point runs B = 16, which these grids hold


FLAT_ARM = f"[{flat_study.ARM_LABELS['linear']}] "  # the start of every measured quantity of FLAT's arm


def welch_p_of_planted_gain(gain_steps: float) -> float:
    """Welch's p of one batch size's two cells of 4 runs, by scipy on the planted values (FlatNCE's cell has the
    wider spread DEVS + PAIR)."""
    flat, info = (gain_steps + DEVS + PAIR) * UNIT, DEVS * UNIT
    return float(st.ttest_ind(flat, info, equal_var=False).pvalue)


def paired_p_of_planted_gain(gain_steps: float) -> float:
    """The paired t's p of a planted gain, by hand: the per-seed differences are (gain + PAIR) grid steps, so
    t = gain / (sd(PAIR) / sqrt(n)) on n - 1 = 3 degrees of freedom."""
    t = gain_steps / (np.std(PAIR, ddof=1) / math.sqrt(len(PAIR)))
    return float(2 * st.t.sf(abs(t), len(PAIR) - 1))


def hand_interaction(probe_gain: dict, batches=BATCHES) -> tuple[float, float, float]:
    """(SS, F, p) of the loss x batch interaction of the planted 2 x k design with n = len(DEVS)
    runs per cell, by the balanced-design formula
        SS_AB = n * sum_ij (mean_ij - mean_i. - mean_.j + mean_..)^2,   SS_res = sum (y - mean_ij)^2,
    F = (SS_AB / (k - 1)) / (SS_res / (2 k (n - 1)))."""
    n, k = len(DEVS), len(batches)
    means = UNIT * np.array([[BASE[b] for b in batches], [BASE[b] + probe_gain[b] for b in batches]], dtype=float)
    effect = means - means.mean(1, keepdims=True) - means.mean(0, keepdims=True) + means.mean()
    ss_ab = n * float((effect ** 2).sum())
    ss_res = k * float(((DEVS * UNIT) ** 2).sum() + (((DEVS + PAIR) * UNIT) ** 2).sum())  # mean 0 in every cell
    f = (ss_ab / (k - 1)) / (ss_res / (2 * k * (n - 1)))
    return ss_ab, f, float(st.f.sf(f, k - 1, 2 * k * (n - 1)))


def test_cells_report_planted_means_in_percent_and_the_sd_over_seeds():
    out = flat_study.analyze(planted_flatnce_runs({16: 6, 64: 2, 256: 0}), flat_settings())
    cells = out["cells"].set_index(["batch_size", "loss"])
    assert out["n_ok"] == 2 * len(BATCHES) * len(DEVS) and out["n_not_ok"] == 0
    assert (cells.runs == len(DEVS)).all()
    sd = {"infonce": np.std(DEVS * UNIT, ddof=1), "flatnce": np.std((DEVS + PAIR) * UNIT, ddof=1)}
    assert cells.loc[(16, "flatnce"), "probe_mean"] == (BASE[16] + 6) * UNIT
    assert cells.loc[(64, "infonce"), "knn_mean"] == (BASE[64] - 8) * UNIT
    for loss, expected in sd.items():
        here = cells.xs(loss, level="loss")
        assert here.probe_sd.to_numpy() == pytest.approx(expected) and here.knn_sd.to_numpy() == pytest.approx(expected)
    assert cells.loc[(256, "infonce"), "info_nce_ceiling"] == pytest.approx(math.log(511))


def test_differences_are_flatnce_minus_infonce_with_the_planted_value_and_sign():
    # probe: FlatNCE higher at 16, lower at 256; kNN planted with other gains so the columns cannot be swapped
    probe_gain, knn_gain = {16: 6, 64: 2, 256: -4}, {16: -2, 64: 0, 256: 4}
    out = flat_study.analyze(planted_flatnce_runs(probe_gain, knn_gain), flat_settings())
    comparison = out["comparison"].set_index("batch_size")
    assert list(comparison.index) == BATCHES
    for b in BATCHES:
        assert comparison.loc[b, "probe_diff"] == probe_gain[b] * UNIT
        assert comparison.loc[b, "knn_diff"] == knn_gain[b] * UNIT
        for short, gain in (("probe", probe_gain[b]), ("knn", knn_gain[b])):
            t = comparison.loc[b, f"{short}_welch_t"]
            assert np.sign(t) == np.sign(gain)  # t has the sign of FlatNCE - InfoNCE
            if gain:
                assert comparison.loc[b, f"{short}_welch_p"] == pytest.approx(welch_p_of_planted_gain(gain), rel=1e-9)
    assert (comparison.runs_flatnce == len(DEVS)).all() and (comparison.runs_infonce == len(DEVS)).all()


@pytest.mark.filterwarnings("ignore:two_way_anova:UserWarning")  # the ANOVA's announced fallback to additive
def test_a_batch_size_with_one_loss_only_has_no_difference():
    runs = planted_flatnce_runs({16: 6, 64: 2, 256: 0})
    runs = runs[~((runs.batch_size == 256) & (runs.loss == "flatnce"))]
    comparison = flat_study.analyze(runs, flat_settings())["comparison"].set_index("batch_size")
    assert comparison.loc[256, "runs_flatnce"] == 0 and np.isnan(comparison.loc[256, "probe_diff"])
    assert comparison.loc[16, "probe_diff"] == 6 * UNIT


@pytest.mark.parametrize("design,probe_gain", [
    ("additive", {16: 4, 64: 4, 256: 4}),   # the same gain at every batch size: no interaction at all
    ("crossed", {16: 8, 64: 0, 256: 0}),    # a gain at the smallest batch only
    ("reversed", {16: 0, 64: 0, 256: 8}),   # a gain at the largest batch only
])
def test_interaction_of_the_anova_equals_the_balanced_hand_formula(design, probe_gain):
    out = flat_study.analyze(planted_flatnce_runs(probe_gain), flat_settings())
    row = out["anova"]["linear"]["probe"].loc["loss:batch_size"]
    ss, f, p = hand_interaction(probe_gain)
    assert row["df"] == len(BATCHES) - 1
    assert row["sum_sq"] == pytest.approx(ss, abs=1e-9)
    assert row["F"] == pytest.approx(f, abs=1e-9)
    assert row["PR(>F)"] == pytest.approx(p, abs=1e-9)
    if design == "additive":
        assert ss == pytest.approx(0, abs=1e-12) and p == pytest.approx(1.0)
    else:
        assert p < 0.01


def flat_table(probe_gain: dict, knn_gain: dict | None = None, grad_scale: dict | None = None, **settings):
    s = flat_settings(**settings)
    out = flat_study.analyze(planted_flatnce_runs(probe_gain, knn_gain, grad_scale), s)
    return flat_study.paper_vs_reproduced(out, s, identity_error=0.0)


def flat_row(table: pd.DataFrame, start: str) -> pd.Series:
    """The one row whose id is ``start`` (a claim's id) or, failing that, whose quantity starts with it."""
    hits = table[table["id"] == start]
    hits = hits if len(hits) else table[table.quantity.str.startswith(start)]
    assert len(hits) == 1, (start, list(table.quantity))
    return hits.iloc[0]


def test_the_central_claim_is_the_gain_averaged_over_batch_sizes_paired_by_seed():
    # every seed's deviations are the same at every batch size, so a seed's mean over batch sizes keeps them:
    # a seed's FlatNCE mean sits the mean gain (6 steps) + PAIR[seed] above its InfoNCE mean
    table = flat_table({16: 8, 64: 6, 256: 4})
    central = flat_row(table, flat_study.CENTRAL)
    assert table.iloc[0].quantity == central.quantity  # the central claim leads the table
    assert central.ours.startswith(f"{6 * UNIT:.3g} [") and central.n == "4 vs 4"
    assert float(central.p) == pytest.approx(paired_p_of_planted_gain(6), rel=1e-2)
    assert float(central.p) < welch_p_of_planted_gain(6)  # pairing removes the seeds' shared luck, DEVS
    assert central.verdict == "reproduced"  # 9.4 points, significant; the CI reaches our smallest gain, 1 point
    b16 = flat_row(table, FLAT_ARM + "FlatNCE - InfoNCE, linear-probe top-1 at B = 16")
    assert b16.ours.startswith(f"{8 * UNIT:.3g} [") and float(b16.p) == pytest.approx(paired_p_of_planted_gain(8),
                                                                                          rel=1e-2)
    # kNN has its own planted gains: the columns cannot be swapped
    knn = flat_row(flat_table({16: 8, 64: 6, 256: 4}, knn_gain={16: -2, 64: -2, 256: -2}),
                   FLAT_ARM + "FlatNCE - InfoNCE, kNN top-1, mean over batch sizes")
    assert knn.ours.startswith(f"{-2 * UNIT:.3g} [")


def test_no_gain_with_four_seeds_is_inconclusive_and_says_what_it_would_take():
    table = flat_table({16: 0, 64: 0, 256: 0})
    central = flat_row(table, flat_study.CENTRAL)
    assert central.ours.startswith("0 [") and central.verdict.startswith("inconclusive (power ")
    # Cohen's d of our smallest gain of interest on the per-seed differences (SD of PAIR), at that SD's one-sided
    # 80% upper limit (df 3: 4 pairs), and the seeds a one-sample t needs for 80% power at it
    d = flat_study.SMALLEST_GAIN / (np.std(PAIR * UNIT, ddof=1) * math.sqrt(3 / st.chi2.ppf(0.2, 3)))
    tested = int(((table.kind == "claim") & (table.p != "–")).sum())  # the study's family: power at 0.05 / m
    assert tested > 1 and int(central.seeds_needed) == math.ceil(
        TTestPower().solve_power(effect_size=d, power=0.8, alpha=0.05 / tested))


def test_the_small_batch_claim_is_the_difference_of_the_end_gains():
    runs = planted_flatnce_runs({16: 8, 64: 0, 256: 2})
    flat = flat_study.end_difference(runs, "linear", "flatnce", 16, 256)
    info = flat_study.end_difference(runs, "linear", "infonce", 16, 256)
    assert flat == {seed: (BASE[16] + 8 - BASE[256] - 2) * UNIT for seed in range(len(DEVS))}
    assert info == {seed: (BASE[16] - BASE[256]) * UNIT for seed in range(len(DEVS))}
    row = flat_row(flat_table({16: 8, 64: 0, 256: 2}), FLAT_ARM + "FlatNCE's gain is largest at small batches")
    assert row.quantity.startswith(FLAT_ARM + "FlatNCE's gain is largest at small batches: its gain at B = 16 - at "
                                              "B = 256")
    assert row.ours.startswith(f"{6 * UNIT:.3g} [")


def test_the_gradient_scale_factor_is_a_check_that_names_the_ceiling():
    grad = {("infonce", 16): 0.6, ("infonce", 256): 1 - math.exp(-math.log(511)), ("flatnce", 16): 0.99}
    table = flat_table({16: 4, 64: 2, 256: 0}, grad_scale=grad)
    row = flat_row(table, FLAT_ARM + "gradient-scale factor")
    assert row.verdict == "check"
    assert row.ours.startswith(f"B=16: 0.600 (InfoNCE {-math.log(0.4):.2f} of {math.log(31):.2f})")
    assert row.ours.endswith("InfoNCE ended within 1% of its ceiling log(2N - 1) at B=256")
    # the accuracy claims are what was measured, whatever the ceiling (no "the losses train alike")
    plain = flat_table({16: 4, 64: 2, 256: 0})
    claims = table.kind == "claim"
    assert table[claims].drop(columns="quantity").equals(plain[plain.kind == "claim"].drop(columns="quantity"))


def test_unrun_imagenet_numbers_are_not_measured_and_the_identity_is_a_check():
    table = flat_table({16: 4, 64: 2, 256: 0}, dataset="shapes")
    assert (table[table.quantity.str.contains("ImageNet")].verdict == "not measured").all()
    identity = flat_row(table, "per-anchor identity")
    assert identity.verdict == "check" and identity.ours.endswith("holds to rounding")
    assert table[table.kind == "claim"].quantity.str.contains(r"\(on shapes, not CIFAR-10\)|ImageNet").all()


# =============================================================================== study 4


def sphere_result(radii, steps, growth=0.1, history_length=5) -> list[dict]:
    """The sphere simulation's runs as ``convergence_table`` reads them (each ``lib.ssl.simulations.simulate_sphere``
    config with its metrics), planted: every mean norm starts at rho and grows by ``growth`` a step."""
    return [dict(rho=rho, steps=int(n), norm_start=rho, norm_end=rho + growth * (history_length - 1),
                 norm_growth_per_step=growth, min_norm_change=0.0, max_cos_grad=1e-16) for rho, n in zip(radii, steps)]


RADII = [0.5, 1.0, 2.0, 4.0, 8.0]


def test_convergence_table_reads_steps_over_rho_squared_and_the_norm_growth():
    table = norms_study.convergence_table(sphere_result(RADII, [int(16 * r ** 2) for r in RADII]))
    assert (table.steps_over_rho2 == 16).all()  # steps = 16 rho^2 exactly
    assert table.norm_growth_per_step.to_numpy() == pytest.approx(0.1)
    assert table.relative_norm_growth.to_numpy() == pytest.approx([0.4 / r for r in RADII])
    assert table.norm_start.tolist() == RADII


@pytest.mark.parametrize("power", [2, 3])
def test_fit_recovers_the_planted_power_and_the_check_row_shows_it(power):
    # steps = 16 rho^power exactly; a radius that never converged (-1) is left out of the fit
    steps = [int(16 * r ** power) for r in RADII] + [-1]
    table = norms_study.convergence_table(sphere_result(RADII + [16.0], steps))
    fit = norms_study.fit_convergence(table)
    assert fit["radii"] == len(RADII)
    # linregress's stderr goes through sqrt(1 - r^2): an exact line leaves ~1e-8 of rounding
    assert fit["slope"] == pytest.approx(power, abs=1e-12) and fit["stderr"] == pytest.approx(0, abs=1e-6)
    table = norms_study.paper_vs_reproduced(fit, table, latent_frame(), empty_runs(), [], None, None)
    conv_row = table[table.quantity.str.startswith("(a) convergence")].iloc[0]
    # a simulation of the paper's theorem: a check of our code, never a reproduction
    assert conv_row.verdict == "check" and conv_row.ours.startswith(f"{float(power):.3f} [")


def test_fit_ci_is_t_quantile_times_the_ols_standard_error_of_the_log_log_line():
    # steps = 16 rho^2 times planted factors: the slope and its error from an OLS written in numpy
    factors = np.array([1.3, 0.8, 1.1, 0.9, 1.2])
    steps = np.array([int(16 * r ** 2 * f) for r, f in zip(RADII, factors)])
    fit = norms_study.fit_convergence(norms_study.convergence_table(sphere_result(RADII, steps)))
    x, y = np.log(RADII), np.log(steps)
    design = np.column_stack([np.ones_like(x), x])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ beta
    stderr = math.sqrt(residual @ residual / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    assert fit["slope"] == pytest.approx(beta[1], rel=1e-10)
    assert fit["stderr"] == pytest.approx(stderr, rel=1e-10)
    assert fit["ci"] == pytest.approx(st.t.ppf(0.975, len(x) - 2) * stderr, rel=1e-10)


def test_fit_needs_three_converged_radii():
    table = norms_study.convergence_table(sphere_result([1.0, 2.0, 4.0], [16, 64, 0]))
    fit = norms_study.fit_convergence(table)
    assert fit["radii"] == 2 and np.isnan(fit["slope"]) and np.isnan(fit["ci"])


def latent_results(end_norms_per_seed, start_norms=None, weights=(1, 2, 4, 8)) -> list[dict]:
    """What ``lib.ssl.simulations.latent_class_simulation`` returns per seed, planted: the class-norm history
    is [start, end]; the start is 1 for every class unless given."""
    out = []
    for i, end in enumerate(end_norms_per_seed):
        start = np.ones(len(weights)) if start_norms is None else np.asarray(start_norms[i], dtype=float)
        out.append({"class_weights": np.asarray(weights, dtype=float), "class_counts": 100 * np.asarray(weights),
                    "class_norm_history": np.stack([start, np.asarray(end, dtype=float)])})
    return out


def test_latent_summary_of_norms_increasing_with_class_weight_is_rho_plus_one():
    end = [1.0, 2.0, 3.0, 5.0]  # the same ordering in both seeds: rank ties match weight ties
    table = norms_study.latent_table(latent_results([end, end]))
    assert len(table) == 8 and table["count"].tolist() == [100, 200, 400, 800] * 2
    assert table.norm_growth.tolist() == end * 2  # start 1: growth = end
    summary = norms_study.latent_summary(table)
    assert summary["rho_norm"] == pytest.approx(1.0) and summary["rho_growth"] == pytest.approx(1.0)
    assert summary["rarest_smallest"] == 1.0 and summary["seeds"] == 2
    assert summary["p_norm"] < 0.05
    # both seeds hit, each with chance 1/4: P(X >= 2) for X ~ Binomial(2, 1/4) = 1/16
    assert summary["rarest_smallest_count"] == 2 and summary["p_rarest"] == pytest.approx(1 / 16, rel=1e-12)


def test_latent_binomial_test_is_the_upper_tail_against_one_in_k():
    # 8 of 20 seeds with the rarest class smallest (chance 1/4): P(X >= 8), X ~ Binomial(20, 1/4), by hand
    ends = [[0.5, 2.0, 3.0, 4.0]] * 8 + [[3.5, 2.0, 1.0, 4.0]] * 12
    summary = norms_study.latent_summary(norms_study.latent_table(latent_results(ends)))
    tail = sum(math.comb(20, k) * 0.25 ** k * 0.75 ** (20 - k) for k in range(8, 21))
    assert summary["rarest_smallest_count"] == 8 and summary["seeds"] == 20 and summary["chance"] == 0.25
    assert summary["p_rarest"] == pytest.approx(tail, rel=1e-9)
    assert 0.05 < tail < 0.2  # about 0.10: not significant
    table = norms_table(empty_runs(), latent=norms_study.latent_table(latent_results(ends)))
    row = table[table.quantity.str.startswith("(b) the rarest class ends smallest")].iloc[0]
    assert row.verdict == "check" and row.ours.startswith("8 of 20 seeds (chance 5.0; p = 0.1")


def test_latent_summary_separates_final_norm_from_growth():
    # final norms decrease with weight, but the start norms decrease faster: the growth increases
    end, start = [8.0, 6.0, 4.0, 2.0], [16.0, 6.0, 2.0, 0.5]
    summary = norms_study.latent_summary(norms_study.latent_table(latent_results([end, end], [start, start])))
    assert summary["rho_norm"] == pytest.approx(-1.0) and summary["rho_growth"] == pytest.approx(1.0)
    assert summary["rarest_smallest"] == 0.0


def test_latent_summary_share_of_seeds_and_pooled_rho_match_an_independent_ranking():
    ends = [[1.0, 2.0, 3.0, 4.0], [2.5, 1.5, 3.5, 4.5], [0.5, 2.2, 3.1, 4.2]]  # seed 1: rarest not smallest
    table = norms_study.latent_table(latent_results(ends))
    summary = norms_study.latent_summary(table)
    assert summary["rarest_smallest"] == pytest.approx(2 / 3)
    weights, values = np.tile([1, 2, 4, 8], 3), np.concatenate(ends)
    rho = np.corrcoef(st.rankdata(weights), st.rankdata(values))[0, 1]  # Spearman = Pearson of mid-ranks
    assert summary["rho_norm"] == pytest.approx(rho, rel=1e-12)


def norms_run(method="simclr", data="balanced", intervention="default", seed=0, knn=0.5, probe=None, status="ok",
              **extra) -> dict:
    """One row of study 4's runs frame (the columns ``norms_study.runs_frame`` writes that the analyses read)."""
    return {**dict(run_id=f"{method}-{data}-{intervention}-{seed}", status=status, method=method, dataset="shapes",
                   data=data, intervention=intervention, kind=intervention.split("=")[0], seed=seed,
                   knn_top1=knn, probe_top1=knn if probe is None else probe, embedding_norm_first_epoch=1.0,
                   embedding_norm_last_epoch=2.0, norm_mean_test=2.0, embedding_spread_last_epoch=0.5,
                   class_norm_count_rho=np.nan, norm_rho=0.2, norm_p=0.01, norm_rho_train=0.3), **extra}


def empty_runs() -> pd.DataFrame:
    return pd.DataFrame(columns=list(norms_run()))


def test_intervention_table_means_in_percent_and_changes_against_the_same_arms_default():
    runs = pd.DataFrame([
        norms_run(seed=0, knn=0.50, probe=0.60), norms_run(seed=1, knn=0.52, probe=0.62),           # 51%, 61%
        norms_run(intervention="cut_init", seed=0, knn=0.53, probe=0.615),
        norms_run(intervention="cut_init", seed=1, knn=0.55, probe=0.635),                          # +3, +1.5
        norms_run(method="simsiam", data="imbalanced", knn=0.20, probe=0.30),
        norms_run(method="simsiam", data="imbalanced", intervention="grad_scale", knn=0.15, probe=0.32),  # -5, +2
    ])
    table = norms_study.intervention_table(runs).set_index(["method", "data", "intervention"])
    assert table.loc[("simclr", "balanced", "default"), "knn_top1"] == pytest.approx(51.0)
    assert table.loc[("simclr", "balanced", "cut_init"), "knn_top1_vs_default"] == pytest.approx(3.0)
    assert table.loc[("simclr", "balanced", "cut_init"), "probe_top1_vs_default"] == pytest.approx(1.5)
    assert table.loc[("simsiam", "imbalanced", "grad_scale"), "knn_top1_vs_default"] == pytest.approx(-5.0)
    assert table.loc[("simsiam", "imbalanced", "grad_scale"), "probe_top1_vs_default"] == pytest.approx(2.0)
    defaults = table.xs("default", level="intervention")
    assert (defaults.knn_top1_vs_default == 0).all() and (defaults.probe_top1_vs_default == 0).all()
    assert table.loc[("simclr", "balanced", "cut_init"), "runs"] == 2


LABELS = ["cifar10_classes5-9", "svhn"]  # the near-OOD set (held-out classes), a far one


def ood_columns(aurocs, ps, unseen_norms, init_aurocs=(np.nan, np.nan)) -> dict:
    columns = {}
    for label, a, p, n, a0 in zip(LABELS, aurocs, ps, unseen_norms, init_aurocs):
        columns.update({f"auroc_{label}": a, f"auroc_p_{label}": p, f"norm_mean_{label}": n,
                        f"auroc_init_{label}": a0, f"norm_mean_init_{label}": n / 2})
    return columns


def ood_run(seed=0, method="simclr", **extra) -> dict:
    """A row of the runs frame for an OOD run (trained on the seen classes)."""
    return norms_run(method=method, data="seen_classes", seed=seed, norm_mean_init_test=1.0, **extra)


def test_ood_table_has_one_row_per_ood_run_and_unseen_set_with_init_and_trained_values():
    runs = pd.DataFrame([
        ood_run(**ood_columns([0.8, 0.6], [0.001, 0.2], [1.5, 1.8], [0.45, 0.3])),
        ood_run(method="simsiam", **ood_columns([0.3, 0.7], [0.01, 0.04], [2.5, 1.0], [0.5, 0.9])),
        ood_run(seed=1, status="diverged", **ood_columns([0.9, 0.9], [0.0, 0.0], [0.0, 0.0])),   # not ok: left out
        norms_run(**ood_columns([0.9, 0.9], [0.0, 0.0], [0.0, 0.0])),       # a balanced run: not an OOD run
    ])
    table = norms_study.ood_table(runs, LABELS + ["mnist"], near=LABELS[0])  # mnist: no column, no row
    assert len(table) == 4 and set(table.unseen) == set(LABELS)
    row = table[(table.method == "simsiam") & (table.unseen == "svhn")].iloc[0]
    assert (row.auroc, row.p, row.norm_unseen, row.norm_test, row.set) == (0.7, 0.04, 1.0, 2.0, "far")
    assert (row.auroc_init, row.norm_unseen_init, row.norm_test_init) == (0.9, 0.5, 1.0)
    row = table[(table.method == "simclr") & (table.unseen == LABELS[0])].iloc[0]
    assert (row.auroc, row.auroc_init, row.p, row.set) == (0.8, 0.45, 0.001, "near")


def test_ood_table_accepts_a_label_with_a_decimal_option():
    # lib.ssl.evaluation.ood_label({"dataset": "shapes", "dataset_options": {"difficulty": 0.5}})
    label = "shapes_difficulty0.5"
    runs = pd.DataFrame([ood_run(**{f"auroc_{label}": 0.7, f"auroc_p_{label}": 0.01, f"norm_mean_{label}": 1.0})])
    assert norms_study.ood_table(runs, [label], near=None).auroc.tolist() == [0.7]


FIT = dict(slope=2.0, stderr=0.01, ci=0.03, radii=5)


def latent_frame(seeds=20) -> pd.DataFrame:
    """A latent-class table in which the norm grows with class frequency in every seed, with a different
    amount of noise per seed (so that the per-seed rhos differ)."""
    rng = np.random.default_rng(0)
    ends = [np.array([1.0, 2.0, 3.0, 5.0]) + rng.normal(scale=0.8 + 0.1 * (i % 5), size=4) for i in range(seeds)]
    return norms_study.latent_table(latent_results(ends))


def norms_table(runs: pd.DataFrame, labels=(), stand_in=None, convergence=None, near=None,
                latent=None) -> pd.DataFrame:
    convergence = convergence if convergence is not None else norms_study.convergence_table(
        sphere_result(RADII, [int(16 * r ** 2) for r in RADII]))
    return norms_study.paper_vs_reproduced(FIT, convergence, latent if latent is not None else latent_frame(), runs,
                                           list(labels), near, stand_in)


def _one(table: pd.DataFrame, start: str) -> pd.Series:
    hits = table[table.quantity.str.startswith(start)]
    assert len(hits) == 1, (start, list(table.quantity))
    return hits.iloc[0]


def test_the_ood_claim_is_the_trained_networks_auroc_against_chance_per_seed():
    """The paper's quantity: the trained network's norm as an in-distribution score, AUROC against 0.5 (a t-test over
    seeds, at the family's level); the gain over initialisation is our refinement, a check beside it."""
    near = LABELS[0]
    gains = {0: 0.10, 1: 0.14, 2: 0.12, 3: 0.08}  # trained - initial AUROC per seed, from 0.5 at initialisation
    runs = pd.DataFrame([ood_run(seed=i, **{f"auroc_{near}": 0.5 + g, f"auroc_p_{near}": 0.001,
                                            f"auroc_init_{near}": 0.5}) for i, g in gains.items()])
    table = norms_table(runs, labels=[near], near=near)
    row = _one(table, "(d) simclr: the norm as an OOD score (near-OOD")
    assert "AUROC of the trained network's norm" in row.quantity and row.kind == "claim"
    values = 0.5 + np.array(list(gains.values()))
    m = int(((table.kind == "claim") & (table.p != "–")).sum())  # the family's measured claims: the level 0.05 / m
    half = st.t.ppf(1 - 0.05 / (2 * m), 3) * values.std(ddof=1) / 2
    assert row.ours == f"{values.mean():.3g} [{values.mean() - half:.3g}, {values.mean() + half:.3g}]"
    assert row.ci_level == f"{100 * (1 - 0.05 / m):.3g}%"
    assert float(row.p) == pytest.approx(st.ttest_1samp(values, 0.5).pvalue, rel=1e-2) and row.n == "4"
    assert row.verdict == "reproduced"  # significant, and the CI reaches our smallest distance of interest, 0.55
    gain = _one(table, "(d) simclr, near-OOD")
    assert gain.kind == "check" and gain.ours.startswith("+0.11 [") and "at initialisation 0.5" in gain.ours


def test_a_gain_over_initialisation_does_not_stand_for_the_papers_ordering():
    """Study 4's far-OOD SimSiam row at cpu: training raised the AUROC by about 0.2, but from far below 0.5 to still
    below it: unseen data get *larger* norms, against the paper. The verdict is the trained AUROC's."""
    far = LABELS[1]
    runs = pd.DataFrame([ood_run(seed=i, **{f"auroc_{far}": 0.30 + 0.01 * i, f"auroc_p_{far}": 0.001,
                                            f"auroc_init_{far}": 0.10 + 0.012 * i}) for i in range(5)])
    table = norms_table(runs, labels=[far], near=LABELS[0])
    row = _one(table, "(d) simclr: the norm as an OOD score (far-OOD")
    assert row.ours.startswith("0.32 [") and row.verdict == "contradicted"
    assert _one(table, "(d) simclr, far-OOD").ours.startswith("+0.196 [")


def test_an_ordering_already_there_at_initialisation_is_named_beside_the_verdict():
    near = LABELS[0]
    # trained 0.8 at every seed, but 0.85 at initialisation: the paper's ordering holds, training did not make it
    runs = pd.DataFrame([ood_run(seed=i, **{f"auroc_{near}": 0.8 + 0.01 * i, f"auroc_p_{near}": 0.001,
                                            f"auroc_init_{near}": 0.85 + 0.02 * i}) for i in range(4)])
    table = norms_table(runs, labels=[near], near=near)
    row = _one(table, "(d) simclr: the norm as an OOD score (near-OOD")
    assert row.ours.startswith("0.815 [") and row.verdict == "reproduced"
    assert _one(table, "(d) simclr, near-OOD").ours.startswith("-0.065 [")


def test_ood_rows_put_the_near_set_first():
    runs = pd.DataFrame([ood_run(seed=i, **ood_columns([0.8, 0.9], [0.001, 0.001], [1.0, 1.0], [0.85, 0.2]))
                         for i in range(2)])
    table = norms_table(runs, labels=LABELS[::-1], near=LABELS[0])  # the far set listed first
    ood = table[table.quantity.str.contains("OOD score")]
    assert "near-OOD, held-out classes" in ood.quantity.iloc[0] and "far-OOD svhn (secondary)" in ood.quantity.iloc[1]


def test_without_ood_runs_the_ood_claim_is_not_measured():
    table = norms_table(pd.DataFrame([norms_run()]), labels=LABELS, near=LABELS[0])
    row = table[table.quantity.str.contains("OOD score")]
    assert len(row) == 1 and row.verdict.item() == "not measured"


def test_one_seed_is_not_measured_and_says_why():
    table = norms_table(pd.DataFrame([norms_run(norm_rho=0.4)]))
    row = _one(table, "(d) simclr: the norm as a confidence score")
    assert row.verdict == "not measured" and row.ours == "not measured: 1 seed per arm: a CI over seeds needs two"


def test_confidence_latent_and_identity_rows_follow_their_planted_numbers():
    runs = pd.DataFrame([norms_run(seed=i, norm_rho=-0.4 + 0.02 * i) for i in range(4)])  # negative in every seed
    table = norms_table(runs)
    assert _one(table, "(d) simclr: the norm as a confidence score").verdict == "contradicted"
    latent = latent_frame()
    rhos = [st.spearmanr(g.weight, g.norm_end).statistic for _, g in latent.groupby("seed")]
    row = _one(table, "(b) rarer latent classes")
    assert row.n == "20" and row.ours.startswith(f"{np.mean(rhos):.3g} [")
    assert row.verdict in ("reproduced", "reproduced, smaller")
    assert _one(table, "(a) every gradient step").ours.endswith("no norm ever shrank")
    assert (table[table.kind == "check"].verdict == "check").all()


def test_a_shrinking_norm_is_reported():
    result = sphere_result(RADII, [int(16 * r ** 2) for r in RADII])
    result[2]["min_norm_change"] = -1e-6
    table = norms_table(empty_runs(), convergence=norms_study.convergence_table(result))
    assert _one(table, "(a) every gradient step").ours.endswith("a norm shrank")


def intervention_runs(simsiam_default, simsiam_treated: dict, simclr_default, simclr_cut, seeds=1) -> pd.DataFrame:
    rows = []
    for seed in range(seeds):
        jitter = 0.01 * (seed % 3)  # seed-to-seed spread, the same in every arm
        rows.append(norms_run("simsiam", "imbalanced", "default", seed, knn=simsiam_default + jitter))
        rows += [norms_run("simsiam", "imbalanced", name, seed, knn=k + jitter) for name, k in simsiam_treated.items()]
        rows.append(norms_run("simclr", "balanced", "default", seed, knn=simclr_default + jitter))
        rows.append(norms_run("simclr", "balanced", "cut_init", seed, knn=simclr_cut + jitter))
    return pd.DataFrame(rows)


def test_each_intervention_is_its_own_claim_against_the_default_seeds():
    runs = intervention_runs(0.20, {"cut_init": 0.25, "grad_scale": 0.30}, 0.50, 0.53, seeds=6)
    table = norms_table(runs)
    cut, scale = (_one(table, f"(c) simsiam on imbalanced data: kNN accuracy with {name} - default")
                  for name in ("cut_init", "grad_scale"))
    assert cut.ours.startswith("5 [") and scale.ours.startswith("10 [") and scale.n == "6 vs 6"
    assert scale.paper == "21.6% -> 31.5% (+9.9, CIFAR-100)" and scale.verdict == "reproduced"
    assert cut.verdict == "reproduced, smaller"  # 5 points, the CI short of 9.9
    simclr = _one(table, "(c) simclr on balanced data: kNN accuracy with cut_init - default")
    assert simclr.ours.startswith("3 [") and simclr.verdict == "reproduced"  # the CI reaches the published 1.5
    # one seed per arm: nothing to judge by
    single = norms_table(intervention_runs(0.20, {"cut_init": 0.25}, 0.50, 0.53, seeds=1))
    assert _one(single, "(c) simsiam on imbalanced data: kNN accuracy with cut_init").verdict == "not measured"


def test_stand_in_wording_marks_image_rows_only():
    runs = pd.concat([intervention_runs(0.20, {"cut_init": 0.25}, 0.50, 0.53, seeds=3),
                      pd.DataFrame([ood_run(seed=5, auroc_svhn=0.8, auroc_p_svhn=0.001, auroc_init_svhn=0.5)])],
                     ignore_index=True)
    marked = norms_table(runs, labels=["svhn"], stand_in="shapes")
    images = marked.quantity.str.startswith(("(c) simsiam on", "(c) simclr on", "(d)"))
    # the two (c) rows; simclr's confidence and OOD rows and the OOD gain's check (simsiam ran imbalanced only)
    assert images.sum() == 5
    assert marked[images].quantity.str.endswith("(on shapes, not CIFAR)").all()
    assert not marked[~images].quantity.str.contains("(on shapes", regex=False).any()


# ============================================================ lib.core.stats: AUROC, slope, rank correlation


def brute_force_auroc(inside, outside) -> float:
    """P(s_in > s_out) + P(s_in = s_out) / 2 over every (in, out) pair."""
    a, b = np.asarray(inside, dtype=float)[:, None], np.asarray(outside, dtype=float)[None, :]
    return float(((a > b) + 0.5 * (a == b)).mean())


def test_auroc_of_larger_in_distribution_norms_is_one_when_separated():
    inside, outside = np.array([3.0, 4.0, 5.5, 6.0]), np.array([0.5, 1.0, 2.9])
    assert auroc(inside, outside) == 1.0 == brute_force_auroc(inside, outside)
    assert auroc(outside, inside) == 0.0  # the roles matter: the score is for being in-distribution


@pytest.mark.parametrize("seed", [0, 1])
def test_auroc_of_overlapping_norms_matches_brute_force_and_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    # in-distribution norms larger on average; rounded so that ties occur
    inside, outside = np.round(rng.normal(3.0, 1.0, 40), 1), np.round(rng.normal(2.0, 1.0, 30), 1)
    expected = brute_force_auroc(inside, outside)
    assert expected > 0.5
    assert auroc(inside, outside) == pytest.approx(expected, abs=1e-12)
    labels = np.r_[np.ones(len(inside)), np.zeros(len(outside))]
    assert roc_auc_score(labels, np.r_[inside, outside]) == pytest.approx(expected, abs=1e-12)
    value, p = auroc_test(inside, outside)
    assert value == pytest.approx(expected, abs=1e-12) and 0 < p < 1


def test_loglog_slope_of_a_planted_power_law_and_of_noisy_data_matches_numpy_ols():
    x = np.array([0.5, 1.0, 2.0, 3.0, 7.0])
    slope, stderr = loglog_slope(x, 2.5 * x ** 1.7)
    assert slope == pytest.approx(1.7, abs=1e-12) and stderr == pytest.approx(0, abs=1e-6)
    y = 2.5 * x ** 1.7 * np.array([1.2, 0.9, 1.1, 0.8, 1.05])
    lx, ly = np.log(x), np.log(y)
    fitted, intercept = np.polyfit(lx, ly, 1)
    residual = ly - (fitted * lx + intercept)
    expected_se = math.sqrt(residual @ residual / (len(x) - 2) / ((lx - lx.mean()) ** 2).sum())
    slope, stderr = loglog_slope(x, y)
    assert slope == pytest.approx(fitted, rel=1e-10) and stderr == pytest.approx(expected_se, rel=1e-10)


def test_rank_correlation_is_pearson_of_mid_ranks_with_its_t_test_p_value():
    x = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 8.0, 9.0])
    y = np.array([0.3, 0.1, 0.4, 0.4, 0.9, 0.7, 1.2])  # ties in both
    rho, p = rank_correlation(x, y)
    r = np.corrcoef(st.rankdata(x), st.rankdata(y))[0, 1]
    t = r * math.sqrt((len(x) - 2) / (1 - r ** 2))
    assert rho == pytest.approx(r, rel=1e-12) and p == pytest.approx(2 * st.t.sf(abs(t), len(x) - 2), rel=1e-9)
    assert rank_correlation(x, -y)[0] == pytest.approx(-r, rel=1e-12)  # reversing one ordering flips the sign


def factor_at_infonce(info_nce: float) -> float:
    """The planted gradient-scale factor 1 - e^(-l) whose InfoNCE is ``info_nce`` (planted_flatnce_runs inverts it)."""
    return 1 - math.exp(-info_nce)


@pytest.mark.parametrize("relative,near", [(0.995, True), (1.005, True), (1.0, True), (0.98, False), (1.02, False)])
def test_a_final_infonce_within_one_percent_of_its_ceiling_either_side_is_at_the_ceiling(relative, near):
    g = factor_at_infonce(relative * math.log(2 * 64 - 1))
    out = flat_study.analyze(planted_flatnce_runs({16: 4, 64: 2, 256: 0}, grad_scale={("infonce", 64): g}),
                             flat_settings())
    assert flat_study.batch_sizes_at_ceiling(flat_study.arm(out, "linear")["cells"]) == ([64] if near else [])


# ------------------------------------------------------------------ study 5: learning-rate rules as arms


def two_arm_runs(linear_gain: dict, sqrt_gain: dict, linear_grad_scale: dict | None = None) -> pd.DataFrame:
    """Both arms planted with the same design apart from their FlatNCE gains (and FLAT's arm's factors)."""
    return pd.concat([planted_flatnce_runs(linear_gain, grad_scale=linear_grad_scale, rule="linear"),
                      planted_flatnce_runs(sqrt_gain, rule="sqrt")], ignore_index=True)


def test_a_gain_planted_in_one_arm_shows_only_in_that_arm():
    none, gain = {16: 0, 64: 0, 256: 0}, {16: 8, 64: 6, 256: 4}
    assert paired_p_of_planted_gain(min(gain.values())) < 0.05  # significant at every batch size, by the plant
    s = flat_settings(rules=("linear", "sqrt"))
    out = flat_study.analyze(two_arm_runs(none, gain), s)
    assert list(dict.fromkeys(out["cells"].lr_rule)) == ["linear", "sqrt"] and (out["cells"].runs == len(DEVS)).all()
    comparison = out["comparison"].set_index(["lr_rule", "batch_size"])
    for b in BATCHES:
        assert comparison.loc[("linear", b), "probe_diff"] == 0
        assert comparison.loc[("sqrt", b), "probe_diff"] == gain[b] * UNIT
    # each arm's ANOVA sees its own runs only: the interaction equals the hand formula of that arm's plant
    for rule, planted in (("linear", none), ("sqrt", gain)):
        ss, _, p = hand_interaction(planted)
        row = out["anova"][rule]["probe"].loc["loss:batch_size"]
        assert row["sum_sq"] == pytest.approx(ss, abs=1e-9) and row["PR(>F)"] == pytest.approx(p, abs=1e-9)
    table = flat_study.paper_vs_reproduced(out, s, 0.0).set_index("quantity")
    central = {rule: table.loc[f"[{label}] FlatNCE - InfoNCE, linear-probe top-1, mean over batch sizes (points)"]
               for rule, label in flat_study.ARM_LABELS.items()}
    assert central["sqrt"].ours.startswith(f"{6 * UNIT:.3g} [") and central["sqrt"].verdict == "reproduced"
    assert central["linear"].ours.startswith("0 [") and central["linear"].verdict.startswith("inconclusive")
    factors = flat_study.factor_by_batch(out)
    assert list(zip(factors.lr_rule, factors.batch_size)) == [(r, b) for r in ("linear", "sqrt") for b in BATCHES]




def test_study5_pools_the_within_cell_spread_over_its_cells():
    """The floor under a batch size's power: per (rule, loss, batch) cell the seeds' variance, pooled by degrees of
    freedom, in points; a cell of one seed adds nothing."""
    rows = []
    cells = {("linear", "flatnce", 32): [0.50, 0.52, 0.57], ("linear", "infonce", 32): [0.40, 0.40],
             ("sqrt", "flatnce", 512): [0.60]}
    for (rule, loss, batch), values in cells.items():
        rows += [dict(status="ok", lr_rule=rule, loss=loss, batch_size=batch, seed=i, probe_top1=v)
                 for i, v in enumerate(values)]
    squares = sum(((100 * np.array(v) - 100 * np.mean(v)) ** 2).sum() for v in cells.values())
    expected = math.sqrt(squares / (2 + 1))
    assert flat_study.pooled_cell_sd(pd.DataFrame(rows)) == pytest.approx(expected)
    assert flat_study.pooled_cell_sd(pd.DataFrame(rows[-1:])) is None
