"""Issue 16: CFF's evaluation protocol, initialisation and normalisation, each against what CFF's code does."""
import math

import pytest
import torch

import lib.cff.training as cff
from lib.cff.model import CFFViT
from lib.cff.training import (
    CFFConfig,
    evaluate_run,
    input_normalization,
    new_model,
    split_indices,
    train_cff,
    train_epochs,
)
from lib.core.data import DATASETS, get_dataset

TINY = dict(dataset="shapes", dataset_options={"n_train": 240, "n_test": 60}, layers=2, embed_dim=16, heads=2,
            batch_size=64, probe_epochs=2, threads=1)


def test_the_encoder_kept_is_that_of_the_epoch_with_the_lowest_last_layer_validation_loss():
    """A planted validation-loss sequence: the last layer is lowest at epoch 3 (0-based 2), while layer 0
    is lowest at the final epoch; only the last layer decides, and keep_best fires at each new minimum."""
    c = CFFConfig(**TINY, epochs=5)
    ds = get_dataset(c.dataset, c.dataset_options)
    gen = torch.Generator().manual_seed(0)
    split = split_indices(ds, c, gen)
    last_layer = iter([2.0, 1.5, 0.7, 0.9, 0.8])
    first_layer = iter([5.0, 4.0, 3.0, 2.0, 1.0])
    planted = []

    def validate(views, labels):  # one value per epoch: the split is smaller than a batch
        assert len(views[0]) == 2 * len(split[1])
        row = [next(first_layer), next(last_layer)]
        planted.append(row)
        return torch.tensor([row], dtype=torch.float64)

    kept = []
    history, status = train_epochs(c, ds, [split], [gen], lambda v, y: torch.zeros(1, 3, 2, dtype=torch.float64),
                                   validate, kept.append, device="cpu", progress=False, desc="")
    assert status == "ok" and history[0].best_epoch == 2
    assert history[0].curves["val_loss"] == [pytest.approx(row) for row in planted]
    assert kept == [0, 0, 0]  # new minima at epochs 0, 1 and 2 (seed index 0 each time), none after


def test_evaluate_run_probes_the_kept_encoder_under_cff_and_the_final_one_under_clean(monkeypatch):
    c = CFFConfig(**TINY, epochs=3)
    ds = get_dataset(c.dataset, c.dataset_options)
    gen = torch.Generator().manual_seed(0)
    train_idx, val_idx = split_indices(ds, c, gen)
    final, kept = new_model(ds, c), new_model(ds, c.replace(seed=1))
    probed = {}

    def spy(model, ds, c, **kw):
        probed[c.eval_protocol] = {k: v.clone() for k, v in model.state_dict().items()}
        return dict(cff.NO_PROBE)

    monkeypatch.setattr(cff, "cff_probe", spy)
    curves = {key: [[0.0, 0.0]] * 3 for key in (*cff.CURVES, "val_loss")}
    for protocol in ("cff", "clean"):
        model = new_model(ds, c)
        metrics = evaluate_run(model, ds, c.replace(eval_protocol=protocol), train_idx=train_idx, val_idx=val_idx,
                               generator=gen, status="ok", history=cff.SeedHistory(curves, [1.0], best_epoch=1),
                               best_state=kept.state_dict(), margins=[0.4, 0.1], train_s=0.0)
        expected, epoch = (kept, 2) if protocol == "cff" else (final, 3)
        assert metrics["selected_epoch"] == epoch
        assert all(torch.equal(probed[protocol][k], v) for k, v in expected.state_dict().items())


@pytest.mark.parametrize("protocol, augmented", [("cff", True), ("clean", False)])
def test_the_probe_sees_augmented_views_under_cff_and_fixed_images_under_clean(monkeypatch, protocol, augmented):
    c = CFFConfig(**TINY, epochs=1, eval_protocol=protocol)
    ds = get_dataset(c.dataset, c.dataset_options)
    gen = torch.Generator().manual_seed(0)
    train_idx, val_idx = split_indices(ds, c, gen)
    seen = []
    real = cff.augmented_view
    monkeypatch.setattr(cff, "augmented_view", lambda x, *a: seen.append(len(x)) or real(x, *a))
    cff.cff_probe(new_model(ds, c), ds, c, train_idx=train_idx, val_idx=val_idx, generator=gen)
    if augmented:  # every probe epoch: each training image once, in batches, and the validation split once
        assert sum(seen) == c.probe_epochs * (len(train_idx) + len(val_idx))
    else:
        assert seen == []


def test_cff_protocol_records_the_validation_curve_and_selects_its_minimum_end_to_end():
    m = train_cff(CFFConfig(**TINY, epochs=4))
    last = [row[-1] for row in m["curves"]["val_loss"]]
    assert len(m["curves"]["val_loss"]) == 4 and all(len(row) == 2 for row in m["curves"]["val_loss"])
    assert m["selected_epoch"] == 1 + min(range(4), key=last.__getitem__)
    assert math.isfinite(m["top1"])


def test_validation_draws_leave_the_training_stream_as_it_was():
    """The validation views come from their own generator: the training curves of a run do not depend on it."""
    c = CFFConfig(**TINY, epochs=2, eval_protocol="clean")
    with_val = train_cff(c)
    torch.manual_seed(0)
    original = cff.validation_generator
    try:
        cff.validation_generator = lambda seed: torch.Generator().manual_seed(12345)  # other validation views
        other_val = train_cff(c)
    finally:
        cff.validation_generator = original
    assert with_val["curves"]["loss"] == other_val["curves"]["loss"]
    assert with_val["curves"]["val_loss"] != other_val["curves"]["val_loss"]


def test_cff_init_has_the_statistics_of_cffs_code():
    """Positional embedding torch.randn (std 1); attention as nn.MultiheadAttention: zero biases, a
    Xavier-uniform [3E, E] in-projection (bound sqrt(6 / (E + 3E)))."""
    torch.manual_seed(0)
    e = 128
    model = CFFViT(channels=3, image_size=32, patch=4, embed_dim=e, heads=4, layers=2, init="cff")
    position = model.layers[0][0].position
    assert abs(position.std().item() - 1.0) < 0.03 and abs(position.mean().item()) < 0.03
    reference = torch.nn.MultiheadAttention(e, 4, batch_first=True)
    for block in (model.layers[0][1], model.layers[1]):
        assert torch.count_nonzero(block.qkv.bias) == 0 and torch.count_nonzero(block.proj.bias) == 0
        bound = math.sqrt(6 / (e + 3 * e))
        assert block.qkv.weight.abs().max() <= bound and block.qkv.weight.abs().max() > 0.95 * bound
        # the same distribution as nn.MultiheadAttention's in-projection (variance bound^2 / 3)
        assert abs(block.qkv.weight.var().item() / reference.in_proj_weight.var().item() - 1) < 0.05
    ours = CFFViT(channels=3, image_size=32, patch=4, embed_dim=e, heads=4, layers=1, init="trunc_normal")
    assert ours.layers[0][0].position.std().item() < 0.03 and torch.count_nonzero(ours.layers[0][1].qkv.bias) > 0


def test_fixed_normalisation_uses_cffs_cifar_constants_and_subset_the_loaded_statistics():
    class Loaded:  # what input_normalization reads of a loaded dataset
        name, channels, mean, std = "cifar10", 3, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)

    c = CFFConfig(**{**TINY, "dataset": "cifar10", "dataset_options": {}})
    assert input_normalization(Loaded, c) == ((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))
    assert input_normalization(Loaded, c.replace(normalization="subset")) == (Loaded.mean, Loaded.std)
    assert DATASETS["cifar100"].norm_mean == DATASETS["cifar10"].norm_mean  # CFF's code uses CIFAR-10's for both


def test_a_record_made_before_issue_16_keeps_its_settings():
    old = CFFConfig(**TINY).as_dict()
    for name in cff.LEGACY_SETTINGS:
        del old[name]
    assert {k: getattr(CFFConfig.from_legacy(old), k) for k in cff.LEGACY_SETTINGS} == cff.LEGACY_SETTINGS
    assert CFFConfig.from_legacy(CFFConfig(**TINY).as_dict()) == CFFConfig(**TINY)  # today's form unchanged
