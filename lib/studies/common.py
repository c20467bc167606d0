"""Pieces the CFF studies (1-3) share: their training parameters (:class:`CFFSettings`), the run and curve tables, the
clamp-against-subtract comparison with its verdict, and the layer-0 trajectories per epoch.

Study 1 (``margin_factorial``) defines the comparison; studies 2 (``cross_dataset``) and 3
(``difficulty_sweep``) repeat it per dataset and per difficulty level, so it lives here once.

The module runs past 400 lines because each piece the three studies share lives here once: their parameters and
operating points, the conditions the papers state (CAR, ease), the run tables and the layer-0 trajectories.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pandas as pd
from scipy import stats as st

from lib.cff.training import MARGIN_RANGE, CFFConfig
from lib.core import params, settings, stats, verdicts
from lib.core.losses import MARGIN_MODES
from lib.core.settings import setting

# The condition under which the CFF papers say clamping inflates the variance: a claim of VR > 1 is judged only
# where our clamp arm reaches it. Claims about the low-CAR regime (VR < 1 elsewhere) keep their own conditions.
CAR_REGIME = verdicts.Regime("layer-0 CAR of the clamp arm, final epoch (%)", 50.0,
                             'layer-0 CAR >= 50% ("layer-0 CAR below 50% -> clamping effect likely negligible")',
                             "[summary]")


# The condition under which the MARGIN paper says a reversal comes from the task's ease (SVHN ≈ 97%, Fashion-MNIST ≈ 92%
# [summary]: "all seeds converge to similar optima"), read as the accuracy our run reaches, mean of both arms. The
# tolerance is ours: the summaries round ("≈"), and the paper's two easy sets lie 5 points apart (97 and 92) and both
# reverse, so a run within 5 points of its set's published accuracy is as easy as the easier of the sets the paper saw
# reverse; further below it, the paper's explanation does not apply.
EASE_TOLERANCE = 5.0
ACCURACY_MEASURED = "top-1 accuracy, mean of both arms (%)"


def ease_regime(published_accuracy: float, evidence: str = "[summary]") -> verdicts.Regime:
    """The condition of a claim the paper explains by the task's ease: our accuracy at least ``published_accuracy``
    minus :data:`EASE_TOLERANCE` points."""
    return verdicts.Regime(ACCURACY_MEASURED, published_accuracy - EASE_TOLERANCE,
                           f"the task is easy: accuracy about {published_accuracy:g}% (ours within "
                           f"{EASE_TOLERANCE:g} points [ours])", evidence)


def accuracy_near(published_accuracy: float, evidence: str) -> tuple[verdicts.Regime, verdicts.Regime]:
    """The two halves of "a point is matched by the accuracy it reaches" for a hard point of the difficulty sweep:
    our accuracy within :data:`EASE_TOLERANCE` points of the paper's, above and below."""
    quote = f"accuracy about {published_accuracy:g}% (ours within {EASE_TOLERANCE:g} points [ours])"
    return (verdicts.Regime(ACCURACY_MEASURED, published_accuracy - EASE_TOLERANCE, quote, evidence),
            verdicts.Regime(ACCURACY_MEASURED, published_accuracy + EASE_TOLERANCE, quote, evidence, at_least=False))


# MARGIN's abstract says where clamping matters: "moderate-accuracy regimes with many same-class pairs per batch"
# [paper]; it gives no number. Our reading [ours]: below the accuracies at which the paper reports its reversals
# (Fashion-MNIST ≈ 92%, SVHN ≈ 97% [summary]) by more than the ease tolerance, i.e. at most 87%. The many same-class
# pairs are the CAR's business (CIFAR-100's 10x sparser pairs are why its CAR falls to 29% [summary]).
MODERATE_ACCURACY = verdicts.Regime(
    ACCURACY_MEASURED, 92.0 - EASE_TOLERANCE,
    'moderate accuracy ("moderate-accuracy regimes" [paper]; ours at most 87%, 5 points under the 92% at which the '
    "paper's reversals begin [ours])", "[paper]/[ours]", at_least=False)
VR_CONDITIONS = verdicts.Conditions((CAR_REGIME, MODERATE_ACCURACY))  # the setting of study 1's VR, both read


def mean_accuracy(frame: pd.DataFrame | None) -> float | None:
    """The accuracy an ease condition is read against: the mean top-1 (%) of a dataset's or level's finished runs of
    the two arms (:data:`ARMS`), each seed's arms averaged first (None without any)."""
    if frame is None or not len(frame):
        return None
    ok = frame[frame.status == "ok"] if "status" in frame else frame
    ok = ok[ok.margin_mode.isin(ARMS)]  # the comparison's two arms, as the verdict reads them
    per_seed = ok.groupby("seed").top1.mean()
    per_seed = per_seed[np.isfinite(per_seed)]
    return 100 * float(per_seed.mean()) if len(per_seed) else None


def clamp_car(frame: pd.DataFrame | None, column: str = "car_layer0_final") -> float | None:
    """The clamp arm's layer-0 CAR in percent, the mean over its finished runs (None without any): the value a
    claim's :data:`CAR_REGIME` is read against."""
    if frame is None or not len(frame) or column not in frame:
        return None
    values = frame[(frame.margin_mode == "clamp")][column].astype(float)
    values = values[np.isfinite(values)]
    return 100 * float(values.mean()) if len(values) else None


def margin(name: str, value, s: dict) -> float:
    """A margin that is no field of CFFConfig (study 1's ``dose_m0``), in CFFConfig's range of one
    (:data:`lib.cff.training.MARGIN_RANGE`)."""
    return params.number(name, value, *MARGIN_RANGE)


class CFFSettings(settings.ParallelRuns):
    """The parameters every CFF notebook has (studies 1-3): CFFConfig's training fields, passed to every run's
    config (:meth:`lib.core.settings.StudySettings.run_config`). A study's settings class adds its own above them.
    Every line without a check is checked by CFFConfig when the study builds its plan."""

    config = CFFConfig
    m0: Optional[float] = setting(None, "layer-0 margin (CFFConfig: {default} [code])")
    m_last: Optional[float] = setting(None, "last-layer margin; linear in between (CFFConfig: {default} [code])")
    temperature: Optional[float] = setting(None, "contrastive temperature (CFFConfig: {default} [code])")
    lr: Optional[float] = setting(None, "AdamW learning rate of every layer (CFFConfig: {default} [code])")
    layers: Optional[int] = setting(None, "encoder layers (paper: {paper})")
    embed_dim: Optional[int] = setting(None, "embedding dimension E (paper: {paper})")
    heads: Optional[int] = setting(None, "attention heads (paper: {paper})")
    patch: Optional[int] = setting(None, "patch size (paper: {paper})")
    epochs: Optional[int] = setting(None, "contrastive epochs (CFF default {paper}; MARGIN's count unknown)")
    batch_size: Optional[int] = setting(None, "images per batch, two views each (paper: {paper})")
    train_subset: Optional[int] = setting(None, "use this many training images (0: all)")
    probe_epochs: Optional[int] = setting(None, "linear-probe epochs [code: {paper}]")
    init: Optional[str] = setting(None, "cff: CFF's initialisation [code] | trunc_normal: position std 0.02 [ours]")
    normalization: Optional[str] = setting(None, "fixed: the dataset's constants, CFF's for CIFAR [code] | subset: its "
                                                 "own")
    eval_protocol: Optional[str] = setting(None, "cff: best-validation encoder, probe on augmented views [code] | "
                                                 "clean")
    device: str = setting("auto", "auto | cpu | cuda: on a GPU the seeds of a cell train as one batched model",
                          settings.device())


def margin_modes_with_both_arms(name: str, value, s: dict) -> list[str]:
    """The margin modes of studies 2 and 3: at least clamp and subtract, the variance ratio's two arms."""
    modes = params.choices(name, value, MARGIN_MODES)
    if not {"clamp", "subtract"} <= set(modes):
        params.fail(name, modes, "a list holding at least clamp and subtract (the VR's two arms)")
    return modes


def cff_sweep_options(s: dict, batched_fn: Callable) -> dict:
    """run_sweep's keyword arguments for CFF runs: processes on the CPU; on a GPU a cell's seeds batched by
    ``batched_fn`` (``lib.cff.batched.train_cff_seeds``, which each study module passes in, so that this module
    stands below the batched trainer and the study modules one floor lower)."""
    batched = {"device": s["device"], "batched_fn": batched_fn} if s["device"] != "cpu" else {}
    return {"workers": s["workers"], "force": s["force"], **batched}


def _factors(c: dict, factors: dict[str, Callable[[dict], Any]] | None) -> dict:
    """The columns every run table shares (seed, margin factors, model size and length), then ``factors``."""
    return dict(seed=c["seed"], margin_mode=c["margin_mode"], stabilizer=c["stabilizer"], m0=c["m0"],
                layers=c["layers"], epochs=c["epochs"], **{name: f(c) for name, f in (factors or {}).items()})


def _layer0_final(m: dict, metric: str) -> float:
    """The layer-0 value of curve ``metric`` at the last epoch trained; NaN without one."""
    per_epoch = m.get("curves", {}).get(metric, [])
    return per_epoch[-1][0] if per_epoch else np.nan


def operating_point_column(frame: pd.DataFrame) -> pd.Series:
    """A runs or curves frame's ``operating_point`` column ("" at the profile's own setting); a frame without one (a
    table built by hand) holds none."""
    return frame["operating_point"] if "operating_point" in frame else pd.Series("", index=frame.index)


def shipped_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows at the profile's own setting: no operating point's (those are read apart, in the verdicts)."""
    return frame[operating_point_column(frame) == ""]


def runs_frame(records: list[dict], factors: dict[str, Callable[[dict], Any]] | None = None) -> pd.DataFrame:
    """One row per run: seed, margin factors, layers, epochs, the extra ``factors`` (name -> f(config)),
    metrics. ``car_layer0`` and ``grad_norm_layer0`` are the records' all-epoch means; the ``_final``
    columns the layer-0 values at the last epoch, read from the curves."""
    rows = []
    for r in records:
        c, m = r["config"], r["metrics"]
        rows.append(dict(run_id=r["run_id"], status=r["status"], **_factors(c, factors),
                         top1=m.get("top1", np.nan), top5=m.get("top5", np.nan),
                         car_layer0=m.get("car_layer0", np.nan), grad_norm_layer0=m.get("grad_norm_layer0", np.nan),
                         car_layer0_final=_layer0_final(m, "car"), grad_norm_layer0_final=_layer0_final(m, "grad_norm"),
                         positive_pair_density=m.get("positive_pair_density", np.nan)))
    return pd.DataFrame(rows)


def curves_frame(records: list[dict], factors: dict[str, Callable[[dict], Any]] | None = None) -> pd.DataFrame:
    """Long table of every run's curves: one row per run, metric, epoch (1-based) and layer, with the
    columns of :func:`runs_frame` that say which run it is."""
    rows = []
    for r in records:
        run = dict(run_id=r["run_id"], status=r["status"], **_factors(r["config"], factors))
        for metric, per_epoch in r["metrics"].get("curves", {}).items():
            for epoch, per_layer in enumerate(per_epoch):
                for layer, value in enumerate(per_layer):
                    rows.append(dict(run, metric=metric, epoch=epoch + 1, layer=layer, value=value))
    return pd.DataFrame(rows)


def variance_comparison(a: np.ndarray, b: np.ndarray, *, seed: int = 0) -> dict:
    """VR = Var(a)/Var(b) with the F-test, Levene, Brown-Forsythe and a bootstrap 95% CI.

    When every value of ``b`` is the same (e.g. a collapsed representation that predicts one class at
    every seed) VR is undefined: every entry but the sizes is NaN, which the tables report rather
    than fail on.
    """
    if np.var(b, ddof=1) == 0:
        return dict(n_a=len(a), n_b=len(b), vr=np.nan, f_p=np.nan, ci_low=np.nan, ci_high=np.nan,
                    levene_p=np.nan, brown_forsythe_p=np.nan)
    vr = stats.variance_ratio_test(a, b)
    lev = stats.levene_tests(a, b)
    low, high = stats.bootstrap_ratio_ci(a, b, seed=seed)
    return dict(n_a=len(a), n_b=len(b), vr=vr.ratio, f_p=vr.p_value, ci_low=low, ci_high=high,
                levene_p=lev["levene"].p_value, brown_forsythe_p=lev["brown_forsythe"].p_value)


def compare_margin_arms(runs: pd.DataFrame, metric: str = "top1") -> dict | None:
    """Clamp against subtract on finished runs: accuracy (``metric``) and layer-0 CAR in percent.

    Returns ``variance`` (:func:`variance_comparison` of the accuracy, clamp over subtract), ``welch``
    (Welch's t-test of the means, clamp - subtract), ``mean_clamp``/``mean_subtract`` and
    ``car_layer0_clamp``/``car_layer0_subtract``; None when an arm has fewer than 2 runs.
    """
    ok = runs[runs.status == "ok"]
    clamp, subtract = ok[ok.margin_mode == "clamp"], ok[ok.margin_mode == "subtract"]
    if len(clamp) < 2 or len(subtract) < 2:
        return None
    a, b = 100 * clamp[metric].to_numpy(), 100 * subtract[metric].to_numpy()
    return dict(variance=variance_comparison(a, b), welch=stats.welch_t_test(a, b),
                mean_clamp=a.mean(), mean_subtract=b.mean(),
                car_layer0_clamp=100 * clamp.car_layer0.mean(), car_layer0_subtract=100 * subtract.car_layer0.mean())


def plot_ratio_with_ci(ax, x, ratio, low, high, **errorbar_kwargs) -> None:
    """Points of a ratio with their CI bars on a log axis.

    A bootstrap CI of a variance ratio can be open: an upper bound of +inf (resamples with zero
    variance in the denominator) or a lower bound of 0. Such a bar is drawn to ten times the
    largest (or a tenth of the smallest) finite value, ending in an arrowhead, not left out.
    """
    ratio, low, high = (np.asarray(v, dtype=float) for v in (ratio, low, high))
    if not len(ratio):  # e.g. every arm's runs scored the same accuracy: no ratio is defined
        ax.text(0.5, 0.5, "no finite variance ratio to show", transform=ax.transAxes, ha="center", va="center")
        return
    finite = np.concatenate([ratio, low[low > 0], high[np.isfinite(high)]])
    top, bottom = 10 * finite.max(), finite[finite > 0].min() / 10
    open_high, open_low = ~np.isfinite(high), ~(low > 0)
    high, low = np.where(open_high, top, high), np.where(open_low, bottom, low)
    ax.errorbar(x, ratio, yerr=[ratio - low, high - ratio], fmt="o", capsize=6, **errorbar_kwargs)
    color = ax.lines[-1].get_color()
    ax.scatter(np.asarray(x)[open_high], high[open_high], marker="^", color=color)
    ax.scatter(np.asarray(x)[open_low], low[open_low], marker="v", color=color)


# --------------------------------------------------------------------------- layer-0 trajectories per epoch

ARMS = ("clamp", "subtract")  # the gradient-norm ratio is subtract over clamp
N_BOOT = 10_000  # bootstrap resamples of the ratio's CI
LEVEL = 0.95  # of every CI below


def seed_observations(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """One observation per seed: the finished runs at the same ``keys``, margin mode and seed, averaged.

    Study 1 runs every seed under two stabilisers, detach and direct, which give the same gradients in
    exact arithmetic: their runs are twins, identical or apart by floating point only, so one seed's
    outcome seen twice. Counted as two they would shrink every spread across seeds by about sqrt(2);
    averaged they are one observation (for identical twins, either one). ``runs`` counts the runs
    behind each row.
    """
    ok = frame[frame.status == "ok"]
    return (ok.groupby([*keys, "margin_mode", "seed"], as_index=False, sort=True)
            .agg(runs=("run_id", "size"), **{v: (v, "mean") for v in values}))


def _arm_matrices(seeds: pd.DataFrame, metric: str, epochs: list) -> dict[str, np.ndarray]:
    """Per arm, the seeds x epochs matrix of ``metric`` (NaN where a seed lacks an epoch)."""
    return {mode: seeds[seeds.margin_mode == mode].pivot(index="seed", columns="epoch", values=metric)
            .reindex(columns=epochs).to_numpy(dtype=float) for mode in ARMS}


def _ratio_resamples(grad: dict[str, np.ndarray], seed: int) -> np.ndarray:
    """Bootstrap resamples (N_BOOT x epochs) of mean(subtract) / mean(clamp), per epoch.

    Each arm's seeds are drawn with replacement, independently of the other arm's, and a drawn seed
    brings its whole trajectory, so one resample is a resampled experiment. The draws depend on the
    seed counts only, not on the number of epochs: the final epoch's CI is the same whether computed
    alone or with the whole trajectory.
    """
    rng = np.random.default_rng(seed)
    means = {mode: grad[mode][rng.integers(0, len(grad[mode]), size=(N_BOOT, len(grad[mode])))].mean(axis=1)
             for mode in ARMS}
    return means["subtract"] / means["clamp"]


def _mean_ci(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column (epoch): the mean over seeds (rows) and its t-interval; NaN bounds from one seed."""
    n = len(values)
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    half = st.t.ppf((1 + LEVEL) / 2, n - 1) * values.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def _trajectory(seeds: pd.DataFrame, by: list[str], seed: int) -> pd.DataFrame:
    """The per-epoch comparison of :func:`layer0_trajectory` from seed observations (columns ``epoch``,
    ``car``, ``grad_norm``). A group without both arms has no rows."""
    rows = []
    for key, group in (seeds.groupby(by, sort=True) if by else [((), seeds)]):
        if not set(ARMS) <= set(group.margin_mode):
            continue
        key = key if isinstance(key, tuple) else (key,)
        epochs = sorted(group.epoch.unique())
        car, grad = _arm_matrices(group, "car", epochs), _arm_matrices(group, "grad_norm", epochs)
        ratio = grad["subtract"].mean(axis=0) / grad["clamp"].mean(axis=0)
        if min(len(grad[mode]) for mode in ARMS) >= 2:
            low, high = np.quantile(_ratio_resamples(grad, seed), [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
            welch = [stats.welch_t_test(grad["subtract"][:, i], grad["clamp"][:, i]).p_value
                     for i in range(len(epochs))]
        else:
            low = high = welch = np.full(len(epochs), np.nan)
        columns = {f"seeds_{mode}": len(grad[mode]) for mode in ARMS}
        for mode in ARMS:
            columns.update(zip((f"car_{mode}", f"car_{mode}_low", f"car_{mode}_high"),
                               (100 * v for v in _mean_ci(car[mode]))))
        for mode in ARMS:
            columns[f"grad_norm_{mode}"] = grad[mode].mean(axis=0)
        columns.update(grad_norm_ratio=ratio, ratio_low=low, ratio_high=high, grad_norm_welch_p=welch)
        rows.append(pd.DataFrame({**dict(zip(by, key)), "epoch": epochs, **columns}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _layer0_seeds(curves: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Seed observations of the layer-0 CAR and gradient norm per epoch, from a :func:`curves_frame`."""
    layer0 = curves[(curves.layer == 0) & curves.metric.isin(["car", "grad_norm"])]
    wide = layer0.pivot(index=["run_id", "status", *by, "margin_mode", "seed", "epoch"], columns="metric",
                        values="value").reset_index()
    return seed_observations(wide, [*by, "epoch"], ["car", "grad_norm"])


def layer0_trajectory(curves: pd.DataFrame, by: tuple[str, ...] = (), *, seed: int = 0) -> pd.DataFrame:
    """Per epoch (and per ``by`` group, e.g. dataset): the layer-0 CAR of each arm and the gradient-norm
    ratio subtract / clamp, from the finished runs of a :func:`curves_frame`.

    Detach/direct twins count as one seed (:func:`seed_observations`: their mean). Per arm:
    ``seeds_<arm>``; ``car_<arm>`` in percent, the mean over seeds with its 95% t-interval
    (``_low``/``_high``); ``grad_norm_<arm>``, the mean over seeds. ``grad_norm_ratio`` is the ratio of
    the arm means; its 95% CI (``ratio_low``/``ratio_high``) is a percentile bootstrap over seeds,
    each arm resampled on its own (:func:`_ratio_resamples`, ``N_BOOT`` resamples, numpy generator
    seeded with ``seed``). Resampling the arms independently ignores that a seed shares its
    initialisation and data order across arms, which can only widen the interval. ``grad_norm_welch_p``:
    Welch's t-test of the per-seed gradient norms, subtract against clamp. CI bounds and p are NaN
    with fewer than two seeds in an arm.
    """
    return _trajectory(_layer0_seeds(curves, list(by)), list(by), seed)


def final_epoch(runs: pd.DataFrame, by: tuple[str, ...] = (), *, seed: int = 0) -> pd.DataFrame:
    """:func:`layer0_trajectory`'s columns at each run's last epoch, from a :func:`runs_frame` (its
    ``_final`` columns): one row per ``by`` group (and run length ``epochs``, the final epoch)."""
    finished = runs.assign(epoch=runs.epochs, car=runs.car_layer0_final, grad_norm=runs.grad_norm_layer0_final)
    return _trajectory(seed_observations(finished, [*by, "epoch"], ["car", "grad_norm"]), list(by), seed)


# The final-epoch columns of the per-dataset (study 2) and per-level (study 3) tables: name -> final_epoch's column.
FINAL_COLUMNS = {"final_epoch": "epoch", "car0_clamp_final": "car_clamp", "car0_subtract_final": "car_subtract",
                 "grad_ratio_final": "grad_norm_ratio", "grad_ratio_final_low": "ratio_low",
                 "grad_ratio_final_high": "ratio_high", "grad_welch_p_final": "grad_norm_welch_p"}


def final_epoch_columns(runs: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per value of column ``by``, the ``FINAL_COLUMNS`` of :func:`final_epoch` (CAR in percent), to merge
    into a summary table; a value without both arms has no row."""
    final = final_epoch(runs, (by,))
    if final.empty:
        return pd.DataFrame(columns=[by, *FINAL_COLUMNS])
    return final[[by, *FINAL_COLUMNS.values()]].rename(columns={v: k for k, v in FINAL_COLUMNS.items()})


def _slopes(epochs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Least-squares slope of ``values`` (last axis: one value per epoch) on ``epochs``."""
    x = epochs - epochs.mean()
    return (values - values.mean(axis=-1, keepdims=True)) @ x / (x @ x)


def ratio_trend(curves: pd.DataFrame, last: int = 8, *, seed: int = 0) -> dict:
    """Is the gradient-norm ratio (subtract / clamp) still growing at the end of training?

    The least-squares slope of the per-epoch ratio over the ``last`` epochs (all of them if fewer), per
    epoch, with a 95% CI from the same bootstrap as :func:`layer0_trajectory`'s ratio (whole seed
    trajectories resampled, the slope refitted to each resample), beside the final epoch's ratio and
    its CI. The slope is NaN with fewer than two epochs.
    """
    seeds = _layer0_seeds(curves, [])
    epochs = sorted(seeds.epoch.unique())
    grad = _arm_matrices(seeds, "grad_norm", epochs)
    ratio = grad["subtract"].mean(axis=0) / grad["clamp"].mean(axis=0)
    resamples = _ratio_resamples(grad, seed)
    fitted = min(last, len(epochs))
    x = np.asarray(epochs[-fitted:], dtype=float)
    slope = _slopes(x, ratio[-fitted:]) if fitted >= 2 else np.nan
    slope_low, slope_high = (np.quantile(_slopes(x, resamples[:, -fitted:]), [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
                             if fitted >= 2 else (np.nan, np.nan))
    final_low, final_high = np.quantile(resamples[:, -1], [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return dict(final_epoch=int(epochs[-1]), ratio=float(ratio[-1]), ratio_low=float(final_low),
                ratio_high=float(final_high), fitted=fitted, slope=float(slope), slope_low=float(slope_low),
                slope_high=float(slope_high))


def plot_layer0_trajectory(left, right, trajectory: pd.DataFrame, *, published_ratio: float | None = None,
                           title: str = "") -> None:
    """One :func:`layer0_trajectory` group on two axes: the CAR of both arms per epoch (``left``) and the
    gradient-norm ratio (``right``), each a mean with its 95% CI band."""
    from matplotlib.ticker import MaxNLocator

    t = trajectory
    for mode in ARMS:
        left.plot(t.epoch, t[f"car_{mode}"], marker="o", label=mode)
        left.fill_between(t.epoch, t[f"car_{mode}_low"], t[f"car_{mode}_high"], alpha=0.2)
    left.set(xlabel="epoch", ylabel="layer-0 CAR (%)", ylim=(0, 100), title=f"{title}clamp activation rate")
    left.legend(title="margin mode")
    right.plot(t.epoch, t.grad_norm_ratio, marker="o", color="black", label="ours, bootstrap 95% CI")
    right.fill_between(t.epoch, t.ratio_low, t.ratio_high, color="black", alpha=0.15)
    right.axhline(1, color="grey", linestyle="--")
    if published_ratio is not None:
        right.axhline(published_ratio, color="tab:red", linestyle=":",
                      label=f"paper: {published_ratio:.1f}x (its epoch unknown)")
    right.set(xlabel="epoch", ylabel="subtract / clamp", title=f"{title}layer-0 gradient-norm ratio")
    right.legend()
    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole
