"""One run of study 6 (stop-gradient and collapse): its typed config and the function that trains it.

Four experiments, one record per (experiment, mode, r, seed):

* ``embedding`` -- the embedding-only model: gradient descent through autograd, the hand-written flow
  (Euler, the same steps; RK4) and the closed form; the fitted slow and fast rates.
* ``head`` -- the shared head W with stop-gradient (``sg``) and without (``no_sg``); the W^2 spectrum.
* ``teacher_student`` -- a linear student on the inputs of a linear teacher, sg and no_sg.
* ``real`` -- the same student on real images (digits or MNIST) with a fraction r of each class frustrated.

The model is in :mod:`lib.collapse.model`, its closed forms in :mod:`lib.collapse.theory`, the student in
:mod:`lib.collapse.student`.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import torch

from lib.collapse import model, student, theory
from lib.core import params
from lib.core.config import Config
from lib.core.data import DATASETS, get_dataset

EXPERIMENTS = ("embedding", "head", "teacher_student", "real")
HEAD_MODES = ("sg", "no_sg")  # a head with stop-gradient | without: gradients flow into the targets
# A synthetic experiment's data, which a record names as its dataset; ``real`` names the image dataset.
SYNTHETIC_DATA = {"embedding": "synthetic", "head": "synthetic", "teacher_student": "teacher_student"}
# The fields each experiment reads besides those every run reads (experiment, r, seed, steps, embed_dim,
# gamma, dt, readout_noise, dataset). The real experiment takes its classes and samples from its dataset.
USES = {
    "embedding": ("num_classes", "samples_per_class"),
    "head": ("num_classes", "samples_per_class", "mode", "head_init", "head_rate"),
    "teacher_student": ("num_classes", "samples_per_class", "input_dim", "input_noise", "mode", "head_init",
                        "head_rate"),
    "real": ("train_subset", "mode", "head_init", "head_rate"),
}
MIN_STEPS = 10  # fewer leaves too few recorded points to fit a rate or read a trend

# Fits of the slow rate start once the fast contrast mode has died out: its share of a label distance
# falls as exp(-2 gamma sqrt(1 - r) t), below 1e-6 by gamma t = 10 for r <= 0.6.
FIT_START_GAMMA_T = 10.0


@dataclasses.dataclass(frozen=True)
class CollapseConfig(Config):
    """One study-6 run. The defaults are the ``quick`` profile's sizes and the study's rates [ours].

    A field the run's experiment does not read (``USES``) is stored as None, whatever was passed: a record
    then shows which settings its run depended on, runs of different experiments stay comparable in one
    table (every record has every field), and changing a setting (say ``input_noise``) changes the run id
    of exactly the runs it affects, so no other shipped run is re-run for it. The dataset of a synthetic
    experiment is its own name (``SYNTHETIC_DATA``).
    """

    experiment: str = "embedding"  # one of EXPERIMENTS
    r: float = 0.0  # the frustrated fraction of each class, in [0, 1)
    seed: int = 0  # the random start of samples, labels, inputs and readout noise
    steps: int = 3000  # integration (gradient-descent) steps of size dt
    embed_dim: int = 16  # d: embedding dimension
    gamma: float = 1.0  # γ: the gradient-flow rate
    dt: float = 0.1  # the time step; a block's gradient-descent learning rate is its rate times dt
    readout_noise: float = 0.05  # std of a fixed Gaussian noise added to predictions before the nearest-label readout
    dataset: str = "digits"  # the real experiment's images (lib.core.data.DATASETS)
    mode: str | None = "sg"  # the head's gradients: HEAD_MODES
    head_init: float | None = 1.0  # W(0) = head_init * I [ours]
    head_rate: float | None = 10.0  # W's rate in units of γ [ours]: the head adapts faster than the embeddings
    num_classes: int | None = 10  # n: classes, one label embedding each
    samples_per_class: int | None = 20  # m: samples per class; r * m must be a whole number
    input_dim: int | None = 32  # D: the teacher's input dimension
    input_noise: float | None = 0.05  # norm of the teacher's input noise, against unit-norm class prototypes [ours]
    train_subset: int | None = 0  # training images of the real experiment (0: all)

    def __post_init__(self):
        def put(name, value):  # frozen: checked values (floats as floats) are stored through object.__setattr__
            object.__setattr__(self, name, value)

        experiment = params.choice("experiment", self.experiment, EXPERIMENTS)
        uses = USES[experiment]
        for name in {n for names in USES.values() for n in names} - set(uses):
            put(name, None)
        put("dataset", SYNTHETIC_DATA.get(experiment) or params.choice("dataset", self.dataset, DATASETS))
        if "num_classes" in uses:
            put("num_classes", params.integer("num_classes", self.num_classes, 2))
        put("embed_dim", params.integer("embed_dim", self.embed_dim, 1))
        if "num_classes" in uses and self.embed_dim < self.num_classes:  # W^2 on the labels' span needs d >= n
            params.fail("embed_dim", self.embed_dim,
                        f"an integer >= num_classes={self.num_classes} (the labels must span n directions)")
        if "samples_per_class" in uses:
            put("samples_per_class", params.integer("samples_per_class", self.samples_per_class, 2))
        put("r", self._checked_r())
        put("seed", params.integer("seed", self.seed, 0))
        put("gamma", params.number("gamma", self.gamma, 0.0, low_open=True))
        put("dt", params.number("dt", self.dt, 0.0, low_open=True))
        if self.gamma * self.dt > 0.5:  # Euler is stable for rates < 2/dt; the fast rate is up to 2 gamma
            params.fail("dt", self.dt, f"a number with gamma*dt <= 0.5 (gamma={self.gamma})")
        put("steps", params.integer("steps", self.steps, MIN_STEPS))
        put("readout_noise", params.number("readout_noise", self.readout_noise, 0.0))
        if "input_dim" in uses:
            put("input_dim", params.integer("input_dim", self.input_dim, self.num_classes))
            put("input_noise", params.number("input_noise", self.input_noise, 0.0))
        if "train_subset" in uses:
            put("train_subset", params.integer("train_subset", self.train_subset, 0))
        if "mode" in uses:
            put("mode", params.choice("mode", self.mode, HEAD_MODES))
            put("head_init", params.number("head_init", self.head_init, 0.0, 10.0, low_open=True))
            put("head_rate", params.number("head_rate", self.head_rate, 0.0, 100.0, low_open=True))

    @classmethod
    def from_legacy(cls, values: dict) -> CollapseConfig:
        """A record's config of an earlier schema: the embedding dimension was called ``dim``."""
        values = dict(values)
        if "dim" in values:
            values["embed_dim"] = values.pop("dim")
        return cls.from_dict(values)

    def _checked_r(self) -> float:
        m = self.samples_per_class
        allowed = "a number in [0, 1)" + (f" with r * samples_per_class={m} a whole number" if m else "")
        r = self.r
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r < 1:
            params.fail("r", r, allowed)
        if m:
            try:
                model.frustrated_per_class(m, r)
            except ValueError:
                params.fail("r", r, allowed)
        return float(r)


def train_collapse(config: CollapseConfig, *, data_root: str | None = None, progress: bool | None = None) -> dict:
    """One run of ``config.experiment``: the metrics of its record (curves and scalars), with "status".

    ``data_root`` is read by the real experiment only; ``progress`` is accepted for the common signature of
    training functions (runs are short, docs/notes/collapse.md: no progress bar).
    """
    t0 = time.perf_counter()
    metrics = {"embedding": _run_embedding, "head": _run_head, "teacher_student": _run_teacher_student,
               "real": _run_real}[config.experiment](config, data_root)
    metrics["status"] = "ok" if metrics.pop("finite") else "diverged"
    metrics["train_s"] = time.perf_counter() - t0
    return metrics


def _synthetic_start(c: CollapseConfig):
    """The attachment and the seed's starting embeddings (the same u0, v0 for every r and experiment)."""
    att = model.balanced_attachment(c.num_classes, c.samples_per_class, c.r)
    gen = torch.Generator().manual_seed(c.seed)
    u0, v0 = model.init_embeddings(att, c.embed_dim, gen)
    noise = model.readout_noise(att.num_samples, c.embed_dim, c.readout_noise, gen)
    return att, u0, v0, noise


def _curve_scalars(tr: dict) -> dict:
    """End-of-run scalars of a trajectory: label distance relative to its start, final and best accuracies."""
    d = np.asarray(tr["min_label_distance"])
    out = {"min_label_distance_final_ratio": float(d[-1] / d[0]), "min_label_distance_min_ratio": float(d.min() / d[0])}
    for key in ("accuracy", "accuracy_noisy", "test_accuracy", "test_accuracy_noisy"):
        if tr.get(key):
            out[f"{key}_final"] = tr[key][-1]
            out[f"{key}_max"] = max(tr[key])
    return out


STUDENT_CURVES = ("t", "min_label_distance", "accuracy", "accuracy_noisy", "test_accuracy", "test_accuracy_noisy")


def _run_embedding(c: CollapseConfig, data_root) -> dict:
    """GD through autograd, the hand-written flow (Euler: the same steps; RK4) and the closed form."""
    att, u0, v0, noise = _synthetic_start(c)
    kw = dict(mode="none", gamma=c.gamma, dt=c.dt, steps=c.steps, noise=noise)
    gd = model.simulate(att, u0, v0, integrator="gd", **kw)
    euler = model.simulate(att, u0, v0, integrator="euler", record=[c.steps], **kw)
    rk4 = model.simulate(att, u0, v0, integrator="rk4", **kw)
    closed = theory.closed_form_min_label_distance(att, u0, v0, c.gamma, gd["t"])
    r, g, dt = att.r, c.gamma, c.dt
    fit = dict(t_min=FIT_START_GAMMA_T / g)
    slow, fast = theory.slow_rate(r, g), theory.fast_rate(r, g)
    closed_arr, rk4_arr = np.asarray(closed), np.asarray(rk4["min_label_distance"])
    resolvable = closed_arr > 1e-10 * closed_arr[0]  # above float64 rounding of the label positions
    return {
        "finite": gd["finite"] and rk4["finite"],
        "r_effective": r,
        "slow_rate_theory": slow,
        "slow_rate_theory_gd": theory.euler_rate(slow, dt),
        "slow_rate_small_r": g * r / 2,
        "slow_rate_fit_gd": theory.fit_decay_rate(gd["t"], gd["min_label_distance"], **fit),
        "slow_rate_fit_rk4": theory.fit_decay_rate(rk4["t"], rk4["min_label_distance"], **fit),
        "fast_rate_theory": fast,
        "fast_rate_theory_gd": theory.euler_rate(fast, dt),
        "fast_rate_fit_gd": theory.fit_decay_rate(gd["t"], gd["fast_mode_amplitude"]),
        "fast_rate_fit_rk4": theory.fit_decay_rate(rk4["t"], rk4["fast_mode_amplitude"]),
        "gd_vs_euler_max_abs_diff": max(float((gd[k] - euler[k]).abs().max()) for k in ("u", "v")),
        "rk4_vs_closed_form_max_rel_diff": float(np.max(np.abs(rk4_arr - closed_arr)[resolvable]
                                                        / closed_arr[resolvable])),
        "closed_form_limit_ratio": closed[-1] / closed[0],
        **_curve_scalars(gd),
        "curves": {"t": gd["t"], "min_label_distance": gd["min_label_distance"], "accuracy": gd["accuracy"],
                   "accuracy_noisy": gd["accuracy_noisy"], "fast_mode_amplitude": gd["fast_mode_amplitude"],
                   "min_label_distance_rk4": rk4["min_label_distance"], "min_label_distance_closed_form": closed},
    }


def _run_head(c: CollapseConfig, data_root) -> dict:
    """The head model, integrated with the hand-written flow's Euler step (the steps of gradient descent)."""
    att, u0, v0, noise = _synthetic_start(c)
    tr = model.simulate(att, u0, v0, model.head_start(c.embed_dim, c.head_init), mode=c.mode, gamma=c.gamma,
                           dt=c.dt, steps=c.steps, head_rate=c.head_rate, integrator="euler", noise=noise)
    out = {"finite": tr["finite"], "r_effective": att.r, **_curve_scalars(tr),
           "curves": {k: tr[k] for k in ("t", "min_label_distance", "accuracy", "accuracy_noisy")}}
    if tr["finite"]:
        du, dv, dW = model.flow(tr["u"], tr["v"], att, tr["W"], c.mode, c.gamma, c.head_rate)
        out["final_speed"] = float(torch.cat([du.flatten(), dv.flatten(), dW.flatten()]).norm())
        if c.mode == "sg":  # without stop-gradient the labels collapse and their span is ill-defined
            spectrum = model.w2_spectrum(tr["W"], tr["v"])
            out.update(w2_eigenvalues=spectrum["eigenvalues"], w2_mean_direction=spectrum["mean_direction"],
                       w2_class_min=min(spectrum["class_directions"]), w2_class_max=max(spectrum["class_directions"]))
    return out


def _run_teacher_student(c: CollapseConfig, data_root) -> dict:
    att = model.balanced_attachment(c.num_classes, c.samples_per_class, c.r)
    gen = torch.Generator().manual_seed(c.seed)
    x, teacher = student.teacher_inputs(att, c.input_dim, c.input_noise, gen)
    # A clean test set from the same teacher: how well the student classifies unseen inputs.
    test = model.balanced_attachment(c.num_classes, c.samples_per_class, 0.0)
    x_test = (torch.nn.functional.one_hot(test.labels, c.num_classes).to(model.DTYPE) @ teacher.T
              + c.input_noise / math.sqrt(c.input_dim) * torch.randn(test.num_samples, c.input_dim, generator=gen,
                                                                     dtype=model.DTYPE))
    tr = student.train_student(x, att, dim=c.embed_dim, mode=c.mode, gamma=c.gamma, dt=c.dt, steps=c.steps,
                                        head_init=c.head_init, head_rate=c.head_rate, readout_std=c.readout_noise,
                                        generator=gen, x_test=x_test, y_test=test.labels)
    return {"finite": tr["finite"], "r_effective": att.r, "num_classes": att.num_classes, **_curve_scalars(tr),
            "curves": {k: tr[k] for k in STUDENT_CURVES}}


def _run_real(c: CollapseConfig, data_root) -> dict:
    ds = get_dataset(c.dataset, data_root=data_root)
    gen = torch.Generator().manual_seed(c.seed)
    idx = torch.randperm(len(ds.y_train), generator=gen)
    if c.train_subset:
        idx = idx[: c.train_subset]
    x, mean, std, scale = student.image_inputs(ds.x_train[idx])
    x_test = student.image_inputs(ds.x_test, mean, std, scale)[0]
    y = ds.y_train[idx]
    att = model.attachment(y, model.random_frustration(y, c.r, gen), ds.num_classes)
    tr = student.train_student(x, att, dim=c.embed_dim, mode=c.mode, gamma=c.gamma, dt=c.dt, steps=c.steps,
                                        head_init=c.head_init, head_rate=c.head_rate, readout_std=c.readout_noise,
                                        generator=gen, x_test=x_test, y_test=ds.y_test)
    return {"finite": tr["finite"], "r_effective": att.r, "num_classes": att.num_classes, "train_images": len(y),
            **_curve_scalars(tr), "curves": {k: tr[k] for k in STUDENT_CURVES}}
