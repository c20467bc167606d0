"""The notebooks' shared setup in one call, and the rule that decides where a run's results go.

It runs past 400 lines because every notebook's common cells live here (setup, runs, variants, the verdict table
over two looks): one place to change how all six notebooks behave.

    from lib.notebook import setup
    from lib.studies import margin_factorial as study
    nb = setup(study, globals())          # the setup cell: checks, settings, store, theme, header

``setup`` rejects parameter names the notebook does not have (those papermill injected, compared with
the notebook's parameters cell), resolves the settings through the study's ``resolve``, opens the
store the run writes to (canonical or a variant, below), loads the data the runs name (so missing data
fails before any run; with ``download`` torchvision first fetches what is found nowhere), sets the plot
theme and display options, and shows a header that says in bold which results the notebook writes, and where.

The variant rule, shared by the notebooks and the commands, is in ``lib.studies.variants``.
"""
from __future__ import annotations

import ast
import base64
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pandas as pd

from lib import PROJECT_ROOT, explore
from lib.core import dataset_facts, looks, verdict_html, verdicts
from lib.core.config import as_dict
from lib.core.data import DATASETS, get_dataset
from lib.core.forest import forest_png, panels
from lib.core.progress import INJECTED_CELL
from lib.render import HEADER
from lib.run import datasets, plans
from lib.run.results import ResultsStore
from lib.run.sweep import run_sweep
from lib.studies import find_study
from lib.studies.study import Study, is_central
from lib.studies.variants import (
    check_data,
    check_names,
    describe_variant,
    download_datasets,
    open_store,
    relative,
    unfinished,
    variant_of,
)

PARAMETERS_CELL = re.compile(r'^# %% tags=\["parameters"\]\n(.*?)\n\n(?=# %%)', re.S | re.M)


def parameters_cell(study: Study) -> str:
    """The source of the notebook's ``parameters`` cell (its jupytext ``.py``)."""
    found = PARAMETERS_CELL.search((PROJECT_ROOT / "notebooks" / f"{study.notebook}.py").read_text())
    if found is None:
        raise ValueError(f"notebooks/{study.notebook}.py has no cell tagged parameters")
    return found[1]


def write_parameters_cell(study: Study) -> list[Path]:
    """Write the study's parameters cell from its settings class into both files of the notebook's pair, creating it
    after the title cell where a notebook has none; returns the files it changed (none when the cell already reads
    as the class)."""
    import nbformat

    cell = study.settings.cell()
    py = PROJECT_ROOT / "notebooks" / f"{study.notebook}.py"
    text = py.read_text()
    found = PARAMETERS_CELL.search(text)
    changed = []
    if found is None:  # a new notebook: the cell goes after its title cell, where papermill injects below it
        second = text.index("# %%", text.index("# %%") + 1)
        py.write_text(text[:second] + '# %% tags=["parameters"]\n' + cell + "\n\n" + text[second:])
        changed.append(py)
    elif found[1] != cell:
        py.write_text(text[:found.start(1)] + cell + text[found.end(1):])
        changed.append(py)
    ipynb = py.with_suffix(".ipynb")
    nb = nbformat.read(ipynb, as_version=4)
    tagged = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    if tagged is None:
        tagged = nbformat.v4.new_code_cell("", metadata={"tags": ["parameters"]})
        nb.cells.insert(1, tagged)
    if tagged.source != cell:
        tagged.source = cell
        nbformat.write(nb, ipynb)
        changed.append(ipynb)
    return changed


def injected_names(history: list[str]) -> list[str]:
    """The names papermill passed to this kernel: the assignments of its injected-parameters cell, read
    from IPython's input history ``In`` (the sources of the cells executed so far)."""
    names = []
    for source in history:
        if source.lstrip().startswith(INJECTED_CELL):
            names += [t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
                      for t in node.targets if isinstance(t, ast.Name)]
    return names


# What the closing cells of every notebook say above their output (Setup.show_rerun, Setup.explore).
RERUN_NOTE = ("Every record carries the exact command that reproduces it (`extra.rerun` in `results/runs/...`; check "
              "out the record's `git_commit` first). The first run of this sweep:")
LEGACY_RERUN = ("(recorded before provenance was kept: python -m lib.rerun --train <module.function> --config "
                "<its config>)")
EXPLORE_NOTE = " ".join([
    "Choose the variant (the shipped results or one under `results/variants/`), the profile, a metric, a curve,",
    "the layer (where the curves have layers) and a cell: the table holds each seed's value in every cell (a cell",
    "is one combination of the settings the runs differ in, seeds apart), the left panel the same as dots, the",
    "right panel the chosen curve of every run. The controls need a live kernel; a static render shows this",
    "notebook's own results."])

DATA_SCALE = ("dataset", "datasets", "real_dataset", "train_subset", "real_train_subset")  # said by the data part
SIMULATIONS = "simulations"  # the sub-folder of a study's runs that holds its simulations (Setup.simulate)


@dataclass
class Setup:
    """What the setup cell leaves for the notebook."""

    study: Study
    settings: dict
    configs: list
    store: ResultsStore
    variant: str | None  # None: the canonical results
    changes: dict = field(default_factory=dict)  # the settings that differ from the profile's own
    reused: list[str] = field(default_factory=list)  # run ids copied from the canonical store
    datasets: dict = field(default_factory=dict)  # dataset label -> its DatasetFacts (lib.run.datasets)
    checked_data: tuple | None = None  # what the study's check_data returned, if it has one
    data_root: str | None = None
    results_dir: str | Path = "results"
    to_train: list = field(default_factory=list)  # the planned configs without a finished record (all, with force)

    def header(self) -> str:
        """The set-up cell's lines: the run's profile and data (:meth:`first_screen`), which results it writes and
        where, its plan and data. A variant's line comes first: its renders are not the shipped results, and a reader
        should know that before the profile line and the verdicts under it (the reader's copies lift the first
        :meth:`lead_lines` lines under the title, lib.render)."""
        s = self.settings
        runs = f"{len(self.configs)} runs" + (f", {len(self.reused)} reused from the canonical results"
                                              if self.reused else "")
        data = "; ".join(f"`{label}`: {facts.describe()}" for label, facts in self.datasets.items()) or "none"
        data += (f" (loaded: {len(self.to_train)} runs train)" if self.to_train else
                 " (every run is recorded: nothing here needs the arrays)") if self.datasets else ""
        where = f"`{relative(self.store.root)}/`"
        if self.variant is None:
            writes = f"**Writes the canonical `{s['profile']}` results** to {where}."
        else:
            changed = ", ".join(f"{k} = {v!r}" for k, v in self.changes.items()) or "none"
            writes = (f"**Writes variant `{self.variant}`** to {where} (overrides: {changed}); "
                      f"the shipped `{s['profile']}` results are not touched.")
        lines = [writes, self.first_screen()] if self.variant is not None else [self.first_screen(), writes]
        return "  \n".join([*lines, f"**Plan**: {runs}. **Data**: {data}."])

    def lead_lines(self) -> int:
        """How many of the header's lines lead the reader's copies: the profile line, and before it a variant's
        line with its overrides."""
        return 2 if self.variant is not None else 1

    def dataset(self, config) -> dataset_facts.DatasetFacts:
        """The facts of the dataset a run config trains on (recorded with the runs, or read where a run trains)."""
        c = as_dict(config)
        return self.datasets[dataset_facts.label_of(c["dataset"], c.get("dataset_options"))]

    def sample_images(self, config, count: int):
        """The first ``count`` training images of a config's dataset, for a figure, and a note on where they come
        from: the dataset's own where it needs no arrays (embedded or generated) or a run trains on it (then it is
        loaded anyway); else scikit-learn's digits, so that rendering recorded runs reads no arrays."""
        c = as_dict(config)
        name, options = c["dataset"], c.get("dataset_options") or {}
        if not DATASETS[name].fetched or dataset_facts.label_of(name, options) in dataset_facts.specs(self.to_train):
            return get_dataset(name, options, self.data_root).x_train[:count], ""
        note = (f" (shown on scikit-learn's digits: every run on {DATASETS[name].display_name} is recorded, and a "
                "render of recorded runs reads no arrays)")
        return get_dataset("digits").x_train[:count], note

    def first_screen(self) -> str:
        """The line a reader meets under the title: the profile, the data this run uses (a real dataset's training
        images: the subsets of the cpu profile say so), the model and length (:meth:`scale`) and the paper's data.
        The images are those the recorded runs trained on (:func:`lib.run.datasets.training_images`, as the report
        says them: CFF's runs hold 10% of their split out); before any run of a dataset is recorded, its split's."""
        names = sorted({as_dict(c).get("dataset", "") for c in self.configs} - {""})
        split = {f.name: f"a split of {f.train_images:,} training images" for f in self.datasets.values()
                 if f.name in names and not f.options and DATASETS[f.name].fetched}
        waiting = {self.store.run_id(c) for c in self.to_train}
        done = [self.store.load(run_id) for run_id in dict.fromkeys(map(self.store.run_id, self.configs))
                if run_id not in waiting]
        trained = datasets.training_images([record for record in done if record is not None])
        sizes = {n: f"{', '.join(f'{k:,}' for k in trained[n])} training images" if n in trained else split[n]
                 for n in split}
        here = ", ".join((DATASETS[n].display_name if n in DATASETS else n)
                         + (f" ({sizes[n]})" if n in sizes else "") for n in names) or "no dataset"
        return (f"**Profile `{self.settings['profile']}`** on {here}; {self.scale()}; the paper's data: "
                f"{self.study.module.PAPER_DATA}.")

    def scale(self) -> str:
        """The model and length these runs have, by the study's ``SCALE`` settings other than the data's (the report
        names the same under the study): "width multiplier 0.25, epochs 6, batch sizes 32/128/512, seeds 2"."""
        shown = []
        for key in self.study.module.SCALE:
            value = self.settings.get(key)
            if key in DATA_SCALE or value in (None, 0, [], ""):
                continue
            text = "/".join(map(str, value)) if isinstance(value, (list, tuple)) else f"{value:g}" if isinstance(
                value, float) else str(value)
            shown.append(f"{key.replace('_', ' ')} {text}")
        return ", ".join(shown)


    def run(self, frame: Callable[[list[dict]], Any], *, show: list[str]) -> tuple[list[dict], Any]:
        """The notebook's runs: train every planned config without a finished record (``lib.run.sweep``),
        write the collected table and show the runs that are not ok (with the ``show`` columns of
        ``frame(records)``, the study's runs frame); returns the records and that frame."""
        from IPython.display import Markdown, display

        records = run_sweep(self.store, self.configs, self.study.train_fn, data_root=self.data_root,
                            **self.study.module.sweep_options(self.settings))
        table = self.store.write_table()
        runs = frame(records)
        failed = runs[runs.status != "ok"]
        display(Markdown(f"{len(runs)} runs, {len(failed)} not ok; table: `{table.name}`"))
        if len(failed):
            display(failed[["run_id", "status", *show]])
        return records, runs


    def two_looks(self, records: list[dict], **context) -> pd.DataFrame:
        """The study's verdict table over its shipped runs (``records``) and, for the canonical results, the runs of
        its extension plans (``lib.decide``): each planned claim whose look 2 has finished is read there against its
        boundary (:func:`lib.core.looks.two_looks`). The table is the study module's ``verdict_table(runs, looks,
        settings, **context)``; ``context`` is what it reads beside the runs, by name (the trajectory, the sources)."""
        ext = plans.extension(self.store) if self.variant is None else plans.Extension()
        runs = self.study.module.runs_frame(records + ext.records)
        table_of = functools.partial(self.study.module.verdict_table, settings=self.settings, **context)
        return looks.two_looks(table_of, runs, ext.claims)

    def show_rerun(self, records: list[dict]) -> None:
        """The command that re-runs the first of ``records``, under a line saying where every record keeps its own;
        its data folder, a path of the machine that ran it, written as ``$DATA_ROOT``."""
        from IPython.display import Markdown, display

        display(Markdown(RERUN_NOTE))
        command = records[0]["extra"].get("rerun", LEGACY_RERUN)
        print(re.sub(r"--data-root ('[^']*'|\S+)", '--data-root "$DATA_ROOT"', command))

    def explore(self) -> explore.Explorer:
        """The study's results explorer (:func:`lib.explore.results_explorer`), opened at this notebook's profile
        and variant, under a line saying what its controls do."""
        from IPython.display import Markdown, display

        display(Markdown(EXPLORE_NOTE))
        return explore.results_explorer(self.study.module, profile=self.settings["profile"], variant=self.variant,
                                        results_dir=self.results_dir)

    def simulate(self, train_fn: Callable, configs: list, *, batched_fn: Callable | None = None) -> list[dict]:
        """The study's simulations, run like its runs: every config without a finished record is simulated
        (``batched_fn``: the seeds of a setting side by side) and recorded in the store's ``simulations``
        part, and every record is returned, so that a re-render reads them instead of simulating again.
        A variant reuses the canonical records of the configs it shares with them."""
        store, _ = open_store(self.study, self.settings, configs, self.results_dir, self.variant, SIMULATIONS)
        records = run_sweep(store, configs, train_fn, batched_fn=batched_fn, progress=False)
        failed = [r for r in records if r["status"] != "ok"]
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(records)} simulations failed; the first: {failed[0]['error']}")
        return records


# The verdict tables' look in a rendered notebook: each row marked with its verdict's colour (lib.core.verdicts.COLOURS,
# as in the report), checks shaded apart, an arm's heading across the table, the central claim framed, a cell's
# short values kept on one line; on a narrow screen every row becomes a card, its verdict in view.
VERDICT_STYLE = "".join(
    [".verdict-table td.verdict { font-weight: 600; }",
     ".verdict-table tr.check td { background: #fafcff; color: #444; }",
     ".verdict-table td.n, .verdict-table td.p, .verdict-table td.p_holm, .verdict-table td.power,"
     " .verdict-table td.ci_level { white-space: nowrap; }",
     ".verdict-table tr.arm td { background: #eef2f7; font-weight: 600; }",
     ".verdict-table tr.central td { border-top: 2px solid #333; border-bottom: 2px solid #333; }"]
    + [f".verdict-table tr.{css} td.verdict {{ border-left: 6px solid {colour}; }}"
       for css, colour in verdicts.COLOURS.items()]
    + ["@media (max-width: 40rem) { .verdict-table, .verdict-table tbody, .verdict-table tr, .verdict-table td "
       "{ display: block; } .verdict-table thead { display: none; } .verdict-table td { padding: 0.1rem 0.4rem; }"
       " .verdict-table tr { display: flex; flex-direction: column; border-top: 2px solid #999; }"
       " .verdict-table td.quantity { order: -2; font-weight: 600; } .verdict-table td.verdict { order: -1; }"
       " .verdict-table td::before { content: attr(data-label) \": \"; color: #666; font-weight: normal; }"
       " .verdict-table tr.arm td::before { content: none; }"
       " .verdict-table tr.central td { border-top: none; border-bottom: none; }"
       " .verdict-table tr.central { border: 2px solid #333; } }"])


def verdict_table_html(frame: pd.DataFrame, central: Callable[[str], bool] | None = None) -> str:
    """A table of lib.core.verdicts (:func:`lib.core.verdicts.table`) as a reader sees it
    (:func:`lib.core.verdict_html.table_html`): the columns of :data:`lib.core.verdicts.SHOWN`, no index, each row
    coloured by its verdict (the report's colours), the row whose id is ``central`` (the study's ``CENTRAL``) marked."""
    columns = [c for c in verdicts.SHOWN if c in frame]
    return (f"<style>{VERDICT_STYLE}</style>{forest_html(frame, central)}<div style=\"overflow-x: auto\">"
            f"{verdict_html.table_html(frame, columns, central=central)}</div>")


def forest_html(frame: pd.DataFrame, central: Callable[[str], bool] | None = None) -> str:
    """The forest plot of a verdict table's claims (:func:`lib.core.forest.forest_png`) as an inline image, so that
    the findings cell, moved under the title of a render, opens with every claim's interval against the paper's
    value; "" for a table without typed records (one written before the verdict engine) or without an estimate."""
    if "record" not in frame:
        return ""
    records = [json.loads(text) for text in frame["record"]]
    if not any(rows for _, _, rows, _ in panels({"": records})):
        return ""  # no claim has an estimate: the table says why each is not measured
    png = base64.b64encode(forest_png({"": records}, {"": central} if central else None)).decode("ascii")
    return (f'<img src="data:image/png;base64,{png}" style="max-width: 100%" '
            'alt="every claim: our estimate with its interval (dot and bar, coloured by verdict), the paper\'s value '
            '(diamond)">')


MISSING = "–"  # a cell without a value, as the verdict tables write it: "NaN" means nothing to a reader


def frame_html(frame: pd.DataFrame, central: Callable[[str], bool] | None = None) -> str:
    """A table as the notebooks show it: a verdict table (:func:`verdict_table_html`, ``central`` marked) coloured by
    verdict; any other, pandas' own HTML with its display options, without the index column where the index is only
    the row numbers 0..n-1 (a RangeIndex without a name says nothing to a reader), and a missing value shown as
    :data:`MISSING` (an ANOVA's residual row has no F and no p: statsmodels leaves them NaN)."""
    if {"verdict", "kind", "power"} <= set(frame.columns):
        return verdict_table_html(frame, central)
    numbered = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    return frame.to_html(index=not numbered, na_rep=MISSING, max_rows=pd.get_option("display.max_rows"),
                         max_cols=pd.get_option("display.max_columns"),
                         show_dimensions=pd.get_option("display.show_dimensions"), notebook=True, border=0)


def setup(module: ModuleType, namespace: dict, *, precision: int = 3) -> Setup:
    """The setup cell of every notebook: check the parameters in ``namespace`` (the notebook's
    ``globals()``), resolve them, open the store, load the data, set the theme and show the header."""
    import numpy as np
    import seaborn as sns
    from IPython import get_ipython
    from IPython.display import Markdown, display

    study = find_study(module)
    check_names(study, injected_names(namespace.get("In", [])))
    settings = module.resolve(dict(namespace))
    variant, changes = variant_of(study, namespace, settings)
    data_root = namespace.get("data_root")
    download_datasets(study, settings, data_root, namespace.get("download", False))
    # The store first, over the whole plan: a dataset is loaded only where a run still has to train on it, and a
    # study's check_data (which may narrow the plan to the datasets found) describes the others from the records.
    store, reused = open_store(study, settings, module.plan(settings), namespace.get("results_dir", "results"),
                               variant)
    if variant is not None:
        describe_variant(store.root, study, settings["profile"], changes)
    checked = check_data(study, settings, [store], data_root)
    configs = module.plan(settings)
    to_train = unfinished([store], configs, settings)
    facts, _ = datasets.describe(store, configs, to_train, data_root)
    sns.set_theme(style="whitegrid", context="notebook")
    np.random.seed(0)  # strip plots jitter their dots with numpy's global generator: a re-render repeats them
    pd.set_option("display.precision", precision)
    pd.set_option("display.max_colwidth", None)  # verdicts are sentences: never cut them
    shell = get_ipython()
    if shell is not None:  # tables indexed by row number show no index column
        central = functools.partial(is_central, module=module)
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame,
                                                                 lambda frame: frame_html(frame, central))
    nb = Setup(study, settings, configs, store, variant, changes, reused, facts, checked, data_root,
               namespace.get("results_dir", "results"), to_train)
    display(Markdown(nb.header()), metadata={HEADER: nb.lead_lines()})  # lines the reader's copy lifts to the top
    return nb


def main(argv: list[str] | None = None) -> None:
    """``python -m lib.notebook --parameters NN [--write]``: print a study's parameters cell as its settings class
    declares it, or write it into the notebook's pair (after adding or changing a parameter)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lib.notebook", description=main.__doc__)
    parser.add_argument("--parameters", required=True, metavar="STUDY", help="a study number (05) or notebook name")
    parser.add_argument("--write", action="store_true", help="write the cell into notebooks/<notebook>.py and .ipynb")
    args = parser.parse_args(argv)
    study = find_study(args.parameters)
    if not args.write:
        print(study.settings.cell())
        return
    changed = write_parameters_cell(study)
    print("\n".join(relative(p) for p in changed) or f"notebooks/{study.notebook}: the cell already reads as the class")


if __name__ == "__main__":
    main()
