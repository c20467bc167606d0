"""Study 4 as the NORMS authors run it (issue 17): the latent-class generator and its in-batch positives,
the near-OOD split and the AUROC's direction, the OOD scores at initialisation, SimSiam's gradient summed
over micro-batches, zero_init_residual, the four separate colour jitters, the SimCLR GradScale recipe, and
the fidelity table. Each test checks a definition against an independent computation or a hand value."""
from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn as nn
import torchvision.transforms.v2 as T
import torchvision.transforms.v2.functional as TF

from lib.core.augment import apply_simclr_params, draw_simclr_params
from lib.core.data import get_dataset, load_dataset
from lib.core.params import ParameterError
from lib.ssl.evaluation import initial_ood_scores, ood_label, run_test_set
from lib.ssl.resnet import BasicBlock, ResNet18
from lib.ssl.simulations import (
    LATENT_SIMULATIONS,
    in_batch_pair_loss,
    in_batch_positives,
    latent_class_data,
    latent_class_simulation,
    positive_mask,
)
from lib.ssl.training import SSLConfig, build_model, make_step, training_indices
from lib.studies import embedding_norms as study
from lib.studies import find_study
from lib.studies.norms_fidelity import NORMS_FILES, norms_fidelity_table
from lib.studies.variants import notebook_defaults

TAGS = {"[code]", "[paper]", "[summary]", "[ours]"}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def resolved(profile: str = "smoke", **parameters) -> dict:
    return study.resolve({**notebook_defaults(find_study(study)), "profile": profile, **parameters})


# ------------------------------------------------------------------------- the latent-class simulation


def generated(simulation: str, seed: int = 0, samples: int = 600) -> dict:
    s = LATENT_SIMULATIONS[simulation]
    return latent_class_data([1, 2, 4, 8], samples=samples, latent_dim=10, observed_dim=64, sigma=s["sigma"],
                             project=s["project"], observation_scale=s["observation_scale"], counts=s["counts"],
                             generator=gen(seed))


def test_the_authors_latent_points_lie_on_the_sphere_before_the_times_ten_map():
    data = generated("authors")
    norms = torch.linalg.vector_norm(data["latent"], dim=1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-6)
    assert torch.allclose(data["observations"], data["latent"] @ data["mixing"].T, atol=1e-4)
    # M = 10 G, G standard Gaussian: 640 entries with standard deviation 10
    assert 9.0 < data["mixing"].std().item() < 11.0 and abs(data["mixing"].mean().item()) < 1.5
    assert data["counts"].sum() == 600 and (np.diff(data["labels"].numpy()) >= 0).all()  # multinomial, by class


def test_our_latent_points_keep_their_noise_and_unit_observation_scale():
    data = generated("ours")
    norms = torch.linalg.vector_norm(data["latent"], dim=1)
    assert norms.std().item() > 0.1  # off the sphere: centre + N(0, 0.3^2) is not projected
    assert 0.9 < data["mixing"].std().item() < 1.1
    assert data["counts"].tolist() == [40, 80, 160, 320]  # rounded shares of 600


def test_in_batch_positives_are_other_members_of_the_anchors_class_in_the_same_batch():
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3, 1, 1, 0])  # classes 2 and 3 have one member each
    counts = torch.zeros(len(labels), len(labels))
    for seed in range(400):
        partner, has = in_batch_positives(labels, torch.rand(len(labels), len(labels), generator=gen(seed)))
        assert ((partner >= 0) & (partner < len(labels))).all()  # an index into this batch
        assert torch.equal(has, torch.tensor([True, True, True, False, True, True, False, True, True, True]))
        assert (labels[partner[has]] == labels[has]).all() and (partner[has] != torch.arange(10)[has]).all()
        assert (partner[~has] == torch.arange(10)[~has]).all()
        counts[torch.arange(10)[has], partner[has]] += 1
    # uniform over the other members: anchor 0 of class 0 has partners 2, 5, 9, each about 1/3 of the time
    assert set(counts[0].nonzero().squeeze(1).tolist()) == {2, 5, 9}
    assert (counts[0, [2, 5, 9]] / 400 - 1 / 3).abs().max() < 0.1


def test_the_positive_mask_is_symmetric_and_holds_every_drawn_pair():
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    partner, has = in_batch_positives(labels, torch.rand(6, 6, generator=gen(3)))
    mask = positive_mask(partner, has)
    assert torch.equal(mask, mask.T) and not mask.diagonal().any()
    for i in torch.nonzero(has).squeeze(1).tolist():
        assert mask[i, partner[i]]
    rows, cols = mask.nonzero().T
    assert (labels[rows] == labels[cols]).all()  # every positive pair is of one class
    assert not mask[5].any()  # class 2 is alone in the batch


def test_in_batch_pair_loss_matches_the_authors_loop_definition():
    torch.manual_seed(0)
    z = torch.randn(12, 5, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3, 1, 1, 0, 2, 2])
    partner, has = in_batch_positives(labels, torch.rand(12, 12, generator=gen(1)))
    # the authors' loop: pos[i, p_i] = pos[p_i, i] = 1 for every anchor with a partner; per valid row
    # -log(sum_pos e^{s} / sum_{j != i} e^{s} + 1e-8); the mean over valid rows
    pos = [[0.0] * 12 for _ in range(12)]
    valid = [False] * 12
    for i in range(12):
        if has[i]:
            p = int(partner[i])
            pos[i][p] = pos[p][i] = 1.0
            valid[i] = valid[p] = True
    u = [row / row.norm() for row in z]
    losses = []
    for i in range(12):
        if not valid[i]:
            continue
        e = [math.exp(float(u[i] @ u[j])) for j in range(12)]
        numerator = sum(e[j] * pos[i][j] for j in range(12))
        denominator = sum(e[j] for j in range(12) if j != i)
        losses.append(-math.log(numerator / denominator + 1e-8))
    got = in_batch_pair_loss(z, positive_mask(partner, has), temperature=1.0)
    assert got.item() == pytest.approx(sum(losses) / len(losses), rel=1e-12)


def test_latent_seeds_are_independent_of_the_seeds_beside_them():
    alone = latent_class_simulation(samples=200, epochs=3, seeds=[5])[0]
    together = latent_class_simulation(samples=200, epochs=3, seeds=[4, 5, 6])[1]
    assert together["seed"] == 5 and alone["class_counts"].tolist() == together["class_counts"].tolist()
    assert np.allclose(alone["class_norm_history"], together["class_norm_history"], rtol=1e-4)


def test_latent_settings_default_to_the_authors_and_ours_stays_selectable():
    s = resolved("quick")
    assert (s["latent_simulation"], s["latent_sigma"], s["latent_lr"], s["latent_epochs"], s["latent_samples"]) == \
        ("authors", 1.0, 0.01, 100, 2000)
    assert all(resolved(p)["latent_seeds"] >= 20 for p in ("smoke", "quick", "cpu", "paper"))
    ours = resolved("quick", latent_simulation="ours")
    assert (ours["latent_sigma"], ours["latent_lr"]) == (0.3, 0.1)
    with pytest.raises(ParameterError, match="latent_simulation"):
        resolved(latent_simulation="theirs")


# ------------------------------------------------------------------------------------ near-OOD


def test_the_near_ood_split_shares_no_class_between_seen_and_unseen():
    s = resolved("smoke")
    assert s["unseen_classes"] == [5, 6, 7, 8, 9] and resolved("cpu")["unseen_classes"] == [5, 6, 7, 8, 9]
    ood_configs = [c for c in study.plan(s) if c.train_classes]
    assert {c.method for c in ood_configs} == {"simclr", "simsiam"}
    c = ood_configs[0]
    near = c.ood[0]
    assert set(c.train_classes).isdisjoint(near["classes"]) and len(c.train_classes) + len(near["classes"]) == 10
    assert near["dataset"] == c.dataset and near["dataset_options"] == c.dataset_options
    ds = get_dataset(c.dataset, c.dataset_options)
    seen_train = set(ds.y_train[training_indices(c, ds)].tolist())
    seen_test = set(run_test_set(ds, c)[1].tolist())
    unseen = set(ds.y_test[torch.isin(ds.y_test, torch.tensor(near["classes"]))].tolist())
    assert seen_train == seen_test == set(c.train_classes) and unseen == set(near["classes"])
    assert seen_train.isdisjoint(unseen)
    # the balanced and imbalanced runs train on every class and score no unseen set
    assert all(not c.train_classes and not c.ood for c in study.plan(s) if c not in ood_configs)


def test_unseen_classes_are_checked_by_name():
    assert resolved(unseen_classes=[0, 9])["unseen_classes"] == [0, 9]
    assert not [c for c in study.plan(resolved(unseen_classes=[])) if c.train_classes]
    for bad in ([10], [1, 1], "5-9", list(range(9))):  # out of range, repeated, no list, too few classes left
        with pytest.raises(ParameterError, match="unseen_classes"):
            resolved(unseen_classes=bad)


class MeanPixel(nn.Module):
    """A stand-in network whose embedding norm is an image's mean pixel value (in [0, 1] units)."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))  # embed() reads the device from the parameters
        self.projector = nn.Identity()

    def features(self, x):
        return x.mean(dim=(1, 2, 3))[:, None]


def test_the_auroc_is_above_one_half_when_in_distribution_norms_are_larger_with_its_hand_value(tmp_path):
    # test images: classes 0-4 (seen) at pixel values 30, 40, 50; classes 5-9 (unseen) at 10, 20, 35
    values = {0: 30, 1: 40, 2: 50, 5: 10, 6: 20, 7: 35}
    y_test = np.array(list(values))
    x_test = np.stack([np.full((32, 32, 3), v, dtype=np.uint8) for v in values.values()])
    np.savez(tmp_path / "cifar10.npz", x_train=np.zeros((10, 32, 32, 3), dtype=np.uint8), y_train=np.arange(10),
             x_test=x_test, y_test=y_test, classes=np.array([str(k) for k in range(10)]))
    root = str(tmp_path)
    ds = load_dataset("cifar10", data_root=root)
    ds = SimpleNamespace(**{**ds.__dict__, "mean": (0.0, 0.0, 0.0), "std": (1.0, 1.0, 1.0)})  # norm = mean pixel
    spec = {"dataset": "cifar10", "dataset_options": {}, "classes": [5, 6, 7, 8, 9]}
    c = SimpleNamespace(train_classes=[0, 1, 2, 3, 4], ood=[spec], recalibrate_bn=False, stored_norms=10)
    out = initial_ood_scores(MeanPixel(), ds, ds.x_train, c, root)
    # P(seen > unseen) over the 9 pairs: 30 beats 10 and 20; 40 and 50 beat all three: 8 / 9
    assert out["auroc_init_cifar10_classes5-9"] == pytest.approx(8 / 9)
    assert out["norm_mean_init_test"] == pytest.approx(40 / 255, rel=1e-5)
    assert out["norm_mean_init_cifar10_classes5-9"] == pytest.approx(65 / 3 / 255, rel=1e-5)
    assert sorted(out["stored"]["init_cifar10_classes5-9"]) == pytest.approx([10 / 255, 20 / 255, 35 / 255], rel=1e-5)
    assert ood_label(spec) == "cifar10_classes5-9"


def test_scoring_at_initialisation_leaves_the_model_as_it_was():
    c = SSLConfig(method="simclr", loss="decoupled", diagnostics="norms", dataset="shapes", recalibrate_bn=True,
                  dataset_options={"num_classes": 4, "n_train": 64, "n_test": 32, "image_size": 16},
                  width_multiplier=1 / 16, batch_size=16, train_classes=[0, 1],
                  ood=[{"dataset": "shapes", "dataset_options": {"num_classes": 4, "n_train": 64, "n_test": 32,
                                                                 "image_size": 16}, "classes": [2, 3]}])
    ds = get_dataset(c.dataset, c.dataset_options)
    torch.manual_seed(0)
    model = build_model(c, 3)
    before = copy.deepcopy(model.state_dict())
    out = initial_ood_scores(model, ds, ds.x_train[training_indices(c, ds)], c, None)
    assert 0 <= out["auroc_init_shapes_num_classes4_classes2-3"] <= 1
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and model.training


# ------------------------------------------------------------------------------ training details


def test_micro_batches_sum_their_gradients_into_one_update():
    c = SSLConfig(method="simsiam", loss="simsiam", diagnostics="norms", optimizer="sgd", momentum=0.0,
                  weight_decay=0.0, width_multiplier=1 / 16, projector_dim=16, batch_size=8, micro_batch=4,
                  channels_last=False, fixed_predictor_lr=False)
    torch.manual_seed(0)
    model = build_model(c, 3)
    reference = copy.deepcopy(model)
    views = torch.randn(16, 3, 8, 8, generator=gen(1))  # [view1 of 8 images; view2 of the same 8]
    # by hand: each micro-batch's both views through the network, its own loss and gradient, summed
    grads = [torch.zeros_like(p) for p in reference.parameters()]
    for part in (torch.cat([views[0:4], views[8:12]]), torch.cat([views[4:8], views[12:16]])):
        z, p = reference(part)
        (p1, p2), (z1, z2) = p.chunk(2), z.chunk(2)
        loss = -(nn.functional.cosine_similarity(p1, z2.detach()).mean()
                 + nn.functional.cosine_similarity(p2, z1.detach()).mean()) / 2
        for g, d in zip(grads, torch.autograd.grad(loss, list(reference.parameters()), allow_unused=True)):
            if d is not None:
                g += d
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    make_step(model, optimizer, c)(views)
    for b, p, g in zip(before, model.parameters(), grads):
        assert torch.allclose(b - p.detach(), g, atol=1e-6)


def test_micro_batch_must_divide_the_batch():
    base = dict(method="simsiam", loss="simsiam", diagnostics="norms", batch_size=64)
    assert SSLConfig(**base, micro_batch=8).micro_batch == 8 and SSLConfig(**base).micro_batch == 0
    for bad in (1, 6, -2, 128):
        with pytest.raises(ParameterError, match="micro_batch"):
            SSLConfig(**base, micro_batch=bad)
    with pytest.raises(ParameterError, match="simsiam_micro_batches"):
        resolved(simsiam_micro_batches=5)  # 64 images do not split into 5
    assert {c.micro_batch for c in study.plan(resolved()) if c.method == "simsiam"} == {8}
    assert {c.micro_batch for c in study.plan(resolved(simsiam_micro_batches=1))} == {0}


def test_zero_init_residual_zeroes_the_last_batchnorm_of_every_residual_branch_only():
    torch.manual_seed(0)
    plain = ResNet18(3, 1 / 8)
    torch.manual_seed(0)
    zeroed = ResNet18(3, 1 / 8, zero_init_residual=True)
    blocks = [m for m in zeroed.modules() if isinstance(m, BasicBlock)]
    assert len(blocks) == 8 and all((b.bn2.weight == 0).all() for b in blocks)
    last = {id(b.bn2.weight) for b in blocks}
    for (name, a), b in zip(plain.named_parameters(), zeroed.parameters()):
        if id(b) not in last:
            assert torch.equal(a, b), name  # the same draws: only the residual branches' last scales differ
    zeroed.eval()
    h = zeroed.stem(torch.randn(2, 3, 16, 16, generator=gen(0)))
    block = zeroed.stages[0][0]
    assert torch.equal(block(h), torch.relu(block.shortcut(h)))  # a block starts as its shortcut


def test_separate_jitter_draws_each_op_on_its_own_in_the_authors_order():
    b = 20000
    joint = draw_simclr_params(b, 32, 32, generator=gen(1))
    separate = draw_simclr_params(b, 32, 32, jitter_mode="separate", generator=gen(1))
    assert (joint.jitter == joint.jitter[:, :1]).all()  # one draw for all four ops
    assert (separate.order == torch.arange(4)).all()  # brightness, contrast, saturation, hue
    sd = 5 * math.sqrt(0.8 * 0.2 / b)
    assert (separate.jitter.double().mean(dim=0) - 0.8).abs().max() < sd  # each op with p 0.8
    both = (separate.jitter[:, 0] & separate.jitter[:, 1]).double().mean().item()
    assert abs(both - 0.64) < 5 * math.sqrt(0.64 * 0.36 / b)  # independently
    # the other draws are the same in both modes
    for name in ("crop", "flip", "factors", "grayscale"):
        assert torch.equal(getattr(joint, name), getattr(separate, name)), name


def test_separate_jitter_applies_torchvision_ops_per_image_where_drawn():
    x = torch.randint(0, 256, (30, 3, 16, 16), dtype=torch.uint8, generator=gen(2))
    mean, std = (0.5, 0.4, 0.45), (0.25, 0.2, 0.22)
    p = draw_simclr_params(30, 16, 16, jitter_mode="separate", jitter_p=0.5, grayscale_p=0.3, generator=gen(3))
    out = apply_simclr_params(x, p, mean=mean, std=std)
    ops = (TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue)
    for i in range(len(x)):
        top, left, h, w = p.crop[i].tolist()
        img = TF.resized_crop(x[i].float() / 255, top, left, h, w, [16, 16],
                              interpolation=T.InterpolationMode.BILINEAR, antialias=False)
        if p.flip[i]:
            img = TF.horizontal_flip(img)
        for op in range(4):  # the authors' order, each op where its own draw says so
            if p.jitter[i, op]:
                img = ops[op](img, p.factors[i, op].item())
        if p.grayscale[i]:
            img = TF.rgb_to_grayscale(img, num_output_channels=3)
        assert torch.allclose(out[i], TF.normalize(img, mean, std), atol=2e-3), i


def test_the_authors_details_are_the_study_defaults_and_ours_stay_selectable():
    configs = study.plan(resolved())
    assert all(c.zero_init_residual and c.color_jitter == "separate" for c in configs)
    ours = study.plan(resolved(zero_init_residual=False, color_jitter="joint", simsiam_micro_batches=1))
    assert all(not c.zero_init_residual and c.color_jitter == "joint" and c.micro_batch == 0 for c in ours)
    # SSLConfig's own defaults stay FLAT's (study 5), which are also what records made before these fields ran
    legacy = SSLConfig.from_legacy({"method": "simclr"})
    assert (legacy.zero_init_residual, legacy.color_jitter, legacy.micro_batch, legacy.train_classes) == \
        (False, "joint", 0, [])


def test_simclr_grad_scale_runs_take_the_authors_rate_and_a_warm_up_scaled_to_the_epochs():
    s = resolved("cpu")
    configs = study.plan(s)
    simclr = [c for c in configs if c.method == "simclr" and c.grad_scale_power]
    assert simclr and all(c.lr == 0.05 and c.warmup_epochs == 25 * 100 / 512 for c in simclr)
    assert all(c.lr * 512 / 256 == pytest.approx(0.1) for c in simclr)  # the authors' 0.1 at their batch 512
    others = [c for c in configs if not (c.method == "simclr" and c.grad_scale_power)]
    assert all(c.warmup_epochs == 2.5 and c.lr == study.METHOD_SETTINGS[c.method]["lr"] for c in others)
    ours = [c for c in study.plan(resolved("cpu", grad_scale_recipe="ours")) if c.grad_scale_power]
    assert all(c.warmup_epochs == 2.5 and c.lr == study.METHOD_SETTINGS[c.method]["lr"] for c in ours)


# ------------------------------------------------------------------------------------ fidelity


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_every_fidelity_row_is_tagged_cites_an_authors_file_and_says_why_it_differs(profile):
    s = resolved(profile)
    table = norms_fidelity_table(study.plan(s), s)
    assert set(table.evidence) <= TAGS
    code = table[table.evidence == "[code]"]
    assert all(any(name.split("/")[-1] in source for name in NORMS_FILES) for source in code.source)
    assert ((table.ours == table.original) == (table.note == "matches")).all()
    assert table[table.note != "matches"].note.str.startswith("[ours]: ").all()
    by = table.set_index("setting")
    for setting in ("zero_init_residual", "colour jitter", "SimCLR GradScale recipe", "latent: positives",
                    "latent: noise σ", "latent: observation matrix scale"):
        assert by.loc[setting, "note"] == "matches", setting


def test_a_changed_setting_shows_up_in_the_fidelity_table():
    s = resolved("smoke", zero_init_residual=False, color_jitter="joint", grad_scale_recipe="ours",
                 latent_simulation="ours")
    by = norms_fidelity_table(study.plan(s), s).set_index("setting")
    for setting in ("zero_init_residual", "colour jitter", "SimCLR GradScale recipe", "latent: positives",
                    "latent: noise σ"):
        assert by.loc[setting, "note"].startswith("[ours]: "), setting
    assert by.loc["latent: noise σ", "ours"] == "0.3"
    with pytest.raises(ParameterError, match="configs"):
        norms_fidelity_table([], s)
