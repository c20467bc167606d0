"""Contrastive losses, one function each, formula in the docstring.

Conventions: ``z`` holds the 2N stacked view features ``[view1; view2]`` (rows are samples),
``labels`` their 2N class labels; features are L2-normalised inside the loss.

The self-supervised losses take the two views apart, ``z1`` and ``z2`` ([N, dim] each, row i of
both from image i), and :data:`SSL_LOSSES` names them for :func:`lib.ssl.training.train_ssl`: adding a loss is
one function here and one entry there.

Each function checks the arguments that are its own (shapes, modes, the margin). The temperature tau > 0 is a
run's setting: it is checked once, where it is declared, in the run configs (``CFFConfig``, ``SSLConfig``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

MARGIN_MODES = ("clamp", "subtract", "none")
STABILIZERS = ("detach", "direct")


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; choose one of {', '.join(allowed)}")


def margin_schedule(m0: float, m_last: float, layers: int) -> list[float]:
    """Per-layer margins, linear from ``m0`` at layer 0 to ``m_last`` at layer ``layers - 1``.

    CFF's default is m0 = 0.4, m_last = 0.1; for 8 layers: 0.4, 0.357, ..., 0.143, 0.1. The margins are checked
    where they are declared, in the run config (``lib.cff.training.MARGIN_RANGE``).
    """
    if layers < 1:
        raise ValueError(f"layers={layers} must be >= 1")
    if layers == 1:
        return [float(m0)]
    steps = [layer / (layers - 1) for layer in range(layers)]
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


def _check_pair_batch(z1: torch.Tensor, z2: torch.Tensor) -> None:
    """Two views [N, dim] of N >= 2 images, so that every anchor has negatives."""
    if z1.ndim != 2 or z1.shape != z2.shape:
        raise ValueError(f"z1 and z2 must be [N, dim] of the same shape, got {tuple(z1.shape)} and {tuple(z2.shape)}")
    if z1.shape[0] < 2:
        raise ValueError(f"a batch needs N >= 2 pairs to have negatives, got N={z1.shape[0]}")


def pair_logits(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Positive and negative logits of the 2N anchors of a two-view batch (SimCLR's pairing).

    With f = L2-normalised rows of [z1; z2] and s_ij = f_i . f_j, anchor i's positive is its other
    view p(i) = i +- N and its negatives are the other 2N - 2 rows of both views. Returns
    ``(positive [2N], negatives [2N, 2N - 2])`` = (s_{i,p(i)} / tau, s_ij / tau for j not in {i, p(i)}),
    negatives in row order.
    """
    _check_pair_batch(z1, z2)
    n = z1.shape[0]
    f = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = f @ f.T / temperature
    rows = torch.arange(2 * n, device=z1.device)
    partner = (rows + n) % (2 * n)
    positive = logits[rows, partner]
    is_negative = torch.ones_like(logits, dtype=torch.bool)
    is_negative[rows, rows] = False
    is_negative[rows, partner] = False
    return positive, logits[is_negative].view(2 * n, 2 * n - 2)


def info_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    r"""SimCLR's NT-Xent loss on two views ``z1``, ``z2`` ([N, dim], row i of each from image i).

    With the logits of :func:`pair_logits` (cosine / tau, positive = the other view, 2N - 2
    negatives from both views), for each of the 2N anchors

        l_i  = -log( exp(s_ip / tau) / (exp(s_ip / tau) + sum_{j neg} exp(s_ij / tau)) )
        loss = mean_i l_i

    Its value is log(2N - 1) when every similarity is equal (the "log-K" ceiling), and it tends
    to 0 as positives separate from the negatives.
    """
    positive, negatives = pair_logits(z1, z2, temperature)
    return (torch.logsumexp(torch.cat([positive[:, None], negatives], dim=1), dim=1) - positive).mean()


def flat_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.1) -> torch.Tensor:
    r"""FlatNCE (FLAT; docs/studies.md, "Study 5") on two views ``z1``, ``z2`` ([N, dim]); see :func:`info_nce`.

    Flat logits compare each negative with the anchor's positive, and v_i is their log-sum-exp:

        v_i  = logsumexp_{j neg} (s_ij - s_ip) / tau
        loss = mean_i exp(v_i - stopgrad(v_i))

    The value is exactly 1; the gradient is mean_i grad v_i. Since InfoNCE's l_i = log(1 + e^{v_i})
    (= softplus v_i), grad l_i = (1 - e^{-l_i}) grad v_i: per anchor, FlatNCE's gradient is InfoNCE's
    divided by 1 - e^{-l_i}, which keeps it from vanishing as l_i -> 0. Its value says nothing of
    training: InfoNCE on the same batch is :func:`lib.ssl.training.nce_diagnostics`' ``info_nce``. A non-finite
    v_i gives a non-finite loss.
    """
    positive, negatives = pair_logits(z1, z2, temperature)
    v = torch.logsumexp(negatives - positive[:, None], dim=1)
    return torch.exp(v - v.detach()).mean()


def decoupled_cross_view_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    r"""InfoNCE in the cross-view, decoupled form of the NORMS authors' SimCLR code [code].

    With f1, f2 the L2-normalised rows of ``z1``, ``z2`` ([N, dim], row i of both from image i) and
    s_ij = f1_i . f2_j, every anchor is a view-1 row and its candidates are the view-2 rows:

        l_i  = -s_ii / tau + log sum_{j != i} exp(s_ij / tau)
        loss = mean_i l_i

    Unlike :func:`info_nce` (2N anchors, negatives from both views, the positive inside the
    denominator) the positive is left out of the denominator ("decoupled", Yeh et al. 2022), so the
    value can be negative: with aligned views (s_ii = 1) and orthogonal negatives (s_ij = 0) it is
    log(N - 1) - 1/tau. Both views receive gradient, since each s_ij involves both.
    """
    _check_pair_batch(z1, z2)
    logits = F.normalize(z1, dim=1) @ F.normalize(z2, dim=1).T / temperature
    positive = logits.diagonal()
    # -inf on the diagonal drops the positive from the log-sum-exp without changing the other terms
    negatives = logits.masked_fill(torch.eye(len(logits), dtype=torch.bool, device=logits.device), float("-inf"))
    return (torch.logsumexp(negatives, dim=1) - positive).mean()


def negative_cosine(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    r"""SimSiam's D(p, z) = -mean_i (p_i / ||p_i||) . (stopgrad(z_i) / ||z_i||), in [-1, 1].

    The target ``z`` is detached: no gradient reaches it through this term (Chen & He 2021).
    """
    if p.ndim != 2 or p.shape != z.shape:
        raise ValueError(f"p and z must be [N, dim] of the same shape, got {tuple(p.shape)} and {tuple(z.shape)}")
    return -(F.normalize(p, dim=1) * F.normalize(z.detach(), dim=1)).sum(dim=1).mean()


def simsiam_loss(p1: torch.Tensor, p2: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
    r"""SimSiam's symmetric loss on the predictions p and projections z of two views ([N, dim] each):

        loss = (D(p1, z2) + D(p2, z1)) / 2,    D = :func:`negative_cosine` (stop-gradient on z)

    -1 when every prediction points along the other view's projection. The NORMS authors' code
    writes it as an "attractive" term with temperature 1, the same thing [code].
    """
    return (negative_cosine(p1, z2) + negative_cosine(p2, z1)) / 2


@dataclass(frozen=True)
class SSLLoss:
    """A self-supervised loss as the trainer calls it, and what the trainer needs to know of it.

    ``fn(z1, z2, temperature)`` on the two views' projections, or, with ``predictions``,
    ``fn(p1, p2, z1, z2)`` on the predictor outputs and projections of SimSiam's network;
    ``negatives``: it contrasts each pair with the batch's other samples (InfoNCE's per-step
    diagnostics, :func:`lib.ssl.training.nce_diagnostics`, apply). Returns the scalar to backpropagate.
    """

    fn: Callable[..., torch.Tensor]
    predictions: bool = False
    negatives: bool = True


# The losses of studies 4 and 5 by name (SSLConfig.loss).
SSL_LOSSES: dict[str, SSLLoss] = {
    "infonce": SSLLoss(info_nce),                     # SimCLR's NT-Xent
    "flatnce": SSLLoss(flat_nce),                     # FLAT (study 5)
    "decoupled": SSLLoss(decoupled_cross_view_nce),   # the NORMS authors' SimCLR loss [code] (study 4)
    "simsiam": SSLLoss(simsiam_loss, predictions=True, negatives=False),
}
