"""A minimal model of representation collapse: frustration, stop-gradient and dynamics.

A **reconstruction** [ours] of COLLAPSE's model (Yao, Li & Liu 2026, arXiv 2604.09979) from its published
claims; the paper's equations are not public, so agreement with the claims checks our algebra and integrators,
not the paper's derivation. n labels v_b and N samples u_i in R^d; a clean sample is attached to its own label, a
frustrated one (a fraction r of each class) to every label with weight 1/n. The loss
L = 1/2 sum_ib P_ib |u_i - v_b|^2 flows with rate gamma, each block normalised by its attached weight; a shared
linear head W predicts each side of a pair from the other, with stop-gradient ("sg") or without ("no_sg"). The
flow is linear: its closed form is :mod:`lib.collapse.theory`; students that make embeddings from inputs are
:mod:`lib.collapse.student`. Integrators: "euler" (hand-written flow), "gd" (autograd, plain gradient descent),
"rk4". Observables: the minimum inter-label distance, nearest-label accuracy (exact and with a fixed readout
noise), the W^2 spectrum. Float64 throughout. The model's equations, fixed points and why stop-gradient keeps
the classes apart only while the head keeps up: ``docs/collapse-model.md``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

MODES = ("none", "sg", "no_sg")  # no head | head with stop-gradient | head, gradients into the targets
INTEGRATORS = ("gd", "euler", "rk4")  # autograd gradient descent | hand-written flow, Euler or RK4
DTYPE = torch.float64

# --------------------------------------------------------------------------- attachment


@dataclass(frozen=True)
class Attachment:
    """Which sample is attached to which label: P (N x n), the class of each sample, the frustrated mask."""

    weights: torch.Tensor       # P, (N, n), row-stochastic
    labels: torch.Tensor        # (N,) class of each sample (a frustrated sample keeps its nominal class)
    frustrated: torch.Tensor    # (N,) bool
    label_weight: torch.Tensor  # (n, 1): w_b = sum_i P_ib, the attached weight of each label (m for equal classes)

    @property
    def num_samples(self) -> int:
        return self.weights.shape[0]

    @property
    def num_classes(self) -> int:
        return self.weights.shape[1]

    @property
    def r(self) -> float:
        """The realised frustrated fraction."""
        return float(self.frustrated.double().mean())


def attachment(labels: torch.Tensor, frustrated: torch.Tensor, num_classes: int) -> Attachment:
    """P_ib = 1[b = y_i] for clean samples, 1/n for frustrated ones."""
    labels = torch.as_tensor(labels, dtype=torch.long)
    frustrated = torch.as_tensor(frustrated, dtype=torch.bool)
    weights = torch.zeros(len(labels), num_classes, dtype=DTYPE)
    weights[torch.arange(len(labels)), labels] = 1.0
    weights[frustrated] = 1.0 / num_classes
    if (weights.sum(0) <= 0).any():
        raise ValueError("every label needs at least one attached sample")
    return Attachment(weights, labels, frustrated, weights.sum(0)[:, None])


def frustrated_per_class(samples_per_class: int, r: float) -> int:
    """r m, which must be a whole number so that every class has exactly the fraction r frustrated."""
    f = round(r * samples_per_class)
    if abs(f - r * samples_per_class) > 1e-9 or not 0 <= f < samples_per_class:
        raise ValueError(f"r={r} times samples_per_class={samples_per_class} must be a whole number below "
                         f"samples_per_class (at least one clean sample per class)")
    return f


def balanced_attachment(num_classes: int, samples_per_class: int, r: float) -> Attachment:
    """n classes of m samples each (class-major order); the first r m of every class are frustrated.

    Which samples are frustrated does not matter: samples are free parameters with i.i.d. starts.
    """
    f = frustrated_per_class(samples_per_class, r)
    labels = torch.arange(num_classes).repeat_interleave(samples_per_class)
    frustrated = (torch.arange(samples_per_class) < f).repeat(num_classes)
    return attachment(labels, frustrated, num_classes)


def random_frustration(labels: torch.Tensor, r: float, generator: torch.Generator) -> torch.Tensor:
    """A mask with round(r * count) randomly chosen frustrated samples in every class."""
    labels = torch.as_tensor(labels, dtype=torch.long)
    mask = torch.zeros(len(labels), dtype=torch.bool)
    for c in labels.unique():
        idx = (labels == c).nonzero().flatten()
        k = min(round(r * len(idx)), len(idx) - 1)  # keep one clean sample per class
        mask[idx[torch.randperm(len(idx), generator=generator)[:k]]] = True
    return mask


def init_embeddings(att: Attachment, dim: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """u_i, v_b i.i.d. N(0, I/d): unit-norm scale, samples unaligned with their labels (chance accuracy)."""
    u = torch.randn(att.num_samples, dim, generator=generator, dtype=DTYPE) / math.sqrt(dim)
    v = torch.randn(att.num_classes, dim, generator=generator, dtype=DTYPE) / math.sqrt(dim)
    return u, v


# --------------------------------------------------------------------------- loss and flow


def pair_loss(a: torch.Tensor, b: torch.Tensor, P: torch.Tensor) -> torch.Tensor:
    """1/2 sum_ib P_ib |a_i - b_b|^2, expanded so that no (N, n, d) tensor is formed::

        1/2 [ sum_i (sum_b P_ib) |a_i|^2 + sum_b (sum_i P_ib) |b_b|^2 ] - sum_i a_i . (P b)_i
    """
    return (0.5 * (P.sum(1) * a.pow(2).sum(1)).sum() + 0.5 * (P.sum(0) * b.pow(2).sum(1)).sum()
            - (a * (P @ b)).sum())


def loss(u: torch.Tensor, v: torch.Tensor, att: Attachment, W: torch.Tensor | None = None,
         mode: str = "none") -> torch.Tensor:
    """L = 1/2 sum P_ib |u_i - v_b|^2 (mode "none"), or the head loss L_head (module docstring).

    For "sg" the targets are detached, so autograd gives exactly the stop-gradient flow.
    """
    P = att.weights
    if mode == "none":
        return pair_loss(u, v, P)
    if mode not in ("sg", "no_sg"):
        raise ValueError(f"mode={mode!r}; choose one of {', '.join(MODES)}")
    u_target, v_target = (u.detach(), v.detach()) if mode == "sg" else (u, v)
    return pair_loss(u @ W.T, v_target, P) + pair_loss(u_target, v @ W.T, P)


def block_rates(att: Attachment, gamma: float, head_rate: float = 1.0) -> tuple[float, torch.Tensor, float]:
    """Each block's learning rate per unit time: samples gamma, label b gamma / w_b (n x 1), W gamma head_rate / N."""
    return gamma, gamma / att.label_weight, gamma * head_rate / att.num_samples


def flow(u: torch.Tensor, v: torch.Tensor, att: Attachment, W: torch.Tensor | None = None, mode: str = "none",
         gamma: float = 1.0, head_rate: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The hand-written velocities (du/dt, dv/dt, dW/dt) = -rate * gradient.

    With t_i = sum_b P_ib v_b (a sample's target) and T_b = sum_i P_ib u_i (a label's, times w_b):

    * none:  dL/du_i = u_i - t_i,                 dL/dv_b = w_b v_b - T_b
    * sg:    dL/du_i = W^T (W u_i - t_i),         dL/dv_b = W^T (w_b W v_b - T_b),
             dL/dW   = sum_i (W u_i - t_i) u_i^T + sum_b (w_b W v_b - T_b) v_b^T
    * no_sg: sg's terms plus the gradients through the targets,
             dL/du_i += u_i - W t_i,              dL/dv_b += w_b v_b - W T_b
    """
    P, w = att.weights, att.label_weight
    rate_u, rate_v, rate_W = block_rates(att, gamma, head_rate)
    t, T = P @ v, P.T @ u
    if mode == "none":
        return -rate_u * (u - t), -rate_v * (w * v - T), None
    Wu, Wv = u @ W.T, v @ W.T
    err_u, err_v = Wu - t, w * Wv - T           # residuals of the two predictions
    g_u, g_v = err_u @ W, err_v @ W              # W^T applied to each row
    g_W = err_u.T @ u + err_v.T @ v
    if mode == "no_sg":
        g_u = g_u + u - t @ W.T
        g_v = g_v + w * v - T @ W.T
    elif mode != "sg":
        raise ValueError(f"mode={mode!r}; choose one of {', '.join(MODES)}")
    return -rate_u * g_u, -rate_v * g_v, -rate_W * g_W


def autograd_flow(u: torch.Tensor, v: torch.Tensor, att: Attachment, W: torch.Tensor | None = None, mode: str = "none",
                  gamma: float = 1.0, head_rate: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The same velocities from autograd on ``loss``: what plain gradient descent steps along."""
    leaves = [u.detach().requires_grad_(), v.detach().requires_grad_()]
    if mode != "none":
        leaves.append(W.detach().requires_grad_())
    grads = torch.autograd.grad(loss(*leaves[:2], att, leaves[2] if mode != "none" else None, mode), leaves)
    rate_u, rate_v, rate_W = block_rates(att, gamma, head_rate)
    return -rate_u * grads[0], -rate_v * grads[1], (-rate_W * grads[2] if mode != "none" else None)


def integration_step(state: tuple, velocity: Callable, dt: float, integrator: str) -> tuple:
    """One step of x' = F(x): Euler x + dt F(x) (= gradient descent, lr = rate dt), or classical RK4."""
    def add(x, k, h):
        return tuple(None if a is None else a + h * b for a, b in zip(x, k))

    k1 = velocity(*state)
    if integrator in ("gd", "euler"):
        return add(state, k1, dt)
    k2 = velocity(*add(state, k1, dt / 2))
    k3 = velocity(*add(state, k2, dt / 2))
    k4 = velocity(*add(state, k3, dt))
    k = tuple(None if a is None else (a + 2 * b + 2 * c + d) / 6 for a, b, c, d in zip(k1, k2, k3, k4))
    return add(state, k, dt)


# --------------------------------------------------------------------------- observables


def min_label_distance(v: torch.Tensor) -> float:
    """min_{a != b} |v_a - v_b|."""
    d = torch.cdist(v, v)
    d.fill_diagonal_(math.inf)
    return float(d.min())


def predictions(u: torch.Tensor, W: torch.Tensor | None) -> torch.Tensor:
    """What a sample says about its label: W u_i with a head, u_i without (the sample branch of the loss)."""
    return u if W is None else u @ W.T


def nearest_label_accuracy(z: torch.Tensor, v: torch.Tensor, labels: torch.Tensor,
                           noise: torch.Tensor | None = None) -> float:
    """Fraction of samples whose prediction z_i (plus ``noise``) is nearest to the label of its own class."""
    z = z if noise is None else z + noise
    return float((torch.cdist(z, v).argmin(1) == labels).double().mean())


def clean_class_means(u: torch.Tensor, att: Attachment) -> torch.Tensor:
    """c_a, the mean of the clean samples of each class (n, d)."""
    clean = ~att.frustrated
    return torch.stack([u[clean & (att.labels == a)].mean(0) for a in range(att.num_classes)])



def fast_mode_amplitude(u: torch.Tensor, v: torch.Tensor, att: Attachment) -> float:
    """|s c~ - v~| over classes: the fast contrast mode, decaying exactly as exp(-gamma (1 + s) t).

    (s, -1) is the left eigenvector of A for the eigenvalue 1 + s (equal classes, no head).
    """
    s = math.sqrt(1.0 - att.r)
    c = clean_class_means(u, att)
    return float((s * (c - c.mean(0)) - (v - v.mean(0))).norm())


def readout_noise(num: int, dim: int, std: float, generator: torch.Generator) -> torch.Tensor | None:
    """A fixed (quenched) Gaussian noise per sample, so accuracy curves are smooth in time."""
    return None if std == 0 else std * torch.randn(num, dim, generator=generator, dtype=DTYPE)


def record_steps(steps: int, points: int = 120) -> list[int]:
    """Steps at which to record: geometric (early alignment) and linear (late collapse) grids, with 0 and steps."""
    geo = np.geomspace(1, max(steps, 1), points).round().astype(int)
    lin = np.linspace(0, steps, points).round().astype(int)
    return sorted(set(geo.tolist()) | set(lin.tolist()) | {0, steps})


# --------------------------------------------------------------------------- simulation


def simulate(att: Attachment, u0: torch.Tensor, v0: torch.Tensor, W0: torch.Tensor | None = None, *, mode: str = "none",
             gamma: float = 1.0, dt: float = 0.05, steps: int = 1000, head_rate: float = 1.0, integrator: str = "gd",
             noise: torch.Tensor | None = None, record: list[int] | None = None) -> dict:
    """Integrate the model from (u0, v0, W0) for ``steps`` steps of size dt; curves at the ``record`` steps.

    integrator "gd": plain gradient descent through autograd on ``loss`` (lr = block rate * dt);
    "euler" / "rk4": the hand-written ``flow``. "gd" and "euler" take the same steps (up to rounding).
    Returns lists t, min_label_distance, accuracy, accuracy_noisy (and fast_mode_amplitude for mode
    "none"), the final state u, v, W, and ``finite`` (False if the state blew up).
    """
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator={integrator!r}; choose one of {', '.join(INTEGRATORS)}")
    velocity_fn = autograd_flow if integrator == "gd" else flow

    def velocity(u, v, W):
        return velocity_fn(u, v, att, W, mode, gamma, head_rate)

    record = set(record_steps(steps) if record is None else record)
    curves = {"t": [], "min_label_distance": [], "accuracy": [], "accuracy_noisy": []}
    if mode == "none":
        curves["fast_mode_amplitude"] = []
    state = (u0.clone(), v0.clone(), None if W0 is None else W0.clone())
    finite = True
    for k in range(steps + 1):
        if k in record:
            finite = all(x is None or bool(torch.isfinite(x).all()) for x in state)
            if not finite:
                break
            u, v, W = state
            z = predictions(u, W)
            curves["t"].append(k * dt)
            curves["min_label_distance"].append(min_label_distance(v))
            curves["accuracy"].append(nearest_label_accuracy(z, v, att.labels))
            curves["accuracy_noisy"].append(nearest_label_accuracy(z, v, att.labels, noise))
            if mode == "none":
                curves["fast_mode_amplitude"].append(fast_mode_amplitude(u, v, att))
        if k == steps:
            break
        state = integration_step(state, velocity, dt, integrator)
    finite = finite and all(x is None or bool(torch.isfinite(x).all()) for x in state)
    u, v, W = state
    return {**curves, "u": u, "v": v, "W": W, "finite": finite}


# --------------------------------------------------------------------------- head


def head_start(dim: int, head_init: float) -> torch.Tensor:
    """W(0) = head_init * I [ours]."""
    return head_init * torch.eye(dim, dtype=DTYPE)


def w2_spectrum(W: torch.Tensor, v: torch.Tensor) -> dict:
    """The spectrum of W^2 on the span of the labels: A = V^+ W^2 V (V: d x n, labels as columns).

    At a stop-gradient fixed point A = (1 - r) I + (r / n) 1 1^T: eigenvalue 1 on the mean direction
    (coefficients 1) and 1 - r on the class directions (coefficients summing to 0). Returns the sorted
    eigenvalues (real parts), the mean-direction Rayleigh quotient 1^T A 1 / n, and the class-direction
    eigenvalues (those of A restricted to the coefficients summing to 0).
    """
    V = v.T
    A = torch.linalg.pinv(V) @ (W @ W) @ V
    n = A.shape[0]
    ones = torch.ones(n, dtype=DTYPE)
    # An orthonormal basis of the coefficient vectors summing to 0: the class directions.
    Q = torch.linalg.qr(torch.cat([ones[:, None], torch.eye(n, dtype=DTYPE)[:, : n - 1]], 1))[0][:, 1:]
    class_eigs = torch.linalg.eigvals(Q.T @ A @ Q).real.sort().values
    return {"eigenvalues": torch.linalg.eigvals(A).real.sort().values.tolist(),
            "mean_direction": float(ones @ A @ ones / n),
            "class_directions": class_eigs.tolist()}
