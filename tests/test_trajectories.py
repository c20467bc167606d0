"""Per-epoch layer-0 metrics of the CFF studies (lib.studies.common) and study 1's layer-0 trajectory
experiment, on tiny records whose curves are written out here and whose answers are computed by hand
with plain Python: the per-epoch gradient-norm ratio, detach/direct twins counted once, the CAR
interval, the bootstrap interval's exact ends, the slope over the last epochs, and the trajectory runs
kept out of the factorial's analysis."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from lib.cff.training import CFFConfig
from lib.studies import common, margin_factorial

# Six seeds per arm in the factorial plant: a few bootstrap resamples of its VR are degenerate (warned).
pytestmark = pytest.mark.filterwarnings("ignore:bootstrap_ratio_ci")


@pytest.fixture(autouse=True)
def _without_absent_config_fields(monkeypatch):
    """The trajectory runs ask for eval_protocol="clean"; a CFFConfig without that field cannot take it."""
    if any(k not in CFFConfig.__dataclass_fields__ for k in margin_factorial.TRAJECTORY_OVERRIDES):
        monkeypatch.setattr(margin_factorial, "TRAJECTORY_OVERRIDES", {})


def record(mode, seed, grad, car=None, *, stabilizer="detach", layers=2, m0=0.4, top1=0.5, status="ok") -> dict:
    """A run record whose layer-0 curves are ``grad`` and ``car`` (one value per epoch); the layers above
    hold values far from them, which a layer-0 analysis must never read."""
    car = car if car is not None else [0.5] * len(grad)
    above = [99.0] * (layers - 1)
    curves = {"car": [[c, *above] for c in car], "grad_norm": [[g, *above] for g in grad],
              "loss": [[1.0, *above] for _ in grad]}
    config = dict(seed=seed, margin_mode=mode, stabilizer=stabilizer, m0=m0, layers=layers, epochs=len(grad))
    return dict(run_id=f"{mode}-{stabilizer}-{seed}-{layers}-{m0}-{len(grad)}", status=status, config=config,
                metrics=dict(top1=top1, top5=float("nan"), car_layer0=sum(car) / len(car),
                             grad_norm_layer0=sum(grad) / len(grad), positive_pair_density=10.0, curves=curves))


# Three epochs. Clamp seed 0 and subtract seed 1 ran under both stabilisers (near-twins that differ);
# a diverged subtract run carries values that must be left out.
RECORDS = [
    record("clamp", 0, [1.0, 0.8, 0.6], [0.60, 0.50, 0.40]),
    record("clamp", 0, [1.2, 0.8, 0.2], [0.62, 0.50, 0.30], stabilizer="direct"),
    record("clamp", 1, [0.9, 0.6, 0.5], [0.56, 0.44, 0.38]),
    record("subtract", 0, [0.3, 0.6, 0.9], [0.99, 0.98, 0.97]),
    record("subtract", 1, [0.5, 0.8, 1.0], [0.97, 0.96, 0.95]),
    record("subtract", 1, [0.5, 0.7, 1.1], [0.97, 0.96, 0.95], stabilizer="direct"),
    record("subtract", 2, [50.0, 50.0, 50.0], status="diverged"),
]


def hand_seed_values(records, metric: str, mode: str, epoch: int) -> list[float]:
    """Plain Python: per seed of ``mode``, the mean over its finished runs (its twins) of layer-0
    ``metric`` at ``epoch`` (1-based), in seed order."""
    per_seed: dict[int, list[float]] = {}
    for r in records:
        if r["status"] == "ok" and r["config"]["margin_mode"] == mode:
            per_seed.setdefault(r["config"]["seed"], []).append(r["metrics"]["curves"][metric][epoch - 1][0])
    return [sum(v) / len(v) for _, v in sorted(per_seed.items())]


def mean(values) -> float:
    return sum(values) / len(values)


@pytest.fixture(scope="module")
def trajectory():
    return common.layer0_trajectory(common.curves_frame(RECORDS))


def test_per_epoch_gradient_norm_ratio_is_the_hand_computation_with_twins_counted_once(trajectory):
    assert trajectory.epoch.tolist() == [1, 2, 3]
    assert trajectory.seeds_clamp.tolist() == [2, 2, 2] and trajectory.seeds_subtract.tolist() == [2, 2, 2]
    for row in trajectory.itertuples():
        clamp = hand_seed_values(RECORDS, "grad_norm", "clamp", row.epoch)
        subtract = hand_seed_values(RECORDS, "grad_norm", "subtract", row.epoch)
        assert (row.grad_norm_clamp, row.grad_norm_subtract) == pytest.approx((mean(clamp), mean(subtract)), rel=1e-12)
        assert row.grad_norm_ratio == pytest.approx(mean(subtract) / mean(clamp), rel=1e-12)
    # epoch 3 written out: clamp seeds (0.6 + 0.2) / 2 and 0.5, subtract seeds 0.9 and (1.0 + 1.1) / 2
    assert trajectory.grad_norm_ratio.iloc[-1] == pytest.approx(((0.9 + 1.05) / 2) / ((0.4 + 0.5) / 2), rel=1e-12)
    # counting every run instead (twins twice) would give another number: the test can tell them apart
    pooled = mean([0.9, 1.0, 1.1]) / mean([0.6, 0.2, 0.5])
    assert not math.isclose(trajectory.grad_norm_ratio.iloc[-1], pooled, rel_tol=1e-3)


def test_car_is_the_mean_over_seeds_in_percent_with_its_t_interval(trajectory):
    for row in trajectory.itertuples():
        for mode in common.ARMS:
            values = [100 * v for v in hand_seed_values(RECORDS, "car", mode, row.epoch)]
            m, n = mean(values), len(values)
            sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
            half = st.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
            got = [getattr(row, f"car_{mode}{suffix}") for suffix in ("", "_low", "_high")]
            assert got == pytest.approx([m, m - half, m + half], rel=1e-12)


def test_welch_p_per_epoch_is_of_the_per_seed_gradient_norms(trajectory):
    for row in trajectory.itertuples():
        clamp = hand_seed_values(RECORDS, "grad_norm", "clamp", row.epoch)
        subtract = hand_seed_values(RECORDS, "grad_norm", "subtract", row.epoch)
        assert row.grad_norm_welch_p == pytest.approx(st.ttest_ind(subtract, clamp, equal_var=False).pvalue, rel=1e-9)


def test_with_two_seeds_per_arm_the_bootstrap_interval_ends_at_the_extreme_resamples(trajectory):
    """Two seeds per arm: a resample of an arm is both draws of its smaller seed with probability 1/4,
    so the smallest possible ratio (subtract's smaller seed twice over clamp's larger twice) has
    probability 1/16 > 2.5%, and the 2.5% quantile is exactly that ratio; the 97.5% one likewise."""
    for row in trajectory.itertuples():
        clamp = hand_seed_values(RECORDS, "grad_norm", "clamp", row.epoch)
        subtract = hand_seed_values(RECORDS, "grad_norm", "subtract", row.epoch)
        assert row.ratio_low == pytest.approx(min(subtract) / max(clamp), rel=1e-12)
        assert row.ratio_high == pytest.approx(max(subtract) / min(clamp), rel=1e-12)
        assert row.ratio_low <= row.grad_norm_ratio <= row.ratio_high


def test_runs_frame_final_columns_and_final_epoch_agree_with_the_trajectorys_last_epoch(trajectory):
    runs = common.runs_frame(RECORDS)
    assert runs.layers.tolist() == [2] * len(RECORDS) and runs.epochs.tolist() == [3] * len(RECORDS)
    assert runs.grad_norm_layer0_final.tolist() == [r["metrics"]["curves"]["grad_norm"][-1][0] for r in RECORDS]
    assert runs.car_layer0_final.tolist() == [r["metrics"]["curves"]["car"][-1][0] for r in RECORDS]
    final = common.final_epoch(runs)
    assert len(final) == 1 and final.epoch.iloc[0] == 3
    last = trajectory.iloc[-1]
    for column in final.columns:
        assert final[column].iloc[0] == pytest.approx(last[column], rel=1e-12), column  # the bootstrap CI too


def test_a_group_without_both_arms_has_no_row():
    clamp_only = [r for r in RECORDS if r["config"]["margin_mode"] == "clamp"]
    assert common.layer0_trajectory(common.curves_frame(clamp_only)).empty
    columns = common.final_epoch_columns(common.runs_frame(clamp_only).assign(dataset="a"), "dataset")
    assert columns.empty and list(columns.columns) == ["dataset", *common.FINAL_COLUMNS]


def test_ratio_trend_is_the_least_squares_slope_over_the_last_epochs():
    # clamp 1.0 at every epoch; subtract seeds 0.5 + 0.25 e and 0.7 + 0.25 e: ratio 0.6 + 0.25 e
    epochs = range(1, 6)
    records = [record("clamp", s, [1.0] * 5) for s in (0, 1)]
    records += [record("subtract", 0, [0.5 + 0.25 * e for e in epochs]),
                record("subtract", 1, [0.7 + 0.25 * e for e in epochs])]
    trend = common.ratio_trend(common.curves_frame(records), last=3)
    assert (trend["final_epoch"], trend["fitted"]) == (5, 3)
    assert trend["ratio"] == pytest.approx(0.6 + 0.25 * 5, rel=1e-12)
    assert trend["slope"] == pytest.approx(0.25, rel=1e-9)
    # every resample has the same slope (the seeds differ by a constant): the CI is that slope
    assert (trend["slope_low"], trend["slope_high"]) == pytest.approx((0.25, 0.25), rel=1e-9)
    # the final ratio's ends: subtract's smaller seed twice, then its larger one twice, over clamp's 1.0
    assert (trend["ratio_low"], trend["ratio_high"]) == pytest.approx((0.5 + 1.25, 0.7 + 1.25), rel=1e-12)


@pytest.mark.parametrize("trend,start", [
    (dict(ratio=2.0, ratio_low=1.8, ratio_high=2.2, slope=0.1, slope_low=0.05, slope_high=0.15),
     "below 4.0x, still growing over the last 8 epochs: a straight line through them would reach 4.0x near epoch 52"),
    (dict(ratio=2.0, ratio_low=1.8, ratio_high=2.2, slope=0.01, slope_low=-0.02, slope_high=0.04),
     "below 4.0x and levelled off: no significant slope over the last 8 epochs; not growing toward 4.0x"),
    (dict(ratio=2.0, ratio_low=1.8, ratio_high=2.2, slope=-0.1, slope_low=-0.15, slope_high=-0.05),
     "below 4.0x and falling over the last 8 epochs"),
    (dict(ratio=3.5, ratio_low=2.9, ratio_high=4.1, slope=0.1, slope_low=0.05, slope_high=0.15),
     "4.0x lies within the final epoch's 95% CI; still growing"),
    (dict(ratio=0.5, ratio_low=0.4, ratio_high=0.6, slope=0.0, slope_low=-0.1, slope_high=0.1),
     "higher under clamp at the final epoch"),
    (dict(ratio=5.0, ratio_low=4.5, ratio_high=5.5, slope=0.0, slope_low=-0.1, slope_high=0.1),
     "above the published 4.0x"),
])
def test_trend_reading_follows_from_the_final_ratio_and_the_slope(trend, start):
    assert margin_factorial.trend_reading(dict(trend, final_epoch=32, fitted=8)).startswith(start)


# --------------------------------------------------------------------------- study 1's trajectory runs


def settings(**overrides) -> dict:
    return margin_factorial.resolve(dict(profile="smoke", margin_modes=["clamp", "subtract"],
                                         stabilizers=["detach", "direct"], dose_m0=0.2, m0=0.4, m_last=0.1,
                                         temperature=0.15, lr=0.004, device="cpu", **overrides))


def test_plan_ends_with_the_layer0_trajectory_runs():
    s = settings(trajectory_seeds=3, trajectory_epochs=5)
    configs = margin_factorial.plan(s)
    trajectory = [c for c in configs if c.layers == 1]
    assert configs[-len(trajectory):] == trajectory  # after the factorial and the dose runs
    assert sorted((c.margin_mode, c.seed) for c in trajectory) == [(m, seed) for m in ("clamp", "subtract")
                                                                   for seed in range(3)]
    assert {(c.epochs, c.stabilizer, c.m0, c.embed_dim) for c in trajectory} == {(5, "detach", 0.4, s["embed_dim"])}
    for name, value in margin_factorial.TRAJECTORY_OVERRIDES.items():
        assert all(getattr(c, name) == value for c in trajectory)
    assert all(c.layers == s["layers"] == 2 for c in configs if c not in trajectory)
    assert not [c for c in margin_factorial.plan(settings(trajectory_seeds=0)) if c.layers == 1]


@pytest.mark.parametrize("name,value", [("trajectory_seeds", -1), ("trajectory_seeds", 1.5),
                                        ("trajectory_epochs", 0), ("trajectory_epochs", "32")])
def test_bad_trajectory_settings_fail_naming_them(name, value):
    from lib.core.params import ParameterError

    with pytest.raises(ParameterError, match=name):
        settings(**{name: value})


def factorial_records(s: dict, offset: float = 0.0) -> list[dict]:
    """Both arms x both stabilisers x three seeds at the settings' size, gradient norms apart by arm."""
    return [record(mode, seed, [base + 0.1 * seed + offset] * s["epochs"], stabilizer=stab, layers=s["layers"],
                   top1=0.5 + 0.01 * seed * (2 if mode == "clamp" else 1))
            for mode, base in (("clamp", 1.0), ("subtract", 2.0)) for stab in ("detach", "direct") for seed in range(3)]


def test_the_factorial_analysis_ignores_the_trajectory_runs():
    s = settings(trajectory_seeds=2, trajectory_epochs=4)
    factorial = factorial_records(s)
    # layer-0-alone runs far from the factorial's numbers, at the same m0, seeds and stabiliser
    trajectory = [record(mode, seed, [g] * 4, layers=1, top1=0.1 + 0.3 * seed)
                  for mode, g in (("clamp", 10.0), ("subtract", 0.1)) for seed in range(2)]
    alone = margin_factorial.analyze(common.runs_frame(factorial), s)
    both = margin_factorial.analyze(common.runs_frame(factorial + trajectory), s)
    assert both["n_ok"] == alone["n_ok"] == len(factorial)
    assert both["pooled"] == alone["pooled"]
    assert both["final"] == alone["final"] and both["final"]["epoch"] == s["epochs"]
    assert both["seeds"].equals(alone["seeds"])
    assert len(both["trajectory_seeds"]) == 4 and alone["trajectory_seeds"].empty  # the trajectory's own claim
    assert both["cells"].equals(alone["cells"])
    # and the trajectory experiment reads those runs only
    experiment = margin_factorial.trajectory_experiment(common.curves_frame(factorial + trajectory), s)
    assert experiment["table"].epoch.tolist() == [1, 2, 3, 4]
    assert experiment["table"].grad_norm_ratio.tolist() == pytest.approx([0.01] * 4)
    assert experiment["trend"]["final_epoch"] == 4
    assert margin_factorial.trajectory_experiment(common.curves_frame(factorial), s) is None


def test_study1_final_epoch_counts_twins_once_in_the_welch_test():
    s = settings()
    runs = common.runs_frame(factorial_records(s))
    f = margin_factorial.analyze(runs, s)["final"]
    clamp, subtract = [1.0, 1.1, 1.2], [2.0, 2.1, 2.2]  # one value per seed, not per run
    assert (f["seeds_clamp"], f["seeds_subtract"]) == (3, 3)
    assert f["grad_norm_welch_p"] == pytest.approx(st.ttest_ind(subtract, clamp, equal_var=False).pvalue, rel=1e-9)
    assert f["grad_norm_ratio"] == pytest.approx(mean(subtract) / mean(clamp), rel=1e-12)
    table = margin_factorial.paper_vs_reproduced(margin_factorial.analyze(runs, s))
    grad = table[table.quantity.str.startswith("layer-0 gradient norm")].iloc[0]
    assert grad.quantity.endswith(f"final epoch ({s['epochs']} of {s['epochs']})") and grad.n == "3 vs 3"
    assert grad.ours.startswith(f"{math.exp(np.log(subtract).mean() - np.log(clamp).mean()):.3g} [")
    assert np.isfinite(f["ratio_low"]) and f["ratio_low"] <= f["grad_norm_ratio"] <= f["ratio_high"]
