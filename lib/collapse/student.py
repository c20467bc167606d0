"""A linear student of the collapse model (:mod:`lib.collapse.model`): sample embeddings made from inputs.

Sample embeddings are produced by a linear student, u_i = S x_i, with learnable labels v and the head
W. A linear teacher A (D x n, orthonormal columns) makes the inputs: a clean input is A e_y + noise, a
frustrated one the teacher's image of the uniform code, A 1/n + noise, equally close to every class.
S's rate is gamma / (N / n) (it is shared by the samples of every class). Nearest-label accuracy over
the training samples is then at best about 1 - r + r/n (frustrated samples are right by chance). The
same code runs on real images (digits, MNIST) with a fraction r of each class made frustrated.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lib.collapse.model import (
    DTYPE,
    MODES,
    Attachment,
    block_rates,
    flow,
    head_start,
    integration_step,
    loss,
    min_label_distance,
    nearest_label_accuracy,
    predictions,
    readout_noise,
    record_steps,
)


def teacher_inputs(att: Attachment, input_dim: int, noise: float,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs of the linear teacher A (input_dim x n, orthonormal columns): A e_y + noise (clean),
    A 1/n + noise (frustrated), noise ~ N(0, noise^2 I / input_dim). Returns (x, A)."""
    n = att.num_classes
    if input_dim < n:
        raise ValueError(f"input_dim={input_dim} must be >= num_classes={n}")
    A = torch.linalg.qr(torch.randn(input_dim, n, generator=generator, dtype=DTYPE))[0]
    codes = torch.where(att.frustrated[:, None], torch.full((1, n), 1.0 / n, dtype=DTYPE),
                        torch.nn.functional.one_hot(att.labels, n).to(DTYPE))
    x = codes @ A.T + noise / math.sqrt(input_dim) * torch.randn(att.num_samples, input_dim, generator=generator,
                                                                 dtype=DTYPE)
    return x, A


def student_velocity(x: torch.Tensor, att: Attachment, mode: str, gamma: float, head_rate: float = 1.0,
                     integrator: str = "euler") -> Callable:
    """(S, v, W) -> (dS/dt, dv/dt, dW/dt) for the student u = S x: rates S gamma / (N / n), v and W as in ``flow``.

    "euler": the chain rule on the hand-written flow, dL/dS = sum_i (dL/du_i) x_i^T; "gd": autograd on ``loss``.
    """
    N, n = att.weights.shape
    rate_S = gamma * n / N

    def hand_written(S, v, W):
        du, dv, dW = flow(x @ S.T, v, att, W, mode, gamma, head_rate)
        return (rate_S / gamma) * du.T @ x, dv, dW  # du = -gamma dL/du

    def autograd(S, v, W):
        leaves = [t.detach().requires_grad_() for t in (S, v) + ((W,) if W is not None else ())]
        head = leaves[2] if W is not None else None
        grads = torch.autograd.grad(loss(x @ leaves[0].T, leaves[1], att, head, mode), leaves)
        _, rate_v, rate_W = block_rates(att, gamma, head_rate)
        return -rate_S * grads[0], -rate_v * grads[1], (-rate_W * grads[2] if W is not None else None)

    if integrator not in ("gd", "euler"):
        raise ValueError(f"integrator={integrator!r}; choose gd or euler")
    return autograd if integrator == "gd" else hand_written


def train_student(x: torch.Tensor, att: Attachment, *, dim: int, mode: str, gamma: float, dt: float, steps: int,
                  head_init: float = 0.5, head_rate: float = 1.0, readout_std: float = 0.0, integrator: str = "euler",
                  generator: torch.Generator, x_test: torch.Tensor | None = None, y_test: torch.Tensor | None = None,
                  record: list[int] | None = None) -> dict:
    """Gradient descent on ``loss`` with u = S x: the linear student S, labels v and (modes sg, no_sg) head W.

    S(0) has i.i.d. N(0, 1/d) entries, v(0) i.i.d. N(0, I/d), W(0) = head_init I; step dt with the rates
    of ``student_velocity`` ("euler": hand-written gradients; "gd": autograd, the same steps). Curves: t,
    min_label_distance, accuracy / accuracy_noisy (training samples, frustrated ones scored against their
    nominal class) and, with a test set, test_accuracy / test_accuracy_noisy.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; choose one of {', '.join(MODES)}")
    N, n = att.weights.shape
    S = torch.randn(dim, x.shape[1], generator=generator, dtype=DTYPE) / math.sqrt(dim)
    v = torch.randn(n, dim, generator=generator, dtype=DTYPE) / math.sqrt(dim)
    W = head_start(dim, head_init) if mode != "none" else None
    noise = readout_noise(N, dim, readout_std, generator)
    test_noise = readout_noise(len(x_test), dim, readout_std, generator) if x_test is not None else None
    velocity = student_velocity(x, att, mode, gamma, head_rate, integrator)
    record = set(record_steps(steps) if record is None else record)
    keys = ["t", "min_label_distance", "accuracy", "accuracy_noisy"]
    keys += ["test_accuracy", "test_accuracy_noisy"] if x_test is not None else []
    curves = {k: [] for k in keys}
    state, finite = (S, v, W), True
    for k in range(steps + 1):
        if k in record:
            S, v, W = state
            finite = all(t is None or bool(torch.isfinite(t).all()) for t in state)
            if not finite:
                break
            z = predictions(x @ S.T, W)
            curves["t"].append(k * dt)
            curves["min_label_distance"].append(min_label_distance(v))
            curves["accuracy"].append(nearest_label_accuracy(z, v, att.labels))
            curves["accuracy_noisy"].append(nearest_label_accuracy(z, v, att.labels, noise))
            if x_test is not None:
                z_test = predictions(x_test @ S.T, W)
                curves["test_accuracy"].append(nearest_label_accuracy(z_test, v, y_test))
                curves["test_accuracy_noisy"].append(nearest_label_accuracy(z_test, v, y_test, test_noise))
        if k == steps:
            break
        state = integration_step(state, velocity, dt, "euler")
    finite = finite and all(t is None or bool(torch.isfinite(t).all()) for t in state)
    S, v, W = state
    return {**curves, "S": S, "v": v, "W": W, "u": x @ S.T, "finite": finite}


def image_inputs(images: torch.Tensor, mean: torch.Tensor | None = None, std: torch.Tensor | None = None,
                 scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """Flattened images, standardised per pixel, scaled so the mean squared norm is 1 (train statistics).

    Returns (x, mean, std, scale); pass the training mean, std and scale to transform the test set.
    """
    x = images.reshape(len(images), -1).to(DTYPE) / 255.0
    if mean is None:
        mean, std = x.mean(0), x.std(0).clamp_min(1e-3)  # constant pixels (digits' borders) stay 0
    x = (x - mean) / std
    if scale is None:
        scale = float(x.pow(2).sum(1).mean().sqrt())
    return x / scale, mean, std, scale
