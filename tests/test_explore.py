"""The interactive explorers (lib.explore): sliders that recompute through a real kernel, and the results
explorer's variant filter."""
from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from lib import PROJECT_ROOT, explore
from lib.core.params import ParameterError
from lib.run.results import ResultsStore, variant_root
from lib.studies import find_study

# Builds both simulation explorers in a kernel, moves one slider of each and prints what each plots before
# and after. The sphere's steps to align grow as rho^2; the collapse model's slow rate grows with r.
SLIDER_CELLS = [
    "import json\nfrom lib import explore\n"
    "sphere = explore.sphere_explorer(rho=0.5, pairs=40, dim=8)\n"
    "collapse = explore.collapse_explorer(r=0.1, steps=200)\nsphere",
    "def shown():\n"
    "    return {'sphere_steps': sphere.data['steps'], 'sphere_norm': sphere.data['mean_norm'].tolist(),\n"
    "            'collapse_sg': collapse.data['sg']['min_label_distance'].tolist(),\n"
    "            'collapse_none': collapse.data['none']['min_label_distance'].tolist(),\n"
    "            'seconds': [sphere.seconds, collapse.seconds]}\n"
    "before = shown()\n"
    "sliders = {w.description: w for w in sphere.children[0].children + collapse.children[0].children}\n"
    "sliders['ρ'].value = 1.0\nsliders['r'].value = 0.4\n"
    "print(json.dumps({'before': before, 'after': shown()}))",
]


def test_sliders_recompute_in_a_real_kernel():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in SLIDER_CELLS]
    resources = {"metadata": {"path": str(PROJECT_ROOT)}}
    # without widget state, as lib.run_all renders: the static HTML then shows the explorers' text/html
    NotebookClient(nb, timeout=600, kernel_name="python3", resources=resources, store_widget_state=False).execute()
    printed = json.loads("".join(o["text"] for o in nb.cells[1].outputs if o["output_type"] == "stream"))
    before, after = printed["before"], printed["after"]
    # rho 0.5 -> 1: four times the steps (to rounding of the stopping step), and a new norm curve
    assert before["sphere_steps"] > 0 and 3 <= after["sphere_steps"] / before["sphere_steps"] <= 5
    assert after["sphere_norm"][0] == pytest.approx(1.0) and before["sphere_norm"][0] == pytest.approx(0.5)
    # more frustration: the labels end closer together without a head
    def shrink(curve):
        return curve[-1] / curve[0]

    assert shrink(after["collapse_none"]) < shrink(before["collapse_none"])
    assert after["collapse_sg"] != before["collapse_sg"]
    # the widget is displayed with its static fallback, the default view as an image, which the HTML shows
    bundle = nb.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in bundle and "data:image/png;base64," in bundle["text/html"]
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert bundle["text/html"].split("base64,")[1][:2000] in html


def _record(store: ResultsStore, seed: int, lr: float, top1: float) -> dict:
    curves = {"loss": [[2.0, 1.0], [1.5, 0.5]]}  # two epochs of two layers
    return store.write({"seed": seed, "lr": lr, "dataset": "shapes"}, seed=seed, dataset="shapes", status="ok",
                       metrics={"top1": top1, "curves": curves}, timings={})


def test_results_explorer_filters_by_variant(tmp_path):
    study = "01_margin_factorial"
    canonical = ResultsStore(tmp_path, study, "quick")
    variant = ResultsStore(variant_root(tmp_path, "fast-lr"), study, "quick")
    shipped = {_record(canonical, seed, 0.1, 0.5)["run_id"] for seed in (0, 1)}
    mine = {_record(variant, seed, lr, 0.7)["run_id"] for seed in (0, 1, 2) for lr in (0.2, 0.4)}
    box = explore.results_explorer(study, results_dir=tmp_path)
    assert set(box.data["seeds"].run_id) == shipped
    controls = {w.description: w for w in box.children[0].children}
    assert list(controls["variant"].options) == [explore.CANONICAL, "fast-lr"]
    controls["variant"].value = "fast-lr"
    seeds = box.data["seeds"]
    assert set(seeds.run_id) == mine and (seeds.value == 0.7).all()
    # the cells are the config keys the variant's runs differ in (lr), seeds apart
    assert sorted(box.data["cells"].index) == ["lr=0.2", "lr=0.4"] and (box.data["cells"]["n"] == 3).all()
    controls["layer"].value = 1
    assert sorted(box.data["curves"].value.unique()) == [0.5, 1.0] and set(box.data["curves"].run_id) == mine
    controls["cell"].value = "lr=0.4"
    assert len(box.data["seeds"]) == 3 and set(box.data["seeds"].cell) == {"lr=0.4"}


def test_an_explorers_text_names_its_values_not_this_machines_variants(tmp_path):
    # A render keeps the text/plain of the explorer: a user's variant must not show up in a shipped render.
    study = "01_margin_factorial"
    _record(ResultsStore(tmp_path, study, "quick"), 0, 0.1, 0.5)
    before = explore.results_explorer(study, results_dir=tmp_path)._repr_mimebundle_()["text/plain"]
    _record(ResultsStore(variant_root(tmp_path, "fast-lr"), study, "quick"), 0, 0.2, 0.7)
    box = explore.results_explorer(study, results_dir=tmp_path)
    assert list(box.controls["variant"].options) == [explore.CANONICAL, "fast-lr"]  # the control offers it
    text = box._repr_mimebundle_()["text/plain"]
    assert text == before and "fast-lr" not in text and f"variant={explore.CANONICAL!r}" in text


def test_results_explorer_rejects_a_variant_without_records(tmp_path):
    _record(ResultsStore(tmp_path, "06_stop_gradient_collapse", "quick"), 0, 0.1, 0.5)
    with pytest.raises(ParameterError, match="variant='nope'"):
        explore.results_explorer("06", variant="nope", results_dir=tmp_path)


def test_cell_labels_name_the_fewest_factors_that_tell_cells_apart_and_stay_short():
    from lib.explore import CELL_LABEL_CHARS, naming_factors, short_cells

    # the learning rate follows the method, so one of the two names nothing new: the one with the shorter
    # values names the cells; the options list, the same everywhere, is no factor
    configs = [dict(method=m, lr=lr, cut=cut, ood=[{"dataset": "fashion_mnist", "options": list(range(30))}])
               for m, lr in (("simclr", 0.3), ("simsiam", 0.05)) for cut in (1.0, 3.0)]
    factors = ["cut", "lr", "method"]
    assert naming_factors(factors, configs) == ["cut", "lr"]
    full = [", ".join(f"{k}={c[k]}" for k in factors) for c in configs]
    assert short_cells(full, factors, configs) == ["cut=1.0, lr=0.3", "cut=3.0, lr=0.3", "cut=1.0, lr=0.05",
                                                   "cut=3.0, lr=0.05"]
    # cells told apart only past the cut keep apart by number, and no label exceeds its limit
    long = [dict(x="a" * 100 + str(i), y="b" * 100) for i in range(3)]
    labels = short_cells([str(c) for c in long], ["x", "y"], long)
    assert len(set(labels)) == 3 and all(len(label) <= CELL_LABEL_CHARS + 4 for label in labels)


@pytest.mark.parametrize("number", ["04", "05", "06"])
def test_studies_whose_configs_differ_in_many_settings_name_their_cells_in_their_own_words(number):
    """Studies 4-6 (cell differences of up to 580 characters at some profiles) name each cell by cell_name: short,
    whole (no cut, no number), one name per cell, and the cell's whole config difference stays beside it as its
    settings."""
    from lib.explore import CELL_LABEL_CHARS, records_frames

    study = find_study(number)
    records = ResultsStore(PROJECT_ROOT / "results", study.name, "quick").records()
    runs = records_frames(records, study.cell_name)["runs"]
    names = runs.groupby("cell").settings.nunique()
    assert (names == 1).all() and runs.groupby("settings").cell.nunique().eq(1).all()  # one name, one cell
    assert all(len(c) <= CELL_LABEL_CHARS and "…" not in c and "#" not in c and " · " in c for c in names.index)
    assert max(map(len, names.index)) < runs.settings.str.len().max()  # shorter than what they stand for
