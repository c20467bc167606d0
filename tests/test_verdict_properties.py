"""The verdict engine (lib.core.verdicts) pinned by its properties over random designs (hypothesis): arms of unequal
sizes, several families, ratios near 1, every measure. Each property is what the engine's definitions imply, so a bug
of the kinds issue 37 listed (unequal arms, families, ratios near 1, the equivalence margin) breaks one of them:

- the interval at a claim's level excludes the null exactly when the claim's test rejects there;
- swapping the arms inverts a ratio's interval and flips a difference's;
- a ratio's direction is read on its own (log) scale, for any published value;
- the equivalence test rejects exactly when the 1 - 2α interval lies inside ±margin;
- each claim is decided at its own family's level α / m, and its power and seeds needed at that level grow the
  right way: more power with more seeds or a larger α, fewer seeds needed with a larger α.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from lib.core.verdicts import ALPHA, Claim, _two_sample_power, decide, evaluate

# derandomize: every machine and every CI run draws the same examples, so a red CI names a bug, not a draw. A case
# a random draw once found is kept as an @example, whatever the seed.
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def arms(draw, paired: bool = False):
    """Two arms of seed-level observations, of sizes 3 to 12 (unequal unless paired), spreads and a shift apart."""
    n_a = draw(st.integers(3, 12))
    n_b = n_a if paired else draw(st.integers(3, 12))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    spread = draw(st.floats(0.2, 5.0))
    shift = draw(st.floats(-3.0, 3.0))
    a = 10.0 + shift + rng.normal(size=n_a) * spread
    b = 10.0 + rng.normal(size=n_b)
    return dict(enumerate(a.tolist())), dict(enumerate(b.tolist()))


def _reject(assessment, level: float) -> bool:
    return assessment.p < level


@SETTINGS
@given(arms(), st.sampled_from(["mean_difference", "ratio"]), st.floats(0.001, 0.2))
def test_the_interval_at_the_level_excludes_the_null_exactly_when_the_test_rejects(data, measure, alpha):
    a, b = data
    if measure == "ratio":
        assume(min(a.values()) > 0 and min(b.values()) > 0)
    row = evaluate(Claim("q", measure, 2.0 if measure == "ratio" else 1.0), a, b)
    lo, hi = row.interval_at(alpha)
    null = row.claim.null_value
    assume(abs(row.p - alpha) > 1e-9 and min(abs(lo - null), abs(hi - null)) > 1e-12)  # not on the boundary
    assert (not lo <= null <= hi) == _reject(row, alpha)


@SETTINGS
@given(arms(paired=True), st.floats(0.001, 0.2))
def test_the_paired_and_one_sample_intervals_exclude_the_null_exactly_when_p_is_below_the_level(data, alpha):
    a, b = data
    for claim, args in ((Claim("d", "paired_difference", 1.0), (a, b)), (Claim("m", "one_sample", 11.0), (a,))):
        row = evaluate(claim, *args)
        lo, hi = row.interval_at(alpha)
        null = claim.null_value
        assume(abs(row.p - alpha) > 1e-9 and min(abs(lo - null), abs(hi - null)) > 1e-12)
        assert (not lo <= null <= hi) == _reject(row, alpha)


@SETTINGS
@given(arms(), st.floats(0.001, 0.2))
def test_a_variance_ratios_f_interval_excludes_1_exactly_when_the_f_test_rejects(data, alpha):
    """The variance ratio's p is the larger of the F-test's and Brown–Forsythe's; its interval is the F-test's, so
    the F-test's own p is the one the interval mirrors, and the claim's p is never below it."""
    a, b = data
    row = evaluate(Claim("vr", "variance_ratio", 4.0), a, b)
    lo, hi = row.interval_at(alpha)
    p_f = row.notes["p_f"]
    assume(abs(p_f - alpha) > 1e-9 and min(abs(lo - 1), abs(hi - 1)) > 1e-12)
    assert (not lo <= 1 <= hi) == (p_f < alpha)
    assert row.p >= p_f


@SETTINGS
@given(arms(), st.sampled_from(["mean_difference", "ratio", "variance_ratio"]), st.floats(0.001, 0.2))
def test_swapping_the_arms_inverts_a_ratio_and_flips_a_difference(data, measure, alpha):
    a, b = data
    if measure == "ratio":  # a ratio of means needs positive observations
        assume(min(a.values()) > 0 and min(b.values()) > 0)
    published = 1.0 if measure == "mean_difference" else 2.0
    ab = evaluate(Claim("q", measure, published), a, b)
    ba = evaluate(Claim("q", measure, -published if measure == "mean_difference" else 1 / published), b, a)
    (lo, hi), (lo2, hi2) = ab.interval_at(alpha), ba.interval_at(alpha)
    assert ab.p == pytest.approx(ba.p, rel=1e-9, abs=1e-15)
    if measure == "mean_difference":
        assert ba.estimate == pytest.approx(-ab.estimate) and (lo2, hi2) == pytest.approx((-hi, -lo))
    else:
        assert ba.estimate == pytest.approx(1 / ab.estimate) and (lo2, hi2) == pytest.approx((1 / hi, 1 / lo))


@SETTINGS
@given(st.sampled_from(["ratio", "variance_ratio", "vr_contrast"]),
       st.floats(0.01, 100.0).filter(lambda x: abs(math.log(x)) > 1e-6))
def test_a_ratios_direction_is_read_on_its_own_scale(measure, published):
    """A published ratio below 1 claims the first arm smaller however close it is to 1, above 1 larger; a verdict's
    side is the log ratio's sign, so 0.5 and 2 are mirror claims."""
    claim = Claim("r", measure, published)
    assert claim.direction == (1 if published > 1 else -1)
    assert claim.scale(published) == pytest.approx(-claim.scale(1 / published))


@SETTINGS
@given(arms(), st.floats(0.2, 3.0), st.floats(0.005, 0.1))
def test_equivalence_rejects_exactly_when_the_1_minus_2_alpha_interval_lies_inside_the_margin(data, margin, alpha):
    a, b = data
    claim = Claim("eq", "equivalence", 0.0, margin=margin)
    row = evaluate(claim, a, b)
    lo, hi = row.interval_at(2 * alpha)  # the TOST at α each side is the 1 - 2α interval inside ±margin
    assume(abs(row.p - alpha) > 1e-9 and min(abs(abs(lo) - margin), abs(abs(hi) - margin)) > 1e-9)
    assert (row.p < alpha) == (-margin < lo and hi < margin)


@SETTINGS
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 2**31 - 1))
def test_each_claim_is_decided_at_its_own_familys_level(sizes, seed):
    """Families of several sizes decided together: each claim's interval, and the level it names, are at α / m with m
    its own family's measured claims, and its Holm p is at least its raw p."""
    rng = np.random.default_rng(seed)
    claims = []
    for f, m in enumerate(sizes):
        for k in range(m):
            a = {i: float(x) for i, x in enumerate(rng.normal(0.3, 1.0, size=6))}
            claims.append(evaluate(Claim(f"f{f}c{k}", "one_sample", 1.0, family=f"family {f}"), a))
    for row in decide(claims):
        m = sizes[int(row.claim.family.split()[1])]
        assert row.level == pytest.approx(ALPHA / m)
        assert row.ci == pytest.approx(row.interval_at(ALPHA / m))
        assert row.p_holm >= row.p - 1e-15


@SETTINGS
@given(st.floats(0.2, 3.0), st.floats(0.3, 3.0), st.integers(3, 20), st.integers(3, 20), st.floats(0.001, 0.05))
@example(0.5, 3.0, 3, 3, 0.001)  # ~1,200 seeds per arm, where statsmodels' power is NaN and the fallback once gave 0
def test_power_grows_with_seeds_and_level_and_seeds_needed_falls_with_the_level(effect, sd, n_a, n_b, alpha):
    power, needed = _two_sample_power(effect, sd, n_a, n_b, alpha)
    more, _ = _two_sample_power(effect, sd, n_a + 3, n_b + 3, alpha)
    looser, needed_looser = _two_sample_power(effect, sd, n_a, n_b, min(0.2, 2 * alpha))
    assert more >= power - 1e-6 and looser >= power - 1e-6  # to statsmodels' precision near a power of 1
    if needed is not None and needed_looser is not None:
        assert needed_looser <= needed
    # and it is the two-sample t-test's, simulated here: P(|t| > t_crit) for arms effect apart, SD sd
    rng = np.random.default_rng(0)
    a = rng.normal(effect, sd, size=(40_000, n_a))
    b = rng.normal(0.0, sd, size=(40_000, n_b))
    pooled = ((n_a - 1) * a.var(axis=1, ddof=1) + (n_b - 1) * b.var(axis=1, ddof=1)) / (n_a + n_b - 2)
    t = (a.mean(axis=1) - b.mean(axis=1)) / np.sqrt(pooled * (1 / n_a + 1 / n_b))
    simulated = (np.abs(t) > sst.t.ppf(1 - alpha / 2, n_a + n_b - 2)).mean()
    assert power == pytest.approx(simulated, abs=0.012)  # 4.5 simulation SEs at most
