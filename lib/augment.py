"""Batched image augmentation on tensors, on whatever device the batch is on (no PIL).

The CFF recipe (STUDIES.md, "Augmentation") is RandomCrop(H, padding=p) with zero fill, then an
optional horizontal flip, then per-channel normalisation. Here each step handles a whole batch
at once with one independent draw per image, as torchvision would per image, but vectorised.

Random numbers come only from the ``generator`` argument, so one generator per seed makes a
run's augmentation reproducible. They are drawn on the generator's device and then moved to
the batch's device: a CPU generator gives the same crops and flips for a batch on CPU or GPU.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def normalize(x: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 ``[B, C, H, W]`` -> float32 ``(x / 255 - mean) / std`` per channel."""
    _check_images(x)
    if x.dtype != torch.uint8:
        raise TypeError(f"x must be uint8 pixels (0..255), got {x.dtype}")
    c = x.shape[1]
    mean_t = torch.as_tensor(mean, dtype=torch.float32, device=x.device).reshape(-1)
    std_t = torch.as_tensor(std, dtype=torch.float32, device=x.device).reshape(-1)
    if len(mean_t) != c or len(std_t) != c:
        raise ValueError(f"mean and std need one value per channel ({c}), got {len(mean_t)} and {len(std_t)}")
    if not bool((std_t > 0).all()):
        raise ValueError(f"std must be > 0 for every channel, got {std_t.tolist()}")
    # Fold the /255 into the affine map: one multiply-add over the batch instead of three passes.
    scale = (1 / (255 * std_t)).view(1, c, 1, 1)
    shift = (-mean_t / std_t).view(1, c, 1, 1)
    return x.float().mul_(scale).add_(shift)  # in place on the fresh float copy


def random_crop(x: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Crop each image at its own random offset after zero padding, keeping its size.

    Equivalent to torchvision's ``RandomCrop(size=(H, W), padding=padding)`` (constant 0 fill)
    applied to each image: the top-left corner of the H x W window in the padded image is
    uniform on ``{0..2*padding}^2``, drawn independently per image. Works for any dtype and
    keeps dtype and shape. ``padding=0`` returns ``x`` itself.
    """
    _check_images(x)
    _check_generator(generator)
    if isinstance(padding, bool) or not isinstance(padding, int):
        raise TypeError(f"padding must be an int, got {type(padding).__name__}")
    if padding < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    if padding == 0:
        return x
    b, c, h, w = x.shape
    offsets = torch.randint(0, 2 * padding + 1, (b, 2), generator=generator, device=generator.device)
    offsets = offsets.to(x.device)
    # Every H x W window of the padded batch as a strided view [b, dy, dx, c, H, W] (no copy), then
    # one advanced-indexing pass picks image i's window (dy_i, dx_i): a single read of the pixels.
    windows = F.pad(x, (padding, padding, padding, padding)).unfold(2, h, 1).unfold(3, w, 1)
    windows = windows.permute(0, 2, 3, 1, 4, 5)
    return windows[torch.arange(b, device=x.device), offsets[:, 0], offsets[:, 1]]


def random_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror each image left-right with probability 0.5, independently per image."""
    _check_images(x)
    _check_generator(generator)
    flip = torch.rand(x.shape[0], generator=generator, device=generator.device) < 0.5
    flipped = flip.to(x.device).nonzero().squeeze(1)
    # Touch only the mirrored half: copying it in place is cheaper than a where() over the batch.
    return x.clone().index_copy_(0, flipped, x[flipped].flip(3))


def augment(
    x_uint8: torch.Tensor,
    *,
    padding: int,
    flip: bool,
    mean: Sequence[float],
    std: Sequence[float],
    generator: torch.Generator,
) -> torch.Tensor:
    """CFF training view: random crop (zero fill, in pixel space) -> optional flip -> normalise.

    Cropping before normalising makes the fill value pixel 0 (black), as torchvision's
    RandomCrop on images does, not the normalised 0 (the mean colour). With ``padding=0`` and
    ``flip=False`` this is just :func:`normalize`. Returns float32 ``[B, C, H, W]``.
    """
    if not isinstance(flip, bool):
        raise TypeError(f"flip must be a bool, got {type(flip).__name__}")
    x = random_crop(x_uint8, padding, generator)
    if flip:
        x = random_flip(x, generator)
    return normalize(x, mean, std)


def _check_images(x) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a [B, C, H, W] tensor, got {shape}")


def _check_generator(generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator (one per seed), got {type(generator).__name__}"
        )
