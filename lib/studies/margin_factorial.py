"""Study 1: the CIFAR-10 margin factorial (MARGIN paper), as run by notebooks/01_margin_factorial.

Design [paper]: margin mode {clamp, subtract} x stabiliser {detach, direct} x seeds, plus a
dose-response probe with a smaller layer-0 margin [summary]. Under ``subtract`` the margin is
gradient-neutral, so subtract runs do not depend on m0; the probe therefore runs only clamp at the
smaller m0 and sets it against the same pooled subtract runs [ours].

The layer-0 trajectory experiment [ours] trains layer 0 alone (``layers=1``: the layers train locally,
so this is layer 0 of the full model without the layers above it) for longer, clamp against subtract,
to see where the gradient-norm ratio goes after the main runs' last epoch. Its runs are kept out of
the factorial's analysis (:func:`main_runs`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lib import params, stats
from lib.cff import CFFConfig, train_cff
from lib.losses import MARGIN_MODES, STABILIZERS
from lib.studies import common
from lib.studies.common import (
    sweep_options,  # noqa: F401  (run_sweep's options: part of every study's interface)
    variance_comparison,
)

STUDY = "01_margin_factorial"
# The study's question in one line, for the report's summary
QUESTION = ("Does clamping the positive-pair similarity at a margin inflate the seed-to-seed variance of accuracy "
            "on CIFAR-10, compared with subtracting the margin?")
# The verdict-table row (the start of its quantity) whose result the report's summary shows
HEADLINE = "VR = Var(clamp)/Var(subtract), pooled"
TRAIN = train_cff

# Each profile: overrides of CFFConfig fields, and the study's settings (seeds, dose_seeds, trajectory_seeds,
# trajectory_epochs, workers). A notebook parameter left as None takes the profile's value, else CFFConfig's default.
PROFILES = {
    "smoke": dict(dataset="shapes",
                  dataset_options={"num_classes": 10, "difficulty": 0.3, "n_train": 400, "n_test": 200},
                  seeds=2, layers=2, embed_dim=32, heads=2, patch=4, epochs=1, batch_size=128, train_subset=0,
                  probe_epochs=5, dose_seeds=2, trajectory_seeds=2, trajectory_epochs=2, workers=1),
    "quick": dict(dataset="shapes",
                  dataset_options={"num_classes": 10, "difficulty": 0.3, "n_train": 3000, "n_test": 1000},
                  seeds=5, layers=3, embed_dim=32, heads=2, patch=4, epochs=6, batch_size=256, train_subset=0,
                  probe_epochs=15, dose_seeds=5, trajectory_seeds=3, trajectory_epochs=12, workers=2),
    # Batch 512: the paper's positive-pair density. probe_epochs 15 here and in quick, not CFF's 50 [ours]:
    # under eval_protocol "cff" every probe epoch encodes the augmented training split again, and 50 of
    # them would cost more than the 8 training epochs; 15 keep the study near its 2 hours on 2 cores.
    "cpu": dict(dataset="cifar10", dataset_options={}, seeds=7, layers=4, embed_dim=64, heads=4, patch=4, epochs=8,
                batch_size=512, train_subset=0, probe_epochs=15, dose_seeds=7, trajectory_seeds=7,
                trajectory_epochs=32, workers=2),
    "paper": dict(dataset="cifar10", dataset_options={}, seeds=7, layers=8, embed_dim=128, heads=4, patch=4, epochs=600,
                  batch_size=512, train_subset=0, probe_epochs=50, dose_seeds=7, trajectory_seeds=7,
                  trajectory_epochs=32, workers=1),
}
# The trajectory runs read the training curves only: the cheap evaluation protocol is enough.
TRAJECTORY_OVERRIDES = {"eval_protocol": "clean"}
TRAJECTORY_STABILIZER = "detach"  # one stabiliser: the two are gradient-neutral twins
TREND_EPOCHS = 8  # the trajectory's growth is judged on the slope over its last epochs
PUBLISHED_GRAD_RATIO = 4.0  # layer-0 gradient norm, subtract / clamp [summary]; the epoch it was measured at is unknown


def resolve(p: dict) -> dict:
    """Check the notebook's parameters and fill the None ones from the profile. No compute."""
    s = common.profile_settings(p, PROFILES)
    common.check_dataset(s, p, PROFILES)
    params.seeds("seeds", s["seeds"])
    params.seeds("dose_seeds", s["dose_seeds"], 0)
    params.seeds("trajectory_seeds", s["trajectory_seeds"], 0)
    params.integer("trajectory_epochs", s["trajectory_epochs"], 1)
    s["margin_modes"] = params.choices("margin_modes", p.get("margin_modes"), MARGIN_MODES)
    s["stabilizers"] = params.choices("stabilizers", p.get("stabilizers"), STABILIZERS)
    common.check_training(s, p)
    s["dose_m0"] = params.number("dose_m0", p.get("dose_m0"), 0.0, 1.0)
    params.seeds("trajectory_seeds", s["trajectory_seeds"], 0)
    params.integer("trajectory_epochs", s["trajectory_epochs"], 1)
    # Every run config goes through CFFConfig once here, so a bad combination fails now.
    plan(s)
    return s


def _config(s: dict, **run) -> CFFConfig:
    return common.run_config(s, dataset=s["dataset"], dataset_options=s["dataset_options"], **run)


def plan(s: dict) -> list[CFFConfig]:
    """The run configs: the factorial cells x seeds, the dose-response clamp runs, then the layer-0
    trajectory runs (``layers=1``, ``trajectory_epochs``, clamp and subtract x ``trajectory_seeds``)."""
    configs = [_config(s, margin_mode=mode, stabilizer=stab, m0=s["m0"], seed=seed)
               for mode in s["margin_modes"] for stab in s["stabilizers"] for seed in range(s["seeds"])]
    if "clamp" in s["margin_modes"] and s["dose_m0"] != s["m0"]:
        configs += [_config(s, margin_mode="clamp", stabilizer=s["stabilizers"][0], m0=s["dose_m0"], seed=seed)
                    for seed in range(s["dose_seeds"])]
    configs += [_config(s, layers=1, epochs=s["trajectory_epochs"], margin_mode=mode, stabilizer=TRAJECTORY_STABILIZER,
                        m0=s["m0"], seed=seed, **TRAJECTORY_OVERRIDES)
                for mode in common.ARMS for seed in range(s["trajectory_seeds"])]
    return configs


def runs_frame(records: list[dict]) -> pd.DataFrame:
    """One row per run: the factors (``layers``/``epochs`` set the trajectory runs apart) and the scalar
    metrics the analysis needs."""
    return common.runs_frame(records)


def curves_frame(records: list[dict]) -> pd.DataFrame:
    """Long table of per-epoch, per-layer curves (loss, CAR, gradient norm) of every run."""
    return common.curves_frame(records)


def main_runs(frame: pd.DataFrame, s: dict) -> pd.DataFrame:
    """The factorial's runs (at ``m0``) and the dose-response runs (at ``dose_m0``) of a runs or curves
    frame: those of the settings' model size and length, which leaves the trajectory runs out."""
    return frame[(frame.layers == s["layers"]) & (frame.epochs == s["epochs"])]


def trajectory_runs(frame: pd.DataFrame, s: dict) -> pd.DataFrame:
    """The layer-0 trajectory runs of a runs or curves frame."""
    return frame[(frame.layers == 1) & (frame.epochs == s["trajectory_epochs"]) & (frame.m0 == s["m0"])
                 & (frame.stabilizer == TRAJECTORY_STABILIZER)]


def stabilizer_pairs(main: pd.DataFrame) -> dict:
    """Compare detach and direct runs of the same margin mode and seed.

    The two stabilisers give the same gradients in exact arithmetic. With L2-normalised features
    the row max is the diagonal s_ii / tau = 1 / tau, whose gradient through the normalisation is
    zero, so in practice the runs can agree bit for bit; then each pair is one observation.
    """
    wide = main.pivot_table(index=["margin_mode", "seed"], columns="stabilizer", values="top1", aggfunc="first")
    if wide.shape[1] < 2:
        return {"pairs": 0, "identical": 0, "max_abs_diff_pts": float("nan")}
    diff = (wide.iloc[:, 0] - wide.iloc[:, 1]).dropna()
    return {"pairs": len(diff), "identical": int((diff == 0).sum()), "max_abs_diff_pts": float(100 * diff.abs().max())}


def analyze(runs: pd.DataFrame, s: dict) -> dict:
    """Every quantity of docs/studies.md, "Study 1", from the runs frame (its factorial and dose-response runs,
    :func:`main_runs`). Accuracies and CAR in percent. The gradient-norm ratio and its Welch test count
    a seed's detach and direct runs once (their mean): ``grad_norm_*`` of the all-epoch means, ``final``
    (:func:`common.final_epoch`) of the last epoch, with the CAR of both arms there."""
    factorial = main_runs(runs, s)
    ok = factorial[factorial.status == "ok"]
    main = ok[ok.m0 == s["m0"]]
    clamp = main[main.margin_mode == "clamp"]
    subtract = main[main.margin_mode == "subtract"]
    out: dict = {"n_ok": len(ok), "n_not_ok": len(factorial) - len(ok), "m0": s["m0"], "dose_m0": s["dose_m0"],
                 "epochs": s["epochs"]}
    out["cells"] = (main.groupby(["margin_mode", "stabilizer"])
                    .agg(n=("top1", "size"), mean_top1=("top1", "mean"), std_top1=("top1", "std"),
                         var_top1=("top1", "var"), car_layer0=("car_layer0", "mean"),
                         grad_norm_layer0=("grad_norm_layer0", "mean"), car_layer0_final=("car_layer0_final", "mean"),
                         grad_norm_layer0_final=("grad_norm_layer0_final", "mean"))
                    .reset_index())
    arms = common.compare_margin_arms(main)
    if arms is not None:
        a, b = 100 * clamp.top1.to_numpy(), 100 * subtract.top1.to_numpy()
        out["pooled"], out["welch"] = arms["variance"], arms["welch"]
        for key in ("mean_clamp", "mean_subtract", "car_layer0_clamp", "car_layer0_subtract"):
            out[key] = arms[key]
        # all-epoch means, one observation per seed (detach/direct twins averaged)
        seeds = common.seed_observations(main, [], ["grad_norm_layer0"])
        grad = {mode: seeds[seeds.margin_mode == mode].grad_norm_layer0.to_numpy() for mode in common.ARMS}
        out["grad_norm_ratio_subtract_over_clamp"] = grad["subtract"].mean() / grad["clamp"].mean()
        out["grad_norm_welch"] = stats.welch_t_test(grad["subtract"], grad["clamp"])
        out["final"] = common.final_epoch(main).iloc[0].to_dict()  # both arms have runs: one row
        # None when every subtract run has the same accuracy: no observed ratio to plan for
        out["power"] = stats.seeds_for_power(a, b) if np.var(b, ddof=1) > 0 else None
        out["stabilizer_pairs"] = stabilizer_pairs(main)
        if out["stabilizer_pairs"]["identical"] and len(s["stabilizers"]) > 1:
            # Identical twins are one observation, not two: test on one stabiliser's runs alone.
            first = main[main.stabilizer == s["stabilizers"][0]]
            out["one_stabilizer"] = variance_comparison(100 * first[first.margin_mode == "clamp"].top1.to_numpy(),
                                                        100 * first[first.margin_mode == "subtract"].top1.to_numpy())
        if main.stabilizer.nunique() > 1 or main.margin_mode.nunique() > 1:
            frame = main.assign(top1_pct=100 * main.top1)
            out["anova"] = stats.two_way_anova(frame, "top1_pct", "margin_mode", "stabilizer")
        dose = ok[(ok.m0 == s["dose_m0"]) & (ok.margin_mode == "clamp")]
        if s["dose_m0"] != s["m0"] and len(dose) >= 2:
            out["dose"] = variance_comparison(100 * dose.top1.to_numpy(), b)
            out["dose_car_layer0"] = 100 * dose.car_layer0.mean()
    return out


def trajectory_experiment(curves: pd.DataFrame, s: dict) -> dict | None:
    """The layer-0 trajectory runs of a curves frame: their per-epoch table
    (:func:`common.layer0_trajectory`) and the trend of the gradient-norm ratio over the last
    ``TREND_EPOCHS`` epochs (:func:`common.ratio_trend`); None unless both arms have a finished run."""
    runs = trajectory_runs(curves[curves.status == "ok"], s)
    if not set(common.ARMS) <= set(runs.margin_mode):
        return None
    return dict(table=common.layer0_trajectory(runs), trend=common.ratio_trend(runs, TREND_EPOCHS),
                epochs=s["trajectory_epochs"])


def trend_verdict(trend: dict) -> str:
    """Does the gradient-norm ratio keep growing toward the published 4.0x? From the final epoch's ratio
    and CI and the slope (with its CI) over the last epochs."""
    r, low, high, slope = trend["ratio"], trend["ratio_low"], trend["ratio_high"], trend["slope"]
    last = f"over the last {trend['fitted']} epochs"
    if not np.isfinite(trend["slope_low"]):
        growth = "growth not measured (fewer than two epochs or seeds per arm)"
    elif trend["slope_low"] > 0:
        growth = f"still growing {last}"
    elif trend["slope_high"] < 0:
        growth = f"falling {last}"
    else:
        growth = f"levelled off: no significant slope {last}"
    target = PUBLISHED_GRAD_RATIO
    if high < 1:
        return f"direction not reproduced: the gradient norm is higher under clamp at the final epoch; {growth}"
    if low <= target <= high:
        return f"magnitude reproduced at the final epoch ({target:.1f}x within the 95% CI); {growth}"
    if low > target:
        return f"larger than the published {target:.1f}x at the final epoch; {growth}"
    if growth.startswith("still growing"):
        reach = trend["final_epoch"] + (target - r) / slope
        return (f"below {target:.1f}x, {growth}: a straight line through them would reach {target:.1f}x near epoch "
                f"{reach:.0f} (an extrapolation, not a measurement)")
    return f"below {target:.1f}x and {growth}; not growing toward {target:.1f}x at this scale"


def paper_vs_reproduced(out: dict, trajectory: dict | None = None) -> pd.DataFrame:
    """Our number, the paper's, the evidence tag and an honest verdict for each published claim.

    The layer-0 CAR and gradient-norm rows compare the final epoch (the paper's epoch is unknown), with
    the all-epoch mean beside it; ``trajectory`` (:func:`trajectory_experiment`, None when it did not
    run) adds the row of the layer-0 trajectory experiment.
    """
    rows = []

    def row(quantity, ours, paper, tag, verdict):
        rows.append(dict(quantity=quantity, ours=ours, paper=paper, evidence=tag, verdict=verdict))

    if "pooled" not in out:
        row("everything", "too few finished runs", "", "", "not measured")
        return pd.DataFrame(rows)
    p = out["pooled"]
    measured = np.isfinite(p["vr"])  # not when every subtract run has the same accuracy
    row("VR = Var(clamp)/Var(subtract), pooled", f"{p['vr']:.2f}", "5.90", "[paper]",
        common.verdict_variance_ratio(p["vr"], p["f_p"], 5.90))
    row("F-test p (two-sided)", f"{p['f_p']:.3g}", "0.003", "[paper]",
        "not measured" if not measured else
        "not reproduced at this scale (p >= 0.05)" if p["f_p"] >= 0.05 else
        "reproduced (p < 0.05)" if p["vr"] > 1 else "not reproduced: p < 0.05, but clamp's variance is the smaller")
    row("bootstrap 95% CI of VR", f"[{p['ci_low']:.2f}, {p['ci_high']:.2f}]", "[1.62, 15.80]", "[paper]",
        "not measured" if not measured else
        "excludes 1, as published" if p["ci_low"] > 1 else
        ("excludes 1, opposite side" if p["ci_high"] < 1 else "includes 1: not reproduced at this scale"))
    if "one_stabilizer" in out:
        o = out["one_stabilizer"]
        row(f"VR on one stabiliser's runs only ({o['n_a']} vs {o['n_b']}; F-test p)",
            f"{o['vr']:.2f} (p = {o['f_p']:.3g})",
            "5.90 (p = 0.003)", "[ours]", common.verdict_variance_ratio(o["vr"], o["f_p"], 5.90)
            + "; the honest test when detach and direct runs are identical twins")
    sp = out["stabilizer_pairs"]
    if sp["pairs"]:
        row("detach vs direct at the same seed",
            f"{sp['identical']}/{sp['pairs']} identical, max |diff| {sp['max_abs_diff_pts']:.3g} pts",
            "gradient-neutral: can act only through floating point", "[ours]",
            "identical twins: pooling them doubles the F-test's degrees of freedom" if sp["identical"] == sp["pairs"]
            else "differ through floating point only" if sp["max_abs_diff_pts"] < 5
            else "differ by more than floating point should explain")
    f = out["final"]
    at = f"at epoch {f['epoch']:.0f} of {out['epochs']} (final; the paper's epoch is unknown)"
    car = f["car_clamp"]
    row("layer-0 clamp activation rate (clamp arm), final epoch",
        f"{car:.1f}% (95% CI [{f['car_clamp_low']:.1f}, {f['car_clamp_high']:.1f}]) {at}; "
        f"all-epoch mean {out['car_layer0_clamp']:.1f}%", "60.7%", "[paper]",
        "close (within 15 points)" if abs(car - 60.7) <= 15 else "differs by more than 15 points")
    w = out["welch"]
    row("mean top-1 difference clamp - subtract (Welch p)",
        f"{out['mean_clamp'] - out['mean_subtract']:+.2f} pts (p = {w.p_value:.2g})", "none (p = 0.92)", "[summary]",
        "reproduced (no significant difference)" if w.p_value >= 0.05 else "not reproduced: the means differ")
    g, gp = f["grad_norm_ratio"], f["grad_norm_welch_p"]
    if not np.isfinite(gp):
        g_verdict = "not measured: fewer than two seeds per arm"
    elif gp >= 0.05:
        g_verdict = "not reproduced at this scale: no significant difference"
    elif g > 1:
        g_verdict = "direction reproduced (lower under clamp)" + (", magnitude close" if 2.0 <= g <= 8.0
                                                                  else ", magnitude differs")
    else:
        g_verdict = "not reproduced at this scale: higher under clamp"
    row("layer-0 gradient norm, subtract / clamp, final epoch (95% CI; Welch p)",
        f"{g:.2f}x ([{f['ratio_low']:.2f}, {f['ratio_high']:.2f}]; p = {gp:.2g}) {at}; all-epoch mean "
        f"{out['grad_norm_ratio_subtract_over_clamp']:.2f}x (p = {out['grad_norm_welch'].p_value:.2g})",
        f"{PUBLISHED_GRAD_RATIO:.1f}x", "[summary]", g_verdict)
    if trajectory is not None:
        t = trajectory["trend"]
        row(f"layer 0 alone, {trajectory['epochs']} epochs: gradient norm, subtract / clamp, final epoch "
            f"(95% CI; slope per epoch over the last {t['fitted']})",
            f"{t['ratio']:.2f}x ([{t['ratio_low']:.2f}, {t['ratio_high']:.2f}]) at epoch {t['final_epoch']}; "
            f"slope {t['slope']:+.3f} ([{t['slope_low']:+.3f}, {t['slope_high']:+.3f}])",
            f"{PUBLISHED_GRAD_RATIO:.1f}x (epoch unknown)", "[summary]", trend_verdict(t))
    if "dose" in out and np.isfinite(out["dose"]["vr"]) and measured:
        d, m0 = out["dose"], f"m0 = {out['m0']:g}"
        smaller = d["vr"] < p["vr"]
        row(f"dose-response: VR with m0 = {out['dose_m0']:g} (F-test p)", f"{d['vr']:.2f} (p = {d['f_p']:.2g})",
            "2.98", "[summary]",
            (f"reproduced: smaller than at {m0}" if smaller and d["vr"] > 1 else
             f"smaller than at {m0}, but not above 1" if smaller else
             f"not reproduced as a dose-response: VR is larger than at {m0}"
             + (" (and clamp variance is significantly above subtract's)" if d["vr"] > 1 and d["f_p"] < 0.05 else "")))
    if np.isfinite(p["vr"]) and p["vr"] > 0:
        row("seeds of subtract that match 11 clamp seeds (11 / VR)", f"{11 / p['vr']:.1f}", "about 2", "[summary]",
            "reproduced (within 1 seed)" if abs(11 / p["vr"] - 1.86) <= 1
            else "not reproduced: VR <= 1, so subtract needs as many seeds or more" if p["vr"] <= 1 else "differs")
    return pd.DataFrame(rows)
