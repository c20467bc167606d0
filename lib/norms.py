"""Embedding norms in self-supervised learning (NORMS, STUDIES.md study 4): the library of notebook 04.

The paper's argument in two lines: a loss that sees an embedding z only through z / ||z|| has a
gradient orthogonal to z and of size proportional to 1 / ||z||, so

1. every gradient step grows the norm (||z - lr g||^2 = ||z||^2 + lr^2 ||g||^2 when g . z = 0), and
2. the larger the norm, the smaller the step on the sphere: convergence slows as ||z||^2.

Samples that the network has seen often and fits well end up with large norms, so the norm is a
confidence score, and it is small for data unlike the training data. Two interventions keep norms
from slowing training: :func:`cut_init` (start with small norms) and :class:`GradScale` (multiply
each row's gradient by ||z||^p, which for p = 1 cancels the 1 / ||z||).

Contents, one section each: the interventions; SimSiam's network; the imbalanced subsets;
the norm diagnostics (norm per sample and class, kNN correctness, norm buckets, rank correlation,
AUROC); the two simulations (convergence on the sphere, latent classes); training
(:func:`train_norms`, SimCLR or SimSiam with every intervention, on the epoch loop of
:func:`lib.ssl.train_epochs`) and its evaluation.

Decisions where STUDIES.md and the authors' code are silent or differ are marked [ours] below.
"""
from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
from scipy import stats

from lib import params
from lib.augment import normalize
from lib.cff import get_dataset
from lib.data import DATASETS
from lib.losses import decoupled_cross_view_nce, info_nce, simsiam_loss
from lib.resnet import RESNET_WIDTHS, ResNet18, SimCLRNet
from lib.ssl import (activation_layout, backbone_evaluation, check_data_and_device, embed, make_optimizer, param_groups,
                     scaled_lr, start_run, train_epochs)

# ------------------------------------------------------------------------------ interventions


class GradScale(torch.autograd.Function):
    r"""Identity forward; backward multiplies row i of the incoming gradient by ||z_i||^p.

        forward:   y = z
        backward:  dL/dz_i = ||z_i||^p * dL/dy_i        (norm over the last dimension, held constant)

    A loss of z_i / ||z_i|| has gradient (I - u u^T) g / ||z_i|| with u = z_i / ||z_i||: with p = 1
    the factor 1 / ||z_i|| cancels, so large-norm embeddings learn as fast as small ones. Put it on
    the raw embedding before the loss normalises it (NORMS [code]: SimCLR's projector outputs of
    both views, SimSiam's predictor outputs).
    """

    @staticmethod
    def forward(ctx, z: torch.Tensor, power: float) -> torch.Tensor:
        ctx.save_for_backward(z)
        ctx.power = power
        return z.view_as(z)  # a view, not z itself: autograd then records this node as z's consumer

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (z,) = ctx.saved_tensors
        return grad * torch.linalg.vector_norm(z, dim=-1, keepdim=True).pow(ctx.power), None


def grad_scale(z: torch.Tensor, power: float) -> torch.Tensor:
    """``GradScale.apply(z, power)``: z unchanged, its gradient scaled by ||z_i||^power per row."""
    if not (isinstance(power, (int, float)) and math.isfinite(power)):
        raise ValueError(f"power={power!r} must be a finite number")
    return GradScale.apply(z, power)


@torch.no_grad()
def cut_init(model: nn.Module, c: float) -> nn.Module:
    """Cut-initialisation (NORMS [code]): divide every parameter by ``c`` once, theta <- theta / c.

    Buffers (BatchNorm's running statistics and step counts) are left as they are. With c > 1 the
    network starts with smaller embeddings, so the 1 / ||z|| in the gradient of a cosine loss
    starts large. Returns ``model``, changed in place.
    """
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not (math.isfinite(c) and c > 0):
        raise ValueError(f"c={c!r} must be a finite number > 0")
    for parameter in model.parameters():
        parameter.div_(c)
    return model


# ---------------------------------------------------------------------------------- SimSiam


class SimSiamNet(nn.Module):
    """SimSiam's network (Chen & He 2021) as the NORMS authors build it [code].

    - backbone: :class:`lib.resnet.ResNet18` (CIFAR stem, ``width`` multiplier), d = 512 * width features;
    - projector: Linear(d, D)-BN-ReLU-Linear(D, D)-BN-ReLU-Linear(D, D)-BN, D = ``dim`` (2048 in the paper);
    - predictor: Linear(D, D/4)-BN-ReLU-Linear(D/4, D), the bottleneck 2048 -> 512 -> 2048.

    ``forward`` returns ``(z, p)``, the projection and the prediction, neither normalised.
    Linear layers followed by BatchNorm have no bias (the BN shift replaces it) [ours].
    """

    def __init__(self, channels: int = 3, width: float = 1.0, *, dim: int = 2048, predictor_hidden: int | None = None):
        super().__init__()
        for name, value in (("dim", dim), ("predictor_hidden", predictor_hidden or max(1, dim // 4))):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive int")
        hidden = predictor_hidden or max(1, dim // 4)
        self.backbone = ResNet18(channels, width)
        self.feature_dim = self.backbone.feature_dim
        self.projector = nn.Sequential(
            nn.Linear(self.feature_dim, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(inplace=True),
            nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(inplace=True),
            nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim))
        self.predictor = nn.Sequential(nn.Linear(dim, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                                       nn.Linear(hidden, dim))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.projector(self.backbone(x))
        return z, self.predictor(z)


# ---------------------------------------------------------------------------- imbalanced data

# The bases of the authors' imbalanced subsets [code]: class i keeps floor(n * base^-i) images.
PUBLISHED_IMBALANCE_BASE = {10: 1.5, 100: 1.03365}  # CIFAR-10 (5000 -> 130), CIFAR-100 (500 -> 18)


def imbalance_base(num_classes: int) -> float:
    """The base of the imbalance rule for ``num_classes`` classes.

    1.5 for 10 classes and 1.03365 for 100, as the authors [code]; for any other K [ours],
    1.5^(9 / (K - 1)), which keeps the CIFAR-10 rule's ratio of largest to smallest class,
    1.5^9 = 38.4, spread evenly over K classes.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes={num_classes!r} must be an int >= 2")
    return PUBLISHED_IMBALANCE_BASE.get(num_classes, 1.5 ** (9 / (num_classes - 1)))


def imbalanced_class_sizes(class_sizes: Sequence[int], base: float) -> list[int]:
    r"""How many images class i keeps: floor(n_i * base^(-i)), i = 0, 1, ... in label order.

    ``class_sizes`` are the n_i the data has (5000 each for CIFAR-10's training set, 1000 for the
    offline subset). The floor is taken in exact rational arithmetic on the decimal ``base`` as
    written, so no product that is a whole number in exact arithmetic lands one below it.
    CIFAR-100: 500 per class with base 1.03365 keeps 14,750 images; CIFAR-10: 5000 with 1.5, 14,736.
    """
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not (math.isfinite(base) and base >= 1):
        raise ValueError(f"base={base!r} must be a finite number >= 1")
    exact = Fraction(repr(float(base)))
    sizes = []
    for i, n in enumerate(class_sizes):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"class_sizes[{i}]={n!r} must be an int >= 0")
        sizes.append(math.floor(Fraction(int(n)) / exact ** i))
    return sizes


def imbalanced_indices(labels: torch.Tensor, num_classes: int, base: float) -> torch.Tensor:
    """Indices (sorted) of the imbalanced subset: the first floor(n_i base^-i) images of class i in
    dataset order, as the authors' code keeps them [code]; n_i is class i's count in ``labels``."""
    labels = labels.cpu()
    members = [torch.nonzero(labels == k).flatten() for k in range(num_classes)]
    keep = imbalanced_class_sizes([len(m) for m in members], base)
    return torch.cat([m[:n] for m, n in zip(members, keep)]).sort().values


# ------------------------------------------------------------------------------ diagnostics


def row_norms(z: torch.Tensor) -> torch.Tensor:
    """||z_i||, the Euclidean norm of each row (the embedding norm of each sample)."""
    return torch.linalg.vector_norm(z, dim=1)


def class_mean_norms(norms, labels, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean norm and sample count per class: float64 [K] (NaN for an empty class) and int64 [K]."""
    norms, labels = np.asarray(norms, dtype=float), np.asarray(labels)
    counts = np.bincount(labels, minlength=num_classes)
    sums = np.bincount(labels, weights=norms, minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), counts


@torch.no_grad()
def knn_correct(bank: torch.Tensor, bank_labels: torch.Tensor, queries: torch.Tensor, query_labels: torch.Tensor, *,
                k: int = 10, exclude_self: bool = False, chunk: int = 1024) -> torch.Tensor:
    """Whether the majority label of each query's k cosine-nearest bank rows is the query's label.

    Rows are L2-normalised; each of the k neighbours gets one vote (ties go to the smaller label).
    ``exclude_self=True`` says the queries *are* the bank (row i = bank row i), and leaves each
    query's own row out of its neighbours: the authors' variant of the confidence check, scored on
    training embeddings [ours for leaving self out]. Returns bool [M].
    """
    if exclude_self and queries.shape != bank.shape:
        raise ValueError("exclude_self=True needs the queries to be the bank itself")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(bank) - exclude_self:
        raise ValueError(f"k={k!r} must be an int in [1, {len(bank) - exclude_self}]")
    num_classes = int(max(bank_labels.max(), query_labels.max())) + 1
    unit_bank = nn.functional.normalize(bank.float(), dim=1)
    unit_queries = nn.functional.normalize(queries.float(), dim=1)
    bank_labels = bank_labels.to(bank.device)
    correct = []
    for start in range(0, len(queries), chunk):
        similarity = unit_queries[start:start + chunk] @ unit_bank.T
        if exclude_self:
            rows = torch.arange(len(similarity), device=similarity.device)
            similarity[rows, rows + start] = float("-inf")
        index = similarity.topk(k, dim=1).indices
        votes = torch.zeros(len(index), num_classes, device=index.device)
        votes.scatter_add_(1, bank_labels[index], torch.ones_like(index, dtype=votes.dtype))
        correct.append(votes.argmax(dim=1) == query_labels[start:start + chunk].to(index.device))
    return torch.cat(correct)


def norm_buckets(norms, correct, buckets: int = 20) -> dict:
    r"""Accuracy per bucket of the min-max scaled norm (NORMS' confidence plot).

        u_i = (n_i - min n) / (max n - min n),   bucket b_i = min(floor(u_i B), B - 1)

    Returns float64 arrays over the B buckets: ``centre`` (of the bucket in u), ``count`` and
    ``accuracy`` (mean correctness, NaN for an empty bucket).
    """
    norms, correct = np.asarray(norms, dtype=float), np.asarray(correct, dtype=float)
    if norms.shape != correct.shape or norms.ndim != 1 or len(norms) == 0:
        raise ValueError("norms and correct must be 1-D of the same, non-zero length")
    span = norms.max() - norms.min()
    u = (norms - norms.min()) / span if span > 0 else np.zeros_like(norms)
    bucket = np.minimum((u * buckets).astype(int), buckets - 1)
    count = np.bincount(bucket, minlength=buckets).astype(float)
    hits = np.bincount(bucket, weights=correct, minlength=buckets)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(count > 0, hits / np.maximum(count, 1), np.nan)
    return {"centre": (np.arange(buckets) + 0.5) / buckets, "count": count, "accuracy": accuracy}


def rank_correlation(x, y) -> tuple[float, float]:
    """Spearman's rho of x and y (``scipy.stats.spearmanr``) and its two-sided p-value; NaN when
    either is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue)


def auroc(in_scores, out_scores) -> float:
    r"""Area under the ROC curve of a score that should be larger for in-distribution samples.

        AUROC = P(s_in > s_out) + P(s_in = s_out) / 2 = U_in / (n_in n_out),
        U_in  = R_in - n_in (n_in + 1) / 2      (R_in: sum of the in-samples' mid-ranks in the pooled scores)

    0.5 is chance; 1 means every in-distribution score exceeds every out-of-distribution one.
    """
    a, b = np.asarray(in_scores, dtype=float).ravel(), np.asarray(out_scores, dtype=float).ravel()
    if len(a) == 0 or len(b) == 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("in_scores and out_scores must be non-empty and finite")
    ranks = stats.rankdata(np.concatenate([a, b]))
    u_in = ranks[:len(a)].sum() - len(a) * (len(a) + 1) / 2
    return float(u_in / (len(a) * len(b)))


def auroc_test(in_scores, out_scores) -> tuple[float, float]:
    """:func:`auroc` and the two-sided Mann-Whitney p-value of AUROC = 0.5 (the same U statistic)."""
    return auroc(in_scores, out_scores), float(stats.mannwhitneyu(in_scores, out_scores, alternative="two-sided").pvalue)


def loglog_slope(x, y) -> tuple[float, float]:
    """Least-squares slope of log y on log x and its standard error (the exponent of y ~ x^slope)."""
    result = stats.linregress(np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float)))
    return float(result.slope), float(result.stderr)


# ------------------------------------------------------------------------------ simulations


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


# -------------------------------------------------------------------------------- training

METHODS = ("simclr", "simsiam")
SIMCLR_LOSSES = ("decoupled", "standard")  # decoupled: the authors' cross-view form [code]; standard: SimCLR's NT-Xent

DEFAULTS = dict(
    method="simclr",            # simclr | simsiam
    dataset="cifar10",          # a name from lib.data.DATASETS
    dataset_options={},         # load_dataset options, e.g. {"image_size": 32} or shapes' {"num_classes": 10}
    imbalance_base=0.0,         # 0: every training image; >= 1: class i keeps floor(n_i * base^-i) (imbalanced_indices)
    seed=0,
    simclr_loss="decoupled",    # decoupled (the authors' code) | standard (SimCLR's NT-Xent)
    temperature=0.5,            # SimCLR's temperature [code]
    width=1.0,                  # ResNet-18 channel multiplier: 512 * width features
    projector_dim=128,          # SimCLR: output width (128 [code]); SimSiam: projector and predictor width D (2048)
    projector_hidden=0,         # SimCLR: hidden width (0 = projector_dim, as [code]); SimSiam: predictor bottleneck (0 = D/4)
    epochs=512,                 # [code]
    batch_size=256,
    optimizer="sgd",            # the authors use SGD with momentum [code]; lars | sgd | adam
    lr=0.3,                     # base rate, scaled by lr_scaling
    lr_scaling="linear",        # linear: lr * B / 256
    momentum=0.9,
    weight_decay=1e-6,          # SimCLR 1e-6, SimSiam 5e-4 [code]
    exclude_bias_and_norm=False,  # the authors decay every parameter [code]
    warmup_epochs=10.0,         # [code]
    fixed_predictor_lr=True,    # SimSiam's predictor keeps the base rate, no schedule (SimSiam paper, [code])
    crop_min_scale=0.2,         # RandomResizedCrop scale (0.2, 1) [code]
    cut=1.0,                    # cut-initialisation: divide every parameter by this once (1 = none)
    grad_scale_power=0.0,       # GradScale power p on the raw embeddings (0 = off)
    knn_k=200,                  # backbone kNN monitor (k = 200, temperature 0.1)
    knn_temperature=0.1,
    probe_steps=500,            # L-BFGS iterations of the linear probe
    probe_weight_decay=1e-4,
    confidence_k=10,            # kNN of the norm-as-confidence check (cosine, majority vote)
    buckets=20,                 # norm buckets of the confidence check
    ood=[],                     # unseen sets: [{"dataset": name, "dataset_options": {...}}, ...]
    stored_norms=2000,          # per-sample norms kept in the record per evaluation set (0: none)
    recalibrate_bn=True,        # re-estimate BatchNorm statistics on the training images before evaluating [ours]
    channels_last=True,
    device="cpu",
    threads=0,
)


def norms_config(**overrides) -> dict:
    """The full, checked config of one run of :func:`train_norms`: DEFAULTS updated by ``overrides``."""
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise params.ParameterError(f"unknown parameter(s) {unknown}; known: {', '.join(DEFAULTS)}")
    c = {**DEFAULTS, **overrides}
    params.choice("method", c["method"], METHODS)
    check_data_and_device(c)
    params.choice("simclr_loss", c["simclr_loss"], SIMCLR_LOSSES)
    base = params.number("imbalance_base", c["imbalance_base"], 0.0)
    if 0 < base < 1:
        params.fail("imbalance_base", base, "0 (balanced) or a number >= 1")
    for name in ("temperature", "knn_temperature", "width", "lr", "cut"):
        params.number(name, c[name], 0.0, low_open=True)
    params.number("width", c["width"], RESNET_WIDTHS[0], RESNET_WIDTHS[1])
    params.number("momentum", c["momentum"], 0.0, 1.0)
    for name in ("weight_decay", "probe_weight_decay"):
        params.number(name, c[name], 0.0)
    params.number("grad_scale_power", c["grad_scale_power"], -4.0, 4.0)
    params.number("crop_min_scale", c["crop_min_scale"], 0.0, 1.0, low_open=True)
    for name in ("epochs", "batch_size", "projector_dim", "knn_k", "probe_steps", "confidence_k", "buckets"):
        params.integer(name, c[name], 1)
    for name in ("seed", "projector_hidden", "stored_norms", "threads"):
        params.integer(name, c[name], 0)
    if c["batch_size"] < 2:
        params.fail("batch_size", c["batch_size"], "an integer >= 2 (a batch needs negatives and BatchNorm statistics)")
    params.number("warmup_epochs", c["warmup_epochs"], 0.0, c["epochs"])
    for name in ("exclude_bias_and_norm", "fixed_predictor_lr", "recalibrate_bn", "channels_last"):
        params.flag(name, c[name])
    c["ood"] = [_ood_spec(entry) for entry in (c["ood"] if isinstance(c["ood"], list) else [None])]
    return c


def _ood_spec(entry) -> dict:
    allowed = 'a list of {"dataset": name from lib.data.DATASETS, "dataset_options": {...}}'
    if not isinstance(entry, dict) or set(entry) - {"dataset", "dataset_options"} or "dataset" not in entry:
        params.fail("ood", entry, allowed)
    if entry["dataset"] not in DATASETS or not isinstance(entry.get("dataset_options", {}), dict):
        params.fail("ood", entry, allowed)
    return {"dataset": entry["dataset"], "dataset_options": dict(entry.get("dataset_options", {}))}


def ood_label(spec: dict) -> str:
    """A short name of an unseen set: its dataset and the options that change its content (not size or channels)."""
    options = "_".join(f"{k}{v}" for k, v in sorted(spec["dataset_options"].items())
                       if k not in ("image_size", "channels", "n_train", "n_test"))
    return spec["dataset"] + (f"_{options}" if options else "")


def build_model(c: dict, channels: int) -> nn.Module:
    """SimCLR's ResNet-18 with the authors' plain projector Linear-ReLU-Linear [code], or :class:`SimSiamNet`."""
    if c["method"] == "simclr":
        return SimCLRNet(channels, c["width"], hidden_dim=c["projector_hidden"] or c["projector_dim"],
                         out_dim=c["projector_dim"], projector_bn=False)
    return SimSiamNet(channels, c["width"], dim=c["projector_dim"], predictor_hidden=c["projector_hidden"] or None)


def build_optimizer(model: nn.Module, c: dict, lr: float) -> torch.optim.Optimizer:
    """:func:`lib.ssl.make_optimizer` on the backbone and projector; SimSiam's predictor joins as
    groups marked ``fixed_lr`` when ``fixed_predictor_lr`` (the schedule then leaves them at ``lr``)."""
    fixed = c["method"] == "simsiam" and c["fixed_predictor_lr"]
    scheduled = nn.ModuleList([model.backbone, model.projector]) if fixed else model
    optimizer = make_optimizer(scheduled, c["optimizer"], lr=lr, momentum=c["momentum"], weight_decay=c["weight_decay"],
                               exclude_bias_and_norm=c["exclude_bias_and_norm"])
    if fixed:
        for group in param_groups(model.predictor, exclude_bias_and_norm=c["exclude_bias_and_norm"]):
            if c["optimizer"] != "lars":
                group.pop("exclude", None)  # a LARS-only option
            optimizer.add_param_group({**group, "fixed_lr": True})
    return optimizer


def step_diagnostics(method: str) -> tuple[str, ...]:
    """Per-step values a run records (averaged per epoch in its curves)."""
    common = ("loss", "embedding_norm", "embedding_spread")
    return common + (("prediction_norm",) if method == "simsiam" else ())


def _spread(z: torch.Tensor) -> torch.Tensor:
    """sqrt(dim) * mean over dimensions of the batch std of z / ||z||: about 1 for embeddings spread
    over the sphere, 0 for collapse (SimSiam's collapse monitor, Chen & He 2021)."""
    return nn.functional.normalize(z, dim=1).std(dim=0).mean() * math.sqrt(z.shape[1])


def make_step(model: nn.Module, optimizer: torch.optim.Optimizer, c: dict):
    """The training step of run config ``c``, for :func:`lib.ssl.train_epochs`: one update on the
    stacked views ``[view1; view2]`` (one batch, so BatchNorm sees both), returning the float64
    :func:`step_diagnostics` before the update, or None, without updating, on a non-finite loss.

    SimCLR: z = projector outputs, GradScale on both views' z, then the decoupled or standard loss.
    SimSiam: z, p = projector and predictor outputs, GradScale on p, then :func:`simsiam_loss`.
    The recorded norms are those of the raw outputs (GradScale leaves values unchanged).
    """
    power = c["grad_scale_power"]

    def scaled(t):
        return grad_scale(t, power) if power != 0 else t

    def step(views: torch.Tensor) -> torch.Tensor | None:
        if c["method"] == "simclr":
            z = model(views)
            z1, z2 = scaled(z).chunk(2)
            objective = (decoupled_cross_view_nce if c["simclr_loss"] == "decoupled" else info_nce)(z1, z2, c["temperature"])
            extra = ()
        else:
            z, p = model(views)
            p1, p2 = scaled(p).chunk(2)
            z1, z2 = z.chunk(2)
            objective = simsiam_loss(p1, p2, z1, z2)
            extra = (row_norms(p.detach()).mean(),)
        if not torch.isfinite(objective):
            return None
        optimizer.zero_grad(set_to_none=True)
        objective.backward()
        optimizer.step()
        z = z.detach()
        return torch.stack([objective.detach(), row_norms(z).mean(), _spread(z), *extra]).double().cpu()

    return step


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, batches) -> None:
    """Re-estimate every BatchNorm's running mean and variance from ``batches`` (model inputs), exactly.

    Each BatchNorm's statistics are reset and, with ``momentum=None``, become the plain average of the
    per-batch means and (unbiased) variances over one training-mode pass without gradients; the
    momenta and the train/eval mode are restored afterwards. Why [ours]: with momentum 0.1 the
    running averages still carry their initial values (mean 0, variance 1) after a few dozen steps,
    which after cut-initialisation (far smaller activations) makes eval-mode outputs orders of
    magnitude too small; after long training the re-estimate changes little.
    """
    batch_norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in batch_norms]
    for m in batch_norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average of the batches' statistics
    was_training = model.training
    model.train()
    for batch in batches:
        model(batch)
    for m, momentum in zip(batch_norms, momenta):
        m.momentum = momentum
    model.train(was_training)


@torch.no_grad()
def project(model: nn.Module, features: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """The projector's outputs (the embeddings whose norms the study reads) of backbone features,
    in eval mode (BatchNorm on running statistics); the model's mode is restored."""
    was_training = model.training
    model.eval()
    out = torch.cat([model.projector(features[i:i + batch_size]) for i in range(0, len(features), batch_size)])
    model.train(was_training)
    return out


def _stored(values: torch.Tensor, limit: int) -> list:
    """The first ``limit`` values (the sets are in random class order), rounded to float32's precision."""
    return [float(f"{v:.7g}") for v in values[:limit].double().tolist()]


def norm_evaluation(model: nn.Module, ds, x_train: torch.Tensor, y_train: torch.Tensor, c: dict,
                    data_root: str | None) -> dict:
    """Everything a finished run measures: backbone kNN and linear probe (``lib.ssl``), and the norms
    of the projector outputs as confidence and as an in-distribution score. All in eval mode, after
    :func:`recalibrate_batchnorm` on the unaugmented training images when ``recalibrate_bn``.

    - ``norm_mean_train``/``norm_mean_test``; ``class_norms``/``class_counts`` on the training set;
    - held-out confidence: kNN (k = ``confidence_k``, cosine, majority) of each test embedding
      against the training embeddings; ``knn_confidence_top1``, Spearman ``norm_rho``/``norm_p`` of
      norm and correctness, and ``buckets`` (:func:`norm_buckets`);
    - the authors' variant: training embeddings against the other training embeddings, ``*_train``;
    - per unseen set (``ood``): ``auroc_<label>``/``auroc_p_<label>`` of the norm as a score of
      being from the training distribution (test set against the unseen set's test images) and
      ``norm_mean_<label>``; the first ``stored_norms`` per-sample norms of every set in ``stored``.
    """
    device = x_train.device
    if c["recalibrate_bn"]:
        recalibrate_batchnorm(model, (normalize(x_train[i:i + 512], ds.mean, ds.std) for i in range(0, len(x_train), 512)))
    h_train, h_test = embed(model, x_train, ds.mean, ds.std), embed(model, ds.x_test.to(device), ds.mean, ds.std)
    y_train, y_test = y_train.to(device), ds.y_test.to(device)
    out = backbone_evaluation(c, h_train, y_train, h_test, y_test, num_classes=ds.num_classes)
    z_train, z_test = project(model, h_train), project(model, h_test)
    n_train, n_test = row_norms(z_train).cpu(), row_norms(z_test).cpu()
    class_norms, class_counts = class_mean_norms(n_train.numpy(), y_train.cpu().numpy(), ds.num_classes)
    out.update(norm_mean_train=n_train.mean().item(), norm_mean_test=n_test.mean().item(),
               class_norms=class_norms.tolist(), class_counts=class_counts.tolist())

    k = min(c["confidence_k"], len(z_train) - 1)
    correct = knn_correct(z_train, y_train, z_test, y_test, k=k).cpu()
    correct_train = knn_correct(z_train, y_train, z_train, y_train, k=k, exclude_self=True).cpu()
    for suffix, norms, hits in (("", n_test, correct), ("_train", n_train, correct_train)):
        rho, p = rank_correlation(norms.numpy(), hits.numpy())
        buckets = norm_buckets(norms.numpy(), hits.numpy(), c["buckets"])
        out.update({f"knn_confidence_top1{suffix}": hits.float().mean().item(), f"norm_rho{suffix}": rho,
                    f"norm_p{suffix}": p, f"buckets{suffix}": {key: v.tolist() for key, v in buckets.items()}})

    stored = {"test": _stored(n_test, c["stored_norms"]), "test_correct": correct[:c["stored_norms"]].int().tolist()}
    for spec in c["ood"]:
        unseen = get_dataset(spec, data_root)
        if unseen.x_test.shape[1:] != ds.x_test.shape[1:]:
            raise ValueError(f"unseen set {ood_label(spec)} has images {tuple(unseen.x_test.shape[1:])}, the training "
                             f"data {tuple(ds.x_test.shape[1:])}: give it image_size and channels options")
        # normalised with the training data's statistics: the network's input as it was trained
        n_unseen = row_norms(project(model, embed(model, unseen.x_test.to(device), ds.mean, ds.std))).cpu()
        label = ood_label(spec)
        score, p = auroc_test(n_test.numpy(), n_unseen.numpy())
        out.update({f"auroc_{label}": score, f"auroc_p_{label}": p, f"norm_mean_{label}": n_unseen.mean().item()})
        stored[label] = _stored(n_unseen, c["stored_norms"])
    out["stored"] = stored
    return out


NOT_EVALUATED = ("knn_top1", "probe_top1", "probe_top5", "probe_objective", "norm_mean_train", "norm_mean_test",
                 "knn_confidence_top1", "norm_rho", "norm_p")


def train_norms(*, data_root: str | None = None, progress: bool | None = None, **config) -> dict:
    """Train SimCLR or SimSiam with the run's interventions, then run :func:`norm_evaluation`.

    The config (:func:`norms_config`) says which: ``method``; ``imbalance_base`` for the imbalanced
    subset; ``cut`` for cut-initialisation (applied once, after the seeded initialisation);
    ``grad_scale_power`` for GradScale; ``weight_decay``. The loop is :func:`lib.ssl.train_epochs`
    with the NORMS augmentation (crop scale 0.2-1, flip, jitter 0.4/0.4/0.4/0.1 p 0.8, grayscale 0.2).

    Metrics: ``status`` ("ok" or "diverged"), the evaluation (NaN when diverged), per-epoch
    ``curves`` of :func:`step_diagnostics` and ``lr``, ``norm_per_step`` (mean ||z|| of each step's
    batch, before its update), ``train_images``, ``steps``, ``lr`` (the scaled base rate) and timings
    ``train_s``, ``eval_s`` and ``step_s`` (seconds per training step).
    """
    c = norms_config(**config)
    t_start = time.perf_counter()
    ds, device, gen = start_run(c, data_root)

    keep = (imbalanced_indices(ds.y_train, ds.num_classes, c["imbalance_base"]) if c["imbalance_base"]
            else torch.arange(len(ds.y_train)))
    x_train, y_train = ds.x_train[keep].to(device), ds.y_train[keep]
    if c["batch_size"] > len(keep):
        params.fail("batch_size", c["batch_size"], f"at most the {len(keep)} training images (an incomplete batch is dropped)")
    layout = activation_layout(c)
    model = build_model(c, ds.channels).to(device, memory_format=layout)
    if c["cut"] != 1:
        cut_init(model, c["cut"])
    lr = scaled_lr(c["lr"], c["batch_size"], c["lr_scaling"])
    optimizer = build_optimizer(model, c, lr)
    step = make_step(model, optimizer, c)
    norm_per_step = []

    def recorded_step(views):
        values = step(views)
        if values is not None:
            norm_per_step.append(values[1].item())
        return values

    t_loop = time.perf_counter()
    status, curves, steps = train_epochs(
        recorded_step, optimizer, x_train, epochs=c["epochs"], batch_size=c["batch_size"], lr=lr,
        warmup_epochs=c["warmup_epochs"], generator=gen, diagnostics=step_diagnostics(c["method"]),
        augmentation=dict(mean=ds.mean, std=ds.std, scale=(c["crop_min_scale"], 1.0), generator=gen),
        memory_format=layout, desc=f"{c['method']} seed {c['seed']}", progress=progress)
    loop_s = time.perf_counter() - t_loop
    train_s = time.perf_counter() - t_start

    t_eval = time.perf_counter()
    if status == "ok":
        evaluation = norm_evaluation(model, ds, x_train, y_train, c, data_root)
    else:
        evaluation = dict.fromkeys(NOT_EVALUATED, math.nan)
    return {"status": status, **evaluation, "curves": curves, "norm_per_step": norm_per_step,
            "train_images": len(keep), "steps": steps, "lr": lr, "train_s": train_s,
            "eval_s": time.perf_counter() - t_eval, "step_s": loop_s / max(1, steps)}
