"""One verdict engine for every claim: seed-level observations in, what the evidence can decide out.

A :class:`Claim` is declared once per study: the paper's quantity, its published value and the null it is
tested against (the direction is the side of the null the published value lies on), the effect measure, the
evidence tag, the family of claims it is corrected with and, where the paper states one, the regime in which
the paper says it holds. :func:`evaluate` takes the observations of each arm keyed by seed (one number per
independent seed: :func:`by_seed` averages a seed's runs first) and returns an :class:`Assessment`: the
estimate, the raw p, the interval, the power at the published effect and the seeds per arm for 80% there.
:func:`decide` adjusts the p-values within each family (Holm), takes every interval, power and seeds-needed
at the level Holm gives each claim (α/m in a family of m) and gives the verdict, in one grammar for every study:

1. no data → *not measured*; a check of our own → *check*; a claim read on seeds that its registered version (another
   id, in a recorded plan) was planned on → *exploratory*: outside every family, it decides nothing
2. the run misses the paper's stated condition for the claim → *not in the paper's regime*
3. fewer than 3 seeds in an arm → *inconclusive*, whatever the p
4. p (Holm) < 0.05 on the published side: *reproduced* when the α/m interval reaches the published value,
   else *reproduced, smaller*; on the other side → *contradicted*
5. not significant, and the α/m interval wholly on the null's side of the published value → *not reproduced*
   (an interval wholly beyond it, in the claimed direction, is no evidence against the paper); for a variance
   ratio Brown–Forsythe must also reject the published ratio, as it must reject 1 for a rejection; in a two-look
   design only at look 2, so that it is one test across the looks
6. otherwise → *inconclusive (power P%)*, with the seeds per arm that would give 80%

Tests per measure (:data:`MEASURES`): ``variance_ratio`` the F-test with Brown–Forsythe beside it (structural
zeros removed; the larger p decides, named where they disagree), the F interval; ``mean_difference`` and
``ratio`` (on logs) Welch; ``one_sample`` the t-test; ``equivalence`` the TOST against ±margin; ``vr_contrast``
one log variance ratio against the mean of others, by its exact distribution (a weighted sum of log χ²,
convolved numerically: :func:`lib.core.stats.log_chi2_sum_reference`). Powers that rest on a spread use the
80% upper confidence limit of the SD (Browne 1995), so that two seeds that happen to agree cannot promise power.
``docs/verdicts.md`` explains every rule with a worked example and says why each choice is what it is.

The module runs past 400 lines because the grammar is one contract: the claim, the measures with their tests,
intervals and power, Holm's correction and the verdict rules live together, so that every study's table is
decided by the same code.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import integrate as _integrate
from scipy import optimize as _opt
from scipy import stats as _st
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestIndPower, TTestPower

from lib.core.sequential import Look
from lib.core.stats import (
    brown_forsythe_p,
    log_chi2_sum_reference,
    variance_ratio_p,
    variance_ratio_power,
    variance_ratio_rule_power,
)

RECORD_DIGITS = 12  # significant digits of the typed verdict record: every decision's precision, and none of the
# last bits in which float32 training on two CPUs (AVX2, AVX-512) may differ, so the record is the same on both
ALPHA = 0.05  # two-sided, the family's level: each claim's tests, intervals and power are at ALPHA / m
TARGET_POWER = 0.8  # "the design could have seen it"; also the seeds-needed target
TELESCOPE_POWER = 0.33  # Simonsohn's small telescope: the effect the original design saw with 33% power
MIN_SEEDS = 3  # fewer seeds in an arm decide nothing: two seeds give one degree of freedom per arm
SD_CONFIDENCE = 0.8  # the power's SD is the upper limit of its one-sided 80% interval (Browne 1995)
MEASURES = ("variance_ratio", "mean_difference", "paired_difference", "ratio", "one_sample", "equivalence",
            "vr_contrast")
TWO_ARMS = ("variance_ratio", "mean_difference", "paired_difference", "ratio", "equivalence")
RATIO_SCALE = ("variance_ratio", "ratio", "vr_contrast")  # compared on the log scale; null 1
KINDS = ("claim", "exploratory", "check")  # exploratory: a claim read on seeds its registered version was planned on
OUT_OF_REGIME = "not in the paper's regime"
VERDICTS = ("reproduced", "reproduced, smaller", "contradicted", "not reproduced", "inconclusive", "not measured",
            OUT_OF_REGIME, "exploratory", "check")
DECIDED = VERDICTS[:4]  # the verdicts that answer the paper's claim, one way or the other


@dataclass(frozen=True)
class Regime:
    """The condition under which the paper says a claim holds, as the paper states it for that claim.

    ``measured`` names the quantity a study measures on its own runs (e.g. "layer-0 CAR, clamp arm, final
    epoch (%)"); the condition holds when it is ``at_least`` ``bound`` (or at most, with ``at_least=False``).
    ``quote`` is the paper's words and ``evidence`` their tag; a claim without a stated condition has none."""

    measured: str
    bound: float
    quote: str
    evidence: str
    at_least: bool = True

    def holds(self, value: float) -> bool:
        return value >= self.bound if self.at_least else value <= self.bound

    def misses(self, value: float | None) -> bool:
        """True where ``value`` was measured and the condition does not hold (an unmeasured value misses nothing:
        the claim's row then says *not measured* or is read as it stands)."""
        return value is not None and math.isfinite(value) and not self.holds(value)

    def text(self, value: float) -> str:
        sign = ("≥" if self.holds(value) else "<") if self.at_least else ("≤" if self.holds(value) else ">")
        return f"{self.measured} {value:.3g} {sign} {self.bound:g}"

    def where(self) -> str:
        """The condition as the paper column shows it: the paper's words and their tag."""
        return f"{self.quote} {self.evidence}"


@dataclass(frozen=True)
class Conditions:
    """Every condition the paper states for one claim, each a :class:`Regime` read on its own measured value: the
    claim is in the paper's regime when each holds. A composite claim (a contrast of two datasets' or two levels'
    variance ratios) inherits the conditions of its parts, so ``parts`` may hold the same kind of condition twice,
    each ``measured`` naming the part it is read on. Its ``regime_value`` is a tuple, one value per part."""

    parts: tuple[Regime, ...]

    def misses(self, values) -> bool:
        return values is not None and any(part.misses(v) for part, v in zip(self.parts, values))

    def text(self, values) -> str:
        """The conditions missed, each with its measured value."""
        return "; ".join(part.text(v) for part, v in zip(self.parts, values) if part.misses(v))

    def where(self) -> str:
        return " and ".join(dict.fromkeys(part.where() for part in self.parts))  # a two-sided bound said once


@dataclass(frozen=True)
class Statement:
    """A paper's claim, declared once in its study's module (``STATEMENTS``): what the paper states, what we measure
    for it, and how it is tested. docs/claims.md is generated from the text (``python -m lib.studies.claims``); the
    verdict table's :class:`Claim` is made from the rest (:meth:`claim`), so that no study restates a measure, a
    published value, a tag or a condition where it builds its rows.

    Text: ``id`` is stable, ``s<study>.<name>``, and names the rows and the typed records of every Claim made from
    it (``Claim.id``: the id, then ``:`` and the part of a claim that repeats per method, dataset or batch size);
    ``paper`` the paper's statement as docs/studies.md gives it, with its ``evidence`` tag; ``ours`` the quantity we
    measure and how it maps onto the paper's (every stand-in named: dataset, scale, epoch); ``conditions`` every
    condition the paper states for it, either way, or why none applies; ``decided`` the statement that decides it
    where it is the same experiment as another study's (such a statement makes no Claim).

    Test: ``measure`` (one of :data:`MEASURES`), ``published`` (the paper's value in the measure's units, or one
    value per part where the statement repeats with its own number) and ``value_evidence`` (the published value's
    tag where it is not ``evidence``: a size of ours, a value derived), ``regime`` (the stated conditions, as
    measured: a :class:`Regime` or :class:`Conditions`), and the remaining :class:`Claim` fields it fixes."""

    id: str
    paper: str
    evidence: str
    ours: str
    conditions: str = "none stated"
    decided: str = ""
    measure: str = ""
    published: float | Mapping[str, float] | None = None
    value_evidence: str = ""
    family: str = ""
    kind: str = "claim"
    regime: Regime | Conditions | None = None
    null: float | None = None
    margin: float | None = None
    published_n: tuple[int, int] | int | None = None
    published_text: str = ""
    seeds_parameters: tuple[str, ...] = ("seeds",)

    def __post_init__(self):
        if not re.fullmatch(r"s[1-9][0-9]*\.[a-z0-9_]+", self.id):  # a seventh study's s7.* as well
            raise ValueError(f"id={self.id!r}: a statement id is s<study>.<name>, lower case, e.g. s2.fmnist_vr")
        if self.measure and self.measure not in MEASURES:
            raise ValueError(f"{self.id}: measure={self.measure!r} is not allowed: one of {', '.join(MEASURES)}")
        if self.decided and self.measure:
            raise ValueError(f"{self.id}: a statement decided as {self.decided!r} declares no measure of its own")

    def declared(self) -> set[str]:
        """The :class:`Claim` fields this statement fixes, which no row may give again: its measure, kind and
        family always, and each other field it sets (``evidence`` where it sets ``value_evidence``)."""
        fixed = {"measure", "kind", "family", "id"}
        optional = ("published", "null", "margin", "published_n", "regime")
        fixed |= {name for name in optional if getattr(self, name) is not None}
        fixed |= {"published_text"} if self.published_text else set()
        fixed |= {"evidence"} if self.value_evidence else set()
        return fixed

    def claim(self, quantity: str, part: str = "", **instance) -> Claim:
        """The :class:`Claim` a verdict row tests for this statement, or for its ``part`` (a method, set or batch
        size: the id's suffix, and the key of ``published`` where that is one value per part). ``instance`` holds
        what only the row knows: its ``cells``, and what the statement leaves open (a value derived from the sets
        at hand, a text naming the part); what the statement fixes (:meth:`declared`) cannot be given again."""
        if not self.measure:
            raise ValueError(f"{self.id} declares no measure: "
                             + (f"it is decided as {self.decided}" if self.decided else "it makes no verdict row"))
        twice = sorted(set(instance) & self.declared())
        if twice:
            raise ValueError(f"{self.id}: {', '.join(twice)} declared by the statement, not by the row")
        published = self.published
        if isinstance(published, Mapping):
            if part not in published:
                raise ValueError(f"{self.id}: part={part!r} has no published value: one of "
                                 f"{', '.join(map(str, published))}")
            published = published[part]
        fields = dict(published=published, evidence=self.value_evidence or self.evidence, family=self.family,
                      kind=self.kind, null=self.null, margin=self.margin, published_n=self.published_n,
                      regime=self.regime, published_text=self.published_text, seeds_parameters=self.seeds_parameters)
        fields.update(instance)
        return Claim(quantity, self.measure, id=self.id + (f":{part}" if part else ""), **fields)


def point_id(claim_id: str, point: str) -> str:
    """The id of a claim read at an operating point: ``s1.vr@car-matched``, ``s5.gain_probe:linear@small-batch``."""
    return f"{claim_id}@{point}"


def statement_id(claim_id: str) -> str:
    """The statement a claim id belongs to, without its part and point: ``s5.gain_probe:linear@small-batch`` ->
    ``s5.gain_probe``."""
    return claim_id.split("@", 1)[0].split(":", 1)[0]


def statement_of(statements: tuple[Statement, ...], statement_id: str) -> Statement:
    """The statement of ``statements`` with this id (a study's ``STATEMENTS``); an unknown id names the known."""
    for statement in statements:
        if statement.id == statement_id:
            return statement
    raise KeyError(f"{statement_id!r} is not declared: one of {', '.join(s.id for s in statements)}")


@dataclass(frozen=True)
class Claim:
    """A published claim, declared once: what is measured, the paper's value, the null and the family."""

    quantity: str  # what the verdict table calls it, e.g. "VR = Var(clamp) / Var(subtract)"
    measure: str  # one of MEASURES
    published: float | None  # the paper's value in the measure's units (None only for a check without one)
    evidence: str = "[paper]"  # where the published value comes from: [paper], [code], [summary], [ours: ...]
    family: str = ""  # claims whose p-values are Holm-corrected together
    null: float | None = None  # default: 1 for ratios, 0 otherwise
    kind: str = "claim"  # "check": ours (an identity, our reconstruction, our closed form), never a reproduction
    published_n: tuple[int, int] | int | None = None  # the original design's seeds (per arm), if known
    margin: float | None = None  # equivalence only: the difference that matters, ±margin [ours]
    published_text: str = ""  # the paper's value as the table shows it, when a number alone misleads
    seeds_parameters: tuple[str, ...] = ("seeds",)  # the notebook parameters that set the seeds of its arms
    regime: Regime | Conditions | None = None  # the condition(s) the paper states for the claim, every one of them
    cells: tuple[tuple[tuple[str, object], ...], ...] = ()  # the runs-frame cells its arms are read from,
    # each as (column, value) pairs: what lib.decide extends to give the claim more seeds
    id: str = ""  # its statement's id (Statement.id), with ":" and the part that repeats per method, set or batch,
    # and "@" and the operating point it is read at (:func:`point_id`): the key of plans, looks and lib.decide

    @property
    def key(self) -> str:
        """What plans, looks, lib.decide and the report know the row by: its id (a check of ours without a
        statement: its quantity)."""
        return self.id or self.quantity

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
    """A claim tested on seed-level observations; ``level``, ``verdict`` and ``p_holm`` are set by :func:`decide`,
    which also replaces ``ci``, ``power`` and ``seeds_needed`` by their values at the family's level."""

    claim: Claim
    n: tuple[int, ...]  # seeds per arm
    estimate: float = float("nan")
    ci: tuple[float, float] = (float("nan"), float("nan"))  # at the two-sided level ``level``
    p: float = float("nan")
    power: float = float("nan")  # at the published value, with this design, at ``level``
    seeds_needed: int | None = None  # per arm, for TARGET_POWER at the published value
    telescope: float | None = None  # the effect the original design detects with 33% power
    p_holm: float = float("nan")
    verdict: str = ""
    level: float = ALPHA  # the two-sided level of ``ci`` and ``power``: ALPHA / m in a family of m
    regime_value: float | tuple | None = None  # the measured value of ``claim.regime`` (a tuple for Conditions)
    effect_sd: float = float("nan")  # the published effect in units of the SD the power uses (t-based measures)
    notes: dict = field(default_factory=dict)
    # (power, seeds_needed) and the interval at a given two-sided level: decide() asks them at ALPHA / m
    power_at: Callable[[float], tuple[float, int | None]] | None = field(default=None, compare=False, repr=False)
    interval_at: Callable[[float], tuple[float, float]] | None = field(default=None, compare=False, repr=False)

    @property
    def measured(self) -> bool:
        return math.isfinite(self.estimate)

    @property
    def in_regime(self) -> bool:
        """False only where the claim states a condition and a measured value misses it."""
        return self.claim.regime is None or not self.claim.regime.misses(self.regime_value)

    def verdict_text(self) -> str:
        """The verdict as a table shows it, with what decided it where that is not the verdict alone."""
        if self.verdict == OUT_OF_REGIME:
            return f"{OUT_OF_REGIME} ({self.claim.regime.text(self.regime_value)})"
        if self.verdict == "exploratory" and "exploratory" in self.notes:
            return f"exploratory ({self.notes['exploratory']})"
        reasons = []
        if self.verdict == "inconclusive":
            if self.n and min(self.n) < MIN_SEEDS:
                reasons.append(f"{min(self.n)} seeds in an arm: fewer than {MIN_SEEDS} decide nothing")
            if "look" in self.notes:  # a two-look design: its power and seeds were planned, the look says them
                reasons.append(f"planned power {self.power:.0%}")
            elif math.isfinite(self.power):
                floor = (f" at an SD of at least {self.notes['sd_floor']:.3g}, the study's pooled spread"
                         if "sd_floor" in self.notes else "")
                reasons.append(f"power {self.power:.0%}{floor}" + (f"; {self.seeds_needed} seeds per arm for 80%"
                                                                   if self.seeds_needed else ""))
        if self.verdict == "inconclusive" and "undecided" in self.notes:
            reasons.insert(0, self.notes["undecided"])
        if "decided_by" in self.notes:
            reasons.append(self.notes["decided_by"])
        if "look" in self.notes:
            reasons.append(self.notes["look"])
        return f"{self.verdict} ({'; '.join(reasons)})" if reasons else self.verdict

    def record(self) -> dict:
        """The typed verdict record of this row, for every reader that decides something (lib.decide, the report's
        counts): the claim's declaration and the numbers at :data:`RECORD_DIGITS` significant digits, the verdict as
        a word of the grammar (:data:`VERDICTS`) apart from its reasons, each condition with its measured value.
        Nothing reads the table's rounded text back."""
        claim = self.claim

        def number(x):
            return None if x is None or not math.isfinite(float(x)) else float(f"{float(x):.{RECORD_DIGITS}g}")
        regime = claim.regime
        parts = () if regime is None else regime.parts if isinstance(regime, Conditions) else (regime,)
        values = (self.regime_value if isinstance(regime, Conditions) else (self.regime_value,)) or ()
        measured = self.measured and claim.kind == "claim"
        return {"id": claim.key, "quantity": claim.quantity,
                "kind": claim.kind, "measure": claim.measure,
                "family": claim.family, "evidence": claim.evidence, "published": number(claim.published),
                "null": number(claim.null_value) if claim.published is not None else None,
                "margin": number(claim.margin), "n": list(self.n), "estimate": number(self.estimate),
                "ci": [number(x) for x in self.ci] if measured else None, "level": number(self.level),
                "p": number(self.p), "p_holm": number(self.p_holm), "power": number(self.power),
                "seeds_needed": self.seeds_needed, "effect_sd": number(self.effect_sd),
                "verdict": self.verdict, "verdict_text": self.verdict_text(),
                "conditions": [{"measured": part.measured, "bound": part.bound, "at_least": part.at_least,
                                "value": number(value) if value is not None else None,
                                "holds": None if value is None or not math.isfinite(value) else bool(part.holds(value))}
                               for part, value in zip(parts, values)],
                "cells": [dict(cell) for cell in claim.cells], "seeds_parameters": list(claim.seeds_parameters)}

    def row(self, digits: int = 3) -> dict:
        """The verdict-table row: ours with its interval and the interval's level, the paper's, p (raw and Holm),
        power, seeds needed, and the row's ``kind`` (claim or check). A check's text (``notes["ours"]``) stands
        for its number. For lib.decide: the claim's measure, level, effect in SDs, cells and ``published`` value as
        a number (``paper`` is its text)."""
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
        if claim.regime is not None:
            paper += f"; holds where {claim.regime.where()}"
        if claim.kind == "check":  # a check tests no published claim: no p, power or seeds to show
            return {"quantity": claim.quantity, "ours": ours, "ci_level": "–", "paper": paper,
                    "evidence": claim.evidence, "n": " vs ".join(map(str, self.n)) or "–", "p": "–", "p_holm": "–",
                    "power": "–", "seeds_needed": "–", "verdict": "check", "kind": "check", "seeds_parameters": "",
                    "measure": "–", "level": "–", "effect_sd": "–", "cells": "", "published": "–", "id": claim.key,
                    "record": json.dumps(self.record(), ensure_ascii=False)}
        return {"quantity": claim.quantity, "ours": ours,
                "ci_level": f"{100 * (1 - self.level):.3g}%" if self.measured else "–", "paper": paper,
                "evidence": claim.evidence, "n": " vs ".join(map(str, self.n)) or "–",
                "p": g(self.p), "p_holm": g(self.p_holm), "power": "–" if not math.isfinite(self.power)
                else f"{self.power:.0%}", "seeds_needed": "–" if self.seeds_needed is None else str(self.seeds_needed),
                "verdict": self.verdict_text(), "kind": claim.kind,
                "seeds_parameters": ",".join(claim.seeds_parameters), "measure": claim.measure,
                "level": f"{self.level:.6g}" if self.measured else "–",
                "effect_sd": g(self.effect_sd), "cells": json.dumps([dict(cell) for cell in claim.cells]),
                "published": "–" if claim.published is None else f"{claim.published:.6g}", "id": claim.key,
                "record": json.dumps(self.record(), ensure_ascii=False)}


# ------------------------------------------------------------------------------ the unit: one number per seed


def cell(**columns) -> tuple[tuple[str, object], ...]:
    """A cell of a study's runs frame, as a claim names the runs of one of its arms: ``cell(method="simclr")``."""
    return tuple(sorted(columns.items()))


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


def sd_upper(sd: float, df: int) -> float:
    """The upper limit of the one-sided SD_CONFIDENCE interval of a population SD estimated as ``sd`` on ``df``
    degrees of freedom: sd·sqrt(df / χ²_{1-SD_CONFIDENCE}(df)). Powers and seeds-needed use it (Browne 1995:
    a pilot's SD used as it is gives the planned power only half the time, its 80% upper limit 80% of the time);
    with 2 seeds per arm (df 2) it is 2.1 times the SD, with 5 (df 8) 1.3 times."""
    return sd * math.sqrt(df / _st.chi2.ppf(1 - SD_CONFIDENCE, df))


def _variance_ratio(claim: Claim, a: np.ndarray, b: np.ndarray, sd_floor: float = 0.0) -> dict:
    """The F-test with Brown–Forsythe's test beside it (its structural zeros removed,
    :func:`lib.core.stats.brown_forsythe_p`): the claim's p is the larger of the two, so that a ratio is called
    different from 1 only when the test that does not assume normal data agrees."""
    d1, d2 = a.size - 1, b.size - 1
    va, vb = np.var(a, ddof=1), np.var(b, ddof=1)
    if vb == 0 or va == 0:
        return {}
    r = float(va / vb)
    p_f = variance_ratio_p(r, a.size, b.size)
    p_bf = float(brown_forsythe_p(a[None, :], b[None, :])[0])

    def interval_at(alpha):
        return r / _st.f.ppf(1 - alpha / 2, d1, d2), r / _st.f.ppf(alpha / 2, d1, d2)

    def power_at(alpha):  # of the rule applied: both tests reject (simulated; the F-test's alone is above it)
        return (variance_ratio_rule_power(claim.published, a.size, b.size, alpha),
                _seeds_needed(lambda n: variance_ratio_rule_power(claim.published, n, n, alpha), start=3))
    p = max(p_f, p_bf) if math.isfinite(p_bf) else p_f  # two seeds leave Brown–Forsythe one deviation an arm
    # *not reproduced* takes the same two tests against the published ratio: the F interval, and Brown–Forsythe on
    # the arms rescaled so that the published ratio is their null (a / sqrt(R) against b)
    p_bf_published = float(brown_forsythe_p(a[None, :] / math.sqrt(claim.published), b[None, :])[0])
    return dict(estimate=r, p=p, interval_at=interval_at, power_at=power_at,
                notes={"p_f": p_f, "p_brown_forsythe": p_bf, "p_brown_forsythe_published": p_bf_published})


def _welch(a: np.ndarray, b: np.ndarray, null: float) -> tuple[float, Callable, float]:
    """Welch's difference of means, its interval at a given level and the two-sided p against ``null``."""
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    se = math.sqrt(va + vb)
    diff = float(a.mean() - b.mean())
    if se == 0:
        return diff, lambda alpha: (diff, diff), (1.0 if diff == null else 0.0)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))

    def interval_at(alpha):
        half = _st.t.ppf(1 - alpha / 2, df) * se
        return diff - half, diff + half
    return diff, interval_at, float(2 * _st.t.sf(abs(diff - null) / se, df))


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
    """statsmodels' power of a t-test at the two-sided level ``alpha``. Where it returns NaN (scipy's noncentral t
    fails at a large noncentrality and few degrees of freedom: d = 6.4 at 3 vs 3 seeds, where the power is 0.99,
    not 1), the power is :func:`noncentral_t_power`'s, from the test's own noncentrality and df."""
    power = float(solver.power(alpha=alpha, **kwargs))
    if not math.isnan(power):
        return power
    d = kwargs["effect_size"]
    if "nobs1" in kwargs:  # two samples
        n_a, n_b = kwargs["nobs1"], kwargs["nobs1"] * kwargs.get("ratio", 1.0)
        return noncentral_t_power(d * math.sqrt(n_a * n_b / (n_a + n_b)), n_a + n_b - 2, alpha)
    return noncentral_t_power(d * math.sqrt(kwargs["nobs"]), kwargs["nobs"] - 1, alpha)


def noncentral_t_power(noncentrality: float, df: float, alpha: float) -> float:
    """P(|T| > t_{1-α/2}(df)) for T = (Z + δ) / sqrt(V / df), V ~ χ²(df): the normal tails averaged over V.

    The average is taken over V's quantiles, u in (0, 1) with V = F⁻¹(u), so the integrand is bounded and smooth at
    any df: integrated over V itself, χ²(df)'s density is a spike far from 0 at thousands of df, which quadrature
    misses (it returned a power of 0 at 1,500 seeds per arm)."""
    crit = _st.t.ppf(1 - alpha / 2, df)

    def integrand(u):
        s = crit * math.sqrt(_st.chi2.ppf(u, df) / df)
        return _st.norm.sf(s - noncentrality) + _st.norm.cdf(-s - noncentrality)
    return float(min(1.0, _integrate.quad(integrand, 0, 1, epsabs=1e-12, limit=200)[0]))


def _seeds_needed(power_at, start: int = 2) -> int | None:
    """The smallest n >= ``start`` with ``power_at(n)`` >= TARGET_POWER (power grows with n), None beyond 10^6."""
    if power_at(start) >= TARGET_POWER:
        return start
    lo, hi = start, 2 * start
    while power_at(hi) < TARGET_POWER:
        lo, hi = hi, 2 * hi
        if hi > 10**6:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power_at(mid) >= TARGET_POWER else (mid, hi)
    return hi


def _mean_difference(claim: Claim, a: np.ndarray, b: np.ndarray, sd_floor: float = 0.0) -> dict:
    diff, interval_at, p = _welch(a, b, claim.null_value)
    sd = max(sd_upper(_pooled_sd(a, b), a.size + b.size - 2), sd_floor)
    effect = claim.published - claim.null_value
    return dict(estimate=diff, p=p, interval_at=interval_at, effect_sd=abs(effect) / sd if sd > 0 else float("nan"),
                power_at=lambda alpha: _two_sample_power(effect, sd, a.size, b.size, alpha))


def _ratio(claim: Claim, a: np.ndarray, b: np.ndarray, sd_floor: float = 0.0) -> dict:
    if (a <= 0).any() or (b <= 0).any():
        raise ValueError(f"{claim.quantity}: a ratio needs positive observations")
    la, lb = np.log(a), np.log(b)
    diff, log_interval_at, p = _welch(la, lb, math.log(claim.null_value))
    sd = max(sd_upper(_pooled_sd(la, lb), a.size + b.size - 2), sd_floor)

    def interval_at(alpha):
        lo, hi = log_interval_at(alpha)
        return math.exp(lo), math.exp(hi)
    effect = math.log(claim.published / claim.null_value)
    return dict(estimate=math.exp(diff), p=p, interval_at=interval_at,
                effect_sd=abs(effect) / sd if sd > 0 else float("nan"),
                power_at=lambda alpha: _two_sample_power(effect, sd, a.size, b.size, alpha))


def _one_sample(claim: Claim, a: np.ndarray, sd_floor: float = 0.0) -> dict:
    mean, sd, n = float(a.mean()), float(np.std(a, ddof=1)), a.size
    se = sd / math.sqrt(n)
    if se == 0:
        return dict(estimate=mean, interval_at=lambda alpha: (mean, mean),
                    p=1.0 if mean == claim.null_value else 0.0)
    p = float(2 * _st.t.sf(abs(mean - claim.null_value) / se, n - 1))
    d = abs(claim.published - claim.null_value) / max(sd_upper(sd, n - 1), sd_floor)

    def interval_at(alpha):
        half = _st.t.ppf(1 - alpha / 2, n - 1) * se
        return mean - half, mean + half

    def power_at(alpha):
        return (_t_power(TTestPower(), alpha, effect_size=d, nobs=n),
                _seeds_needed(lambda k: _t_power(TTestPower(), alpha, effect_size=d, nobs=k)))
    return dict(estimate=mean, p=p, interval_at=interval_at, power_at=power_at, effect_sd=d)


def _pairs(a, b) -> tuple[dict, dict]:
    """The two arms on the seeds both have a finite value for, in the same seed order."""
    a = a.to_dict() if isinstance(a, pd.Series) else a
    b = b.to_dict() if isinstance(b, pd.Series) else b
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
        raise TypeError("a paired difference needs each arm as a mapping seed -> number: pairs are matched by seed")
    common = sorted(k for k in set(a) & set(b) if math.isfinite(a[k]) and math.isfinite(b[k]))
    return {k: a[k] for k in common}, {k: b[k] for k in common}


def _paired_difference(claim: Claim, a: np.ndarray, b: np.ndarray, sd_floor: float = 0.0) -> dict:
    """Arms that share their seeds (the same initialisation and data order, one arm changed): the one-sample t
    on the per-seed differences a - b, against the null; its power with the differences' SD."""
    shifted = replace(claim, measure="one_sample")
    return _one_sample(shifted, a - b, sd_floor)


def _equivalence_power(delta: float, margin: float, sd: float, n_a: int, n_b: int, alpha: float = ALPHA) -> float:
    """Power of the TOST (two one-sided Welch tests at ``alpha`` each) when the true difference is ``delta``,
    with the SD taken as known: P(the 1 - 2·alpha interval lies inside ±margin), df n_a + n_b - 2."""
    se = sd * math.sqrt(1 / n_a + 1 / n_b)
    t = _st.t.ppf(1 - alpha, n_a + n_b - 2)
    df = n_a + n_b - 2
    return float(max(0.0, _st.t.cdf((margin - delta) / se - t, df) + _st.t.cdf((margin + delta) / se - t, df) - 1))


def _equivalence(claim: Claim, a: np.ndarray, b: np.ndarray, sd_floor: float = 0.0) -> dict:
    """A published "no difference": the TOST against ±margin (its p the larger one-sided p), the Welch
    difference with its interval, and the two-sided p of the difference in ``notes``."""
    diff, interval_at, p_difference = _welch(a, b, claim.null_value)
    va, vb = np.var(a, ddof=1) / a.size, np.var(b, ddof=1) / b.size
    se = math.sqrt(va + vb)
    lo, hi = claim.null_value - claim.margin, claim.null_value + claim.margin
    if se == 0:
        p = 0.0 if lo < diff < hi else 1.0
    else:
        df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
        p = float(max(_st.t.sf((diff - lo) / se, df), _st.t.sf((hi - diff) / se, df)))
    sd = max(sd_upper(_pooled_sd(a, b), a.size + b.size - 2), sd_floor)
    delta = claim.published - claim.null_value

    def power_at(alpha):
        if not sd > 0:
            return float("nan"), None
        return (_equivalence_power(delta, claim.margin, sd, a.size, b.size, alpha),
                _seeds_needed(lambda n: _equivalence_power(delta, claim.margin, sd, n, n, alpha)))
    return dict(estimate=diff, p=p, interval_at=interval_at, power_at=power_at,
                notes={"p_difference": p_difference})


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
    if claim.measure in ("one_sample", "paired_difference"):
        d = TTestPower().solve_power(nobs=n_a, power=TELESCOPE_POWER, alpha=ALPHA)
    else:
        d = TTestIndPower().solve_power(nobs1=n_a, ratio=n_b / n_a, power=TELESCOPE_POWER, alpha=ALPHA)
    shift = claim.direction * float(np.asarray(d).item()) * sd
    return (math.exp(math.log(claim.null_value) + shift) if claim.measure == "ratio"
            else claim.null_value + shift)


def evaluate(claim: Claim, a=None, b=None, *, regime_value: float | tuple | None = None,
             sd_floor: float | None = None) -> Assessment:
    """Test ``claim`` on the seed-level observations ``a`` (and ``b``, for two arms): each a mapping seed ->
    number. Fewer than two finite observations in an arm leave it unmeasured. ``regime_value``: the study's
    measured value of the claim's stated regime (``claim.regime``), where it has one. ``sd_floor``: a spread the
    power's SD may not fall below (in the measure's units, the log for a ratio), such as the SD pooled across the
    study's cells where a claim's own arms have two seeds that happen to agree; the row says so."""
    two = claim.measure in TWO_ARMS
    if claim.measure == "paired_difference" and a is not None and b is not None:
        a, b = _pairs(a, b)
    arms = [] if a is None else [_seed_level(a, "a")] + ([_seed_level(b, "b")] if two and b is not None else [])
    n = tuple(x.size for x in arms)
    if len(arms) != (2 if two else 1) or min(n) < 2:
        return Assessment(claim, n, regime_value=regime_value)
    numbers = {"variance_ratio": _variance_ratio, "mean_difference": _mean_difference, "ratio": _ratio,
               "paired_difference": _paired_difference,
               "one_sample": _one_sample, "equivalence": _equivalence}[claim.measure](claim, *arms,
                                                                                   sd_floor=sd_floor or 0.0)
    if not numbers:  # a constant arm: no ratio of variances
        return Assessment(claim, n, notes={"why": "an arm has zero variance"}, regime_value=regime_value)
    sd = (float(np.std(arms[0], ddof=1)) if claim.measure == "one_sample" else
          float(np.std(arms[0] - arms[1], ddof=1)) if claim.measure == "paired_difference" else
          _pooled_sd(*(np.log(x) for x in arms)) if claim.measure == "ratio" else
          _pooled_sd(*arms) if claim.measure in ("mean_difference", "equivalence") else None)
    power, needed = numbers["power_at"](ALPHA) if "power_at" in numbers else (float("nan"), None)
    if sd_floor:
        numbers["notes"] = {**numbers.get("notes", {}), "sd_floor": sd_floor}
    return Assessment(claim, n, ci=numbers["interval_at"](ALPHA), telescope=telescope_effect(claim, sd),
                      power=power, seeds_needed=needed, regime_value=regime_value, **numbers)


def check(quantity: str, ours: str, paper: str = "", evidence: str = "[ours]", claim_id: str = "") -> Assessment:
    """A row of our own that tests no published claim (a self-consistency check, a description, a number
    derived from another row): shown among the checks with its text, never counted as a reproduction. ``claim_id``:
    a statement's id where the row shows a claim another study decides (its key; a check's key is else its quantity)."""
    return Assessment(Claim(quantity, "one_sample", None, evidence=evidence, kind="check", published_text=paper,
                            id=claim_id), (), notes={"ours": ours}, verdict="check")


# ------------------------------------------------------------------------------ one variance ratio against others


def _contrast_terms(sizes: list[tuple[int, int]]) -> tuple[tuple[float, int], ...]:
    """The (weight, df) terms of C = log VR_0 - mean_k log VR_k over arms of ``sizes`` [(n_a, n_b), ...], the first
    pair VR_0's: C's estimate minus its true value is the weighted sum of log(χ²_ν/ν) with these terms."""
    (n_a, n_b), rest = sizes[0], sizes[1:]
    k = len(rest)
    terms = [(1.0, n_a - 1), (-1.0, n_b - 1)]
    for m_a, m_b in rest:
        terms += [(-1.0 / k, m_a - 1), (1.0 / k, m_b - 1)]
    return tuple(terms)


def contrast_power(effect: float, sizes: list[tuple[int, int]], alpha: float = ALPHA) -> float:
    """The exact power of the two-sided test of a log-VR contrast at level ``alpha`` when its true value is
    ``effect`` (on the log scale, from the null), normal data in arms of ``sizes``."""
    reference = log_chi2_sum_reference(_contrast_terms(sizes))
    lo, hi = reference.quantile([alpha / 2, 1 - alpha / 2])
    return float(reference.cdf_at(lo - effect) + 1 - reference.cdf_at(hi - effect))


def evaluate_contrast(claim: Claim, first: tuple, others: list[tuple], *, regime_value: float | tuple | None = None
                      ) -> Assessment:
    """Test a ``vr_contrast`` claim: ``first`` and each of ``others`` a pair of seed-level arms (mappings seed ->
    number), e.g. (clamp, subtract) on one dataset. The estimate is VR_first / geometric mean of the others' VRs,
    C = log VR_0 - mean_k log VR_k on the log scale. Its test and interval use C's exact distribution under normal
    data (a weighted sum of log χ², convolved numerically once per design), not the large-sample variance 2/(n_a - 1) +
    2/(n_b - 1) per ratio, which at 5 seeds makes the test reject 8% of true nulls. An arm with fewer than two
    seeds or no variance leaves its dataset out (all others out: unmeasured)."""
    if claim.measure != "vr_contrast":
        raise ValueError(f"measure={claim.measure!r}: evaluate_contrast takes a vr_contrast claim")

    def pair(arms):
        a, b = (_seed_level(x, name) for x, name in zip(arms, ("a", "b")))
        return (a, b) if min(a.size, b.size) >= 2 and np.var(a) > 0 and np.var(b) > 0 else None
    head = pair(first) if first is not None else None
    rest = [p for p in (pair(x) for x in others if x is not None) if p is not None]
    if head is None or not rest:
        sizes = () if first is None else tuple(_seed_level(x, "a").size for x in first)
        return Assessment(claim, sizes, notes={"why": "no contrast: too few datasets"}, regime_value=regime_value)

    def log_vr(a, b):
        return math.log(np.var(a, ddof=1) / np.var(b, ddof=1))
    c = log_vr(*head) - sum(log_vr(*p) for p in rest) / len(rest)
    sizes = [(head[0].size, head[1].size)] + [(a.size, b.size) for a, b in rest]
    reference = log_chi2_sum_reference(_contrast_terms(sizes))
    p = float(reference.two_sided_p(c - math.log(claim.null_value)))
    effect = math.log(claim.published / claim.null_value)

    def interval_at(alpha):
        lo, hi = reference.quantile([alpha / 2, 1 - alpha / 2])
        return math.exp(c - hi), math.exp(c - lo)

    def power_at(alpha):
        return (contrast_power(effect, sizes, alpha),
                _seeds_needed(lambda m: contrast_power(effect, [(m, m)] * len(sizes), alpha)))
    power, needed = power_at(ALPHA)
    return Assessment(claim, sizes[0], estimate=math.exp(c), ci=interval_at(ALPHA), p=p, power=power,
                      seeds_needed=needed, power_at=power_at, interval_at=interval_at, regime_value=regime_value,
                      notes={"datasets": len(sizes), "seeds": min(min(s) for s in sizes)})


# ------------------------------------------------------------------------------ the verdicts


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family's p-values (statsmodels ``multipletests(method="holm")``)."""
    finite = [i for i, x in enumerate(p) if math.isfinite(x)]
    adjusted = [float("nan")] * len(p)
    if finite:
        for i, x in zip(finite, multipletests([p[i] for i in finite], method="holm")[1]):
            adjusted[i] = float(x)
    return adjusted


def _fewest_seeds(assessment: Assessment) -> int:
    return assessment.notes.get("seeds", min(assessment.n) if assessment.n else 0)


def verdict(assessment: Assessment, rejects: bool) -> str:
    """The verdict of an assessment whose test ``rejects`` the null or not (Holm's adjusted p below ALPHA; at a
    planned look 2, p below the look's boundary) and whose interval is at the level its test is decided at
    (the rules of the module doc)."""
    claim = assessment.claim
    if claim.kind == "check" and "ours" in assessment.notes:
        return "check"
    if not assessment.measured:
        return "not measured"
    if claim.kind == "check":
        return "check"
    if claim.kind == "exploratory":  # outside every family: it decides nothing until a plan of its own
        return "exploratory"
    if not assessment.in_regime:
        return OUT_OF_REGIME
    if "undecided" in assessment.notes:  # the study says why no reading at one setting decides it (e.g. its epoch)
        return "inconclusive"
    if _fewest_seeds(assessment) < MIN_SEEDS:
        return "inconclusive"
    lo, hi = assessment.ci
    if claim.measure == "equivalence":  # a published "no difference"
        if rejects:
            return "reproduced"  # the difference lies within ±margin
        if lo > claim.null_value + claim.margin or hi < claim.null_value - claim.margin:
            return "contradicted"  # the whole interval differs by more than matters
        return "inconclusive"
    side = np.sign(claim.scale(assessment.estimate) - claim.scale(claim.null_value))
    if rejects:
        if side != claim.direction:
            return "contradicted"
        reaches = hi >= claim.published if claim.direction > 0 else lo <= claim.published
        return "reproduced" if reaches else "reproduced, smaller"
    short = hi < claim.published if claim.direction > 0 else lo > claim.published  # wholly on the null's side
    if short and claim.measure == "variance_ratio":  # the robust rule, as for a rejection: both tests exclude it
        short = assessment.notes.get("p_brown_forsythe_published", 1.0) < assessment.level
    return "not reproduced" if short else "inconclusive"


def _decided_by(assessment: Assessment) -> dict:
    """Where the F-test and Brown–Forsythe disagree at the claim's level, the note that names the test that
    decided (the larger p's)."""
    if "p_f" not in assessment.notes:
        return {}
    p_f, p_bf = assessment.notes["p_f"], assessment.notes["p_brown_forsythe"]
    if (p_f < assessment.level) == (p_bf < assessment.level):
        return {}
    names = ("Brown–Forsythe", p_bf, "F-test", p_f) if p_bf > p_f else ("F-test", p_f, "Brown–Forsythe", p_bf)
    return {"decided_by": f"decided by {names[0]}, p {names[1]:.2g}; {names[2]} p {names[3]:.2g}"}


def decide(assessments: list[Assessment], looks: Mapping[str, Look] | None = None) -> list[Assessment]:
    """Each assessment with its Holm-adjusted p (within its claim's family; checks are not tested as claims),
    its interval, power and seeds needed at the family's level ALPHA / m (m: the family's measured claims), and
    its verdict, in the order given. Holm rejects a claim whenever its raw p is below ALPHA / m, so an interval
    at that level is the one whose exclusion of a value the family's error rate covers, and the power there the
    least the claim has under the correction its p actually gets.

    ``looks``: the claims (by :attr:`Claim.key`, the id) of a two-look design (lib.decide) and the look they are read
    at: each is decided by its raw p against that look's boundary, its interval at that nominal level, its power the
    design's planned two-look power, and its verdict names the boundary."""
    looks = looks or {}
    p_holm = [float("nan")] * len(assessments)
    decided = list(assessments)
    families: dict[str, list[int]] = {}
    for i, a in enumerate(assessments):
        if a.claim.kind == "claim" and a.measured:
            families.setdefault(a.claim.family, []).append(i)
    for members in families.values():
        level = ALPHA / len(members)
        for i, adjusted in zip(members, holm([assessments[i].p for i in members])):
            look = looks.get(assessments[i].claim.key)
            here = level if look is None else look.level
            a = replace(assessments[i], level=here)
            if a.interval_at is not None:
                a = replace(a, ci=a.interval_at(here))
            if a.power_at is not None:
                power, needed = a.power_at(here)
                a = replace(a, power=power, seeds_needed=needed)
            if look is None:
                p_holm[i] = adjusted
            else:
                a = replace(a, power=look.design.planned_power, seeds_needed=look.design.n2,
                            notes={**a.notes, "look": look.text()})
            decided[i] = replace(a, notes={**a.notes, **_decided_by(a)})
    out = [replace(a, p_holm=ph, verdict=verdict(a, ph < ALPHA if math.isfinite(ph) else
                                                 a.p < (a.level if a.claim.key in looks else ALPHA)))
           for a, ph in zip(decided, p_holm)]
    # *not reproduced* is read at a design's last look only: at look 1 of a planned claim it decides nothing yet, so
    # that across the looks it is one test at its level (a look-1 *not reproduced* and a look-2 one would be two)
    return [replace(a, verdict="inconclusive") if a.verdict == "not reproduced" and a.claim.key in looks
            and looks[a.claim.key].number == 1 else a for a in out]


# Each verdict's CSS class and colour: the report's badges and row marks, and the notebooks' verdict tables, looked up
# by the typed record's verdict word (never parsed back from a verdict's text).
CLASSES = {"reproduced": "reproduced", "reproduced, smaller": "smaller", "contradicted": "contradicted",
           "not reproduced": "not-reproduced", "inconclusive": "inconclusive", "not measured": "not-measured",
           OUT_OF_REGIME: "out-of-regime", "exploratory": "exploratory", "check": "check"}
COLOURS = {"reproduced": "#1a7f37", "smaller": "#8bc34a", "contradicted": "#c62828", "not-reproduced": "#ef9a9a",
           "inconclusive": "#f2c744", "not-measured": "#d5d8dc", "out-of-regime": "#b39ddb", "exploratory": "#ffffff",
           "check": "#dbe9f6"}


SHOWN = ("quantity", "ours", "ci_level", "paper", "evidence", "n", "p", "p_holm", "power", "seeds_needed",
         "verdict")  # for readers


def table(assessments: list[Assessment]) -> pd.DataFrame:
    """The verdict table of decided assessments: claims first, then our checks, each a row (:meth:`Assessment.row`)."""
    ordered = [a for kind in KINDS for a in assessments if a.claim.kind == kind]
    keys = [a.claim.key for a in ordered]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:  # every reader joins on the key: two rows under one would be read as one
        raise ValueError(f"two rows of one verdict table share the id {', '.join(map(repr, twice))}")
    return pd.DataFrame([a.row() for a in ordered])
