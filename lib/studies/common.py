"""Pieces the CFF studies (1-3) share: profile settings, run configs, the run table, and the
clamp-against-subtract comparison with its verdict.

Study 1 (``margin_factorial``) defines the comparison; studies 2 (``cross_dataset``) and 3
(``difficulty_sweep``) repeat it per dataset and per difficulty level, so it lives here once.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch

from lib import params, stats
from lib.batched import train_cff_seeds
from lib.cff import CFFConfig
from lib.data import DATASETS
from lib.losses import MARGIN_MODES, STABILIZERS

# The CFFConfig fields every CFF notebook has as parameters, passed to each run's config. A parameter
# left as None takes the profile's value, else CFFConfig's default (the one place a default lives).
CONFIG_PARAMETERS = ("layers", "embed_dim", "heads", "patch", "epochs", "batch_size", "train_subset", "probe_epochs",
                     "m0", "m_last", "temperature", "lr", "init", "normalization", "eval_protocol")
TRAINING_INTEGERS = ("layers", "embed_dim", "heads", "patch", "epochs", "batch_size", "probe_epochs", "workers")


def config_default(name: str) -> Any:
    """CFFConfig's default of field ``name``."""
    field = CFFConfig.__dataclass_fields__[name]
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


def profile_settings(p: dict, profiles: dict) -> dict:
    """Check ``p["profile"]``; each profile key and config parameter from ``p`` unless it is None there,
    else from the profile, else CFFConfig's default."""
    profile = params.choice("profile", p.get("profile"), profiles)
    chosen = profiles[profile]
    s = {k: (chosen[k] if p.get(k) is None else p[k]) for k in chosen}
    for k in CONFIG_PARAMETERS:
        if k not in s:
            s[k] = config_default(k) if p.get(k) is None else p[k]
    s["profile"] = profile
    return s


def check_dataset(s: dict, p: dict, profiles: dict) -> None:
    """Check ``dataset`` and ``dataset_options``; a dataset other than the profile's drops the profile's options."""
    params.choice("dataset", s["dataset"], DATASETS)
    if p.get("dataset_options") is None and s["dataset"] != profiles[s["profile"]]["dataset"]:
        s["dataset_options"] = {}  # the profile's options belong to the profile's dataset
    if not isinstance(s["dataset_options"], dict) or (not DATASETS[s["dataset"]].options and s["dataset_options"]):
        params.fail("dataset_options", s["dataset_options"],
                    f"a dict of lib.data.load_dataset options ({{}}: {s['dataset']} takes none)")


def check_arms(s: dict, p: dict) -> None:
    """Check the clamp-against-subtract design of studies 2 and 3: seeds per arm, margin modes, stabiliser."""
    params.seeds("seeds", s["seeds"], 2)  # a variance needs two runs per arm
    s["margin_modes"] = params.choices("margin_modes", p.get("margin_modes"), MARGIN_MODES)
    if not {"clamp", "subtract"} <= set(s["margin_modes"]):
        params.fail("margin_modes", s["margin_modes"], "a list holding at least clamp and subtract (the VR's two arms)")
    stabilizer = p.get("stabilizer")
    s["stabilizer"] = params.choice("stabilizer", config_default("stabilizer") if stabilizer is None else stabilizer,
                                    STABILIZERS)


def check_training(s: dict, p: dict) -> None:
    """Check the shared training settings in ``s`` (each run's CFFConfig checks them again, in full)."""
    for name in TRAINING_INTEGERS:
        params.integer(name, s[name], 1)
    params.integer("train_subset", s["train_subset"], 0)
    s["m0"] = params.number("m0", s["m0"], 0.0, 1.0)
    s["m_last"] = params.number("m_last", s["m_last"], 0.0, 1.0)
    s["temperature"] = params.number("temperature", s["temperature"], 0.0, low_open=True)
    s["lr"] = params.number("lr", s["lr"], 0.0, low_open=True)
    s["force"] = params.flag("force", p.get("force", False))
    s["device"] = resolve_device(p.get("device", "auto"))


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(value: Any) -> str:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``; asking for a missing GPU fails here."""
    device = params.choice("device", value, DEVICES)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        params.fail("device", value, "'cpu' or 'auto': no CUDA device is visible")
    return device


def sweep_options(s: dict) -> dict:
    """run_sweep's keyword arguments for CFF runs: processes on the CPU, a cell's seeds batched on a GPU."""
    batched = {"device": s["device"], "batched_fn": train_cff_seeds} if s["device"] != "cpu" else {}
    return {"workers": s["workers"], "force": s["force"], **batched}


def run_config(s: dict, **run) -> CFFConfig:
    """One run's checked config: the config parameters of ``s``, overridden by ``run``."""
    return CFFConfig(**{**{k: s[k] for k in CONFIG_PARAMETERS}, **run})


def runs_frame(records: list[dict], factors: dict[str, Callable[[dict], Any]] | None = None) -> pd.DataFrame:
    """One row per run: seed, margin factors, the extra ``factors`` (name -> f(config)), metrics."""
    rows = []
    for r in records:
        c, m = r["config"], r["metrics"]
        rows.append(dict(run_id=r["run_id"], status=r["status"], seed=c["seed"], margin_mode=c["margin_mode"],
                         stabilizer=c["stabilizer"], m0=c["m0"],
                         **{name: f(c) for name, f in (factors or {}).items()},
                         top1=m.get("top1", np.nan), top5=m.get("top5", np.nan),
                         car_layer0=m.get("car_layer0", np.nan), grad_norm_layer0=m.get("grad_norm_layer0", np.nan),
                         positive_pair_density=m.get("positive_pair_density", np.nan)))
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


def verdict_variance_ratio(vr: float, p: float, published: float) -> str:
    """Reproduced only with the published direction (VR above or below 1) and p < 0.05."""
    if not np.isfinite(vr):
        return "not measured"
    if p >= 0.05:
        return ("direction only, not significant at this scale" if (vr > 1) == (published > 1)
                else "not reproduced at this scale (no significant difference in variance)")
    if (vr > 1) == (published > 1):
        return "reproduced (direction and significance)"
    return "not reproduced at this scale (significant, opposite direction)"


def plot_ratio_with_ci(ax, x, ratio, low, high, **errorbar_kwargs) -> None:
    """Points of a ratio with their CI bars on a log axis.

    A bootstrap CI of a variance ratio can be open: an upper bound of +inf (resamples with zero
    variance in the denominator) or a lower bound of 0. Such a bar is drawn to ten times the
    largest (or a tenth of the smallest) finite value, ending in an arrowhead, not left out.
    """
    ratio, low, high = (np.asarray(v, dtype=float) for v in (ratio, low, high))
    finite = np.concatenate([ratio, low[low > 0], high[np.isfinite(high)]])
    top, bottom = 10 * finite.max(), finite[finite > 0].min() / 10
    open_high, open_low = ~np.isfinite(high), ~(low > 0)
    high, low = np.where(open_high, top, high), np.where(open_low, bottom, low)
    ax.errorbar(x, ratio, yerr=[ratio - low, high - ratio], fmt="o", capsize=6, **errorbar_kwargs)
    color = ax.lines[-1].get_color()
    ax.scatter(np.asarray(x)[open_high], high[open_high], marker="^", color=color)
    ax.scatter(np.asarray(x)[open_low], low[open_low], marker="v", color=color)
