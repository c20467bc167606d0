"""Tests of lib.core.losses against docs/studies.md, "The CFF model (studies 1–3)".

The reference below (``naive_margin_supcon``) is written independently of the library, straight
from the spec, with explicit Python loops over anchors i and pairs j, in float64.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.cff.training import CFFConfig
from lib.core.losses import SSL_LOSSES, margin_schedule, margin_supcon, positive_mask
from lib.core.params import ParameterError
from lib.ssl.training import SSLConfig

MODES = ("clamp", "subtract", "none")
STABILIZERS = ("detach", "direct")
TAU = 0.15  # the spec's default temperature
DT = torch.float64

# Few examples, no example database written into the repository, reproducible runs.
FAST = settings(max_examples=20, deadline=None, database=None, derandomize=True)

VALUE_TOL = 1e-12


# --------------------------------------------------------------------------------------------
# Independent naive reference
# --------------------------------------------------------------------------------------------
def naive_margin_supcon(z, labels, margin, mode, stabilizer, temperature=TAU):
    """Loop-by-loop transcription of the spec (autograd-capable, float64)."""
    n = z.shape[0]
    y = [int(v) for v in labels]
    m = 0.0 if mode == "none" else float(margin)
    # f_i = z_i / ||z_i||
    f = [z[i] / torch.sqrt(torch.sum(z[i] * z[i])) for i in range(n)]
    one = torch.ones((), dtype=z.dtype)
    total = torch.zeros((), dtype=z.dtype)
    for i in range(n):
        positives = [j for j in range(n) if j != i and y[j] == y[i]]  # P(i)
        contrast = [j for j in range(n) if j != i]  # A(i)
        row = []
        for j in range(n):  # the whole row, diagonal included
            s = torch.dot(f[i], f[j])
            if mode == "clamp" and j in positives:
                s = s + m
                if s.item() >= 1.0:  # saturated: s' = 1, a constant
                    s = one
            row.append(s / temperature)
        row_max = torch.stack(row).max()
        if stabilizer == "detach":
            row_max = row_max.detach()
        a = [x - row_max for x in row]
        log_den = torch.log(sum(torch.exp(a[k]) for k in contrast))
        if not positives:
            continue  # anchor without positives contributes 0
        ell = torch.zeros((), dtype=z.dtype)
        for j in positives:
            log_p = a[j] - log_den
            if mode == "subtract":
                log_p = log_p - m
            ell = ell - log_p
        total = total + ell / len(positives)
    return total / n


def _inputs(seed: int, n: int, dim: int = 4, classes: int = 3):
    """Random float64 features and labels: some near-duplicate positives (saturate under clamp),
    ordinary positives, and the last anchor in a class of its own (no positive)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, dim, generator=g, dtype=DT)
    labels = torch.randint(0, classes, (n,), generator=g)
    labels[-1] = classes + 7  # no positive
    labels[1] = labels[0]
    z[1] = z[0] + 0.05 * torch.randn(dim, generator=g, dtype=DT)  # s_01 close to 1
    z = z * (0.5 + 2 * torch.rand(n, 1, generator=g, dtype=DT))  # arbitrary norms
    return z, labels


def _value_and_grad(fn, z, *args, **kwargs):
    z = z.detach().clone().requires_grad_(True)
    # + 0 * z.sum(): a loss in which every pair is saturated is a constant with no graph
    loss = fn(z, *args, **kwargs) + 0 * z.sum()
    (grad,) = torch.autograd.grad(loss, z)
    return loss.detach(), grad


def _cos(z):
    f = z / z.norm(dim=1, keepdim=True)
    return f @ f.T


# --------------------------------------------------------------------------------------------
# 1. Library == naive reference, value and gradient, all six combinations
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,stabilizer", list(itertools.product(MODES, STABILIZERS)))
@pytest.mark.parametrize("n", [6, 16])
@pytest.mark.parametrize("margin", [0.25, 0.4])
def test_matches_naive_reference(mode, stabilizer, n, margin):
    for seed in range(3 if n == 6 else 1):
        z, labels = _inputs(seed, n)
        if mode == "clamp" and margin > 0 and n == 16:
            # the inputs really exercise both branches of the clamp
            pos = positive_mask(labels)
            sat = (_cos(z) + margin >= 1) & pos
            assert sat.any() and (pos & ~sat).any()
        lib_v, lib_g = _value_and_grad(
            margin_supcon, z, labels, margin, mode=mode, stabilizer=stabilizer
        )
        ref_v, ref_g = _value_and_grad(naive_margin_supcon, z, labels, margin, mode, stabilizer)
        assert lib_v.dtype == DT
        torch.testing.assert_close(lib_v, ref_v, rtol=1e-12, atol=VALUE_TOL)
        torch.testing.assert_close(lib_g, ref_g, rtol=1e-9, atol=1e-12)


def test_matches_naive_reference_other_temperature():
    z, labels = _inputs(11, 8)
    for mode in MODES:
        lib_v, lib_g = _value_and_grad(margin_supcon, z, labels, 0.3, mode=mode, temperature=0.5)
        ref_v, ref_g = _value_and_grad(
            naive_margin_supcon, z, labels, 0.3, mode, "detach", temperature=0.5
        )
        torch.testing.assert_close(lib_v, ref_v, rtol=1e-12, atol=VALUE_TOL)
        torch.testing.assert_close(lib_g, ref_g, rtol=1e-9, atol=1e-12)


def test_default_temperature_is_0_15():
    z, labels = _inputs(3, 8)
    for mode in MODES:
        assert torch.equal(
            margin_supcon(z, labels, 0.4, mode=mode),
            margin_supcon(z, labels, 0.4, mode=mode, temperature=0.15),
        )
        assert not torch.allclose(
            margin_supcon(z, labels, 0.4, mode=mode),
            margin_supcon(z, labels, 0.4, mode=mode, temperature=0.2),
        )


# Random shapes and labels for the property tests.
@st.composite
def batches(draw, max_n=12):
    n = draw(st.integers(2, max_n))
    dim = draw(st.integers(2, 5))
    classes = draw(st.integers(1, n))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, dim, generator=g, dtype=DT)
    labels = torch.randint(0, classes, (n,), generator=g)
    return z, labels


margins = st.floats(0.0, 1.5, allow_nan=False)


@FAST
@given(batches(max_n=10), margins, st.sampled_from(list(itertools.product(MODES, STABILIZERS))))
def test_matches_naive_reference_random_shapes(batch, margin, combo):
    z, labels = batch
    mode, stabilizer = combo
    lib_v, lib_g = _value_and_grad(margin_supcon, z, labels, margin, mode=mode, stabilizer=stabilizer)
    ref_v, ref_g = _value_and_grad(naive_margin_supcon, z, labels, margin, mode, stabilizer)
    torch.testing.assert_close(lib_v, ref_v, rtol=1e-12, atol=VALUE_TOL)
    torch.testing.assert_close(lib_g, ref_g, rtol=1e-9, atol=1e-11)


# --------------------------------------------------------------------------------------------
# 2. subtract: gradient of none, value shifted by m * (fraction of anchors with a positive)
# --------------------------------------------------------------------------------------------
@FAST
@given(batches(max_n=24), margins, st.sampled_from(STABILIZERS))
def test_subtract_is_gradient_neutral_shift(batch, margin, stabilizer):
    z, labels = batch
    v_none, g_none = _value_and_grad(
        margin_supcon, z, labels, margin, mode="none", stabilizer=stabilizer
    )
    v_sub, g_sub = _value_and_grad(
        margin_supcon, z, labels, margin, mode="subtract", stabilizer=stabilizer
    )
    y = labels.tolist()
    n = len(y)
    with_pos = sum(any(y[j] == y[i] for j in range(n) if j != i) for i in range(n))
    torch.testing.assert_close(g_sub, g_none, rtol=1e-12, atol=1e-13)
    assert float(v_sub - v_none) == pytest.approx(
        margin * with_pos / n, rel=1e-10, abs=VALUE_TOL
    )


def test_none_ignores_margin():
    z, labels = _inputs(5, 10)
    ref = margin_supcon(z, labels, 0.0, mode="none")
    for m in (0.1, 0.4, 3.0):
        assert torch.equal(margin_supcon(z, labels, m, mode="none"), ref)


def test_zero_margin_clamp_and_subtract_equal_none():
    z, labels = _inputs(6, 10)
    v_none, g_none = _value_and_grad(margin_supcon, z, labels, 0.0, mode="none")
    for mode in ("clamp", "subtract"):
        v, g = _value_and_grad(margin_supcon, z, labels, 0.0, mode=mode)
        torch.testing.assert_close(v, v_none, rtol=1e-14, atol=1e-14)
        torch.testing.assert_close(g, g_none, rtol=1e-12, atol=1e-14)


def test_subtract_margin_not_rounded_to_float32():
    z = torch.tensor([[0.3, -1.2, 2.0]], dtype=DT).repeat(4, 1)
    labels = torch.zeros(4, dtype=torch.long)
    shift = margin_supcon(z, labels, 0.4, mode="subtract") - margin_supcon(z, labels, 0.4, mode="none")
    assert float(shift) == pytest.approx(0.4, abs=1e-14)  # got 0.4000000059604645


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_loss_dtype_follows_input_in_every_mode(dtype):
    z, labels = _inputs(4, 8)
    z = z.to(dtype)
    assert {margin_supcon(z, labels, 0.4, mode=mode).dtype for mode in MODES} == {dtype}


# --------------------------------------------------------------------------------------------
# 3. detach and direct agree in value and gradient
# --------------------------------------------------------------------------------------------
@FAST
@given(batches(max_n=24), margins, st.sampled_from(MODES))
def test_detach_and_direct_agree(batch, margin, mode):
    z, labels = batch
    v_d, g_d = _value_and_grad(margin_supcon, z, labels, margin, mode=mode, stabilizer="detach")
    v_r, g_r = _value_and_grad(margin_supcon, z, labels, margin, mode=mode, stabilizer="direct")
    torch.testing.assert_close(v_r, v_d, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(g_r, g_d, rtol=1e-10, atol=1e-12)


def test_detach_and_direct_agree_float32():
    z, labels = _inputs(8, 32, dim=8, classes=4)
    z = z.float()
    for mode in MODES:
        v_d, g_d = _value_and_grad(margin_supcon, z, labels, 0.4, mode=mode, stabilizer="detach")
        v_r, g_r = _value_and_grad(margin_supcon, z, labels, 0.4, mode=mode, stabilizer="direct")
        torch.testing.assert_close(v_r, v_d, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(g_r, g_d, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Further invariances: row scaling (features are normalised inside), joint permutation
# --------------------------------------------------------------------------------------------
@FAST
@given(batches(max_n=12), margins, st.sampled_from(MODES), st.integers(0, 1000))
def test_invariant_to_row_scale_and_joint_permutation(batch, margin, mode, seed):
    z, labels = batch
    g = torch.Generator().manual_seed(seed)
    ref = margin_supcon(z, labels, margin, mode=mode)
    scale = 0.1 + 10 * torch.rand(len(labels), 1, generator=g, dtype=DT)
    perm = torch.randperm(len(labels), generator=g)
    torch.testing.assert_close(margin_supcon(z * scale, labels, margin, mode=mode), ref)
    torch.testing.assert_close(margin_supcon(z[perm], labels[perm], margin, mode=mode), ref)


# --------------------------------------------------------------------------------------------
# 4. clamp: saturated positive pairs (s + m >= 1) carry no gradient through s_ij
# --------------------------------------------------------------------------------------------
def _pair_geometry(phi, n_other=6, dim_other=4, seed=0):
    """Features where a scalar phi moves ONLY s_01 (= s_10).

    Rows 2.. live in the first ``dim_other`` coordinates (subspace U). Rows 0 and 1 are
    f_0 = a w + b e1 and f_1 = a w + b (cos phi e1 + sin phi e2), with w a unit vector of U and
    e1, e2 two extra coordinates orthogonal to U. Then ||f_0|| = ||f_1|| = 1 for every phi,
    s_0k and s_1k (k >= 2) do not depend on phi, and s_01 = a^2 + b^2 cos phi.
    """
    g = torch.Generator().manual_seed(seed)
    a, b = 0.8, 0.6
    w = torch.randn(dim_other, generator=g, dtype=DT)
    w = w / w.norm()
    others = torch.randn(n_other, dim_other, generator=g, dtype=DT)
    zero2 = torch.zeros(2, dtype=DT)
    f0 = torch.cat([a * w, torch.tensor([b, 0.0], dtype=DT)])
    rows_other = torch.cat([others, zero2.expand(n_other, 2)], dim=1)

    def build(phi_t):
        f1 = torch.cat([a * w, b * torch.stack([torch.cos(phi_t), torch.sin(phi_t)])])
        return torch.cat([f0[None], f1[None], rows_other])

    # rows 0, 1 and 2 share a class (row 2 keeps anchor 0 with a second positive), the rest mixed
    labels = torch.tensor([0, 0, 0] + [1 + (k % 2) for k in range(n_other - 1)])
    return build, labels, (lambda p: a * a + b * b * math.cos(p))


def _loss_and_dphi(phi, margin, mode, stabilizer="detach"):
    build, labels, _ = _pair_geometry(phi)
    phi_t = torch.tensor(phi, dtype=DT, requires_grad=True)
    loss = margin_supcon(build(phi_t), labels, margin, mode=mode, stabilizer=stabilizer)
    (d,) = torch.autograd.grad(loss, phi_t)
    return loss.item(), d.item()


def test_pair_geometry_moves_only_one_cosine():
    build, _, s01 = _pair_geometry(0.0)
    s_a = _cos(build(torch.tensor(0.5, dtype=DT)))
    s_b = _cos(build(torch.tensor(1.3, dtype=DT)))
    diff = (s_a - s_b).abs() > 1e-14
    expected = torch.zeros_like(diff)
    expected[0, 1] = expected[1, 0] = True
    assert torch.equal(diff, expected)
    assert s_a[0, 1].item() == pytest.approx(s01(0.5), abs=1e-14)


@pytest.mark.parametrize("stabilizer", STABILIZERS)
def test_clamp_saturated_pair_has_no_gradient(stabilizer):
    margin = 0.25
    _, _, s01 = _pair_geometry(0.0)
    phi_sat, phi_free = 0.5, 1.6
    assert s01(phi_sat) + margin > 1.0 + 1e-3 and s01(phi_free) + margin < 1.0 - 1e-3

    _, d_sat = _loss_and_dphi(phi_sat, margin, "clamp", stabilizer)
    _, d_free = _loss_and_dphi(phi_free, margin, "clamp", stabilizer)
    _, d_none = _loss_and_dphi(phi_sat, margin, "none", stabilizer)
    assert abs(d_sat) < 1e-12  # saturated: no gradient through s_01
    assert abs(d_free) > 1e-3  # control: unsaturated pair does feel the loss
    assert abs(d_none) > 1e-3  # control: without the clamp the same pair feels the loss

    # and the loss is flat (not just first-order) while the pair stays saturated
    v0, _ = _loss_and_dphi(phi_sat, margin, "clamp", stabilizer)
    v1, _ = _loss_and_dphi(phi_sat + 0.05, margin, "clamp", stabilizer)
    assert s01(phi_sat + 0.05) + margin > 1.0
    assert v1 == pytest.approx(v0, abs=1e-13)
    v2, _ = _loss_and_dphi(phi_free + 0.05, margin, "clamp", stabilizer)
    v3, _ = _loss_and_dphi(phi_free, margin, "clamp", stabilizer)
    assert abs(v2 - v3) > 1e-4


def test_clamp_boundary_s_plus_m_equal_one_is_saturated():
    """Spec: pairs with s + m >= 1 carry no gradient -- including equality.

    z_0 = (1, 0, 0), z_1 = (0.6, 0.8, 0) give s_01 = 0.6 exactly in float64, and 0.6 + 0.4 == 1.
    The negative z_2 = (0, 0, 1) is orthogonal to the plane of z_0, z_1, so the only dependence of
    the loss on the in-plane coordinates of z_0 and z_1 is through s_01.
    """
    z = torch.tensor([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], dtype=DT)
    labels = torch.tensor([0, 0, 1])
    assert (_cos(z)[0, 1] + 0.4).item() == 1.0
    for stabilizer in STABILIZERS:
        _, g_eq = _value_and_grad(margin_supcon, z, labels, 0.4, mode="clamp", stabilizer=stabilizer)
        assert g_eq[:2, :2].abs().max() < 1e-15
        _, g_lt = _value_and_grad(margin_supcon, z, labels, 0.39, mode="clamp", stabilizer=stabilizer)
        assert g_lt[:2, :2].abs().max() > 1e-3


# --------------------------------------------------------------------------------------------
# 5. Analytic values
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 5, 16])
@pytest.mark.parametrize("stabilizer", STABILIZERS)
def test_identical_features_one_class(n, stabilizer):
    """All s_ij = 1: every logit is equal, log p_ij = -log(2N-1).

    none: log(2N-1); subtract: log(2N-1) + m; clamp: min(1 + m, 1) = 1 changes nothing, so
    log(2N-1), and every positive is saturated, so the gradient vanishes.
    """
    z = torch.tensor([[0.3, -1.2, 2.0]], dtype=DT).repeat(n, 1)
    labels = torch.zeros(n, dtype=torch.long)
    m = 0.4
    expected = {"none": math.log(n - 1), "subtract": math.log(n - 1) + m, "clamp": math.log(n - 1)}
    for mode in MODES:
        v, g = _value_and_grad(margin_supcon, z, labels, m, mode=mode, stabilizer=stabilizer)
        assert float(v) == pytest.approx(expected[mode], abs=VALUE_TOL)
        assert g.abs().max() < 1e-9


def _pairs_in_private_planes(k, c, singletons=0):
    """K classes, two views each, with cosine c between the views; different classes (and
    ``singletons`` extra one-sample classes) orthogonal to each other."""
    phi = math.acos(c)
    dim = 2 * k + singletons
    z = torch.zeros(2 * k + singletons, dim, dtype=DT)
    for cls in range(k):
        z[2 * cls, 2 * cls] = 1.0
        z[2 * cls + 1, 2 * cls] = math.cos(phi)
        z[2 * cls + 1, 2 * cls + 1] = math.sin(phi)
    for s in range(singletons):
        z[2 * k + s, 2 * k + s] = 1.0
    labels = torch.tensor([cls for cls in range(k) for _ in range(2)] + list(range(k, k + singletons)))
    return z, labels


@pytest.mark.parametrize("k,c,singletons", [(3, 0.3, 0), (5, 0.7, 0), (4, 0.5, 2), (2, -0.2, 1)])
@pytest.mark.parametrize("stabilizer", STABILIZERS)
def test_one_positive_orthogonal_negatives(k, c, singletons, stabilizer):
    """Anchor with one positive at cosine c' and R = 2N - 2 negatives at cosine 0:
    l = -c'/tau + log(exp(c'/tau) + R);  none c' = c;  clamp c' = min(c + m, 1);
    subtract l_none + m. Singletons contribute 0 but count in the mean over 2N anchors."""
    z, labels = _pairs_in_private_planes(k, c, singletons)
    n = len(labels)
    r = n - 2

    def ell(cp):
        return -cp / TAU + math.log(math.exp(cp / TAU) + r)

    frac = 2 * k / n
    for m in (0.25, 0.4, 0.9):
        expected = {
            "none": frac * ell(c),
            "subtract": frac * (ell(c) + m),
            "clamp": frac * ell(min(c + m, 1.0)),
        }
        for mode in MODES:
            v = margin_supcon(z, labels, m, mode=mode, stabilizer=stabilizer)
            assert float(v) == pytest.approx(expected[mode], rel=1e-12, abs=VALUE_TOL), (mode, m)


@pytest.mark.parametrize("mode", MODES)
def test_one_positive_orthogonal_negatives_gradient_in_cosine(mode):
    """Same geometry, d loss / d phi with c = cos phi for every class:
    dl/dc' = (p - 1)/tau with p = e^{c'/tau} / (e^{c'/tau} + R); clamp multiplies by 0 when
    c + m >= 1."""
    k, m = 3, 0.25
    r = 2 * k - 2
    for c in (0.2, 0.6, 0.9):
        phi = torch.tensor(math.acos(c), dtype=DT, requires_grad=True)
        # class cls: view 1 = e_{2cls}, view 2 = cos(phi) e_{2cls} + sin(phi) e_{2cls+1}
        view1 = torch.eye(2 * k, dtype=DT)[0::2]
        view2 = torch.cos(phi) * torch.eye(2 * k, dtype=DT)[0::2] + torch.sin(phi) * torch.eye(
            2 * k, dtype=DT
        )[1::2]
        z = torch.stack([view1, view2], dim=1).reshape(2 * k, 2 * k)
        labels = torch.arange(k).repeat_interleave(2)
        (d,) = torch.autograd.grad(margin_supcon(z, labels, m, mode=mode), phi)
        cp = min(c + m, 1.0) if mode == "clamp" else c
        p = math.exp(cp / TAU) / (math.exp(cp / TAU) + r)
        dl_dc = 0.0 if (mode == "clamp" and c + m >= 1) else (p - 1) / TAU
        expected = dl_dc * (-math.sin(math.acos(c)))
        assert float(d) == pytest.approx(expected, rel=1e-10, abs=1e-13), (mode, c)


def test_no_positive_anywhere_gives_zero():
    z, _ = _inputs(2, 7)
    labels = torch.arange(7)
    for mode in MODES:
        v, g = _value_and_grad(margin_supcon, z, labels, 0.4, mode=mode)
        assert float(v) == 0.0
        assert torch.all(g == 0)


# --------------------------------------------------------------------------------------------
# positive_mask
# --------------------------------------------------------------------------------------------
@FAST
@given(st.lists(st.integers(0, 4), min_size=1, max_size=15))
def test_positive_mask_brute_force(ys):
    mask = positive_mask(torch.tensor(ys))
    assert mask.dtype == torch.bool
    expected = [[i != j and ys[i] == ys[j] for j in range(len(ys))] for i in range(len(ys))]
    assert mask.tolist() == expected


# --------------------------------------------------------------------------------------------
# 6. Argument checks: ValueError naming the parameter
# --------------------------------------------------------------------------------------------
def _ok_batch():
    return torch.randn(6, 3, dtype=DT), torch.tensor([0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(mode="clamped"), "mode"),
        (dict(mode="CLAMP"), "mode"),
        (dict(stabilizer="stopgrad"), "stabilizer"),
        (dict(stabilizer=""), "stabilizer"),
        (dict(margin=-0.1), "margin"),
        (dict(margin=float("nan")), "margin"),
        (dict(margin=float("inf")), "margin"),
        (dict(margin=-0.1, mode="none"), "margin"),
        (dict(margin=-0.1, mode="subtract"), "margin"),
    ],
)
def test_bad_arguments_raise_naming_parameter(kwargs, name):
    z, labels = _ok_batch()
    margin = kwargs.pop("margin", 0.4)
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        margin_supcon(z, labels, margin, **kwargs)


@pytest.mark.parametrize("config", [CFFConfig, SSLConfig])
@pytest.mark.parametrize("temperature", [0.0, -0.15, float("nan"), float("inf")])
def test_a_bad_temperature_is_refused_once_where_it_is_declared(config, temperature):
    """The temperature's one range check is the run config's (the losses take it checked), naming it and
    its allowed values before any compute."""
    with pytest.raises(ParameterError, match=r"temperature=.* is not allowed: a finite number in \(0.0, inf\]"):
        config(temperature=temperature)


@pytest.mark.parametrize("bad_labels", [torch.zeros(5, dtype=torch.long), torch.zeros(6, 1, dtype=torch.long),
                                        torch.zeros(7, dtype=torch.long)])
def test_label_shape_mismatch_raises(bad_labels):
    z, _ = _ok_batch()
    with pytest.raises(ValueError, match=r"\blabels\b"):
        margin_supcon(z, bad_labels, 0.4)


@pytest.mark.parametrize("bad_z", [torch.randn(6, dtype=DT), torch.randn(6, 2, 3, dtype=DT)])
def test_z_shape_raises(bad_z):
    with pytest.raises(ValueError, match=r"\bz\b"):
        margin_supcon(bad_z, torch.zeros(6, dtype=torch.long), 0.4)


# --------------------------------------------------------------------------------------------
# 7. Margin schedule
# --------------------------------------------------------------------------------------------
def test_margin_schedule_cff_default_8_layers():
    sched = margin_schedule(0.4, 0.1, 8)
    assert len(sched) == 8
    assert [round(m, 3) for m in sched] == [0.4, 0.357, 0.314, 0.271, 0.229, 0.186, 0.143, 0.1]
    assert sched[0] == 0.4
    # linear: constant step (0.1 - 0.4) / 7
    assert np.allclose(np.diff(sched), -0.3 / 7, rtol=0, atol=1e-15)
    # "at layer 0 a positive pair saturates as soon as its cosine reaches 0.6"
    assert 1 - sched[0] == pytest.approx(0.6, abs=1e-15)


def test_margin_schedule_endpoints_exact():
    for m0, m_last, layers in [(0.4, 0.1, 8), (0.4, 0.1, 5), (0.3, 0.05, 6), (0.25, 0.2, 3)]:
        sched = margin_schedule(m0, m_last, layers)
        assert sched[0] == m0 and sched[-1] == m_last, (m0, m_last, layers, sched)


def test_margin_schedule_other_lengths():
    assert margin_schedule(0.4, 0.1, 1) == [0.4]
    assert margin_schedule(0.4, 0.1, 2) == pytest.approx([0.4, 0.1], abs=1e-15)
    assert margin_schedule(0.4, 0.1, 5) == pytest.approx([0.4, 0.325, 0.25, 0.175, 0.1], abs=1e-15)
    assert margin_schedule(0.2, 0.2, 4) == pytest.approx([0.2] * 4, abs=1e-15)
    assert margin_schedule(0.1, 0.4, 4) == pytest.approx([0.1, 0.2, 0.3, 0.4], abs=1e-15)


@pytest.mark.parametrize(
    "args,name",
    [((0.4, 0.1, 0), "layers"), ((0.4, 0.1, -3), "layers")],
)
def test_margin_schedule_bad_arguments(args, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        margin_schedule(*args)


# ------------------------------------------------------------------- the self-supervised registry


@pytest.mark.parametrize("name", sorted(SSL_LOSSES))
def test_every_registered_ssl_loss_called_as_the_trainer_calls_it_gives_a_scalar_with_gradient(name):
    """lib.ssl.training.make_step calls fn(p1, p2, z1, z2) for a loss taking predictions, fn(z1, z2, temperature)
    otherwise; the scalar must be finite and reach every input that carries gradient."""
    loss = SSL_LOSSES[name]
    g = torch.Generator().manual_seed(0)
    z1, z2, p1, p2 = (torch.randn(6, 4, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(4))
    inputs = [p1, p2, z1, z2] if loss.predictions else [z1, z2]
    value = loss.fn(*inputs) if loss.predictions else loss.fn(z1, z2, 0.5)
    assert value.shape == () and torch.isfinite(value)
    grads = torch.autograd.grad(value, inputs, allow_unused=True)
    # SimSiam's targets are detached (stop-gradient): only the predictions learn
    learning = grads[:2] if loss.predictions else grads
    assert all(gr is not None and gr.abs().max() > 0 for gr in learning)
    if loss.predictions:
        assert all(gr is None for gr in grads[2:])
