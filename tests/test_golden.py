"""The redesign of issue 15 changes no number: fixed-seed smoke runs of every training function give
bit-identical metrics to those recorded before it (tests/golden/metrics_before_issue15.json, written at
the commit it names, with one torch thread). Since issue 16 the CFF defaults follow CFF's code; a record's
config made before then is built with ``CFFConfig.from_legacy``, which names the earlier settings
(``init="trunc_normal"``, ``normalization="subset"``, ``eval_protocol="clean"``), and those still give the
recorded numbers bit for bit."""
import json
from pathlib import Path

import pytest
import torch

from lib.config import build, call
from lib.results import _normalize

GOLDEN = json.loads((Path(__file__).parent / "golden" / "metrics_before_issue15.json").read_text())


def train_now(train: str, config: dict) -> dict:
    """Train a golden run through today's API: ``train`` names the function it was recorded with."""
    from lib.batched import train_cff_seeds
    from lib.cff import CFFConfig, train_cff
    from lib.collapse_train import train_collapse
    from lib.ssl import train_ssl

    if train == "lib.batched:train_cff_seeds":  # its cell: the seeds recorded with it, trained together
        cell = [g["config"] for g in GOLDEN["runs"].values() if g["train"] == train]
        return train_cff_seeds([CFFConfig.from_legacy(c) for c in cell], device="cpu")[cell.index(config)]
    trained_now = {"lib.cff:train_cff": train_cff, "lib.ssl:train_simclr": train_ssl,
                   "lib.norms:train_norms": train_ssl, "lib.studies.stop_gradient:run": train_collapse}[train]
    return call(trained_now, build(trained_now, config, legacy=True))


@pytest.mark.parametrize("name", sorted(GOLDEN["runs"]))
def test_metrics_are_bit_identical_to_those_recorded_before_the_redesign(name):
    golden = GOLDEN["runs"][name]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        metrics = dict(train_now(golden["train"], golden["config"]))
    finally:
        torch.set_num_threads(threads)
    def numbers(m: dict) -> dict:  # leave out wall-clock seconds (train_s, eval_s, step_s)
        return {key: value for key, value in m.items() if not key.endswith("_s")}

    def recorded_then(now: dict, then: dict) -> dict:
        """``now`` restricted to the keys recorded then: metrics added later (issue 16's ``val_loss``
        curve, ``selected_epoch``) are new numbers, not changed ones."""
        return {key: recorded_then(now[key], then[key]) if isinstance(then[key], dict) and key in now
                else now.get(key, "<missing>") for key in then}

    expected = numbers(golden["metrics"])
    assert recorded_then(_normalize(numbers(metrics), nonfinite="encode"), expected) == expected
