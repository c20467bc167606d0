"""Self-supervised training of studies 4 and 5: SimCLR and SimSiam, one config and one trainer.

:class:`SSLConfig` holds every setting of a run, each default in one place; ``train_ssl(config)``
trains it and returns its metrics. The loss is chosen by name from :data:`lib.core.losses.SSL_LOSSES`;
the network (:class:`lib.ssl.resnet.SimCLRNet` or :class:`lib.ssl.resnet.SimSiamNet`) by ``method``; the
interventions of study 4 (cut-initialisation, GradScale: :mod:`lib.ssl.interventions`), its imbalanced
subsets (:func:`lib.core.data.imbalanced_indices`), its class-restricted training for the near-OOD test and its
unseen-set scoring are config fields, and so are the NORMS authors' training details (``zero_init_residual``,
``color_jitter``, ``micro_batch``).
``diagnostics`` says what a run measures: ``nce`` (study 5) InfoNCE, its gradient scale and the
negatives' entropy per step; ``norms`` (study 4) the loss and the embeddings' norm and spread per
step, and the norm diagnostics of :func:`lib.ssl.evaluation.norm_diagnostics` at the end.

The module is over 400 lines because it is the whole method: the config (a third of it, one commented
line per field), the network and optimiser built from it, the step, the epoch loop and the trainer;
the reusable pieces live in lib.core.optim, lib.ssl.evaluation, lib.ssl.interventions and lib.core.losses.

Decisions where the specification (docs/studies.md) is silent [ours]:
- Every training image is used (no validation split): nothing is selected on held-out data.
- The last, smaller batch of an epoch is dropped, as in FLAT's data loader [code]: the batch size
  sets the number of negatives, so every step has 2N - 2 of them.
- Both views go through the network as one batch, so BatchNorm sees both (with ``micro_batch``, both views
  of the micro-batch's images).
- A non-finite loss stops the run: it is recorded with status "diverged" and NaN evaluations.
"""
from __future__ import annotations

import ctypes
import dataclasses
import math
import time
from typing import Callable, Sequence

import torch
import torch.nn as nn

from lib.core import params
from lib.core.augment import JITTER_MODES, simclr_views
from lib.core.config import Config
from lib.core.data import DATASETS, ImageDataset, check_dataset, get_dataset, imbalanced_indices, num_classes
from lib.core.losses import SSL_LOSSES, pair_logits
from lib.core.optim import LR_SCALINGS, OPTIMIZERS, make_optimizer, param_groups, scaled_lr, warmup_cosine
from lib.core.progress import steps as step_bar
from lib.ssl.evaluation import BACKBONE_METRICS, NORM_METRICS, evaluate, initial_ood_scores, row_norms
from lib.ssl.interventions import cut_init, grad_scale
from lib.ssl.resnet import RESNET_WIDTHS, SimCLRNet, SimSiamNet, first_stage_channels

METHODS = ("simclr", "simsiam")
DIAGNOSTICS = ("nce", "norms")
DEVICES = ("cpu", "cuda")
NCE_DIAGNOSTICS = ("info_nce", "grad_scale", "negative_entropy")


MIN_BATCH = 2  # the smallest batch: an anchor needs a negative, BatchNorm two samples (the one bound of batch sizes)


@dataclasses.dataclass(frozen=True)
class SSLConfig(Config):
    """One SimCLR or SimSiam run. Defaults are SimCLR's as FLAT runs it [code] unless tagged; study 4
    overrides the NORMS authors' settings (``lib.studies.embedding_norms.METHOD_SETTINGS``)."""

    method: str = "simclr"              # simclr | simsiam: the network (SimSiam's has a predictor)
    loss: str = "infonce"               # a name in lib.core.losses.SSL_LOSSES; simsiam needs a loss taking predictions
    dataset: str = "cifar10"            # a name from lib.core.data.DATASETS
    dataset_options: dict = dataclasses.field(default_factory=dict)  # load_dataset options, e.g. {"image_size": 32}
    train_subset: int = 0               # use only the first this many training images (0 = all) [ours]
    imbalance_base: float = 0.0         # 0: balanced; >= 1: class i keeps floor(n_i * base^-i) [code]
    seed: int = 0
    temperature: float = 0.1            # FLAT [code]; the NORMS authors' SimCLR: 0.5 [code]
    width_multiplier: float = 1.0       # ResNet-18 channel multiplier: 512 * width_multiplier features
    projector_dim: int = 128            # SimCLR: output width [code]; SimSiam: projector and predictor width D (2048)
    projector_hidden: int = 0           # SimCLR: hidden width (0 = the feature dimension); SimSiam: 0 (D wide)
    projector_bn: bool = False          # False: FLAT's and NORMS' Linear-ReLU-Linear [code]; True: SimCLR's with BN
    predictor_hidden: int = 0           # SimSiam: predictor bottleneck (0 = D / 4, the paper's 2048 -> 512 -> 2048)
    epochs: int = 100                   # FLAT [code]
    batch_size: int = 256
    optimizer: str = "lars"             # lars | sgd | adam (FLAT: lars [code]; NORMS: sgd [code])
    lr: float = 0.3                     # base rate, scaled by lr_scaling (FLAT: 0.3 [code]; lib.core.optim.BASE_LR)
    lr_scaling: str = "linear"          # linear: lr * B / 256 (FLAT [code]); sqrt: lr * sqrt(B); none: lr
    momentum: float = 0.9               # lars and sgd
    weight_decay: float = 1e-6          # FLAT and NORMS' SimCLR [code]; NORMS' SimSiam 5e-4 [code]
    exclude_bias_and_norm: bool = True  # biases and norm parameters: no weight decay, no LARS adaptation (SimCLR)
    warmup_epochs: float = 10.0         # FLAT [code]; may be fractional
    fixed_predictor_lr: bool = True     # SimSiam's predictor keeps the base rate, no schedule (SimSiam paper, [code])
    crop_min_scale: float = 0.08        # RandomResizedCrop scale (crop_min_scale, 1): FLAT 0.08, NORMS 0.2 [code]
    cut: float = 1.0                    # cut-initialisation: divide every parameter by this once (1 = none) [code]
    grad_scale_power: float = 0.0       # GradScale power p on the raw embeddings (0 = off) [code]
    # The NORMS authors' training details [code]; the defaults are FLAT's (and this project's before issue 17).
    zero_init_residual: bool = False    # True: each residual branch's last BN starts at weight 0 (NORMS); FLAT: no
    color_jitter: str = "joint"         # joint: 1 RandomApply(p 0.8) of all 4 ops (FLAT); separate: 1 per op (NORMS)
    micro_batch: int = 0                # >0: images per forward/backward, their gradients summed into one step (NORMS'
                                        # SimSiam: 128 of 1024); 0: the whole batch at once
    train_classes: list = dataclasses.field(default_factory=list)  # only these classes ([]: all): near-OOD runs [ours]
    diagnostics: str = "nce"            # nce (study 5) | norms (study 4): what a run measures, see the module docstring
    knn_k: int = 200                    # backbone kNN monitor (k = 200, temperature 0.1; SimCLR's CIFAR monitor)
    knn_temperature: float = 0.1
    probe_steps: int = 500              # L-BFGS iterations of the linear probe [ours]
    probe_weight_decay: float = 1e-4    # L2 penalty of the probe on standardised features [ours]
    recalibrate_bn: bool = False        # re-estimate BatchNorm on the training images before evaluating [ours]
    confidence_k: int = 10              # norms: kNN of the norm-as-confidence check (cosine, majority vote) [ours]
    buckets: int = 20                   # norms: norm buckets of the confidence check [paper]
    ood: list = dataclasses.field(default_factory=list)  # norms: unseen sets [{"dataset", "dataset_options"}, ...]
    stored_norms: int = 2000            # norms: per-sample norms kept in the record per evaluation set (0: none)
    channels_last: bool = True          # NHWC activations: faster convolutions on CPU and GPU
    device: str = "cpu"                 # cpu | cuda
    threads: int = 0                    # torch threads in this process (0 = leave as is)

    def __post_init__(self):
        params.choice("method", self.method, METHODS)
        object.__setattr__(self, "dataset_options", check_dataset(self.dataset, self.dataset_options))
        params.choice("optimizer", self.optimizer, OPTIMIZERS)
        params.choice("lr_scaling", self.lr_scaling, LR_SCALINGS)
        params.choice("device", self.device, DEVICES)
        if self.device == "cuda" and not torch.cuda.is_available():
            params.fail("device", self.device, "cpu (no CUDA device is available here)")
        params.choice("loss", self.loss, SSL_LOSSES)
        loss = SSL_LOSSES[self.loss]
        if loss.predictions != (self.method == "simsiam"):
            params.fail("loss", self.loss, f"a loss that {'takes' if self.method == 'simsiam' else 'takes no'} "
                        f"predictions for method {self.method}: one of "
                        f"{', '.join(k for k, v in SSL_LOSSES.items() if v.predictions == (self.method == 'simsiam'))}")
        params.choice("diagnostics", self.diagnostics, DIAGNOSTICS)
        if self.diagnostics == "nce" and not loss.negatives:
            params.fail("diagnostics", self.diagnostics, f"norms (loss {self.loss} has no negatives for InfoNCE's)")
        base = params.number("imbalance_base", self.imbalance_base, 0.0)
        if 0 < base < 1:
            params.fail("imbalance_base", base, "0 (balanced) or a number >= 1")
        for name in ("temperature", "knn_temperature", "width_multiplier", "lr", "cut"):
            params.number(name, getattr(self, name), 0.0, low_open=True)
        params.number("width_multiplier", self.width_multiplier, RESNET_WIDTHS[0], RESNET_WIDTHS[1])
        params.number("momentum", self.momentum, 0.0, 1.0)
        for name in ("weight_decay", "probe_weight_decay"):
            params.number(name, getattr(self, name), 0.0)
        params.number("grad_scale_power", self.grad_scale_power, -4.0, 4.0)
        params.number("crop_min_scale", self.crop_min_scale, 0.0, 1.0, low_open=True)
        for name in ("epochs", "batch_size", "projector_dim", "knn_k", "probe_steps", "confidence_k", "buckets"):
            params.integer(name, getattr(self, name), 1)
        for name in ("seed", "train_subset", "projector_hidden", "predictor_hidden", "stored_norms", "threads"):
            params.integer(name, getattr(self, name), 0)
        if self.method == "simsiam" and self.projector_hidden:
            params.fail("projector_hidden", self.projector_hidden,
                        "0 for simsiam (its projector is projector_dim wide)")
        if self.batch_size < MIN_BATCH:
            params.fail("batch_size", self.batch_size,
                        f"an integer >= {MIN_BATCH} (a batch needs negatives and BatchNorm statistics)")
        params.number("warmup_epochs", self.warmup_epochs, 0.0, self.epochs)
        for name in ("projector_bn", "exclude_bias_and_norm", "fixed_predictor_lr", "recalibrate_bn", "channels_last",
                     "zero_init_residual"):
            params.flag(name, getattr(self, name))
        params.choice("color_jitter", self.color_jitter, JITTER_MODES)
        params.integer("micro_batch", self.micro_batch, 0)
        if self.micro_batch and (self.micro_batch < 2 or self.batch_size % self.micro_batch):
            params.fail("micro_batch", self.micro_batch, f"0 (the whole batch) or a divisor >= 2 of batch_size="
                        f"{self.batch_size} (a micro-batch needs negatives and BatchNorm statistics)")
        if isinstance(self.train_classes, (list, tuple)) and not self.train_classes:
            object.__setattr__(self, "train_classes", [])  # every class
        else:
            classes = num_classes(self.dataset, self.dataset_options)
            object.__setattr__(self, "train_classes",
                               class_list("train_classes", self.train_classes, classes, minimum=2))
        if not isinstance(self.ood, (list, tuple)):
            params.fail("ood", self.ood,
                        'a list of {"dataset": name from lib.core.data.DATASETS, "dataset_options": {...}}')
        object.__setattr__(self, "ood", [_ood_spec(entry) for entry in self.ood])
        if self.ood and self.diagnostics != "norms":
            params.fail("ood", self.ood, "[] unless diagnostics is norms (unseen sets are scored by their norms)")

    @classmethod
    def from_legacy(cls, values: dict) -> "SSLConfig":
        """Today's config of a record written by ``lib.ssl.training.train_simclr`` (study 5) or
        ``lib.norms.train_norms`` (study 4), or of one in today's form. Fields added since take their
        defaults, which are the settings those runs had (issue 17's ``zero_init_residual``,
        ``color_jitter``, ``micro_batch``, ``train_classes``), except ``projector_bn``: a record without
        it was made while the default was True (SimCLR's head with BatchNorm)."""
        v = dict(values)
        if "simclr_loss" in v:  # train_norms: the loss named per method, SimCLR's hidden width 0 = its output width
            simclr_loss = v.pop("simclr_loss")
            if v["method"] == "simsiam":
                v.update(loss="simsiam", predictor_hidden=v["projector_hidden"], projector_hidden=0)
            else:
                v.update(loss={"standard": "infonce"}.get(simclr_loss, simclr_loss),
                         projector_hidden=v["projector_hidden"] or v["projector_dim"])
            v.update(projector_bn=False, train_subset=0, diagnostics="norms")
        elif "width" in v:  # train_simclr: SimCLR with InfoNCE's diagnostics, evaluated without recalibration
            v.update(method="simclr", diagnostics="nce", recalibrate_bn=False)
        if "width" in v:
            v["width_multiplier"] = v.pop("width")
        v.setdefault("projector_bn", True)  # the default until issue 17 (then FLAT's head, without BatchNorm)
        return cls.from_dict(v)


def _ood_spec(entry) -> dict:
    """An unseen set: a dataset's test images, of the listed ``classes`` only when the entry has them
    (the near-OOD test: a training set's held-out classes)."""
    allowed = ('a list of {"dataset": name from lib.core.data.DATASETS, "dataset_options": {...}, '
               '"classes": [class indices] (optional)}')
    if (not isinstance(entry, dict) or set(entry) - {"dataset", "dataset_options", "classes"}
            or "dataset" not in entry):
        params.fail("ood", entry, allowed)
    if entry["dataset"] not in DATASETS or not isinstance(entry.get("dataset_options", {}), dict):
        params.fail("ood", entry, allowed)
    spec = {"dataset": entry["dataset"], "dataset_options": dict(entry.get("dataset_options", {}))}
    if "classes" in entry:
        spec["classes"] = class_list("ood", entry["classes"], num_classes(spec["dataset"], spec["dataset_options"]),
                                     minimum=1)
    return spec


def class_list(name: str, values, classes: int, *, minimum: int) -> list[int]:
    """``values`` as a sorted list of at least ``minimum`` distinct class indices in [0, ``classes``)."""
    allowed = f"a list of at least {minimum} distinct class indices from 0 to {classes - 1}"
    if not isinstance(values, (list, tuple)) or len(values) < minimum or len(set(values)) != len(values):
        params.fail(name, values, allowed)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < classes:
            params.fail(name, values, allowed)
    return sorted(values)


# ------------------------------------------------------------------------------- the network


def build_model(c: SSLConfig, channels: int) -> nn.Module:
    """SimCLR's ResNet-18 with its projector, or SimSiam's network with projector and predictor."""
    if c.method == "simclr":
        return SimCLRNet(channels, c.width_multiplier, hidden_dim=c.projector_hidden or None, out_dim=c.projector_dim,
                         projector_bn=c.projector_bn, zero_init_residual=c.zero_init_residual)
    return SimSiamNet(channels, c.width_multiplier, dim=c.projector_dim, predictor_hidden=c.predictor_hidden or None,
                      zero_init_residual=c.zero_init_residual)


def build_optimizer(model: nn.Module, c: SSLConfig, lr: float) -> torch.optim.Optimizer:
    """:func:`lib.core.optim.make_optimizer` on the model; SimSiam's predictor joins as groups marked
    ``fixed_lr`` when ``fixed_predictor_lr`` (the schedule then leaves them at ``lr``)."""
    fixed = c.method == "simsiam" and c.fixed_predictor_lr
    scheduled = nn.ModuleList([model.backbone, model.projector]) if fixed else model
    optimizer = make_optimizer(scheduled, c.optimizer, lr=lr, momentum=c.momentum, weight_decay=c.weight_decay,
                               exclude_bias_and_norm=c.exclude_bias_and_norm)
    if fixed:
        for group in param_groups(model.predictor, exclude_bias_and_norm=c.exclude_bias_and_norm):
            if c.optimizer != "lars":
                group.pop("exclude", None)  # a LARS-only option
            optimizer.add_param_group({**group, "fixed_lr": True})
    return optimizer


def activation_layout(c: SSLConfig) -> torch.memory_format:
    """The activations' layout of a run: NHWC (``channels_last``) when the config asks for it, except
    on the CPU with fewer than 8 channels in the first stage (width_multiplier < 1/8): there oneDNN's
    channels-last convolution backward on one thread writes past its buffers (torch 2.14.1; glibc
    aborts with "double free or corruption"), so such tiny test-sized models run NCHW."""
    tiny = c.device == "cpu" and first_stage_channels(c.width_multiplier) < 8
    return torch.channels_last if c.channels_last and not tiny else torch.contiguous_format


# ------------------------------------------------------------------------------ the step


def step_diagnostics(c: SSLConfig) -> tuple[str, ...]:
    """Per-step values a run records (averaged per epoch in its curves)."""
    if c.diagnostics == "nce":
        return NCE_DIAGNOSTICS
    return ("loss", "embedding_norm", "embedding_spread") + (("prediction_norm",) if c.method == "simsiam" else ())


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
    return torch.stack([nn.functional.softplus(v).mean(), torch.sigmoid(v).mean(), entropy.mean()]).double().cpu()


def _spread(z: torch.Tensor) -> torch.Tensor:
    """sqrt(dim) * mean over dimensions of the batch std of z / ||z||: about 1 for embeddings spread
    over the sphere, 0 for collapse (SimSiam's collapse monitor, Chen & He 2021)."""
    return nn.functional.normalize(z, dim=1).std(dim=0).mean() * math.sqrt(z.shape[1])


def make_step(model: nn.Module, optimizer: torch.optim.Optimizer, c: SSLConfig):
    """The training step of ``c``, for :func:`train_epochs`: one update on the stacked views
    ``[view1; view2]``, returning the float64 :func:`step_diagnostics` before the update, or None,
    without updating, on a non-finite loss.

    A loss on projections gets z1, z2 (GradScale, when on, on both views' z); a loss taking
    predictions (SimSiam) gets p1, p2, z1, z2 (GradScale on p). The recorded norms are those of the
    raw outputs (GradScale leaves values unchanged).

    With ``c.micro_batch`` = m the batch's N images are taken m at a time: both views of each
    micro-batch go through the network (BatchNorm sees only them) and its loss's backward pass adds
    to the gradients, so the one update follows the *sum* of the N / m micro-batch gradients, as the
    NORMS authors' SimSiam does (CLA/training/training_loop.py, train_simsiam: the division by the
    number of micro-batches is commented out) [code]. The diagnostics are then the micro-batches' mean.
    """
    loss = SSL_LOSSES[c.loss]

    def scaled(t):
        return grad_scale(t, c.grad_scale_power) if c.grad_scale_power != 0 else t

    def forward(views: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(objective, raw projections z, raw predictions p or None) of stacked views."""
        if loss.predictions:
            z, p = model(views)
            p1, p2 = scaled(p).chunk(2)
            z1, z2 = z.chunk(2)
            return loss.fn(p1, p2, z1, z2), z, p
        z = model(views)
        z1, z2 = scaled(z).chunk(2)
        return loss.fn(z1, z2, c.temperature), z, None

    def diagnostics(objective: torch.Tensor, z: torch.Tensor, p: torch.Tensor | None) -> torch.Tensor:
        z = z.detach()
        if c.diagnostics == "nce":
            return nce_diagnostics(*z.chunk(2), c.temperature)
        extra = (row_norms(p.detach()).mean(),) if p is not None else ()
        return torch.stack([objective.detach(), row_norms(z).mean(), _spread(z), *extra]).double().cpu()

    def step(views: torch.Tensor) -> torch.Tensor | None:
        n = len(views) // 2
        m = c.micro_batch or n
        parts = [views] if m == n else [torch.cat([views[i:i + m], views[n + i:n + i + m]]) for i in range(0, n, m)]
        optimizer.zero_grad(set_to_none=True)
        values = []
        for part in parts:
            objective, z, p = forward(part)
            if not torch.isfinite(objective):
                return None
            objective.backward()
            values.append((objective, z, p))
        optimizer.step()
        return torch.stack([diagnostics(*v) for v in values]).mean(dim=0)

    return step


# ------------------------------------------------------------------------------ the loop


def train_epochs(step: Callable[[torch.Tensor], torch.Tensor | None], optimizer: torch.optim.Optimizer,
                 x_train: torch.Tensor, *, epochs: int, batch_size: int, lr: float, warmup_epochs: float,
                 augmentation: dict, generator: torch.Generator, diagnostics: Sequence[str],
                 memory_format: torch.memory_format = torch.contiguous_format, desc: str = "",
                 progress: bool | None = None) -> tuple[str, dict, int]:
    """The epoch loop of a two-view method.

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
    bar = step_bar(total_steps, desc, progress)
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


_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameter numbers (malloc.h)


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for reuse, so that training steps stop page-faulting.

    Every step frees and re-allocates the same activation buffers; glibc serves blocks above its
    mmap threshold with fresh mmap()s and unmaps them when freed, so each step the kernel would
    fault in and zero every page again. Serving all blocks from the heap (M_MMAP_MAX = 0) and never
    trimming it (M_TRIM_THRESHOLD = max) lets later steps reuse the same pages (measurements:
    docs/notes/ssl.md). Process-wide and permanent: the process keeps its peak memory. Returns
    whether it applied; it changes nothing where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def start_run(c: SSLConfig, data_root: str | None) -> tuple[ImageDataset, torch.device, torch.Generator]:
    """The start of a run: ``(dataset, device, generator)``.

    Sets the config's thread count (0: leave it), keeps freed memory (:func:`keep_freed_memory`),
    loads the data, and seeds the initialisation (the global generator) and the data order and
    augmentation (the returned generator), in that order, so that a seed gives the same run.
    """
    if c.threads:
        torch.set_num_threads(c.threads)
    keep_freed_memory()
    ds = get_dataset(c.dataset, c.dataset_options, data_root)
    torch.manual_seed(c.seed)
    return ds, torch.device(c.device), torch.Generator().manual_seed(c.seed)


def training_indices(c: SSLConfig, ds: ImageDataset) -> torch.Tensor:
    """Indices of the training images a run uses: the first ``train_subset`` (0: all), of those the
    images of ``train_classes`` (when given), then, when ``imbalance_base``, their imbalanced subset
    (:func:`lib.core.data.imbalanced_indices`)."""
    n = len(ds.y_train) if not c.train_subset else min(c.train_subset, len(ds.y_train))
    keep = torch.arange(n)
    if c.train_classes:
        keep = keep[torch.isin(ds.y_train[keep], torch.tensor(c.train_classes))]
    if c.imbalance_base:
        keep = keep[imbalanced_indices(ds.y_train[keep], ds.num_classes, c.imbalance_base)]
    return keep


def train_ssl(config: SSLConfig, *, data_root: str | None = None, progress: bool | None = None) -> dict:
    """Train one SimCLR or SimSiam run, then evaluate it (:func:`lib.ssl.evaluation.evaluate`).

    The interventions apply in this order: cut-initialisation once, after the seeded initialisation;
    GradScale in every step. A run with unseen sets (``ood``) scores them first on the untrained
    model as training starts (:func:`lib.ssl.evaluation.initial_ood_scores`: ``auroc_init_<label>`` ...),
    then on the trained one. Metrics: ``status`` ("ok" or "diverged"), the evaluation (NaN when
    diverged), per-epoch ``curves`` of :func:`step_diagnostics` and ``lr``, ``steps``,
    ``train_images``, ``lr`` (the scaled base rate), timings ``train_s`` and ``eval_s``; with
    ``diagnostics="nce"`` also ``epochs_completed``, ``feature_dim``, ``info_nce_ceiling`` =
    log(2N - 1), ``info_nce_final`` and ``grad_scale_final`` (the last epoch's); with ``norms``
    ``norm_per_step`` (mean ||z|| of each step's batch, before its update) and ``step_s`` (seconds
    per training step). ``eval_s`` counts the scoring at initialisation too. ``progress``: the bar of the
    training steps (``lib.core.progress.steps``; None: in a notebook or on a terminal; within a sweep, the sweep's).
    """
    c = config
    t_start = time.perf_counter()
    ds, device, gen = start_run(c, data_root)
    keep = training_indices(c, ds)
    if c.batch_size > len(keep):
        params.fail("batch_size", c.batch_size,
                    f"at most the {len(keep)} training images (an incomplete batch is dropped)")
    x_train, y_train = ds.x_train[keep].to(device), ds.y_train[keep]
    layout = activation_layout(c)
    model = build_model(c, ds.channels).to(device, memory_format=layout)
    if c.cut != 1:
        cut_init(model, c.cut)
    t_init = time.perf_counter()
    initial = initial_ood_scores(model, ds, x_train, c, data_root) if c.ood else {}
    init_s = time.perf_counter() - t_init
    lr = scaled_lr(c.lr, c.batch_size, c.lr_scaling)
    optimizer = build_optimizer(model, c, lr)
    step = make_step(model, optimizer, c)
    norm_per_step = []

    def recorded_step(views):
        values = step(views)
        if values is not None and c.diagnostics == "norms":
            norm_per_step.append(values[1].item())
        return values

    t_loop = time.perf_counter()
    status, curves, steps = train_epochs(
        recorded_step, optimizer, x_train, epochs=c.epochs, batch_size=c.batch_size, lr=lr,
        warmup_epochs=c.warmup_epochs, generator=gen, diagnostics=step_diagnostics(c),
        augmentation=dict(mean=ds.mean, std=ds.std, scale=(c.crop_min_scale, 1.0), jitter_mode=c.color_jitter,
                          generator=gen),
        memory_format=layout, desc=f"{c.method} {c.loss} seed {c.seed}", progress=progress)
    loop_s = time.perf_counter() - t_loop
    train_s = time.perf_counter() - t_start - init_s

    t_eval = time.perf_counter()
    if status == "ok":
        evaluation = evaluate(model, ds, x_train, y_train, c, data_root)
    else:
        evaluation = dict.fromkeys(BACKBONE_METRICS + (NORM_METRICS if c.diagnostics == "norms" else ()), math.nan)
    if initial:
        stored_init = initial.pop("stored")
        evaluation = {**evaluation, **initial, "stored": {**evaluation.get("stored", {}), **stored_init}}
    metrics = {"status": status, **evaluation, "curves": curves, "steps": steps, "train_images": len(keep), "lr": lr}
    if c.diagnostics == "nce":
        metrics.update(epochs_completed=len(curves["info_nce"]), feature_dim=model.feature_dim,
                       info_nce_ceiling=math.log(2 * c.batch_size - 1),
                       info_nce_final=curves["info_nce"][-1] if curves["info_nce"] else math.nan,
                       grad_scale_final=curves["grad_scale"][-1] if curves["grad_scale"] else math.nan)
    else:
        metrics.update(norm_per_step=norm_per_step, step_s=loop_s / max(1, steps))
    return {**metrics, "train_s": train_s, "eval_s": time.perf_counter() - t_eval + init_s}
