"""SimCLR pieces: InfoNCE and FlatNCE, the SimCLR augmentation, ResNet-18, LARS, kNN, SSLConfig and train_ssl."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as TF
from scipy.stats import ks_2samp
from torch.utils.flop_counter import FlopCounterMode

from lib.bench import simclr_step_rate
from lib.core.augment import (
    JITTER_OPS,
    SimCLRParams,
    apply_simclr_params,
    draw_simclr_params,
    normalize,
    random_resized_crop_boxes,
    simclr_augment,
    simclr_views,
)
from lib.core.data import load_dataset
from lib.core.losses import flat_nce, info_nce, pair_logits
from lib.core.optim import LARS, make_optimizer, param_groups, scaled_lr, warmup_cosine
from lib.core.params import ParameterError
from lib.ssl.evaluation import knn_accuracy, knn_predict, linear_probe
from lib.ssl.resnet import Projector, ResNet18, SimCLRNet
from lib.ssl.training import SSLConfig, nce_diagnostics, train_ssl


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def images(b: int, c: int = 3, size: int = 32, seed: int = 0) -> torch.Tensor:
    """Smooth random colour images (a low-resolution pattern upsampled), uint8 [b, c, size, size]:
    crops of smooth images are not dominated by pixel noise, like natural images."""
    coarse = torch.rand(b, c, 4, 4, generator=gen(seed))
    return (torch.nn.functional.interpolate(coarse, size=size, mode="bicubic", align_corners=False)
            .clamp(0, 1).mul(255).round().to(torch.uint8))


# ------------------------------------------------------------------------------ InfoNCE


def info_nce_per_anchor_loops(z1: torch.Tensor, z2: torch.Tensor, tau: float) -> torch.Tensor:
    """NT-Xent written out anchor by anchor and pair by pair (differentiable, no masks, no logsumexp).

    Anchor a of the 2N rows: positive = the same image's other view; denominator = every other row.
    """
    z = torch.cat([z1, z2])
    n2 = len(z)
    unit = [z[i] / torch.sqrt((z[i] * z[i]).sum()) for i in range(n2)]
    losses = []
    for a in range(n2):
        partner = (a + n2 // 2) % n2
        numerator = torch.exp((unit[a] * unit[partner]).sum() / tau)
        denominator = sum(torch.exp((unit[a] * unit[j]).sum() / tau) for j in range(n2) if j != a)
        losses.append(-torch.log(numerator / denominator))
    return torch.stack(losses)


def test_info_nce_matches_the_loop_reference_in_value_and_gradient():
    torch.manual_seed(0)
    z1 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    ours = info_nce(z1, z2, temperature=0.3)
    ref = info_nce_per_anchor_loops(z1, z2, 0.3).mean()
    assert torch.allclose(ours, ref, rtol=1e-12)
    g_ours = torch.autograd.grad(ours, [z1, z2])
    g_ref = torch.autograd.grad(ref, [z1, z2])
    for a, b in zip(g_ours, g_ref):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
        assert a.abs().max() > 1e-3  # a real gradient, not two zeros


@pytest.mark.parametrize("n, tau", [(3, 0.1), (8, 0.5), (16, 1.0)])
def test_info_nce_of_aligned_orthogonal_views_has_its_closed_form(n, tau):
    # z1 = z2 = orthogonal rows (scaled arbitrarily): s_positive = 1 and every negative s = 0, so
    # l = -log(e^{1/tau} / (e^{1/tau} + 2N - 2)) = log(1 + (2N - 2) e^{-1/tau}) for every anchor.
    q, _ = torch.linalg.qr(torch.randn(32, 32, dtype=torch.float64, generator=gen(n)))
    z = q[:n] * torch.linspace(0.5, 3.0, n, dtype=torch.float64)[:, None]
    assert torch.allclose(info_nce(z, z.clone(), tau), torch.tensor(math.log1p((2 * n - 2) * math.exp(-1 / tau)),
                                                                     dtype=torch.float64), rtol=1e-12)


def test_info_nce_with_all_similarities_equal_is_log_2n_minus_1():
    z = torch.ones(6, 3, dtype=torch.float64)
    assert math.isclose(info_nce(z, z, 0.1).item(), math.log(2 * 6 - 1), rel_tol=1e-12)


def test_pair_logits_rejects_bad_inputs():
    z = torch.randn(4, 3)
    with pytest.raises(ValueError, match="shape"):
        info_nce(z, torch.randn(5, 3))
    with pytest.raises(ValueError, match="N >= 2"):
        info_nce(z[:1], z[:1])


# ------------------------------------------------------------------------------ FlatNCE


def test_flat_nce_value_is_one_and_its_gradient_is_not_zero():
    torch.manual_seed(1)
    z1 = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    loss = flat_nce(z1, z2, 0.2)
    assert loss.item() == 1.0
    grads = torch.autograd.grad(loss, [z1, z2])
    assert all(g.abs().max() > 1e-3 for g in grads)


def test_flat_nce_gradient_is_info_nce_gradient_over_one_minus_exp_minus_info_nce_per_anchor():
    torch.manual_seed(2)
    z1 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    tau = 0.25
    reference = info_nce_per_anchor_loops(z1, z2, tau)  # l_i, computed independently of lib.core.losses
    positive, negatives = pair_logits(z1, z2, tau)
    v = torch.logsumexp(negatives - positive[:, None], dim=1)  # FlatNCE's per-anchor term
    for i in range(len(v)):
        grad_flat_i = torch.autograd.grad(torch.exp(v[i] - v[i].detach()), [z1, z2], retain_graph=True)
        grad_info_i = torch.autograd.grad(reference[i], [z1, z2], retain_graph=True)
        scale = 1 - torch.exp(-reference[i].detach())
        for f, g in zip(grad_flat_i, grad_info_i):
            assert torch.allclose(f, g / scale, rtol=1e-9, atol=1e-12)
    # ... and the whole loss: grad FlatNCE = mean_i grad l_i / (1 - e^{-l_i})
    weights = 1 / (1 - torch.exp(-reference.detach()))
    expected = torch.autograd.grad((weights * reference).mean(), [z1, z2], retain_graph=True)
    got = torch.autograd.grad(flat_nce(z1, z2, tau), [z1, z2])
    for a, b in zip(got, expected):
        assert torch.allclose(a, b, rtol=1e-9, atol=1e-12)


def test_nce_diagnostics_match_their_definitions():
    torch.manual_seed(3)
    z1, z2 = torch.randn(7, 4, dtype=torch.float64), torch.randn(7, 4, dtype=torch.float64)
    per_anchor = info_nce_per_anchor_loops(z1, z2, 0.5)
    value, grad_scale, entropy = nce_diagnostics(z1, z2, 0.5).tolist()
    assert math.isclose(value, per_anchor.mean().item(), rel_tol=1e-9)
    assert math.isclose(grad_scale, (1 - torch.exp(-per_anchor)).mean().item(), rel_tol=1e-9)
    assert 0 < entropy < math.log(2 * 7 - 2)
    z = torch.ones(7, 4, dtype=torch.float64)  # equal similarities: uniform over the negatives
    value, _, entropy = nce_diagnostics(z, z, 0.5).tolist()
    assert math.isclose(value, math.log(13), rel_tol=1e-9) and math.isclose(entropy, math.log(12), rel_tol=1e-9)


# ------------------------------------------------------------------- SimCLR augmentation

MEAN, STD = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
OFF = dict(scale=(1.0, 1.0), ratio=(1.0, 1.0), flip=False, jitter=(0, 0, 0, 0), jitter_p=1.0, grayscale_p=0.0)


def test_views_have_the_right_shapes_and_dtype():
    x = images(6)
    v = simclr_views(x, mean=MEAN, std=STD, generator=gen(0))
    assert v.shape == (12, 3, 32, 32) and v.dtype == torch.float32 and torch.isfinite(v).all()
    x1 = images(5, c=1, size=16)
    assert simclr_augment(x1, mean=(0.5,), std=(0.2,), generator=gen(0)).shape == (5, 1, 16, 16)
    p = draw_simclr_params(9, 32, 32, generator=gen(0))
    assert isinstance(p, SimCLRParams)
    assert [t.shape for t in p] == [(9, 4), (9,), (9, 4), (9, 4), (9, 4), (9,)]
    assert [t.dtype for t in p] == [torch.int64, torch.bool, torch.bool, torch.float32, torch.int64, torch.bool]


@pytest.mark.parametrize("channels", [1, 3])
def test_augmentation_with_every_strength_zero_is_normalisation(channels):
    x = images(16, c=channels)
    mean, std = MEAN[:channels], STD[:channels]
    out = simclr_augment(x, mean=mean, std=std, generator=gen(0), **OFF)
    assert torch.allclose(out, normalize(x, mean, std), atol=1e-5)


def test_parameters_stay_in_their_ranges_with_the_right_frequencies():
    b, h, w = 20000, 32, 24
    p = draw_simclr_params(b, h, w, scale=(0.2, 1.0), ratio=(3 / 4, 4 / 3), generator=gen(1))
    top, left, ch, cw = p.crop.T
    assert bool(((top >= 0) & (left >= 0) & (ch >= 1) & (cw >= 1) & (top + ch <= h) & (left + cw <= w)).all())
    # Rounding w and h to whole pixels moves area and aspect off their continuous ranges by at most
    # half a pixel per side.
    area = (ch * cw).double() / (h * w)
    assert area.min() >= 0.2 * (1 - 2 * 0.5 / math.sqrt(0.2 * h * w)) ** 2 and area.max() <= 1
    aspect = cw.double() / ch
    assert aspect.min() >= 3 / 4 * 0.9 and aspect.max() <= 4 / 3 * 1.1
    lows, highs = torch.tensor([0.6, 0.6, 0.6, -0.1]), torch.tensor([1.4, 1.4, 1.4, 0.1])
    assert bool(((p.factors >= lows) & (p.factors <= highs)).all())
    # each quarter of every factor's range is hit: a uniform draw, not a constant
    quarter = ((p.factors - lows) / (highs - lows) * 4).long().clamp(max=3)
    assert all(len(torch.unique(quarter[:, k])) == 4 for k in range(4))
    assert bool((p.order.sort(dim=1).values == torch.arange(4)).all())  # permutations
    assert len(torch.unique(p.order, dim=0)) == 24  # all 4! orders occur
    # Binomial frequencies within 5 standard deviations.
    assert (p.jitter == p.jitter[:, :1]).all()  # SimCLR's one jitter op: all four ops or none
    for flags, prob in ((p.flip, 0.5), (p.jitter[:, 0], 0.8), (p.grayscale, 0.2)):
        assert abs(flags.double().mean().item() - prob) < 5 * math.sqrt(prob * (1 - prob) / b)


def test_crop_boxes_follow_torchvision_random_resized_crop():
    n, size = 4000, 32
    ours = random_resized_crop_boxes(n, size, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), generator=gen(2))
    torch.manual_seed(2)
    img = torch.zeros(3, size, size)
    theirs = torch.tensor([torchvision.transforms.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
                           for _ in range(n)])
    for name, stat in (("area", lambda b: b[:, 2] * b[:, 3]), ("aspect", lambda b: b[:, 3] / b[:, 2]),
                       ("top", lambda b: b[:, 0]), ("left", lambda b: b[:, 1]),
                       ("centre", lambda b: 2 * b[:, 0] + b[:, 2])):
        p = ks_2samp(stat(ours.double()).numpy(), stat(theirs.double()).numpy()).pvalue
        assert p > 1e-3, f"{name}: p = {p}"


def test_fallback_box_is_the_central_crop_clamped_to_the_ratio():
    # No try can fit a 2:1 crop of area 1 into a square: every image falls back to the whole image.
    boxes = random_resized_crop_boxes(50, 10, 10, scale=(1.0, 1.0), ratio=(2.0, 2.0), generator=gen(0))
    assert bool((boxes == torch.tensor([2, 0, 5, 10])).all())  # h = round(10 / 2), centred


def test_given_parameters_give_torchvision_functional_ops_per_image():
    x = images(40, seed=3)
    p = draw_simclr_params(40, 32, 32, jitter_p=0.7, grayscale_p=0.4, generator=gen(3))
    out = apply_simclr_params(x, p, mean=MEAN, std=STD)
    ops = (TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue)
    for i in range(len(x)):
        top, left, h, w = p.crop[i].tolist()
        img = TF.resized_crop(x[i].float() / 255, top, left, h, w, [32, 32],
                              interpolation=T.InterpolationMode.BILINEAR, antialias=False)
        if p.flip[i]:
            img = TF.horizontal_flip(img)
        if p.jitter[i, 0]:
            for op in p.order[i].tolist():
                img = ops[op](img, p.factors[i, op].item())
        if p.grayscale[i]:
            img = TF.rgb_to_grayscale(img, num_output_channels=3)
        ref = TF.normalize(img, MEAN, STD)
        # torchvision's luma weighs red 0.2989, ours 0.299: up to 1e-4 of a pixel per op
        assert torch.allclose(out[i], ref, atol=2e-3), (i, (out[i] - ref).abs().max())
    assert set(JITTER_OPS) == {"brightness", "contrast", "saturation", "hue"}


def test_augmentation_statistics_match_torchvision_v2_per_image():
    x = load_dataset("shapes", image_size=32, n_train=1000, n_test=10, num_classes=10, difficulty=0.1).x_train
    ours = simclr_augment(x, mean=MEAN, std=STD, generator=gen(4))
    steps = [T.RandomResizedCrop(32, scale=(0.08, 1.0)), T.RandomHorizontalFlip(),
             T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), T.RandomGrayscale(0.2)]
    # On float images torchvision computes what we compute; on uint8 images it also truncates to
    # whole pixel values after every jitter op.
    on_float, on_uint8 = T.Compose([*steps, T.Normalize(MEAN, STD)]), T.Compose(
        [*steps, T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])
    torch.manual_seed(4)
    theirs = torch.stack([on_float(img.float() / 255) for img in x])
    theirs_uint8 = torch.stack([on_uint8(img) for img in x])

    def statistics(v):
        pixels = v * torch.tensor(STD).view(1, 3, 1, 1) + torch.tensor(MEAN).view(1, 3, 1, 1)
        spread = (pixels.amax(dim=1) - pixels.amin(dim=1)).mean(dim=(1, 2))  # colourfulness
        return {"mean": pixels.mean(dim=(1, 2, 3)), "contrast": pixels.std(dim=(1, 2, 3)), "spread": spread,
                "left-right": (pixels[..., :16].mean(dim=(1, 2, 3)) - pixels[..., 16:].mean(dim=(1, 2, 3)))}

    a, b, c = statistics(ours), statistics(theirs), statistics(theirs_uint8)
    for name in a:
        p = ks_2samp(a[name].numpy(), b[name].numpy()).pvalue
        assert p > 1e-3, f"{name}: p = {p}"
        # torchvision's truncation lowers pixel values by about half a level per op, no more
        assert abs(a[name].mean() - c[name].mean()) < 0.015, name
    gray_ours, gray_theirs = (a["spread"] < 1e-3).double().mean(), (b["spread"] < 1e-3).double().mean()
    assert abs(gray_ours - gray_theirs) < 5 * math.sqrt(0.2 * 0.8 * 2 / len(x))
    assert abs(gray_ours - 0.2) < 5 * math.sqrt(0.2 * 0.8 / len(x))


def test_same_generator_seed_gives_the_same_views_and_settings_do_not_reshuffle_draws():
    x = images(32)
    kw = dict(mean=MEAN, std=STD)
    assert torch.equal(simclr_views(x, generator=gen(7), **kw), simclr_views(x, generator=gen(7), **kw))
    assert not torch.equal(simclr_views(x, generator=gen(7), **kw), simclr_views(x, generator=gen(8), **kw))
    a = draw_simclr_params(32, 32, 32, generator=gen(9))
    b = draw_simclr_params(32, 32, 32, flip=False, jitter=(0.1, 0, 0.2, 0), grayscale_p=0.5, generator=gen(9))
    assert torch.equal(a.crop, b.crop) and torch.equal(a.order, b.order) and torch.equal(a.jitter, b.jitter)
    assert not b.flip.any()
    v = simclr_views(x, generator=gen(7), **kw)
    assert not torch.allclose(v[:32], v[32:])  # the two views differ


@pytest.mark.parametrize("option, value", [("scale", (0.5, 0.2)), ("scale", (0.0, 1.0)), ("ratio", (1.0,)),
                                           ("jitter", (0.4, 0.4, 0.4, 0.6)), ("jitter", (0.4, -1, 0, 0)),
                                           ("jitter_p", 1.5), ("grayscale_p", -0.1)])
def test_bad_augmentation_options_name_themselves(option, value):
    with pytest.raises(ValueError, match=option):
        simclr_augment(images(2), mean=MEAN, std=STD, generator=gen(0), **{option: value})


# -------------------------------------------------------------------------------- ResNet


def test_resnet18_equals_torchvision_resnet18_with_the_cifar_stem():
    torch.manual_seed(0)
    reference = torchvision.models.resnet18()
    reference.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False)
    reference.maxpool, reference.fc = nn.Identity(), nn.Identity()
    ours = ResNet18(3, width_multiplier=1.0)
    theirs_state, ours_state = reference.state_dict(), ours.state_dict()
    assert [v.shape for v in theirs_state.values()] == [v.shape for v in ours_state.values()]
    ours.load_state_dict(dict(zip(ours_state, theirs_state.values())))  # same layer order
    x = torch.randn(4, 3, 32, 32)
    for mode in (True, False):  # BatchNorm with batch statistics, then with running statistics
        reference.train(mode), ours.train(mode)
        assert torch.allclose(ours(x), reference(x), atol=1e-5)


@pytest.mark.parametrize("width, dim", [(1.0, 512), (0.5, 256), (0.25, 128), (0.125, 64)])
def test_width_scales_every_stage_and_the_feature_dimension(width, dim):
    net = SimCLRNet(3, width, out_dim=32)
    assert net.feature_dim == dim
    assert net.features(torch.randn(2, 3, 16, 16)).shape == (2, dim)
    assert net(torch.randn(2, 3, 16, 16)).shape == (2, 32)
    convs = [m for m in net.backbone.modules() if isinstance(m, nn.Conv2d)]
    assert convs[0].out_channels == dim // 8 and convs[-1].out_channels == dim


def test_projector_is_linear_bn_relu_linear_or_without_bn():
    kinds = [type(m) for m in Projector(16, 32, 8, batch_norm=True).net]
    assert kinds == [nn.Linear, nn.BatchNorm1d, nn.ReLU, nn.Linear]
    assert [type(m) for m in Projector(16, 32, 8).net] == [nn.Linear, nn.ReLU, nn.Linear]


# --------------------------------------------------------------------------------- LARS


def test_lars_step_equals_a_hand_computation():
    w0, b0 = torch.tensor([[3.0, -4.0], [1.0, 2.0]]), torch.tensor([0.5, -1.0])
    w, b = nn.Parameter(w0.clone()), nn.Parameter(b0.clone())
    lr, momentum, wd, trust = 0.5, 0.9, 0.1, 1e-3
    opt = LARS([{"params": [w]}, {"params": [b], "exclude": True, "weight_decay": 0.0}], lr=lr,
               momentum=momentum, weight_decay=wd, trust_coefficient=trust)
    grads = [(torch.tensor([[1.0, 0.0], [2.0, 2.0]]), torch.tensor([1.0, 1.0])),
             (torch.tensor([[0.0, 1.0], [-1.0, 3.0]]), torch.tensor([-2.0, 0.5]))]
    v_w, v_b, w_ref, b_ref = np.zeros((2, 2)), np.zeros(2), w0.numpy().astype(float), b0.numpy().astype(float)
    for gw, gb in grads:
        w.grad, b.grad = gw.clone(), gb.clone()
        opt.step()
        d = gw.numpy() + wd * w_ref
        ratio = trust * np.sqrt((w_ref ** 2).sum()) / np.sqrt((d ** 2).sum())
        v_w = momentum * v_w + lr * ratio * d
        w_ref = w_ref - v_w
        v_b = momentum * v_b + lr * gb.numpy()  # excluded: no decay, no trust ratio
        b_ref = b_ref - v_b
        np.testing.assert_allclose(w.detach().numpy(), w_ref, rtol=1e-6)
        np.testing.assert_allclose(b.detach().numpy(), b_ref, rtol=1e-6)


def test_excluded_parameters_take_plain_sgd_momentum_steps():
    torch.manual_seed(0)
    net = SimCLRNet(3, 0.125, out_dim=8)
    twin = SimCLRNet(3, 0.125, out_dim=8)
    twin.load_state_dict(net.state_dict())
    lars = make_optimizer(net, "lars", lr=0.1, momentum=0.9, weight_decay=1e-2)
    # the twin: LARS on its weights only, torch's SGD with momentum on everything else
    twin_lars = LARS([p for p in twin.parameters() if p.ndim >= 2], lr=0.1, momentum=0.9, weight_decay=1e-2)
    twin_sgd = torch.optim.SGD([p for p in twin.parameters() if p.ndim < 2], lr=0.1, momentum=0.9)
    x = torch.randn(8, 3, 16, 16)
    for _ in range(3):
        for model, optimizers in ((net, [lars]), (twin, [twin_lars, twin_sgd])):
            model.zero_grad()
            model(x).square().mean().backward()
            for opt in optimizers:
                opt.step()
    for (name, p), q in zip(net.named_parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-6), name
    # every bias and BatchNorm parameter is excluded, every weight matrix and kernel is not
    groups = param_groups(net)
    assert all(p.ndim >= 2 for p in groups[0]["params"]) and groups[1]["exclude"]
    bn_params = sum(2 for m in net.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)))
    biases = sum(1 for m in net.modules() if isinstance(m, nn.Linear) and m.bias is not None)
    assert len(groups[1]["params"]) == bn_params + biases
    assert len(param_groups(net, exclude_bias_and_norm=False)) == 1


def test_learning_rate_scaling_and_schedule():
    assert scaled_lr(0.3, 512, "linear") == pytest.approx(0.6)
    assert scaled_lr(0.075, 4096, "sqrt") == pytest.approx(4.8)
    assert scaled_lr(0.3, 64, "none") == 0.3
    total, warm = 100, 10
    m = [warmup_cosine(s, total, warm) for s in range(total)]
    assert m[:warm] == pytest.approx([(s + 1) / warm for s in range(warm)])
    assert m[warm] == 1.0 and all(a > b for a, b in zip(m[warm:], m[warm + 1:]))
    assert m[-1] < 1e-3 and m[warm + 45] == pytest.approx(0.5)
    assert warmup_cosine(0, 5, 0) == 1.0
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_cosine(0, 5, 6)


# ---------------------------------------------------------------------------------- kNN


def clustered_features(n_train: int, n_test: int, classes: int, dim: int, seed: int = 0):
    """(train features, train labels, test features, test labels) around the same class centres."""
    g = gen(seed)
    centres = torch.randn(classes, dim, generator=g)
    labels = torch.randint(0, classes, (n_train + n_test,), generator=g)
    features = centres[labels] + 0.7 * torch.randn(n_train + n_test, dim, generator=g)
    return features[:n_train], labels[:n_train], features[n_train:], labels[n_train:]


def weighted_knn_loops(train_f, train_y, test_f, k, tau, classes):
    """Brute force: for each test point, sort all training points by cosine similarity, take k, vote."""
    out = []
    for x in test_f:
        sims = [(float(x @ t / (x.norm() * t.norm())), int(y)) for t, y in zip(train_f, train_y)]
        sims.sort(key=lambda s: -s[0])
        votes = [0.0] * classes
        for s, y in sims[:k]:
            votes[y] += math.exp(s / tau)
        out.append(int(np.argmax(votes)))
    return torch.tensor(out)


@pytest.mark.parametrize("k", [1, 7, 200])
def test_knn_matches_brute_force_and_scikit_learn(k):
    from sklearn.neighbors import KNeighborsClassifier

    train_f, train_y, test_f, test_y = clustered_features(300, 60, 5, 8)
    ours = knn_predict(train_f, train_y, test_f, k=k, temperature=0.1)
    assert torch.equal(ours, weighted_knn_loops(train_f.double(), train_y, test_f.double(), k, 0.1, 5))
    sk = KNeighborsClassifier(n_neighbors=k, metric="cosine", algorithm="brute",
                              weights=lambda d: np.exp((1 - d) / 0.1))  # cosine distance = 1 - similarity
    sk.fit(train_f.double().numpy(), train_y.numpy())
    assert np.array_equal(ours.numpy(), sk.predict(test_f.double().numpy()))
    acc = knn_accuracy(train_f, train_y, test_f, test_y, k=k, temperature=0.1)
    assert acc == pytest.approx((ours == test_y).float().mean().item())
    assert acc > 0.5  # five clusters, chance is 0.2


def test_knn_caps_k_at_the_bank_size_and_checks_arguments():
    train_f, train_y, test_f, _ = clustered_features(20, 5, 3, 4)
    assert torch.equal(knn_predict(train_f, train_y, test_f, k=500), knn_predict(train_f, train_y, test_f, k=20))
    with pytest.raises(ValueError, match="k="):
        knn_predict(train_f, train_y, test_f, k=0)
    with pytest.raises(ValueError, match="train_labels"):
        knn_predict(train_f, train_y[:5], test_f)


def test_linear_probe_separates_separable_features():
    train_f, train_y, test_f, test_y = clustered_features(400, 200, 4, 16, seed=2)
    probe = linear_probe(train_f, train_y, test_f, test_y, num_classes=4)
    assert probe["probe_top1"] > 0.95
    # a scaled copy of the features gives the same probe: they are standardised first
    scaled = linear_probe(train_f * 100 + 3, train_y, test_f * 100 + 3, test_y, num_classes=4)
    assert scaled["probe_top1"] == pytest.approx(probe["probe_top1"], abs=0.01)
    assert math.isnan(probe["probe_top5"])  # fewer than 5 classes


# ------------------------------------------------------------------------------ training

TINY = dict(dataset="shapes", dataset_options={"num_classes": 4, "difficulty": 0.1, "n_train": 96, "n_test": 64},
            width_multiplier=0.125, projector_dim=16, epochs=2, batch_size=32, warmup_epochs=1, probe_steps=50,
            threads=1)


def simclr_run(**fields) -> dict:
    return train_ssl(SSLConfig(**fields))


@pytest.mark.parametrize("loss", ["infonce", "flatnce"])
def test_train_ssl_runs_a_tiny_simclr_config_with_finite_metrics(loss):
    m = simclr_run(loss=loss, **TINY)
    assert m["status"] == "ok" and m["epochs_completed"] == 2 and m["steps"] == 2 * (96 // 32)
    assert 0 <= m["knn_top1"] <= 1 and 0 <= m["probe_top1"] <= 1
    assert m["info_nce_ceiling"] == pytest.approx(math.log(2 * 32 - 1))
    for key in ("info_nce", "grad_scale", "negative_entropy", "lr"):
        assert len(m["curves"][key]) == 2 and all(math.isfinite(v) for v in m["curves"][key])
    assert all(0 < g < 1 for g in m["curves"]["grad_scale"])
    assert all(0 < h <= math.log(2 * 32 - 2) for h in m["curves"]["negative_entropy"])
    assert m["lr"] == pytest.approx(0.3 * 32 / 256) and m["curves"]["lr"][-1] < m["lr"]  # cosine decay
    assert m["train_s"] > 0 and m["eval_s"] > 0 and m["feature_dim"] == 64


def test_train_ssl_is_deterministic_per_seed():
    a, b, c = (simclr_run(seed=s, **{**TINY, "epochs": 1, "warmup_epochs": 0}) for s in (5, 5, 6))
    assert a["curves"] == b["curves"] and a["knn_top1"] == b["knn_top1"]
    assert a["curves"]["info_nce"] != c["curves"]["info_nce"]


def test_train_ssl_records_divergence():
    m = simclr_run(**{**TINY, "optimizer": "sgd", "lr": 1e30})
    assert m["status"] == "diverged" and math.isnan(m["knn_top1"])


@pytest.mark.parametrize("name, value", [("loss", "nce"), ("optimizer", "rmsprop"), ("lr_scaling", "cube"),
                                         ("width_multiplier", 0.0), ("batch_size", 1), ("warmup_epochs", 3),
                                         ("crop_min_scale", 0.0), ("temperature", -0.1), ("device", "tpu"),
                                         ("projector_bn", 1), ("dataset", "imagenet"), ("knn_k", 0)])
def test_bad_config_names_the_parameter(name, value):
    with pytest.raises(ParameterError, match=name):
        SSLConfig(**{**TINY, name: value})


def test_unknown_parameter_and_a_batch_larger_than_the_data_are_rejected():
    with pytest.raises(ParameterError, match="momentumm"):
        SSLConfig.from_dict({"momentumm": 0.9})
    with pytest.raises(ParameterError, match="batch_size"):
        simclr_run(**{**TINY, "batch_size": 200})


# --------------------------------------------------------------------------------- speed


def test_step_rate_counts_two_views_forward_and_backward():
    r = simclr_step_rate(batch=4, width_multiplier=0.125, repeat=1)
    assert r["images_per_s"] > 0 and 0 < r["data_share"] < 1
    net = SimCLRNet(3, 0.125)
    with FlopCounterMode(display=False) as counter:
        net(torch.randn(8, 3, 32, 32))  # forward of 4 images x 2 views
    forward = counter.get_total_flops() / 4
    # backward costs two forwards (input and weight gradients), less the stem's input gradient
    assert 2.9 * forward < r["gflop_per_image"] * 1e9 <= 3 * forward


def test_keep_freed_memory_serves_large_blocks_from_the_heap():
    """What the project controls, counted by glibc itself (``mallinfo2``) in a fresh process: before
    ``keep_freed_memory`` a 64 MiB tensor is an mmap()ed block (``hblkhd`` grows by its size); after it the
    setting is applied, the same tensor comes from the heap (``uordblks`` grows, no mmap()ed bytes), and freeing it
    keeps the heap (``arena`` is not trimmed). How far the heap then grows over later allocations depends on glibc
    and on the processes beside it (a bound of three blocks over fifteen failed beside two busy processes, issue 50):
    ``python -m lib.bench`` reports it, with the page faults the setting saves. The process runs one thread with a
    fixed hash seed, so that its allocation pattern does not depend on a busy machine or on chance."""
    import os
    import subprocess
    import sys

    code = """
import ctypes, sys, torch
torch.set_num_threads(1); torch.set_num_interop_threads(1)  # one thread: nothing allocates beside the pattern
from lib.ssl.training import keep_freed_memory
try:
    libc = ctypes.CDLL("libc.so.6"); mallinfo2 = libc.mallinfo2
except (OSError, AttributeError):
    sys.exit(3)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                        "fsmblks", "uordblks", "fordblks", "keepcost")]
mallinfo2.restype = Info
size = 64 * 2**20
def allocate():  # (mmap()ed bytes, heap bytes in use, heap size) added while a 64 MiB tensor is held; heap size after
    before = mallinfo2(); x = torch.empty(size // 4); held = mallinfo2(); del x; freed = mallinfo2()
    return held.hblkhd - before.hblkhd, held.uordblks - before.uordblks, held.arena, freed.arena
mapped, used, _, _ = allocate()
print(mapped >= size, used < size)
assert keep_freed_memory()
mapped, used, held, freed = allocate()
print(mapped == 0, used >= size, freed == held)
"""
    one_thread = {**os.environ, **{k: "1" for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
                  "PYTHONHASHSEED": "0"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=one_thread)
    if run.returncode == 3:
        pytest.skip("the C library is not glibc >= 2.33 (no mallinfo2): keep_freed_memory changes nothing there")
    assert run.returncode == 0, run.stderr
    before, after = run.stdout.split("\n")[:2]
    assert before == "True True", "without the setting a 64 MiB block should be mmap()ed"
    assert after == "True True True", "with it the block should come from the heap and stay there when freed"


def test_tiny_models_on_the_cpu_run_nchw_where_onednn_corrupts_the_heap():
    """Below 8 first-stage channels on the CPU, channels-last convolutions are avoided (a oneDNN
    heap overflow on one thread); every other run keeps the layout its config asks for."""
    from lib.ssl.training import activation_layout

    assert activation_layout(SSLConfig(width_multiplier=1 / 16)) == torch.contiguous_format
    assert activation_layout(SSLConfig(width_multiplier=1 / 8)) == torch.channels_last
    assert activation_layout(SSLConfig(width_multiplier=1 / 8, channels_last=False)) == torch.contiguous_format


# ------------------------------------------------------------------------ the loss registry


def test_a_loss_registered_in_one_place_trains_a_smoke_run(monkeypatch):
    from lib.core import losses

    def symmetric_cosine(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
        """-mean_i cos(z1_i, z2_i): the views pulled together, no negatives, no temperature."""
        return -F.cosine_similarity(z1, z2, dim=1).mean()

    monkeypatch.setitem(losses.SSL_LOSSES, "symmetric_cosine", losses.SSLLoss(symmetric_cosine, negatives=False))
    m = train_ssl(SSLConfig(**{**TINY, "epochs": 1, "warmup_epochs": 0}, loss="symmetric_cosine", diagnostics="norms"))
    assert m["status"] == "ok" and m["steps"] == 96 // 32
    for key in ("knn_top1", "probe_top1", "norm_mean_train", "norm_mean_test", "knn_confidence_top1"):
        assert math.isfinite(m[key]), key
    assert -1 <= m["curves"]["loss"][0] <= 1  # a mean cosine, negated
    with pytest.raises(ParameterError, match="diagnostics"):  # no negatives: InfoNCE's diagnostics do not apply
        SSLConfig(loss="symmetric_cosine")


# ------------------------------------------------------------------------- legacy configs


def test_from_legacy_maps_both_old_trainers_configs_and_keeps_todays():
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).parent / "golden" / "metrics_before_issue15.json").read_text())["runs"]
    simclr = SSLConfig.from_legacy(golden["simclr_flatnce"]["config"])
    assert (simclr.method, simclr.loss, simclr.diagnostics) == ("simclr", "flatnce", "nce")
    assert not simclr.recalibrate_bn
    assert simclr.width_multiplier == golden["simclr_flatnce"]["config"]["width"]
    norms = SSLConfig.from_legacy(golden["norms_simclr_default_False"]["config"])
    assert (norms.loss, norms.diagnostics, norms.projector_hidden) == ("decoupled", "norms", 128)
    assert not norms.projector_bn
    old = golden["norms_simsiam_default_False"]["config"]
    siam = SSLConfig.from_legacy({**old, "projector_hidden": 8})
    assert (siam.loss, siam.projector_hidden, siam.predictor_hidden) == ("simsiam", 0, 8)
    standard = {**golden["norms_simclr_default_False"]["config"], "simclr_loss": "standard"}
    assert SSLConfig.from_legacy(standard).loss == "infonce"
    for config in (simclr, norms, siam):  # today's form maps to itself, so a migration can be repeated
        assert SSLConfig.from_legacy(config.as_dict()) == config


def test_every_shipped_study_4_and_5_record_is_in_todays_form_under_its_run_id():
    import json

    from lib import PROJECT_ROOT
    from lib.run.provenance import load_train_function
    from lib.run.results import config_hash

    paths = sorted(PROJECT_ROOT.glob("results/runs/0[45]_*/*/*.json"))
    assert paths
    for path in paths:
        record = json.loads(path.read_text())
        config = SSLConfig.from_dict(record["config"])
        assert config.as_dict() == record["config"] and config_hash(config) == path.stem == record["run_id"]
        assert load_train_function(record["extra"]["train"]) is train_ssl  # its name as written, or an old one
