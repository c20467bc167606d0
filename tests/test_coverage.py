"""lib.studies.coverage and lib.coverage: how much of a profile's plan is recorded, and whether its shipped tables
are today's, from a planted store (study 5's cpu plan: 36 runs) — counts, the banner's words, the report, the
stamped render — and the README's list against the shipped records."""
import json
import shutil

import nbformat
import pandas as pd
import pytest

from lib import PROJECT_ROOT
from lib.core.config import as_dict
from lib.coverage import README_BEGIN, README_END, readme_lines
from lib.render import COVERAGE, REPORT_SUFFIX, findings_first, stamp, to_html
from lib.report import readme_block, stamp_renders, write_index
from lib.run.results import ResultsStore
from lib.studies import STUDIES, find_study
from lib.studies.coverage import coverage, experiment, planned_configs, setting_changes

STUDY = STUDIES["05"]
SHIPPED = PROJECT_ROOT / "results"


def planted(tmp_path, *, recorded: int, superseded: int, tabled: str):
    """A results folder with ``recorded`` of study 5's planned cpu runs finished, ``superseded`` runs of an
    older setting (a BatchNorm projector), and a run table of the ``tabled`` ones ("old", "new" or "none")."""
    store = ResultsStore(tmp_path, STUDY.name, "cpu")
    plan = [as_dict(c) for c in planned_configs(STUDY, "cpu")]
    assert len({store.run_id(c) for c in plan}) == 36
    new = plan[:recorded]
    old = [dict(c, projector_bn=True) for c in plan[:superseded]]
    for config in new + old:
        store.write(config, seed=config["seed"], dataset=config["dataset"], status="ok", metrics={"knn_top1": 0.5},
                    timings={"wall_s": 1.0})
    (tmp_path / "tables").mkdir(exist_ok=True)
    rows = {"old": old, "new": new, "none": []}[tabled]
    if rows:
        pd.DataFrame({"run_id": [store.run_id(c) for c in rows], "status": "ok", "dataset": "cifar10",
                      "git_commit": "abcdef1234567890", "git_dirty": False}
                     ).to_csv(tmp_path / "tables" / f"{STUDY.name}_cpu.csv", index=False)
    return tmp_path


def test_a_partial_store_is_counted_and_its_banner_names_progress_commit_and_change(tmp_path):
    c = coverage(STUDY, "cpu", planted(tmp_path, recorded=7, superseded=36, tabled="old"))
    assert (c.planned, c.recorded, c.tabled, c.tabled_in_plan) == (36, 7, 36, 0)
    assert not c.complete and not c.current
    assert c.table_commits == [("abcdef1234", 36)]
    assert c.changes == ["projector_bn True → False"]  # the only setting the planted old runs differ in
    assert c.banner() == ("cpu re-run in progress: 7 of 36 runs at today's settings; its shipped tables come from "
                          "superseded settings (commit abcdef1234 (36 runs)): projector_bn True → False.")
    assert c.short() == "cpu re-run: 7 of 36 runs at today's settings; tables from superseded settings"


@pytest.mark.parametrize("recorded, tabled, banner", [
    (36, "old", "cpu re-run recorded (36 of 36 runs at today's settings), not yet rendered; its shipped tables "
                "come from superseded settings"),
    (36, "new", None),
    (3, "none", "cpu re-run in progress: 3 of 36 runs at today's settings; no cpu tables shipped yet."),
])
def test_the_banner_follows_the_records_and_the_table(tmp_path, recorded, tabled, banner):
    c = coverage(STUDY, "cpu", planted(tmp_path, recorded=recorded, superseded=5, tabled=tabled))
    if banner is None:
        assert c.current and c.banner() is None and c.short() is None
    else:
        assert c.banner().startswith(banner)


def test_the_report_and_the_render_carry_the_banner_and_a_page_elsewhere_changes_nothing(tmp_path):
    results = planted(tmp_path / "results", recorded=7, superseded=20, tabled="old")
    (results / "notebooks").mkdir()
    render = results / "notebooks" / f"{STUDY.name}_cpu.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Study 5\nintro"),
                                                   nbformat.v4.new_code_cell("x = 1")]), render)
    shown = {"quantity": "something else", "ours": "1", "paper": "2", "evidence": "[paper]", "verdict": "reproduced"}
    records = results / "tables" / f"{STUDY.name}_cpu_verdicts.json"  # the typed records: what the report reads
    records.write_text(json.dumps([
        {"id": "s5.something_else", "quantity": "something else", "kind": "claim", "verdict": "reproduced", "n": [3],
         "level": 0.05, "look": "1", "look_runs": None, "shown": shown, "measure": "one_sample", "p": 0.01,
         "published": 1.0, "null": 0.0, "effect_sd": 1.0, "cells": [], "seeds_parameters": ["seeds"],
         "seeds_needed": None, "verdict_text": "reproduced", "conditions": []}]))
    before = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    page = write_index(results, output_dir=tmp_path / "page").read_text()
    assert {p: p.read_bytes() for p in results.rglob("*") if p.is_file()} == before  # the page went elsewhere
    assert "<b>cpu re-run in progress: 7 of 36 runs at today&#x27;s settings</b>" in page
    assert "cpu re-run: 7 of 36 runs at today&#x27;s settings; tables from superseded settings" in page
    assert "this table has no row of its central claim" in page  # no badge from its other row
    # written into the results folder: the render gets its banner, under the title, before everything else
    write_index(results)
    cells = nbformat.read(render, as_version=4).cells
    assert COVERAGE in cells[1].metadata["tags"] and "7 of 36 runs" in cells[1].source
    reader = (results / "notebooks" / f"{STUDY.name}_cpu.html").read_text()
    assert reader.index("Study 5") < reader.index("7 of 36 runs") < reader.index("intro")
    assert (results / "notebooks" / f"{STUDY.name}_cpu_report.html").exists()
    assert stamp_renders(results) == []  # the banners are right: nothing changes
    # a render of the runs recorded so far, then every run recorded, then a render of them all: the banner goes
    store = ResultsStore(results, STUDY.name, "cpu")
    plan = [as_dict(c) for c in planned_configs(STUDY, "cpu")]

    def table(configs):
        pd.DataFrame({"run_id": [store.run_id(c) for c in configs]}).to_csv(
            results / "tables" / f"{STUDY.name}_cpu.csv", index=False)

    def banner():
        return next((c.source for c in nbformat.read(render, as_version=4).cells
                     if COVERAGE in c.metadata.get("tags", [])), None)

    table(plan[:7])
    assert render in stamp_renders(results)
    assert banner() == ("> **cpu re-run in progress: 7 of 36 runs at today's settings; its shipped tables hold 7 of "
                        "them.**")
    for config in plan:
        store.write(config, seed=config["seed"], dataset=config["dataset"], status="ok", metrics={}, timings={})
    stamp_renders(results)
    assert banner().startswith("> **cpu re-run recorded (36 of 36 runs at today's settings), not yet rendered")
    table(plan)
    assert render in stamp_renders(results) and banner() is None


@pytest.mark.parametrize("seeds", [2, 5, 40])
def test_an_experiments_runs_and_cost_are_those_of_its_whole_plan(tmp_path, seeds):
    """``experiment`` hashes only the configs with a recorded seed; its counts and time per run equal those of
    every planned run id checked against the records (a failed record counts as new, a superseded one not)."""
    results = planted(tmp_path, recorded=9, superseded=4, tabled="none")
    store = ResultsStore(results, STUDY.name, "cpu")
    failed = as_dict(planned_configs(STUDY, "cpu")[9])
    store.write(failed, seed=failed["seed"], dataset=failed["dataset"], status="failed", metrics={}, timings={})
    records = {r["run_id"]: r for r in store.records()}
    ids = [store.run_id(c) for c in planned_configs(STUDY, "cpu", parameters={"seeds": seeds})]
    finished = [i for i in ids if records.get(i, {}).get("status") == "ok"]
    cost = experiment(STUDY, "cpu", {"seeds": seeds}, results)
    assert cost == {"planned": len(ids), "new": len(ids) - len(finished),
                    "seconds_per_run": 1.0 if finished else None,
                    "run_hours": (len(ids) - len(finished)) / 3600 if finished else None}
    assert len(finished) == 9  # the planted runs (seeds 0 and 1) are in every plan of two seeds or more


def test_setting_changes_name_each_differing_key_with_its_values():
    old = [{"seed": 0, "lr": 0.6, "batch_size": 32, "ood": []}, {"seed": 1, "lr": 0.6, "batch_size": 256, "ood": []}]
    new = [{"seed": 0, "lr": 0.3, "batch_size": 32, "ood": [], "init": "cff"},
           {"seed": 1, "lr": 0.3, "batch_size": 512, "ood": [], "init": "cff"}]
    assert setting_changes(old, new) == ["batch_size 32, 256 → 32, 512", "init (absent) → cff",
                                                  "lr 0.6 → 0.3"]


def test_every_shipped_render_carries_the_banner_its_records_imply(tmp_path):
    """What ``python -m lib.report`` would stamp is what is shipped: a copy of each shipped render, stamped
    with the banner the shipped records imply, is unchanged (so the main job changes no render), and its two
    HTML copies are the ones made from it today (``stamp`` leaves them alone where the notebook is right)."""
    for notebook in sorted((SHIPPED / "notebooks").glob("*.ipynb")):
        study, profile = notebook.stem.rsplit("_", 1)
        banner = coverage(find_study(study), profile, SHIPPED).banner()
        cells = nbformat.read(notebook, as_version=4).cells
        shipped = [c.source for c in cells if COVERAGE in c.metadata.get("tags", [])]
        assert shipped == ([f"> **{banner}**"] if banner else []), notebook.name
        for path in (SHIPPED / "notebooks").glob(f"{notebook.stem}*.html"):
            shutil.copy(path, tmp_path / path.name)
        shutil.copy(notebook, tmp_path / notebook.name)
        assert stamp(tmp_path / notebook.name, banner) == [], f"{notebook.name}: run python -m lib.report"
        reader = findings_first(nbformat.read(notebook, as_version=4))
        for path, exclude_input in ((notebook.with_suffix(".html"), False),
                                    (notebook.with_name(f"{notebook.stem}{REPORT_SUFFIX}.html"), True)):
            assert path.read_text(encoding="utf-8") == to_html(reader, notebook.stem, exclude_input=exclude_input), \
                f"{path.name} is not made from {notebook.name}: render it again (python -m lib.run_all)"


def test_stamping_a_render_whose_banner_is_right_converts_nothing_but_a_missing_copy(tmp_path, monkeypatch):
    """The notebook decides: with its banner right, neither HTML copy is made again; a banner that changes, or a
    copy that is missing, writes both copies again from the notebook."""
    shipped = SHIPPED / "notebooks" / "01_margin_factorial_quick.ipynb"
    for path in (SHIPPED / "notebooks").glob(f"{shipped.stem}*"):
        shutil.copy(path, tmp_path / path.name)
    render = tmp_path / shipped.name
    converted = []
    monkeypatch.setattr("lib.render.to_html", lambda nb, title, **kw: converted.append(title) or f"<html>{title}")
    assert stamp(render, None) == [] and converted == []
    (tmp_path / f"{shipped.stem}{REPORT_SUFFIX}.html").unlink()
    copies = [tmp_path / f"{shipped.stem}{suffix}.html" for suffix in ("", REPORT_SUFFIX)]
    assert stamp(render, None) == copies and converted == [shipped.stem] * 2
    assert stamp(render, "a banner") == [render] and converted == [shipped.stem] * 4  # copies made again, unchanged


def test_the_readme_lists_each_study_as_its_records_stand():
    text = (PROJECT_ROOT / "README.md").read_text()
    assert readme_block(text, README_BEGIN, README_END) == "\n".join(readme_lines()) + "\n", \
        "run python -m lib.coverage --readme"


def test_study_2_is_planned_over_the_datasets_its_records_show(tmp_path):
    """A plan that depends on the data found (check_data) is narrowed to the datasets of the records."""
    full = planned_configs(STUDIES["02"], "cpu")
    narrowed = planned_configs(STUDIES["02"], "cpu", {"mnist"})
    assert narrowed and {as_dict(c)["dataset"] for c in narrowed} == {"mnist"}
    assert len(narrowed) < len(full)
    assert json.dumps(sorted(map(str, narrowed))) == json.dumps(sorted(
        str(c) for c in full if as_dict(c)["dataset"] == "mnist"))
