"""The datasets a store's runs read, described beside their records, so that a notebook whose runs are all
recorded renders without the arrays.

A dataset's facts (:class:`lib.core.dataset_facts.DatasetFacts`) are what a render says about it. The notebook
set-up (``lib.notebook.setup``) loads a dataset only where a run of its plan still has to train (or ``force``
re-runs them); every other dataset is described from ``<results>/datasets/<study>_<profile>.json``, which is
written whenever a dataset is loaded. The file holds no date and no path, so the same data give the same bytes.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from lib.core.data import get_dataset
from lib.core.dataset_facts import DatasetFacts, facts_of, specs
from lib.run.files import atomic_write_text
from lib.run.results import ResultsStore


def load_datasets(configs: list, data_root: str | None, *, download: bool = False) -> dict[str, str]:
    """Load every dataset the run configs name (their unseen sets too), so that a missing one fails here, before
    any run (``download``: torchvision may fetch it); ``{label: where it came from}``."""
    return {label: get_dataset(name, options, data_root, download=download).source
            for label, (name, options) in specs(configs).items()}


def path_of(store: ResultsStore) -> Path:
    return store.root / "datasets" / f"{store.study}_{store.profile}.json"


def recorded(store: ResultsStore) -> dict[str, DatasetFacts]:
    """The facts recorded for the store's study and profile, by label (none before the first load)."""
    path = path_of(store)
    if not path.exists():
        return {}
    known = json.loads(path.read_text(encoding="utf-8"))
    return {label: DatasetFacts(**{**facts, "mean": tuple(facts["mean"]), "std": tuple(facts["std"])})
            for label, facts in known.items()}


def record(store: ResultsStore, facts: dict[str, DatasetFacts]) -> None:
    """Merge ``facts`` into the store's file; it is rewritten only when they change what it says."""
    merged = {**recorded(store), **facts}
    text = json.dumps({label: asdict(f) for label, f in sorted(merged.items())}, indent=1, sort_keys=True) + "\n"
    path = path_of(store)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)


def describe(store: ResultsStore, configs: list, to_train: list, data_root: str | None,
             download: bool = False) -> tuple[dict[str, DatasetFacts], list[str]]:
    """The facts of every dataset ``configs`` read, and the labels loaded to get them: a dataset is loaded where
    one of ``to_train`` reads it, or where the store has no facts of it yet (then they are recorded); a missing
    dataset raises the data layer's error, which says what was tried."""
    wanted, needed = specs(configs), specs(to_train)
    known = recorded(store)
    facts, loaded = {}, []
    for label, (name, options) in wanted.items():
        if label in needed or label not in known:
            facts[label] = facts_of(get_dataset(name, options, data_root, download=download), label, options)
            loaded.append(label)
        else:
            facts[label] = known[label]
    if loaded:
        record(store, {label: facts[label] for label in loaded})
    return facts, loaded


def training_images(records: list[dict]) -> dict[str, list[int]]:
    """The training-set sizes runs report (their ``train_images`` metric), distinct and ascending, by dataset name:
    what a run trained on, after its held-out validation part (CFF's 10%) and its subset, not the size of the split
    it drew them from. The notebooks' first line and the report's summary both say these, so they cannot differ."""
    sizes: dict[str, set[int]] = {}
    for record in records:
        value = record.get("metrics", {}).get("train_images")
        if isinstance(value, int):
            sizes.setdefault(record.get("dataset", ""), set()).add(value)
    return {name: sorted(found) for name, found in sorted(sizes.items())}
