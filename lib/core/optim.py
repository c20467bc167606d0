"""Optimisation of the self-supervised runs: LARS, parameter groups, learning-rate scaling with the
batch size, and the warm-up-then-cosine schedule.

LARS excludes biases and BatchNorm parameters from weight decay and trust-ratio adaptation, as
SimCLR does (:func:`param_groups`); ``exclude_bias_and_norm=False`` decays and adapts every
parameter, as FLAT's code does in effect (its exclusion is an unimplemented TODO [code]).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

OPTIMIZERS = ("lars", "sgd", "adam")
LR_SCALINGS = ("linear", "sqrt", "none")
# The base rate each batch-size rule is published with: lr = 0.3 x B / 256 is FLAT's (FlatCLR main.py: --lr
# 0.6 at --batch_size 512, help "0.3*batch_size/256") [code]; lr = 0.075 x sqrt(B) is SimCLR's small-batch rule
# (Chen et al. 2020, appendix B.1), which FlatCLR's README lists beside the linear one.
BASE_LR = {"linear": 0.3, "sqrt": 0.075}


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
    FLAT's default), ``sqrt`` lr * sqrt(B) (SimCLR's choice for small batches), ``none`` lr.
    :data:`BASE_LR` holds the published ``lr`` of the first two."""
    if rule == "linear":
        return lr * batch_size / 256
    if rule == "sqrt":
        return lr * math.sqrt(batch_size)
    if rule == "none":
        return lr
    raise ValueError(f"rule={rule!r} is not allowed; choose one of {', '.join(LR_SCALINGS)}")


def lr_formula(lr: float, rule: str) -> str:
    """:func:`scaled_lr`'s rate as a formula in the batch size B: "0.3 × B / 256", "0.075 × √B" or "0.3"."""
    return {"linear": f"{lr:g} × B / 256", "sqrt": f"{lr:g} × √B"}.get(rule, f"{lr:g}")


def warmup_cosine(step: int, total_steps: int, warmup_steps: int) -> float:
    """The learning-rate multiplier at ``step`` (0-based): linear warm-up, then cosine to 0.

        (step + 1) / warmup_steps                                          for step < warmup_steps
        (1 + cos(pi (step - warmup_steps) / (total_steps - warmup_steps))) / 2   afterwards

    The warm-up reaches the full rate at the end of its last step (FLAT's starts at 0) [ours].
    """
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be in [0, total_steps={total_steps}]")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, total_steps - warmup_steps)))
