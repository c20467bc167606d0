"""lib.verdicts: the numbers of ../shared/VERDICTS.md (scipy-verified there, restated here so that a user's
clone needs no shared folder), power against closed forms and simulation, Holm against the hand formula,
every verdict branch from planted seed-level data whose numbers imply it, and the unit of replication."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from lib import stats
from lib.verdicts import (
    ALPHA,
    Claim,
    _two_sample_power,
    by_seed,
    decide,
    evaluate,
    holm,
    table,
    telescope_effect,
    what_it_would_take,
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


def test_what_it_would_take_names_the_seeds_the_runs_the_command_and_the_cost():
    a, b = scaled(np.random.default_rng(5).normal(size=5), 2.0)
    inconclusive = one(Claim("VR", published=5.9, **VR), a, b)
    plan = what_it_would_take(inconclusive, "01", seconds_per_run=700.0)
    assert plan == {"quantity": "VR", "seeds": 12, "runs": 24, "run_hours": pytest.approx(24 * 700 / 3600),
                    "command": ("python -m lib.dispatch 01 --profile paper -p seeds 12 --backend slurm "
                                "--max-parallel 20")}
    assert what_it_would_take(inconclusive, "01")["run_hours"] is None  # the profile's time unknown
    a, b = scaled(np.random.default_rng(3).normal(size=20), 6.0)
    assert what_it_would_take(one(Claim("VR", published=5.9, **VR), a, b), "01") is None  # decided already
