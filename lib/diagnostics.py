"""Batch diagnostics of contrastive training (no gradients)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lib.losses import positive_mask


@torch.no_grad()
def clamp_activation_rate(z: torch.Tensor, labels: torch.Tensor, margin: float) -> float:
    """Fraction of positive pairs (i, j in P(i)) whose cosine satisfies s_ij + margin > 1.

    This is the share of positive pairs that margin clamping saturates (CAR, [ours] from the
    MARGIN paper's wording). It is measured for every margin mode: under ``subtract`` it says
    what clamping would have hit. NaN when the batch has no positive pair.
    """
    f = F.normalize(z.to(torch.promote_types(z.dtype, torch.float32)), dim=1)  # no half-precision counts
    pos = positive_mask(labels)
    n_pos = int(pos.sum())
    if n_pos == 0:
        return float("nan")
    s = f @ f.T
    return float(((s + margin > 1) & pos).sum()) / n_pos


@torch.no_grad()
def positive_pair_density(labels: torch.Tensor) -> float:
    """Mean |P(i)| per anchor: the number of other same-class entries in the batch.

    For a class-balanced batch of 2N views over K classes this is 2N/K - 1.
    """
    if len(labels) == 0:
        raise ValueError("labels is empty: the density of an empty batch is undefined")
    return float(positive_mask(labels).sum()) / len(labels)
