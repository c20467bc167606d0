"""What a study is to the rest of lib: the interface every study module provides (:class:`StudyModule`) and the
registry's entry for one study (:class:`Study`).

It stands apart from the registry (``lib.studies``, which imports every study module) so that what works on one
study at a time (``lib.studies.variants``, ``lib.studies.coverage``) takes a ``Study`` without importing them all.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class StudyModule(Protocol):
    """What a study module provides (``lib/studies/<name>.py``); ``tests/test_variants.py`` checks every module.

    Each module also has ``analyze(runs, settings, ...)`` except study 4, whose notebook analyses its
    sections (convergence, latent classes, interventions, OOD) one by one with the module's table functions.
    A new study: the recipe in docs/layout.md.
    """

    Settings: type  # its parameters, each declared once (lib.core.settings.StudySettings); the notebook's cell
    STUDY: str  # the results name: <results>/runs/<STUDY>/<profile>/, tables <STUDY>_<profile>*.csv
    QUESTION: str  # the study's question in one line (the report's summary)
    PAPER_DATA: str  # the data of the paper's claims, named on the first screen of a render
    CENTRAL: str  # the id of its central claim's verdict row, whose result the report's summary shows
    SCALE: tuple  # the profile settings the report names as the scale of its verdicts (data, model, epochs)
    PROFILES: dict  # profile name -> the settings it sets; a parameter left as None takes them
    TRAIN: Callable[..., dict]  # trains one run: TRAIN(config, *, data_root=None, progress=None, ...) -> metrics

    def resolve(self, p: dict) -> dict:
        """Check the notebook's parameters ``p`` (its namespace: extra names are ignored) and fill the
        None ones from the profile; returns the settings. Raises ParameterError naming a bad one. No compute."""

    def plan(self, settings: dict) -> list:
        """Every run config the settings imply, in the notebook's order (duplicates allowed: one run each)."""

    def sweep_options(self, settings: dict) -> dict:
        """Keyword arguments of ``lib.run.sweep.run_sweep`` for these settings (workers, force, batched path)."""

    def runs_frame(self, records: list[dict], *args) -> Any:
        """One row per collected run record: the factors and scalar metrics its analysis reads."""

    def paper_vs_reproduced(self, *args, **kwargs) -> Any:
        """The study's verdict table (lib.core.verdicts.table): every published claim through the verdict engine,
        then the checks of our own; the notebook writes it as ``<STUDY>_<profile>_paper_vs_reproduced.csv``."""


@dataclass(frozen=True)
class Study:
    """One study: its number, its notebook and its module."""

    number: str  # "01"
    notebook: str  # file stem under notebooks/
    module: ModuleType  # a StudyModule
    # check_data(settings, data_root, known) -> (facts, skipped): describes the data (loading what it must) and may
    # narrow the plan
    check_data: Callable | None = None

    @property
    def name(self) -> str:
        return self.module.STUDY

    @property
    def train_fn(self) -> Callable[..., dict]:
        return self.module.TRAIN

    @property
    def settings(self) -> type:
        """The study's settings class (:class:`lib.core.settings.StudySettings`): every parameter declared once."""
        return self.module.Settings

    @property
    def cell_name(self) -> Callable[[dict], str] | None:
        """The study's name for a cell of runs in its own words (``cell_name(config)``), where its configs differ
        in more settings than a figure's axis can show; None: the results explorer names cells by setting."""
        return getattr(self.module, "cell_name", None)


def is_central(claim_id: str, module: Any) -> bool:
    """Whether a verdict row's id is its study's central claim (the module's ``CENTRAL``), read at the profile's own
    setting or at one of the module's ``OPERATING_POINTS`` (the id with ``@point``, ``lib.core.verdicts.point_id``)."""
    claim, _, point = claim_id.partition("@")
    return claim == module.CENTRAL and (not point or point in getattr(module, "OPERATING_POINTS", {}))
