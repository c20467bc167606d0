"""Dataset registry: whole datasets as uint8 tensors in memory (airbench style).

Every dataset comes back as one :class:`ImageDataset` holding the full train and test splits as
``uint8 [N, C, H, W]`` tensors, so that training loops index batches and augment them on the
device (:mod:`lib.augment`) instead of decoding images one by one.

Sources, per the project's profiles (STUDIES.md, "Profiles"):

- real datasets (cifar10, cifar100, svhn, fashion_mnist, mnist): a prepared-arrays folder
  (``data_root=`` or env ``DATA_ROOT``, holding ``<name>.npz``), else torchvision's cache
  (``cache_dir=`` or env ``TORCHVISION_CACHE``; ``download=True`` fetches where there is
  internet);
- embedded datasets that need neither: ``digits`` (scikit-learn's real 8x8 digits) and
  ``shapes`` (a procedural generator whose class count and difficulty are parameters, so that
  positive-pair density and task difficulty can be turned by hand).
"""
from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

DATASETS = ("cifar10", "cifar100", "svhn", "fashion_mnist", "mnist", "digits", "shapes")

# Real datasets: torchvision class name and the class count a valid copy must have.
_REAL = {
    "cifar10": ("CIFAR10", 10),
    "cifar100": ("CIFAR100", 100),
    "svhn": ("SVHN", 10),
    "fashion_mnist": ("FashionMNIST", 10),
    "mnist": ("MNIST", 10),
}

_SHAPES_DEFAULTS = {"num_classes": 10, "difficulty": 0.3, "n_train": 5000, "n_test": 1000, "seed": 0}
_SHAPES_IMAGE_SIZE = 16

# digits: a fixed stratified split, so every run of every notebook sees the same test set.
_DIGITS_TEST_SIZE = 300
_DIGITS_SPLIT_SEED = 0


@dataclass(frozen=True)
class ImageDataset:
    """A whole image dataset in memory.

    ``x_*`` are ``uint8 [N, C, H, W]`` (square images), ``y_*`` are ``int64 [N]`` labels in
    ``[0, num_classes)``. ``mean``/``std`` are the per-channel statistics of ``x_train`` in
    [0, 1] units (population std), for :func:`lib.augment.normalize`. ``source`` says where the
    arrays came from, so that a notebook can print it.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def channels(self) -> int:
        return self.x_train.shape[1]

    @property
    def image_size(self) -> int:
        return self.x_train.shape[2]


class DatasetNotFoundError(RuntimeError):
    """No source could provide a real dataset; the message lists what was tried and what to do."""


def load_dataset(
    name: str,
    *,
    data_root: str | os.PathLike | None = None,
    download: bool = False,
    cache_dir: str | os.PathLike | None = None,
    image_size: int | None = None,
    channels: int | None = None,
    **options,
) -> ImageDataset:
    """Load dataset ``name`` (one of :data:`DATASETS`) whole, as uint8 tensors.

    Real datasets are looked up first in the prepared-arrays folder (``data_root``, else env
    ``DATA_ROOT``) as ``<name>.npz``, then through torchvision in ``cache_dir`` (else env
    ``TORCHVISION_CACHE``, else ``~/.cache/contrastive-companion/torchvision``), downloading
    only if ``download=True``. If both fail, :class:`DatasetNotFoundError` says what was tried.

    ``image_size`` resizes every image to that square size (bilinear, antialiased) and
    ``channels`` (1 or 3) converts grayscale to 3 channels by repetition or RGB to 1 channel by
    ITU-R BT.601 luma, so that e.g. MNIST can be fed at 32x32x3 to a CIFAR model. For
    ``shapes`` ``image_size`` is instead the size the images are generated at (default 16).

    ``options`` are only for ``shapes``: ``num_classes`` (10), ``difficulty`` in [0, 1] (0.3),
    ``n_train`` (5000), ``n_test`` (1000), ``seed`` (0). Its classes are random low-frequency
    colour patterns; difficulty adds translation, contrast loss and noise (see
    :func:`_make_shapes`): ~100% nearest-centroid accuracy at 0, near chance at 1.
    """
    if name not in DATASETS:
        raise ValueError(f"name={name!r} is not a known dataset; choose one of {', '.join(DATASETS)}")
    if image_size is not None and (not _is_int(image_size) or image_size < 1):
        raise ValueError(f"image_size={image_size!r} must be None or a positive int")
    if channels not in (None, 1, 3):
        raise ValueError(f"channels={channels!r} is not allowed; choose None, 1 or 3")
    if name != "shapes" and options:
        raise ValueError(
            f"unknown option(s) {', '.join(sorted(options))} for dataset {name!r}; "
            f"only 'shapes' takes options ({', '.join(_SHAPES_DEFAULTS)})"
        )

    if name == "shapes":
        unknown = sorted(set(options) - set(_SHAPES_DEFAULTS))
        if unknown:
            raise ValueError(
                f"unknown option(s) {', '.join(unknown)} for 'shapes'; "
                f"allowed: {', '.join(_SHAPES_DEFAULTS)}"
            )
        size = _SHAPES_IMAGE_SIZE if image_size is None else image_size
        x_tr, y_tr, x_te, y_te, classes, source = _make_shapes(
            **{**_SHAPES_DEFAULTS, **options}, image_size=size
        )
        image_size = None  # already generated at the requested size
    elif name == "digits":
        x_tr, y_tr, x_te, y_te, classes, source = _load_digits()
    else:
        x_tr, y_tr, x_te, y_te, classes, source = _load_real(name, data_root, download, cache_dir)

    if image_size is not None and image_size != x_tr.shape[2]:
        x_tr, x_te = _resize(x_tr, image_size), _resize(x_te, image_size)
    if channels is not None and channels != x_tr.shape[1]:
        x_tr, x_te = _convert_channels(x_tr, channels), _convert_channels(x_te, channels)
    mean, std = _channel_stats(x_tr)
    return ImageDataset(name, x_tr, y_tr, x_te, y_te, tuple(classes), mean, std, source)


# ----------------------------------------------------------------------------------- real data


def _load_real(name, data_root, download, cache_dir):
    """Try the prepared-arrays folder, then torchvision; raise DatasetNotFoundError if both fail."""
    tried = []

    root_arg = data_root if data_root is not None else os.environ.get("DATA_ROOT")
    if root_arg:
        path = Path(root_arg).expanduser() / f"{name}.npz"
        if path.is_file():
            return (*_load_npz(path, _REAL[name][1]), f"DATA_ROOT {path}")
        tried.append(f"DATA_ROOT {path}: file does not exist")
    else:
        tried.append("DATA_ROOT: not set (no data_root argument, environment variable DATA_ROOT unset)")

    cache = cache_dir if cache_dir is not None else os.environ.get("TORCHVISION_CACHE")
    cache = Path(cache or "~/.cache/contrastive-companion/torchvision").expanduser()
    tv_name = _REAL[name][0]
    try:
        arrays = _load_torchvision(name, cache, download)
    # torchvision raises RuntimeError when the files are absent and URLError/OSError/... when a
    # download fails; every one of them means "not from here", so record it and report below.
    except Exception as err:  # noqa: BLE001
        tried.append(f"torchvision {tv_name} in {cache} (download={download}): {type(err).__name__}: {err}")
    else:
        _validate(*arrays, expected_classes=_REAL[name][1], where=f"torchvision {tv_name} in {cache}")
        return (*arrays, f"torchvision cache {cache}")

    raise DatasetNotFoundError(
        f"dataset {name!r} was not found. Tried:\n"
        + "".join(f"  {i}. {t}\n" for i, t in enumerate(tried, 1))
        + "What you can do:\n"
        f"  - set DATA_ROOT (or pass data_root=) to a folder holding {name}.npz with keys x_train "
        "[N,H,W,C] uint8, y_train int64, x_test, y_test, classes;\n"
        "  - pass download=True on a machine with internet (torchvision caches it in cache_dir);\n"
        "  - or use the embedded datasets 'digits' or 'shapes', which need neither."
    )


def _load_npz(path: Path, expected_classes: int):
    """Read a prepared ``<name>.npz`` (NHWC or NHW uint8) into NCHW tensors, validating it."""
    keys = ("x_train", "y_train", "x_test", "y_test", "classes")
    try:
        with np.load(path, allow_pickle=False) as d:
            missing = [k for k in keys if k not in d.files]
            if missing:
                raise ValueError(f"{path}: missing key(s) {', '.join(missing)} (has {', '.join(d.files)})")
            arrays = {k: d[k] for k in keys}
    # A truncated download or an object (pickled) array: say which file, not just what failed.
    except (OSError, ValueError, zipfile.BadZipFile) as err:
        if str(path) in str(err):
            raise
        raise ValueError(f"{path}: cannot be read as a prepared-arrays npz ({err})") from err
    xs = []
    for key in ("x_train", "x_test"):
        x = arrays[key]
        if x.ndim == 3:  # grayscale stored without a channel axis
            x = x[..., None]
        if x.ndim != 4:
            raise ValueError(f"{path}: {key} has shape {x.shape}; expected [N,H,W,C] or [N,H,W]")
        xs.append(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous())
    ys = []
    for key in ("y_train", "y_test"):
        y = arrays[key]
        if not np.issubdtype(y.dtype, np.integer):
            raise ValueError(f"{path}: {key} has dtype {y.dtype}; expected integer labels")
        ys.append(torch.from_numpy(y.astype(np.int64)))
    classes = tuple(str(c) for c in arrays["classes"].reshape(-1))
    _validate(xs[0], ys[0], xs[1], ys[1], classes, expected_classes=expected_classes, where=str(path))
    return xs[0], ys[0], xs[1], ys[1], classes


def _load_torchvision(name: str, root: Path, download: bool):
    """Load both splits through torchvision's dataset class, from its arrays (no per-image PIL)."""
    import torchvision.datasets as tvd

    if name == "svhn":
        splits = [tvd.SVHN(str(root), split=s, download=download) for s in ("train", "test")]
        # torchvision already maps SVHN's label 10 to 0 and stores NCHW.
        xs = [torch.from_numpy(s.data).contiguous() for s in splits]
        ys = [torch.from_numpy(s.labels).long() for s in splits]
        classes = tuple(str(i) for i in range(10))
    else:
        cls = getattr(tvd, _REAL[name][0])
        splits = [cls(str(root), train=t, download=download) for t in (True, False)]
        if name.startswith("cifar"):  # numpy NHWC, list labels
            xs = [torch.from_numpy(s.data).permute(0, 3, 1, 2).contiguous() for s in splits]
            ys = [torch.tensor(s.targets, dtype=torch.int64) for s in splits]
        else:  # (Fashion-)MNIST: torch [N,H,W] uint8
            xs = [s.data.unsqueeze(1).contiguous() for s in splits]
            ys = [s.targets.long() for s in splits]
        classes = tuple(splits[0].classes)
    return xs[0], ys[0], xs[1], ys[1], classes


def _validate(x_tr, y_tr, x_te, y_te, classes, *, expected_classes: int | None, where: str) -> None:
    """Check dtypes, shapes and label ranges, naming ``where`` (the file) in every error."""
    if expected_classes is not None and len(classes) != expected_classes:
        raise ValueError(f"{where}: {len(classes)} classes, expected {expected_classes}")
    for split, x, y in (("train", x_tr, y_tr), ("test", x_te, y_te)):
        if x.dtype != torch.uint8:
            raise ValueError(f"{where}: x_{split} has dtype {x.dtype}; expected uint8")
        if x.ndim != 4 or x.shape[1] not in (1, 3) or x.shape[2] != x.shape[3]:
            raise ValueError(
                f"{where}: x_{split} has shape (NCHW) {tuple(x.shape)}; expected square images "
                "with 1 or 3 channels"
            )
        if y.ndim != 1 or len(y) != len(x):
            raise ValueError(f"{where}: y_{split} has shape {tuple(y.shape)}; expected [{len(x)}]")
        if len(y) == 0:
            raise ValueError(f"{where}: the {split} split is empty")
        if int(y.min()) < 0 or int(y.max()) >= len(classes):
            raise ValueError(
                f"{where}: y_{split} has labels in [{int(y.min())}, {int(y.max())}]; "
                f"expected [0, {len(classes) - 1}] for {len(classes)} classes"
            )
    if x_tr.shape[1:] != x_te.shape[1:]:
        raise ValueError(
            f"{where}: x_train images are {tuple(x_tr.shape[1:])} but x_test images are "
            f"{tuple(x_te.shape[1:])}"
        )


# ------------------------------------------------------------------------------------ embedded


def _load_digits():
    """scikit-learn's 8x8 digits (real, ships with the package), values 0..16 scaled to 0..255.

    Split: stratified, 1497 train / 300 test, ``random_state=0``, fixed so results compare.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = np.rint(d.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    y = d.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=_DIGITS_TEST_SIZE, stratify=y, random_state=_DIGITS_SPLIT_SEED
    )
    classes = tuple(str(c) for c in d.target_names)
    source = (
        f"scikit-learn digits (load_digits; stratified {len(y_tr)}/{len(y_te)} split, "
        f"random_state={_DIGITS_SPLIT_SEED})"
    )
    return (torch.from_numpy(x_tr), torch.from_numpy(y_tr), torch.from_numpy(x_te),
            torch.from_numpy(y_te), classes, source)


def _make_shapes(
    num_classes: int,
    difficulty: float,
    n_train: int,
    n_test: int,
    image_size: int,
    seed: int,
):
    """Procedural RGB dataset whose class count and difficulty are knobs.

    Each class has a fixed prototype: per colour channel, a random low-frequency periodic
    pattern (a sum of plane waves of 1-2 cycles per image with Gaussian coefficients),
    normalised to unit RMS, so that 100 classes still get clearly distinct prototypes. A sample
    is its class prototype translated (circularly, sub-pixel), with its contrast reduced and
    Gaussian pixel noise added; all three grow with ``difficulty`` d:

    - translation uniform in +-d*S/2 pixels per axis (at d = 1 every shift is equally likely,
      so every class mean is flat grey and pixel-linear classifiers are at chance);
    - pattern amplitude 0.18 * (1 - 0.8*d) * (1 - 0.9*d*u), u ~ U(0, 1), in [0, 1] units;
    - noise std 0.03 + 0.3*d.

    At d = 0 a nearest-centroid classifier on pixels is ~100% accurate; at d = 1 the signal is
    so far below the noise that even a translation-invariant classifier (logistic regression on
    |FFT|) is near chance. The same uniform and normal draws are scaled by d, so a sweep over d
    with one seed changes only the difficulty. Labels are class-balanced. Returns ``(x_train,
    y_train, x_test, y_test, classes, source)``; the same arguments give identical tensors.
    """
    for key, value, low in (("num_classes", num_classes, 2), ("n_train", n_train, num_classes),
                            ("n_test", n_test, num_classes), ("image_size", image_size, 8)):
        if not _is_int(value) or value < low:
            raise ValueError(f"{key}={value!r} must be an int >= {low} for 'shapes'")
    if not _is_int(seed):
        raise ValueError(f"seed={seed!r} must be an int")
    if isinstance(difficulty, bool) or not isinstance(difficulty, (int, float)) or not 0 <= difficulty <= 1:
        raise ValueError(f"difficulty={difficulty!r} must be a number in [0, 1]")

    g = torch.Generator().manual_seed(seed)
    protos = _shape_prototypes(num_classes, image_size, g)
    x_tr, y_tr = _shape_samples(protos, n_train, float(difficulty), g)
    x_te, y_te = _shape_samples(protos, n_test, float(difficulty), g)
    classes = tuple(f"shape{k:0{max(2, len(str(num_classes - 1)))}d}" for k in range(num_classes))
    source = (
        f"procedural shapes(num_classes={num_classes}, difficulty={difficulty}, n_train={n_train}, "
        f"n_test={n_test}, image_size={image_size}, seed={seed})"
    )
    return x_tr, y_tr, x_te, y_te, classes, source


def _shape_prototypes(num_classes: int, size: int, g: torch.Generator):
    """Random low-frequency colour patterns, periodic over ``size`` pixels, in wave form.

    Returns ``(freqs [F, 2], basis [2F, S*S], coef [K, 3, 2F])``: class k's channel c is
    ``coef[k, c] @ basis`` (cosine waves first, then sine waves), zero-mean with unit RMS over
    its 3 channels. Keeping the wave coefficients, rather than pixels, makes translation exact
    and sub-pixel: it is a rotation of each wave's (cos, sin) coefficient pair.
    """
    # Frequencies (fy, fx) of 1-2 cycles per image, one of each +-f pair, no DC term.
    freqs = torch.tensor([(fy, fx) for fy in range(-2, 3) for fx in range(3)
                          if (fx > 0 or fy > 0)], dtype=torch.float32)
    pos = torch.arange(size, dtype=torch.float32)
    phase = 2 * math.pi * (freqs[:, 0, None, None] * pos[:, None] + freqs[:, 1, None, None] * pos) / size
    basis = torch.cat([phase.cos(), phase.sin()]).flatten(1)
    # 1/|f| amplitudes make the patterns smooth blobs rather than stripes.
    coef = torch.randn(num_classes, 3, 2 * len(freqs), generator=g) * freqs.norm(dim=1).reciprocal().repeat(2)
    rms = torch.einsum("kcb,bp->kcp", coef, basis).square().mean(dim=(1, 2)).sqrt()
    return freqs, basis, coef / rms[:, None, None]


def _shape_samples(prototypes, n: int, d: float, g: torch.Generator):
    """n class-balanced samples of the prototypes at difficulty d, as uint8 NCHW and labels."""
    freqs, basis, coef = prototypes
    k, c, _ = coef.shape
    size = math.isqrt(basis.shape[1])
    y = (torch.arange(n) % k)[torch.randperm(n, generator=g)]
    u_shift = torch.rand(n, 2, generator=g) * 2 - 1
    u_contrast = torch.rand(n, generator=g)
    noise = torch.randn(n, c, size, size, generator=g)

    # Translating by t turns wave a*cos(phi) + b*sin(phi) into a*cos(phi - theta) +
    # b*sin(phi - theta), theta = 2*pi*f.t/S: rotate (a, b) by theta.
    theta = 2 * math.pi * (u_shift * (d * size / 2)) @ freqs.T / size  # [n, F]
    cos, sin = theta.cos()[:, None], theta.sin()[:, None]
    a, b = coef[y].chunk(2, dim=2)
    contrast = 0.18 * ((1 - 0.8 * d) * (1 - 0.9 * d * u_contrast))[:, None, None]
    shifted = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=2) * contrast
    x = (shifted @ basis).view(n, c, size, size)
    x += noise.mul_(0.03 + 0.3 * d)
    return x.add_(0.5).mul_(255).round_().clamp_(0, 255).to(torch.uint8), y


# ------------------------------------------------------------------------------- conversions


def _resize(x: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear antialiased resize of uint8 NCHW to size x size, staying uint8."""
    from torchvision.transforms.v2 import InterpolationMode
    from torchvision.transforms.v2.functional import resize

    return resize(x, [size, size], interpolation=InterpolationMode.BILINEAR, antialias=True)


def _convert_channels(x: torch.Tensor, channels: int) -> torch.Tensor:
    """1 -> 3 channels by repetition; 3 -> 1 by ITU-R BT.601 luma (as PIL's 'L' mode)."""
    if channels == 3:
        return x.repeat(1, 3, 1, 1)
    weights = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
    return (x.float() * weights).sum(dim=1, keepdim=True).round_().clamp_(0, 255).to(torch.uint8)


def _channel_stats(x: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Exact per-channel mean and population std of uint8 images in [0, 1] units.

    Computed from a 256-bin histogram per channel, so full CIFAR costs no float copy.
    """
    values = torch.arange(256, dtype=torch.float64) / 255
    means, stds = [], []
    for ch in range(x.shape[1]):
        counts = torch.bincount(x[:, ch].reshape(-1), minlength=256).double()
        total = counts.sum()
        mean = (counts * values).sum() / total
        var = (counts * values.square()).sum() / total - mean.square()
        means.append(float(mean))
        stds.append(float(var.clamp_min(0).sqrt()))
    return tuple(means), tuple(stds)


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
