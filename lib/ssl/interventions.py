"""The two interventions of NORMS (study 4) against the slow-down that large embedding norms cause.

A loss that sees an embedding z only through z / ||z|| has a gradient orthogonal to z and of size
proportional to 1 / ||z||: every step grows the norm, and the larger the norm, the smaller the step
on the sphere. :func:`cut_init` starts the network with small norms; :class:`GradScale` multiplies
each row's gradient by ||z||^p, which for p = 1 cancels the 1 / ||z||.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn


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
