"""Layer-local Contrastive Forward-Forward training and its linear-probe evaluation.

``train_cff(config)`` is the whole method in one readable function: a checked :class:`CFFConfig` goes
in, a metrics dict comes out. The epoch loop (:func:`train_epochs`) runs S seeds at once, so that
``lib.cff.batched.train_cff_seeds`` shares it with S = 1 here; only the step differs.

Settings with a named alternative (CFF's code first, our earlier choice second):
- ``init``: "cff" | "trunc_normal" (``lib.cff.model``).
- ``normalization``: "fixed" -- the dataset's constants (``lib.core.data.DATASETS``; CFF's for CIFAR) -- or
  "subset", the loaded training images' own statistics.
- ``eval_protocol``: "cff" -- as CFF's main_CFF.py: after every epoch the stage-1 loss of each layer is
  scored on two augmented views of the held-out split, the encoder of the epoch with the lowest
  last-layer validation loss is the one probed, and the probe trains on one augmented view of each
  image per epoch and keeps the epoch with the lowest validation loss (on augmented views as well) --
  or "clean": the final encoder, the probe on fixed features of unaugmented images. Both selection
  steps of "cff" add per-seed noise; the validation loss is recorded under either protocol.

The decisions where the sources are silent [ours], the speed measurements and the alternatives tried are in
docs/notes/cff.md.

The module runs past 400 lines because it is the whole method: the config (one commented line per field), the
model and optimiser built from it, the step, the epoch loop, the probe and the trainer; the reusable pieces
live in lib.core and lib.cff.diagnostics.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.cff.diagnostics import clamp_activation_rate, positive_pair_density
from lib.cff.model import INITS, CFFViT
from lib.core import params
from lib.core.augment import DISTORTION_LEVELS, augment, distort, normalize
from lib.core.config import Config
from lib.core.data import DATASETS, ImageDataset, check_dataset, data_shape, get_dataset
from lib.core.losses import MARGIN_MODES, STABILIZERS, margin_schedule, margin_supcon
from lib.core.progress import steps as step_bar

NORMALIZATIONS = ("fixed", "subset")
EVAL_PROTOCOLS = ("cff", "clean")
# The settings of records made before these fields existed (CFFConfig.from_legacy).
LEGACY_SETTINGS = {"init": "trunc_normal", "normalization": "subset", "eval_protocol": "clean"}
# A margin added to a cosine similarity before the clamp at 1 [ours: CFF's code takes any]: at 1 every positive pair
# is clamped from the start, so a larger one changes nothing more. The one range of m0, m_last and dose_m0.
MARGIN_RANGE = (0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class CFFConfig(Config):
    """One CFF run, checked on construction: a bad field raises ParameterError naming it."""

    dataset: str = "cifar10"          # a name from lib.core.data.DATASETS [paper]
    dataset_options: dict = dataclasses.field(default_factory=dict)  # load_dataset options, e.g. {"difficulty": 0.3}
    train_subset: int = 0             # use only this many training images (0 = all) [ours]
    seed: int = 0
    margin_mode: str = "clamp"        # clamp | subtract | none [paper]
    stabilizer: str = "detach"        # detach | direct [paper]
    m0: float = 0.4                   # margin at layer 0 [code]
    m_last: float = 0.1               # margin at the last layer; linear in between [code]
    temperature: float = 0.15         # [code]
    layers: int = 8                   # MARGIN paper: 8 [paper]; CFF code default 5
    embed_dim: int = 128              # embedding dimension E [paper]
    heads: int = 4                    # [paper]
    patch: int = 4                    # [paper]
    epochs: int = 600                 # CFF's default [code]; MARGIN's count is unknown
    batch_size: int = 512             # images per batch, two views each [paper]
    lr: float = 0.004                 # AdamW learning rate of every layer [code]
    weight_decay: float = 0.01        # PyTorch's AdamW default, as in CFF's code [code]
    padding: int | None = None        # crop padding; None: the dataset's registry entry [code]/[ours]
    flip: bool | None = None          # horizontal flips; None: the dataset's registry entry [code]/[ours]
    aug_level: int = 0                # extra augmentation before the crop/flip (augment.distort): 0 .. 4 [ours]
    init: str = "cff"                 # cff: position std 1, attention as nn.MultiheadAttention [code] | trunc_normal
    normalization: str = "fixed"      # fixed: the dataset's constants, CFF's for CIFAR [code] | subset: its own stats
    eval_protocol: str = "cff"        # cff: best-validation encoder, probe on augmented views [code] | clean
    val_fraction: float = 0.1         # held out from training and from the probe's training [ours]
    probe_epochs: int = 50            # [code]
    probe_lr: float = 5e-4            # (no source recorded)
    probe_batch_size: int = 512       # (no source recorded)
    threads: int = 0                  # torch threads in this process (0 = leave as is)

    def __post_init__(self):
        object.__setattr__(self, "dataset_options", check_dataset(self.dataset, self.dataset_options))
        params.choice("margin_mode", self.margin_mode, MARGIN_MODES)
        params.choice("stabilizer", self.stabilizer, STABILIZERS)
        params.choice("init", self.init, INITS)
        params.choice("normalization", self.normalization, NORMALIZATIONS)
        params.choice("eval_protocol", self.eval_protocol, EVAL_PROTOCOLS)
        for name in ("m0", "m_last"):
            params.number(name, getattr(self, name), *MARGIN_RANGE)
        for name in ("temperature", "lr", "probe_lr"):
            params.number(name, getattr(self, name), 0.0, low_open=True)
        params.number("weight_decay", self.weight_decay, 0.0)
        params.number("val_fraction", self.val_fraction, 0.0, 0.5, low_open=True)
        for name in ("layers", "embed_dim", "heads", "patch", "epochs", "batch_size", "probe_epochs",
                     "probe_batch_size"):
            params.integer(name, getattr(self, name), 1)
        for name in ("seed", "train_subset", "threads"):
            params.integer(name, getattr(self, name), 0)
        if self.embed_dim % self.heads:
            params.fail("embed_dim", self.embed_dim, f"a multiple of heads={self.heads}")
        size = data_shape(self.dataset, self.dataset_options)[0]  # a bad image_size option fails in load_dataset
        if isinstance(size, int) and size % self.patch:  # known before the data is loaded: fail now, not after
            params.fail("patch", self.patch, f"a divisor of the image size {size} of {self.dataset}")
        info = DATASETS[self.dataset]
        object.__setattr__(self, "padding", params.integer(
            "padding", info.crop_padding if self.padding is None else self.padding, 0))
        object.__setattr__(self, "flip", params.flag("flip", info.flip if self.flip is None else self.flip))
        if params.integer("aug_level", self.aug_level, 0) not in DISTORTION_LEVELS:
            params.fail("aug_level", self.aug_level, f"one of {DISTORTION_LEVELS}")

    @classmethod
    def from_legacy(cls, values: dict) -> "CFFConfig":
        """A record's config of schema 1 (``width`` for E; ``aug_level`` absent at 0), one made before
        ``init``/``normalization``/``eval_protocol`` existed (their settings then: ``LEGACY_SETTINGS``),
        or one of today's form."""
        values = dict(values)
        if "width" in values:
            values["embed_dim"] = values.pop("width")
        return cls.from_dict({**LEGACY_SETTINGS, **values})


# Images per chunk are chosen so one chunk's activations (tokens x E floats) stay in cache: the
# whole-batch step's activations round-trip through memory (measurements: docs/notes/cff.md).
CHUNK_TOKENS = 16384


def cff_step(model: CFFViT, optimizer: torch.optim.Optimizer, views: torch.Tensor, labels: torch.Tensor,
             margins: list[float], *, margin_mode: str, stabilizer: str, temperature: float,
             chunk_tokens: int = CHUNK_TOKENS) -> torch.Tensor | None:
    """One layer-local step on the stacked views ``[view1; view2]`` and their labels.

    Each layer runs forward on chunks of the batch, keeping each chunk's autograd graph. Its loss
    couples the whole batch, so it is taken on the detached pooled features of all chunks, and its
    gradient is then pushed back through each chunk's graph in turn: the same gradients as one
    whole-batch backward (up to float summation order), without recomputation, and with every
    intermediate tensor of a chunk still in cache.

    Returns a float64 [3, L] tensor of each layer's loss, clamp activation rate and gradient norm,
    or None, without updating, when the loss is not finite.
    """
    optimizer.zero_grad(set_to_none=True)
    losses, cars, h = [], [], views
    for layer, margin in zip(model.layers, margins):
        tokens_per_image = h.shape[1] if h.ndim == 3 else model.tokens
        chunk = max(1, chunk_tokens // tokens_per_image)
        # Layer-local: the input is detached, so this layer's loss reaches only its own parameters.
        outputs = [layer(part) for part in h.detach().split(chunk)]
        pooled = [out.mean(dim=1) for out in outputs]
        feats = torch.cat([p.detach() for p in pooled]).requires_grad_()
        loss = margin_supcon(feats, labels, margin, mode=margin_mode, stabilizer=stabilizer, temperature=temperature)
        if not torch.isfinite(loss):
            optimizer.zero_grad(set_to_none=True)
            return None
        loss.backward()
        for part_pooled, part_grad in zip(pooled, feats.grad.split(chunk)):
            part_pooled.backward(part_grad)  # frees this chunk's graph
        losses.append(loss.detach())
        cars.append(clamp_activation_rate(feats.detach(), labels, margin))
        h = torch.cat([out.detach() for out in outputs])
    losses = torch.stack(losses)
    grad_norms = torch.stack([nn.utils.get_total_norm([p.grad for p in layer.parameters()]) for layer in model.layers])
    optimizer.step()
    # float64 on the CPU, whatever the device: the epoch sums accumulate there
    return torch.stack([losses.detach().double().cpu(), torch.tensor(cars, dtype=torch.float64),
                        grad_norms.double().cpu()])


def split_sizes(n: int, c: CFFConfig) -> tuple[int, int]:
    """How many of a training split of ``n`` images the run trains on and holds out (:func:`split_indices`)."""
    n_val = max(1, round(c.val_fraction * n))
    return (min(n - n_val, c.train_subset) if c.train_subset else n - n_val), n_val


def split_indices(ds: ImageDataset, c: CFFConfig, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The run's (train, validation) indices into the training split: a per-seed random 10% held out."""
    order = torch.randperm(len(ds.y_train), generator=generator)
    n_train, n_val = split_sizes(len(order), c)
    return order[n_val:n_val + n_train], order[:n_val]


def new_model(ds: ImageDataset, c: CFFConfig, device: str | torch.device = "cpu") -> CFFViT:
    """The run's freshly initialised model (initialisation drawn from the global seed ``c.seed``)."""
    torch.manual_seed(c.seed)
    return CFFViT(channels=ds.channels, image_size=ds.image_size, patch=c.patch, embed_dim=c.embed_dim,
                  heads=c.heads, layers=c.layers, init=c.init).to(device)


def new_optimizer(parameters, c: CFFConfig) -> torch.optim.AdamW:
    """The run's optimiser: AdamW at ``c.lr`` and ``c.weight_decay`` over ``parameters`` (one model's, or a
    cell's stacked ones: AdamW acts element by element, so one optimiser over all equals one per layer, as
    CFF has, and one per seed, as lib.cff.batched needs)."""
    return torch.optim.AdamW(parameters, lr=c.lr, weight_decay=c.weight_decay)


def input_normalization(ds: ImageDataset, c: CFFConfig) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The per-channel (mean, std) the run's inputs are normalised with (``c.normalization``)."""
    info = DATASETS[ds.name]
    if c.normalization == "subset" or info.norm_mean is None:
        return ds.mean, ds.std
    mean, std = info.norm_mean, info.norm_std
    if len(mean) == ds.channels:
        return mean, std
    if len(mean) == 1:  # a grey dataset loaded with its channel repeated
        return mean * ds.channels, std * ds.channels
    raise ValueError(f"{ds.name}'s fixed normalisation has {len(mean)} channels, the loaded images {ds.channels}")


def augmented_view(x: torch.Tensor, c: CFFConfig, ds: ImageDataset, generator: torch.Generator) -> torch.Tensor:
    """One view of the uint8 batch ``x`` under the training transform, normalised."""
    mean, std = input_normalization(ds, c)
    # aug_level 0 draws no random numbers, so a run at level 0 is the run without the knob
    return augment(distort(x, c.aug_level, generator), padding=c.padding, flip=c.flip, mean=mean, std=std,
                   generator=generator)


def two_views(x: torch.Tensor, c: CFFConfig, ds: ImageDataset, generator: torch.Generator) -> torch.Tensor:
    """Two independently augmented views of the uint8 batch ``x``, stacked as ``[view1; view2]``."""
    return torch.cat([augmented_view(x, c, ds, generator) for _ in range(2)])


def validation_generator(seed: int) -> torch.Generator:
    """The generator of run ``seed``'s validation views: its own stream, so validation changes no training draw."""
    return torch.Generator().manual_seed(2**32 + seed)


@torch.no_grad()
def layer_losses(model: CFFViT, views: torch.Tensor, labels: torch.Tensor, margins: list[float], *,
                 margin_mode: str, stabilizer: str, temperature: float) -> torch.Tensor:
    """Each layer's stage-1 loss on ``[view1; view2]`` without training: float64 ``[L]`` on the CPU."""
    feats = [torch.cat(parts) for parts in zip(*(
        [h.mean(dim=1) for h in model(part)] for part in views.split(max(1, CHUNK_TOKENS // model.tokens))))]
    return torch.stack([margin_supcon(f, labels, m, mode=margin_mode, stabilizer=stabilizer, temperature=temperature)
                        for f, m in zip(feats, margins)]).double().cpu()


CURVES = ("loss", "car", "grad_norm")  # per epoch and layer; cff_step returns them in this order
NO_PROBE = {"top1": float("nan"), "top5": float("nan"), "probe_val_loss": float("nan"), "probe_best_epoch": -1}

# step(views, labels) -> float64 [S, 3, L] (CURVES per seed and layer), or None when a loss is not finite
Step = Callable[[list[torch.Tensor], list[torch.Tensor]], "torch.Tensor | None"]
# validate(views, labels) -> float64 [S, L]: each seed's layer losses on its validation batch, nothing updated
Validate = Callable[[list[torch.Tensor], list[torch.Tensor]], torch.Tensor]


@dataclasses.dataclass
class SeedHistory:
    """What the epoch loop gives back per seed: per epoch and layer the mean over the epoch's steps of
    each of CURVES, and ``val_loss``, the stage-1 loss on the validation split; each step's positive-pair
    density; and ``best_epoch``, the (0-based) epoch with the lowest last-layer validation loss."""

    curves: dict
    densities: list[float]
    best_epoch: int = -1


def train_epochs(c: CFFConfig, ds: ImageDataset, splits: list[tuple[torch.Tensor, torch.Tensor]],
                 generators: list[torch.Generator], step: Step, validate: Validate,
                 keep_best: Callable[[int], None], *, device: str | torch.device, progress: bool | None,
                 desc: str) -> tuple[list[SeedHistory], str]:
    """The CFF epoch loop for S seeds of one config (S = 1 for :func:`train_cff`).

    Seed s trains on ``splits[s][0]`` and draws its epoch order and augmentation from ``generators[s]``,
    in the order a single run draws them, so a seed's batches are the same whether it trains alone or
    stacked. ``step`` gets the per-seed views ``[view1; view2]`` and labels. After every epoch each
    seed's validation split ``splits[s][1]`` is scored by ``validate`` on two views drawn from the seed's
    :func:`validation_generator`, averaged over images; ``keep_best(s)`` is called whenever seed s's
    last-layer validation loss is the lowest so far, so the caller can keep that encoder. Returns each
    seed's :class:`SeedHistory` and the status: "diverged" when a step returned None (the epoch's
    finished steps are kept, the epoch is not validated).
    """
    x_all, y_all = ds.x_train.to(device), ds.y_train.to(device)
    history = [SeedHistory({key: [] for key in (*CURVES, "val_loss")}, []) for _ in splits]
    val_generators = [validation_generator(g.initial_seed()) for g in generators]  # the seed g was made with
    best = [math.inf] * len(splits)
    status, n, n_val, bs = "ok", len(splits[0][0]), len(splits[0][1]), c.batch_size

    def batches(indices, gens, size):
        orders = [idx[torch.randperm(size, generator=g)].to(device) for idx, g in zip(indices, gens)]
        for start in range(0, size, bs):
            chosen = [order[start:start + bs] for order in orders]
            yield ([two_views(x_all[i], c, ds, g) for i, g in zip(chosen, gens)],
                   [torch.cat([y_all[i]] * 2) for i in chosen])

    bar = step_bar(c.epochs * math.ceil(n / bs), desc, progress)
    for epoch in range(c.epochs):
        sums, steps = 0, 0
        for views, labels in batches([train for train, _ in splits], generators, n):
            stats = step(views, labels)
            if stats is None:
                status = "diverged"
                break
            sums, steps = sums + stats, steps + 1
            bar.update()
            for seed_history, seed_labels in zip(history, labels):
                seed_history.densities.append(positive_pair_density(seed_labels))
        if steps:
            for seed_history, rows in zip(history, (sums / steps).tolist()):
                for key, row in zip(CURVES, rows):
                    seed_history.curves[key].append(row)
        if status == "diverged":
            break
        val_sums = 0  # weighted by the images in each batch, as CFF's code averages it
        for views, labels in batches([val for _, val in splits], val_generators, n_val):
            val_sums = val_sums + validate(views, labels) * (len(labels[0]) // 2)
        for s, (seed_history, row) in enumerate(zip(history, (val_sums / n_val).tolist())):
            seed_history.curves["val_loss"].append(row)
            if row[-1] < best[s]:
                best[s], seed_history.best_epoch = row[-1], epoch
                keep_best(s)
    bar.close()
    return history, status


def evaluate_run(model: CFFViT, ds: ImageDataset, c: CFFConfig, *, train_idx: torch.Tensor, val_idx: torch.Tensor,
                 generator: torch.Generator, status: str, history: SeedHistory, best_state: dict | None,
                 margins: list[float], train_s: float) -> dict:
    """The metrics dict of one trained seed: its probe (when it did not diverge), curves and summaries.

    Under ``eval_protocol="cff"`` the encoder probed is ``best_state`` (the epoch with the lowest
    last-layer validation loss), else the final ``model``.
    """
    t_eval = time.perf_counter()
    curves = history.curves
    selected_epoch = len(curves["loss"])
    if c.eval_protocol == "cff" and best_state is not None:
        model.load_state_dict(best_state)
        selected_epoch = history.best_epoch + 1
    probe = NO_PROBE
    if status == "ok":
        probe = cff_probe(model, ds, c, train_idx=train_idx, val_idx=val_idx, generator=generator)

    def layer_mean(key, layer):
        values = [epoch_row[layer] for epoch_row in curves[key]]
        return sum(values) / len(values) if values else float("nan")

    def final(key, layer):
        return curves[key][-1][layer] if curves[key] else float("nan")

    densities = history.densities
    return {
        "status": status,
        **probe,
        "epochs_completed": len(curves["loss"]),
        "selected_epoch": selected_epoch,
        "train_images": int(len(train_idx)),
        "positive_pair_density": sum(densities) / len(densities) if densities else float("nan"),
        "car_layer0": layer_mean("car", 0),
        "car_layer0_final": final("car", 0),
        "grad_norm_layer0": layer_mean("grad_norm", 0),
        "grad_norm_layer0_final": final("grad_norm", 0),
        "loss_last_layer_final": final("loss", -1),
        "margins": margins,
        "curves": curves,
        "train_s": train_s,
        "eval_s": time.perf_counter() - t_eval,
    }


def train_cff(config: CFFConfig, *, data_root: str | None = None, device: str = "cpu",
              progress: bool | None = None) -> dict:
    """Train a CFF ViT layer by layer, then probe it; return metrics and per-epoch curves.

    Metrics: ``status`` ("ok" or "diverged"), ``top1``/``top5`` test accuracy of the probe,
    ``probe_val_loss``, ``selected_epoch`` (the encoder probed, see ``eval_protocol``), and per epoch
    and layer ``loss``, ``car`` (clamp activation rate) and ``grad_norm`` (L2 norm of the layer's loss
    gradient w.r.t. its own parameters), averaged over the epoch's steps, and ``val_loss`` (the layer's
    loss on the validation split after the epoch). ``progress``: the bar of the training steps
    (``lib.core.progress.steps``; None: in a notebook or on a terminal; within a sweep, the sweep's bar).
    ``device`` is where the model and batches live (random numbers are drawn on the CPU either way).
    """
    c = config
    if c.threads:
        torch.set_num_threads(c.threads)
    t_start = time.perf_counter()
    ds = get_dataset(c.dataset, c.dataset_options, data_root)
    gen = torch.Generator().manual_seed(c.seed)    # split, data order, augmentation, probe
    train_idx, val_idx = split_indices(ds, c, gen)
    model = new_model(ds, c, device)
    optimizer = new_optimizer(model.parameters(), c)
    margins = margin_schedule(c.m0, c.m_last, c.layers)
    loss_options = dict(margin_mode=c.margin_mode, stabilizer=c.stabilizer, temperature=c.temperature)
    best: dict = {}

    def step(views, labels):
        stats = cff_step(model, optimizer, views[0], labels[0], margins, **loss_options)
        return None if stats is None else stats[None]

    def validate(views, labels):
        return layer_losses(model, views[0], labels[0], margins, **loss_options)[None]

    def keep_best(_seed):
        best["state"] = copy.deepcopy(model.state_dict())

    [history], status = train_epochs(c, ds, [(train_idx, val_idx)], [gen], step, validate, keep_best, device=device,
                                     progress=progress, desc=f"cff seed {c.seed}")
    return evaluate_run(model, ds, c, train_idx=train_idx, val_idx=val_idx, generator=gen, status=status,
                        history=history, best_state=best.get("state"), margins=margins,
                        train_s=time.perf_counter() - t_start)


def _features(model: CFFViT, images: torch.Tensor) -> torch.Tensor:
    """Mean-pooled last-layer features of normalised float images, in cache-sized batches as in training."""
    batch_size = max(1, CHUNK_TOKENS // model.tokens)
    device = next(model.parameters()).device
    return torch.cat([model.features(images[i:i + batch_size].to(device)).cpu()
                      for i in range(0, len(images), batch_size)])


class ProbeHead(nn.Module):
    """LayerNorm's learned scale and shift, then Linear, applied to already standardised features."""

    def __init__(self, embed_dim: int, classes: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(embed_dim))
        self.shift = nn.Parameter(torch.zeros(embed_dim))
        self.linear = nn.Linear(embed_dim, classes)

    def forward(self, standardised: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.addcmul(self.shift, standardised, self.scale))


def cff_probe(model: CFFViT, ds: ImageDataset, c: CFFConfig, *, train_idx: torch.Tensor, val_idx: torch.Tensor,
              generator: torch.Generator) -> dict:
    """LayerNorm(E) + Linear(E -> classes) on the frozen encoder's mean-pooled last-layer features.

    ``c.eval_protocol`` says what the probe sees: "cff" -- every epoch, one fresh view of each training
    and validation image under the training transform (:func:`augmented_view`), as CFF's code trains it
    on the first augmented view; "clean" -- fixed features of the unaugmented images, computed once.
    LayerNorm is a parameter-free standardisation of each row followed by a learned scale and shift, so
    the standardisation is applied to the frozen features and only the scale, shift and linear layer
    train (the same function and gradients). The probe trains with AdamW (``c.probe_lr``, batches of
    ``c.probe_batch_size``, ``c.probe_epochs`` epochs) and keeps the epoch with the lowest validation
    loss. Returns top-1 and top-5 accuracy on the unaugmented test images (top-5 NaN below 5 classes).
    """
    dim, device = model.embed_dim, next(model.parameters()).device
    mean, std = input_normalization(ds, c)
    model.eval()

    def standardised(images: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(_features(model, images), (dim,))

    def unaugmented(x: torch.Tensor) -> torch.Tensor:  # normalised in parts: a float copy of a whole split is large
        return torch.cat([standardised(normalize(part.to(device), mean, std)) for part in x.split(4096)])

    if c.eval_protocol == "clean":
        f_all = unaugmented(ds.x_train)

        def features(indices: torch.Tensor) -> torch.Tensor:
            return f_all[indices]
    else:
        def features(indices: torch.Tensor) -> torch.Tensor:
            return standardised(augmented_view(ds.x_train[indices].to(device), c, ds, generator))

    head = ProbeHead(dim, ds.num_classes)
    optimizer = torch.optim.AdamW(head.parameters(), lr=c.probe_lr, fused=True)  # one kernel for all parameters
    best_loss, best_state, best_epoch = float("inf"), copy.deepcopy(head.state_dict()), -1
    y_val = ds.y_train[val_idx]
    for epoch in range(c.probe_epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=generator)]
        for start in range(0, len(order), c.probe_batch_size):
            batch = order[start:start + c.probe_batch_size]
            loss = F.cross_entropy(head(features(batch)), ds.y_train[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            val_loss = F.cross_entropy(head(features(val_idx)), y_val).item()
        if val_loss < best_loss:
            best_loss, best_state, best_epoch = val_loss, copy.deepcopy(head.state_dict()), epoch
    head.load_state_dict(best_state)
    with torch.no_grad():
        logits = head(unaugmented(ds.x_test))
    model.train()
    y_test = ds.y_test
    top1 = (logits.argmax(1) == y_test).float().mean().item()
    if ds.num_classes >= 5:
        top5 = (logits.topk(5, dim=1).indices == y_test[:, None]).any(1).float().mean().item()
    else:
        top5 = float("nan")
    return {"top1": top1, "top5": top5, "probe_val_loss": best_loss, "probe_best_epoch": best_epoch}
