"""Seeds trained as one batched model (lib.cff.batched) take exactly the steps of separate models."""
import copy

import pytest
import torch

from lib.cff.batched import (
    batched_cff_step,
    batched_forward,
    stack_seeds,
    stacked_clamp_activation_rate,
    train_cff_seeds,
    unstack_seed,
)
from lib.cff.diagnostics import clamp_activation_rate
from lib.cff.model import CFFViT
from lib.cff.training import CFFConfig, cff_step, train_cff
from lib.run.results import ResultsStore
from lib.run.sweep import NON_FINITE, run_sweep

# On a CPU, vmap has no batching rule for the fused CPU attention kernel and loops over the seeds
# (correct, only slower); on CUDA the flash/efficient/cuDNN kernels have batching rules.
pytestmark = pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")

S, B, LAYERS = 3, 4, 2
TINY = dict(channels=3, image_size=8, patch=4, embed_dim=16, heads=2, layers=LAYERS)
MARGINS = [0.4, 0.1]
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one thread avoids OpenMP overhead on a busy machine (as TINY_CFF's threads=1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _models(init="trunc_normal"):
    models = []
    for s in range(S):
        torch.manual_seed(s)
        models.append(CFFViT(**TINY, init=init))
    return models


def _batch(generator):
    """Per-seed views [S, 2B, C, H, W] and labels [S, 2B]; both views share labels, so every anchor has a positive."""
    views = torch.randn(S, 2 * B, 3, 8, 8, generator=generator)
    y = torch.randint(0, 3, (S, B), generator=generator)
    return views, torch.cat([y, y], dim=1)


def _key_bias(name):
    """The key rows of an attention block's qkv bias, else None."""
    if name.endswith("qkv.bias"):
        width = TINY["embed_dim"]
        return slice(width, 2 * width)
    return None


ON_CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                             reason="no CUDA device (python -m lib.bench --device cuda runs these where there is one)")


# CFF's init (zero attention biases, position std 1) leaves more gradient entries at rounding-noise level,
# which Adam amplifies in float32 as it does the key bias's (below): that init is compared in float64.
@pytest.mark.parametrize("margin_mode, stabilizer, dtype, init, device", [
    ("clamp", "detach", torch.float32, "trunc_normal", "cpu"),
    ("subtract", "direct", torch.float32, "trunc_normal", "cpu"),
    ("clamp", "detach", torch.float64, "trunc_normal", "cpu"), ("subtract", "direct", torch.float64, "cff", "cpu"),
    pytest.param("clamp", "detach", torch.float32, "trunc_normal", "cuda", marks=ON_CUDA, id="cuda-float32"),
    pytest.param("subtract", "direct", torch.float64, "cff", "cuda", marks=ON_CUDA, id="cuda-float64")])
def test_one_batched_step_equals_the_separate_steps_of_each_seed(margin_mode, stabilizer, dtype, init, device):
    models = [m.to(device, dtype) for m in _models(init)]
    separate = [copy.deepcopy(m) for m in models]
    optimizers = [torch.optim.AdamW(m.parameters(), lr=0.004) for m in separate]
    base, params = stack_seeds(models)
    assert all(p.shape[0] == S and p.is_leaf and p.requires_grad for p in params.values())
    batched_optimizer = torch.optim.AdamW(params.values(), lr=0.004)
    kw = dict(margin_mode=margin_mode, stabilizer=stabilizer, temperature=0.15)

    gen = torch.Generator().manual_seed(123)
    for _ in range(2):
        views, labels = _batch(gen)
        views, labels = views.to(device, dtype), labels.to(device)
        expected = torch.stack([cff_step(separate[s], optimizers[s], views[s], labels[s], MARGINS, **kw)
                                for s in range(S)])
        got = batched_cff_step(base, params, batched_optimizer, views, labels, MARGINS, **kw)
        assert got is not None and got.dtype == torch.float64 and got.shape == (S, 3, LAYERS)
        torch.testing.assert_close(got, expected, **TOL)

    for s in range(S):
        for name, p in separate[s].named_parameters():
            mine, theirs = params[name][s], p
            # The last step's gradients agree everywhere, to rounding.
            torch.testing.assert_close(params[name].grad[s], p.grad, **TOL,
                                       msg=lambda m, s=s, name=name: f"grad seed {s}, {name}: {m}")
            keys = _key_bias(name)
            if keys is not None and dtype == torch.float32:
                # softmax is invariant to a constant added to all keys, so the key bias's gradient is
                # exactly 0 in exact arithmetic and float32 rounding noise (~1e-9) in practice; Adam
                # divides it by sqrt(v) + eps (eps = 1e-8, the same order) and turns two different
                # noise values into steps of up to lr. Those entries are compared only through their
                # (noise-level) gradients; in float64 the noise is ~1e-17 << eps and they match too.
                assert p.grad[keys].abs().max() < 1e-6 and params[name].grad[s][keys].abs().max() < 1e-6
                keep = torch.ones(len(p), dtype=torch.bool)
                keep[keys] = False
                mine, theirs = mine[keep], theirs[keep]
            torch.testing.assert_close(mine, theirs, **TOL, msg=lambda m, s=s, name=name: f"seed {s}, {name}: {m}")
    # the seeds really were different models, and they really moved
    assert not torch.equal(params["layers.1.qkv.weight"][0], params["layers.1.qkv.weight"][1])
    assert not torch.allclose(params["layers.1.qkv.weight"][0], models[0].layers[1].qkv.weight)


def test_a_non_finite_seed_stops_the_step_for_all_and_updates_nothing():
    base, params = stack_seeds(_models())
    optimizer = torch.optim.AdamW(params.values(), lr=0.004)
    views, labels = _batch(torch.Generator().manual_seed(0))
    views[1, 0] = float("inf")
    before = {name: p.detach().clone() for name, p in params.items()}
    got = batched_cff_step(base, params, optimizer, views, labels, MARGINS, margin_mode="clamp",
                           stabilizer="detach", temperature=0.15)
    assert got is None
    for name, p in params.items():
        assert torch.equal(p, before[name]), name
        assert p.grad is None, name
    assert not optimizer.state


def test_unstack_seed_matches_the_batched_forward_and_is_independent():
    base, params = stack_seeds(_models())
    optimizer = torch.optim.AdamW(params.values(), lr=0.004)
    views, labels = _batch(torch.Generator().manual_seed(1))
    batched_cff_step(base, params, optimizer, views, labels, MARGINS, margin_mode="subtract",
                     stabilizer="detach", temperature=0.15)
    images = torch.randn(S, 5, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        batched = batched_forward(base, params, images)
    for s in range(S):
        model = unstack_seed(base, params, s)
        assert isinstance(model, CFFViT)
        with torch.no_grad():
            outputs = model(images[s])
        assert len(outputs) == LAYERS
        for layer in range(LAYERS):
            torch.testing.assert_close(outputs[layer], batched[layer][s], **TOL)
    with torch.no_grad():
        model.layers[0][0].linear.weight.zero_()
    assert not torch.equal(params["layers.0.0.linear.weight"][S - 1], model.layers[0][0].linear.weight)


def test_stacked_clamp_activation_rate_is_the_per_seed_rate():
    z = torch.randn(S, 6, 4, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([[0, 0, 1, 1, 2, 2], [0, 1, 2, 3, 4, 5], [0, 0, 0, 0, 1, 1]])  # seed 1: no positives
    got = stacked_clamp_activation_rate(z, labels, 0.7)
    assert got.dtype == torch.float64 and got.shape == (S,)
    expected = torch.tensor([clamp_activation_rate(z[s], labels[s], 0.7) for s in range(S)], dtype=torch.float64)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert torch.isnan(got[1]) and 0 < got[0] < 1


def test_batched_training_follows_each_seeds_own_run(tiny_cff):
    """train_cff_seeds draws each seed's initialisation, split, order and augmentation as train_cff
    does, so every curve of the batched cell matches that seed's separate run to float rounding."""
    configs = [CFFConfig(**tiny_cff, seed=s) for s in (0, 1)]
    batched = train_cff_seeds(configs, device="cpu")
    separate = [train_cff(c) for c in configs]
    for b, s in zip(batched, separate):
        assert b["status"] == "ok" and b["train_images"] == s["train_images"]
        for key in ("loss", "car", "grad_norm"):
            torch.testing.assert_close(torch.tensor(b["curves"][key]), torch.tensor(s["curves"][key]),
                                       rtol=1e-4, atol=1e-5)
        assert b["positive_pair_density"] == s["positive_pair_density"]


def test_sweep_runs_cells_batched_and_records_every_seed(tmp_path, tiny_cff):
    configs = [CFFConfig(**dict(tiny_cff, seed=s, margin_mode=m)) for m in ("clamp", "subtract") for s in (0, 1)]
    cells = []

    def batched(cell, **kw):
        cells.append(sorted(c.seed for c in cell))
        return train_cff_seeds(cell, **kw)

    records = run_sweep(ResultsStore(tmp_path, "t", "smoke"), configs, train_cff, batched_fn=batched, progress=False)
    assert cells == [[0, 1], [0, 1]]  # one call per margin mode, with both seeds
    assert [r["config"] for r in records] == [c.as_dict() for c in configs] and {r["status"] for r in records} == {"ok"}
    assert all(r["extra"]["batched"] == {"seeds": 2} for r in records)


def test_sweep_falls_back_to_single_runs_when_a_batched_seed_diverges(tmp_path, tiny_cff):
    configs = [CFFConfig(**dict(tiny_cff, seed=s, lr=1e30)) for s in (0, 1)]
    records = run_sweep(ResultsStore(tmp_path, "t", "smoke"), configs, train_cff, batched_fn=train_cff_seeds,
                        progress=False)
    assert {r["status"] for r in records} == {"diverged"}
    assert all("non-finite" in r["extra"]["batched"]["fallback"] for r in records)


def test_a_batched_cell_that_returns_none_falls_back_and_says_why(tmp_path, tiny_cff):
    configs = [CFFConfig(**tiny_cff, seed=s) for s in (0, 1)]
    records = run_sweep(ResultsStore(tmp_path, "t", "smoke"), configs, train_cff, batched_fn=lambda cell, **kw: None,
                        progress=False)
    assert {r["status"] for r in records} == {"ok"} and all(0 <= r["metrics"]["top1"] <= 1 for r in records)
    assert [r["extra"]["batched"] for r in records] == [{"seeds": 2, "fallback": NON_FINITE}] * 2


def test_a_batched_cell_that_raises_fails_loudly_and_is_not_retried_one_by_one(tmp_path, tiny_cff):
    configs = [CFFConfig(**tiny_cff, seed=s) for s in (0, 1)]
    single = []

    def broken(cell, **kw):
        raise ValueError("a bug in the batched path")

    def train(config: CFFConfig, **kw):
        single.append(config.seed)
        return train_cff(config, **kw)

    records = run_sweep(ResultsStore(tmp_path, "t", "smoke"), configs, train, batched_fn=broken, progress=False)
    assert single == []  # no silent per-seed retry
    assert {r["status"] for r in records} == {"failed"}
    assert all("ValueError: a bug in the batched path" in r["error"] for r in records)
    assert all(r["extra"]["batched"] == {"seeds": 2, "failed": True} for r in records)


def test_train_cff_seeds_rejects_configs_that_differ_in_more_than_the_seed(tiny_cff):
    with pytest.raises(ValueError, match="differ only in 'seed'"):
        train_cff_seeds([CFFConfig(**tiny_cff), CFFConfig(**tiny_cff, seed=1, lr=0.01)], device="cpu")
