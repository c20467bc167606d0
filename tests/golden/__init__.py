"""The golden runs: fixed-seed smoke runs of every training function and the metrics recorded for them.

``metrics_before_issue15.json`` holds each run's config, training function and metrics, recorded at
the commit it names (before the issue-15 redesign) with one torch thread, and ``exact_on``: the
numerics (``lib.run.provenance.numerics_differences``'s keys) under which today's code gives those metrics
bit for bit. Where the numerics differ, float32 kernels sum in another order and each number is
compared within a tolerance instead (:func:`out_of_tolerance`), from ``drift.json``, which
``python -m tests.golden`` measures on the ``exact_on`` machine:

- **How far a kernel change moves each run.** Every golden run is trained again under five changes
  of the kernels (:data:`KERNEL_VARIANTS`: torch's scalar kernels, MKL and oneDNN held to SSE4.2 or
  AVX, both, MKL's compatibility mode). In the *stable* runs (CFF, the collapse model) no number
  moved by more than :data:`STABLE_DRIFT` relative (measured: 3.5e-6 at most); in the *chaotic*
  ones (the norms study's SimCLR/SimSiam, FLAT's SimCLR: a few steps of near-chance training,
  statistics over 64-300 images) a kernel change moved the end-of-run numbers as far as a change of
  seed does (a correlation's p-value from 0.59 to 0.03).
- **Stable runs: the float32 rounding of the first steps.** float32's unit roundoff is u = 2^-24 =
  6e-8; a sum of n terms taken in another order differs by at most about (n - 1) u relative to the
  sum of the terms' magnitudes (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002,
  §4.2), and these runs' longest reductions have ~10^3 terms: 6e-5, so :data:`RTOL` = 1e-4. (On
  an AVX512 machine the first-epoch numbers moved by 3e-8 to 7e-8, issue 25.)
- **Chaotic runs: a bound on how far a short run can drift.** No rounding argument bounds them;
  a change of seed does (it perturbs everything at once). Each number may move by
  :data:`SEED_FACTOR` times the largest distance of three other seeds' runs from the golden run
  (for an array, e.g. 100 images' norms, the largest over its elements); the worst kernel change
  measured needed 1.75 times. Across machines these runs are held only to being runs of the same
  config, with the same statuses, counts and structure; on the ``exact_on`` machine, bit for bit.
- **Discrete numbers.** An accuracy is a fraction of a finite test set, and an image whose margin
  is at rounding level flips: :data:`ACCURACY_ATOL` allows three images of the smallest (64-image)
  golden test set. Lists of per-image flags and per-bucket accuracies and counts are compared by
  their mean (an image moving to the next norm bucket is not a changed result). An epoch chosen by
  a minimum may move to a neighbour whose loss was within rounding: :data:`EPOCH_ATOL` = 1.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import torch

from lib.core.config import build, call
from lib.run.provenance import environment, hardware
from lib.run.results import plain_json

HERE = Path(__file__).parent
GOLDEN = json.loads((HERE / "metrics_before_issue15.json").read_text())
DRIFT_FILE = HERE / "drift.json"

# The environment keys compared with ``exact_on`` (the runs set their own thread count: one).
# what decides float32 numerics: a key the golden lacks (cpu_flags, kept since 2026-12-04) counts as differing
GOLDEN_KEYS = ("cpu_model", "cpu_flags", "cpu_capability", "kernel_env", "blas", "onednn", "torch", "numpy")

KERNEL_VARIANTS = ("ATEN_CPU_CAPABILITY=default",
                   "MKL_ENABLE_INSTRUCTIONS=SSE4_2 DNNL_MAX_CPU_ISA=SSE41",
                   "MKL_ENABLE_INSTRUCTIONS=AVX DNNL_MAX_CPU_ISA=AVX",
                   "ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 DNNL_MAX_CPU_ISA=SSE41",
                   "MKL_CBWR=COMPATIBLE")
STABLE_DRIFT = 1e-5  # a run none of whose numbers moved further (relative) under any kernel variant is stable
SEED_OFFSETS = (1000, 2000, 3000)  # the other seeds whose runs bound a chaotic run's drift
RTOL = 1e-4
SEED_FACTOR = 3
ACCURACY_ATOL = 3 / 64
EPOCH_ATOL = 1
DISCRETE = re.compile(r"top1|top5|accuracy|correct|count")  # fractions or counts of a finite set


def train_golden(name: str, seed_offset: int = 0) -> dict:
    """Train the golden run ``name`` (its seed moved by ``seed_offset``) through today's API on one thread;
    its metrics as JSON would hold them (non-finite numbers as strings), wall-clock seconds (``*_s``) left out."""
    from lib.cff.batched import train_cff_seeds
    from lib.cff.training import CFFConfig, train_cff
    from lib.collapse.training import train_collapse
    from lib.ssl.training import train_ssl

    golden = GOLDEN["runs"][name]
    train, config = golden["train"], dict(golden["config"], seed=golden["config"]["seed"] + seed_offset)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if train == "lib.batched:train_cff_seeds":  # (names as recorded, before issue 28) its cell: trained together
            cell = [dict(g["config"], seed=g["config"]["seed"] + seed_offset)
                    for g in GOLDEN["runs"].values() if g["train"] == train]
            metrics = train_cff_seeds([CFFConfig.from_legacy(c) for c in cell], device="cpu")[cell.index(config)]
        else:
            trained_now = {"lib.cff:train_cff": train_cff, "lib.ssl:train_simclr": train_ssl,
                           "lib.norms:train_norms": train_ssl, "lib.studies.stop_gradient:run": train_collapse}[train]
            metrics = call(trained_now, build(trained_now, config, legacy=True))
    finally:
        torch.set_num_threads(threads)
    return recorded_then(plain_json({key: value for key, value in dict(metrics).items() if not key.endswith("_s")},
                                    nonfinite="encode"), golden_metrics(name))


def golden_metrics(name: str) -> dict:
    """The metrics recorded for ``name``, wall-clock seconds left out."""
    return {key: value for key, value in GOLDEN["runs"][name]["metrics"].items() if not key.endswith("_s")}


def recorded_then(now: dict, then: dict) -> dict:
    """``now`` restricted to the keys recorded ``then``: metrics added later (issue 16's ``val_loss``
    curve, ``selected_epoch``) are new numbers, not changed ones."""
    return {key: recorded_then(now[key], then[key]) if isinstance(then[key], dict) and isinstance(now.get(key), dict)
            else now.get(key, "<missing>") for key in then}


def numerics_here() -> dict:
    """This process's values of :data:`GOLDEN_KEYS`."""
    import numpy

    return {**{key: hardware()[key] for key in ("cpu_model", "cpu_flags", "cpu_capability", "kernel_env", "blas",
                                                "onednn")},
            "torch": torch.__version__, "numpy": numpy.__version__}


# ------------------------------------------------------------------------------ the comparison


def _number(value) -> float | None:
    """A recorded number as a float (ints, floats, and non-finite floats encoded as strings), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)
    return None


def _flat(values: list) -> list:
    return [x for v in values for x in (_flat(v) if isinstance(v, list) else [v])]


def leaves(metrics, path: str = "") -> dict:
    """``{path: leaf}`` of nested metrics; a list under a discrete name becomes its mean (``path[mean]``)."""
    if isinstance(metrics, dict):
        return {p: v for key, item in metrics.items()
                for p, v in leaves(item, f"{path}.{key}" if path else key).items()}
    if isinstance(metrics, list) and DISCRETE.search(path):
        numbers = [x for x in map(_number, _flat(metrics)) if x is not None and not math.isnan(x)]
        return {f"{path}[mean]": sum(numbers) / len(numbers) if numbers else "nan"}
    if isinstance(metrics, list):
        return {p: v for i, item in enumerate(metrics) for p, v in leaves(item, f"{path}[{i}]").items()}
    return {path: metrics}


def array_of(path: str) -> str:
    """The array a leaf belongs to: its path without element indices (``stored.test[3]`` -> ``stored.test[]``)."""
    return re.sub(r"\[\d+\]", "[]", path)


def _finite_pairs(golden: dict, other: dict):
    """``(path, golden number, other number)`` for every leaf finite in both."""
    other_leaves = leaves(other)
    for path, then in leaves(golden).items():
        then_x, other_x = _number(then), _number(other_leaves.get(path))
        if then_x is not None and other_x is not None and math.isfinite(then_x) and math.isfinite(other_x):
            yield path, then_x, other_x


def largest_distance(golden: dict, others: list[dict]) -> dict:
    """``{array: largest |other - golden|}`` over the ``others`` and the array's elements (a scalar metric
    is an array of one): the spread that bounds a chaotic run's numbers."""
    largest: dict = {}
    for other in others:
        for path, then_x, other_x in _finite_pairs(golden, other):
            largest[array_of(path)] = max(largest.get(array_of(path), 0.0), abs(other_x - then_x))
    return largest


def relative_drift(golden: dict, other: dict) -> float:
    """The largest ``|other - golden| / max(|golden|, 1e-3)`` over the leaves (0 where none differ)."""
    return max((abs(o - g) / max(abs(g), 1e-3) for _, g, o in _finite_pairs(golden, other)), default=0.0)


def tolerance(path: str, golden: float, spread: float | None) -> float:
    """How far a number at ``path`` may lie from its golden value where the numerics differ (module doc):
    ``spread`` is its array's :func:`largest_distance` over other seeds in a chaotic run, None in a stable one."""
    return ((SEED_FACTOR * spread if spread is not None else 0.0) + RTOL * abs(golden)
            + (ACCURACY_ATOL if DISCRETE.search(path) else 0.0) + (EPOCH_ATOL if path.endswith("_epoch") else 0.0))


def out_of_tolerance(now: dict, golden: dict, spread: dict | None = None) -> list[str]:
    """The numbers of ``now`` outside :func:`tolerance` of ``golden``, one line each (``spread``: a chaotic
    run's :func:`largest_distance` over other seeds, None for a stable run). Strings, booleans and missing
    keys must be equal, and a non-finite number must stay the same non-finite."""
    now_leaves = leaves(now)
    failures = []
    for path, then in leaves(golden).items():
        value = now_leaves.get(path, "<missing>")
        then_x, now_x = _number(then), _number(value)
        if then_x is None or now_x is None or not (math.isfinite(then_x) and math.isfinite(now_x)):
            if value != then:
                failures.append(f"{path}: {value!r}, golden {then!r}")
            continue
        allowed = tolerance(path, then_x, None if spread is None else spread.get(array_of(path), 0.0))
        if abs(now_x - then_x) > allowed:
            failures.append(f"{path}: {now_x!r}, golden {then_x!r} (|difference| {abs(now_x - then_x):.3g} "
                            f"> tolerance {allowed:.3g})")
    return failures


def spread_of(name: str) -> dict | None:
    """A chaotic run's :func:`largest_distance` over other seeds, from ``drift.json``; None for a stable run."""
    run = json.loads(DRIFT_FILE.read_text())["runs"][name]
    return None if run["stable"] else run["seed_spread"]


# ------------------------------------------------------------------------------ recording drift.json


def _trained_under(variant: str) -> dict:
    """Every golden run trained in a fresh process under the kernel variables ``variant`` (``A=1 B=2``)."""
    code = ("import json; from tests.golden import GOLDEN, train_golden; "
            "print(json.dumps({name: train_golden(name) for name in sorted(GOLDEN['runs'])}))")
    env = dict(os.environ, **dict(item.split("=", 1) for item in shlex.split(variant)))
    run = subprocess.run([sys.executable, "-c", code], cwd=HERE.parents[1], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def record_drift() -> None:
    """Write ``drift.json`` on the machine whose numerics are ``exact_on`` (``python -m tests.golden``):
    each run's largest relative drift under :data:`KERNEL_VARIANTS`, whether that makes it stable, and for
    a chaotic run the spread of its config over :data:`SEED_OFFSETS`. About four minutes on two cores."""
    if numerics_here() != {key: GOLDEN["exact_on"][key] for key in GOLDEN_KEYS}:
        sys.exit(f"record on the golden's numerics {GOLDEN['exact_on']}; here: {numerics_here()}")
    under = {variant: _trained_under(variant) for variant in KERNEL_VARIANTS}
    runs = {}
    for name in sorted(GOLDEN["runs"]):
        golden = golden_metrics(name)
        drift = {variant: relative_drift(golden, under[variant][name]) for variant in KERNEL_VARIANTS}
        stable = max(drift.values()) <= STABLE_DRIFT
        runs[name] = {"kernel_drift": drift, "stable": stable}
        if not stable:
            runs[name]["seed_spread"] = largest_distance(golden, [train_golden(name, k) for k in SEED_OFFSETS])
    here = environment()
    text = json.dumps({"how": "python -m tests.golden (see tests/golden/__init__.py)",
                       "environment": {key: here[key] for key in ("git_commit", *GOLDEN_KEYS)},
                       "kernel_variants": list(KERNEL_VARIANTS), "seed_offsets": list(SEED_OFFSETS), "runs": runs},
                      indent=1, sort_keys=True)
    DRIFT_FILE.write_text(text + "\n")
    print(f"wrote {DRIFT_FILE}: {sum(r['stable'] for r in runs.values())} stable, "
          f"{sum(not r['stable'] for r in runs.values())} chaotic runs")
