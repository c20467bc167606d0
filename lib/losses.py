"""Contrastive losses, one function each, formula in the docstring.

Conventions: ``z`` holds the 2N stacked view features ``[view1; view2]`` (rows are samples),
``labels`` their 2N class labels; features are L2-normalised inside the loss.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

MARGIN_MODES = ("clamp", "subtract", "none")
STABILIZERS = ("detach", "direct")


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {', '.join(allowed)}")


def margin_schedule(m0: float, m_last: float, layers: int) -> list[float]:
    """Per-layer margins, linear from ``m0`` at layer 0 to ``m_last`` at layer ``layers - 1``.

    CFF's default is m0 = 0.4, m_last = 0.1; for 8 layers: 0.4, 0.357, ..., 0.143, 0.1.
    """
    if layers < 1:
        raise ValueError(f"layers={layers} must be >= 1")
    for name, m in (("m0", m0), ("m_last", m_last)):
        if not (math.isfinite(m) and m >= 0):
            raise ValueError(f"{name}={m} must be a finite margin >= 0")
    if layers == 1:
        return [float(m0)]
    steps = [l / (layers - 1) for l in range(layers)]
    return [m0 * (1 - t) + m_last * t for t in steps]  # exact at both ends


def positive_mask(labels: torch.Tensor) -> torch.Tensor:
    """Boolean [2N, 2N] mask of P(i) = {j != i : y_j = y_i}."""
    same = labels[:, None] == labels[None, :]
    return same & ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)


def margin_supcon(
    z: torch.Tensor,
    labels: torch.Tensor,
    margin: float,
    *,
    mode: str = "clamp",
    stabilizer: str = "detach",
    temperature: float = 0.15,
) -> torch.Tensor:
    r"""Supervised contrastive loss with a positive-pair margin (CFF, one layer).

    With f_i = z_i / ||z_i||, s_ij = f_i . f_j, P(i) = {j != i : y_j = y_i}, A(i) = {j != i}:

    - ``clamp``:    s'_ij = min(s_ij + m, 1) for j in P(i), s'_ij = s_ij otherwise
    - ``subtract``: s' = s, and log p_ij - m is used for j in P(i)  (gradient-neutral)
    - ``none``:     s' = s

    a_ij = s'_ij / tau, shifted by the row max over the whole row (diagonal included):
    ``detach`` subtracts stopgrad(max_k a_ik), ``direct`` subtracts max_k a_ik itself.
    The shift cancels in log p, so both give the same gradients in exact arithmetic.

        log p_ij = a_ij - log sum_{k in A(i)} exp a_ik
        l_i      = - mean_{j in P(i)} log p_ij         (0 for an anchor without positives)
        loss     = mean_i l_i                          over all 2N anchors

    Pairs with s_ij + m >= 1 under ``clamp`` are saturated and carry no gradient through s_ij.
    """
    _check_choice("mode", mode, MARGIN_MODES)
    _check_choice("stabilizer", stabilizer, STABILIZERS)
    if z.ndim != 2:
        raise ValueError(f"z must be [2N, dim], got shape {tuple(z.shape)}")
    if labels.shape != (z.shape[0],):
        raise ValueError(f"labels must be [{z.shape[0]}], got shape {tuple(labels.shape)}")
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin={margin} must be a finite number >= 0")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature={temperature} must be > 0")
    m = 0.0 if mode == "none" else float(margin)

    f = F.normalize(z, dim=1)
    s = f @ f.T
    pos = positive_mask(labels)
    if mode == "clamp" and m > 0:
        shifted = s + m
        s = torch.where(pos, torch.where(shifted < 1, shifted, torch.ones_like(s)), s)
    a = s / temperature
    row_max = a.max(dim=1, keepdim=True).values
    a = a - (row_max.detach() if stabilizer == "detach" else row_max)

    not_self = ~torch.eye(len(labels), dtype=torch.bool, device=z.device)
    log_denominator = torch.logsumexp(a.masked_fill(~not_self, float("-inf")), dim=1, keepdim=True)
    log_p = a - log_denominator
    if mode == "subtract":
        log_p = torch.where(pos, log_p - m, log_p)

    n_pos = pos.sum(dim=1)
    pos_log_p = (log_p * pos).sum(dim=1)  # masked entries are finite, so multiplying is safe
    per_anchor = -pos_log_p / n_pos.clamp(min=1)
    return per_anchor.mean()
