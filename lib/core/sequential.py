"""Two looks at one claim: a group-sequential design whose error rate stays at its level.

The shipped seeds of a claim are look 1 (n₁ per arm); an extension planned before its runs adds seeds up to
n₂ per arm, look 2. Testing again on all seeds after seeing look 1 is optional stopping unless both looks
are read against boundaries that together spend the claim's level α once. We use Lan–DeMets spending with
the O'Brien–Fleming shape,

    α(t) = 2 − 2 Φ(z_{α/2} / √t),   t = n₁ / n₂ (the information look 1 holds),

because look 1 has already been read once: O'Brien–Fleming keeps almost all of α for look 2 (at t = 1/2
look 1 gets 0.0056 of 0.05 and look 2 a nominal 0.0478), where Pocock's shape would take the level of both
looks down to about 0.03. Look 1's z boundary c₁ spends α(t); look 2's c₂ solves
P(|Z₁| < c₁, |Z₂| < c₂) = 1 − α for (Z₁, Z₂) bivariate normal with correlation √t.

Each look's nominal level 2 − 2Φ(c) is then applied to the claim's own small-sample test (Welch's t, the
one-sample or paired t, or a variance ratio's rule: the F-test and Brown–Forsythe both reject) on the seeds of
that look. For a variance ratio the information grows with the degrees of freedom rather than the seeds; at 5 to 7
seeds at look 1 the F-test's two-look type I error still lands within [5.0%, 5.4%] at α = 5% (simulated in
tests/test_sequential.py), and the rule, whose p is the larger of its two tests', holds about half of it.

The normal approximation is not used for power: at 3 to 8 seeds it overstates the power of the actual two-look
t design by 6 to 11 points (docs/notes/sequential.md), so :func:`two_look_power` simulates the test itself and
:func:`look_two_seeds` plans n₂ from it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize as _opt
import scipy.stats as _st

from lib.core.stats import brown_forsythe_p, variance_ratio_p

SPENDING = "O'Brien–Fleming (Lan–DeMets)"
TESTS = ("one_sample", "paired", "welch")  # the paired t is the one-sample t on the per-seed differences
VARIANCE_RATIO = "variance_ratio"  # the F-test with Brown–Forsythe beside it (lib.core.verdicts): its effect is log R
DESIGNS = (*TESTS, VARIANCE_RATIO)
SIMULATIONS = 20_000  # designs per power: its standard error is at most 0.35 points
MAX_SEEDS = 64  # look_two_seeds looks no further (per arm)


def obrien_fleming_spent(t: float, alpha: float) -> float:
    """The two-sided α spent by information fraction ``t`` (Lan–DeMets, O'Brien–Fleming shape)."""
    if not 0 < t <= 1:
        raise ValueError(f"t={t!r}: the information fraction lies in (0, 1]")
    return float(2 - 2 * _st.norm.cdf(_st.norm.isf(alpha / 2) / math.sqrt(t)))


@dataclass(frozen=True)
class Boundaries:
    """The nominal two-sided levels at which each look's test rejects, for a claim at level ``alpha``."""

    n1: int  # seeds per arm at look 1
    n2: int  # seeds per arm at look 2, fixed before its runs
    alpha: float  # the claim's two-sided level (its family's α / m)
    level1: float  # look 1 rejects when p < level1
    level2: float  # look 2 rejects when p < level2
    planned_power: float = float("nan")  # the two-look power at the published value, simulated when planned

    @property
    def t(self) -> float:
        return self.n1 / self.n2

    def rule(self, look: int) -> str:
        """What decides at ``look``: "p < level", or that no p can where O'Brien–Fleming's share underflows (a look 1
        far smaller than look 2)."""
        level = self.level1 if look == 1 else self.level2
        return f"p < {level:.2g}" if level > 0 else "no p decides (no α spent)"

    def text(self, look: int) -> str:
        return (f"look {look} of 2 ({self.n1} → {self.n2} seeds per arm): {self.rule(look)}, {SPENDING} at "
                f"α = {self.alpha:.2g}")

    def as_dict(self) -> dict:
        return {"n1": self.n1, "n2": self.n2, "alpha": self.alpha, "level1": self.level1, "level2": self.level2,
                "planned_power": self.planned_power, "spending": SPENDING}


@dataclass(frozen=True)
class Look:
    """One look of a two-look design: the claim is decided there when its p falls below ``level``."""

    design: Boundaries
    number: int  # 1 or 2

    @property
    def level(self) -> float:
        return self.design.level1 if self.number == 1 else self.design.level2

    def text(self) -> str:
        return self.design.text(self.number)


def _check_design(n1, n2, alpha) -> None:
    if not (isinstance(n1, int) and isinstance(n2, int) and 2 <= n1 < n2):
        raise ValueError(f"n1={n1!r}, n2={n2!r}: seeds per arm with 2 <= n1 < n2")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r}: a level in (0, 1)")


def boundaries(n1: int, n2: int, alpha: float) -> Boundaries:
    """The two looks' nominal levels for n₁ → n₂ seeds per arm at the claim's two-sided level ``alpha``."""
    _check_design(n1, n2, alpha)
    return look_two_boundary(n1, n2, alpha, obrien_fleming_spent(n1 / n2, alpha))


def look_two_boundary(n1: int, n2: int, alpha: float, level1: float) -> Boundaries:
    """The design whose look 1 rejected at ``level1`` and whose look 2 holds n₂ seeds per arm: look 2's level
    spends the rest of ``alpha`` at the information look 1 actually holds, t = n₁ / n₂. :func:`boundaries` calls it
    with O'Brien–Fleming's look-1 share; a plan read on fewer seeds than it planned (its runs that finished before
    it was written are left out: lib.run.plans) calls it with the level look 1 was read at and the seeds it has."""
    _check_design(n1, n2, alpha)
    c1 = _st.norm.isf(level1 / 2)
    rho = math.sqrt(n1 / n2)
    both = _st.multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]])

    def inside(c2):  # P(|Z1| < c1, |Z2| < c2), by inclusion-exclusion on the bivariate CDF
        return (both.cdf([c1, c2]) - both.cdf([-c1, c2]) - both.cdf([c1, -c2]) + both.cdf([-c1, -c2]))
    c2 = _opt.brentq(lambda c: inside(c) - (1 - alpha), 0.5, 12.0, xtol=1e-10)
    return Boundaries(n1, n2, alpha, float(2 * _st.norm.sf(c1)), float(2 * _st.norm.sf(c2)))


def _t_p(mean: np.ndarray, sd: np.ndarray, n: int) -> np.ndarray:
    with np.errstate(divide="ignore"):  # seeds that all agree (simulated outliers at ±3): t is infinite, p 0
        return 2 * _st.t.sf(np.abs(mean) / (sd / math.sqrt(n)), n - 1)


def _welch_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    va, vb = a.var(axis=-1, ddof=1) / a.shape[-1], b.var(axis=-1, ddof=1) / b.shape[-1]
    df = (va + vb) ** 2 / (va ** 2 / (a.shape[-1] - 1) + vb ** 2 / (b.shape[-1] - 1))
    return 2 * _st.t.sf(np.abs(a.mean(axis=-1) - b.mean(axis=-1)) / np.sqrt(va + vb), df)


def _variance_ratio_p(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The p of a variance ratio's rule: the larger of the F-test's and Brown–Forsythe's."""
    p_f = variance_ratio_p(a.var(axis=-1, ddof=1) / b.var(axis=-1, ddof=1), a.shape[-1], b.shape[-1])
    return np.maximum(p_f, brown_forsythe_p(a, b))


def look_p_values(test: str, effect: float, design: Boundaries, *, simulations: int = SIMULATIONS,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulated p-values at look 1 and look 2 of ``simulations`` designs whose true effect is ``effect`` (normal
    data; in SDs for the t-tests, log Var(a)/Var(b) for a variance ratio), and the sign of each look-2 estimate
    (its log ratio for a variance ratio); the data of look 1 are the first n₁ seeds of look 2."""
    if test not in DESIGNS:
        raise ValueError(f"test={test!r} is not allowed: one of {', '.join(DESIGNS)}")
    rng = np.random.default_rng(seed)
    n1, n2 = design.n1, design.n2
    if test == VARIANCE_RATIO:
        a = rng.standard_normal((simulations, n2)) * math.exp(effect / 2)
        b = rng.standard_normal((simulations, n2))
        p1, p2 = _variance_ratio_p(a[:, :n1], b[:, :n1]), _variance_ratio_p(a, b)
        sign = np.sign(np.log(a.var(axis=1, ddof=1) / b.var(axis=1, ddof=1)))
    elif test == "welch":
        a = rng.standard_normal((simulations, n2)) + effect
        b = rng.standard_normal((simulations, n2))
        p1, p2 = _welch_p(a[:, :n1], b[:, :n1]), _welch_p(a, b)
        sign = np.sign(a.mean(axis=1) - b.mean(axis=1))
    else:  # one sample; for "paired", the per-seed differences with their own SD
        x = rng.standard_normal((simulations, n2)) + effect
        p1 = _t_p(x[:, :n1].mean(axis=1), x[:, :n1].std(axis=1, ddof=1), n1)
        p2 = _t_p(x.mean(axis=1), x.std(axis=1, ddof=1), n2)
        sign = np.sign(x.mean(axis=1))
    return p1, p2, sign


def rejection_rate(test: str, effect: float, design: Boundaries, *, simulations: int = SIMULATIONS,
                   seed: int = 0, direction: int | None = None) -> float:
    """The share of simulated designs that reject at either look (``direction``: only rejections whose
    look-2 estimate lies on that side, the power to reproduce a published sign)."""
    p1, p2, sign = look_p_values(test, effect, design, simulations=simulations, seed=seed)
    rejects = (p1 < design.level1) | (p2 < design.level2)
    if direction is not None:
        rejects &= sign == direction
    return float(rejects.mean())


def two_look_power(test: str, effect: float, design: Boundaries, *, simulations: int = SIMULATIONS,
                   seed: int = 0) -> float:
    """Power of the two-look design at a true effect of ``effect`` (SDs; log R for a variance ratio), in the
    effect's direction."""
    return rejection_rate(test, abs(effect), design, simulations=simulations, seed=seed, direction=1)


def look_two_seeds(test: str, effect: float, n1: int, alpha: float, *, target: float = 0.8,
                   max_seeds: int = MAX_SEEDS, seed: int = 0) -> tuple[int | None, float]:
    """The fewest seeds per arm at look 2 (more than ``n1``) whose two-look power at ``effect`` reaches
    ``target``, and that power; (None, power at ``max_seeds``) when even that falls short. Power grows with n₂,
    so the search halves the range each time (every simulation uses the same ``seed``)."""
    def power(n2):
        return two_look_power(test, effect, boundaries(n1, n2, alpha), seed=seed)
    top = power(max_seeds)
    if top < target:
        return None, top
    lo, hi, at_hi = n1, max_seeds, top  # power(lo) < target (or lo = n1), power(hi) >= target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        at_mid = power(mid)
        lo, hi, at_hi = (lo, mid, at_mid) if at_mid >= target else (mid, hi, at_hi)
    return hi, at_hi


# ------------------------------------------------------------------------------ both kinds of error, simulated

NOISES = ("normal", "t5", "outliers")  # the seed-to-seed spread: normal, heavy-tailed, 5% of seeds at 3 SD


def _noise(rng: np.random.Generator, shape: tuple, noise: str) -> np.ndarray:
    """Unit-scale draws: standard normal; Student's t with 5 df scaled to unit variance; or standard normal with
    each value, with probability 0.05, replaced by ±3 (a seed that went its own way)."""
    if noise == "normal":
        return rng.standard_normal(shape)
    if noise == "t5":
        return rng.standard_t(5, shape) / math.sqrt(5 / 3)
    if noise == "outliers":
        z = rng.standard_normal(shape)
        return np.where(rng.random(shape) < 0.05, 3.0 * rng.choice([-1.0, 1.0], shape), z)
    raise ValueError(f"noise={noise!r} is not allowed: one of {', '.join(NOISES)}")


def _arms(test: str, effect: float, n: int, simulations: int, rng, noise: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Look 2's seeds of each arm (look 1's are the first n₁) at a true effect: SDs for the t-tests, log R for a
    variance ratio (arm a's spread is exp(effect / 2) times b's)."""
    if test == VARIANCE_RATIO:
        return (_noise(rng, (simulations, n), noise) * math.exp(effect / 2), _noise(rng, (simulations, n), noise))
    if test == "welch":
        return _noise(rng, (simulations, n), noise) + effect, _noise(rng, (simulations, n), noise)
    return _noise(rng, (simulations, n), noise) + effect, None


def _p_value(test: str, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    if test == VARIANCE_RATIO:
        return _variance_ratio_p(a, b)
    if test == "welch":
        return _welch_p(a, b)
    return _t_p(a.mean(axis=1), a.std(axis=1, ddof=1), a.shape[1])


def _estimate(test: str, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """The estimate on the test's scale: log of the variance ratio, a difference, or a mean."""
    if test == VARIANCE_RATIO:
        return np.log(a.var(axis=1, ddof=1) / b.var(axis=1, ddof=1))
    return a.mean(axis=1) - (b.mean(axis=1) if b is not None else 0.0)


def _short_of(test: str, a: np.ndarray, b: np.ndarray | None, published: float, level: float) -> np.ndarray:
    """The rule *not reproduced* applies at one look (lib.core.verdicts): the interval at ``level`` lies wholly on
    the null's side of ``published`` (on the test's scale, its sign the claimed direction); for a variance ratio,
    Brown–Forsythe on the arms rescaled to the published ratio also rejects at ``level``."""
    side = 1.0 if published > 0 else -1.0
    n = a.shape[1]
    if test == VARIANCE_RATIO:
        log_r = _estimate(test, a, b)
        d1, d2 = n - 1, b.shape[1] - 1
        lo, hi = log_r - math.log(_st.f.ppf(1 - level / 2, d1, d2)), log_r - math.log(_st.f.ppf(level / 2, d1, d2))
        short = hi < published if side > 0 else lo > published
        return short & (brown_forsythe_p(a / math.exp(published / 2), b) < level)
    if test == "welch":
        va, vb = a.var(axis=1, ddof=1) / n, b.var(axis=1, ddof=1) / b.shape[1]
        df = (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (b.shape[1] - 1))
        half = _st.t.ppf(1 - level / 2, df) * np.sqrt(va + vb)
    else:
        half = _st.t.ppf(1 - level / 2, n - 1) * a.std(axis=1, ddof=1) / math.sqrt(n)
    estimate = _estimate(test, a, b)
    return estimate + half < published if side > 0 else estimate - half > published


def decision_error_rates(test: str, published: float, design: Boundaries, *, noise: str = "normal",
                         simulations: int = SIMULATIONS, seed: int = 0) -> dict[str, float]:
    """Both kinds of error of a two-look design as it is read (lib.core.verdicts, lib.run.plans), simulated:

    - ``reproduced``: under the null, the share of designs that reject at look 1 (p < level1) or at look 2
      (p < level2, having gone on) with the estimate on the published side, *reproduced* or *reproduced, smaller*;
    - ``not_reproduced``: at the published value, the share read *not reproduced*, which is read at look 2 only, on
      the designs that did not stop at look 1 and whose look 2 does not reject the null.

    ``published``: the published effect on the test's scale (SDs from the null for the t-tests, log R for a variance
    ratio); ``noise``: one of :data:`NOISES`. Each rate should lie within the claim's level ``design.alpha``."""
    rng = np.random.default_rng(seed)
    n1, n2 = design.n1, design.n2
    rates = {}
    for name, truth in (("reproduced", 0.0), ("not_reproduced", published)):
        a, b = _arms(test, truth, n2, simulations, rng, noise)
        first = (a[:, :n1], None if b is None else b[:, :n1])
        stop1 = _p_value(test, *first) < design.level1
        p2 = _p_value(test, a, b)
        if name == "reproduced":
            on_side = np.sign(_estimate(test, *first)) == np.sign(published)
            on_side2 = np.sign(_estimate(test, a, b)) == np.sign(published)
            rates[name] = float(((stop1 & on_side) | (~stop1 & (p2 < design.level2) & on_side2)).mean())
        else:
            rates[name] = float((~stop1 & (p2 >= design.level2) & _short_of(test, a, b, published, design.level2))
                                .mean())
    return rates

