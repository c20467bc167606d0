"""Every study and profile plans the run ids it planned when tests/golden/plans.json was written (issue 28:
moving code must not move a run). A run id is the hash of its config, so a changed id means a changed run:
where that is meant (a study's design changed), write the file again and say why in the commit:

    python -m tests.test_plans      # rewrites tests/golden/plans.json from today's plans
"""
import dataclasses
import hashlib
import json
import sys

import pytest

from lib import PROJECT_ROOT
from lib.core.config import ADDED, as_dict
from lib.core.params import PROFILE_NAMES
from lib.run.results import config_hash
from lib.studies import STUDIES
from lib.studies.variants import resolve_command

PLANS = PROJECT_ROOT / "tests" / "golden" / "plans.json"


def fingerprint(number: str, profile: str) -> list:
    """[number of runs, a hash of their sorted run ids] of a study's plan at a profile's own settings (no data
    loaded: the plan before a study's check_data narrows it to the datasets at hand)."""
    study = STUDIES[number]
    settings, _ = resolve_command(study, profile=profile, parameters={})
    ids = sorted(config_hash(c) for c in study.module.plan(settings))
    return [len(ids), hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16]]


def todays_plans() -> dict:
    return {f"{number} {profile}": fingerprint(number, profile) for number in STUDIES for profile in PROFILE_NAMES}


RECORDED = json.loads(PLANS.read_text()) if PLANS.exists() else {}


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_every_study_and_profile_plans_the_runs_it_planned(key):
    number, profile = key.split()
    assert fingerprint(number, profile) == RECORDED[key], (
        f"study {number}'s {profile} plan moved: its run ids changed (see this module's docstring)")


@pytest.mark.parametrize("number", sorted(STUDIES))
def test_no_plan_holds_a_run_twice(number):
    """A run id names one run: ``lib.studies.coverage.experiment`` counts a plan's runs by its configs."""
    for profile in PROFILE_NAMES:
        settings, _ = resolve_command(STUDIES[number], profile=profile, parameters={"seeds": 3})
        ids = [config_hash(c) for c in STUDIES[number].module.plan(settings)]
        assert len(set(ids)) == len(ids), f"study {number} plans a run twice at {profile}"


def test_the_file_covers_every_study_and_profile():
    assert set(RECORDED) == {f"{n} {p}" for n in STUDIES for p in PROFILE_NAMES}


if __name__ == "__main__":
    PLANS.write_text(json.dumps(todays_plans(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)


def extended(config_class: type) -> type:
    """A scratch run config: ``config_class`` with one field added later (lib.core.config.ADDED), a gradient-clip
    norm whose default 0.0 (off) computes what every run did before it."""
    return dataclasses.make_dataclass(
        f"Extended{config_class.__name__}",
        [("clip_norm", float, dataclasses.field(default=0.0, metadata={ADDED: "2026-12"}))],
        bases=(config_class,), frozen=True)


def test_a_field_added_later_at_its_default_leaves_every_plan_and_its_ids_as_recorded():
    """Issue 40: each run config gains a field in a scratch class; at its documented default every study's plan at
    every profile keeps the fingerprint of tests/golden/plans.json, and any other value gives another run id."""
    for key, recorded in RECORDED.items():
        number, profile = key.split()
        settings, _ = resolve_command(STUDIES[number], profile=profile, parameters={})
        configs = STUDIES[number].module.plan(settings)
        classes = {type(c): extended(type(c)) for c in configs}
        grown = [classes[type(c)](**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)}) for c in configs]
        assert all(hasattr(c, "clip_norm") and c.clip_norm == 0.0 for c in grown)
        ids = sorted(config_hash(c) for c in grown)
        assert [len(ids), hashlib.sha256(" ".join(ids).encode()).hexdigest()[:16]] == recorded, key
        clipped = dataclasses.replace(grown[0], clip_norm=1.0)
        assert config_hash(clipped) != config_hash(grown[0]) and as_dict(clipped)["clip_norm"] == 1.0
