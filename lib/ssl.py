"""SimCLR training with InfoNCE or FlatNCE, and its evaluation (STUDIES.md, studies 4 and 5).

``train_simclr(**config)`` is the whole method in one readable function: the notebooks' parameters
go in as keyword arguments, a metrics dict comes out. ``simclr_config(**overrides)`` fills in and
checks a config before any compute, so a bad parameter fails with its name and the allowed values.
The pieces are usable on their own: :class:`LARS`, :func:`scaled_lr`, :func:`warmup_cosine`,
:func:`nce_diagnostics`, :func:`knn_predict` / :func:`knn_accuracy`, :func:`linear_probe` and
:func:`simclr_step_rate` (the speed benchmark's training step); :func:`train_epochs` (the epoch loop)
and :func:`backbone_evaluation` (kNN and probe) are shared with lib.norms (study 4).

Decisions where STUDIES.md is silent [ours]:
- Every training image is used (no validation split): nothing is selected on held-out data.
- The last, smaller batch of an epoch is dropped, as in FLAT's data loader [code]: the batch size
  sets the number of negatives, so every step has 2N - 2 of them.
- LARS excludes biases and BatchNorm parameters from weight decay and trust-ratio adaptation, as
  SimCLR does. FLAT's LARS means to, but its exclusion is an unimplemented TODO [code], so there
  every parameter is adapted and decayed: ``exclude_bias_and_norm=False`` runs that variant.
- The warm-up reaches the full rate at the end of its last step: lr_t = lr (t + 1) / warm-up steps
  (FLAT's starts at 0), then a cosine to 0 over the remaining steps.
- The linear probe is multinomial logistic regression on standardised frozen features, trained to
  convergence with full-batch L-BFGS and a small L2 penalty.
- A non-finite loss stops the run: it is recorded with status "diverged" and NaN accuracies.

Speed: convolutions run channels-last (NHWC), which oneDNN computes faster than NCHW on CPUs,
and :func:`keep_freed_memory` stops the C library from returning the activation buffers to the
OS after every step; :func:`simclr_step_rate` measures the step.
"""
from __future__ import annotations

import ctypes
import math
import time
from typing import Callable, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
from tqdm import tqdm  # plain bar: disable=None hides it off a terminal, e.g. under papermill

from lib import params
from lib.augment import normalize, simclr_views
from lib.cff import get_dataset
from lib.data import DATASETS, ImageDataset, load_dataset
from lib.losses import flat_nce, info_nce, pair_logits
from lib.resnet import RESNET_WIDTHS, SimCLRNet, first_stage_channels

LOSSES = ("infonce", "flatnce")
OPTIMIZERS = ("lars", "sgd", "adam")
LR_SCALINGS = ("linear", "sqrt", "none")
DEVICES = ("cpu", "cuda")

DEFAULTS = dict(
    dataset="cifar10",          # a name from lib.data.DATASETS
    dataset_options={},         # extra load_dataset options, e.g. {"num_classes": 10, "image_size": 32}
    train_subset=0,             # use only this many training images (0 = all)
    seed=0,
    loss="infonce",             # infonce | flatnce
    temperature=0.1,            # FLAT [code]
    width=1.0,                  # ResNet-18 channel multiplier: 512 * width features
    projector_hidden=0,         # hidden units of the projector (0 = the feature dimension)
    projector_dim=128,
    projector_bn=True,          # Linear-BN-ReLU-Linear; FLAT's code has no BN [code]
    epochs=100,                 # FLAT's default [code]
    batch_size=256,
    optimizer="lars",           # lars | sgd | adam
    lr=0.3,                     # base rate, scaled by lr_scaling
    lr_scaling="linear",        # linear: lr * B / 256 (FLAT); sqrt: lr * sqrt(B); none: lr
    momentum=0.9,               # lars and sgd
    weight_decay=1e-6,          # FLAT [code]
    exclude_bias_and_norm=True,  # biases and norm parameters: no weight decay, no LARS adaptation
    warmup_epochs=10,           # FLAT [code]; may be fractional
    crop_min_scale=0.08,        # RandomResizedCrop scale (crop_min_scale, 1): FLAT 0.08, NORMS 0.2
    knn_k=200,
    knn_temperature=0.1,
    probe_steps=500,            # L-BFGS iterations of the linear probe
    probe_weight_decay=1e-4,    # L2 penalty of the probe on standardised features
    channels_last=True,         # NHWC activations: faster convolutions on CPU and GPU
    device="cpu",               # cpu | cuda
    threads=0,                  # torch threads in this process (0 = leave as is)
)


def check_data_and_device(c: dict) -> None:
    """The checks every self-supervised run config shares: dataset and its options, optimizer, lr scaling, device."""
    params.choice("dataset", c["dataset"], DATASETS)
    if not isinstance(c["dataset_options"], dict):
        params.fail("dataset_options", c["dataset_options"], "a dict of load_dataset options")
    params.choice("optimizer", c["optimizer"], OPTIMIZERS)
    params.choice("lr_scaling", c["lr_scaling"], LR_SCALINGS)
    params.choice("device", c["device"], DEVICES)
    if c["device"] == "cuda" and not torch.cuda.is_available():
        params.fail("device", c["device"], "cpu (no CUDA device is available here)")


def simclr_config(**overrides) -> dict:
    """The full, checked config of one SimCLR run: DEFAULTS updated by ``overrides``."""
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise params.ParameterError(f"unknown SimCLR parameter(s) {unknown}; known: {', '.join(DEFAULTS)}")
    c = {**DEFAULTS, **overrides}
    check_data_and_device(c)
    c["dataset_options"] = dict(c["dataset_options"])
    params.choice("loss", c["loss"], LOSSES)
    for name in ("temperature", "knn_temperature", "width", "lr"):
        params.number(name, c[name], 0.0, low_open=True)
    params.number("width", c["width"], RESNET_WIDTHS[0], RESNET_WIDTHS[1])
    params.number("momentum", c["momentum"], 0.0, 1.0)
    for name in ("weight_decay", "probe_weight_decay"):
        params.number(name, c[name], 0.0)
    params.number("crop_min_scale", c["crop_min_scale"], 0.0, 1.0, low_open=True)
    for name in ("epochs", "batch_size", "projector_dim", "knn_k", "probe_steps"):
        params.integer(name, c[name], 1)
    for name in ("seed", "train_subset", "projector_hidden", "threads"):
        params.integer(name, c[name], 0)
    if c["batch_size"] < 2:
        params.fail("batch_size", c["batch_size"], "an integer >= 2 (a batch needs negatives)")
    params.number("warmup_epochs", c["warmup_epochs"], 0.0, c["epochs"])
    for name in ("projector_bn", "exclude_bias_and_norm", "channels_last"):
        params.flag(name, c[name])
    return c


# ------------------------------------------------------------------------------ optimisation


class LARS(torch.optim.Optimizer):
    r"""LARS (You, Gitman & Ginsburg 2017) as SimCLR uses it: momentum on the trust-scaled step.

    For a parameter w with gradient g, in a group without ``exclude``:

        d    = g + weight_decay * w
        r    = trust_coefficient * ||w|| / ||d||        (1 when ||w|| or ||d|| is 0)
        v   <- momentum * v + lr * r * d
        w   <- w - v

    In a group with ``exclude=True`` (biases and normalisation parameters, see
    :func:`param_groups`) the step is plain SGD with momentum, without weight decay:
    v <- momentum * v + lr * g, w <- w - v.
    """

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust_coefficient: float = 1e-3):
        for name, value in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay),
                            ("trust_coefficient", trust_coefficient)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}={value} must be a finite number >= 0")
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, trust_coefficient=trust_coefficient,
                        exclude=False)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                d = p.grad
                if not group["exclude"]:
                    d = d.add(p, alpha=group["weight_decay"])
                    w_norm, d_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(d)
                    # torch.where keeps the ratio on the device: no host sync per parameter
                    trust = torch.where((w_norm > 0) & (d_norm > 0),
                                        group["trust_coefficient"] * w_norm / d_norm, torch.ones_like(w_norm))
                    d = d * trust
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                velocity = state["momentum_buffer"]
                velocity.mul_(group["momentum"]).add_(d, alpha=group["lr"])
                p.sub_(velocity)
        return loss


def param_groups(model: nn.Module, *, exclude_bias_and_norm: bool = True) -> list[dict]:
    """Weights in one group, biases and normalisation parameters (every parameter with fewer than
    two dimensions) in a second group marked ``exclude=True`` with ``weight_decay=0``.

    ``exclude_bias_and_norm=False`` puts every parameter in the first group.
    """
    weights = [p for p in model.parameters() if p.ndim >= 2 or not exclude_bias_and_norm]
    excluded = [p for p in model.parameters() if p.ndim < 2 and exclude_bias_and_norm]
    groups = [{"params": weights}]
    if excluded:
        groups.append({"params": excluded, "exclude": True, "weight_decay": 0.0})
    return groups


def make_optimizer(model: nn.Module, name: str, *, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                   exclude_bias_and_norm: bool = True) -> torch.optim.Optimizer:
    """LARS, SGD with momentum, or Adam on :func:`param_groups`; weight decay is L2 added to the
    gradient (Adam's, not AdamW's) and never on the excluded group."""
    groups = param_groups(model, exclude_bias_and_norm=exclude_bias_and_norm)
    if name == "lars":
        return LARS(groups, lr=lr, momentum=momentum, weight_decay=weight_decay)
    for group in groups:
        group.pop("exclude", None)  # a LARS-only option
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer={name!r} is not allowed; choose one of {', '.join(OPTIMIZERS)}")


def scaled_lr(lr: float, batch_size: int, rule: str) -> float:
    """The learning rate for ``batch_size`` images per step: ``linear`` lr * B / 256 (SimCLR's and
    FLAT's default), ``sqrt`` lr * sqrt(B) (SimCLR's choice for small batches), ``none`` lr."""
    if rule == "linear":
        return lr * batch_size / 256
    if rule == "sqrt":
        return lr * math.sqrt(batch_size)
    if rule == "none":
        return lr
    raise ValueError(f"rule={rule!r} is not allowed; choose one of {', '.join(LR_SCALINGS)}")


def warmup_cosine(step: int, total_steps: int, warmup_steps: int) -> float:
    """The learning-rate multiplier at ``step`` (0-based): linear warm-up, then cosine to 0.

        (step + 1) / warmup_steps                                          for step < warmup_steps
        (1 + cos(pi (step - warmup_steps) / (total_steps - warmup_steps))) / 2   afterwards
    """
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be in [0, total_steps={total_steps}]")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total_steps - warmup_steps)))


# ----------------------------------------------------------------------------- diagnostics


DIAGNOSTICS = ("info_nce", "grad_scale", "negative_entropy")


@torch.no_grad()
def nce_diagnostics(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    r"""float64 [3]: InfoNCE, the mean gradient-scale factor and the entropy over negatives.

    With v_i = logsumexp_{j neg} (s_ij - s_ip) / tau and l_i = softplus(v_i) (InfoNCE of anchor i):

    - ``info_nce``          mean_i l_i; it equals log(2N - 1) when all similarities are equal, and
                            log(2N - 1) - l, the mutual-information bound it gives, can never
                            exceed log(2N - 1) (the "log-K curse"); l itself can, when positives
                            are less similar than negatives
    - ``grad_scale``        mean_i (1 - e^{-l_i}) = mean_i sigmoid(v_i): how much InfoNCE scales
                            down FlatNCE's gradient of anchor i; it vanishes as l_i -> 0
    - ``negative_entropy``  mean_i of the entropy (nats) of softmax_j s_ij / tau over the 2N - 2
                            negatives; log(2N - 2) when the negatives are weighted equally
    """
    positive, negatives = pair_logits(z1, z2, temperature)
    v = torch.logsumexp(negatives - positive[:, None], dim=1)
    log_p = torch.log_softmax(negatives, dim=1)
    entropy = -(log_p.exp() * log_p).sum(dim=1)
    return torch.stack([F.softplus(v).mean(), torch.sigmoid(v).mean(), entropy.mean()]).double().cpu()


# ------------------------------------------------------------------------------ evaluation


@torch.no_grad()
def embed(model: SimCLRNet, images: torch.Tensor, mean, std, *, batch_size: int = 512) -> torch.Tensor:
    """Backbone features of uint8 images, unaugmented, with the model in eval mode (BatchNorm uses
    its running statistics); the model's train/eval mode is restored afterwards."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    # no memory-format conversion: a convolution with channels-last weights gives channels-last output
    feats = [model.features(normalize(images[i:i + batch_size].to(device), mean, std))
             for i in range(0, len(images), batch_size)]
    model.train(was_training)
    return torch.cat(feats)


@torch.no_grad()
def knn_predict(train_features: torch.Tensor, train_labels: torch.Tensor, test_features: torch.Tensor, *,
                k: int = 200, temperature: float = 0.1, num_classes: int | None = None,
                chunk: int = 1024) -> torch.Tensor:
    r"""Weighted kNN labels (InstDisc, Wu et al. 2018; the SimCLR CIFAR monitors).

    Features are L2-normalised; for a test point x the k training points of highest cosine
    similarity s_j vote for their labels with weight exp(s_j / temperature):

        score_c(x) = sum_{j in top-k(x), y_j = c} exp(s_j / temperature),   prediction = argmax_c score_c

    ``k`` is capped at the number of training points; ``num_classes`` defaults to max label + 1.
    Test points are scored ``chunk`` at a time to bound memory. Returns int64 [M] labels.
    """
    if train_features.ndim != 2 or test_features.ndim != 2 or train_features.shape[1] != test_features.shape[1]:
        raise ValueError(f"features must be [N, d] and [M, d], got {tuple(train_features.shape)} "
                         f"and {tuple(test_features.shape)}")
    if train_labels.shape != (len(train_features),):
        raise ValueError(f"train_labels must be [{len(train_features)}], got {tuple(train_labels.shape)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be an int >= 1")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature={temperature} must be > 0")
    num_classes = int(train_labels.max()) + 1 if num_classes is None else num_classes
    k = min(k, len(train_features))
    bank = F.normalize(train_features.float(), dim=1)
    predictions = []
    for part in F.normalize(test_features.float(), dim=1).split(chunk):
        similarity, index = (part @ bank.T).topk(k, dim=1)
        votes = torch.zeros(len(part), num_classes, device=part.device)
        votes.scatter_add_(1, train_labels[index], (similarity / temperature).exp())
        predictions.append(votes.argmax(dim=1))
    return torch.cat(predictions)


def knn_accuracy(train_features, train_labels, test_features, test_labels, *, k: int = 200,
                 temperature: float = 0.1, num_classes: int | None = None) -> float:
    """Top-1 accuracy of :func:`knn_predict` on the test points."""
    predicted = knn_predict(train_features, train_labels, test_features, k=k, temperature=temperature,
                            num_classes=num_classes)
    return (predicted == test_labels.to(predicted.device)).float().mean().item()


def linear_probe(train_features: torch.Tensor, train_labels: torch.Tensor, test_features: torch.Tensor,
                 test_labels: torch.Tensor, *, num_classes: int, steps: int = 500,
                 weight_decay: float = 1e-4) -> dict:
    r"""Multinomial logistic regression on frozen features, trained to convergence.

    Features are standardised with the training set's per-dimension mean and std; the head
    W x + b minimises mean cross-entropy + weight_decay / 2 * ||W||^2 over the whole training set
    with L-BFGS (strong-Wolfe line search, at most ``steps`` iterations). Returns top-1 (and top-5
    when there are at least 5 classes) test accuracy and the final training objective.
    """
    mean, std = train_features.mean(dim=0), train_features.std(dim=0).clamp(min=1e-6)
    x_train, x_test = (train_features - mean) / std, (test_features - mean) / std
    head = nn.Linear(x_train.shape[1], num_classes).to(x_train.device)
    optimizer = torch.optim.LBFGS(head.parameters(), lr=1.0, max_iter=steps, history_size=20,
                                  tolerance_grad=1e-7, tolerance_change=1e-10, line_search_fn="strong_wolfe")

    def objective():
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(head(x_train), train_labels) + 0.5 * weight_decay * head.weight.square().sum()
        loss.backward()
        return loss

    final = optimizer.step(objective).item()
    with torch.no_grad():
        logits = head(x_test)
    top1 = (logits.argmax(dim=1) == test_labels).float().mean().item()
    if num_classes >= 5:
        top5 = (logits.topk(5, dim=1).indices == test_labels[:, None]).any(dim=1).float().mean().item()
    else:
        top5 = float("nan")
    return {"probe_top1": top1, "probe_top5": top5, "probe_objective": final}


# -------------------------------------------------------------------------------- training


def simclr_step(model: SimCLRNet, optimizer: torch.optim.Optimizer, views: torch.Tensor, *, loss: str,
                temperature: float) -> torch.Tensor | None:
    """One step on the stacked views ``[view1; view2]``: both views go through the network as one
    batch (so BatchNorm sees both), the loss pairs row i with row i + N.

    Returns the float64 [3] :func:`nce_diagnostics` of the batch before the update, or None,
    without updating, when the loss is not finite.
    """
    z1, z2 = model(views).chunk(2)
    if loss == "infonce":
        objective = value = info_nce(z1, z2, temperature)
    else:
        objective, value = flat_nce(z1, z2, temperature)
    if not torch.isfinite(value):
        return None
    optimizer.zero_grad(set_to_none=True)
    objective.backward()
    optimizer.step()
    return nce_diagnostics(z1.detach(), z2.detach(), temperature)


def train_epochs(step: Callable[[torch.Tensor], torch.Tensor | None], optimizer: torch.optim.Optimizer,
                 x_train: torch.Tensor, *, epochs: int, batch_size: int, lr: float, warmup_epochs: float,
                 augmentation: dict, generator: torch.Generator, diagnostics: Sequence[str],
                 memory_format: torch.memory_format = torch.contiguous_format, desc: str = "",
                 progress: bool | None = None) -> tuple[str, dict, int]:
    """The epoch loop of a two-view method: :func:`train_simclr`'s, shared with lib.norms.

    Each epoch draws a permutation of the N training images ``x_train`` (uint8) from ``generator``
    and walks it in N // ``batch_size`` full batches (the last, smaller batch is dropped). At step t
    every parameter group without a true ``fixed_lr`` gets lr_t = ``lr`` * warmup_cosine(t, T, W)
    (T = epochs * steps per epoch, W = round(``warmup_epochs`` * steps per epoch)); then the batch's
    :func:`simclr_views` (``augmentation``: simclr_augment's options) go, stacked and in
    ``memory_format``, to ``step(views)``, which updates the model and returns the float64 values of
    ``diagnostics`` before the update, or None when the loss was not finite: the run then stops,
    "diverged". Returns ``(status, curves, steps)``; ``curves`` holds each diagnostic's mean over each
    completed epoch and ``lr``, the first group's rate at the epoch's last step.
    """
    n = len(x_train)
    steps_per_epoch = n // batch_size
    total_steps = epochs * steps_per_epoch
    warmup_steps = round(warmup_epochs * steps_per_epoch)
    curves = {key: [] for key in (*diagnostics, "lr")}
    status, t = "ok", 0
    bar = tqdm(total=epochs, desc=desc, disable=None if progress is None else not progress, leave=False)
    for _ in range(epochs):
        sums = torch.zeros(len(diagnostics), dtype=torch.float64)
        perm = torch.randperm(n, generator=generator)
        for start in range(0, steps_per_epoch * batch_size, batch_size):
            for group in optimizer.param_groups:
                if not group.get("fixed_lr", False):
                    group["lr"] = lr * warmup_cosine(t, total_steps, warmup_steps)
            views = simclr_views(x_train[perm[start:start + batch_size].to(x_train.device)], **augmentation)
            values = step(views.contiguous(memory_format=memory_format))
            if values is None:
                status = "diverged"
                break
            sums += values
            t += 1
        bar.update()
        if status == "diverged":
            break
        for key, value in zip(diagnostics, (sums / steps_per_epoch).tolist()):
            curves[key].append(value)
        curves["lr"].append(optimizer.param_groups[0]["lr"])
    bar.close()
    return status, curves, t


def backbone_evaluation(c: dict, f_train: torch.Tensor, y_train: torch.Tensor, f_test: torch.Tensor,
                        y_test: torch.Tensor, *, num_classes: int) -> dict:
    """kNN top-1 (:func:`knn_accuracy`, ``c["knn_k"]``, ``c["knn_temperature"]``) and the linear probe
    (:func:`linear_probe`, ``c["probe_steps"]``, ``c["probe_weight_decay"]``) on frozen features."""
    return {
        "knn_top1": knn_accuracy(f_train, y_train, f_test, y_test, k=c["knn_k"], temperature=c["knn_temperature"],
                                 num_classes=num_classes),
        **linear_probe(f_train, y_train, f_test, y_test, num_classes=num_classes, steps=c["probe_steps"],
                       weight_decay=c["probe_weight_decay"]),
    }


def activation_layout(c: dict) -> torch.memory_format:
    """The activations' layout of a run: NHWC (``channels_last``) when the config asks for it, except
    on the CPU with fewer than 8 channels in the first stage (width < 1/8): there oneDNN's
    channels-last convolution backward on one thread writes past its buffers (torch 2.14.1; glibc
    aborts with "double free or corruption"), so such tiny test-sized models run NCHW."""
    tiny = c["device"] == "cpu" and first_stage_channels(c["width"]) < 8
    return torch.channels_last if c["channels_last"] and not tiny else torch.contiguous_format


def start_run(c: dict, data_root: str | None) -> tuple[ImageDataset, torch.device, torch.Generator]:
    """The start every self-supervised run shares: ``(dataset, device, generator)``.

    Sets the config's thread count (0: leave it), keeps freed memory (:func:`keep_freed_memory`),
    loads the data, and seeds the initialisation (the global generator) and the data order and
    augmentation (the returned generator), in that order, so that a seed gives the same run.
    """
    if c["threads"]:
        torch.set_num_threads(c["threads"])
    keep_freed_memory()
    ds = get_dataset(c, data_root)
    torch.manual_seed(c["seed"])
    return ds, torch.device(c["device"]), torch.Generator().manual_seed(c["seed"])


def train_simclr(*, data_root: str | None = None, progress: bool | None = None, **config) -> dict:
    """Train SimCLR (ResNet-18 + projector) with InfoNCE or FlatNCE, then evaluate the backbone.

    Metrics: ``status`` ("ok" or "diverged"); ``knn_top1`` (weighted kNN, k = ``knn_k``, on
    normalised backbone features, test images against the training images) and ``probe_top1`` /
    ``probe_top5`` (:func:`linear_probe`), both on unaugmented images in eval mode, features
    computed once; per epoch ``curves`` of the :data:`DIAGNOSTICS` (averaged over the epoch's steps)
    and the last step's learning rate; ``info_nce_ceiling`` = log(2N - 1); ``lr`` the scaled base
    rate; timings ``train_s`` and ``eval_s``. ``progress=None`` shows a bar only on a terminal.
    """
    c = simclr_config(**config)
    t_start = time.perf_counter()
    ds, device, gen = start_run(c, data_root)

    n = len(ds.y_train) if not c["train_subset"] else min(c["train_subset"], len(ds.y_train))
    bs = c["batch_size"]
    if bs > n:
        params.fail("batch_size", bs, f"at most the {n} training images (an incomplete batch is dropped)")
    x_train = ds.x_train[:n].to(device)
    layout = activation_layout(c)
    model = SimCLRNet(ds.channels, c["width"], hidden_dim=c["projector_hidden"] or None, out_dim=c["projector_dim"],
                      projector_bn=c["projector_bn"]).to(device, memory_format=layout)
    lr = scaled_lr(c["lr"], bs, c["lr_scaling"])
    optimizer = make_optimizer(model, c["optimizer"], lr=lr, momentum=c["momentum"], weight_decay=c["weight_decay"],
                               exclude_bias_and_norm=c["exclude_bias_and_norm"])
    augmentation = dict(mean=ds.mean, std=ds.std, scale=(c["crop_min_scale"], 1.0), generator=gen)

    status, curves, step = train_epochs(
        lambda views: simclr_step(model, optimizer, views, loss=c["loss"], temperature=c["temperature"]),
        optimizer, x_train, epochs=c["epochs"], batch_size=bs, lr=lr, warmup_epochs=c["warmup_epochs"],
        augmentation=augmentation, generator=gen, diagnostics=DIAGNOSTICS, memory_format=layout,
        desc=f"simclr {c['loss']} seed {c['seed']}", progress=progress)
    train_s = time.perf_counter() - t_start

    t_eval = time.perf_counter()
    if status == "ok":
        f_train = embed(model, x_train, ds.mean, ds.std)
        f_test = embed(model, ds.x_test, ds.mean, ds.std)
        y_train, y_test = ds.y_train[:n].to(device), ds.y_test.to(device)
        evaluation = backbone_evaluation(c, f_train, y_train, f_test, y_test, num_classes=ds.num_classes)
    else:
        evaluation = {"knn_top1": float("nan"), "probe_top1": float("nan"), "probe_top5": float("nan"),
                      "probe_objective": float("nan")}
    eval_s = time.perf_counter() - t_eval

    return {
        "status": status,
        **evaluation,
        "epochs_completed": len(curves["info_nce"]),
        "steps": step,
        "train_images": int(n),
        "feature_dim": model.feature_dim,
        "lr": lr,
        "info_nce_ceiling": math.log(2 * bs - 1),
        "info_nce_final": curves["info_nce"][-1] if curves["info_nce"] else float("nan"),
        "grad_scale_final": curves["grad_scale"][-1] if curves["grad_scale"] else float("nan"),
        "curves": curves,
        "train_s": train_s,
        "eval_s": eval_s,
    }


# ----------------------------------------------------------------------------------- speed

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameter numbers (malloc.h)


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for reuse, so that training steps stop page-faulting.

    Every step frees and re-allocates the same activation buffers (about 5 GB at batch 256,
    width 1). glibc serves blocks above its mmap threshold (at most 32 MiB) with fresh mmap()s and
    unmaps them when freed, so each step the kernel faults in and zeroes every page again:
    1.4 million faults and 2.5 s of system time in a 17 s step on one core (measured). Serving all
    blocks from the heap (M_MMAP_MAX = 0) and never trimming it (M_TRIM_THRESHOLD = max) lets later
    steps reuse the same pages: 10% more images/s at width 1 and 25% at width 0.25 on one core.

    Process-wide and permanent: the process keeps its peak memory (4.4 instead of 3.3 GB at batch
    256, width 1). Returns whether it applied; it changes nothing where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def simclr_step_rate(batch: int = 256, width: float = 1.0, *, repeat: int = 3, channels_last: bool = True,
                     keep_memory: bool = True, loss: str = "infonce", optimizer: str = "lars",
                     x_uint8: torch.Tensor | None = None) -> dict:
    """Images/s and model FLOPs per image of one full SimCLR training step on the CPU.

    The step is the real one: two augmented views of ``batch`` images (from ``x_uint8``, uint8
    [>= batch, 3, 32, 32]; procedural 32x32 images if None), forward and backward through ResNet-18
    and projector as one batch of 2 x ``batch``, the loss, and the optimizer's update. FLOPs are
    counted by ``torch.utils.flop_counter`` over one step (convolutions and matrix products, forward
    and backward). ``keep_memory`` calls :func:`keep_freed_memory` first, as :func:`train_simclr`
    does (process-wide: whatever runs later in the process keeps it). Returns ``batch``, ``width``,
    ``images_per_s``, ``gflop_per_image``, ``gflops`` (achieved rate) and ``data_share`` (the
    augmentation's share of the step time).

    Measured on the project's 2-core machine, one thread, batch 256, against a 2048 x 2048 fp32
    matmul in the same process: width 1 at 17.7 images/s, 6.66 GFLOP/image, 72% of the matmul
    rate (NCHW: 68%; without :func:`keep_freed_memory` about 10% slower); widths 0.5 and 0.25 at
    3.6x and 10.5x the images/s of width 1, where memory-bound BatchNorm and ReLU weigh more.
    """
    if keep_memory:
        keep_freed_memory()
    if x_uint8 is None:
        x_uint8 = load_dataset("shapes", image_size=32, n_train=max(batch, 10), n_test=10).x_train
    x = x_uint8[:batch]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = SimCLRNet(x.shape[1], width).to(memory_format=memory_format)
    opt = make_optimizer(model, optimizer, lr=scaled_lr(0.3, batch, "linear"), weight_decay=1e-6)
    mean, std = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)

    def views():
        return simclr_views(x, mean=mean, std=std, generator=gen).contiguous(memory_format=memory_format)

    def step():
        simclr_step(model, opt, views(), loss=loss, temperature=0.1)

    with FlopCounterMode(display=False) as counter:
        step()
    step_s = _median_seconds(step, repeat)
    data_s = _median_seconds(views, max(3, repeat))
    flops_per_image = counter.get_total_flops() / batch
    return dict(batch=batch, width=width, images_per_s=batch / step_s, gflop_per_image=flops_per_image / 1e9,
                gflops=flops_per_image * batch / step_s / 1e9, data_share=data_s / step_s)


def _median_seconds(fn, repeat: int) -> float:
    fn()  # warm-up: allocator and oneDNN primitive caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
