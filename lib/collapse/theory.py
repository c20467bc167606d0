"""Closed forms and rates of the embedding-only collapse model (:mod:`lib.collapse.model`), equal classes.

The flow is linear and splits into sectors:

* class contrasts (c~_a, v~_a: deviation from the mean over classes)::

      d/dt (c~, v~) = -gamma A (c~, v~),   A = [[1, -1], [-(1 - r), 1]]

  with eigenvalues gamma (1 +- s), s = sqrt(1 - r). The fast rate gamma (1 + s) ~ 2 gamma aligns
  samples with labels; the slow rate gamma (1 - s) ~ gamma r / 2 shrinks the whole label geometry:
  every inter-label distance decays as exp(-gamma (1 - s) t) -> 0 for r > 0. At r = 0 the slow
  rate is 0 and v~ + c~ is conserved: the geometry survives. Exactly::

      exp(-gamma t A) = e^{-gamma t} [cosh(gamma s t) I + sinh(gamma s t)/s K],  K = [[0, 1], [1 - r, 0]]

* the means (c_bar, f_bar, v_bar): eigenvalues 0, gamma, 2 gamma (0: a conserved weighted mean);
* deviations of samples from their class mean (or from f_bar): rate gamma.

Simulations check these against the integrators; ``fit_decay_rate`` reads a rate off a simulated curve.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from lib.collapse.model import DTYPE, Attachment, clean_class_means, frustrated_per_class, min_label_distance


def slow_rate(r: float, gamma: float = 1.0) -> float:
    """gamma (1 - sqrt(1 - r)): the decay rate of the label geometry (~ gamma r / 2 for small r)."""
    return gamma * (1.0 - math.sqrt(1.0 - r))


def fast_rate(r: float, gamma: float = 1.0) -> float:
    """gamma (1 + sqrt(1 - r)): the alignment rate (~ 2 gamma)."""
    return gamma * (1.0 + math.sqrt(1.0 - r))


def euler_rate(rate: float, dt: float) -> float:
    """The decay rate per unit time that Euler steps (gradient descent) of size dt give a mode of the flow
    with rate ``rate``: each step multiplies it by 1 - rate dt, so -log(1 - rate dt) / dt."""
    return math.log(1.0 / (1.0 - rate * dt)) / dt


def sector_eigenvalues(num_classes: int, samples_per_class: int, r: float, gamma: float = 1.0) -> np.ndarray:
    """All N + n decay rates of the embedding-only flow, sorted, from the sector decomposition.

    class contrasts: gamma (1 +- s), n - 1 each; means: 0, 2 gamma (and gamma if any sample is
    frustrated); deviations from a class mean: gamma, n (K - 1) of them for K clean per class, and
    F - 1 for the F frustrated samples.
    """
    n, m = num_classes, samples_per_class
    f = frustrated_per_class(m, r)
    clean, frustrated = m - f, f * n
    rates = [slow_rate(r, gamma)] * (n - 1) + [fast_rate(r, gamma)] * (n - 1)
    rates += [0.0, 2 * gamma] + ([gamma] if frustrated else [])
    rates += [gamma] * (n * (clean - 1) + max(frustrated - 1, 0))
    return np.sort(np.array(rates))


def flow_matrix(att: Attachment, gamma: float = 1.0) -> torch.Tensor:
    """M with d(u, v)/dt = -M (u, v) per coordinate: M = gamma [[I, -P], [-D^-1 P^T, I]], D = diag(w_b)."""
    P, w = att.weights, att.label_weight.flatten()
    N, n = P.shape
    top = torch.cat([torch.eye(N, dtype=DTYPE), -P], 1)
    bottom = torch.cat([-(P / w).T, torch.eye(n, dtype=DTYPE)], 1)
    return gamma * torch.cat([top, bottom], 0)


def contrast_propagator(r: float, gamma: float, t: float) -> torch.Tensor:
    """exp(-gamma t A) for A = [[1, -1], [-(1 - r), 1]] acting on (c~, v~)::

        e^{-gamma t} [[cosh(gamma s t), sinh(gamma s t)/s], [s sinh(gamma s t), cosh(gamma s t)]]
    """
    s = math.sqrt(1.0 - r)
    x = gamma * s * t
    ch, sh_over_s = math.cosh(x), (math.sinh(x) / s if s > 0 else gamma * t)
    return math.exp(-gamma * t) * torch.tensor([[ch, sh_over_s], [s * s * sh_over_s, ch]], dtype=DTYPE)


def mean_propagator(r: float, gamma: float, t: float) -> torch.Tensor:
    """exp(-gamma t B) for the means (c_bar, f_bar, v_bar), B = [[1, 0, -1], [0, 1, -1], [-(1 - r), -r, 1]].

    Right eigenvectors (1, 1, 1), (r, -(1 - r), 0), (1, 1, -1) for the rates 0, gamma, 2 gamma.
    """
    R = torch.tensor([[1.0, r, 1.0], [1.0, -(1.0 - r), 1.0], [1.0, 0.0, -1.0]], dtype=DTYPE)
    decay = torch.tensor([1.0, math.exp(-gamma * t), math.exp(-2 * gamma * t)], dtype=DTYPE)
    return R @ torch.diag(decay) @ torch.linalg.inv(R)


def closed_form_contrasts(att: Attachment, u0: torch.Tensor, v0: torch.Tensor, gamma: float,
                          t: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The class contrasts (c~(t), v~(t)) = exp(-gamma t A) (c~(0), v~(0)), deviations from the mean over classes.

    Inter-label distances depend on v~ only; computed apart from the means, they stay exact far below the
    float64 rounding of the positions v = v_bar + v~.
    """
    c0 = clean_class_means(u0, att)
    c0, v0 = c0 - c0.mean(0), v0 - v0.mean(0)
    Pc = contrast_propagator(att.r, gamma, t)
    return Pc[0, 0] * c0 + Pc[0, 1] * v0, Pc[1, 0] * c0 + Pc[1, 1] * v0


def closed_form(att: Attachment, u0: torch.Tensor, v0: torch.Tensor, gamma: float,
                t: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact state (u(t), v(t)) of the embedding-only flow, equal classes, from its sectors::

        c_a(t) = c_bar(t) + c~_a(t),  v_a(t) = v_bar(t) + v~_a(t)       (contrasts and means)
        u_i(t) = c_{y_i}(t) + e^{-gamma t} (u_i(0) - c_{y_i}(0))        (clean)
        u_j(t) = f_bar(t)   + e^{-gamma t} (u_j(0) - f_bar(0))          (frustrated)
    """
    frus = att.frustrated
    c0 = clean_class_means(u0, att)
    f0 = u0[frus].mean(0) if frus.any() else torch.zeros_like(v0[0])  # enters with weight r = 0 when absent
    c_tilde, v_tilde = closed_form_contrasts(att, u0, v0, gamma, t)
    c_bar, f_bar, v_bar = mean_propagator(att.r, gamma, t) @ torch.stack([c0.mean(0), f0, v0.mean(0)])
    c_t, v_t = c_bar + c_tilde, v_bar + v_tilde
    target = torch.where(frus[:, None], f_bar.expand_as(u0), c_t[att.labels])
    start = torch.where(frus[:, None], f0.expand_as(u0), c0[att.labels])
    return target + math.exp(-gamma * t) * (u0 - start), v_t


def closed_form_min_label_distance(att: Attachment, u0: torch.Tensor, v0: torch.Tensor, gamma: float,
                                   times) -> list[float]:
    """min_{a != b} |v_a(t) - v_b(t)| = min |v~_a(t) - v~_b(t)| from the closed form, at each time."""
    return [min_label_distance(closed_form_contrasts(att, u0, v0, gamma, float(t))[1]) for t in times]


def fit_decay_rate(t, y, *, t_min: float = 0.0, floor: float = 1e-10) -> float:
    """The rate lambda of y ~ exp(-lambda t): least squares of log y on t, for t >= t_min and y > floor * y[0].

    The floor keeps out the points where float64 rounding, not the dynamics, sets y.
    """
    t, y = np.asarray(t, float), np.asarray(y, float)
    keep = (t >= t_min) & (y > floor * y[0]) & np.isfinite(y)
    if keep.sum() < 3:
        return math.nan
    slope = np.polyfit(t[keep], np.log(y[keep]), 1)[0]
    return float(-slope)
