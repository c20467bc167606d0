"""Tests of lib.cff.diagnostics against docs/studies.md (clamp activation rate, positive-pair density)."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lib.cff.diagnostics import clamp_activation_rate, expected_positive_pair_density, positive_pair_density

FAST = settings(max_examples=25, deadline=None, database=None, derandomize=True)
DT = torch.float64


# --------------------------------------------------------------------------------------------
# Brute-force references (double loops, float64)
# --------------------------------------------------------------------------------------------
def _cosines(z):
    rows = z.detach().to(DT).tolist()
    norms = [math.sqrt(sum(v * v for v in r)) for r in rows]
    return [
        [sum(a * b for a, b in zip(ri, rj)) / (ni * nj) for rj, nj in zip(rows, norms)]
        for ri, ni in zip(rows, norms)
    ]


def brute_car(z, labels, margin):
    """(count of positive pairs with s + m > 1, count of positive pairs, smallest |s + m - 1|)."""
    y = labels.tolist()
    s = _cosines(z)
    hit = total = 0
    gap = math.inf
    for i in range(len(y)):
        for j in range(len(y)):
            if j != i and y[j] == y[i]:
                total += 1
                hit += s[i][j] + margin > 1
                gap = min(gap, abs(s[i][j] + margin - 1))
    return hit, total, gap


def brute_density(labels):
    y = labels.tolist()
    count = sum(1 for i in range(len(y)) for j in range(len(y)) if j != i and y[j] == y[i])
    return count / len(y)


@st.composite
def batches(draw, max_n=20):
    n = draw(st.integers(2, max_n))
    dim = draw(st.integers(2, 6))
    classes = draw(st.integers(1, n))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, dim, generator=g, dtype=DT) * (0.2 + 3 * torch.rand(n, 1, generator=g, dtype=DT))
    labels = torch.randint(0, classes, (n,), generator=g)
    return z, labels


# --------------------------------------------------------------------------------------------
# clamp_activation_rate
# --------------------------------------------------------------------------------------------
@FAST
@given(batches(), st.floats(0.0, 2.5, allow_nan=False), st.sampled_from([DT, torch.float32]))
def test_car_matches_brute_force(batch, margin, dtype):
    z, labels = batch
    hit, total, gap = brute_car(z, labels, margin)
    # Stay clear of the s + m = 1 boundary, where the float32 computation may round either way.
    assume(gap > 1e-5)
    car = clamp_activation_rate(z.to(dtype), labels, margin)
    assert isinstance(car, float)
    if total == 0:
        assert math.isnan(car)
    else:
        assert car == pytest.approx(hit / total, abs=1e-15)
        assert 0.0 <= car <= 1.0


def test_car_covers_partial_rates():
    """A fixed batch with a rate strictly between 0 and 1, checked against the brute force."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(40, 3, generator=g, dtype=DT)
    labels = torch.randint(0, 4, (40,), generator=g)
    for margin in (0.25, 0.4):
        hit, total, gap = brute_car(z, labels, margin)
        assert 0 < hit < total and gap > 1e-6
        assert clamp_activation_rate(z, labels, margin) == pytest.approx(hit / total, abs=1e-15)


def test_car_zero_margin_is_zero():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(30, 5, generator=g, dtype=DT)
    labels = torch.randint(0, 3, (30,), generator=g)
    assert clamp_activation_rate(z, labels, 0.0) == 0.0


def test_car_huge_margin_is_one():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(30, 5, generator=g, dtype=DT)
    labels = torch.randint(0, 3, (30,), generator=g)
    for margin in (2.5, 10.0):  # s >= -1, so s + m > 1 for every positive pair
        assert clamp_activation_rate(z, labels, margin) == 1.0


def test_car_no_positive_is_nan():
    z = torch.randn(7, 4, dtype=DT)
    assert math.isnan(clamp_activation_rate(z, torch.arange(7), 0.4))
    assert math.isnan(clamp_activation_rate(z[:1], torch.zeros(1, dtype=torch.long), 0.4))


def test_car_is_strict_inequality_and_counts_ordered_pairs():
    """s_01 = 0.6 exactly: with m = 0.4, s + m = 1 is NOT counted (spec: s + m > 1).
    s_23 = 0.8: counted at m = 0.4. Both ordered pairs (i, j) and (j, i) count."""
    z = torch.tensor(
        [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0], [0.0, 0.6, 0.8]], dtype=DT
    )
    labels = torch.tensor([0, 0, 1, 1])
    assert clamp_activation_rate(z, labels, 0.4) == 0.5
    assert clamp_activation_rate(z, labels, 0.41) == 1.0
    # three members of one class: 6 ordered pairs, only s_01 = s_10 saturated at m = 0.3
    z3 = torch.tensor([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]], dtype=DT)
    assert clamp_activation_rate(z3, torch.zeros(3, dtype=torch.long), 0.3) == pytest.approx(2 / 6)


def test_car_accepts_tensors_requiring_grad():
    z = torch.randn(8, 3, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    car = clamp_activation_rate(z, labels, 0.4)
    assert isinstance(car, float) and 0.0 <= car <= 1.0


def test_car_keeps_float64_precision():
    phi = math.acos(0.6 + 3e-9)
    z = torch.tensor([[1.0, 0.0], [math.cos(phi), math.sin(phi)]], dtype=DT)
    labels = torch.tensor([0, 0])
    assert brute_car(z, labels, 0.4)[0] == 2
    assert clamp_activation_rate(z, labels, 0.4) == 1.0  # library returns 0.0


# --------------------------------------------------------------------------------------------
# positive_pair_density
# --------------------------------------------------------------------------------------------
@FAST
@given(st.lists(st.integers(0, 6), min_size=1, max_size=40))
def test_density_matches_brute_force(ys):
    labels = torch.tensor(ys)
    d = positive_pair_density(labels)
    assert isinstance(d, float)
    assert d == pytest.approx(brute_density(labels), abs=1e-12)
    # closed form: mean |P(i)| = sum_k n_k^2 / 2N - 1
    counts = Counter(ys)
    assert d == pytest.approx(sum(c * c for c in counts.values()) / len(ys) - 1, abs=1e-12)


@pytest.mark.parametrize("n_per_view,k", [(500, 10), (500, 100), (512, 8), (512, 16), (512, 128), (6, 3)])
def test_density_class_balanced_is_2n_over_k_minus_1(n_per_view, k):
    assert n_per_view % k == 0
    view = torch.arange(n_per_view) % k
    labels = torch.cat([view, view])  # [view1; view2] labels tiled twice
    assert positive_pair_density(labels) == pytest.approx(2 * n_per_view / k - 1, abs=1e-12)


@pytest.mark.parametrize("k,formula,nearest", [(10, 101.4, 101), (100, 9.24, 9)])
def test_density_studies_batch_512(k, formula, nearest):
    """docs/studies.md (study 2): about 101 positives per anchor for 10 classes, about 9 for 100, at batch 512.

    2N = 1024 views; 2N/K - 1 = 101.4 (K=10) and 9.24 (K=100). 512 is not divisible by K, so the
    most balanced batch (class sizes differing by one) gives slightly more: sum n_k^2/2N - 1 =
    101.40625 and 9.28125.
    """
    assert 2 * 512 / k - 1 == pytest.approx(formula)
    view = torch.arange(512) % k
    labels = torch.cat([view, view])
    d = positive_pair_density(labels)
    counts = Counter(labels.tolist())
    assert d == pytest.approx(sum(c * c for c in counts.values()) / 1024 - 1, abs=1e-12)
    assert d == pytest.approx({10: 101.40625, 100: 9.28125}[k], abs=1e-12)
    assert abs(d - formula) < 0.05
    assert round(d) == nearest


def test_density_extremes():
    assert positive_pair_density(torch.arange(9)) == 0.0  # all distinct
    assert positive_pair_density(torch.zeros(9, dtype=torch.long)) == 8.0  # one class
    assert positive_pair_density(torch.tensor([3, 3])) == 1.0  # the other view only


# --------------------------------------------------------------------------------------------
# expected_positive_pair_density (studies 2 and 3 set the measured density beside it)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,k", [(256, 10), (256, 100), (512, 10), (500, 100), (6, 3)])
def test_expected_density_balanced_is_the_closed_form_and_the_library_count(n, k):
    """A class-balanced batch: the closed form 2N/K - 1, the library's count and the brute force agree."""
    labels = torch.arange(n) % k
    labels = torch.cat([labels, labels])
    expected = expected_positive_pair_density(n, k)
    assert expected == pytest.approx(2 * n / k - 1, abs=1e-12)
    if n % k == 0:  # only then can a batch be exactly balanced
        assert positive_pair_density(labels) == pytest.approx(expected, abs=1e-12)
        assert brute_density(labels) == pytest.approx(expected, abs=1e-12)
    # the whole balanced set in one batch (M = N) is the balanced case too
    assert expected_positive_pair_density(n, k, n) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n,k,m", [(64, 10, 1000), (32, 8, 64), (50, 25, 500)])
def test_expected_density_of_random_batches_matches_simulation(n, k, m):
    """Batches drawn without replacement from a balanced set: the mean measured density over many
    draws equals the hypergeometric expectation (within 4 standard errors)."""
    pool = torch.arange(m) % k
    g = torch.Generator().manual_seed(0)
    draws = []
    for _ in range(4000):
        y = pool[torch.randperm(m, generator=g)[:n]]
        draws.append(positive_pair_density(torch.cat([y, y])))
    draws = torch.tensor(draws, dtype=DT)
    se = float(draws.std() / math.sqrt(len(draws)))
    expected = expected_positive_pair_density(n, k, m)
    assert abs(float(draws.mean()) - expected) < 4 * se
    # random batches hold more same-class pairs than a balanced one
    assert expected > expected_positive_pair_density(n, k)


@pytest.mark.parametrize("kwargs,name", [(dict(batch_size=0, num_classes=10), "batch_size"),
                                         (dict(batch_size=8, num_classes=True), "num_classes"),
                                         (dict(batch_size=8, num_classes=2, dataset_size=4), "dataset_size")])
def test_expected_density_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        expected_positive_pair_density(**kwargs)
