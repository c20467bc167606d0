"""Tests of lib.core.data: the embedded datasets, the prepared-arrays folder, torchvision's cache,
the errors, and (when present) the real subsets in ../shared/data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lib.core.data import DATASETS, DatasetNotFoundError, ImageDataset, load_dataset
from tests.conftest import SHARED_DATA, missing_data


def nearest_centroid_accuracy(ds: ImageDataset) -> float:
    """Test accuracy of nearest class mean on raw pixels: the 'simple classifier' of the spec."""
    x_tr = ds.x_train.flatten(1).float()
    x_te = ds.x_test.flatten(1).float()
    counts = torch.bincount(ds.y_train, minlength=ds.num_classes)
    centroids = torch.zeros(ds.num_classes, x_tr.shape[1]).index_add_(0, ds.y_train, x_tr) / counts[:, None]
    return float((torch.cdist(x_te, centroids).argmin(1) == ds.y_test).float().mean())


def direct_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    f = x.double() / 255
    return f.mean(dim=(0, 2, 3)), f.std(dim=(0, 2, 3), unbiased=False)


def write_npz(path: Path, x_train, y_train, x_test, y_test, classes) -> None:
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test,
             classes=np.array(classes))


def small_arrays(rng, n=20, m=8, size=6, channels=3, num_classes=10):
    """Random NHWC uint8 images with labels covering [0, num_classes)."""
    shape = (size, size, channels) if channels else (size, size)
    return (rng.integers(0, 256, (n, *shape), dtype=np.uint8), np.arange(n) % num_classes,
            rng.integers(0, 256, (m, *shape), dtype=np.uint8), np.arange(m) % num_classes)


# ------------------------------------------------------------------------------------- digits


def test_digits_shapes_types_and_stats():
    ds = load_dataset("digits")
    assert ds.x_train.shape == (1497, 1, 8, 8) and ds.x_test.shape == (300, 1, 8, 8)
    assert ds.x_train.dtype == torch.uint8 and ds.y_train.dtype == torch.int64
    assert ds.num_classes == 10 and ds.classes == tuple("0123456789")
    assert (ds.channels, ds.image_size) == (1, 8)
    # 0..16 is scaled to the full 0..255 range.
    assert int(ds.x_train.max()) == 255 and int(ds.x_train.min()) == 0
    # Stratified split: every class has 30 test images (300 / 10, classes within 2 of balance).
    assert (torch.bincount(ds.y_test, minlength=10) - 30).abs().max() <= 2
    mean, std = direct_stats(ds.x_train)
    np.testing.assert_allclose(ds.mean, mean, atol=1e-9)
    np.testing.assert_allclose(ds.std, std, atol=1e-9)
    assert "scikit-learn" in ds.source


def test_digits_split_is_fixed():
    a, b = load_dataset("digits"), load_dataset("digits")
    assert torch.equal(a.x_test, b.x_test) and torch.equal(a.y_train, b.y_train)


# ------------------------------------------------------------------------------------- shapes


def test_shapes_deterministic_per_seed_and_different_across_seeds():
    a = load_dataset("shapes", seed=3, n_train=200, n_test=50)
    b = load_dataset("shapes", seed=3, n_train=200, n_test=50)
    c = load_dataset("shapes", seed=4, n_train=200, n_test=50)
    for key in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(a, key), getattr(b, key))
    assert not torch.equal(a.x_train, c.x_train)


@pytest.mark.parametrize("num_classes", [10, 100])
def test_shapes_layout_and_class_count(num_classes):
    ds = load_dataset("shapes", num_classes=num_classes, n_train=1000, n_test=200)
    assert ds.x_train.shape == (1000, 3, 16, 16) and ds.x_test.shape == (200, 3, 16, 16)
    assert ds.x_train.dtype == torch.uint8 and ds.y_test.dtype == torch.int64
    assert ds.num_classes == num_classes and len(set(ds.classes)) == num_classes
    assert ds.classes[0] == "shape00"
    # Class-balanced: every class appears, counts differ by at most one.
    counts = torch.bincount(ds.y_train, minlength=num_classes)
    assert int(counts.min()) >= 1000 // num_classes and int(counts.max()) <= -(-1000 // num_classes)
    mean, std = direct_stats(ds.x_train)
    np.testing.assert_allclose(ds.mean, mean, atol=1e-9)
    np.testing.assert_allclose(ds.std, std, atol=1e-9)


@pytest.mark.parametrize("num_classes", [10, 100])
def test_shapes_difficulty_moves_accuracy_from_high_to_chance(num_classes):
    acc = {d: nearest_centroid_accuracy(load_dataset("shapes", num_classes=num_classes, difficulty=d))
           for d in (0.0, 0.5, 1.0)}
    chance = 1 / num_classes
    assert acc[0.0] > 0.9, acc
    assert acc[1.0] < 2 * chance, acc
    assert acc[0.0] > acc[0.5] > acc[1.0], acc


def test_shapes_prototypes_are_distinct_for_100_classes():
    # At difficulty 0 the class means are the prototypes (plus a little noise); the closest
    # pair must still be far apart compared with the noise, or classes would be confusable.
    ds = load_dataset("shapes", num_classes=100, difficulty=0.0, n_train=2000, n_test=100)
    x = ds.x_train.flatten(1).float() / 255
    centroids = torch.zeros(100, x.shape[1]).index_add_(0, ds.y_train, x) / 20
    dist = torch.cdist(centroids, centroids) + torch.eye(100) * 1e9
    noise_norm = 0.03 * x.shape[1] ** 0.5
    assert float(dist.min()) > 2 * noise_norm


def test_shapes_image_size_is_the_generation_size():
    ds = load_dataset("shapes", image_size=32, n_train=100, n_test=10)
    assert ds.x_train.shape == (100, 3, 32, 32)


@pytest.mark.parametrize(
    "options, parameter",
    [({"difficulty": 1.5}, "difficulty"), ({"num_classes": 1}, "num_classes"),
     ({"n_train": 5, "num_classes": 10}, "n_train"), ({"colour": True}, "colour"),
     ({"seed": 0.5}, "seed")],
)
def test_shapes_invalid_options_name_the_parameter(options, parameter):
    with pytest.raises(ValueError, match=parameter):
        load_dataset("shapes", **options)


# ------------------------------------------------------------------------ DATA_ROOT (npz files)


def test_npz_from_data_root_argument_round_trips(tmp_path, monkeypatch):
    monkeypatch.delenv("DATA_ROOT", raising=False)
    rng = np.random.default_rng(0)
    x_tr, y_tr, x_te, y_te = small_arrays(rng)
    write_npz(tmp_path / "cifar10.npz", x_tr, y_tr, x_te, y_te, [f"c{i}" for i in range(10)])
    ds = load_dataset("cifar10", data_root=tmp_path)
    assert torch.equal(ds.x_train, torch.from_numpy(x_tr).permute(0, 3, 1, 2))
    assert torch.equal(ds.x_test, torch.from_numpy(x_te).permute(0, 3, 1, 2))
    assert torch.equal(ds.y_train, torch.from_numpy(y_tr)) and ds.y_train.dtype == torch.int64
    assert ds.classes == tuple(f"c{i}" for i in range(10))
    assert ds.source == f"DATA_ROOT {tmp_path / 'cifar10.npz'}"
    mean, std = direct_stats(ds.x_train)
    np.testing.assert_allclose(ds.mean, mean, atol=1e-9)
    np.testing.assert_allclose(ds.std, std, atol=1e-9)


def test_npz_from_env_var_grayscale_without_channel_axis(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    x_tr, y_tr, x_te, y_te = small_arrays(rng, channels=0)
    write_npz(tmp_path / "mnist.npz", x_tr, y_tr.astype(np.int32), x_te, y_te, list("0123456789"))
    monkeypatch.setenv("DATA_ROOT", str(tmp_path))
    ds = load_dataset("mnist")
    assert ds.x_train.shape == (20, 1, 6, 6)
    assert torch.equal(ds.x_train[:, 0], torch.from_numpy(x_tr))
    assert ds.y_train.dtype == torch.int64
    assert str(tmp_path) in ds.source


@pytest.mark.parametrize(
    "change, message",
    [({"x_train": "float"}, "dtype"), ({"y_train": "out_of_range"}, "labels"),
     ({"classes": "too_few"}, "classes")],
)
def test_invalid_npz_errors_name_the_file(tmp_path, change, message):
    rng = np.random.default_rng(2)
    x_tr, y_tr, x_te, y_te = small_arrays(rng)
    classes = [str(i) for i in range(10)]
    if change.get("x_train") == "float":
        x_tr = x_tr.astype(np.float32)
    if change.get("y_train") == "out_of_range":
        y_tr = y_tr + 5
    if change.get("classes") == "too_few":
        classes = classes[:5]
        y_tr, y_te = y_tr % 5, y_te % 5
    write_npz(tmp_path / "svhn.npz", x_tr, y_tr, x_te, y_te, classes)
    with pytest.raises(ValueError, match=message) as err:
        load_dataset("svhn", data_root=tmp_path)
    assert "svhn.npz" in str(err.value)


# ------------------------------------------------------------------------- torchvision's cache


def _write_idx(path: Path, array: np.ndarray) -> None:
    """MNIST's IDX file format: magic (0, 0, type 0x08 = ubyte, ndim), big-endian dims, data."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_torchvision_cache_is_used_when_no_npz(tmp_path, monkeypatch):
    # A tiny MNIST in torchvision's raw layout: exercises the real torchvision loader offline.
    monkeypatch.delenv("DATA_ROOT", raising=False)
    raw = tmp_path / "tv" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(3)
    x_tr, y_tr, x_te, y_te = small_arrays(rng, size=28, channels=0)
    for prefix, x, y in (("train", x_tr, y_tr), ("t10k", x_te, y_te)):
        _write_idx(raw / f"{prefix}-images-idx3-ubyte", x)
        _write_idx(raw / f"{prefix}-labels-idx1-ubyte", y)
    ds = load_dataset("mnist", data_root=tmp_path / "no_npz_here", cache_dir=tmp_path / "tv")
    assert ds.x_train.shape == (20, 1, 28, 28) and ds.x_test.shape == (8, 1, 28, 28)
    assert torch.equal(ds.x_train[:, 0], torch.from_numpy(x_tr))
    assert torch.equal(ds.y_test, torch.from_numpy(y_te))
    assert ds.source == f"torchvision cache {tmp_path / 'tv'}"
    assert ds.classes[0].startswith("0")
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "tv"))
    assert torch.equal(load_dataset("mnist").x_test, ds.x_test)


def test_missing_dataset_offline_says_what_was_tried_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("DATA_ROOT", raising=False)
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset("cifar100", data_root=tmp_path / "empty", cache_dir=tmp_path / "tv")
    message = str(err.value)
    assert "DATA_ROOT" in message and "download=True" in message
    assert str(tmp_path / "empty" / "cifar100.npz") in message and str(tmp_path / "tv") in message
    assert "digits" in message and "shapes" in message
    assert not (tmp_path / "tv").exists()  # download=False must not touch the cache


def test_missing_dataset_without_data_root_says_it_is_unset(tmp_path, monkeypatch):
    monkeypatch.delenv("DATA_ROOT", raising=False)
    with pytest.raises(DatasetNotFoundError, match="DATA_ROOT: not set"):
        load_dataset("svhn", cache_dir=tmp_path / "tv")


# ------------------------------------------------------------------------- names and options


def test_unknown_name_lists_the_datasets():
    with pytest.raises(ValueError, match="name") as err:
        load_dataset("imagenet")
    for name in DATASETS:
        assert name in str(err.value)


def test_options_other_than_shapes_are_rejected():
    with pytest.raises(ValueError, match="num_classes"):
        load_dataset("digits", num_classes=5)


@pytest.mark.parametrize("kwargs, parameter",
                         [({"channels": 2}, "channels"), ({"image_size": 0}, "image_size"),
                          ({"image_size": 8.0}, "image_size")])
def test_invalid_resize_options_name_the_parameter(kwargs, parameter):
    with pytest.raises(ValueError, match=parameter):
        load_dataset("digits", **kwargs)


def test_image_size_and_channels_resize_and_repeat():
    base = load_dataset("digits")
    ds = load_dataset("digits", image_size=16, channels=3)
    assert ds.x_train.shape == (1497, 3, 16, 16) and ds.x_test.shape == (300, 3, 16, 16)
    assert ds.x_train.dtype == torch.uint8
    # Repetition: the three channels are identical, so are their statistics.
    assert torch.equal(ds.x_train[:, 0], ds.x_train[:, 2])
    assert len(ds.mean) == 3 and ds.mean[0] == ds.mean[2]
    # Bilinear upsampling keeps the average brightness (within rounding and edge effects).
    assert abs(ds.mean[0] - base.mean[0]) < 0.01
    mean, std = direct_stats(ds.x_train)
    np.testing.assert_allclose(ds.mean, mean, atol=1e-9)
    np.testing.assert_allclose(ds.std, std, atol=1e-9)


def test_rgb_to_one_channel_uses_luma(tmp_path):
    x = np.zeros((10, 4, 4, 3), dtype=np.uint8)
    x[..., 0] = 100  # pure red of 100 -> luma 0.299 * 100 = 29.9 -> 30
    write_npz(tmp_path / "cifar10.npz", x, np.arange(10), x, np.arange(10), [str(i) for i in range(10)])
    ds = load_dataset("cifar10", data_root=tmp_path, channels=1)
    assert ds.x_train.shape == (10, 1, 4, 4) and bool((ds.x_train == 30).all())


# ---------------------------------------------------------------------- real shared subsets


def test_real_subsets_from_shared_folder():
    if not SHARED_DATA.is_dir():
        pytest.skip(missing_data(str(SHARED_DATA)))
    cifar = load_dataset("cifar10", data_root=SHARED_DATA)
    assert cifar.x_train.shape == (10000, 3, 32, 32) and cifar.num_classes == 10
    assert torch.equal(torch.bincount(cifar.y_train), torch.full((10,), 1000))
    # CIFAR-10's well-known channel means (about 0.49, 0.48, 0.45) hold for the subset.
    np.testing.assert_allclose(cifar.mean, (0.491, 0.482, 0.447), atol=0.01)
    mnist = load_dataset("mnist", data_root=SHARED_DATA)
    assert mnist.x_train.shape[1:] == (1, 28, 28) and mnist.x_test.shape[1:] == (1, 28, 28)
    assert mnist.classes == tuple("0123456789")


# ------------------------------------------------------------------------ the registry


def _toy_arrays(name, *, data_root, download, cache_dir, image_size):
    """Three classes of 8x8 grey images: a bright band at a class-specific row, plus noise."""
    g = torch.Generator().manual_seed(0)

    def split(n):
        y = torch.arange(n) % 3
        x = torch.randint(0, 60, (n, 1, 8, 8), generator=g)
        for k in range(3):
            x[y == k, :, 2 * k + 1] += 180
        return x.to(torch.uint8), y

    (x_tr, y_tr), (x_te, y_te) = split(240), split(90)
    return x_tr, y_tr, x_te, y_te, ("low", "middle", "high"), "generated toy bands"


def test_a_new_dataset_is_one_registry_entry_and_runs_study_1_end_to_end(tmp_path, monkeypatch):
    from lib.core.data import DATASETS, DatasetInfo, _cached_dataset, data_shape, num_classes
    from lib.run.results import ResultsStore
    from lib.run.sweep import run_sweep
    from lib.studies import margin_factorial as study

    monkeypatch.setitem(DATASETS, "toy", DatasetInfo(_toy_arrays, image_size=8, channels=1, num_classes=3,
                                                     display_name="Toy", crop_padding=1, flip=False))
    assert data_shape("toy", {}) == (8, 1) and num_classes("toy", {}) == 3
    try:
        s = study.resolve(dict(profile="smoke", dataset="toy", margin_modes=["clamp", "subtract"],
                               stabilizers=["detach", "direct"], dose_m0=0.2, device="cpu", force=False))
        configs = study.plan(s)
        assert all((c.dataset, c.dataset_options, c.padding, c.flip) == ("toy", {}, 1, False) for c in configs)
        store = ResultsStore(tmp_path, study.STUDY, "smoke")
        records = run_sweep(store, configs, study.TRAIN, progress=False, **study.sweep_options(s))
        out = study.analyze(study.runs_frame(records), s)
    finally:
        _cached_dataset.cache_clear()
    trajectory = 2 * 2  # layer-0-alone runs: both arms x trajectory seeds, kept out of the factorial's analysis
    assert len(records) == len(configs) == 2 * 2 * 2 + 2 + trajectory  # the cells x seeds, the dose runs
    assert all(r["status"] == "ok" and r["dataset"] == "toy" and r["config"]["dataset"] == "toy" for r in records)
    assert all(0 <= r["metrics"]["top1"] <= 1 for r in records)
    assert out["n_ok"] == len(records) - trajectory and out["n_not_ok"] == 0 and "pooled" in out


def test_the_registry_knows_each_dataset_before_loading_it():
    from lib.core.data import DATASETS, data_shape, num_classes

    for name in ("digits", "shapes"):
        ds = load_dataset(name)
        assert data_shape(name, {}) == (ds.image_size, ds.channels) and num_classes(name, {}) == ds.num_classes
    assert num_classes("shapes", {"num_classes": 7}) == load_dataset("shapes", num_classes=7, n_train=70,
                                                                    n_test=14).num_classes == 7
    assert data_shape("mnist", {"image_size": 32, "channels": 3}) == (32, 3)
    assert len({info.display_name for info in DATASETS.values()}) == len(DATASETS)


def test_a_dataset_is_fetched_exactly_when_it_needs_a_data_root(tmp_path, monkeypatch):
    """DatasetInfo.fetched (study 2's list of real datasets comes from it): offline with an empty data root and
    cache, a fetched dataset is not found; every other one loads (generated or shipped with a package)."""
    monkeypatch.delenv("DATA_ROOT", raising=False)
    for name, info in DATASETS.items():
        options = {"n_train": 20, "n_test": 10} if "n_train" in info.options else {}
        if info.fetched:
            with pytest.raises(DatasetNotFoundError):
                load_dataset(name, data_root=tmp_path / "empty", cache_dir=tmp_path / "tv", **options)
        else:
            loaded = load_dataset(name, data_root=tmp_path / "empty", cache_dir=tmp_path / "tv", **options)
            assert loaded.x_train.numel() > 0
    assert any(info.fetched for info in DATASETS.values()) and not all(info.fetched for info in DATASETS.values())
