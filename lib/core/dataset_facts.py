"""What a render says about a dataset it does not load: :class:`DatasetFacts` (name and options, where the arrays
came from without a machine's paths, split sizes, class count, image shape, input statistics), taken from a loaded
:class:`lib.core.data.ImageDataset`. ``lib.run.datasets`` records them beside a store's runs."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lib.core.config import as_dict
from lib.core.data import DATASETS, ImageDataset, get_dataset


@dataclass(frozen=True)
class DatasetFacts:
    """What a render needs to know of a dataset it does not load."""

    label: str  # the dataset and its options as the plan names them: "shapes {'num_classes': 10}"
    name: str
    options: dict
    origin: str  # where the arrays came from, without a machine's paths
    train_images: int
    test_images: int
    num_classes: int
    image_size: int
    channels: int
    mean: tuple[float, ...]  # per channel, of the training images in [0, 1]
    std: tuple[float, ...]

    @property
    def display_name(self) -> str:
        return DATASETS[self.name].display_name if self.name in DATASETS else self.name

    def describe(self) -> str:
        """One line for a notebook's header: where the arrays came from and the split sizes."""
        return f"{self.origin}; {self.train_images:,} training / {self.test_images:,} test images"


def label_of(name: str, options: dict | None) -> str:
    """The label of a dataset and its options, as the plan's configs name it."""
    return f"{name} {options}" if options else str(name)


def specs(configs: list) -> dict[str, tuple[str, dict]]:
    """``{label: (name, options)}`` of every registered dataset the run configs read, their unseen sets too, in
    the order they first appear."""
    found = {}
    for config in map(as_dict, configs):
        for spec in [config, *[o for o in config.get("ood") or [] if isinstance(o, dict)]]:
            name, options = spec.get("dataset"), spec.get("dataset_options") or {}
            if name in DATASETS:
                found.setdefault(label_of(name, options), (name, dict(options)))
    return found


def origin(ds: ImageDataset) -> str:
    """Where ``ds``'s arrays came from, in words that hold on any machine: the prepared file's name, or
    torchvision's files, or the embedded dataset's own description (which names no path)."""
    if ds.source.startswith("DATA_ROOT "):
        return f"prepared arrays {Path(ds.source.removeprefix('DATA_ROOT ')).name}"
    if ds.source.startswith("torchvision cache"):
        return f"torchvision's {DATASETS[ds.name].display_name} files"
    return ds.source


def facts_of(ds: ImageDataset, label: str, options: dict) -> DatasetFacts:
    return DatasetFacts(label, ds.name, dict(options), origin(ds), len(ds.y_train), len(ds.y_test), ds.num_classes,
                        ds.image_size, ds.channels, tuple(ds.mean), tuple(ds.std))


def facts_for(name: str, options: dict, known: dict | None = None, data_root: str | None = None) -> DatasetFacts:
    """The facts of a dataset: from ``known`` (a notebook's, by label) where it holds them, else from the dataset
    loaded from ``data_root``."""
    label = label_of(name, options)
    if known and label in known:
        return known[label]
    return facts_of(get_dataset(name, options, data_root), label, options)
