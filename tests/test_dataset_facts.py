"""lib.run.datasets: a dataset is loaded only where a run still has to train on it, or where its facts were never
recorded; the recorded facts equal those of the loaded data, and say nothing of the machine (no path, no date)."""
import json

import pytest
import torch

from lib.core import data as core_data
from lib.core.data import ImageDataset, get_dataset
from lib.core.dataset_facts import facts_of, label_of, origin, specs
from lib.run import datasets
from lib.run.results import ResultsStore

SHAPES = {"num_classes": 4, "difficulty": 0.2, "n_train": 60, "n_test": 20}


def configs(*option_sets):
    return [{"dataset": "shapes", "dataset_options": options, "seed": 0} for options in option_sets]


def count_loads(monkeypatch) -> list[str]:
    """The datasets get_dataset is asked for from lib.run.datasets, in order."""
    asked = []

    def counted(name, options=None, data_root=None, **kw):
        asked.append(label_of(name, options))
        return get_dataset(name, options, data_root, **kw)
    monkeypatch.setattr(datasets, "get_dataset", counted)
    return asked


def test_a_dataset_is_loaded_once_to_record_its_facts_then_only_where_a_run_trains(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path, "01_margin_factorial", "smoke")
    other = {**SHAPES, "num_classes": 6}
    plan = configs(SHAPES, other)
    asked = count_loads(monkeypatch)
    first, loaded = datasets.describe(store, plan, [], None)  # nothing to train, nothing recorded yet: load both
    assert loaded == asked == [label_of("shapes", SHAPES), label_of("shapes", other)]
    asked.clear()
    again, loaded = datasets.describe(store, plan, [], None)  # recorded now: nothing is loaded
    assert loaded == asked == [] and again == first
    _, loaded = datasets.describe(store, plan, plan[1:], None)  # a run on the second set trains: that one loads
    assert loaded == [label_of("shapes", other)]


def test_recorded_facts_are_the_loaded_datasets_and_name_no_machine(tmp_path):
    store = ResultsStore(tmp_path, "05_flatnce_batch_size", "smoke")
    facts, _ = datasets.describe(store, configs(SHAPES), [], None)
    ds = get_dataset("shapes", SHAPES)
    f = facts[label_of("shapes", SHAPES)]
    assert (f.train_images, f.test_images, f.num_classes, f.image_size, f.channels) == (
        len(ds.y_train), len(ds.y_test), ds.num_classes, ds.image_size, ds.channels)
    assert f.mean == pytest.approx(ds.mean, abs=0) and f.std == pytest.approx(ds.std, abs=0)  # JSON keeps floats exact
    assert datasets.recorded(store) == facts
    text = datasets.path_of(store).read_text()
    assert str(tmp_path) not in text and "written" not in text and json.loads(text)


def test_the_origin_of_prepared_arrays_names_the_file_not_the_folder():
    x = torch.zeros(2, 1, 4, 4, dtype=torch.uint8)
    y = torch.zeros(2, dtype=torch.int64)
    ds = ImageDataset("mnist", x, y, x, y, tuple("0123456789"), (0.0,), (1.0,), "DATA_ROOT /home/me/arrays/mnist.npz")
    assert origin(ds) == "prepared arrays mnist.npz"
    cached = ImageDataset("mnist", x, y, x, y, tuple("0123456789"), (0.0,), (1.0,), "torchvision cache /home/me/tv")
    assert origin(cached) == "torchvision's MNIST files"
    assert facts_of(ds, "mnist", {}).origin == "prepared arrays mnist.npz"


def test_specs_name_every_dataset_a_plan_reads_its_unseen_sets_too():
    unseen = {"dataset": "digits", "dataset_options": {"image_size": 16, "channels": 3}}
    plan = configs(SHAPES) + [{"dataset": "shapes", "dataset_options": SHAPES, "ood": [unseen]}]
    assert list(specs(plan)) == [label_of("shapes", SHAPES), label_of("digits", unseen["dataset_options"])]
    assert set(specs(plan)) <= {label_of(n, o) for n, o in specs(plan).values()}
    assert all(name in core_data.DATASETS for name, _ in specs(plan).values())
