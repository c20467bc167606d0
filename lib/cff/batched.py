"""Several seeds of one CFF config trained as ONE model with stacked parameters (``torch.func``), for GPU throughput:
the S models' parameters are stacked (``stack_module_state``) and the forward pass and loss ``vmap``-ed over them,
so one set of kernels runs all S seeds. On a CPU separate processes (``lib.run.sweep``'s workers) are better.

    base, params = stack_seeds([model_0, ..., model_{S-1}])   # params: {name: [S, ...] leaf tensor}
    optimizer = torch.optim.AdamW(params.values(), lr=..., weight_decay=...)
    stats = batched_cff_step(base, params, optimizer, views, labels, margins, margin_mode=...,
                             stabilizer=..., temperature=...)  # views [S, 2B, C, H, W], labels [S, 2B]
    model_s = unstack_seed(base, params, s)                    # a normal CFFViT, e.g. for the probe

One batched step equals S separate ``lib.cff.training.cff_step`` calls in exact arithmetic (the seeds share no
parameter or activation, and AdamW acts element by element), and agrees to float32 rounding in practice. A
non-finite loss in any seed stops the step for all (``batched_cff_step`` returns None) and the sweep trains that
cell's seeds one by one. Why each of these holds, and the one visible float32 effect: ``docs/cff-batched.md``.
"""
from __future__ import annotations

import copy
import dataclasses
import time

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from lib.cff.model import CFFViT
from lib.cff.training import (
    CFFConfig,
    evaluate_run,
    layer_losses,
    new_model,
    new_optimizer,
    split_indices,
    train_epochs,
)
from lib.core.data import get_dataset
from lib.core.losses import margin_schedule, margin_supcon


def stack_seeds(models: list[CFFViT]) -> tuple[CFFViT, dict[str, torch.Tensor]]:
    """Stack S same-shaped models into ``(base, params)``.

    ``params`` maps each parameter name to a leaf tensor of shape ``[S, *shape]`` with
    ``requires_grad=True`` (copies: the input models are not tied to it); ``base`` is a stateless
    copy of ``models[0]`` on the meta device, used only as the structure for ``functional_call``.
    """
    if not models:
        raise ValueError("stack_seeds needs at least one model")
    if any(True for m in models for _ in m.buffers()):
        raise ValueError("stack_seeds supports models without buffers (CFFViT has none)")
    shapes = [[(n, p.shape) for n, p in m.named_parameters()] for m in models]
    if any(s != shapes[0] for s in shapes[1:]):
        raise ValueError("stack_seeds needs models of one config: parameter names or shapes differ")
    params, _ = stack_module_state(models)  # detached stacks, requires_grad=True
    base = copy.deepcopy(models[0]).to("meta")
    return base, params


def _num_seeds(params: dict[str, torch.Tensor]) -> int:
    return next(iter(params.values())).shape[0]


def batched_forward(base: CFFViT, params: dict[str, torch.Tensor], images: torch.Tensor, *,
                    local: bool = False) -> list[torch.Tensor]:
    """Every layer's token output for all seeds: images ``[S, N, C, H, W]`` -> L tensors ``[S, N, T, E]``."""
    if images.shape[0] != _num_seeds(params):
        raise ValueError(f"images has {images.shape[0]} seeds, params has {_num_seeds(params)}")

    def one_seed(p, x):
        return tuple(functional_call(base, p, (x,), {"local": local}))

    return list(vmap(one_seed)(params, images))


def batched_cff_step(base: CFFViT, params: dict[str, torch.Tensor], optimizer: torch.optim.Optimizer,
                     views: torch.Tensor, labels: torch.Tensor, margins: list[float], *, margin_mode: str,
                     stabilizer: str, temperature: float) -> torch.Tensor | None:
    """One layer-local CFF step for S seeds at once: ``lib.cff.training.cff_step`` vmapped over the seeds.

    ``views`` is ``[S, 2B, C, H, W]`` (seed s's stacked ``[view1; view2]``), ``labels`` ``[S, 2B]``;
    ``optimizer`` must hold the stacked tensors of ``params`` and act element-wise (AdamW does).

    Returns a float64 ``[S, 3, L]`` CPU tensor: per seed and layer the loss, clamp activation rate
    and gradient norm (L2 norm of layer l's loss gradient w.r.t. layer l's parameters of that seed),
    as ``cff_step`` returns ``[3, L]`` for one seed. The CAR and the norms are computed outside vmap,
    per seed, from the stacked features and the stacked gradients. Returns None, updating nothing (no gradients
    written, no optimizer step), when any seed's loss is non-finite: one diverging seed stops the
    step for all; fall back to per-seed training to let the others continue.
    """
    S = _num_seeds(params)
    if views.ndim != 5 or views.shape[0] != S:
        raise ValueError(f"views must be [S={S}, 2B, C, H, W], got shape {tuple(views.shape)}")
    if labels.shape != views.shape[:2]:
        raise ValueError(f"labels must be [{S}, {views.shape[1]}], got shape {tuple(labels.shape)}")
    L = len(base.layers)
    if len(margins) != L:
        raise ValueError(f"margins has {len(margins)} entries for {L} layers")

    def one_seed(p, x, y):
        losses, feats = [], []
        for layer, tokens in enumerate(functional_call(base, p, (x,), {"local": True})):
            f = tokens.mean(dim=1)
            losses.append(margin_supcon(f, y, margins[layer], mode=margin_mode,
                                        stabilizer=stabilizer, temperature=temperature))
            feats.append(f)
        return torch.stack(losses), tuple(feats)

    losses, feats = vmap(one_seed)(params, views, labels)  # [S, L], L x [S, 2B, E]
    total = losses.sum()
    if not torch.isfinite(total):
        return None
    cars = torch.stack([stacked_clamp_activation_rate(feats[i], labels, margins[i]) for i in range(L)], dim=1)
    optimizer.zero_grad(set_to_none=True)
    total.backward()  # seeds share nothing and layers are detached: each gets only its own loss's gradient
    grad_norms = _layer_grad_norms(params, L, S)
    optimizer.step()
    return torch.stack([losses.detach().double(), cars, grad_norms.double()], dim=1).cpu()


@torch.no_grad()
def stacked_clamp_activation_rate(z: torch.Tensor, labels: torch.Tensor, margin: float) -> torch.Tensor:
    """``lib.cff.diagnostics.clamp_activation_rate`` for each seed of stacked features, as one computation.

    ``z`` is ``[S, 2B, E]``, ``labels`` ``[S, 2B]``; returns float64 ``[S]`` (NaN for a seed whose batch
    has no positive pair). Same formula, without a host sync per seed and layer.
    """
    f = F.normalize(z.detach().to(torch.promote_types(z.dtype, torch.float32)), dim=-1)
    n = labels.shape[1]
    pos = (labels[:, :, None] == labels[:, None, :]) & ~torch.eye(n, dtype=torch.bool, device=labels.device)
    s = f @ f.transpose(1, 2)
    n_pos = pos.sum(dim=(1, 2))
    hits = ((s + margin > 1) & pos).sum(dim=(1, 2))
    rate = hits.double() / n_pos.clamp(min=1).double()
    return torch.where(n_pos > 0, rate, torch.full_like(rate, float("nan")))


@torch.no_grad()
def _layer_grad_norms(params: dict[str, torch.Tensor], layers: int, seeds: int) -> torch.Tensor:
    """[S, L] L2 norm of each seed's gradient over each layer's parameters (names ``layers.<l>.*``)."""
    sq = [[] for _ in range(layers)]
    for name, p in params.items():
        layer = int(name.split(".")[1])
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        sq[layer].append(torch.linalg.vector_norm(g.reshape(seeds, -1), dim=1))
    return torch.stack([torch.linalg.vector_norm(torch.stack(n), dim=0) for n in sq], dim=1)


def unstack_seed(base: CFFViT, params: dict[str, torch.Tensor], s: int) -> CFFViT:
    """A normal, independent CFFViT holding seed ``s``'s current parameters (e.g. for the probe)."""
    S = _num_seeds(params)
    if not -S <= s < S:
        raise IndexError(f"seed index {s} out of range for {S} seeds")
    device = next(iter(params.values())).device
    model = copy.deepcopy(base).to_empty(device=device)
    model.load_state_dict({name: p[s].detach().clone() for name, p in params.items()})
    return model


def train_cff_seeds(configs: list[CFFConfig], *, data_root: str | None = None, device: str = "cuda",
                    progress: bool | None = None) -> list[dict] | None:
    """``lib.cff.training.train_cff`` for the seeds of one cell at once, as one stacked model on ``device``.

    ``configs`` differ only in ``seed``. Each seed keeps its own generator and global seed, so its
    initialisation, split, data order and augmentation are exactly those ``train_cff`` draws; the
    loss is summed over seeds and AdamW acts element-wise, so each seed takes its own steps (see the
    module docstring). Returns one metrics dict per config, as ``train_cff`` does (``train_s`` is the
    cell's training time divided by the number of seeds), or None when any seed's loss turns
    non-finite: the caller then trains the seeds one by one, which records the diverging ones.
    """
    if not configs or any(dataclasses.replace(c, seed=0) != dataclasses.replace(configs[0], seed=0) for c in configs):
        raise ValueError("train_cff_seeds needs one or more configs that differ only in 'seed'")
    c0, S = configs[0], len(configs)
    t_start = time.perf_counter()
    ds = get_dataset(c0.dataset, c0.dataset_options, data_root)
    gens = [torch.Generator().manual_seed(c.seed) for c in configs]
    splits = [split_indices(ds, c, g) for c, g in zip(configs, gens)]
    base, params = stack_seeds([new_model(ds, c, device) for c in configs])
    optimizer = new_optimizer(params.values(), c0)
    margins = margin_schedule(c0.m0, c0.m_last, c0.layers)
    loss_options = dict(margin_mode=c0.margin_mode, stabilizer=c0.stabilizer, temperature=c0.temperature)
    best_states: list[dict | None] = [None] * S

    def step(views, labels):
        return batched_cff_step(base, params, optimizer, torch.stack(views), torch.stack(labels), margins,
                                **loss_options)

    def validate(views, labels):  # one seed at a time: validation is a small part of an epoch
        return torch.stack([layer_losses(unstack_seed(base, params, s), v, y, margins, **loss_options)
                            for s, (v, y) in enumerate(zip(views, labels))])

    def keep_best(s):
        best_states[s] = {name: p[s].detach().clone() for name, p in params.items()}

    history, status = train_epochs(c0, ds, splits, gens, step, validate, keep_best, device=device, progress=progress,
                                   desc=f"cff {S} seeds")
    if status != "ok":
        return None
    train_s = (time.perf_counter() - t_start) / S
    return [evaluate_run(unstack_seed(base, params, s), ds, c, train_idx=train_idx, val_idx=val_idx, generator=g,
                         status=status, history=history[s], best_state=best_states[s], margins=margins,
                         train_s=train_s)
            for s, (c, g, (train_idx, val_idx)) in enumerate(zip(configs, gens, splits))]
