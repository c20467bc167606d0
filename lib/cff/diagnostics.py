"""Batch diagnostics of contrastive training (no gradients)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from lib.core.losses import positive_mask


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


def expected_positive_pair_density(batch_size: int, num_classes: int, dataset_size: int | None = None) -> float:
    """Expected mean |P(i)| for a batch of ``batch_size`` images (two views each) over K classes.

    A class-balanced batch (N/K images of every class) gives exactly 2N/K - 1: each of the 2N
    views has 2N/K same-class views, itself excluded. A batch drawn at random, without
    replacement, from a class-balanced set of M = ``dataset_size`` images has hypergeometric class
    counts n_k, and since the density is 2 sum_k n_k^2 / N - 1, their spread adds

        E[density] = 2N/K - 1 + 2 (1 - 1/K) (M - N) / (M - 1),

    close to 2 for M >> N: batches that are not balanced hold more same-class pairs.
    ``dataset_size=None`` (or M = N, the whole set in one batch) gives the balanced closed form.
    """
    for name, value, low in (("batch_size", batch_size, 1), ("num_classes", num_classes, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}={value!r} must be an int >= {low}")
    balanced = 2 * batch_size / num_classes - 1
    if dataset_size is None:
        return balanced
    if isinstance(dataset_size, bool) or not isinstance(dataset_size, int) or dataset_size < batch_size:
        raise ValueError(f"dataset_size={dataset_size!r} must be None or an int >= batch_size={batch_size}")
    if dataset_size == 1:
        return balanced
    spread = 2 * (1 - 1 / num_classes) * (dataset_size - batch_size) / (dataset_size - 1)
    return balanced + spread


def expected_run_density(dataset_size: int, batch_size: int, num_classes: int, train_subset: int = 0,
                         val_fraction: float = 0.1) -> float:
    """The positive-pair density a CFF run should record on a class-balanced training split (study 2's check).

    ``train_cff`` holds out a random ``val_fraction`` of the split, optionally keeps
    ``train_subset`` images, and averages the density over an epoch's batches, the last one
    smaller. Every batch is a uniformly random subset of the whole balanced split, so each batch
    of b images has the expectation of :func:`expected_positive_pair_density` (b, K, M) with M the
    split's size; the run's value is their mean over the epoch's batches.
    """
    n_train = dataset_size - max(1, round(val_fraction * dataset_size))
    if train_subset:
        n_train = min(n_train, train_subset)
    sizes = [batch_size] * (n_train // batch_size) + ([n_train % batch_size] if n_train % batch_size else [])
    return float(np.mean([expected_positive_pair_density(b, num_classes, dataset_size) for b in sizes]))
