"""The six studies: one module each (profiles, parameter checks, run plan, analysis), listed once here.

A notebook holds the parameters and the narrative; its study module declares the parameters once (its
``Settings`` class, from which the notebook's parameters cell is written), turns them into checked settings
(before any compute), settings into run configs, and collected records into tables.
``STUDIES`` is the registry that ``lib.notebook``, ``lib.dispatch``, ``lib.run_all``, ``lib.report`` and
``lib.migrate`` read; :class:`lib.studies.study.StudyModule` is the interface every study module provides.
"""
from __future__ import annotations

from types import ModuleType

from lib.core.params import ParameterError
from lib.studies import cross_dataset, difficulty_sweep, embedding_norms, flatnce_batch, margin_factorial, stop_gradient
from lib.studies.study import Study

STUDIES = {s.number: s for s in (
    Study("01", "01_margin_factorial", margin_factorial),
    Study("02", "02_cross_dataset_reversal", cross_dataset, cross_dataset.check_data),
    Study("03", "03_difficulty_sweep", difficulty_sweep),
    Study("04", "04_embedding_norms", embedding_norms),
    Study("05", "05_flatnce_batch_size", flatnce_batch),
    Study("06", "06_stop_gradient_collapse", stop_gradient),
)}


def find_study(name: str | ModuleType) -> Study:
    """The study named by its number (``01``), notebook (``01_margin_factorial``), study name or module."""
    for study in STUDIES.values():
        if name is study.module or name in (study.number, study.notebook, study.name):
            return study
    raise ParameterError(f"study={name!r} is not allowed: one of {', '.join(STUDIES)} "
                         f"(or a notebook name: {', '.join(s.notebook for s in STUDIES.values())})")
