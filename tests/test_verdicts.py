"""lib.core.verdicts: the numbers of ../shared/VERDICTS.md (scipy-verified there, restated here so that a user's
clone needs no shared folder), power against closed forms and simulation, Holm against the hand formula,
every verdict branch from planted seed-level data whose numbers imply it, and the unit of replication."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from lib.core import stats
from lib.core.verdicts import (
    ALPHA,
    Claim,
    _equivalence_power,
    _two_sample_power,
    by_seed,
    check,
    decide,
    evaluate,
    evaluate_contrast,
    holm,
    table,
    telescope_effect,
)

VR = dict(measure="variance_ratio", evidence="[paper]")


def scaled(z, ratio):
    """Two arms with sample variance ratio exactly ``ratio``: the same standardised draws, scaled."""
    z = (z - z.mean()) / z.std(ddof=1)
    return {i: float(x) for i, x in enumerate(z * math.sqrt(ratio))}, {i: float(x) for i, x in enumerate(z)}


def one(claim, a=None, b=None):
    return decide([evaluate(claim, a, b)])[0]


# ------------------------------------------------------------------------------ the reference numbers


def test_f_test_power_and_seeds_needed_match_the_reference():
    assert round(stats.variance_ratio_power(5.9, 5), 3) == 0.325
    assert round(stats.variance_ratio_power(5.9, 7), 3) == 0.507
    needed = [stats.seeds_for_variance_ratio(r) for r in (5.9, 2.98, 2.18, 0.39, 0.25, 0.08, 16.73)]
    assert needed == [12, 29, 54, 38, 19, 7, 6]


@pytest.mark.parametrize("n, p", [(14, 0.0030), (7, 0.048)])
def test_the_published_f_gives_the_published_p_only_with_14_runs_per_arm(n, p):
    """MARGIN's F = 5.9 is p = 0.003 with df (13, 13); if the two stabilisers are twins, 7 seeds per arm: 0.048."""
    a, b = scaled(np.random.default_rng(0).normal(size=n), 5.9)
    result = evaluate(Claim("VR", published=5.9, **VR), a, b)
    assert result.estimate == pytest.approx(5.9) and round(result.p, 4 if n == 14 else 3) == p


@pytest.mark.parametrize("n, r33", [(14, 2.43), (7, 3.99)])
def test_the_small_telescope_effect_of_the_original_design(n, r33):
    assert round(telescope_effect(Claim("VR", published=5.9, published_n=n, **VR)), 2) == r33


@pytest.mark.parametrize("n, power", [(5, 0.29), (7, 0.41)])
def test_t_test_power_at_d_1_matches_the_reference_and_the_noncentral_t(n, power):
    computed, _ = _two_sample_power(1.0, 1.0, n, n)
    assert round(computed, 2) == power
    df, nc = 2 * n - 2, math.sqrt(n / 2)
    crit = st.t.ppf(1 - ALPHA / 2, df)
    assert computed == pytest.approx(st.nct.sf(crit, df, nc) + st.nct.cdf(-crit, df, nc), abs=1e-9)
    _, needed = _two_sample_power(1.0, 1.0, n, n)  # the textbook 17 per arm at d = 1
    assert needed == 17
    assert _two_sample_power(1.0, 1.0, 17, 17)[0] >= 0.8 > _two_sample_power(1.0, 1.0, 16, 16)[0]


def test_power_agrees_with_a_simulation_of_the_tests():
    rng = np.random.default_rng(1)
    sims, n = 20_000, 6
    # the F-test at R = 3
    a, b = rng.normal(size=(sims, n)) * math.sqrt(3), rng.normal(size=(sims, n))
    f = a.var(axis=1, ddof=1) / b.var(axis=1, ddof=1)
    rejected = (f > st.f.isf(ALPHA / 2, n - 1, n - 1)) | (f < st.f.ppf(ALPHA / 2, n - 1, n - 1))
    expected = stats.variance_ratio_power(3.0, n)
    assert abs(rejected.mean() - expected) < 4 * math.sqrt(expected * (1 - expected) / sims)
    # the two-sample t-test at d = 1.2 (equal variances: the power's model)
    a, b = rng.normal(1.2, 1, size=(sims, n)), rng.normal(0, 1, size=(sims, n))
    rejected = st.ttest_ind(a, b, axis=1).pvalue < ALPHA
    expected, _ = _two_sample_power(1.2, 1.0, n, n)
    assert abs(rejected.mean() - expected) < 4 * math.sqrt(expected * (1 - expected) / sims)


def test_holm_is_the_step_down_formula():
    p = [0.01, 0.04, 0.03, 0.005, 0.2]
    m = len(p)
    order = np.argsort(p)
    hand = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):  # p_(i) <- max over j <= i of min(1, (m - j + 1) p_(j))
        running = max(running, min(1.0, (m - rank) * p[i]))
        hand[i] = running
    assert holm(p) == pytest.approx(hand)
    assert holm([0.01, float("nan"), 0.02]) == pytest.approx([0.02, float("nan"), 0.02], nan_ok=True)


# ------------------------------------------------------------------------------ every verdict branch


def test_no_data_is_not_measured_and_a_check_is_never_a_reproduction():
    claim = Claim("VR", published=5.9, **VR)
    assert one(claim).verdict == "not measured"
    assert one(claim, {0: 1.0}, {0: 2.0, 1: 3.0}).verdict == "not measured"  # one seed: no variance
    a, b = scaled(np.random.default_rng(2).normal(size=20), 6.0)
    check = one(Claim("slope 2 of a simulated theorem", measure="variance_ratio", published=5.9, kind="check"), a, b)
    assert check.verdict == "check" and math.isnan(check.p_holm)


def test_significant_and_reaching_the_published_value_is_reproduced():
    a, b = scaled(np.random.default_rng(3).normal(size=20), 6.0)
    result = one(Claim("VR", published=5.9, **VR), a, b)
    assert result.p < 0.001 and result.ci[0] < 5.9 < result.ci[1]
    assert result.verdict == "reproduced"


def test_significant_but_short_of_the_published_value_is_reproduced_smaller():
    a, b = scaled(np.random.default_rng(3).normal(size=20), 6.0)
    result = one(Claim("VR", published=40.0, **VR), a, b)
    assert result.p < 0.001 and result.ci[1] < 40.0
    assert result.verdict == "reproduced, smaller"
    # and below the null, in the published direction: the CI's lower end must reach the published value
    a, b = scaled(np.random.default_rng(3).normal(size=20), 1 / 6)
    assert one(Claim("VR", published=1 / 40, **VR), a, b).verdict == "reproduced, smaller"
    assert one(Claim("VR", published=1 / 5.9, **VR), a, b).verdict == "reproduced"


def test_significant_on_the_other_side_is_contradicted():
    a, b = scaled(np.random.default_rng(3).normal(size=20), 1 / 6)
    assert one(Claim("VR", published=5.9, **VR), a, b).verdict == "contradicted"


def test_a_null_with_power_is_not_reproduced():
    a, b = scaled(np.random.default_rng(4).normal(size=30), 1.1)
    result = one(Claim("VR", published=5.9, **VR), a, b)
    assert result.p > 0.05 and result.power >= 0.8 and result.verdict == "not reproduced"


def test_a_null_whose_ci_excludes_the_published_value_is_not_reproduced_even_with_low_power():
    seeds = {i: x for i, x in enumerate([-2.0, -1.0, 0.0, 1.0, 2.0])}  # mean 0, CI [-1.96, 1.96]
    result = one(Claim("AUROC trained - initial", measure="one_sample", published=2.2), seeds)
    assert result.p == pytest.approx(1.0) and result.ci[1] < 2.2 and result.power < 0.8
    assert result.verdict == "not reproduced"


def test_a_null_without_power_is_inconclusive_with_the_seeds_it_would_take():
    a, b = scaled(np.random.default_rng(5).normal(size=5), 2.0)
    result = one(Claim("VR", published=5.9, **VR), a, b)
    assert result.p > 0.05 and result.ci[0] < 5.9 < result.ci[1]
    assert result.power == pytest.approx(0.325, abs=1e-3) and result.seeds_needed == 12
    assert result.verdict == "inconclusive" and result.verdict_text() == ("inconclusive (power 33%; 12 seeds per "
                                                                          "arm for 80%)")


def test_holm_within_a_family_can_take_significance_away():
    rng = np.random.default_rng(6)
    a = {i: float(x) for i, x in enumerate(rng.normal(1.0, 1.0, size=8))}
    b = {i: float(x) for i, x in enumerate(rng.normal(0.0, 1.0, size=8))}
    claim = Claim("mean gain", measure="mean_difference", published=1.0, family="gains")
    alone = one(claim, a, b)
    assert 0.01 < alone.p < 0.05 and alone.verdict.startswith("reproduced")
    family = decide([evaluate(claim, a, b)] + [evaluate(Claim(f"gain {k}", measure="mean_difference", published=1.0,
                                                               family="gains"), a, b) for k in range(3)])
    assert family[0].p_holm == pytest.approx(min(1.0, 4 * alone.p))
    assert family[0].verdict in ("inconclusive", "not reproduced")
    other = decide([evaluate(claim, a, b), evaluate(Claim("x", measure="mean_difference", published=1.0,
                                                          family="elsewhere"), a, b)])
    assert other[0].p_holm == pytest.approx(alone.p)  # another family does not count


def test_in_a_family_the_power_is_at_the_level_holm_gives_every_claim_and_a_null_it_could_not_see_is_inconclusive():
    """Study 4's quick case: three seeds whose per-seed rho averages 0.13 against a published 0.1, raw p 0.01, in
    a family of 12. At alpha = 0.05 the design's power is over 80% and the null would read "not reproduced",
    although the estimate lies beyond the published value; Holm rejects this claim whenever p < 0.05 / 12, so its
    power is taken there (the noncentral t at that level), and it is inconclusive with the seeds that would do."""
    from statsmodels.stats.power import TTestPower

    seeds = {0: 0.10, 1: 0.13, 2: 0.16}
    claim = Claim("rho", measure="one_sample", published=0.1, family="norms")
    alone = one(claim, seeds)
    assert alone.p < 0.05 and alone.power >= 0.8  # alone, at alpha: significant, and powerful
    others = [evaluate(Claim(f"other {k}", measure="one_sample", published=0.1, family="norms"),
                       {0: -0.2, 1: 0.0, 2: 0.2}) for k in range(11)]
    decided = decide([evaluate(claim, seeds)] + others)[0]
    d = 0.1 / np.std(list(seeds.values()), ddof=1)
    at_family_level = TTestPower().power(effect_size=d, nobs=3, alpha=0.05 / 12)
    assert decided.p_holm > 0.05 and decided.ci[0] < 0.1 < decided.ci[1]
    assert decided.power == pytest.approx(at_family_level) and decided.power < 0.8 <= alone.power
    assert TTestPower().power(effect_size=d, nobs=decided.seeds_needed, alpha=0.05 / 12) >= 0.8
    assert TTestPower().power(effect_size=d, nobs=decided.seeds_needed - 1, alpha=0.05 / 12) < 0.8
    assert decided.verdict == "inconclusive"
    # a family of one keeps the level alpha, as every reference number above assumes
    assert decide([evaluate(claim, seeds)])[0].power == pytest.approx(alone.power)


def test_a_ratio_is_tested_on_the_log_scale():
    rng = np.random.default_rng(7)
    a = {i: float(x) for i, x in enumerate(np.exp(rng.normal(math.log(2.0), 0.1, size=6)))}
    b = {i: float(x) for i, x in enumerate(np.exp(rng.normal(0.0, 0.1, size=6)))}
    result = one(Claim("grad-norm ratio", measure="ratio", published=4.0), a, b)
    la, lb = np.log(list(a.values())), np.log(list(b.values()))
    assert result.estimate == pytest.approx(math.exp(la.mean() - lb.mean()))
    assert result.p == pytest.approx(st.ttest_ind(la, lb, equal_var=False).pvalue)
    assert result.ci[1] < 4.0 and result.verdict == "reproduced, smaller"


# ------------------------------------------------------------------------------ the unit of replication


def test_twins_cannot_count_twice():
    """Study 1's detach/direct twins: two runs per seed, identical. Through by_seed they are one observation
    per seed, and the reported p is the seed-level one; a list or a repeated seed is refused."""
    rng = np.random.default_rng(8)
    clamp, subtract = rng.normal(0, 2.0, size=5), rng.normal(0, 1.0, size=5)
    runs = pd.DataFrame([dict(seed=s, arm=arm, stabilizer=stab, car=float(x))
                         for arm, xs in (("clamp", clamp), ("subtract", subtract)) for s, x in enumerate(xs)
                         for stab in ("detach", "direct")])
    a = by_seed(runs[runs.arm == "clamp"], "car")
    b = by_seed(runs[runs.arm == "subtract"], "car")
    result = evaluate(Claim("VR", published=5.9, **VR), a, b)
    assert result.n == (5, 5)
    assert result.p == pytest.approx(stats.variance_ratio_test(clamp, subtract).p_value)
    doubled = stats.variance_ratio_test(np.repeat(clamp, 2), np.repeat(subtract, 2)).p_value
    assert doubled < result.p  # what counting twins would have claimed
    with pytest.raises(TypeError, match="map each seed"):
        evaluate(Claim("VR", published=5.9, **VR), list(np.repeat(clamp, 2)), b)
    with pytest.raises(ValueError, match="appears more than once"):
        evaluate(Claim("VR", published=5.9, **VR), pd.Series(np.repeat(clamp, 2), index=np.repeat(range(5), 2)), b)


def test_bad_claims_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="measure="):
        Claim("x", measure="odds", published=2.0)
    with pytest.raises(ValueError, match="kind="):
        Claim("x", measure="ratio", published=2.0, kind="reproduction")
    with pytest.raises(ValueError, match="positive"):
        Claim("x", measure="variance_ratio", published=-1.0)
    with pytest.raises(ValueError, match="no direction"):
        Claim("x", measure="mean_difference", published=0.0)


def test_the_table_shows_ci_power_and_seeds_for_every_tested_row_and_checks_last():
    a, b = scaled(np.random.default_rng(5).normal(size=5), 2.0)
    rows = table(decide([evaluate(Claim("check", published=2.0, kind="check", **VR), a, b),
                         evaluate(Claim("VR", published=5.9, **VR), a, b),
                         evaluate(Claim("CIFAR-100 VR", published=0.39, **VR))]))
    assert list(rows.quantity) == ["VR", "CIFAR-100 VR", "check"]
    assert rows.verdict.tolist() == ["inconclusive (power 33%; 12 seeds per arm for 80%)", "not measured", "check"]
    vr = rows.iloc[0]
    assert vr.ours.startswith("2 [") and vr.power == "33%" and vr.seeds_needed == "12" and vr.n == "5 vs 5"


# ------------------------------------------------------------------------------ a published "no difference"

EQ = dict(measure="equivalence", published=0.0, margin=1.0, evidence="[summary]")


def shifted(z, diff, sd=1.0):
    """Two arms with the same standardised draws (SD ``sd``), the first shifted by exactly ``diff``."""
    z = sd * (z - z.mean()) / z.std(ddof=1)
    return {i: float(x + diff) for i, x in enumerate(z)}, {i: float(x) for i, x in enumerate(z)}


def test_the_tost_power_agrees_with_a_simulation_and_the_seeds_needed_reach_it():
    rng = np.random.default_rng(2)
    sims, n, margin = 20_000, 8, 1.0
    a, b = rng.normal(size=(sims, n)), rng.normal(size=(sims, n))
    diff = a.mean(axis=1) - b.mean(axis=1)
    se = np.sqrt(a.var(axis=1, ddof=1) / n + b.var(axis=1, ddof=1) / n)
    half = st.t.ppf(1 - ALPHA, 2 * n - 2) * se  # the TOST rejects when the 90% interval lies within ±margin
    equivalent = (diff - half > -margin) & (diff + half < margin)
    expected = _equivalence_power(0.0, margin, 1.0, n, n)
    # the formula takes the SD as known: a small overstatement at n = 8, bounded here
    assert abs(equivalent.mean() - expected) < 0.05
    assert _equivalence_power(0.0, margin, 1.0, 100, 100) > 0.99 and _equivalence_power(0.0, margin, 1.0, 3, 3) == 0


def test_a_published_no_difference_is_reproduced_only_by_an_equivalence_within_the_margin():
    z = np.random.default_rng(4).normal(size=30)
    within = one(Claim("means", **EQ), *shifted(z, 0.1, sd=0.5))  # 30 seeds, difference 0.1, SD 0.5
    assert within.verdict == "reproduced" and within.p < 0.05 and within.notes["p_difference"] > 0.05
    # a difference whose whole CI lies beyond the margin contradicts the claim
    apart = one(Claim("means", **EQ), *shifted(z[:6], 3.0, sd=0.5))
    assert apart.verdict == "contradicted" and apart.notes["p_difference"] < 0.05
    # 5 seeds with SD 2: neither equivalence nor a difference can be shown
    few = one(Claim("means", **EQ), *shifted(z[:5], 0.2, sd=2.0))
    assert few.verdict == "inconclusive" and few.power < 0.8 and few.seeds_needed > 5
    assert _equivalence_power(0.0, 1.0, 2.0, few.seeds_needed, few.seeds_needed) >= 0.8
    # significant, but its CI straddles the margin: not shown equivalent although the design could: a null
    wide = one(Claim("means", **{**EQ, "margin": 0.5}), *shifted(z[:20], 0.45, sd=0.3))
    assert wide.verdict == "not reproduced" and wide.power >= 0.8 and wide.p > 0.05
    with pytest.raises(ValueError, match="margin"):
        Claim("means", measure="equivalence", published=0.0)


def test_a_check_row_keeps_its_text_and_is_never_a_reproduction():
    a, b = scaled(np.random.default_rng(5).normal(size=5), 2.0)
    rows = table(decide([check("twins", "7/7 identical", "gradient-neutral"), evaluate(Claim("VR", published=5.9,
                                                                                           **VR), a, b)]))
    assert rows.quantity.tolist() == ["VR", "twins"] and rows.kind.tolist() == ["claim", "check"]
    twins = rows.iloc[1]
    assert (twins.ours, twins.paper, twins.verdict, twins.power, twins.p_holm) == ("7/7 identical",
                                                                                 "gradient-neutral", "check", "–", "–")


# ------------------------------------------------------------------------------ one variance ratio against others


def test_the_vr_contrast_is_the_ratio_over_the_geometric_mean_with_its_normal_theory_se():
    z = np.random.default_rng(6).normal(size=8)
    first, others = scaled(z, 6.0), [scaled(z, 0.5), scaled(z, 0.2)]
    claim = Claim("reversal", measure="vr_contrast", published=20.0)
    a = decide([evaluate_contrast(claim, first, others)])[0]
    c = math.log(6.0) - (math.log(0.5) + math.log(0.2)) / 2
    se = math.sqrt(4 / 7 + (4 / 7 + 4 / 7) / 4)  # Var(log VR) = 2/(n-1) + 2/(n-1) per dataset, n = 8
    assert a.estimate == pytest.approx(math.exp(c)) and a.p == pytest.approx(2 * st.norm.sf(c / se))
    assert a.ci == pytest.approx((math.exp(c - 1.959964 * se), math.exp(c + 1.959964 * se)), rel=1e-5)
    assert a.verdict == "reproduced"  # p = 0.0003, and the CI [5.2, 225] reaches 20
    # no other dataset: nothing to contrast
    assert decide([evaluate_contrast(claim, first, [])])[0].verdict == "not measured"


def test_the_vr_contrast_power_agrees_with_a_simulation():
    rng = np.random.default_rng(7)
    sims, n, ratio = 4000, 12, 4.0  # the first dataset's VR 4, the other two's 1: contrast 4
    claim = Claim("reversal", measure="vr_contrast", published=ratio)
    rejected = 0
    for _ in range(sims):
        def arms(r):
            return ({i: float(x) for i, x in enumerate(rng.normal(size=n) * math.sqrt(r))},
                    {i: float(x) for i, x in enumerate(rng.normal(size=n))})
        rejected += evaluate_contrast(claim, arms(ratio), [arms(1.0), arms(1.0)]).p < ALPHA
    expected = evaluate_contrast(claim, *(lambda z: (scaled(z, 1.0), [scaled(z, 1.0), scaled(z, 1.0)]))(
        np.random.default_rng(8).normal(size=n))).power
    # the normal approximation of log VR: within 0.06 of the simulated power at 12 seeds per arm
    assert abs(rejected / sims - expected) < 0.06
