"""Tests for lib.stats (fast: the whole file runs in a few seconds on CPU)."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from statsmodels.stats.power import TTestIndPower

from lib import stats as S


def _standardized(rng, n):
    """A vector with sample mean exactly 0 and sample SD (ddof=1) exactly 1."""
    x = rng.normal(size=n)
    return (x - x.mean()) / x.std(ddof=1)


@pytest.fixture
def vr590():
    """Two samples of 14 whose variance ratio is exactly 5.90 (the Study 1 check)."""
    rng = np.random.default_rng(7)
    return math.sqrt(5.90) * _standardized(rng, 14) + 0.9, _standardized(rng, 14) + 0.9


# --------------------------------------------------------------------------- F-test
def test_variance_ratio_reproduces_published_check(vr590):
    a, b = vr590
    res = S.variance_ratio_test(a, b)
    assert res.ratio == pytest.approx(5.90, rel=1e-12)
    assert (res.df_a, res.df_b) == (13, 13)
    # straight from the F distribution: upper tail doubled
    direct = 2 * st.f.sf(5.90, 13, 13)
    assert res.p_value == pytest.approx(direct, rel=1e-9)
    assert res.p_value == pytest.approx(0.0030, abs=5e-5)


def test_variance_ratio_swap_and_equal(vr590):
    a, b = vr590
    fwd, rev = S.variance_ratio_test(a, b), S.variance_ratio_test(b, a)
    assert rev.ratio == pytest.approx(1 / fwd.ratio, rel=1e-12)
    assert rev.p_value == pytest.approx(fwd.p_value, rel=1e-9)
    same = S.variance_ratio_test(a, a.copy())
    assert same.ratio == pytest.approx(1.0)
    assert same.p_value == 1.0


def test_variance_ratio_unequal_sizes_uses_own_df():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=10), rng.normal(size=25)
    res = S.variance_ratio_test(a, b)
    assert (res.df_a, res.df_b) == (9, 24)
    f = np.var(a, ddof=1) / np.var(b, ddof=1)
    assert res.p_value == pytest.approx(min(1, 2 * min(st.f.cdf(f, 9, 24), st.f.sf(f, 9, 24))))


def test_nan_dropped_and_argument_errors(vr590):
    a, b = vr590
    with_nan = np.concatenate([a, [np.nan, np.nan]])
    assert S.variance_ratio_test(with_nan, b) == S.variance_ratio_test(a, b)
    with pytest.raises(ValueError, match=r"\bb\b.*at least 2"):
        S.variance_ratio_test(a, [1.0, np.nan, np.nan])
    with pytest.raises(ValueError, match=r"\ba\b.*1-D"):
        S.variance_ratio_test(np.ones((3, 3)), b)
    with pytest.raises(ValueError, match="zero variance"):
        S.variance_ratio_test(a, [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="level"):
        S.bootstrap_ratio_ci(a, b, level=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        S.bootstrap_ratio_ci(a, b, n_boot=10)
    with pytest.raises(ValueError, match="method"):
        S.bootstrap_ratio_ci(a, b, method="bc")
    with pytest.raises(ValueError, match="ratio"):
        S.seeds_for_variance_ratio(-2.0)
    with pytest.raises(ValueError, match="power"):
        S.seeds_for_variance_ratio(2.0, power=0.0)
    with pytest.raises(ValueError, match="n_b"):
        S.variance_ratio_power(2.0, 10, n_b=1)


# --------------------------------------------------------------------------- Levene
def test_levene_matches_scipy_and_bf_differs_on_skewed():
    rng = np.random.default_rng(11)
    a = rng.lognormal(0, 1.0, size=20)
    b = rng.lognormal(0, 0.5, size=20)
    res = S.levene_tests(a, b)
    lev = st.levene(a, b, center="mean")
    bf = st.levene(a, b, center="median")
    assert res["levene"].statistic == pytest.approx(lev.statistic)
    assert res["levene"].p_value == pytest.approx(lev.pvalue)
    assert res["brown_forsythe"].statistic == pytest.approx(bf.statistic)
    assert res["brown_forsythe"].p_value == pytest.approx(bf.pvalue)
    # on skewed data mean and median differ, so do the two statistics
    assert abs(res["levene"].statistic - res["brown_forsythe"].statistic) > 0.05 * res["levene"].statistic


# --------------------------------------------------------------------------- bootstrap
def test_bootstrap_contains_sample_ratio_and_is_deterministic(vr590):
    a, b = vr590
    lo, hi = S.bootstrap_ratio_ci(a, b, n_boot=4000, seed=5)
    assert lo < 5.90 < hi
    assert (lo, hi) == S.bootstrap_ratio_ci(a, b, n_boot=4000, seed=5)
    assert (lo, hi) != S.bootstrap_ratio_ci(a, b, n_boot=4000, seed=6)
    blo, bhi = S.bootstrap_ratio_ci(a, b, n_boot=4000, seed=5, method="bca")
    assert blo < 5.90 < bhi
    assert (blo, bhi) == S.bootstrap_ratio_ci(a, b, n_boot=4000, seed=5, method="bca")


def test_bootstrap_matches_explicit_resampling():
    """The vectorised draw equals the textbook loop with the same Generator stream."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=9), rng.normal(size=12)
    n_boot = 500
    g = np.random.default_rng(0)
    ia = g.integers(0, a.size, size=(n_boot, a.size))
    ib = g.integers(0, b.size, size=(n_boot, b.size))
    ratios = [np.var(a[ia[r]], ddof=1) / np.var(b[ib[r]], ddof=1) for r in range(n_boot)]
    expected = tuple(np.quantile(ratios, [0.05, 0.95]))
    got = S.bootstrap_ratio_ci(a, b, n_boot=n_boot, level=0.90, seed=0)
    assert got == pytest.approx(expected, rel=1e-12)


def test_bootstrap_narrows_with_n_and_covers_true_ratio():
    rng = np.random.default_rng(2024)
    small = S.bootstrap_ratio_ci(2 * rng.normal(size=30), rng.normal(size=30), n_boot=4000)
    a, b = 2 * rng.normal(size=200), rng.normal(size=200)  # true ratio 4
    lo, hi = S.bootstrap_ratio_ci(a, b, n_boot=4000)
    assert lo < 4.0 < hi
    assert (hi - lo) < 0.6 * (small[1] - small[0])


def test_quantiles_allowing_inf():
    x = np.random.default_rng(0).normal(size=101)
    assert S._quantiles_allowing_inf(x, [0.025, 0.975]) == pytest.approx(np.quantile(x, [0.025, 0.975]))
    y = np.array([1.0, 2.0, 3.0, np.inf, np.inf])
    lo, hi = S._quantiles_allowing_inf(y, [0.1, 0.9])
    assert lo == pytest.approx(1.4) and hi == math.inf


# --------------------------------------------------------------------------- Welch
def test_welch_matches_hand_computation():
    a = np.array([71.2, 70.8, 72.5, 69.9, 71.0, 73.1, 70.2])
    b = np.array([71.5, 71.3, 71.9, 71.0, 71.4, 72.0, 71.6, 70.9, np.nan])
    bb = b[~np.isnan(b)]
    va, vb = a.var(ddof=1) / a.size, bb.var(ddof=1) / bb.size
    t = (a.mean() - bb.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (bb.size - 1))
    p = 2 * st.t.sf(abs(t), df)
    res = S.welch_t_test(a, b)
    assert res.t == pytest.approx(t, rel=1e-10)
    assert res.df == pytest.approx(df, rel=1e-10)
    assert res.p_value == pytest.approx(p, rel=1e-8)
    assert res.mean_diff == pytest.approx(a.mean() - bb.mean())


# --------------------------------------------------------------------------- ANOVA
def _factorial(rng, effect_a=3.0, effect_b=0.0, reps=7):
    rows = []
    for m in ("clamp", "subtract"):
        for s in ("detach", "direct"):
            for seed in range(reps):
                y = 70 + effect_a * (m == "subtract") + effect_b * (s == "direct") + rng.normal()
                rows.append({"margin_mode": m, "stabilizer": s, "seed": seed, "top1": y})
    return pd.DataFrame(rows)


def test_two_way_anova_main_effect_and_ss_identity():
    df = _factorial(np.random.default_rng(9))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # full model: no warning expected
        tab = S.two_way_anova(df, "top1", "margin_mode", "stabilizer")
    assert list(tab.index) == ["margin_mode", "stabilizer", "margin_mode:stabilizer", "Residual"]
    assert tab.loc["margin_mode", "PR(>F)"] < 1e-6
    assert tab.loc["stabilizer", "PR(>F)"] > 0.05
    total = ((df["top1"] - df["top1"].mean()) ** 2).sum()
    assert tab["sum_sq"].sum() == pytest.approx(total, rel=1e-10)  # balanced design
    assert tab["df"].sum() == len(df) - 1


def test_two_way_anova_odd_column_names_and_nan_rows():
    df = _factorial(np.random.default_rng(1)).rename(
        columns={"top1": "top-1 acc", "margin_mode": "margin mode"})
    df.loc[0, "top-1 acc"] = np.nan
    tab = S.two_way_anova(df, "top-1 acc", "margin mode", "stabilizer")
    assert "margin mode:stabilizer" in tab.index
    assert tab.attrs["n_dropped"] == 1
    assert tab.loc["Residual", "df"] == len(df) - 1 - 4


def test_two_way_anova_single_level_factor_fits_reduced_model():
    df = _factorial(np.random.default_rng(4))
    one = df[df["stabilizer"] == "detach"]
    with pytest.warns(UserWarning, match="single level"):
        tab = S.two_way_anova(one, "top1", "margin_mode", "stabilizer")
    assert list(tab.index) == ["margin_mode", "Residual"]
    # one-way ANOVA equals scipy's
    groups = [g["top1"].to_numpy() for _, g in one.groupby("margin_mode")]
    assert tab.loc["margin_mode", "PR(>F)"] == pytest.approx(st.f_oneway(*groups).pvalue)
    with pytest.warns(UserWarning, match="single level"):
        tab0 = S.two_way_anova(one[one["margin_mode"] == "clamp"], "top1", "margin_mode", "stabilizer")
    assert list(tab0.index) == ["Residual"]
    with pytest.raises(ValueError, match="factor_b"):
        S.two_way_anova(df, "top1", "margin_mode", "stabiliser")


# --------------------------------------------------------------------------- power
@pytest.mark.parametrize("ratio", [5.90, 2.98])
def test_seeds_for_variance_ratio_exact_and_monte_carlo(ratio):
    n = S.seeds_for_variance_ratio(ratio)
    assert isinstance(n, int)
    assert S.variance_ratio_power(ratio, n) >= 0.8 > S.variance_ratio_power(ratio, n - 1)
    assert S.seeds_for_variance_ratio(1 / ratio) == n  # symmetric
    # Monte Carlo: simulate the F-test at true ratio R with n and n - 1 seeds per arm
    rng = np.random.default_rng(123)
    trials = 4000
    for m in (n, n - 1):
        va = ratio * rng.normal(size=(trials, m)).var(axis=1, ddof=1)
        vb = rng.normal(size=(trials, m)).var(axis=1, ddof=1)
        f = va / vb
        p = np.minimum(1, 2 * np.minimum(st.f.cdf(f, m - 1, m - 1), st.f.sf(f, m - 1, m - 1)))
        mc = (p <= 0.05).mean()
        assert mc == pytest.approx(S.variance_ratio_power(ratio, m), abs=0.03)


def test_variance_ratio_power_at_null_is_alpha():
    assert S.variance_ratio_power(1.0, 14) == pytest.approx(0.05, rel=1e-9)
    assert S.seeds_for_variance_ratio(1.0) is None


@pytest.mark.parametrize("d", [0.5, 0.8, 1.2])
def test_seeds_for_mean_difference(d):
    rng = np.random.default_rng(0)
    a, b = _standardized(rng, 14) + d, _standardized(rng, 14)  # pooled SD 1 -> Cohen's d = d
    assert S.cohens_d(a, b) == pytest.approx(d)
    n = S.seeds_for_mean_difference(a, b)
    sm = TTestIndPower().solve_power(effect_size=d, alpha=0.05, power=0.8, ratio=1.0)
    assert n == math.ceil(sm)
    z = st.norm.ppf(0.975) + st.norm.ppf(0.8)
    assert abs(n - 2 * z ** 2 / d ** 2) <= 2
    assert S.seeds_for_mean_difference(b, a) == n  # sign of d does not matter


def test_seeds_for_power_combined(vr590):
    a, b = vr590
    res = S.seeds_for_power(a, b)  # equal means: no mean effect
    assert res.n_mean is None and res.cohens_d == pytest.approx(0.0, abs=1e-12)
    assert res.variance_ratio == pytest.approx(5.90)
    assert res.n_variance == S.seeds_for_variance_ratio(5.90)
    res2 = S.seeds_for_power(a + 1.0, b, ratio=2.98)
    assert res2.n_variance == S.seeds_for_variance_ratio(2.98)
    assert isinstance(res2.n_mean, int) and res2.n_mean >= 2


# --------------------------------------------------------------------------- summary
def test_summarize_arms():
    df = _factorial(np.random.default_rng(5))
    df.loc[0, "top1"] = np.nan
    out = S.summarize_arms(df, "top1", "margin_mode")
    clamp = df.loc[df["margin_mode"] == "clamp", "top1"].dropna()
    assert list(out.columns) == ["n", "mean", "std", "var", "min", "max"]
    assert out.loc["clamp", "n"] == 13
    assert out.loc["clamp", "var"] == pytest.approx(clamp.var(ddof=1))
    assert out.loc["clamp", "std"] ** 2 == pytest.approx(out.loc["clamp", "var"])
    two = S.summarize_arms(df, "top1", ["margin_mode", "stabilizer"])
    assert len(two) == 4 and two["n"].sum() == len(df) - 1
