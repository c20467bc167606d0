"""Tests for lib.core.stats (fast: the whole file runs in a few seconds on CPU)."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import special
from scipy import stats as st
from statsmodels.stats.power import TTestIndPower

from lib.core import stats as S


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


def _levene_by_hand(a, b, centre) -> tuple[float, float]:
    """W = (N - k)/(k - 1) sum_i n_i (zbar_i - zbar)^2 / sum_ij (z_ij - zbar_i)^2, z = |x - centre(x)|,
    p = F.sf(W; k - 1, N - k) through the regularized incomplete beta function."""
    z = [np.abs(np.asarray(x, float) - centre(x)) for x in (a, b)]
    grand = np.concatenate(z).mean()
    n = sum(len(g) for g in z)
    between = sum(len(g) * (g.mean() - grand) ** 2 for g in z)
    within = sum(((g - g.mean()) ** 2).sum() for g in z)
    w = (n - 2) / 1 * between / within
    return w, float(special.betainc((n - 2) / 2, 0.5, (n - 2) / (n - 2 + w)))


def test_levene_and_brown_forsythe_match_a_hand_computed_case():
    # b's outlier moves its mean, not its median: the two centrings differ
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 2.5, 3.0, 3.5, 12.0]
    res = S.levene_tests(a, b)
    for key, centre in (("levene", np.mean), ("brown_forsythe", np.median)):
        w, p = _levene_by_hand(a, b, centre)
        assert res[key].statistic == pytest.approx(w, rel=1e-12)
        assert res[key].p_value == pytest.approx(p, rel=1e-9)
    # mean-centred: z_a = [2, 1, 0, 1, 2], z_b = [2.6, 2.1, 1.6, 1.1, 7.4]: W by hand on paper
    zb = np.array([2.6, 2.1, 1.6, 1.1, 7.4])
    grand = (1.2 + 2.96) / 2  # the group means of z, equal sizes
    between = 5 * ((1.2 - grand) ** 2 + (2.96 - grand) ** 2)
    within = 2.8 + ((zb - 2.96) ** 2).sum()
    assert res["levene"].statistic == pytest.approx(8 * between / within, rel=1e-12)


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


def _exact_bootstrap_ratios(a, b) -> np.ndarray:
    """Every equally likely resample pair of a tiny two-sample bootstrap: Var(a*)/Var(b*), all n^n x m^m."""
    import itertools

    def variances(x):
        return np.array([np.var(np.asarray(x)[list(i)], ddof=1)
                         for i in itertools.product(range(len(x)), repeat=len(x))])

    va, vb = variances(a), variances(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (va[:, None] / vb[None, :]).ravel()


def _exact_quantile(ratios: np.ndarray, q: float) -> float:
    """The q-quantile of a discrete distribution given by equally likely atoms (inf allowed)."""
    s = np.sort(ratios)
    return float(s[int(math.floor(q * (len(s) - 1)))])


def test_bootstrap_drops_resamples_where_both_variances_are_zero():
    """a = [0, 0, 1], b = [0, 0, 0, 1]: a ninth of the resample pairs has Var(a*) = Var(b*) = 0 (ratio
    0/0). They are dropped, not sorted in: enumerated exactly, the 28% and 72% quantiles of the other
    ratios are 1 and 4/3, inside their atoms, so 100,000 resamples hit them exactly. Kept as the
    largest values, the 0/0 pairs would push the 72% quantile up to inf."""
    a, b = [0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]
    exact = _exact_bootstrap_ratios(a, b)
    degenerate = np.isnan(exact)
    assert degenerate.mean() == pytest.approx((1 / 3) * (82 / 256))  # P(Var(a*) = 0) P(Var(b*) = 0)
    kept = exact[~degenerate]
    expected = (_exact_quantile(kept, 0.28), _exact_quantile(kept, 0.72))
    assert expected == pytest.approx((1.0, 4 / 3), rel=1e-12)
    not_dropped = np.where(degenerate, np.inf, exact)  # what sorting the 0/0 pairs to the top would give
    assert _exact_quantile(not_dropped, 0.72) == np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an expected drop is not warned about (nothing a user could act on)
        got = S.bootstrap_ratio_ci(a, b, n_boot=100_000, level=0.44, seed=1)
    assert got == pytest.approx(expected, rel=1e-12)


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


def _rss(y: np.ndarray, *factors: np.ndarray) -> tuple[float, int]:
    """Residual sum of squares and parameter count of the additive treatment-coded model, by numpy
    least squares (independent of statsmodels)."""
    columns = [np.ones_like(y)]
    for f in factors:
        columns += [(f == level).astype(float) for level in sorted(set(f))[1:]]
    x = np.column_stack(columns)
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(((y - x @ beta) ** 2).sum()), x.shape[1]


def _additive_anova_by_hand(df: pd.DataFrame, y: str, a: str, b: str) -> dict:
    """Type-II sums of squares of y ~ A + B: SS_A = RSS(B) - RSS(A + B), SS_B = RSS(A) - RSS(A + B)."""
    yy, fa, fb = df[y].to_numpy(float), df[a].to_numpy(), df[b].to_numpy()
    rss, params = _rss(yy, fa, fb)
    df_res = len(yy) - params
    out = {"Residual": (rss, df_res)}
    for name, without, levels in ((a, _rss(yy, fb)[0], len(set(fa))), (b, _rss(yy, fa)[0], len(set(fb)))):
        ss = without - rss
        f = (ss / (levels - 1)) / (rss / df_res)
        out[name] = (ss, levels - 1, f,
                     float(special.betainc(df_res / 2, (levels - 1) / 2, df_res / (df_res + (levels - 1) * f))))
    return out


def _check_against_hand(tab: pd.DataFrame, hand: dict, a: str, b: str) -> None:
    assert list(tab.index) == [a, b, "Residual"]  # no interaction row: it is not estimable
    assert tab.loc["Residual", "sum_sq"] == pytest.approx(hand["Residual"][0], rel=1e-9)
    assert tab.loc["Residual", "df"] == hand["Residual"][1]
    for name in (a, b):
        ss, df, f, p = hand[name]
        assert tab.loc[name, ["sum_sq", "df", "F", "PR(>F)"]].tolist() == pytest.approx([ss, df, f, p], rel=1e-9)


def test_two_way_anova_one_observation_per_cell_fits_the_additive_model():
    """2 x 3 cells, one run each: the interaction model has no residual degrees of freedom."""
    df = pd.DataFrame({"arm": ["clamp"] * 3 + ["subtract"] * 3, "batch": [16, 32, 64] * 2,
                       "acc": [50.0, 53.0, 55.0, 47.0, 51.0, 52.5]})
    with pytest.warns(UserWarning, match="one observation per cell"):
        tab = S.two_way_anova(df, "acc", "arm", "batch")
    assert tab.attrs["model"] == "'acc' ~ C('arm') + C('batch')"
    hand = _additive_anova_by_hand(df, "acc", "arm", "batch")
    assert hand["Residual"][1] == (2 - 1) * (3 - 1)  # a balanced table: (a - 1)(b - 1) residual df
    _check_against_hand(tab, hand, "arm", "batch")


def test_two_way_anova_with_an_empty_cell_fits_the_additive_model():
    """subtract x direct never ran: the interaction cannot be estimated; unbalanced, so type-II SS
    do not add up to the total, and each main effect is the drop in RSS when it joins the other."""
    rng = np.random.default_rng(3)
    cells = [("clamp", "detach", 3), ("clamp", "direct", 2), ("subtract", "detach", 4)]
    df = pd.DataFrame([{"margin_mode": m, "stabilizer": s, "top1": 60 + 4 * (m == "clamp") + rng.normal()}
                       for m, s, n in cells for _ in range(n)])
    with pytest.warns(UserWarning, match="1 empty cell"):
        tab = S.two_way_anova(df, "top1", "margin_mode", "stabilizer")
    assert "empty cell" in tab.attrs["note"]
    _check_against_hand(tab, _additive_anova_by_hand(df, "top1", "margin_mode", "stabilizer"),
                        "margin_mode", "stabilizer")


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


@pytest.mark.parametrize("ratio", [0.2, 1.0, 3.0, 40.0])
def test_variance_ratio_power_with_two_seeds_per_arm_is_the_closed_form(ratio):
    """n = 2 per arm: F(1, 1) has cdf (2/pi) arctan(sqrt(x)), so the critical values and the power
    have a closed form: power = 1 - cdf(f_hi / R) + cdf(f_lo / R), sqrt(f_hi) = tan(pi/2 (1 - alpha/2)),
    sqrt(f_lo) = tan(pi/2 alpha/2)."""
    def cdf(x):
        return 2 / math.pi * math.atan(math.sqrt(x))

    f_hi, f_lo = math.tan(math.pi / 2 * 0.975) ** 2, math.tan(math.pi / 2 * 0.025) ** 2
    expected = 1 - cdf(f_hi / ratio) + cdf(f_lo / ratio)
    assert S.variance_ratio_power(ratio, 2) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("d", [0.6, 1.5])
def test_seeds_for_mean_difference_is_the_smallest_n_with_power_by_the_noncentral_t(d):
    """Independent of statsmodels: the two-sided t-test's power at n per arm is P(|T| > t_crit) with
    T ~ noncentral t(2n - 2, d sqrt(n / 2)) (scipy's nct); the answer is the first n reaching 0.8."""
    def power(n):
        df, nc = 2 * n - 2, d * math.sqrt(n / 2)
        t = st.t.ppf(0.975, df)
        return st.nct.sf(t, df, nc) + st.nct.cdf(-t, df, nc)

    rng = np.random.default_rng(1)
    n = S.seeds_for_mean_difference(_standardized(rng, 10) + d, _standardized(rng, 10))
    assert power(n) >= 0.8 > power(n - 1)


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


def test_bootstrap_ratio_ci_is_open_above_without_a_warning_when_var_b_star_is_often_zero():
    """b = [0, 0, 0, 1]: a resample repeats one value with probability (3/4)^4 + (1/4)^4 = 0.32 > 0.025, so
    the upper end is +inf: the result, not a fault, and reported without a warning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = S.bootstrap_ratio_ci(np.arange(8.0), [0.0, 0.0, 0.0, 1.0], n_boot=2000, seed=1)
    assert math.isinf(hi) and math.isfinite(lo) and lo > 0


def test_anova_reports_an_exactly_zero_effect_as_zero_not_as_rounding_noise():
    """Identical twins under two stabilisers: the stabiliser's SS is exactly 0 in exact arithmetic; the fit gives
    ~1e-28, machine-dependent in its last bits. The table says 0, F 0, p 1, and keeps the real effect."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=6)
    rows = [dict(y=v + (1.0 if arm == "clamp" else 0.0), arm=arm, stab=stab, seed=i)
            for arm in ("clamp", "subtract") for stab in ("detach", "direct") for i, v in enumerate(y)]
    table = S.two_way_anova(pd.DataFrame(rows), "y", "arm", "stab")
    for row in ("stab", "arm:stab"):
        assert (table.loc[row, "sum_sq"], table.loc[row, "F"], table.loc[row, "PR(>F)"]) == (0.0, 0.0, 1.0)
    assert table.loc["arm", "sum_sq"] == pytest.approx(24 * 0.5 ** 2)  # 24 runs, each 0.5 from the grand mean
