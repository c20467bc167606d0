"""Issue 17, study 5: FLAT's recipe (the linear lr rule under LARS, a projector without BatchNorm), the
square-root arm, the gradient-scale factor per batch size, the fidelity table and the GPU bench rows.

Hand computations here are in plain Python floats, not through the library's tensor code."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn

from lib import bench
from lib.core.data import load_dataset
from lib.core.optim import BASE_LR, make_optimizer, scaled_lr
from lib.core.params import ParameterError
from lib.ssl.resnet import SimCLRNet
from lib.ssl.training import SSLConfig, build_model
from lib.studies import find_study
from lib.studies import flatnce_batch as study
from lib.studies.fidelity import PROFILE_REASONS
from lib.studies.flat_fidelity import flat_fidelity_table
from lib.studies.variants import notebook_defaults

TAGS = {"[code]", "[paper]", "[summary]", "[ours]"}
FLAT_FILES = ("main.py", "models/", "optimizer/", "flatclr.py", "simclr.py", "data_aug/", "train_fc.py", "README.md")


# ------------------------------------------------------------------------------ the lr rule and LARS


def test_flats_rule_gives_its_default_rate_at_its_default_batch_and_agrees_with_sqrt_at_4096():
    # main.py: --lr 0.6 at --batch_size 512; README: the two rules give the same rate (4.8) at B = 4096
    assert scaled_lr(BASE_LR["linear"], 512, "linear") == pytest.approx(0.6)
    assert scaled_lr(BASE_LR["linear"], 32, "linear") == pytest.approx(0.3 * 32 / 256)
    assert scaled_lr(BASE_LR["linear"], 4096, "linear") == pytest.approx(4.8)
    assert scaled_lr(BASE_LR["sqrt"], 4096, "sqrt") == pytest.approx(4.8)
    # README's Quick Lookup, sqrt column: 0.85 at 128, 1.70 at 512 (rounded to 2 decimals)
    assert round(scaled_lr(BASE_LR["sqrt"], 128, "sqrt"), 2) == 0.85
    assert round(scaled_lr(BASE_LR["sqrt"], 512, "sqrt"), 2) == 1.70


def _norm(values) -> float:
    return math.sqrt(sum(v * v for v in values))


def test_one_lars_step_at_flats_rate_equals_a_hand_computation():
    """A 2x2 weight and a bias, known gradients, weight decay, momentum from zero, at lr = 0.3 x 512 / 256."""
    batch, wd, momentum, trust = 512, 1e-2, 0.9, 1e-3
    lr = scaled_lr(BASE_LR["linear"], batch, "linear")
    assert lr == 0.3 * batch / 256
    layer = nn.Linear(2, 2).double()
    w0, b0 = [3.0, -4.0, 1.0, 2.0], [0.5, -1.0]
    g_w, g_b = [1.0, 0.0, 2.0, 2.0], [1.0, 1.0]
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(w0, dtype=torch.float64).view(2, 2))
        layer.bias.copy_(torch.tensor(b0, dtype=torch.float64))
    layer.weight.grad = torch.tensor(g_w, dtype=torch.float64).view(2, 2)
    layer.bias.grad = torch.tensor(g_b, dtype=torch.float64)
    optimizer = make_optimizer(layer, "lars", lr=lr, momentum=momentum, weight_decay=wd)
    optimizer.step()

    d = [g + wd * w for g, w in zip(g_w, w0)]            # the decayed gradient
    ratio = trust * _norm(w0) / _norm(d)                   # = 1e-3 * 5.477 / 3.029
    velocity = [lr * ratio * x for x in d]                 # momentum buffer from zero: m * 0 + lr * ratio * d
    expected_w = [w - v for w, v in zip(w0, velocity)]
    expected_b = [b - lr * g for b, g in zip(b0, g_b)]     # the bias: excluded, plain momentum SGD, no decay
    assert layer.weight.flatten().tolist() == pytest.approx(expected_w, rel=1e-12, abs=0)
    assert layer.bias.tolist() == pytest.approx(expected_b, rel=1e-12, abs=0)
    assert optimizer.state[layer.weight]["momentum_buffer"].flatten().tolist() == pytest.approx(velocity, rel=1e-12)
    # the step moved the weight by lr * 1e-3 * ||w||: the trust ratio, not the gradient's size, sets it
    assert _norm([a - b for a, b in zip(w0, expected_w)]) == pytest.approx(lr * trust * _norm(w0), rel=1e-12)


# ------------------------------------------------------------------------------ the projector


def test_the_default_projector_has_no_batchnorm_and_the_option_adds_one():
    default = build_model(SSLConfig(width_multiplier=0.125), 3)
    assert not any(isinstance(m, nn.BatchNorm1d) for m in default.projector.modules())
    assert [type(m) for m in default.projector.net] == [nn.Linear, nn.ReLU, nn.Linear]
    assert all(m.bias is not None for m in default.projector.net if isinstance(m, nn.Linear))  # FLAT's have biases
    assert not any(isinstance(m, nn.BatchNorm1d) for m in SimCLRNet(3, 0.125).modules())
    with_bn = build_model(SSLConfig(width_multiplier=0.125, projector_bn=True), 3)
    assert sum(isinstance(m, nn.BatchNorm1d) for m in with_bn.projector.modules()) == 1


def test_a_record_without_projector_bn_keeps_the_batchnorm_it_was_trained_with():
    record = SSLConfig(width_multiplier=0.125, projector_bn=True).as_dict()
    del record["projector_bn"]
    assert SSLConfig.from_legacy(record).projector_bn is True
    assert SSLConfig.from_legacy({**record, "projector_bn": False}).projector_bn is False


# ------------------------------------------------------------------------------ the study's settings


def _resolved(profile: str, **parameters) -> dict:
    return study.resolve({**notebook_defaults(find_study(study)), "profile": profile, **parameters})


@pytest.mark.parametrize("profile", ["smoke", "quick", "cpu", "paper"])
def test_every_profile_runs_flats_rule_first_and_flats_projector_in_every_arm(profile):
    s = _resolved(profile)
    configs = study.plan(s)
    assert s["lr_rules"][0] == "linear" and not any(c.projector_bn for c in configs)
    linear = [c for c in configs if c.lr_scaling == "linear"]
    assert linear and all(c.lr == 0.3 for c in linear)
    if profile != "smoke":  # smoke trains one epoch without warm-up
        assert s["warmup_epochs"] / s["epochs"] == pytest.approx(0.1)  # main.py: 10 of 100 epochs


def test_the_sqrt_arm_runs_ours_at_eight_times_simclrs_published_base():
    sqrt = _resolved("quick", lr_rules=["sqrt"])
    assert {(c.lr_scaling, c.lr) for c in study.plan(sqrt)} == {("sqrt", 0.6)}
    assert study.LR_RULES["sqrt"] == 8 * BASE_LR["sqrt"]  # SimCLR's 0.075 (appendix B.1) x 8
    with pytest.raises(ParameterError, match="lr_rules"):
        _resolved("quick", lr_rules=["none"])


# ------------------------------------------------------------------------------ the gradient-scale factor


def _runs(info_nce: dict) -> pd.DataFrame:
    """A runs frame: per (loss, batch size) a list of per-seed final InfoNCE values."""
    rows = []
    for (loss, b), values in info_nce.items():
        for seed, value in enumerate(values):
            rows.append(dict(run_id=f"{loss}-{b}-{seed}", status="ok", lr_rule="linear", loss=loss, batch_size=b,
                             seed=seed,
                             knn_top1=0.5, probe_top1=0.5, info_nce_final=value, info_nce_ceiling=math.log(2 * b - 1),
                             grad_scale_final=0.0, negative_entropy_final=0.0, steps=1, lr=0.1, train_s=1.0))
    return pd.DataFrame(rows)


def test_the_factor_per_batch_is_the_seed_mean_of_one_minus_e_to_the_minus_final_infonce():
    planted = {("infonce", 16): [0.5, 1.5], ("infonce", 64): [3.0, 3.2], ("flatnce", 16): [0.7, 0.9],
               ("flatnce", 64): [2.0, 4.0]}
    s = study.resolve({"profile": "cpu", "losses": ["infonce", "flatnce"], "batch_sizes": [16, 64],
                       "lr_rules": ["linear"], "temperature": 0.1, "device": "cpu", "operating_points": []})
    out = study.analyze(_runs(planted), s)
    table = study.factor_by_batch(out).set_index("batch_size")
    assert set(table.lr_rule) == {"linear"}
    for (loss, b), values in planted.items():
        by_hand = sum(1 - math.exp(-v) for v in values) / len(values)  # not 1 - e^(-mean): the mean of factors
        assert table.loc[b, f"info_nce_factor_final_{loss}"] == pytest.approx(by_hand, rel=1e-12)
        assert table.loc[b, f"info_nce_final_{loss}"] == pytest.approx(sum(values) / 2)
    assert table.loc[64, "info_nce_ceiling"] == pytest.approx(math.log(127))
    row = study.paper_vs_reproduced(out, s, 0.0).set_index("quantity").filter(like="gradient-scale", axis=0).iloc[0]
    small = (2 - math.exp(-0.5) - math.exp(-1.5)) / 2
    large = (2 - math.exp(-3.0) - math.exp(-3.2)) / 2
    assert row.ours == (f"B=16: {small:.3f} (InfoNCE 1.00 of {math.log(31):.2f}); "
                        f"B=64: {large:.3f} (InfoNCE 3.10 of {math.log(127):.2f})")
    assert row.verdict == "check" and row.name.startswith("[FLAT's rule 0.3 × B / 256] ")


# ------------------------------------------------------------------------------ the fidelity table


@pytest.fixture
def cifar10_root(tmp_path):
    """A prepared-arrays folder with a tiny CIFAR-10 of 20 training and 10 test images."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cifar10.npz", x_train=rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8),
             y_train=np.arange(20) % 10, x_test=rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8),
             y_test=np.arange(10), classes=np.array([str(k) for k in range(10)]))
    return str(tmp_path)


def _table(profile: str, data_root: str, **parameters) -> pd.DataFrame:
    s = _resolved(profile, **parameters)
    return flat_fidelity_table(study.plan(s), s, data_root=data_root).set_index("setting")


# The rows FLAT's recipe fixes, which every profile of the study keeps (the learning rate: in FLAT's arm).
RECIPE_ROWS = ("temperature τ", "projector", "optimiser", "LARS step", "momentum", "learning-rate rule (linear arm)",
               "learning rate per batch size (linear arm)", "weight decay", "crop", "flip", "colour jitter",
               "grayscale", "blur", "stem", "InfoNCE", "FlatNCE", "losses compared")


def test_every_row_is_tagged_names_a_flatclr_file_and_every_difference_says_why(cifar10_root):
    table = _table("cpu", cifar10_root)
    assert set(table.evidence) <= TAGS and len(table) > 25
    for setting, row in table[table.evidence == "[code]"].iterrows():
        assert row.source.startswith(FLAT_FILES), (setting, row.source)
    differs = table.ours != table.original
    assert differs.any() and (table[differs].note.str.startswith("[ours]: ")).all()
    assert (table[~differs].note == "matches").all()
    assert (table.loc[list(RECIPE_ROWS), "note"] == "matches").all(), table.loc[list(RECIPE_ROWS), ["ours", "original"]]
    assert table.loc["warm-up", "note"] == "matches"  # 0.6 of 6 epochs: FLAT's 10%
    assert table.loc["epochs", "note"] == f"[ours]: {PROFILE_REASONS['cpu']}"
    # the small-batch operating point's B = 16 first, then the grid
    rates = table.loc["learning rate per batch size (linear arm)", "ours"]
    assert rates == "16: 0.01875, 32: 0.0375, 128: 0.15, 512: 0.6"
    # the sqrt arm: ours, with the reason and SimCLR's published base beside it
    assert table.loc["learning-rate rule (sqrt arm)", "ours"] == "0.6 × √B"
    assert table.loc["learning rate per batch size (sqrt arm)", "ours"] == (
        f"16: {0.6 * math.sqrt(16):.4g}, 32: {0.6 * math.sqrt(32):.4g}, 128: {0.6 * math.sqrt(128):.4g}, "
        f"512: {0.6 * math.sqrt(512):.4g}")  # the small-batch point's B = 16 first
    for setting in ("learning-rate rule (sqrt arm)", "learning rate per batch size (sqrt arm)"):
        note = table.loc[setting, "note"]
        assert note.startswith("[ours]: the study's second arm") and "0.075" in note and "45-48%" in note


def test_a_rate_off_the_arms_and_the_batchnorm_projector_show_as_differences_read_from_the_run(cifar10_root):
    s = _resolved("cpu", lr_rules=["linear"], projector_bn=True)
    configs = [c.replace(lr=0.5) for c in study.plan(s)]
    table = flat_fidelity_table(configs, s, data_root=cifar10_root).set_index("setting")
    assert list(table.filter(like="arm)", axis=0).index) == ["learning-rate rule (linear arm)",
                                                              "learning rate per batch size (linear arm)"]
    assert table.loc["learning-rate rule (linear arm)", "ours"] == "0.5 × B / 256"
    assert table.loc["learning-rate rule (linear arm)", "note"] == (
        "[ours]: lr = 0.5, lr_scaling = 'linear' set for this run")
    rates = table.loc["learning rate per batch size (linear arm)", "ours"]
    assert rates.startswith(f"16: {0.5 * 16 / 256:.4g}, 32: {0.5 * 32 / 256:.4g}, ")  # the point's B = 16 first
    assert table.loc["projector", "ours"] == "Linear(128→128) → BatchNorm → ReLU → Linear(128→128)"
    assert table.loc["projector", "note"].startswith("[ours]: projector_bn=True")


def test_the_projector_row_reads_the_built_network(cifar10_root):
    s = _resolved("cpu")
    configs = [c.replace(projector_hidden=32, projector_dim=64) for c in study.plan(s)]
    row = flat_fidelity_table(configs, s, data_root=cifar10_root).set_index("setting").loc["projector"]
    assert row.ours == "Linear(128→32) → ReLU → Linear(32→64)"
    assert row.original == "Linear(128→128) → ReLU → Linear(128→128)"


def test_configs_must_be_simclr_configs():
    with pytest.raises(ParameterError, match="configs"):
        flat_fidelity_table([])
    with pytest.raises(ParameterError, match="configs"):
        flat_fidelity_table([SSLConfig(method="simsiam", loss="simsiam", diagnostics="norms")])


# ------------------------------------------------------------------------------ the GPU bench rows


def test_the_gpu_rows_run_on_the_cpu_at_a_tiny_size():
    x = load_dataset("shapes", image_size=32, n_train=10, n_test=10).x_train[:8]
    rows = bench.simclr_gpu_rows(x, repeat=1, device="cpu", width_multiplier=0.125, batch=4, largest=8)
    assert [r["batch"] for r in rows] == [4, 8]
    assert rows[1]["label"] == "study 5's largest batch: FlatNCE step, batch 8"
    assert all(r["images_per_s"] > 0 and "oom" not in r for r in rows)
    with pytest.raises(ValueError, match="batch=16"):
        bench.simclr_step_rate(16, 0.125, x_uint8=x, repeat=1, count_flops=False)


def test_an_out_of_memory_batch_gives_its_row_a_message(monkeypatch):
    def oom_at_large(batch, width, **kw):
        if batch > 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB\nmore detail")
        return dict(batch=batch, images_per_s=1.0)

    monkeypatch.setattr(bench, "simclr_step_rate", oom_at_large)
    rows = bench.simclr_gpu_rows(torch.zeros(8, 3, 32, 32, dtype=torch.uint8), repeat=1, device="cpu", batch=4)
    assert rows[0]["images_per_s"] == 1.0
    assert rows[1]["batch"] == study.PROFILES["paper"]["batch_sizes"][-1]  # the paper profile's largest
    assert rows[1]["oom"] == "CUDA out of memory. Tried to allocate 64.00 GiB"
