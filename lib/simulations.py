"""The two simulations of NORMS (study 4) [code]: gradient descent on a cosine loss from points of a
given norm (convergence slows as the norm squared), and supervised InfoNCE on latent classes of
unequal frequency (do rarer classes end with smaller embedding norms?).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from lib.evaluation import class_mean_norms, row_norms
from lib.losses import info_nce


def sphere_convergence(radii: Sequence[float], *, pairs: int = 500, dim: int = 20, lr: float = 10.0,
                       tolerance: float = 1e-3, max_steps: int = 200_000, seed: int = 0) -> dict:
    r"""Steps of gradient descent on a cosine loss until positive pairs align, for each starting norm.

    NORMS' theory check [code]: ``pairs`` pairs (a_i, b_i) in ``dim`` dimensions, each point drawn
    uniformly on the sphere and scaled to norm rho; plain gradient descent (step ``lr``, gradients
    by autograd) on every point of

        L = -mean_i cos(a_i, b_i)

    until mean_i cos(a_i, b_i) >= 1 - ``tolerance``. The gradient of cos(a, b) in a is
    (b/||b|| - cos a/||a||) / ||a||: orthogonal to a and of size ~ 1/rho, so the angle moves by
    ~ lr / (pairs rho^2) per step and the predicted number of steps grows as rho^2 (for a fixed
    lr / pairs). Being orthogonal, each step also grows the norm: ||a - lr g||^2 = ||a||^2 + lr^2 ||g||^2.

    Each radius is its own run from the same seed, in float64. Returns per radius (arrays [R]):
    ``steps`` (-1: not converged within ``max_steps``), ``min_norm_change`` (the smallest change of
    any point's norm in any step: >= 0 up to rounding), ``max_cos_grad`` (the largest |cos| between
    a point and its gradient: 0 up to rounding) and ``mean_norm``, a list of R arrays with the mean
    norm of all 2 * pairs points before the first step and after each step.
    """
    radii = [float(r) for r in radii]
    if not radii or not all(math.isfinite(r) and r > 0 for r in radii):
        raise ValueError(f"radii={radii!r} must be a non-empty list of finite numbers > 0")
    runs = [_align_on_sphere(rho, pairs=pairs, dim=dim, lr=lr, tolerance=tolerance, max_steps=max_steps, seed=seed)
            for rho in radii]
    return {"radii": np.asarray(radii), **{key: np.asarray([run[key] for run in runs])
                                           for key in ("steps", "min_norm_change", "max_cos_grad")},
            "mean_norm": [run["mean_norm"] for run in runs]}


def _align_on_sphere(rho: float, *, pairs: int, dim: int, lr: float, tolerance: float, max_steps: int,
                     seed: int) -> dict:
    """One radius of :func:`sphere_convergence`."""
    g = torch.Generator().manual_seed(seed)

    def row_norm(x):
        return torch.linalg.vector_norm(x, dim=-1, keepdim=True)

    a, b = (torch.randn(pairs, dim, generator=g, dtype=torch.float64) for _ in range(2))
    points = torch.cat([a / row_norm(a), b / row_norm(b)]).mul_(rho).requires_grad_()  # rows: a's, then b's
    min_change, max_cos, mean_norm, steps = math.inf, 0.0, [], -1
    for t in range(max_steps + 1):
        norms = row_norm(points)
        unit = points / norms
        cos = (unit[:pairs] * unit[pairs:]).sum(-1)
        mean_norm.append(norms.mean().item())
        if cos.mean().item() >= 1 - tolerance:
            steps = t
            break
        if t == max_steps:
            break
        (grad,) = torch.autograd.grad(-cos.mean(), [points])
        with torch.no_grad():
            grad_norms = row_norm(grad)
            alignment = ((points * grad).sum(-1, keepdim=True).abs() / (norms * grad_norms).clamp_min(1e-300))
            max_cos = max(max_cos, alignment.max().item())
            points.sub_(lr * grad)
            min_change = min(min_change, (row_norm(points) - norms).min().item())
    return {"steps": steps, "min_norm_change": min_change, "max_cos_grad": max_cos, "mean_norm": np.asarray(mean_norm)}


def latent_class_simulation(class_weights: Sequence[float] = (1, 2, 4, 8), *, samples: int = 1500,
                            latent_dim: int = 10, observed_dim: int = 64, hidden: int = 64, out_dim: int = 10,
                            sigma: float = 0.3, steps: int = 2000, batch_size: int = 128, lr: float = 0.1,
                            temperature: float = 1.0, record_every: int = 50, seed: int = 0) -> dict:
    r"""NORMS' latent-class simulation [code]: do rarer classes end with smaller embedding norms?

    K classes with centres c_k uniform on the unit sphere in ``latent_dim`` dimensions and
    frequencies proportional to ``class_weights`` (about samples * w_k / sum w points each); a point
    of class k is l = c_k + N(0, sigma^2 I), observed as x = M l with a fixed random Gaussian
    M [observed_dim x latent_dim]. An MLP observed_dim -> hidden -> ReLU -> out_dim is trained
    with supervised InfoNCE (:func:`lib.losses.info_nce`, temperature 1): each anchor of a batch
    (drawn uniformly from all points, so frequent classes appear more often) is paired with one
    other random point of its own class. Plain SGD with step ``lr`` [ours], float32.

    Returns ``class_counts`` [K], ``class_norms`` [K] (mean ||f(x)|| over each class's points at the
    end), ``history_steps`` [H] and ``class_norm_history`` [H, K] (the same every ``record_every``
    steps, from step 0), and ``final_loss`` (mean over the last 10% of steps).
    """
    weights = np.asarray(class_weights, dtype=float)
    if weights.ndim != 1 or len(weights) < 2 or not (np.isfinite(weights).all() and (weights > 0).all()):
        raise ValueError(f"class_weights={class_weights!r} must be at least two positive numbers")
    counts = np.maximum(2, np.round(samples * weights / weights.sum()).astype(int))  # a positive needs 2 per class
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    centres = torch.randn(len(weights), latent_dim, generator=g)
    centres /= row_norms(centres)[:, None]
    labels = torch.repeat_interleave(torch.arange(len(weights)), torch.as_tensor(counts))
    latent = centres[labels] + sigma * torch.randn(len(labels), latent_dim, generator=g)
    mixing = torch.randn(observed_dim, latent_dim, generator=g)
    x = latent @ mixing.T
    # Within-class positions, for drawing "another point of the same class" without a loop.
    class_start = torch.as_tensor(np.concatenate([[0], np.cumsum(counts)[:-1]]))
    position = torch.arange(len(labels)) - class_start[labels]
    class_size = torch.as_tensor(counts)[labels]

    model = nn.Sequential(nn.Linear(observed_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history_steps, history, losses = [], [], []

    def record(step):
        with torch.no_grad():
            means, _ = class_mean_norms(row_norms(model(x)).numpy(), labels.numpy(), len(weights))
        history_steps.append(step)
        history.append(means)

    for step in range(steps):
        if step % record_every == 0:
            record(step)
        anchor = torch.randint(len(labels), (batch_size,), generator=g)
        other = (torch.rand(batch_size, generator=g) * (class_size[anchor] - 1)).long()
        other += (other >= position[anchor]).long()  # skip the anchor itself
        positive = class_start[labels[anchor]] + other
        loss = info_nce(model(x[anchor]), model(x[positive]), temperature)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    record(steps)
    return {"class_weights": weights, "class_counts": counts, "class_norms": history[-1],
            "history_steps": np.asarray(history_steps), "class_norm_history": np.stack(history),
            "final_loss": float(np.mean(losses[-max(1, steps // 10):]))}
