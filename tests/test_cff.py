"""Layer-local CFF training: determinism, divergence handling, locality, the probe."""
import math

import pytest
import torch

from lib.cff.model import CFFViT
from lib.cff.training import CFFConfig, cff_step, train_cff
from lib.core.losses import margin_schedule, margin_supcon
from lib.core.params import ParameterError


def _scalars(metrics):
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) and not k.endswith("_s")}


def test_same_seed_gives_identical_metrics_and_two_seeds_differ(tiny_cff):
    a = train_cff(CFFConfig(seed=3, **tiny_cff))
    b = train_cff(CFFConfig(seed=3, **tiny_cff))
    c = train_cff(CFFConfig(seed=4, **tiny_cff))
    assert a["status"] == "ok"
    assert _scalars(a) == _scalars(b)
    assert a["curves"] == b["curves"]
    assert a["curves"]["loss"] != c["curves"]["loss"]


def test_curves_have_one_row_per_epoch_and_layer(tiny_cff):
    m = train_cff(CFFConfig(seed=0, **tiny_cff))
    for key in ("loss", "car", "grad_norm"):
        assert len(m["curves"][key]) == tiny_cff["epochs"]
        assert all(len(row) == tiny_cff["layers"] for row in m["curves"][key])
    assert all(0 <= v <= 1 for row in m["curves"]["car"] for v in row)
    assert 0 <= m["top1"] <= 1 and m["top1"] <= m["top5"] <= 1
    # every anchor's positives: its other view plus the same-class images of both views
    assert m["positive_pair_density"] >= 1


def test_diverged_run_is_recorded_not_dropped(tiny_cff):
    m = train_cff(CFFConfig(**{**tiny_cff, "lr": 1e30}))
    assert m["status"] == "diverged"
    assert math.isnan(m["top1"])
    assert m["epochs_completed"] <= tiny_cff["epochs"]


def test_layer_local_graph_gives_each_layer_only_its_own_gradient():
    torch.manual_seed(0)
    model = CFFViT(channels=3, image_size=8, patch=4, embed_dim=8, heads=2, layers=3)
    outs = model(torch.randn(4, 3, 8, 8), local=True)
    outs[1].sum().backward()
    grads = [any(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters()) for layer in model.layers]
    assert grads == [False, True, False]


@pytest.mark.parametrize("chunk_tokens", [16, 48, 10**6])  # 1 and 3 images (uneven split), whole batch
def test_chunked_step_gives_the_whole_batch_gradients(chunk_tokens):
    """cff_step pushes each layer's loss gradient back chunk by chunk; the reference is the textbook
    layer-local step: one forward of the whole batch with detached layer inputs, the sum of the
    layer losses, one backward."""
    torch.manual_seed(0)
    model = CFFViT(channels=3, image_size=8, patch=2, embed_dim=8, heads=2, layers=3)  # 16 tokens per image
    views, labels = torch.randn(10, 3, 8, 8), torch.tensor([0, 1, 2, 0, 1] * 2)
    margins = margin_schedule(0.4, 0.1, 3)
    kw = dict(mode="clamp", stabilizer="detach", temperature=0.15)
    losses = [margin_supcon(out.mean(dim=1), labels, m, **kw) for out, m in zip(model(views, local=True), margins)]
    torch.stack(losses).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]

    frozen = torch.optim.SGD(model.parameters(), lr=0.0)  # step() leaves the parameters and keeps .grad
    stats = cff_step(model, frozen, views, labels, margins, margin_mode="clamp", stabilizer="detach",
                     temperature=0.15, chunk_tokens=chunk_tokens)
    torch.testing.assert_close(stats[0], torch.stack(losses).detach().double())
    for got, want in zip((p.grad for p in model.parameters()), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,value", [("dataset", "imagenet"), ("margin_mode", "clip"), ("m0", -0.1),
                                        ("stabilizer", "none"), ("layers", 0), ("lr", float("nan")), ("heads", 3),
                                        ("patch", 5), ("aug_level", 5), ("padding", -1), ("flip", 1),
                                        ("dataset_options", [])])
def test_bad_config_names_the_parameter(name, value):
    with pytest.raises(ParameterError, match=name if name != "heads" else "embed_dim"):
        CFFConfig(**{name: value})


def test_unknown_field_is_rejected_naming_the_close_match():
    with pytest.raises(ParameterError, match="embed_dims .did you mean embed_dim"):
        CFFConfig.from_dict({"embed_dims": 64})


def test_padding_and_flip_default_to_the_datasets_registry_entry():
    from lib.core.data import DATASETS

    for name, info in DATASETS.items():
        c = CFFConfig(dataset=name, patch=1)
        assert (c.padding, c.flip) == (info.crop_padding, info.flip)
    assert CFFConfig(dataset="cifar10", padding=0, flip=False).padding == 0  # given values are kept


def test_a_schema_1_record_config_becomes_todays_config():
    """width was E; aug_level was left out at 0. Today's form passes through unchanged."""
    legacy = {"dataset": "shapes", "width": 32, "heads": 2, "seed": 1}
    c = CFFConfig.from_legacy(legacy)
    assert c.embed_dim == 32 and c.aug_level == 0 and c.seed == 1
    assert CFFConfig.from_legacy(c.as_dict()) == c
