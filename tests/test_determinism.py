"""Determinism on the machine at hand: one config trained twice gives bit-identical metrics, in one
process and in two. This is what a record's ``lib.rerun`` relies on where the numerics agree; across
machines the golden test's tolerance applies instead (tests/golden). One golden run per training
function: CFF, CFF's batched seeds, SimCLR (the norms study's and FlatNCE's), the collapse model."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden import train_golden

ROOT = Path(__file__).resolve().parents[1]
ONE_PER_TRAINER = ("cff", "cff_batched_seed1", "norms_simsiam_default_False", "simclr_flatnce", "collapse_real")


@pytest.mark.parametrize("name", ONE_PER_TRAINER)
def test_a_run_twice_in_one_process_is_bit_identical(name):
    assert train_golden(name) == train_golden(name)


def test_a_run_in_another_process_is_bit_identical_to_this_one():
    code = ("import json, sys; from tests.golden import train_golden; "
            "print(json.dumps({n: train_golden(n) for n in sys.argv[1:]}))")
    run = subprocess.run([sys.executable, "-c", code, *ONE_PER_TRAINER], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    there = json.loads(run.stdout.strip().splitlines()[-1])
    assert there == {name: train_golden(name) for name in ONE_PER_TRAINER}
