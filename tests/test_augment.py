"""Tests of lib.core.augment against torchvision's functional ops and exact invariants."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as TF

from lib.core.augment import augment, normalize, random_crop, random_flip
from lib.core.data import load_dataset


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def distinct_images(b, c=3, h=7, w=9, seed=0) -> torch.Tensor:
    """Random uint8 images with pixels in 1..255: 0 then appears only as crop padding, windows
    at different offsets differ, and no image is its own mirror."""
    return torch.randint(1, 256, (b, c, h, w), generator=gen(seed), dtype=torch.uint8)


def window_matches(x: torch.Tensor, out: torch.Tensor, padding: int):
    """All (top, left) offsets of the zero-padded input, and for each image [B, offsets] whether
    the H x W window at that offset equals the output image."""
    h, w = x.shape[2:]
    padded = TF.pad(x, [padding])
    offsets = [(i, j) for i in range(2 * padding + 1) for j in range(2 * padding + 1)]
    match = torch.stack([(padded[:, :, i:i + h, j:j + w] == out).flatten(1).all(1) for i, j in offsets], 1)
    return torch.tensor(offsets), match


def recover_offsets(x: torch.Tensor, out: torch.Tensor, padding: int) -> torch.Tensor:
    """[B, 2] (top, left) of each output's window, asserting exactly one window matches."""
    offsets, match = window_matches(x, out, padding)
    assert bool((match.sum(1) == 1).all()), "every output must be exactly one window of the padded input"
    return offsets[match.int().argmax(1)]


# ------------------------------------------------------------------------------------ crop


@pytest.mark.parametrize("padding", [1, 3])
def test_random_crop_is_torchvision_pad_then_crop_at_uniform_offsets(padding):
    x = distinct_images(b=1000)  # >= 20 images per offset pair, so that every pair shows up
    out = random_crop(x, padding, gen(0))
    assert out.shape == x.shape and out.dtype == torch.uint8
    offsets = recover_offsets(x, out, padding)
    # Reference: torchvision's functional pad (zero fill) + crop at the same offsets.
    for k in range(0, len(x), 37):
        top, left = offsets[k].tolist()
        ref = TF.crop(TF.pad(x[k], [padding], fill=0), top, left, x.shape[2], x.shape[3])
        assert torch.equal(out[k], ref)
    # One independent offset per image: every (top, left) pair occurs.
    side = 2 * padding + 1
    pairs = torch.bincount(offsets[:, 0] * side + offsets[:, 1], minlength=side * side)
    assert bool((pairs > 0).all()), pairs


def test_random_crop_float_matches_uint8_and_padding_zero_is_identity():
    x = distinct_images(b=64)
    assert torch.equal(random_crop(x.float(), 2, gen(5)), random_crop(x, 2, gen(5)).float())
    assert torch.equal(random_crop(x, 0, gen(5)), x)


def test_random_crop_padding_larger_than_image_can_be_all_fill():
    x = distinct_images(b=300, h=2, w=2)
    out = random_crop(x, 3, gen(1))
    _, match = window_matches(x, out, 3)
    assert bool(match.any(1).all())  # every output is a window of the padded input
    assert bool((out.flatten(1) == 0).all(1).any())  # windows entirely in the zero border occur


@pytest.mark.parametrize("padding, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_random_crop_rejects_bad_padding(padding, error):
    with pytest.raises(error, match="padding"):
        random_crop(distinct_images(b=2), padding, gen(0))


def test_random_crop_needs_a_generator():
    with pytest.raises(TypeError, match="generator"):
        random_crop(distinct_images(b=2), 1, 0)


# ------------------------------------------------------------------------------------ flip


def test_random_flip_mirrors_about_half_exactly():
    x = distinct_images(b=1000)
    out = random_flip(x, gen(0))
    same = (out == x).flatten(1).all(1)
    mirrored = (out == TF.horizontal_flip(x)).flatten(1).all(1)
    assert bool((same ^ mirrored).all())  # each image either untouched or exactly mirrored
    # Binomial(1000, 0.5): 4.7 standard deviations either side of 500.
    assert 425 < int(mirrored.sum()) < 575


# ------------------------------------------------------------------------------- seeding


@pytest.mark.parametrize("fn", [lambda x, g: random_crop(x, 2, g), random_flip,
                                lambda x, g: augment(x, padding=2, flip=True, mean=(0.5,) * 3,
                                                     std=(0.2,) * 3, generator=g)])
def test_same_seed_same_output_different_seed_different(fn):
    x = distinct_images(b=64)
    assert torch.equal(fn(x, gen(11)), fn(x, gen(11)))
    assert not torch.equal(fn(x, gen(11)), fn(x, gen(12)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cpu_generator_gives_the_same_augmentation_on_cuda():
    x = distinct_images(b=64)
    kw = {"padding": 3, "flip": True, "mean": (0.5,) * 3, "std": (0.2,) * 3}
    cpu = augment(x, generator=gen(3), **kw)
    cuda = augment(x.cuda(), generator=gen(3), **kw)
    assert torch.allclose(cpu, cuda.cpu(), atol=1e-6)


# ------------------------------------------------------------------------------ normalize


def test_normalize_matches_formula():
    x = distinct_images(b=8)
    mean, std = (0.1, 0.5, 0.9), (0.2, 0.3, 0.4)
    out = normalize(x, mean, std)
    ref = (x.double() / 255 - torch.tensor(mean, dtype=torch.float64).view(1, 3, 1, 1)) / torch.tensor(
        std, dtype=torch.float64).view(1, 3, 1, 1)
    assert out.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mean, std, match", [((0.5,), (0.2, 0.2, 0.2), "channel"),
                                              ((0.5,) * 3, (0.2, 0.0, 0.2), "std")])
def test_normalize_rejects_bad_statistics(mean, std, match):
    with pytest.raises(ValueError, match=match):
        normalize(distinct_images(b=2), mean, std)


def test_normalize_needs_uint8():
    with pytest.raises(TypeError, match="uint8"):
        normalize(distinct_images(b=2).float(), (0.5,) * 3, (0.2,) * 3)


# -------------------------------------------------------------------------------- augment


def test_augment_without_crop_or_flip_standardises_the_dataset():
    ds = load_dataset("shapes", n_train=2000, n_test=10)
    out = augment(ds.x_train, padding=0, flip=False, mean=ds.mean, std=ds.std, generator=gen(0))
    assert torch.equal(out, normalize(ds.x_train, ds.mean, ds.std))
    np.testing.assert_allclose(out.mean(dim=(0, 2, 3)).numpy(), 0, atol=1e-4)
    np.testing.assert_allclose(out.std(dim=(0, 2, 3), unbiased=False).numpy(), 1, atol=1e-4)


def test_augment_is_crop_then_flip_then_normalize_with_black_fill():
    x = distinct_images(b=256)
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)
    out = augment(x, padding=2, flip=True, mean=mean, std=std, generator=gen(9))
    g = gen(9)
    ref = normalize(random_flip(random_crop(x, 2, g), g), mean, std)
    assert torch.equal(out, ref)
    # The padding is pixel 0 before normalising: it becomes -mean/std, not 0.
    fill = torch.tensor([-m / s for m, s in zip(mean, std)]).view(3, 1)
    is_fill = ((out.flatten(2) - fill).abs() < 1e-5).all(1)  # [B, H*W]: fill in all 3 channels
    assert bool(is_fill.any())


def test_augment_rejects_non_bool_flip():
    with pytest.raises(TypeError, match="flip"):
        augment(distinct_images(b=2), padding=2, flip=1, mean=(0.5,) * 3, std=(0.2,) * 3, generator=gen(0))
