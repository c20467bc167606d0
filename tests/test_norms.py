"""Study 4's library (the interventions, SimSiam's network and loss, imbalanced subsets, norm
diagnostics, the simulations, and train_ssl with study 4's settings): each test checks a property from
the paper or a definition, against an independent computation."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import mannwhitneyu
from sklearn.metrics import roc_auc_score

from lib.core.data import imbalance_base, imbalanced_class_sizes, imbalanced_indices
from lib.core.losses import decoupled_cross_view_nce, info_nce, negative_cosine, simsiam_loss
from lib.core.optim import warmup_cosine
from lib.core.params import ParameterError
from lib.core.stats import auroc, auroc_test, loglog_slope, rank_correlation
from lib.ssl.evaluation import class_mean_norms, knn_correct, norm_buckets, recalibrate_batchnorm
from lib.ssl.interventions import GradScale, cut_init, grad_scale
from lib.ssl.resnet import SimCLRNet, SimSiamNet
from lib.ssl.simulations import latent_class_simulation, sphere_convergence
from lib.ssl.training import SSLConfig, build_model, build_optimizer, train_epochs, train_ssl
from lib.studies.embedding_norms import AUTHORS_SETTINGS, METHOD_SETTINGS

DT = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def study4_config(method: str = "simclr", **fields) -> SSLConfig:
    """A run config with study 4's settings for ``method``, and ``fields``."""
    return SSLConfig(**{**AUTHORS_SETTINGS, **METHOD_SETTINGS[method], "method": method, **fields})


# ------------------------------------------------------------------------------ GradScale


def test_grad_scale_forward_is_the_identity():
    z = torch.randn(7, 5, dtype=DT, generator=gen(0), requires_grad=True)
    for power in (0.0, 1.0, 2.0, -1.0):
        y = grad_scale(z, power)
        assert torch.equal(y, z) and y.shape == z.shape and y.requires_grad


@pytest.mark.parametrize("power", [0, 1, 2])
def test_grad_scale_backward_is_the_incoming_gradient_times_the_row_norm_to_the_power(power):
    # Downstream of GradScale a non-linear loss; its gradient at y = z (the incoming gradient) comes
    # from plain autograd on the same expression without GradScale, then times ||z_i||^p row-wise.
    z = torch.randn(6, 4, dtype=DT, generator=gen(power), requires_grad=True) * 3
    target = torch.randn(6, 4, dtype=DT, generator=gen(10 + power))

    def loss(y):
        return (F.normalize(y, dim=1) * target).sum() + (y ** 3).sum() / 10

    (scaled,) = torch.autograd.grad(loss(GradScale.apply(z, power)), z)
    (incoming,) = torch.autograd.grad(loss(z), z)
    norms = torch.sqrt((z.detach() ** 2).sum(dim=1, keepdim=True))
    assert torch.allclose(scaled, incoming * norms ** power, rtol=1e-12, atol=1e-14)
    assert incoming.abs().max() > 1e-3
    # ... and against an explicit expression whose autograd gradient is that: sum_i ||z_i||^p <w_i, z_i>
    # with the norm held constant, w = the incoming gradient.
    (explicit,) = torch.autograd.grad((norms ** power * incoming.detach() * z).sum(), z)
    assert torch.allclose(scaled, explicit, rtol=1e-12, atol=1e-14)


def test_grad_scale_with_power_one_makes_a_cosine_gradient_independent_of_the_norm():
    # d cos / dz ~ 1/||z||; times ||z|| (p = 1) the gradient no longer depends on how long z is.
    z = torch.randn(5, 8, dtype=DT, generator=gen(3))
    target = torch.randn(5, 8, dtype=DT, generator=gen(4))
    grads = []
    for scale in (0.1, 1.0, 30.0):
        x = (z * scale).requires_grad_()
        grads.append(torch.autograd.grad(negative_cosine(GradScale.apply(x, 1.0), target), x)[0])
    for g in grads[1:]:
        assert torch.allclose(g, grads[0], rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------------------------- cut_init


@pytest.mark.parametrize("c", [3.0, 9.0, 0.5])
def test_cut_init_divides_every_parameter_by_c_and_changes_nothing_else(c):
    torch.manual_seed(0)
    model = SimSiamNet(3, 1 / 16, dim=32)
    model(torch.randn(4, 3, 8, 8))  # a training-mode forward: the BatchNorm buffers are no longer their defaults
    params_before = {name: p.detach().clone() for name, p in model.named_parameters()}
    buffers_before = {name: b.clone() for name, b in model.named_buffers()}
    ids = {name: id(p) for name, p in model.named_parameters()}
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    assert cut_init(model, c) is model
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), params_before[name] / c), name
        assert id(p) == ids[name] and p.requires_grad == flags[name]
    assert len(buffers_before) > 0
    for name, b in model.named_buffers():
        assert torch.equal(b, buffers_before[name]), f"buffer {name} changed"
    assert model.training


def test_cut_init_rejects_bad_divisors():
    for c in (0, -3.0, math.inf, True):
        with pytest.raises(ValueError, match="c="):
            cut_init(torch.nn.Linear(2, 2), c)


# ---------------------------------------------------------------- cosine losses and the norm

COSINE_LOSSES = {
    "negative_cosine": lambda z, other: negative_cosine(z, other),
    "simsiam": lambda z, other: simsiam_loss(z, other.flip(0), other, z.flip(0)),
    "info_nce": lambda z, other: info_nce(z, other, 0.5),
    "decoupled": lambda z, other: decoupled_cross_view_nce(z, other, 0.5),
}


@pytest.mark.parametrize("name", COSINE_LOSSES)
@pytest.mark.parametrize("seed", range(3))
def test_the_gradient_of_a_cosine_loss_is_orthogonal_to_z_and_a_step_never_shrinks_the_norm(name, seed):
    z = (torch.randn(8, 6, dtype=DT, generator=gen(seed)) * torch.rand(8, 1, dtype=DT, generator=gen(seed + 50)) * 5
         ).requires_grad_()
    other = torch.randn(8, 6, dtype=DT, generator=gen(seed + 100))
    (g,) = torch.autograd.grad(COSINE_LOSSES[name](z, other), z)
    z = z.detach()
    norms, grad_norms = z.norm(dim=1), g.norm(dim=1)
    assert grad_norms.max() > 1e-4
    assert ((z * g).sum(dim=1).abs() <= 1e-12 * norms * grad_norms.clamp_min(1e-300)).all()
    for lr in (1e-3, 1.0, 100.0):
        stepped = (z - lr * g).norm(dim=1)
        assert (stepped >= norms * (1 - 1e-14)).all()
        # Pythagoras: ||z - lr g||^2 = ||z||^2 + lr^2 ||g||^2
        assert torch.allclose(stepped ** 2, norms ** 2 + lr ** 2 * grad_norms ** 2, rtol=1e-12)


def test_sphere_simulation_converges_as_rho_squared_and_never_shrinks_a_norm():
    out = sphere_convergence([0.5, 1.0, 2.0, 4.0], pairs=50, lr=1.0)
    assert (out["steps"] > 0).all() and (np.diff(out["steps"]) > 0).all()
    slope, stderr = loglog_slope(out["radii"], out["steps"])
    assert abs(slope - 2) < 0.1 and stderr < 0.1
    assert (out["min_norm_change"] >= 0).all()
    assert (out["max_cos_grad"] < 1e-12).all()
    for rho, history in zip(out["radii"], out["mean_norm"]):
        assert history[0] == pytest.approx(rho, rel=1e-12) and (np.diff(history) >= 0).all()


def test_sphere_simulation_steps_depend_on_lr_over_pairs():
    # The mean over pairs puts 1/pairs into every point's gradient, so lr/pairs sets the dynamics.
    a = sphere_convergence([1.0, 2.0], pairs=40, lr=0.8, seed=1)["steps"]
    b = sphere_convergence([1.0, 2.0], pairs=80, lr=1.6, seed=1)["steps"]
    assert np.abs(a - b).max() <= 0.05 * a.max()


def test_a_recorded_sphere_run_keeps_what_the_tables_read_of_the_whole_history():
    """simulate_sphere (one radius, as recorded) against sphere_convergence's full history: the start, the
    end, the mean growth per step and the steps exactly; its curve is the history at the steps it names,
    the first and the last among them, at most CURVE_POINTS."""
    from lib.ssl.simulations import CURVE_POINTS, SphereConfig, simulate_sphere

    full = sphere_convergence([2.0], pairs=30, lr=1.0, seed=3)
    history = full["mean_norm"][0]
    run = simulate_sphere(SphereConfig(rho=2.0, pairs=30, lr=1.0, seed=3))
    assert run["steps"] == full["steps"][0] == len(history) - 1 > CURVE_POINTS
    assert run["norm_start"] == history[0] and run["norm_end"] == history[-1]
    assert run["norm_growth_per_step"] == pytest.approx((history[-1] - history[0]) / run["steps"], rel=1e-12)
    assert run["min_norm_change"] == full["min_norm_change"][0] and run["max_cos_grad"] == full["max_cos_grad"][0]
    steps = run["curve_steps"]
    assert steps[0] == 0 and steps[-1] == run["steps"] and len(steps) == CURVE_POINTS and np.all(np.diff(steps) > 0)
    assert run["mean_norm_curve"] == [history[i] for i in steps]


def test_latent_class_runs_are_one_config_per_seed_and_name_the_same_run_for_1_and_1_0():
    from lib.core.config import as_dict
    from lib.core.params import ParameterError
    from lib.run.results import config_hash
    from lib.ssl.simulations import LatentClassConfig, simulate_latent_classes

    ints, floats = LatentClassConfig(class_weights=(1, 2, 4)), LatentClassConfig(class_weights=[1.0, 2.0, 4.0])
    assert ints == floats and config_hash(ints) == config_hash(floats)
    assert LatentClassConfig.from_dict(as_dict(ints)) == ints  # a record builds the same config back
    with pytest.raises(ParameterError, match="class_weights"):
        LatentClassConfig(class_weights=(1, 0))
    with pytest.raises(ValueError, match="only in seed"):
        simulate_latent_classes([ints, ints.replace(epochs=3)])
    # the seeds side by side give what latent_class_simulation gives them (the function the tests above check)
    configs = [LatentClassConfig(class_weights=(1, 2, 4), samples=140, epochs=2, seed=seed) for seed in (0, 1)]
    runs = simulate_latent_classes(configs)
    direct = latent_class_simulation((1, 2, 4), samples=140, epochs=2, seeds=[0, 1])
    for run, expected in zip(runs, direct):
        assert run["class_norm_history"] == np.asarray(expected["class_norm_history"]).tolist()
        assert run["class_counts"] == list(expected["class_counts"]) and run["status"] == "ok"


# ------------------------------------------------------------------------- the new losses


def test_decoupled_cross_view_nce_matches_its_loop_definition():
    z1 = torch.randn(5, 4, dtype=DT, generator=gen(0), requires_grad=True)
    z2 = torch.randn(5, 4, dtype=DT, generator=gen(1), requires_grad=True)
    tau = 0.5
    terms = []
    for i in range(5):
        u = z1[i] / z1[i].norm()
        sims = [(u * z2[j] / z2[j].norm()).sum() / tau for j in range(5)]
        terms.append(-sims[i] + torch.log(sum(torch.exp(s) for j, s in enumerate(sims) if j != i)))
    reference = torch.stack(terms).mean()
    ours = decoupled_cross_view_nce(z1, z2, tau)
    assert torch.allclose(ours, reference, rtol=1e-12)
    for a, b in zip(torch.autograd.grad(ours, [z1, z2]), torch.autograd.grad(reference, [z1, z2])):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-13) and a.abs().max() > 1e-4


def test_decoupled_loss_of_aligned_views_with_orthogonal_negatives_is_log_n_minus_1_minus_1_over_tau():
    q, _ = torch.linalg.qr(torch.randn(16, 16, dtype=DT, generator=gen(2)))
    z = q[:6] * 3
    assert decoupled_cross_view_nce(z, z.clone(), 0.25).item() == pytest.approx(math.log(5) - 4, rel=1e-12)


def test_simsiam_loss_is_minus_one_when_predictions_align_and_never_reaches_the_targets():
    z1 = torch.randn(6, 5, dtype=DT, generator=gen(3), requires_grad=True)
    z2 = torch.randn(6, 5, dtype=DT, generator=gen(4), requires_grad=True)
    p1 = (z2.detach() * 2).requires_grad_()
    p2 = (z1.detach() * 0.5).requires_grad_()
    loss = simsiam_loss(p1, p2, z1, z2)
    assert loss.item() == pytest.approx(-1.0, abs=1e-12)
    g_p1, g_z1, g_z2 = torch.autograd.grad(simsiam_loss(p1 + 1, p2, z1, z2), [p1, z1, z2], allow_unused=True)
    assert g_p1.abs().max() > 1e-4
    assert g_z1 is None and g_z2 is None  # stop-gradient: the targets get nothing


# ---------------------------------------------------------------------------- imbalance


def test_imbalanced_sizes_match_the_closed_forms():
    # floor(500 * 1.03365^-i) = (500 * 100000^i) // 103365^i and floor(5000 * 1.5^-i) = (5000 * 2^i) // 3^i,
    # exactly, in integers.
    cifar100 = imbalanced_class_sizes([500] * 100, 1.03365)
    assert cifar100 == [(500 * 100000 ** i) // 103365 ** i for i in range(100)]
    assert sum(cifar100) == 14_750
    cifar10 = imbalanced_class_sizes([5000] * 10, 1.5)
    assert cifar10 == [(5000 * 2 ** i) // 3 ** i for i in range(10)]
    assert cifar10[0] == 5000 and cifar10[-1] == 130
    # The same rule on whatever subset sizes the data has, e.g. the offline 1000 per class:
    assert imbalanced_class_sizes([1000] * 10, 1.5) == [(1000 * 2 ** i) // 3 ** i for i in range(10)]
    assert imbalanced_class_sizes([7, 9, 0], 2.0) == [7, 4, 0]


def test_imbalance_base_keeps_the_published_bases_and_the_cifar10_ratio_elsewhere():
    assert imbalance_base(10) == 1.5 and imbalance_base(100) == 1.03365
    for k in (4, 20, 50):
        assert imbalance_base(k) ** (k - 1) == pytest.approx(1.5 ** 9, rel=1e-12)


def test_imbalanced_indices_keep_the_first_images_of_each_class_in_dataset_order():
    labels = torch.randint(0, 4, (400,), generator=gen(5))
    keep = imbalanced_indices(labels, 4, 1.5)
    assert (keep[1:] > keep[:-1]).all()
    available = [int((labels == k).sum()) for k in range(4)]
    expected = [math.floor(n / 1.5 ** k) for k, n in enumerate(available)]
    for k in range(4):
        members = torch.nonzero(labels == k).flatten()
        kept = keep[labels[keep] == k]
        assert torch.equal(kept, members[:expected[k]])


def test_imbalanced_sizes_reject_bad_inputs():
    with pytest.raises(ValueError, match="base"):
        imbalanced_class_sizes([10], 0.5)
    with pytest.raises(ValueError, match="class_sizes"):
        imbalanced_class_sizes([10, -1], 1.5)


# --------------------------------------------------------------------------- diagnostics


@pytest.mark.parametrize("seed", range(4))
def test_auroc_matches_scikit_learn_with_and_without_ties(seed):
    rng = np.random.default_rng(seed)
    inside, outside = rng.normal(0.4, 1, 300), rng.normal(0, 1, 200)
    if seed % 2:
        inside, outside = np.round(inside, 1), np.round(outside, 1)  # many ties
    labels = np.r_[np.ones(len(inside)), np.zeros(len(outside))]
    expected = roc_auc_score(labels, np.r_[inside, outside])
    assert auroc(inside, outside) == pytest.approx(expected, abs=1e-12)
    value, p = auroc_test(inside, outside)
    assert value == pytest.approx(expected, abs=1e-12)
    assert p == pytest.approx(mannwhitneyu(inside, outside, alternative="two-sided").pvalue)


def test_auroc_extremes_and_bad_input():
    assert auroc([3, 4, 5], [0, 1, 2]) == 1.0 and auroc([0, 1], [2, 3]) == 0.0 and auroc([1, 1], [1]) == 0.5
    with pytest.raises(ValueError):
        auroc([], [1.0])


@pytest.mark.parametrize("exclude_self", [False, True])
def test_knn_correct_matches_a_brute_force_majority_vote(exclude_self):
    bank = torch.randn(60, 5, generator=gen(6))
    bank_labels = torch.randint(0, 3, (60,), generator=gen(7))
    queries, query_labels = (bank, bank_labels) if exclude_self else (torch.randn(25, 5, generator=gen(8)),
                                                                      torch.randint(0, 3, (25,), generator=gen(9)))
    k = 5
    got = knn_correct(bank, bank_labels, queries, query_labels, k=k, exclude_self=exclude_self, chunk=7)
    for i in range(len(queries)):
        sims = [(F.cosine_similarity(queries[i], bank[j], dim=0).item(), j) for j in range(len(bank))
                if not (exclude_self and j == i)]
        nearest = [j for _, j in sorted(sims, reverse=True)[:k]]
        votes = np.bincount(bank_labels[nearest].numpy(), minlength=3)
        assert bool(got[i]) == (int(np.argmax(votes)) == int(query_labels[i]))


def test_norm_buckets_count_and_average_per_bucket():
    rng = np.random.default_rng(0)
    norms, correct = rng.uniform(2, 7, 500), rng.random(500) < 0.6
    out = norm_buckets(norms, correct, buckets=20)
    assert out["count"].sum() == 500
    u = (norms - norms.min()) / (norms.max() - norms.min())
    for b in range(20):
        inside = (u >= b / 20) & ((u < (b + 1) / 20) | (b == 19))
        assert out["count"][b] == inside.sum()
        if inside.any():
            assert out["accuracy"][b] == pytest.approx(correct[inside].mean())


def test_class_mean_norms_and_rank_correlation():
    means, counts = class_mean_norms([1.0, 3.0, 5.0, 2.0], [0, 0, 2, 2], 4)
    assert counts.tolist() == [2, 0, 2, 0] and means[0] == 2.0 and means[2] == 3.5 and np.isnan(means[1])
    rho, p = rank_correlation([1, 2, 3, 4, 5], [2, 4, 5, 9, 10])
    assert rho == pytest.approx(1.0) and p < 0.05
    assert np.isnan(rank_correlation([1, 2, 3], [1, 1, 1])[0])


def test_latent_simulation_keeps_the_class_frequencies_and_records_every_class():
    (ours,) = latent_class_simulation((1, 2, 4), simulation="ours", samples=140, epochs=2, seeds=[0])
    assert ours["class_counts"].tolist() == [20, 40, 80]  # rounded shares
    assert ours["class_norm_history"].shape == (3, 3) and np.isfinite(ours["class_norm_history"]).all()
    authors = latent_class_simulation((1, 2, 4), samples=700, epochs=2, seeds=[0, 1])
    for run in authors:  # multinomial draws: N points in all, in about the weights' shares
        assert run["class_counts"].sum() == 700 and run["class_norm_history"].shape == (3, 3)
        assert np.abs(run["class_counts"] / 700 - np.array([1, 2, 4]) / 7).max() < 0.1
    assert authors[0]["class_counts"].tolist() != authors[1]["class_counts"].tolist()


# ------------------------------------------------------------------------------ training


def test_simsiam_net_shapes_and_the_predictor_bottleneck():
    model = SimSiamNet(3, 1 / 16, dim=24)
    z, p = model(torch.randn(4, 3, 16, 16))
    assert z.shape == p.shape == (4, 24)
    assert model.predictor[0].out_features == 6  # D / 4


def test_train_epochs_schedules_every_group_but_the_fixed_ones_and_drops_the_last_batch():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "fixed_lr": True}], lr=0.5)
    seen = []

    def step(views):
        seen.append((len(views), optimizer.param_groups[0]["lr"], optimizer.param_groups[1]["lr"]))
        return torch.zeros(1, dtype=DT)

    x = torch.randint(0, 255, (25, 3, 8, 8), dtype=torch.uint8)
    status, curves, steps = train_epochs(step, optimizer, x, epochs=2, batch_size=10, lr=0.5, warmup_epochs=1,
                                         augmentation=dict(mean=(0.5,) * 3, std=(0.2,) * 3, generator=gen(0)),
                                         generator=gen(0), diagnostics=("zero",))
    assert status == "ok" and steps == 4 and len(curves["zero"]) == 2
    assert [s[0] for s in seen] == [20] * 4  # two views of 10 images; the 5 left over are dropped
    assert [s[1] for s in seen] == [0.5 * warmup_cosine(t, 4, 2) for t in range(4)]
    assert all(s[2] == 0.5 for s in seen)


def test_train_epochs_stops_a_diverged_run():
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    x = torch.zeros(8, 3, 8, 8, dtype=torch.uint8)
    status, curves, steps = train_epochs(lambda views: None, optimizer, x, epochs=3, batch_size=4, lr=0.1,
                                         warmup_epochs=0, augmentation=dict(mean=(0.5,) * 3, std=(0.2,) * 3,
                                                                            generator=gen(0)),
                                         generator=gen(0), diagnostics=("loss",))
    assert status == "diverged" and steps == 0 and curves["loss"] == []


def test_simsiam_optimizer_keeps_the_predictor_at_a_fixed_rate():
    c = study4_config(method="simsiam", projector_dim=16, width_multiplier=1 / 16)
    model = SimSiamNet(3, 1 / 16, dim=16)
    optimizer = build_optimizer(model, c, lr=0.2)
    fixed = [p for g in optimizer.param_groups if g.get("fixed_lr") for p in g["params"]]
    assert {id(p) for p in fixed} == {id(p) for p in model.predictor.parameters()}
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(model.parameters()))


TINY = dict(dataset="shapes", dataset_options={"num_classes": 4, "n_train": 128, "n_test": 64, "image_size": 16},
            width_multiplier=1 / 16, epochs=2, batch_size=32, warmup_epochs=0.5, probe_steps=20, knn_k=10, threads=1,
            ood=[{"dataset": "shapes",
                  "dataset_options": {"num_classes": 4, "n_train": 4, "n_test": 64, "image_size": 16, "seed": 3}}])


@pytest.mark.parametrize("extra", [dict(), dict(method="simsiam", projector_dim=32, cut=9.0, grad_scale_power=1.0),
                                   dict(loss="infonce", cut=3.0, imbalance_base=1.5)])
def test_train_ssl_runs_every_study_4_variant_and_reports_its_diagnostics(extra):
    m = train_ssl(study4_config(**TINY, **extra))
    assert m["status"] == "ok"
    n_images = 128 if not extra.get("imbalance_base") else sum(imbalanced_class_sizes([32] * 4, 1.5))
    assert m["train_images"] == n_images and m["steps"] == 2 * (n_images // 32)
    assert len(m["norm_per_step"]) == m["steps"] and all(v > 0 for v in m["norm_per_step"])
    assert 0 <= m["knn_top1"] <= 1 and 0 <= m["knn_confidence_top1"] <= 1
    assert 0 <= m["auroc_shapes_num_classes4_seed3"] <= 1
    assert sum(m["buckets"]["count"]) == 64 and len(m["stored"]["test"]) == 64
    assert m["class_counts"] == (imbalanced_class_sizes([32] * 4, 1.5) if extra.get("imbalance_base") else [32] * 4)


def test_a_bad_study_4_config_names_the_bad_parameter():
    with pytest.raises(ParameterError, match="method"):
        SSLConfig(method="byol")
    for name, value in (("cut", 0.0), ("imbalance_base", 0.5), ("loss", "ntx"),
                        ("ood", [{"dataset": "imagenet"}]), ("batch_size", 1), ("diagnostics", "all")):
        with pytest.raises(ParameterError, match=name):
            study4_config(**{name: value})
    with pytest.raises(ParameterError, match="loss"):  # SimSiam's network needs a loss taking predictions
        study4_config("simsiam", loss="decoupled")
    with pytest.raises(ParameterError, match="projector_hidden"):  # SimSiam's projector is projector_dim wide
        study4_config("simsiam", projector_hidden=64)
    with pytest.raises(ParameterError, match="diagnostics"):  # InfoNCE's diagnostics need negatives
        study4_config("simsiam", diagnostics="nce")
    with pytest.raises(ParameterError, match="ood"):  # unseen sets are scored by the norm diagnostics
        SSLConfig(ood=[{"dataset": "digits"}])


def test_simclr_net_is_the_authors_plain_projector_in_study_4():
    # [code]: SimCLR's projector Linear(d, 128)-ReLU-Linear(128, 128), no BatchNorm
    model = build_model(study4_config(width_multiplier=1 / 16), 3)
    assert isinstance(model, SimCLRNet)
    assert not any(isinstance(m, torch.nn.BatchNorm1d) for m in model.projector.modules())
    assert model.projector.net[0].out_features == 128


def test_recalibrate_batchnorm_sets_the_exact_average_of_the_batch_statistics():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, momentum=0.3))
    model.eval()
    batches = [torch.randn(16, 3, generator=gen(1)), torch.randn(16, 3, generator=gen(2)) * 3 + 1]
    recalibrate_batchnorm(model, batches)
    with torch.no_grad():
        hidden = [model[0](b) for b in batches]
    bn = model[1]
    assert torch.allclose(bn.running_mean, torch.stack([h.mean(0) for h in hidden]).mean(0), atol=1e-6)
    assert torch.allclose(bn.running_var, torch.stack([h.var(0, unbiased=True) for h in hidden]).mean(0), rtol=1e-5)
    assert bn.momentum == 0.3 and not model.training  # momentum and mode restored


def test_intervention_table_keeps_a_row_whose_every_run_diverged():
    from lib.studies.embedding_norms import intervention_table

    def run(intervention, status, seed, knn):
        return dict(status=status, method="simclr", data="balanced", intervention=intervention, seed=seed,
                    knn_top1=knn, probe_top1=knn, embedding_norm_first_epoch=1.0, embedding_norm_last_epoch=2.0,
                    norm_mean_test=2.0, embedding_spread_last_epoch=0.9, class_norm_count_rho=float("nan"))

    runs = pd.DataFrame([run("default", "ok", 0, 0.4), run("default", "ok", 1, 0.5),
                         run("default", "failed", 2, float("nan")), run("grad_scale", "diverged", 0, float("nan")),
                         run("cut_init", "ok", 0, 0.3)])
    table = intervention_table(runs).set_index("intervention")
    assert list(table.index) == ["default", "grad_scale", "cut_init"]
    assert table.loc["default", ["runs", "runs_not_ok"]].tolist() == [2, 1]
    assert table.loc["default", "knn_top1"] == pytest.approx(45.0)
    assert table.loc["grad_scale", ["runs", "runs_not_ok"]].tolist() == [0, 1]
    assert np.isnan(table.loc["grad_scale", "knn_top1"]) and np.isnan(table.loc["grad_scale", "knn_top1_vs_default"])
    assert table.loc["cut_init", "knn_top1_vs_default"] == pytest.approx(-15.0)
