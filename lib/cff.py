"""Layer-local Contrastive Forward-Forward training and its linear-probe evaluation.

``train_cff(**config)`` is the whole method in one readable function: the notebooks' parameters go
in as keyword arguments, a metrics dict comes out. ``cff_config(**overrides)`` fills in and checks
a config before any compute, so a bad parameter fails with its name and the allowed values.

Decisions where STUDIES.md is silent [ours]:
- Each layer has its own AdamW in CFF's code. AdamW acts element-wise (no global clipping), so one
  AdamW over all parameters takes exactly the same steps. Every layer's input is detached, so its
  loss's backward pass reaches only its own parameters; it runs right after the layer's forward,
  which keeps one layer's activations in memory instead of L.
- 10% of the training split (a per-seed random subset) is held out from both the contrastive
  training and the probe's training; the probe keeps the epoch with the lowest loss on it.
- The last, smaller batch of an epoch is kept (every image is seen once per epoch).
- A non-finite loss stops the run: it is recorded with status "diverged" and NaN accuracy.

Speed (measured with ``python -m lib.bench`` on 2 AVX-512 cores, paper config, batch 512): the
step runs each layer on cache-sized chunks of the batch (``cff_step``), 1.45x the whole-batch
step. Tried and not used: ``torch.compile`` of each layer (no gain beyond noise, 145 vs 142
images/s, for 6-70 s of compilation) and bfloat16 autocast (1.5x slower: the casts cost more than
the faster matmuls save at these sizes). The fused CPU attention kernel is the floor: about a third
of the step for 2% of its FLOPs (head dimension 32, 64 tokens). Attention alternatives on one
256-image chunk (4 heads, forward and backward, 2 threads): fused SDPA 36 ms, the textbook
softmax(QK^T)V 31 ms (the same compiled: 30 ms), either on cache-sized pieces of 4-64 images
43-69 ms; FlexAttention has no CPU backward in torch 2.14. None is the 2.5x the 60% target needs.
"""
from __future__ import annotations

import copy
import time
from functools import lru_cache

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm  # plain bar: disable=None hides it off a terminal, e.g. under papermill

from lib import params
from lib.augment import DISTORTION_LEVELS, augment, distort, normalize
from lib.data import DATASETS, data_shape, load_dataset
from lib.diagnostics import clamp_activation_rate, positive_pair_density
from lib.losses import MARGIN_MODES, STABILIZERS, margin_schedule, margin_supcon
from lib.models import CFFViT

# Training augmentation per dataset: (crop padding, horizontal flip); no flips for digits [ours].
AUGMENTATION = {
    "cifar10": (12, True),      # [code]
    "cifar100": (4, True),      # [code]
    "svhn": (4, False),         # [ours]
    "fashion_mnist": (4, False),  # [ours]
    "mnist": (4, False),        # [ours]
    "digits": (1, False),       # [ours] 8x8 images: one pixel is already an 12% shift
    "shapes": (2, True),        # [ours] procedural 16x16 images
}

DEFAULTS = dict(
    dataset="cifar10",       # a name from lib.data.DATASETS
    dataset_options={},      # extra load_dataset options, e.g. {"num_classes": 10, "difficulty": 0.3}
    train_subset=0,          # use only this many training images (0 = all)
    seed=0,
    margin_mode="clamp",     # clamp | subtract | none
    stabilizer="detach",     # detach | direct
    m0=0.4,                  # margin at layer 0
    m_last=0.1,              # margin at the last layer
    temperature=0.15,
    layers=8,                # MARGIN paper: 8 [paper]; CFF code default 5
    width=128,               # embedding dimension E
    heads=4,
    patch=4,
    epochs=600,
    batch_size=512,
    lr=0.004,
    weight_decay=0.01,       # PyTorch's AdamW default, as in CFF's code
    padding=None,            # None = AUGMENTATION[dataset]
    flip=None,               # None = AUGMENTATION[dataset]
    aug_level=0,             # extra augmentation strength before the crop/flip: lib.augment.distort, 0 (none) .. 4
    val_fraction=0.1,
    probe_epochs=50,
    probe_lr=5e-4,
    probe_batch_size=512,
    threads=0,               # torch threads in this process (0 = leave as is)
)

# Parameters added after the first results, with the value that leaves a run as it was before.
ADDED_LATER = {"aug_level": 0}


def cff_config(**overrides) -> dict:
    """The full, checked config of one CFF run: DEFAULTS updated by ``overrides``."""
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise params.ParameterError(f"unknown CFF parameter(s) {unknown}; known: {', '.join(DEFAULTS)}")
    c = {**DEFAULTS, **overrides}
    if not isinstance(c["dataset_options"], dict):
        params.fail("dataset_options", c["dataset_options"], "a dict of load_dataset options")
    c["dataset_options"] = dict(c["dataset_options"])
    params.choice("dataset", c["dataset"], DATASETS)
    params.choice("margin_mode", c["margin_mode"], MARGIN_MODES)
    params.choice("stabilizer", c["stabilizer"], STABILIZERS)
    for name in ("m0", "m_last"):
        params.number(name, c[name], 0.0, 2.0)
    for name in ("temperature", "lr", "probe_lr"):
        params.number(name, c[name], 0.0, low_open=True)
    params.number("weight_decay", c["weight_decay"], 0.0)
    params.number("val_fraction", c["val_fraction"], 0.0, 0.5, low_open=True)
    for name in ("layers", "width", "heads", "patch", "epochs", "batch_size", "probe_epochs", "probe_batch_size"):
        params.integer(name, c[name], 1)
    for name in ("seed", "train_subset", "threads"):
        params.integer(name, c[name], 0)
    if c["width"] % c["heads"]:
        params.fail("width", c["width"], f"a multiple of heads={c['heads']}")
    size = data_shape(c["dataset"], c["dataset_options"])[0]  # a bad image_size option fails in load_dataset
    if isinstance(size, int) and size % c["patch"]:  # known before the data is loaded: fail now, not after
        params.fail("patch", c["patch"], f"a divisor of the image size {size} of {c['dataset']}")
    padding, flip = AUGMENTATION[c["dataset"]]
    c["padding"] = params.integer("padding", padding if c["padding"] is None else c["padding"], 0)
    c["flip"] = params.flag("flip", flip if c["flip"] is None else c["flip"])
    if params.integer("aug_level", c["aug_level"], 0) not in DISTORTION_LEVELS:
        params.fail("aug_level", c["aug_level"], f"one of {DISTORTION_LEVELS}")
    # A run id is the hash of its config. Parameters added after results were recorded join the
    # config only when they change the run, so that every earlier record keeps its run id.
    for name, neutral in ADDED_LATER.items():
        if c[name] == neutral:
            del c[name]
    return c


@lru_cache(maxsize=4)
def _cached_dataset(name: str, data_root: str | None, options: tuple):
    return load_dataset(name, data_root=data_root, **dict(options))


def get_dataset(config: dict, data_root: str | None = None):
    """The run's dataset, loaded once per process (sweeps reuse it across runs)."""
    return _cached_dataset(config["dataset"], data_root, tuple(sorted(config["dataset_options"].items())))


# Images per chunk are chosen so one chunk's activations (tokens x width floats) stay in cache:
# at the paper's config the whole-batch step runs its matmuls at ~40% of the machine's matmul rate
# (every [65536 x 128] activation round-trips through memory), chunks of 256 images at ~65%.
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
    return torch.stack([losses.detach().double().cpu(), torch.tensor(cars, dtype=torch.float64), grad_norms.double().cpu()])


def split_indices(ds, c: dict, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The run's (train, validation) indices into the training split: a per-seed random 10% held out."""
    order = torch.randperm(len(ds.y_train), generator=generator)
    n_val = max(1, round(c["val_fraction"] * len(order)))
    val_idx, train_idx = order[:n_val], order[n_val:]
    if c["train_subset"]:
        train_idx = train_idx[: c["train_subset"]]
    return train_idx, val_idx


def new_model(ds, c: dict, device: str | torch.device = "cpu") -> CFFViT:
    """The run's freshly initialised model (initialisation drawn from the global seed ``c['seed']``)."""
    torch.manual_seed(c["seed"])
    return CFFViT(channels=ds.channels, image_size=ds.image_size, patch=c["patch"], width=c["width"],
                  heads=c["heads"], layers=c["layers"]).to(device)


def two_views(x: torch.Tensor, c: dict, ds, generator: torch.Generator) -> torch.Tensor:
    """Two independently augmented views of the uint8 batch ``x``, stacked as ``[view1; view2]``."""
    level = c.get("aug_level", ADDED_LATER["aug_level"])  # level 0 draws no random numbers
    return torch.cat([augment(distort(x, level, generator), padding=c["padding"], flip=c["flip"], mean=ds.mean,
                              std=ds.std, generator=generator)
                      for _ in range(2)])


def run_metrics(*, status: str, curves: dict, densities: list[float], probe: dict, margins: list[float],
                train_images: int) -> dict:
    """The metrics dict of one run (``train_s``/``eval_s`` are added by the caller)."""
    def layer_mean(key, layer):
        values = [epoch_row[layer] for epoch_row in curves[key]]
        return sum(values) / len(values) if values else float("nan")

    return {
        "status": status,
        **probe,
        "epochs_completed": len(curves["loss"]),
        "train_images": int(train_images),
        "positive_pair_density": sum(densities) / len(densities) if densities else float("nan"),
        "car_layer0": layer_mean("car", 0),
        "car_layer0_final": curves["car"][-1][0] if curves["car"] else float("nan"),
        "grad_norm_layer0": layer_mean("grad_norm", 0),
        "loss_last_layer_final": curves["loss"][-1][-1] if curves["loss"] else float("nan"),
        "margins": margins,
        "curves": curves,
    }


CURVES = ("loss", "car", "grad_norm")  # per epoch and layer; cff_step returns them in this order
NO_PROBE = {"top1": float("nan"), "top5": float("nan"), "probe_val_loss": float("nan"), "probe_best_epoch": -1}


def train_cff(*, data_root: str | None = None, progress: bool | None = None, device: str = "cpu", **params) -> dict:
    """Train a CFF ViT layer by layer, then probe it; return metrics and per-epoch curves.

    Metrics: ``status`` ("ok" or "diverged"), ``top1``/``top5`` test accuracy of the probe,
    ``probe_val_loss``, and per epoch and layer ``loss``, ``car`` (clamp activation rate) and
    ``grad_norm`` (L2 norm of the layer's loss gradient w.r.t. its own parameters), averaged over
    the epoch's steps. ``progress=None`` shows a bar only on a terminal (quiet under papermill).
    ``device`` is where the model and batches live (random numbers are drawn on the CPU either way).
    """
    c = cff_config(**params)
    if c["threads"]:
        torch.set_num_threads(c["threads"])
    t_start = time.perf_counter()
    ds = get_dataset(c, data_root)
    gen = torch.Generator().manual_seed(c["seed"])    # split, data order, augmentation, probe
    train_idx, val_idx = split_indices(ds, c, gen)
    x_train, y_train = ds.x_train[train_idx].to(device), ds.y_train[train_idx].to(device)
    model = new_model(ds, c, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=c["weight_decay"])
    margins = margin_schedule(c["m0"], c["m_last"], c["layers"])

    curves = {key: [] for key in CURVES}
    densities = []
    status = "ok"
    n, bs = len(train_idx), c["batch_size"]
    bar = tqdm(total=c["epochs"], desc=f"cff seed {c['seed']}", disable=None if progress is None else not progress, leave=False)
    for _ in range(c["epochs"]):
        sums, steps = 0, 0
        perm = torch.randperm(n, generator=gen).to(device)
        for start in range(0, n, bs):
            idx = perm[start:start + bs]
            labels = torch.cat([y_train[idx]] * 2)
            step = cff_step(model, optimizer, two_views(x_train[idx], c, ds, gen), labels, margins,
                            margin_mode=c["margin_mode"], stabilizer=c["stabilizer"], temperature=c["temperature"])
            if step is None:
                status = "diverged"
                break
            sums, steps = sums + step, steps + 1
            densities.append(positive_pair_density(labels))
        if steps:
            for key, row in zip(CURVES, (sums / steps).tolist()):
                curves[key].append(row)
        bar.update()
        if status == "diverged":
            break
    bar.close()
    train_s = time.perf_counter() - t_start

    t_eval = time.perf_counter()
    probe = NO_PROBE
    if status == "ok":
        probe = linear_probe(model, ds, train_idx=train_idx, val_idx=val_idx, epochs=c["probe_epochs"],
                             lr=c["probe_lr"], batch_size=c["probe_batch_size"], generator=gen)
    metrics = run_metrics(status=status, curves=curves, densities=densities, probe=probe, margins=margins,
                          train_images=n)
    return {**metrics, "train_s": train_s, "eval_s": time.perf_counter() - t_eval}


def _features(model: CFFViT, images: torch.Tensor, mean, std) -> torch.Tensor:
    batch_size = max(1, CHUNK_TOKENS // model.tokens)  # cache-sized batches, as in training
    device = next(model.parameters()).device
    model.eval()
    feats = torch.cat([model.features(normalize(images[i:i + batch_size].to(device), mean, std)).cpu()
                       for i in range(0, len(images), batch_size)])
    model.train()
    return feats


class ProbeHead(nn.Module):
    """LayerNorm's learned scale and shift, then Linear, applied to already standardised features."""

    def __init__(self, width: int, classes: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))
        self.shift = nn.Parameter(torch.zeros(width))
        self.linear = nn.Linear(width, classes)

    def forward(self, standardised: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.addcmul(self.shift, standardised, self.scale))


def linear_probe(model: CFFViT, ds, *, train_idx, val_idx, epochs: int, lr: float, batch_size: int,
                 generator: torch.Generator) -> dict:
    """LayerNorm(E) + Linear(E -> classes) on frozen mean-pooled features of unaugmented images.

    Features are computed once. LayerNorm is a parameter-free standardisation of each row followed
    by a learned scale and shift, so the standardisation is applied once to the frozen features and
    only the scale, shift and linear layer train (the same function and gradients, without
    re-normalising every batch). The probe trains with AdamW and keeps the epoch with the lowest
    validation loss. Returns top-1 and top-5 test accuracy (top-5 is NaN below 5 classes).
    """
    width = model.width
    f_all = F.layer_norm(_features(model, ds.x_train, ds.mean, ds.std), (width,))
    f_train, y_train = f_all[train_idx], ds.y_train[train_idx]
    f_val, y_val = f_all[val_idx], ds.y_train[val_idx]
    f_test, y_test = F.layer_norm(_features(model, ds.x_test, ds.mean, ds.std), (width,)), ds.y_test

    head = ProbeHead(width, ds.num_classes)
    optimizer = torch.optim.AdamW(head.parameters(), lr=lr, fused=True)  # one kernel for all parameters
    best_loss, best_state, best_epoch = float("inf"), copy.deepcopy(head.state_dict()), -1
    for epoch in range(epochs):
        perm = torch.randperm(len(y_train), generator=generator)
        f_epoch, y_epoch = f_train[perm], y_train[perm]  # one gather per epoch; batches are then views
        for start in range(0, len(perm), batch_size):
            loss = F.cross_entropy(head(f_epoch[start:start + batch_size]), y_epoch[start:start + batch_size])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            val_loss = F.cross_entropy(head(f_val), y_val).item()
        if val_loss < best_loss:
            best_loss, best_state, best_epoch = val_loss, copy.deepcopy(head.state_dict()), epoch
    head.load_state_dict(best_state)
    with torch.no_grad():
        logits = head(f_test)
    top1 = (logits.argmax(1) == y_test).float().mean().item()
    if ds.num_classes >= 5:
        top5 = (logits.topk(5, dim=1).indices == y_test[:, None]).any(1).float().mean().item()
    else:
        top5 = float("nan")
    return {"top1": top1, "top5": top5, "probe_val_loss": best_loss, "probe_best_epoch": best_epoch}
