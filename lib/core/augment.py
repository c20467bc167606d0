"""Batched image augmentation on tensors, on whatever device the batch is on (no PIL).

The CFF recipe (docs/studies.md, "The CFF model") is RandomCrop(H, padding=p) with zero fill, then an
optional horizontal flip, then per-channel normalisation. Here each step handles a whole batch
at once with one independent draw per image, as torchvision would per image, but vectorised.

Random numbers come only from the ``generator`` argument, so one generator per seed makes a
run's augmentation reproducible. They are drawn on the generator's device and then moved to
the batch's device: a CPU generator gives the same crops and flips for a batch on CPU or GPU.

The SimCLR recipe (docs/studies.md, studies 4 and 5) is RandomResizedCrop, horizontal flip, colour
jitter applied with probability 0.8 (SimCLR's one jitter op, or the NORMS authors' four separate ones:
:data:`JITTER_MODES`), grayscale with probability 0.2, then normalisation. Its
per-image random parameters are drawn for the whole batch at once (:func:`draw_simclr_params`)
and applied in float32 on [0, 1] pixels (:func:`apply_simclr_params`): torchvision rounds to uint8
after each step, this pipeline rounds nowhere, so the two agree in distribution, not bit for bit.

The module runs past 400 lines because it holds the three augmentations the studies use (CFF's crop
and flip, SimCLR's crop, jitter and grayscale, study 3's distortion levels), which share the argument
checks at its end.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

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


# -------------------------------------------------------------------------- SimCLR views

JITTER_OPS = ("brightness", "contrast", "saturation", "hue")
# How the colour jitter is applied with probability jitter_p:
# - joint: SimCLR's RandomApply([ColorJitter(b, c, s, h)], p), one draw per image and the four ops in a
#   random order (ColorJitter's own), as FLAT's code does [code];
# - separate: four RandomApply([ColorJitter(one op)], p), one draw per op, in the fixed order brightness,
#   contrast, saturation, hue: the NORMS authors' CLA/utils/data_utils.py (get_transforms) [code].
JITTER_MODES = ("joint", "separate")
_JITTER_IDENTITY = (1.0, 1.0, 1.0, 0.0)  # the factor of each op that leaves an image unchanged
_LUMA = (0.299, 0.587, 0.114)  # ITU-R BT.601, as lib.core.data and PIL's "L" mode


class SimCLRParams(NamedTuple):
    """The random parameters of one SimCLR view per image (row i belongs to image i)."""

    crop: torch.Tensor       # int64 [B, 4]: top, left, height, width of the crop box in the source image
    flip: torch.Tensor       # bool [B]: mirror the crop left-right
    jitter: torch.Tensor     # bool [B, 4]: apply each jitter op (JITTER_OPS order) to the image
    factors: torch.Tensor    # float32 [B, 4]: brightness, contrast, saturation factors and hue shift
    order: torch.Tensor      # int64 [B, 4]: indices into JITTER_OPS, in the order they are applied
    grayscale: torch.Tensor  # bool [B]: convert to grayscale (after the jitter)


def random_resized_crop_boxes(
    batch: int,
    height: int,
    width: int,
    *,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator,
    attempts: int = 10,
) -> torch.Tensor:
    """torchvision's RandomResizedCrop boxes, one per image: int64 ``[B, 4]`` (top, left, h, w).

    Per image, as ``RandomResizedCrop.get_params``: up to ``attempts`` tries of an area fraction
    a ~ U(scale) and an aspect ratio r = exp(U(log ratio)) give w = round(sqrt(a H W r)) and
    h = round(sqrt(a H W / r)); the first try that fits (0 < w <= W, 0 < h <= H) is placed at a
    uniform position. An image whose tries all fail gets the central crop of the whole image, its
    aspect ratio clamped into ``ratio``. Every try of every image is drawn at once.
    """
    _check_generator(generator)
    scale = _check_interval("scale", scale, 0.0, 1.0)
    ratio = _check_interval("ratio", ratio, 0.0, math.inf)
    u = torch.rand(batch, attempts, 4, generator=generator, device=generator.device, dtype=torch.float64)
    area = height * width * (scale[0] + (scale[1] - scale[0]) * u[..., 0])
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    aspect = torch.exp(log_lo + (log_hi - log_lo) * u[..., 1])
    w = torch.sqrt(area * aspect).round().long()
    h = torch.sqrt(area / aspect).round().long()
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    # floor(u * n) is uniform on 0..n-1; the values of tries that do not fit are never used.
    top = (u[..., 2] * (height - h + 1)).floor().long()
    left = (u[..., 3] * (width - w + 1)).floor().long()
    first = fits.int().argmax(dim=1)  # the first try that fits (0 when none does)
    rows = torch.arange(batch, device=u.device)
    boxes = torch.stack([top, left, h, w], dim=2)[rows, first]

    if width / height < ratio[0]:
        fw, fh = width, round(width / ratio[0])
    elif width / height > ratio[1]:
        fw, fh = round(height * ratio[1]), height
    else:
        fw, fh = width, height
    fallback = torch.tensor([(height - fh) // 2, (width - fw) // 2, fh, fw], device=u.device)
    return torch.where(fits.any(dim=1, keepdim=True), boxes, fallback)


def draw_simclr_params(
    batch: int,
    height: int,
    width: int,
    *,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    flip: bool = True,
    jitter: Sequence[float] = (0.4, 0.4, 0.4, 0.1),
    jitter_p: float = 0.8,
    jitter_mode: str = "joint",
    grayscale_p: float = 0.2,
    generator: torch.Generator,
) -> SimCLRParams:
    """Draw one SimCLR view's parameters for each of ``batch`` images of size ``height x width``.

    - crop: :func:`random_resized_crop_boxes` with ``scale`` and ``ratio``;
    - flip with probability 0.5 if ``flip``;
    - colour jitter: ``jitter`` = (brightness, contrast, saturation, hue) strengths as torchvision's
      ColorJitter: factors ~ U(max(0, 1 - s), 1 + s) for the first three, hue shift ~ U(-s, s) with
      s <= 0.5; a strength 0 gives the identity factor. ``jitter_mode`` (:data:`JITTER_MODES`)
      ``joint``: all four ops with probability ``jitter_p``, in a uniformly random order per image;
      ``separate``: each op on its own with probability ``jitter_p``, in the order of JITTER_OPS;
    - grayscale with probability ``grayscale_p``.

    Every call draws the same amount from ``generator`` whatever the settings, so turning one
    setting off leaves the other parameters' draws unchanged (``separate`` takes its four draws from
    the uniforms that give ``joint`` its order). Returns them on the generator's device.
    """
    _check_generator(generator)
    if not isinstance(flip, bool):
        raise TypeError(f"flip must be a bool, got {type(flip).__name__}")
    if jitter_mode not in JITTER_MODES:
        raise ValueError(f"jitter_mode={jitter_mode!r} is not allowed; choose one of {', '.join(JITTER_MODES)}")
    strengths = torch.as_tensor(jitter, dtype=torch.float32).reshape(-1)
    if len(strengths) != 4 or not bool(torch.isfinite(strengths).all() & (strengths >= 0).all()) or strengths[3] > 0.5:
        raise ValueError(f"jitter={jitter!r} must be 4 strengths >= 0 (brightness, contrast, saturation, hue <= 0.5)")
    jitter_p = _check_probability("jitter_p", jitter_p)
    grayscale_p = _check_probability("grayscale_p", grayscale_p)

    crop = random_resized_crop_boxes(batch, height, width, scale=scale, ratio=ratio, generator=generator)
    dev = generator.device
    u = torch.rand(batch, 3, generator=generator, device=dev)  # flip, jitter, grayscale
    identity = torch.tensor(_JITTER_IDENTITY, device=dev)
    low = torch.where(identity > 0, (identity - strengths.to(dev)).clamp(min=0), -strengths.to(dev))
    high = identity + strengths.to(dev)
    factors = low + (high - low) * torch.rand(batch, 4, generator=generator, device=dev)
    v = torch.rand(batch, 4, generator=generator, device=dev)
    if jitter_mode == "joint":
        order = v.argsort(dim=1)  # a uniform permutation
        jitter = (u[:, 1] < jitter_p)[:, None].expand(batch, 4)
    else:
        order = torch.arange(4, device=dev).expand(batch, 4)
        jitter = v < jitter_p
    return SimCLRParams(crop=crop, flip=(u[:, 0] < 0.5) & flip, jitter=jitter.contiguous(), factors=factors,
                        order=order.contiguous(), grayscale=u[:, 2] < grayscale_p)


def apply_simclr_params(
    x_uint8: torch.Tensor, params: SimCLRParams, *, mean: Sequence[float], std: Sequence[float]
) -> torch.Tensor:
    """One SimCLR view of each image: crop and resize -> flip -> colour jitter -> grayscale -> normalise.

    ``x_uint8`` is ``[B, C, H, W]`` with C = 1 or 3 (saturation, hue and grayscale leave one
    channel unchanged, as in torchvision). Works in float32 on [0, 1] pixels on the batch's
    device and returns float32 ``(x - mean) / std`` of the input's shape.
    """
    _check_uint8_images(x_uint8)
    b, c = x_uint8.shape[:2]
    if c not in (1, 3):
        raise ValueError(f"x must have 1 or 3 channels, got {c}")
    if params.crop.shape != (b, 4):
        raise ValueError(f"params are for {params.crop.shape[0]} images, x has {b}")
    mean_t, std_t = _channel_statistics(mean, std, c, x_uint8.device)
    p = SimCLRParams(*(t.to(x_uint8.device) for t in params))
    x = resized_crop(x_uint8.float().div_(255), p.crop, flip=p.flip)
    x = color_jitter(x, p.factors, p.order, apply=p.jitter)
    if c == 3:
        x = torch.where(p.grayscale[:, None, None, None], _luma(x).expand_as(x), x)
    return x.sub_(mean_t.view(1, c, 1, 1)).div_(std_t.view(1, c, 1, 1))


def simclr_augment(
    x_uint8: torch.Tensor,
    *,
    mean: Sequence[float],
    std: Sequence[float],
    generator: torch.Generator,
    **recipe,
) -> torch.Tensor:
    """One SimCLR view per image: :func:`draw_simclr_params` then :func:`apply_simclr_params`.

    ``recipe`` holds :func:`draw_simclr_params`' settings (scale, ratio, flip, jitter, jitter_p,
    jitter_mode, grayscale_p). Its defaults are SimCLR's CIFAR recipe with FLAT's crop scale (0.08, 1); the
    NORMS authors use ``scale=(0.2, 1.0)`` and ``jitter_mode="separate"``. ``scale=(1, 1), ratio=(1, 1),
    flip=False, jitter_p=0, grayscale_p=0`` is plain normalisation. Returns float32 ``[B, C, H, W]``.
    """
    _check_uint8_images(x_uint8)
    b, _, h, w = x_uint8.shape
    params = draw_simclr_params(b, h, w, generator=generator, **recipe)
    return apply_simclr_params(x_uint8, params, mean=mean, std=std)


def simclr_views(x_uint8: torch.Tensor, **options) -> torch.Tensor:
    """Two independent SimCLR views of each image, stacked ``[view1; view2]``: float32 ``[2B, C, H, W]``.

    ``options`` are :func:`simclr_augment`'s. Both views are drawn and applied in one batch.
    """
    _check_uint8_images(x_uint8)
    return simclr_augment(torch.cat([x_uint8, x_uint8]), **options)


def resized_crop(x: torch.Tensor, boxes: torch.Tensor, *, flip: torch.Tensor | None = None) -> torch.Tensor:
    """Crop float images to their boxes (top, left, h, w) and resize back to H x W, bilinearly.

    Per image this is torchvision's ``resized_crop(img, top, left, h, w, [H, W], BILINEAR,
    antialias=False)`` then ``horizontal_flip`` where ``flip``: PyTorch's align_corners=False
    sampling, src = top + (dst + 1/2) h / H - 1/2, clamped to the box. A box is never larger than
    the image, so the crop is only ever enlarged and antialiasing would change nothing.
    Bilinear resizing is separable: each image is two small matrix products, rows then columns,
    with an interpolation matrix (two non-zero weights per row) per image and axis.
    """
    _check_images(x)
    h, w = x.shape[2:]
    boxes = boxes.to(x.device)
    rows = _interpolation_matrix(boxes[:, 0], boxes[:, 2], h, h, x.dtype)   # [B, H, H]
    cols = _interpolation_matrix(boxes[:, 1], boxes[:, 3], w, w, x.dtype)   # [B, W, W]
    if flip is not None:
        cols = torch.where(flip.to(x.device)[:, None, None], cols.flip(1), cols)
    return rows[:, None] @ x @ cols.transpose(1, 2)[:, None]


def _interpolation_matrix(start: torch.Tensor, length: torch.Tensor, size: int, out: int, dtype) -> torch.Tensor:
    """[B, out, size] bilinear weights that resample pixels start..start+length-1 to ``out`` pixels."""
    dst = torch.arange(out, device=start.device, dtype=torch.float64)
    src = ((dst + 0.5) * (length[:, None].double() / out) - 0.5).clamp(min=0)  # in box coordinates
    lower = src.floor()
    frac = (src - lower).to(dtype)[..., None]
    last = (length - 1)[:, None]
    lower = lower.long().clamp(max=last)
    upper = (lower + 1).clamp(max=last)
    return ((1 - frac) * F.one_hot(start[:, None] + lower, size).to(dtype)
            + frac * F.one_hot(start[:, None] + upper, size).to(dtype))


def color_jitter(
    x: torch.Tensor, factors: torch.Tensor, order: torch.Tensor, *, apply: torch.Tensor | None = None
) -> torch.Tensor:
    """torchvision's ColorJitter with per-image factors and op order, on float images in [0, 1].

    Image i goes through the ops ``JITTER_OPS[order[i, k]]``, k = 0..3, that ``apply`` marks (bool
    [B]: all four ops of image i or none; [B, 4]: each op on its own; None: all), with
    f = ``factors[i, op]``, each clamped to [0, 1] as torchvision's ``adjust_*`` on float images:

        brightness  f x
        contrast    f x + (1 - f) mean(luma(x))      (one mean per image)
        saturation  f x + (1 - f) luma(x)            (per pixel)
        hue         H -> (H + f) mod 1 in HSV space

    luma = 0.299 R + 0.587 G + 0.114 B. Saturation and hue leave 1-channel images unchanged. The
    loop is over the 16 (position, op) pairs, each applied to all the images it concerns at once;
    ops at their identity factor are skipped.
    """
    _check_images(x)
    dev = x.device
    factors, order = factors.to(dev), order.to(dev)
    todo = torch.ones(len(x), 4, dtype=torch.bool, device=dev) if apply is None else apply.to(dev)
    if todo.ndim == 1:
        todo = todo[:, None].expand(len(x), 4)
    ops = (_adjust_brightness, _adjust_contrast) + ((_adjust_saturation, _adjust_hue) if x.shape[1] == 3 else ())
    x = x.clone()
    for position in range(4):
        for op, adjust in enumerate(ops):
            f = factors[:, op]
            idx = (todo[:, op] & (order[:, position] == op) & (f != _JITTER_IDENTITY[op])).nonzero().squeeze(1)
            if len(idx):
                x[idx] = adjust(x[idx], f[idx].view(-1, 1, 1, 1))
    return x


def _luma(x: torch.Tensor) -> torch.Tensor:
    """[n, 1, H, W] luma of RGB images (a 1-channel image is its own luma)."""
    if x.shape[1] == 1:
        return x
    r, g, b = x.unbind(dim=1)
    return (_LUMA[0] * r + _LUMA[1] * g + _LUMA[2] * b).unsqueeze(1)


def _adjust_brightness(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return (x * f).clamp_(0, 1)


def _adjust_contrast(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    mean = _luma(x).mean(dim=(1, 2, 3), keepdim=True)
    return (f * x + (1 - f) * mean).clamp_(0, 1)


def _adjust_saturation(x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    return (f * x + (1 - f) * _luma(x)).clamp_(0, 1)


def _adjust_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate the hue: RGB -> HSV, H -> (H + shift) mod 1, HSV -> RGB."""
    r, g, b = x.unbind(dim=1)
    value, _ = x.max(dim=1)
    chroma = value - x.min(dim=1).values
    saturation = torch.where(value > 0, chroma / value.clamp(min=1e-12), torch.zeros_like(value))
    safe = chroma.clamp(min=1e-12)  # grey pixels (chroma 0) get hue 0, as in torchvision
    hue = torch.where(value == r, ((g - b) / safe) % 6,
                      torch.where(value == g, (b - r) / safe + 2, (r - g) / safe + 4))
    hue = torch.where(chroma > 0, hue / 6, torch.zeros_like(hue))
    hue = (hue + shift.view(-1, 1, 1)) % 1.0
    # HSV -> RGB: channel n in (5, 3, 1) is V - V S clamp(min(k, 4 - k), 0, 1), k = (n + 6 H) mod 6.
    n = torch.tensor([5.0, 3.0, 1.0], device=x.device).view(1, 3, 1, 1)
    k = (n + 6 * hue.unsqueeze(1)) % 6
    return value.unsqueeze(1) - (value * saturation).unsqueeze(1) * torch.minimum(k, 4 - k).clamp(0, 1)


def _check_images(x) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 4:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a [B, C, H, W] tensor, got {shape}")


def _check_generator(generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator (one per seed), got {type(generator).__name__}"
        )


def _check_uint8_images(x) -> None:
    _check_images(x)
    if x.dtype != torch.uint8:
        raise TypeError(f"x must be uint8 pixels (0..255), got {x.dtype}")


def _channel_statistics(mean, std, channels: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``mean`` and ``std`` as float32 [C] tensors, checked: one value per channel, std > 0."""
    mean_t = torch.as_tensor(mean, dtype=torch.float32, device=device).reshape(-1)
    std_t = torch.as_tensor(std, dtype=torch.float32, device=device).reshape(-1)
    if len(mean_t) != channels or len(std_t) != channels:
        raise ValueError(f"mean and std need one value per channel ({channels}), got {len(mean_t)} and {len(std_t)}")
    if not bool((std_t > 0).all()):
        raise ValueError(f"std must be > 0 for every channel, got {std_t.tolist()}")
    return mean_t, std_t


def _check_interval(name: str, value, low: float, high: float) -> tuple[float, float]:
    """A pair (min, max) of finite numbers with low < min <= max <= high."""
    ok = isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    if not ok or not low < value[0] <= value[1] <= high:
        raise ValueError(f"{name}={value!r} must be a pair (min, max) with {low} < min <= max <= {high}")
    return float(value[0]), float(value[1])


def _check_probability(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name}={value!r} must be a probability in [0, 1]")
    return float(value)


# ------------------------------------------------------------------ augmentation strength

# Study 3's knob [ours]: one integer level from none to severe. Every random magnitude is the
# level's share s = level / 4 of its severe value below, so the distortion grows with the level.
DISTORTION_LEVELS = (0, 1, 2, 3, 4)  # 0 none, 1 mild, 2 moderate, 3 strong, 4 severe
DISTORTION_AT_SEVERE = dict(
    rotation_deg=60.0,   # rotation uniform in +-60 degrees
    zoom=0.5,            # zoom in by 1/(1 - 0.5 u), u ~ U(0, 1): a crop of down to half of each side
    shift=0.2,           # translation uniform in +-20% of the image size per axis
    contrast=0.85,       # contrast towards the image's mean reduced by a factor 1 - 0.85 u
    brightness=0.4,      # brightness shift uniform in +-0.4 (pixels in [0, 1])
    noise=0.5,           # Gaussian pixel noise, standard deviation 0.5 (pixels in [0, 1])
)


def distort(x_uint8: torch.Tensor, level: int, generator: torch.Generator) -> torch.Tensor:
    """Augmentation strength ``level`` (0..4) on a uint8 ``[B, C, H, W]`` batch, uint8 out.

    Level 0 returns ``x_uint8`` itself and draws no random numbers, so a run at level 0 is the
    run without this function. Level l > 0, with s = l / 4 and independent draws per image:
    a random affine map (rotation, zoom in, translation; bilinear, zero fill outside the image)
    by one ``grid_sample``, then contrast reduction towards the image's mean, a brightness shift
    and Gaussian pixel noise, each at s times its severe magnitude (:data:`DISTORTION_AT_SEVERE`),
    then rounding back to 0..255. It runs before the crop and flip of :func:`augment`.
    """
    _check_images(x_uint8)
    if x_uint8.dtype != torch.uint8:
        raise TypeError(f"x_uint8 must be uint8 pixels (0..255), got {x_uint8.dtype}")
    _check_generator(generator)
    if isinstance(level, bool) or level not in DISTORTION_LEVELS:
        raise ValueError(f"level must be one of {DISTORTION_LEVELS}, got {level!r}")
    if level == 0:
        return x_uint8
    s = level / DISTORTION_LEVELS[-1]
    sev = DISTORTION_AT_SEVERE
    b, c, h, w = x_uint8.shape
    u = torch.rand(b, 6, generator=generator, device=generator.device).to(x_uint8.device)
    noise = torch.randn(x_uint8.shape, generator=generator, device=generator.device).to(x_uint8.device)
    angle = torch.deg2rad((2 * u[:, 0] - 1) * (sev["rotation_deg"] * s))
    scale = 1 - sev["zoom"] * s * u[:, 1]  # sampling a smaller area of the image zooms in
    shift = (2 * u[:, 2:4] - 1) * (2 * sev["shift"] * s)  # affine_grid's coordinates span 2 per image
    cos, sin = angle.cos() * scale, angle.sin() * scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, [b, c, h, w], align_corners=False)
    y = F.grid_sample(x_uint8.float() / 255, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    mean = y.mean(dim=(1, 2, 3), keepdim=True)
    contrast = (1 - sev["contrast"] * s * u[:, 4]).view(b, 1, 1, 1)
    brightness = ((2 * u[:, 5] - 1) * sev["brightness"] * s).view(b, 1, 1, 1)
    y = mean + contrast * (y - mean) + brightness + sev["noise"] * s * noise
    return y.clamp_(0, 1).mul_(255).round_().to(torch.uint8)
