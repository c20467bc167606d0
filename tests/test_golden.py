"""The redesign of issue 15 changes no number: fixed-seed smoke runs of every training function give
the metrics recorded before it (tests/golden/metrics_before_issue15.json, written at the commit it names,
with one torch thread). Since issue 16 the CFF defaults follow CFF's code; a record's config made before
then is built with ``CFFConfig.from_legacy``, which names the earlier settings (``init="trunc_normal"``,
``normalization="subset"``, ``eval_protocol="clean"``), and those still give the recorded numbers.

Bit for bit where the numerics are the golden's (``exact_on``: CPU model and capability, kernel variables,
BLAS, oneDNN, torch and numpy versions); elsewhere within the tolerance that ``tests.golden`` derives (the
float32 rounding of the first steps for stable runs, the spread of other seeds for chaotic ones).
The session's summary says which comparison was made (``tests/conftest.py``), and so does every failure.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lib.run.provenance import numerics_differences
from tests.golden import (
    ACCURACY_ATOL,
    GOLDEN,
    GOLDEN_KEYS,
    RTOL,
    SEED_FACTOR,
    golden_metrics,
    numerics_here,
    out_of_tolerance,
    spread_of,
    train_golden,
)

DIFFERENCES = numerics_differences(GOLDEN["exact_on"], numerics_here(), keys=GOLDEN_KEYS)
COMPARISON = "exact" if not DIFFERENCES else (
    f"within tolerance ({'; '.join(DIFFERENCES)}; stable runs to {RTOL:g} relative, chaotic runs within "
    f"{SEED_FACTOR} x the spread of other seeds, accuracies + {ACCURACY_ATOL:.3f})")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(GOLDEN["runs"]))
def test_metrics_match_those_recorded_before_the_redesign(name):
    expected, now = golden_metrics(name), train_golden(name)
    if not DIFFERENCES:
        assert now == expected, f"comparison: exact (numerics as recorded: {GOLDEN['exact_on']})"
    else:
        failures = out_of_tolerance(now, expected, spread_of(name))
        assert not failures, f"comparison: {COMPARISON}\n" + "\n".join(failures[:20])


def test_the_tolerance_admits_rounding_and_rejects_a_changed_number():
    """The comparison's own behaviour on hand-made metrics. A stable run: a float32 rounding of every
    number passes, a number moved by 1e-3 fails, an accuracy may move by three images of 64 but not four,
    per-image flags are compared by their mean, a status must be equal, a missing metric fails. A chaotic
    run: a number may move by 3 x its array's spread over other seeds, not further."""
    golden = {"loss": 2.5, "top1": 0.25, "stored": {"test_correct": [1, 0, 0, 1], "test": [1.0, 2.0]},
              "status": "ok", "curves": {"grad_norm": [[1.0, 0.5]]}}
    rounded = dict(golden, loss=2.5 * (1 + 2**-23), curves={"grad_norm": [[1.0 + 6e-5, 0.5]]})
    assert out_of_tolerance(rounded, golden) == []
    assert out_of_tolerance(dict(golden, loss=2.5 + 1e-3), golden) != []
    assert out_of_tolerance(dict(golden, top1=0.25 + 3 / 64), golden) == []
    assert out_of_tolerance(dict(golden, top1=0.25 + 4 / 64), golden) != []
    assert out_of_tolerance(dict(golden, stored=dict(golden["stored"], test_correct=[0, 1, 1, 0])), golden) == []
    assert out_of_tolerance(dict(golden, curves={"grad_norm": [[1.0, 0.51]]}), golden) != []
    assert out_of_tolerance(dict(golden, status="diverged"), golden) != []
    assert out_of_tolerance({k: v for k, v in golden.items() if k != "loss"}, golden) != []
    spread = {"loss": 0.1, "stored.test[]": 0.01}  # an array's spread holds for each of its elements
    assert out_of_tolerance(dict(golden, loss=2.5 + 0.29), golden, spread) == []
    assert out_of_tolerance(dict(golden, loss=2.5 + 0.31), golden, spread) != []
    assert out_of_tolerance(dict(golden, stored=dict(golden["stored"], test=[1.0, 2.029])), golden, spread) == []
    assert out_of_tolerance(dict(golden, stored=dict(golden["stored"], test=[1.0, 2.031])), golden, spread) != []


SECOND_CAPABILITY = "default"  # torch's scalar kernels: runs on every x86-64 CPU


@pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() == "DEFAULT", reason="this process already runs the "
                    "scalar kernels: there is no second CPU capability below it to try")
def test_golden_and_determinism_hold_under_a_second_cpu_capability():
    """The golden and determinism tests again, in a process whose torch kernels are the scalar ones: the
    goldens then hold within tolerance (never exactly: the capability differs from ``exact_on``), and runs
    are still bit-identical to each other."""
    env = dict(os.environ, ATEN_CPU_CAPABILITY=SECOND_CAPABILITY)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_golden.py",
                          "tests/test_determinism.py", "-k", "not second_cpu_capability"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "golden metrics: within tolerance" in run.stdout, run.stdout[-2000:]
