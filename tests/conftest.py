"""Shared test fixtures: the tiny CFF config every training test uses; the suite's processes."""
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

# The real subsets the data tests read (cifar10.npz, fashion_mnist.npz, mnist.npz): ../shared/data beside the
# repository, or the folder named by TEST_DATA_ROOT. Without them those tests skip, saying how to get them.
SHARED_DATA = Path(os.environ.get("TEST_DATA_ROOT") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


def missing_data(what: str) -> str:
    """The skip message of a test whose real data is absent: what is missing, where the tests look, how to get it."""
    return (f"{what} is absent: the tests look for real subsets (cifar10.npz, fashion_mnist.npz, mnist.npz) in "
            f"{SHARED_DATA} (../shared/data beside the repository, or set TEST_DATA_ROOT to a folder); make such "
            "arrays as the README's \"Data sources\" says, or fetch the full sets with the download parameter "
            "(-p download True; --download for lib.run_all)")

# Small enough to train in about a second on one core, large enough to touch every code path.
TINY_CFF = dict(dataset="shapes", dataset_options={"num_classes": 6, "difficulty": 0.2, "n_train": 180, "n_test": 80},
                layers=2, embed_dim=16, heads=2, patch=4, epochs=2, batch_size=64, probe_epochs=3, threads=1)


@pytest.fixture
def tiny_cff():
    return dict(TINY_CFF)


# The suite runs in one process per core (pytest-xdist, ``-n auto`` in pyproject.toml), at most this many: each
# holds torch and starts notebook kernels, and the longest file (the notebooks' executions) bounds the gain.
MOST_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: the cores this process may use, at most MOST_WORKERS (``-n 0`` runs in this process)."""
    return max(1, min(len(os.sched_getaffinity(0)), MOST_WORKERS))


def pytest_configure(config):
    """In a worker, torch's threads are this worker's share of the cores: more threads than cores make torch's
    OpenMP threads wait on each other. (A training run sets its own count from its config's ``threads``.)"""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is not None:
        import torch

        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // int(workers)))


def pytest_terminal_summary(terminalreporter):
    """Say which comparison the golden test made: exact, or within tolerance and why (tests/golden). Under
    xdist this process collected no test, so it reads the comparison from the module itself."""
    ran = any("test_golden.py::test_metrics_match" in getattr(report, "nodeid", "")
              for reports in terminalreporter.stats.values() for report in reports)
    if ran:
        from tests import test_golden  # torch and the goldens: only when the golden tests ran

        terminalreporter.write_line(f"golden metrics: {test_golden.COMPARISON}")


def brown_forsythe_reference(a, b) -> float:
    """Brown–Forsythe without structural zeros (Hines & Hines 2000), written from its definition for the tests:
    scipy's one-way ANOVA of |x - median| per arm, less the deviation that is zero by construction (odd n: the
    median's own; even n: one of the middle pair's two equal deviations)."""
    def deviations(x):
        x = np.sort(np.asarray(list(x), dtype=float))
        return np.delete(np.abs(x - np.median(x)), len(x) // 2)
    return float(st.f_oneway(deviations(a), deviations(b)).pvalue)
