"""One verdict engine for every claim: seed-level observations in, what the evidence can decide out.

A :class:`Claim` is declared once per study: the paper's quantity, its published value and the null it is
tested against (the direction is the side of the null the published value lies on), the effect measure,
the evidence tag and the family of claims it is corrected with. :func:`evaluate` takes the observations of
each arm keyed by seed (one number per independent seed: :func:`by_seed` averages the runs of a seed, such
as study 1's detach/direct twins, before anything else can see them) and returns an :class:`Assessment`:
the estimate, its 95% CI, the raw p, the design's power at the published effect and the seeds per arm that
would give 80% power there. :func:`decide` adjusts the p-values within each family (Holm) and gives each
assessment its verdict, from the numbers alone, in the same grammar for every study
(``docs/verdicts.md`` explains each rule with a worked example):

1. no data → *not measured*
2. a check of our own (an identity, a simulation of a theorem, our code against our closed form) → *check*
3. p (Holm) < 0.05, on the published side of the null, the CI reaching the published value → *reproduced*
4. p (Holm) < 0.05, on the published side, the CI short of it → *reproduced, smaller*
5. p (Holm) < 0.05, on the other side → *contradicted*
   (a published "no difference", measure ``equivalence``: the TOST significant → *reproduced*; else the
   whole CI beyond ±margin → *contradicted*; else by power as in 6–7)
6. not significant, and power ≥ 0.8 at the published value or the CI excludes it → *not reproduced*
7. otherwise → *inconclusive (power P%)*, with the seeds per arm that would give 80%

The measures (:data:`MEASURES`), each with its test, CI and power (α = 0.05, two-sided; in a family of m
measured claims :func:`decide` takes the power and the seeds needed at α/m, the level Holm gives every claim):

- ``variance_ratio`` R = Var(a)/Var(b): the F-test; the CI is the F interval [R̂/F(1-α/2), R̂/F(α/2)] with
  df (n_a - 1, n_b - 1), the test's own dual, so "significant" and "the CI excludes 1" never disagree
  [ours: the bootstrap CI over seeds is shown beside it by the studies]; power exact
  (:func:`lib.core.stats.variance_ratio_power`).
- ``mean_difference`` mean(a) - mean(b): Welch's t-test and interval; power by the noncentral t at
  d = published difference / pooled SD of the observations (statsmodels ``TTestIndPower``).
- ``ratio`` of geometric means exp(mean log a - mean log b) (a gradient-norm ratio): Welch on the logs.
- ``one_sample`` mean of per-seed values against the null (a paired difference such as trained - initial
  AUROC, a per-seed slope): the one-sample t-test and interval; power by the noncentral t
  (statsmodels ``TTestPower``).
- ``vr_contrast`` one variance ratio against others (study 2's reversal: VR on one dataset over the geometric
  mean of the VRs on the others): C = log VR_0 - mean_k log VR_k, with the normal-theory variance of a log
  variance ratio, Var(log VR) ≈ 2/(n_a - 1) + 2/(n_b - 1) (Bartlett & Kendall 1946) [ours: a large-sample
  approximation]; z-test, CI exp(C ± 1.96·SE), power by the normal approximation (:func:`evaluate_contrast`).
- ``equivalence`` a published "no difference" in means: the TOST (two one-sided Welch tests, Schuirmann 1987)
  against ±``margin``, the difference that matters [ours, named by the study]; the CI shown is Welch's 95%
  interval of the difference; power of the TOST at the published difference with the pooled SD taken as known.

Beside the verdict, the small-telescope reading (Simonsohn 2015) where the original design is known
(``published_n``): the effect that design detects with 33% power, and whether our CI lies wholly short
of it (then the original design could not have seen the effect we measure).

The module runs past 400 lines because the grammar is one contract: the claim, the four effect measures with
their tests and power, Holm's correction and the verdict rules live together, so that every study's table is
decided by the same code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import optimize as _opt
from scipy import stats as _st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower

from lib.core.stats import seeds_for_variance_ratio, variance_ratio_p, variance_ratio_power

ALPHA = 0.05  # two-sided, for every test, CI and power here
TARGET_POWER = 0.8  # "the design could have seen it"; also the seeds-needed target
TELESCOPE_POWER = 0.33  # Simonsohn's small telescope: the effect the original design saw with 33% power
MEASURES = ("variance_ratio", "mean_difference", "ratio", "one_sample", "equivalence", "vr_contrast")
TWO_ARMS = ("variance_ratio", "mean_difference", "ratio", "equivalence")
RATIO_SCALE = ("variance_ratio", "ratio", "vr_contrast")  # compared on the log scale; null 1
KINDS = ("claim", "check")
VERDICTS = ("reproduced", "reproduced, smaller", "contradicted", "not reproduced", "inconclusive", "not measured",
            "check")


@dataclass(frozen=True)
class Claim:
    """A published claim, declared once: what is measured, the paper's value, the null and the family."""

    quantity: str  # what the verdict table calls it, e.g. "VR = Var(clamp) / Var(subtract)"
    measure: str  # one of MEASURES
    published: float | None  # the paper's value in the measure's units (None only for a check without one)
    evidence: str = "[paper]"  # where the published value comes from: [paper], [code], [summary]
    family: str = ""  # claims whose p-values are Holm-corrected together
    null: float | None = None  # default: 1 for ratios, 0 otherwise
    kind: str = "claim"  # "check": ours (an identity, a simulation of a theorem), never a reproduction
    published_n: tuple[int, int] | int | None = None  # the original design's seeds (per arm), if known
    margin: float | None = None  # equivalence only: the difference that matters, ±margin [ours]
    published_text: str = ""  # the paper's value as the table shows it, when a number alone misleads
    seeds_parameters: tuple[str, ...] = ("seeds",)  # the notebook parameters that set the seeds of its arms

    def __post_init__(self):
        if self.kind == "check" and self.published is None:
            return  # a check of our own that has no published number
        if self.measure not in MEASURES:
            raise ValueError(f"measure={self.measure!r} is not allowed: one of {', '.join(MEASURES)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not allowed: one of {', '.join(KINDS)}")
        if not math.isfinite(self.published):
            raise ValueError(f"published={self.published!r} must be a finite number")
        if self.measure in RATIO_SCALE and self.published <= 0:
            raise ValueError(f"published={self.published!r}: a {self.measure} is positive")
        if self.measure == "equivalence":
            if self.margin is None or not self.margin > 0:
                raise ValueError(f"margin={self.margin!r}: an equivalence claim needs the difference that matters, "
                                 "a number > 0")
            if not abs(self.published - self.null_value) < self.margin:
                raise ValueError(f"published={self.published!r} lies outside the equivalence margin ±{self.margin}")
        elif self.kind == "claim" and self.published == self.null_value:
            raise ValueError(f"published={self.published!r} equals the null: the claim names no direction")

    @property
    def null_value(self) -> float:
        return (1.0 if self.measure in RATIO_SCALE else 0.0) if self.null is None else float(self.null)

    def scale(self, x: float) -> float:
        """Where effects are compared: the log of a ratio, else the value itself."""
        return math.log(x) if self.measure in RATIO_SCALE else x

    @property
    def direction(self) -> int:
        """+1 when the published value lies above the null (on the measure's scale), -1 below."""
        return 1 if self.scale(self.published) > self.scale(self.null_value) else -1


@dataclass(frozen=True)
class Assessment:
    """A claim tested on seed-level observations; ``verdict`` and ``p_holm`` are set by :func:`decide`."""

    claim: Claim
    n: tuple[int, ...]  # seeds per arm
    estimate: float = float("nan")
    ci: tuple[float, float] = (float("nan"), float("nan"))
    p: float = float("nan")
    power: float = float("nan")  # at the published value, with this design
    seeds_needed: int | None = None  # per arm, for TARGET_POWER at the published value
    telescope: float | None = None  # the effect the original design detects with 33% power
    p_holm: float = float("nan")
    verdict: str = ""
    notes: dict = field(default_factory=dict)
    # (power, seeds_needed) at a given two-sided level: decide() asks it at the family's level ALPHA / m
    power_at: Callable[[float], tuple[float, int | None]] | None = field(default=None, compare=False, repr=False)

    @property
    def measured(self) -> bool:
        return math.isfinite(self.estimate)

    def verdict_text(self) -> str:
        """The verdict as a table shows it: an inconclusive one with its power and the seeds it would take."""
        if self.verdict == "inconclusive":
            needed = f"; {self.seeds_needed} seeds per arm for 80%" if self.seeds_needed else ""
            return f"inconclusive (power {self.power:.0%}{needed})"
        return self.verdict

    def row(self, digits: int = 3) -> dict:
        """The verdict-table row: ours with its CI, the paper's, p (raw and Holm), power, seeds needed, and the
        row's ``kind`` (claim or check). A check's text (``notes["ours"]``) stands for its number."""
        def g(x):
            return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"
        claim = self.claim
        ours = (self.notes["ours"] if "ours" in self.notes else
                f"not measured: {self.notes['why']}" if not self.measured and "why" in self.notes else
                "not measured" if not self.measured
                else f"{g(self.estimate)} [{g(self.ci[0])}, {g(self.ci[1])}]")
        paper = claim.published_text or ("" if claim.published is None else g(claim.published))
        if claim.measure == "equivalence" and claim.kind == "claim":
            paper += f"; equivalent within ±{claim.margin:g} [ours]"
        if claim.kind == "check":  # a check tests no published claim: no p, power or seeds to show
            return {"quantity": claim.quantity, "ours": ours, "paper": paper, "evidence": claim.evidence,
                    "n": " vs ".join(map(str, self.n)) or "–", "p": "–", "p_holm": "–", "power": "–",
                    "seeds_needed": "–", "verdict": "check", "kind": "check", "seeds_parameters": ""}
        return {"quantity": claim.quantity, "ours": ours, "paper": paper,
                "evidence": claim.evidence, "n": " vs ".join(map(str, self.n)) or "–",
                "p": g(self.p), "p_holm": g(self.p_holm), "power": "–" if not math.isfinite(self.power)
                else f"{self.power:.0%}", "seeds_needed": "–" if self.seeds_needed is None else str(self.seeds_needed),
                "verdict": self.verdict_text(), "kind": claim.kind,
                "seeds_parameters": ",".join(claim.seeds_parameters)}


# ------------------------------------------------------------------------------ the unit: one number per seed


def by_seed(frame: pd.DataFrame, value: str, seed: str = "seed") -> dict[int, float]:
    """``{seed: mean of value}``: the runs of one seed (twins, repeated evaluations) become one observation."""
    if seed not in frame or value not in frame:
        raise KeyError(f"by_seed needs columns {seed!r} and {value!r}; the frame has {list(frame.columns)}")
    means = frame.groupby(seed)[value].mean()
    return {int(k): float(v) for k, v in means.items() if math.isfinite(v)}


def _seed_level(observations, name: str) -> np.ndarray:
    """The values of a mapping seed -> number (a dict, or a Series indexed by unique seeds), finite ones only.
    A bare list is refused: nothing would stop one seed's twins from counting twice."""
    if isinstance(observations, pd.Series):
        if not observations.index.is_unique:
            repeated = observations.index[observations.index.duplicated()][0]
            raise ValueError(f"{name}: seed {repeated!r} appears more than once; average its runs first (by_seed)")
        observations = observations.to_dict()
    if not isinstance(observations, Mapping):
        raise TypeError(f"{name} must map each seed to one number (a dict or a Series indexed by seed), got "
                        f"{type(observations).__name__}: runs of one seed would count as several observations")
    values = np.array([float(v) for v in observations.values()], dtype=float)
    return values[np.isfinite(values)]


# ------------------------------------------------------------------------------ the measures


def _variance_ratio(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    d1, d2 = a.size - 1, b.size - 1
    va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
    if vb == 0 or va == 0:
        return {}
    r = float(va / vb)
    p = variance_ratio_p(r, a.size, b.size)
    ci = (r / _st.f.ppf(1 - ALPHA / 2, d1, d2), r / _st.f.ppf(ALPHA / 2, d1, d2))

    def power_at(alpha):
        return (variance_ratio_power(claim.published, a.size, n_b=b.size, alpha=alpha),
                seeds_for_variance_ratio(claim.published, power=TARGET_POWER, alpha=alpha))
    return dict(estimate=r, ci=ci, p=p, power_at=power_at)


def _welch(a: np.ndarray, b: np.ndarray, null: float) -> tuple[float, tuple[float, float], float]:
    """Welch's difference of means, its CI and the two-sided p of the test against ``null``."""
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    se = math.sqrt(va + vb)
    diff = float(a.mean() - b.mean())
    if se == 0:
        return diff, (diff, diff), (1.0 if diff == null else 0.0)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = _st.t.ppf(1 - ALPHA / 2, df) * se
    return diff, (diff - half, diff + half), float(2 * _st.t.sf(abs(diff - null) / se, df))


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    return math.sqrt(((a.size - 1) * np.var(a, ddof=1) + (b.size - 1) * np.var(b, ddof=1)) / (a.size + b.size - 2))


def _two_sample_power(effect: float, sd: float, n_a: int, n_b: int, alpha: float = ALPHA) -> tuple[float, int | None]:
    """Power of the two-sided two-sample t-test at level ``alpha`` and ``effect`` (in the data's units) and the
    seeds per arm for TARGET_POWER, at Cohen's d = effect / sd (noncentral t, df n_a + n_b - 2)."""
    if not sd > 0:
        return float("nan"), None
    d = abs(effect) / sd
    power = _t_power(TTestIndPower(), alpha, effect_size=d, nobs1=n_a, ratio=n_b / n_a)
    return power, _seeds_needed(lambda n: _t_power(TTestIndPower(), alpha, effect_size=d, nobs1=n, ratio=1.0))


def _t_power(solver, alpha: float, **kwargs) -> float:
    """statsmodels' power of a t-test at the two-sided level ``alpha``, which returns NaN where the noncentral
    t's tail underflows (d ≈ 10 at n = 5): there the power is 1 to double precision."""
    power = float(solver.power(alpha=alpha, **kwargs))
    return 1.0 if math.isnan(power) and kwargs["effect_size"] > 1 else power


def _seeds_needed(power_at) -> int | None:
    """The smallest n >= 2 with ``power_at(n)`` >= TARGET_POWER (power grows with n), None beyond 10^6."""
    if power_at(2) >= TARGET_POWER:
        return 2
    lo, hi = 2, 4
    while power_at(hi) < TARGET_POWER:
        lo, hi = hi, 2 * hi
        if hi > 10**6:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= TARGET_POWER else (mid, hi)
    return hi


def _mean_difference(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    diff, ci, p = _welch(a, b, claim.null_value)
    sd = _pooled_sd(a, b)
    return dict(estimate=diff, ci=ci, p=p, power_at=lambda alpha: _two_sample_power(
        claim.published - claim.null_value, sd, a.size, b.size, alpha))


def _ratio(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError(f"{claim.quantity}: a ratio needs positive observations")
    la, lb = np.log(a), np.log(b)
    diff, (lo, hi), p = _welch(la, lb, math.log(claim.null_value))
    sd = _pooled_sd(la, lb)
    return dict(estimate=math.exp(diff), ci=(math.exp(lo), math.exp(hi)), p=p, power_at=lambda alpha: _two_sample_power(
        math.log(claim.published / claim.null_value), sd, a.size, b.size, alpha))


def _one_sample(claim: Claim, a: np.ndarray) -> dict:
    mean, sd, n = float(a.mean()), float(np.std(a, ddof=1)), a.size
    se = sd / math.sqrt(n)
    if se == 0:
        return dict(estimate=mean, ci=(mean, mean), p=1.0 if mean == claim.null_value else 0.0)
    half = _st.t.ppf(1 - ALPHA / 2, n - 1) * se
    p = float(2 * _st.t.sf(abs(mean - claim.null_value) / se, n - 1))
    d = abs(claim.published - claim.null_value) / sd

    def power_at(alpha):
        return (_t_power(TTestPower(), alpha, effect_size=d, nobs=n),
                _seeds_needed(lambda k: _t_power(TTestPower(), alpha, effect_size=d, nobs=k)))
    return dict(estimate=mean, ci=(mean - half, mean + half), p=p, power_at=power_at)


def _equivalence_power(delta: float, margin: float, sd: float, n_a: int, n_b: int, alpha: float = ALPHA) -> float:
    """Power of the TOST (two one-sided Welch tests at ``alpha`` each) when the true difference is ``delta``,
    with the SD taken as known: P(the 1 - 2·alpha interval lies inside ±margin), df n_a + n_b - 2."""
    se = sd * math.sqrt(1 / n_a + 1 / n_b)
    t = _st.t.ppf(1 - alpha, n_a + n_b - 2)
    df = n_a + n_b - 2
    return float(max(0.0, _st.t.cdf((margin - delta) / se - t, df) + _st.t.cdf((margin + delta) / se - t, df) - 1))


def _equivalence(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    """A published "no difference": the TOST against ±margin (its p the larger one-sided p), the Welch
    difference with its 95% CI, and the two-sided p of the difference in ``notes``."""
    diff, ci, p_difference = _welch(a, b, claim.null_value)
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    se = math.sqrt(va + vb)
    lo, hi = claim.null_value - claim.margin, claim.null_value + claim.margin
    if se == 0:
        p = 0.0 if lo < diff < hi else 1.0
    else:
        df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
        p = float(max(_st.t.sf((diff - lo) / se, df), _st.t.sf((hi - diff) / se, df)))
    sd = _pooled_sd(a, b)
    delta = claim.published - claim.null_value

    def power_at(alpha):
        if not sd > 0:
            return float("nan"), None
        return (_equivalence_power(delta, claim.margin, sd, a.size, b.size, alpha),
                _seeds_needed(lambda n: _equivalence_power(delta, claim.margin, sd, n, n, alpha)))
    return dict(estimate=diff, ci=ci, p=p, power_at=power_at, notes={"p_difference": p_difference})


def telescope_effect(claim: Claim, sd: float | None = None) -> float | None:
    """The effect the original design (``claim.published_n``) detects with 33% power, on the claim's side of
    the null: a variance ratio exactly (F); a difference or mean in units of ``sd`` (the SD the power uses)."""
    if claim.published_n is None or claim.measure == "equivalence":
        return None
    n_a, n_b = (claim.published_n, claim.published_n) if isinstance(claim.published_n, int) else claim.published_n
    if claim.measure == "variance_ratio":
        def gap(log_r):
            return variance_ratio_power(math.exp(claim.direction * log_r), n_a, n_b=n_b, alpha=ALPHA) - TELESCOPE_POWER
        return math.exp(claim.direction * _opt.brentq(gap, 1e-9, 50.0))
    if sd is None or not sd > 0:
        return None
    if claim.measure == "one_sample":
        d = TTestPower().solve_power(nobs=n_a, power=TELESCOPE_POWER, alpha=ALPHA)
    else:
        d = TTestIndPower().solve_power(nobs1=n_a, ratio=n_b / n_a, power=TELESCOPE_POWER, alpha=ALPHA)
    shift = claim.direction * float(np.asarray(d).item()) * sd
    return (math.exp(math.log(claim.null_value) + shift) if claim.measure == "ratio"
            else claim.null_value + shift)


def evaluate(claim: Claim, a=None, b=None) -> Assessment:
    """Test ``claim`` on the seed-level observations ``a`` (and ``b``, for two arms): each a mapping seed ->
    number. Fewer than two finite observations in an arm leave it unmeasured."""
    two = claim.measure in TWO_ARMS
    arms = [] if a is None else [_seed_level(a, "a")] + ([_seed_level(b, "b")] if two and b is not None else [])
    n = tuple(x.size for x in arms)
    if len(arms) != (2 if two else 1) or min(n) < 2:
        return Assessment(claim, n)
    numbers = {"variance_ratio": _variance_ratio, "mean_difference": _mean_difference, "ratio": _ratio,
               "one_sample": _one_sample, "equivalence": _equivalence}[claim.measure](claim, *arms)
    if not numbers:  # a constant arm: no ratio of variances
        return Assessment(claim, n, notes={"why": "an arm has zero variance"})
    sd = (float(np.std(arms[0], ddof=1)) if claim.measure == "one_sample" else
          _pooled_sd(*(np.log(x) for x in arms)) if claim.measure == "ratio" else
          _pooled_sd(*arms) if claim.measure in ("mean_difference", "equivalence") else None)
    power, needed = numbers["power_at"](ALPHA) if "power_at" in numbers else (float("nan"), None)
    return Assessment(claim, n, telescope=telescope_effect(claim, sd), power=power, seeds_needed=needed, **numbers)


# ------------------------------------------------------------------------------ the verdicts


def check(quantity: str, ours: str, paper: str = "", evidence: str = "[ours]") -> Assessment:
    """A row of our own that tests no published claim (a self-consistency check, a description, a number
    derived from another row): shown among the checks with its text, never counted as a reproduction."""
    return Assessment(Claim(quantity, "one_sample", None, evidence=evidence, kind="check", published_text=paper),
                      (), notes={"ours": ours}, verdict="check")


def _log_vr(a: np.ndarray, b: np.ndarray) -> tuple[float, float] | None:
    """log(Var(a)/Var(b)) and its normal-theory variance 2/(n_a - 1) + 2/(n_b - 1); None for a constant arm."""
    va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
    if va == 0 or vb == 0:
        return None
    return math.log(va / vb), 2 / (a.size - 1) + 2 / (b.size - 1)


def _z_power(effect: float, se: float, alpha: float) -> float:
    """Power of the two-sided z-test at level ``alpha`` when the true effect is ``effect`` and its SE ``se``."""
    z = _st.norm.ppf(1 - alpha / 2)
    return float(_st.norm.cdf(abs(effect) / se - z) + _st.norm.cdf(-abs(effect) / se - z))


def _contrast_power(effect: float, n_per_arm: int, others: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided z-test of a log-VR contrast at ``effect`` with n seeds in every arm."""
    v = 4 / (n_per_arm - 1)
    return _z_power(effect, math.sqrt(v + v / others), alpha)


def evaluate_contrast(claim: Claim, first: tuple, others: list[tuple]) -> Assessment:
    """Test a ``vr_contrast`` claim: ``first`` and each of ``others`` a pair of seed-level arms (mappings seed ->
    number), e.g. (clamp, subtract) on one dataset. The estimate is VR_first / geometric mean of the others'
    VRs; an arm with fewer than two seeds or no variance leaves its dataset out (all others out: unmeasured)."""
    if claim.measure != "vr_contrast":
        raise ValueError(f"measure={claim.measure!r}: evaluate_contrast takes a vr_contrast claim")
    def pair(arms):
        a, b = (_seed_level(x, name) for x, name in zip(arms, ("a", "b")))
        return (a, b) if min(a.size, b.size) >= 2 else None
    head = pair(first) if first is not None else None
    rest = [p for p in (pair(x) for x in others if x is not None) if p is not None]
    logs = [_log_vr(*head)] if head is not None else []
    rest_logs = [x for x in (_log_vr(*p) for p in rest) if x is not None]
    if not logs or logs[0] is None or not rest_logs:
        return Assessment(claim, tuple(x.size for x in head or ()), notes={"why": "no contrast: too few datasets"})
    (l0, v0), k = logs[0], len(rest_logs)
    c = l0 - sum(lv for lv, _ in rest_logs) / k
    se = math.sqrt(v0 + sum(v for _, v in rest_logs) / k ** 2)
    z = _st.norm.ppf(1 - ALPHA / 2)
    p = float(2 * _st.norm.sf(abs(c - math.log(claim.null_value)) / se))
    effect = math.log(claim.published / claim.null_value)
    n = min(min(x.size for x in head), *(min(a.size, b.size) for a, b in rest))

    def power_at(alpha):
        return (_z_power(effect, se, alpha),
                _seeds_needed(lambda m: _contrast_power(effect, m, k, alpha) if m > 1 else 0.0))
    power, needed = power_at(ALPHA)
    return Assessment(claim, (head[0].size, head[1].size), estimate=math.exp(c), ci=(math.exp(c - z * se),
                      math.exp(c + z * se)), p=p, power=power, seeds_needed=needed, power_at=power_at,
                      notes={"datasets": 1 + k, "seeds": n})


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family's p-values (statsmodels ``multipletests(method="holm")``)."""
    finite = [i for i, x in enumerate(p) if math.isfinite(x)]
    adjusted = [float("nan")] * len(p)
    if finite:
        for i, x in zip(finite, multipletests([p[i] for i in finite], method="holm")[1]):
            adjusted[i] = float(x)
    return adjusted


def verdict(assessment: Assessment, p_holm: float) -> str:
    """The verdict of an assessment whose Holm-adjusted p is ``p_holm`` (the rules of the module doc)."""
    claim = assessment.claim
    if claim.kind == "check" and "ours" in assessment.notes:
        return "check"
    if not assessment.measured:
        return "not measured"
    if claim.kind == "check":
        return "check"
    lo, hi = assessment.ci
    if claim.measure == "equivalence":  # a published "no difference"
        if p_holm < ALPHA:
            return "reproduced"  # the difference lies within ±margin
        if lo > claim.null_value + claim.margin or hi < claim.null_value - claim.margin:
            return "contradicted"  # the whole CI differs by more than matters
        return "not reproduced" if assessment.power >= TARGET_POWER else "inconclusive"
    side = np.sign(claim.scale(assessment.estimate) - claim.scale(claim.null_value))
    if p_holm < ALPHA:
        if side != claim.direction:
            return "contradicted"
        reaches = hi >= claim.published if claim.direction > 0 else lo <= claim.published
        return "reproduced" if reaches else "reproduced, smaller"
    excludes = claim.published < lo or claim.published > hi
    if assessment.power >= TARGET_POWER or excludes:
        return "not reproduced"
    return "inconclusive"


def decide(assessments: list[Assessment]) -> list[Assessment]:
    """Each assessment with its Holm-adjusted p (within its claim's family; checks are not tested as claims),
    its power and seeds needed at the family's level ALPHA / m (m: the family's measured claims), and its
    verdict, in the order given. Holm rejects a claim whenever its raw p is below ALPHA / m, so the power there
    is the least the claim has under the correction its p gets [ours]: a power at ALPHA would call a null
    informative that the corrected test could not have seen."""
    p_holm = [float("nan")] * len(assessments)
    decided = list(assessments)
    families: dict[str, list[int]] = {}
    for i, a in enumerate(assessments):
        if a.claim.kind == "claim" and a.measured:
            families.setdefault(a.claim.family, []).append(i)
    for members in families.values():
        for i, adjusted in zip(members, holm([assessments[i].p for i in members])):
            p_holm[i] = adjusted
            a = assessments[i]
            if len(members) > 1 and a.power_at is not None:
                power, needed = a.power_at(ALPHA / len(members))
                decided[i] = replace(a, power=power, seeds_needed=needed)
    return [replace(a, p_holm=ph, verdict=verdict(a, ph if math.isfinite(ph) else a.p))
            for a, ph in zip(decided, p_holm)]


# Each verdict's CSS class and colour: the report's badges and row marks, and the notebooks' verdict tables.
CLASSES = {"reproduced": "reproduced", "reproduced, smaller": "smaller", "contradicted": "contradicted",
           "not reproduced": "not-reproduced", "inconclusive": "inconclusive", "not measured": "not-measured",
           "check": "check"}
COLOURS = {"reproduced": "#1a7f37", "smaller": "#8bc34a", "contradicted": "#c62828", "not-reproduced": "#ef9a9a",
           "inconclusive": "#f2c744", "not-measured": "#d5d8dc", "check": "#dbe9f6"}


def css_class(verdict: str) -> str | None:
    """The CSS class of a verdict as a table shows it (:meth:`Assessment.verdict_text`); None for words outside
    the grammar."""
    text = verdict.strip()
    return CLASSES["inconclusive"] if text.startswith("inconclusive") else CLASSES.get(text)


SHOWN = ("quantity", "ours", "paper", "evidence", "n", "p", "p_holm", "power", "seeds_needed", "verdict")  # for readers


def table(assessments: list[Assessment]) -> pd.DataFrame:
    """The verdict table of decided assessments: claims first, then our checks, each a row (:meth:`Assessment.row`)."""
    ordered = [a for a in assessments if a.claim.kind == "claim"] + [a for a in assessments if a.claim.kind == "check"]
    return pd.DataFrame([a.row() for a in ordered])
