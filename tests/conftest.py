"""Shared test fixtures: the tiny CFF config every training test uses."""
import sys
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# Small enough to train in about a second on one core, large enough to touch every code path.
TINY_CFF = dict(dataset="shapes", dataset_options={"num_classes": 6, "difficulty": 0.2, "n_train": 180, "n_test": 80},
                layers=2, embed_dim=16, heads=2, patch=4, epochs=2, batch_size=64, probe_epochs=3, threads=1)


@pytest.fixture
def tiny_cff():
    return dict(TINY_CFF)


def pytest_terminal_summary(terminalreporter):
    """Say which comparison the golden test made: exact, or within tolerance and why (tests/golden)."""
    golden = sys.modules.get("tests.test_golden")
    ran = any("test_golden.py::test_metrics_match" in getattr(report, "nodeid", "")
              for reports in terminalreporter.stats.values() for report in reports)
    if golden is not None and ran:
        terminalreporter.write_line(f"golden metrics: {golden.COMPARISON}")
