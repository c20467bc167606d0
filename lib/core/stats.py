"""Statistics for seed-to-seed comparisons of training runs (Study 1 and friends).

Plain functions over 1-D samples (one value per run / seed) and tidy DataFrames.

Conventions shared by every function here:

* A "sample" argument is anything ``numpy.asarray`` turns into a 1-D float array
  (list, tuple, ndarray, pandas Series). A scalar or a 2-D array raises ``ValueError``.
* NaNs are **dropped** before anything is computed (a run that crashed or was not
  evaluated carries NaN). After dropping, each sample needs at least 2 values,
  otherwise ``ValueError`` naming the argument is raised. Infinite values raise.
* Variances are unbiased sample variances, ``ddof=1``:
  ``Var(x) = sum_i (x_i - mean(x))^2 / (n - 1)``.
* "Two-sided" tests use equal tails of ``alpha / 2``.

The module runs past 400 lines because every statistic a verdict reads lives here (variance ratios,
Levene, bootstrap, Welch, ANOVA, power, AUROC, rank and log-log fits), each with its argument checks,
so that the notebooks' numbers come from one place that the tests check against references.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

__all__ = [
    "VarianceRatio",
    "TestResult",
    "WelchResult",
    "SeedsForPower",
    "variance_ratio_test",
    "levene_tests",
    "brown_forsythe_p",
    "variance_ratio_rule_power",
    "log_chi2_sum_reference",
    "bootstrap_ratio_ci",
    "welch_t_test",
    "two_way_anova",
    "cohens_d",
    "variance_ratio_power",
    "seeds_for_mean_difference",
    "seeds_for_variance_ratio",
    "seeds_for_power",
    "summarize_arms",
]


# --------------------------------------------------------------------------- helpers
def _sample(x, name: str, min_n: int = 2) -> np.ndarray:
    """Return ``x`` as a 1-D float array with NaNs dropped; check it (errors name ``name``)."""
    if x is None:
        raise ValueError(f"{name} must be a 1-D sequence of numbers, got None")
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a 1-D sequence of numbers: {exc}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {arr.shape}")
    arr = arr[~np.isnan(arr)]
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains infinite values")
    if arr.size < min_n:
        raise ValueError(
            f"{name} needs at least {min_n} non-NaN values, got {arr.size}"
        )
    return arr


def _check_prob(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return v


def _check_column(df: pd.DataFrame, col, name: str) -> None:
    if col not in df.columns:
        raise ValueError(f"{name}={col!r} is not a column of df (columns: {list(df.columns)})")


# --------------------------------------------------------------------------- F-test
@dataclass(frozen=True)
class VarianceRatio:
    """Result of :func:`variance_ratio_test`.

    ratio: Var(a) / Var(b) (ddof=1); df_a = n_a - 1; df_b = n_b - 1;
    p_value: two-sided F-test p-value.
    """

    ratio: float
    df_a: int
    df_b: int
    p_value: float


def variance_ratio_test(a, b) -> VarianceRatio:
    """Two-sided F-test for equal variances, reported as the ratio Var(a) / Var(b).

    Definition::

        VR   = s_a^2 / s_b^2,            s^2 = sum (x - mean)^2 / (n - 1)
        df   = (n_a - 1, n_b - 1)
        p    = min(1, 2 * min(F.cdf(VR; df), F.sf(VR; df)))      (scipy.stats.f)

    Under H0 (equal variances, normal data) VR ~ F(n_a - 1, n_b - 1). The test is
    symmetric: swapping ``a`` and ``b`` gives 1 / VR and the same p-value.
    It is sensitive to non-normality; see :func:`levene_tests` for robust variants.

    NaNs in ``a`` and ``b`` are dropped; each needs >= 2 remaining values.
    Raises ``ValueError`` if Var(b) == 0 (ratio undefined).

    Example (Study 1 check): VR = 5.90 on df (13, 13) gives p ~ 0.0030.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
    if vb == 0.0:
        raise ValueError("b has zero variance; Var(a)/Var(b) is undefined")
    ratio = float(va / vb)
    return VarianceRatio(ratio=ratio, df_a=a.size - 1, df_b=b.size - 1, p_value=variance_ratio_p(ratio, a.size, b.size))


def variance_ratio_p(ratio, n_a: int, n_b: int):
    """The two-sided F-test's p of a variance ratio from ``n_a`` and ``n_b`` observations:
    ``min(1, 2 min(F.cdf, F.sf))`` on df (n_a - 1, n_b - 1) (e.g. a published ratio, re-read with
    another count of observations). A float for one ratio; an array, element by element, for an array."""
    dfa, dfb = n_a - 1, n_b - 1
    p = np.minimum(1.0, 2.0 * np.minimum(_st.f.cdf(ratio, dfa, dfb), _st.f.sf(ratio, dfa, dfb)))
    return float(p) if np.ndim(p) == 0 else p


# --------------------------------------------------------------------------- sums of log chi-squares
LOG_CHI2_HALF_WIDTH = 60.0  # the grid spans [-60, 60): P(log(chi2_1) < -60) is about 1e-13
LOG_CHI2_POINTS = 2 ** 18  # grid step 4.6e-4 on the log scale


class LogChi2Sum(NamedTuple):
    """The distribution of D = sum_j w_j log(chi2_j / nu_j) on a grid: ``cdf[i]`` = P(D <= ``edges[i]``)."""

    edges: np.ndarray
    cdf: np.ndarray

    def cdf_at(self, x) -> np.ndarray:
        return np.interp(np.asarray(x, dtype=float), self.edges, self.cdf, left=0.0, right=1.0)

    def quantile(self, q) -> np.ndarray:
        return np.interp(np.asarray(q, dtype=float), self.cdf, self.edges)

    def two_sided_p(self, x) -> np.ndarray:
        """The equal-tailed two-sided p of an observed D = ``x``: min(1, 2 min(P(D <= x), P(D >= x)))."""
        below = self.cdf_at(x)
        return np.minimum(1.0, 2 * np.minimum(below, 1 - below))


@functools.lru_cache(maxsize=256)
def log_chi2_sum_reference(terms: tuple[tuple[float, int], ...]) -> LogChi2Sum:
    """The exact distribution of D = sum_j w_j log(chi2_j / nu_j), the chi2_j independent with nu_j degrees of
    freedom, by numerical convolution of the terms' densities on a fine grid (FFT; no simulation).

    Under normal data a sample variance is s^2 = sigma^2 chi2_nu / nu (nu = n - 1), so any weighted sum of log
    sample variances minus the same sum of log true variances is distributed as D, at every n and whatever the
    variances: D is the exact pivot of a contrast of log variance ratios, for which the large-sample variance
    2 / nu of a log variance (Bartlett & Kendall 1946) is too small at 5 seeds. ``terms`` are (w_j, nu_j) pairs
    with 0 < |w_j| <= 1. Each term's density, f(y) = (nu/2)^(nu/2) / Gamma(nu/2) exp(nu y / 2 - nu e^y / 2) for
    y = x / w_j, becomes probability masses on the grid; the masses are convolved; their running sum is the CDF.
    Two terms (1, nu_1), (-1, nu_2) give log F(nu_1, nu_2), which the tests use as the exact reference.
    """
    if not terms or any(not (isinstance(nu, int) and nu >= 1) or not 0 < abs(w) <= 1 for w, nu in terms):
        raise ValueError(f"terms={terms!r}: need (weight with 0 < |weight| <= 1, degrees of freedom >= 1) pairs")
    step = 2 * LOG_CHI2_HALF_WIDTH / LOG_CHI2_POINTS
    x = -LOG_CHI2_HALF_WIDTH + step * np.arange(LOG_CHI2_POINTS)
    spectrum = np.ones(LOG_CHI2_POINTS // 2 + 1, dtype=complex)
    for weight, nu in sorted(terms):
        y = x / weight
        with np.errstate(over="ignore"):
            log_density = (nu / 2) * math.log(nu / 2) - math.lgamma(nu / 2) + nu * y / 2 - nu * np.exp(y) / 2
        mass = np.exp(log_density)
        mass /= mass.sum()
        spectrum *= np.fft.rfft(np.fft.ifftshift(mass))  # x = 0 to index 0: centred terms add their offsets
    total = np.clip(np.fft.fftshift(np.fft.irfft(spectrum, LOG_CHI2_POINTS)), 0.0, None)
    cdf = np.cumsum(total) / total.sum()
    edges = x + step / 2  # each mass sits at its grid point: the CDF reaches cdf[i] half a step past it
    edges.flags.writeable = False
    cdf.flags.writeable = False
    return LogChi2Sum(edges, cdf)


# --------------------------------------------------------------------------- Levene
class TestResult(NamedTuple):
    """A test statistic and its p-value."""

    statistic: float
    p_value: float


def levene_tests(a, b) -> dict:
    """Levene (mean-centred) and Brown–Forsythe (median-centred) tests of equal variance.

    Both are one-way ANOVAs on absolute deviations ``z_ij = |x_ij - c_i|``, where the
    centre ``c_i`` of group i is its mean (Levene) or its median (Brown–Forsythe)::

        W = (N - k) / (k - 1) * sum_i n_i (zbar_i - zbar)^2 / sum_ij (z_ij - zbar_i)^2

    with k = 2 groups, N = n_a + n_b; p from F(k - 1, N - k). Computed by
    ``scipy.stats.levene(a, b, center=...)``. Brown–Forsythe is the more robust of the
    two to skewed / heavy-tailed data.

    NaNs are dropped; each sample needs >= 2 remaining values.

    Returns ``{"levene": TestResult(statistic, p_value),
    "brown_forsythe": TestResult(statistic, p_value)}``.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    out = {}
    for key, center in (("levene", "mean"), ("brown_forsythe", "median")):
        with warnings.catch_warnings():
            # scipy warns (and returns NaN) when all deviations are zero; keep the NaN.
            warnings.simplefilter("ignore", RuntimeWarning)
            res = _st.levene(a, b, center=center)
        out[key] = TestResult(float(res.statistic), float(res.pvalue))
    return out


def brown_forsythe_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Brown–Forsythe's p for equal variances with its structural zeros removed (Hines & Hines 2000), vectorised
    over rows: ``a`` (r, n_a) and ``b`` (r, n_b) hold r pairs of samples.

    The one-way ANOVA of the deviations |x - median| per arm, without the deviation that is zero by construction:
    an arm of odd size loses its median's own zero; one of even size loses one of the two equal deviations of its
    middle pair. Kept, these zeros make the test far too conservative at a few seeds (plain Brown–Forsythe at 5
    vs 5 normal seeds rejects 0.6% of true nulls, together with the F-test, and has 5% power at a variance ratio
    of 5.9); removed, it holds about 4% at normal data and 5% at exponential data, where the F-test rejects 17-20%
    of true nulls (tests/test_verdicts.py simulates both)."""
    def deviations(x):
        x = np.sort(x, axis=1)
        n = x.shape[1]
        z = np.abs(x - np.median(x, axis=1, keepdims=True))
        return np.delete(z, n // 2, axis=1)  # odd n: the median's zero; even n: the upper of the middle pair
    za, zb = deviations(a), deviations(b)
    n_a, n_b = za.shape[1], zb.shape[1]
    mean_a, mean_b = za.mean(axis=1), zb.mean(axis=1)
    grand = (n_a * mean_a + n_b * mean_b) / (n_a + n_b)
    between = n_a * (mean_a - grand) ** 2 + n_b * (mean_b - grand) ** 2
    within = ((za - mean_a[:, None]) ** 2).sum(axis=1) + ((zb - mean_b[:, None]) ** 2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _st.f.sf((n_a + n_b - 2) * between / within, 1, n_a + n_b - 2)


RULE_POWER_SIMULATIONS = 10_000  # the two-test rule's power to about ±0.5 points
RULE_POWER_SEED = 20261204  # fixed, so that a power is a function of the design alone


@functools.lru_cache(maxsize=4096)
def variance_ratio_rule_power(ratio: float, n_a: int, n_b: int, alpha: float = 0.05) -> float:
    """The power of "the F-test and Brown–Forsythe both reject at ``alpha``" (the larger of their p below alpha)
    when Var(a)/Var(b) = ``ratio``, normal data, ``n_a`` and ``n_b`` seeds: by simulation with a fixed seed.
    Brown–Forsythe is the less powerful of the two at normal data, so this is below the F-test's power
    (:func:`variance_ratio_power`): the power of the rule a verdict actually applies."""
    ratio = _check_ratio(ratio)
    rng = np.random.default_rng(RULE_POWER_SEED)
    a = rng.normal(size=(RULE_POWER_SIMULATIONS, n_a)) * math.sqrt(ratio)
    b = rng.normal(size=(RULE_POWER_SIMULATIONS, n_b))
    p_f = variance_ratio_p(a.var(axis=1, ddof=1) / b.var(axis=1, ddof=1), n_a, n_b)
    return float((np.maximum(p_f, brown_forsythe_p(a, b)) < alpha).mean())


# --------------------------------------------------------------------------- bootstrap
_BOOT_CHUNK_ELEMS = 4_000_000  # max resampled values held at once per group


def _quantiles_allowing_inf(x: np.ndarray, qs: Sequence[float]) -> list[float]:
    """Linear-interpolation quantiles (numpy's default) that tolerate +inf entries.

    np.quantile gives NaN when it interpolates next to +inf; here an interpolation that
    touches +inf with non-zero weight is +inf. Identical to np.quantile on finite data.
    """
    s = np.sort(x)
    n = s.size
    out = []
    for q in qs:
        h = (n - 1) * q
        lo = int(math.floor(h))
        hi = min(lo + 1, n - 1)
        frac = h - lo
        if np.isfinite(s[hi]):
            out.append(float(s[lo] + frac * (s[hi] - s[lo])))
        elif frac == 0.0 or lo == hi:
            out.append(float(s[lo]))
        else:
            out.append(float("inf"))
    return out


def bootstrap_ratio_ci(
    a,
    b,
    *,
    n_boot: int = 10000,
    level: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> tuple[float, float]:
    """Bootstrap confidence interval of the variance ratio Var(a) / Var(b) (ddof=1).

    Each group is resampled independently, with replacement, at its own size
    (a two-sample, unpaired bootstrap). For resample r::

        VR*_r = Var(a*_r) / Var(b*_r)

    method="percentile" (default): the interval is the empirical
    ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of {VR*_r} (numpy's linear
    interpolation). Vectorised: all resample indices are drawn at once with a
    ``numpy.random.default_rng(seed)`` Generator (in fixed-size chunks to bound
    memory), no Python loop over resamples. A resample with Var(b*) = 0 gives
    VR* = +inf, the largest ratio, as it should: with few seeds such resamples are
    expected, and where more than (1 - level)/2 of them occur the interval is open
    above (high = inf), which is the result, reported as such, not a fault. A
    resample with Var(a*) = Var(b*) = 0 has no ratio and is dropped: with three seeds
    a ninth of the resamples or more can be such, expected and nothing a user can act on,
    so the interval is the quantiles of the ratios that exist, without a warning.

    method="bca": bias-corrected and accelerated interval from
    ``scipy.stats.bootstrap(..., method="BCa", paired=False)`` with
    ``n_resamples=n_boot`` and ``rng=default_rng(seed)``; the acceleration comes from
    the jackknife. BCa corrects the right skew of a ratio's bootstrap distribution
    better than the percentile interval but is less stable with very small n.

    Deterministic given ``seed`` (and ``n_boot``, ``method``). NaNs are dropped; each
    sample needs >= 2 remaining values.

    Returns ``(low, high)`` as floats.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 100:
        raise ValueError(f"n_boot must be an integer >= 100, got {n_boot!r}")
    level = _check_prob(level, "level")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")
    if np.var(b, ddof=1) == 0.0:
        raise ValueError("b has zero variance; Var(a)/Var(b) is undefined")
    rng = np.random.default_rng(int(seed))
    n_boot = int(n_boot)

    if method == "bca":
        def _vr(x, y, axis=-1):
            return np.var(x, ddof=1, axis=axis) / np.var(y, ddof=1, axis=axis)

        res = _st.bootstrap(
            (a, b), _vr, n_resamples=n_boot, confidence_level=level, method="BCa",
            paired=False, vectorized=True, rng=rng,
        )
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    chunk = max(1, _BOOT_CHUNK_ELEMS // max(a.size, b.size))
    ratios = np.empty(n_boot)
    for start in range(0, n_boot, chunk):  # loop over memory chunks, not resamples
        m = min(chunk, n_boot - start)
        va = np.var(a[rng.integers(0, a.size, size=(m, a.size))], axis=1, ddof=1)
        vb = np.var(b[rng.integers(0, b.size, size=(m, b.size))], axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios[start:start + m] = va / vb
    ratios = ratios[~np.isnan(ratios)]  # 0/0: no ratio (see above)
    if ratios.size == 0:
        raise ValueError("every bootstrap resample was degenerate (both variances zero)")
    alpha = 1.0 - level
    low, high = _quantiles_allowing_inf(ratios, [alpha / 2, 1 - alpha / 2])
    return low, high


# --------------------------------------------------------------------------- Welch
class WelchResult(NamedTuple):
    """Result of :func:`welch_t_test`: t, Welch–Satterthwaite df, two-sided p, mean(a) - mean(b)."""

    t: float
    df: float
    p_value: float
    mean_diff: float


def welch_t_test(a, b) -> WelchResult:
    """Welch's unequal-variance t-test of mean(a) == mean(b), two-sided.

    Definition::

        t  = (mean_a - mean_b) / sqrt(s_a^2/n_a + s_b^2/n_b)
        df = (s_a^2/n_a + s_b^2/n_b)^2
             / ( (s_a^2/n_a)^2/(n_a - 1) + (s_b^2/n_b)^2/(n_b - 1) )   (Welch–Satterthwaite)
        p  = 2 * T.sf(|t|; df)

    t and p come from ``scipy.stats.ttest_ind(a, b, equal_var=False)``; df is computed
    by the formula above. ``mean_diff = mean(a) - mean(b)`` (same sign as t).
    NaNs are dropped; each sample needs >= 2 remaining values. If both variances are
    zero, t and p are NaN (scipy's behaviour) and df is NaN.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    ga = np.var(a, ddof=1) / a.size
    gb = np.var(b, ddof=1) / b.size
    denom = ga ** 2 / (a.size - 1) + gb ** 2 / (b.size - 1)
    df = float((ga + gb) ** 2 / denom) if denom > 0 else float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = _st.ttest_ind(a, b, equal_var=False)
    return WelchResult(t=float(res.statistic), df=df, p_value=float(res.pvalue),
                       mean_diff=float(a.mean() - b.mean()))


# --------------------------------------------------------------------------- ANOVA
ANOVA_NOISE = 1e-12  # a sum of squares below this share of the total is the fit's rounding noise: reported as 0


def two_way_anova(df: pd.DataFrame, response: str, factor_a: str, factor_b: str) -> pd.DataFrame:
    """Two-way ANOVA with interaction, type-II sums of squares (statsmodels).

    Model (treatment-coded OLS)::

        response ~ C(factor_a) * C(factor_b)
                 = C(A) + C(B) + C(A):C(B)

    fitted with ``statsmodels.formula.api.ols`` and tabulated with
    ``statsmodels.stats.anova.anova_lm(fit, typ=2)``. Type-II SS for A is the drop in
    residual SS when A is added to the model containing B (and vice versa); the
    interaction is tested last. In a balanced design
    ``SS_A + SS_B + SS_AB + SS_resid = SS_total = sum (y - mean(y))^2``.

    Column names are used verbatim (any string: "top1", "margin_mode", "top-1 acc"):
    the data are copied into internal columns, so no formula quoting is needed. The
    returned table is indexed by ``factor_a``, ``factor_b``, ``"factor_a:factor_b"`` and
    ``"Residual"`` with columns ``sum_sq, df, F, PR(>F)``.

    Rows with NaN in the response or either factor are dropped (count in
    ``result.attrs["n_dropped"]``). Reduced models, announced with a ``UserWarning``
    and recorded in ``result.attrs["model"]`` / ``result.attrs["note"]``:

    * a factor with a single level: the model without it (``response ~ C(other)``);
      if both have one level only the ``Residual`` row (SS_total, n - 1) is returned;
    * one observation per cell (no residual df for the interaction model), or an
      empty cell: the additive model ``C(A) + C(B)``.

    An effect's sum of squares below :data:`ANOVA_NOISE` of the total SS is rounding noise of the fit (an
    effect that is exactly zero comes out near 1e-28, its last bits machine-dependent): it is reported as
    ``sum_sq = 0, F = 0, PR(>F) = 1``.

    Raises ``ValueError`` if a column is missing, the response is not numeric, or
    fewer than 3 complete rows remain.
    """
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    for col, name in ((response, "response"), (factor_a, "factor_a"), (factor_b, "factor_b")):
        _check_column(df, col, name)
    if factor_a == factor_b:
        raise ValueError("factor_a and factor_b must be different columns")
    if response in (factor_a, factor_b):
        raise ValueError("response must differ from factor_a and factor_b")
    if not pd.api.types.is_numeric_dtype(df[response]):
        raise ValueError(f"response={response!r} must be a numeric column")

    data = pd.DataFrame({"y": df[response].astype(float).to_numpy(),
                         "A": df[factor_a].to_numpy(), "B": df[factor_b].to_numpy()})
    n_all = len(data)
    data = data.dropna()
    n_dropped = n_all - len(data)
    if len(data) < 3:
        raise ValueError(f"two_way_anova needs at least 3 complete rows, got {len(data)}")

    la, lb = data["A"].nunique(), data["B"].nunique()
    inter = f"{factor_a}:{factor_b}"
    names = {"C(A)": factor_a, "C(B)": factor_b, "C(A):C(B)": inter}
    note = None
    if la > 1 and lb > 1:
        n_cells = data.groupby(["A", "B"], observed=True).ngroups
        if n_cells < la * lb:
            formula, note = "y ~ C(A) + C(B)", (
                f"{la * lb - n_cells} empty cell(s): interaction not estimable, "
                "fitted the additive model")
        elif len(data) <= la * lb:
            formula, note = "y ~ C(A) + C(B)", (
                "one observation per cell: no residual df for the interaction model, "
                "fitted the additive model")
        else:
            formula = "y ~ C(A) * C(B)"
    elif la > 1 or lb > 1:
        single, keep = (factor_b, "A") if la > 1 else (factor_a, "B")
        formula = f"y ~ C({keep})"
        note = f"factor {single!r} has a single level: fitted the one-way model without it"
    else:
        formula = "y ~ 1"
        note = "both factors have a single level: only the residual (total) SS is reported"

    if formula == "y ~ 1":
        y = data["y"].to_numpy()
        table = pd.DataFrame({"sum_sq": [float(((y - y.mean()) ** 2).sum())],
                              "df": [float(len(y) - 1)], "F": [np.nan], "PR(>F)": [np.nan]},
                             index=["Residual"])
    else:
        fit = smf.ols(formula, data=data).fit()
        table = anova_lm(fit, typ=2).rename(index=names)
        # An effect that is exactly zero (study 1's identical stabiliser twins) comes out of the fit as rounding
        # noise, 1e-28 or so, whose last bits differ between CPUs: below ANOVA_NOISE of the total SS it is 0.
        y = data["y"].to_numpy()
        effects = table.index.drop("Residual")
        noise = effects[table.loc[effects, "sum_sq"] < ANOVA_NOISE * float(((y - y.mean()) ** 2).sum())]
        table.loc[noise, ["sum_sq", "F", "PR(>F)"]] = [0.0, 0.0, 1.0]
    model_txt = (formula.replace("y", repr(response), 1)
                 .replace("C(A)", f"C({factor_a!r})").replace("C(B)", f"C({factor_b!r})"))
    table.attrs["model"] = model_txt
    table.attrs["n_dropped"] = n_dropped
    table.attrs["note"] = note
    if note:
        warnings.warn(f"two_way_anova: {note} ({model_txt})", UserWarning, stacklevel=2)
    return table


# --------------------------------------------------------------------------- power
def cohens_d(a, b) -> float:
    """Cohen's d with the pooled standard deviation::

        d = (mean_a - mean_b) / s_p,
        s_p = sqrt( ((n_a - 1) s_a^2 + (n_b - 1) s_b^2) / (n_a + n_b - 2) )

    NaNs are dropped; each sample needs >= 2 values. Returns NaN if s_p == 0.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    sp2 = ((a.size - 1) * np.var(a, ddof=1) + (b.size - 1) * np.var(b, ddof=1)) / (a.size + b.size - 2)
    if sp2 == 0.0:
        return float("nan")
    return float((a.mean() - b.mean()) / math.sqrt(sp2))


def _check_alpha_power(alpha, power) -> tuple[float, float]:
    return _check_prob(alpha, "alpha"), _check_prob(power, "power")


def variance_ratio_power(ratio: float, n: int, *, alpha: float = 0.05, n_b: int | None = None) -> float:
    """Exact power of the two-sided F-test of equal variances at true ratio R = ratio.

    With n_a = n and n_b (default n) normal observations per arm, the statistic
    F = s_a^2 / s_b^2 satisfies F / R ~ F(n_a - 1, n_b - 1). The test rejects when
    F > f_hi = F.ppf(1 - alpha/2) or F < f_lo = F.ppf(alpha/2), hence::

        power(R, n) = P(F' > f_hi / R) + P(F' < f_lo / R),   F' ~ F(n_a - 1, n_b - 1)

    (scipy.stats.f sf and cdf). power(1, n) = alpha; with n_a = n_b the power at R
    equals the power at 1/R.
    """
    ratio = _check_ratio(ratio)
    alpha = _check_prob(alpha, "alpha")
    n_a = _check_n(n, "n")
    n_b = n_a if n_b is None else _check_n(n_b, "n_b")
    d1, d2 = n_a - 1, n_b - 1
    f_hi = _st.f.isf(alpha / 2, d1, d2)
    f_lo = _st.f.ppf(alpha / 2, d1, d2)
    return float(_st.f.sf(f_hi / ratio, d1, d2) + _st.f.cdf(f_lo / ratio, d1, d2))


def _check_ratio(ratio) -> float:
    try:
        r = float(ratio)
    except (TypeError, ValueError):
        raise ValueError(f"ratio must be a positive number, got {ratio!r}") from None
    if not (r > 0 and math.isfinite(r)):
        raise ValueError(f"ratio must be a positive finite number, got {ratio!r}")
    return r


def _check_n(n, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"{name} must be an integer >= 2, got {n!r}")
    return int(n)


def seeds_for_mean_difference(a, b, *, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """Seeds per arm for the two-sided two-sample t-test to reach ``power`` at the observed d.

    d = :func:`cohens_d` (a, b) (pooled SD). n solves, for equal arms (ratio = 1),
    ``TTestIndPower().solve_power(effect_size=|d|, alpha=alpha, power=power,
    alternative="two-sided")`` (statsmodels: noncentral t with df = 2n - 2,
    noncentrality d * sqrt(n/2)); returned as ``max(2, ceil(n))``. Normal
    approximation for orientation: n ~ 2 (z_{1-alpha/2} + z_{power})^2 / d^2
    (~ 15.7 / d^2 at the defaults). Returns None when d == 0 (or NaN: both arms
    constant): no finite n. Note: a power calculation at the *observed* effect is a
    noisy, optimistic planning number, not evidence about the effect.
    NaNs in a and b are dropped; each needs >= 2 values.
    """
    from statsmodels.stats.power import TTestIndPower

    alpha, power = _check_alpha_power(alpha, power)
    d = cohens_d(a, b)
    if not math.isfinite(d) or d == 0.0:
        return None
    n = TTestIndPower().solve_power(effect_size=abs(d), alpha=alpha, power=power,
                                    ratio=1.0, alternative="two-sided")
    n = float(np.asarray(n).item())
    return max(2, int(math.ceil(n - 1e-9)))


def seeds_for_variance_ratio(ratio: float, *, power: float = 0.8, alpha: float = 0.05,
                             n_max: int = 10**8) -> int | None:
    """Smallest seeds per arm n (equal arms) with :func:`variance_ratio_power` (ratio, n) >= power.

    Power is the exact two-sided F-test power with df (n - 1, n - 1)::

        power(R, n) = P(F' > f_hi / R) + P(F' < f_lo / R),  F' ~ F(n - 1, n - 1),
        f_hi = F.ppf(1 - alpha/2), f_lo = F.ppf(alpha/2)

    Search: doubling from n = 2 until power >= target, then bisection for the smallest
    such n (power increases with n for fixed R != 1); the result satisfies
    power(n) >= target > power(n - 1) (or n == 2). Symmetric: ratio and 1/ratio give
    the same n. Returns None when ratio == 1 (no effect: power stays at alpha).
    Raises ``ValueError`` if more than ``n_max`` seeds would be needed.
    """
    r = _check_ratio(ratio)
    alpha, power = _check_alpha_power(alpha, power)
    if power <= alpha:
        raise ValueError(f"power must exceed alpha, got power={power}, alpha={alpha}")
    if r == 1.0:
        return None

    def pw(n: int) -> float:
        return variance_ratio_power(r, n, alpha=alpha)

    if pw(2) >= power:
        return 2
    lo, hi = 2, 4  # invariant: pw(lo) < power
    while pw(hi) < power:
        lo, hi = hi, hi * 2
        if hi > 2 * n_max:
            raise ValueError(f"ratio={ratio!r} needs more than n_max={n_max} seeds per arm")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid
    if hi > n_max:
        raise ValueError(f"ratio={ratio!r} needs more than n_max={n_max} seeds per arm")
    return hi


class SeedsForPower(NamedTuple):
    """Result of :func:`seeds_for_power`."""

    cohens_d: float
    n_mean: int | None
    variance_ratio: float
    n_variance: int | None


def seeds_for_power(a, b, *, ratio: float | None = None, power: float = 0.8,
                    alpha: float = 0.05) -> SeedsForPower:
    """Seeds per arm for 80 % power (default) at two-sided alpha = 0.05 (default).

    (i) mean difference: :func:`seeds_for_mean_difference` at Cohen's d of (a, b)
        (pooled SD; statsmodels ``TTestIndPower.solve_power``; n ~ 2 (z_.975 + z_.8)^2 / d^2);
    (ii) variance ratio: :func:`seeds_for_variance_ratio` at ``ratio`` (default: the
        observed Var(a) / Var(b), ddof=1) with the exact F-test power
        ``P(F' > f_hi / R) + P(F' < f_lo / R)``, F' ~ F(n - 1, n - 1).

    Both n are integers (ceil / smallest n reaching the power) or None when the effect is
    zero (d == 0, ratio == 1). NaNs in a and b are dropped; each needs >= 2 values.
    """
    a = _sample(a, "a")
    b = _sample(b, "b")
    if ratio is None:
        vb = np.var(b, ddof=1)
        if vb == 0.0:
            raise ValueError("b has zero variance; pass ratio explicitly")
        ratio = float(np.var(a, ddof=1) / vb)
    r = _check_ratio(ratio)
    return SeedsForPower(
        cohens_d=cohens_d(a, b),
        n_mean=seeds_for_mean_difference(a, b, power=power, alpha=alpha),
        variance_ratio=r,
        n_variance=seeds_for_variance_ratio(r, power=power, alpha=alpha),
    )


# --------------------------------------------------------------------------- summary
def summarize_arms(df: pd.DataFrame, value: str, by) -> pd.DataFrame:
    """Per-group n, mean, std, var, min, max of column ``value``, grouped by ``by``.

    ``by`` is a column name or a list of names. std and var use ddof=1
    (NaN for a group with n = 1). NaNs in ``value`` are dropped (n counts non-NaN
    values); rows with NaN in a ``by`` column are dropped (pandas groupby default).
    Groups are sorted; only observed category combinations appear.
    """
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    _check_column(df, value, "value")
    keys = [by] if isinstance(by, str) or not isinstance(by, (list, tuple)) else list(by)
    if not keys:
        raise ValueError("by must name at least one column")
    for k in keys:
        _check_column(df, k, "by")
    if value in keys:
        raise ValueError(f"value={value!r} must not be one of the by columns")
    if not pd.api.types.is_numeric_dtype(df[value]):
        raise ValueError(f"value={value!r} must be a numeric column")
    g = df.groupby(keys if len(keys) > 1 else keys[0], observed=True, sort=True)[value]
    return g.agg(n="count", mean="mean", std="std", var="var", min="min", max="max")


# ------------------------------------------------- rank statistics of study 4 (embedding norms)
# Unlike the functions above, these take paired or pooled samples as they come (no NaN dropping).

__all__ += ["rank_correlation", "auroc", "auroc_test", "loglog_slope"]


def rank_correlation(x, y) -> tuple[float, float]:
    """Spearman's rho of x and y (``scipy.stats.spearmanr``) and its two-sided p-value; NaN when
    either is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    result = _st.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def auroc(in_scores, out_scores) -> float:
    r"""Area under the ROC curve of a score that should be larger for in-distribution samples.

        AUROC = P(s_in > s_out) + P(s_in = s_out) / 2 = U_in / (n_in n_out),
        U_in  = R_in - n_in (n_in + 1) / 2      (R_in: sum of the in-samples' mid-ranks in the pooled scores)

    0.5 is chance; 1 means every in-distribution score exceeds every out-of-distribution one.
    """
    a, b = np.asarray(in_scores, dtype=float).ravel(), np.asarray(out_scores, dtype=float).ravel()
    if len(a) == 0 or len(b) == 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("in_scores and out_scores must be non-empty and finite")
    ranks = _st.rankdata(np.concatenate([a, b]))
    u_in = ranks[:len(a)].sum() - len(a) * (len(a) + 1) / 2
    return float(u_in / (len(a) * len(b)))


def auroc_test(in_scores, out_scores) -> tuple[float, float]:
    """:func:`auroc` and the two-sided Mann-Whitney p-value of AUROC = 0.5 (the same U statistic)."""
    return auroc(in_scores, out_scores), float(_st.mannwhitneyu(in_scores, out_scores, alternative="two-sided").pvalue)


def loglog_slope(x, y) -> tuple[float, float]:
    """Least-squares slope of log y on log x and its standard error (the exponent of y ~ x^slope)."""
    result = _st.linregress(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)))
    return float(result.slope), float(result.stderr)
