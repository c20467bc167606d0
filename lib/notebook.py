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

The variant rule, shared by the notebooks, ``lib.dispatch`` and ``lib.run_all`` (:func:`variant_of`):
a profile's canonical results are the runs of its own parameters. The settings are resolved once with
the parameters given and once with the notebook's defaults for the same profile; any difference,
leaving out the operational parameters (``OPERATIONAL``: where data and results live, whether data may
be downloaded, how many workers, which device, ``force``), makes the run a *variant*. It is named by the ``variant``
parameter, else from the overridden settings (``m0-0.3_seeds-3``), and its records, tables and
renders live under ``<results>/variants/<variant>/`` (``lib.run.results.variant_root``).
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pandas as pd

from lib import PROJECT_ROOT, explore
from lib.core import dataset_facts, params, verdict_html, verdicts
from lib.core.config import as_dict
from lib.core.data import DATASETS, get_dataset, load_datasets
from lib.core.progress import INJECTED_CELL
from lib.core.settings import check_variant
from lib.render import HEADER
from lib.run import datasets, plans
from lib.run.results import ResultsStore, atomic_write_text, config_json, variant_root
from lib.run.sweep import run_sweep
from lib.studies import Study, find_study

# Parameters that say where and how a run happens, not what it computes: they never make a variant.
RESERVED = ("profile", "data_root", "download", "results_dir", "variant")  # set by a command's own option, not -p
OPERATIONAL = ("data_root", "download", "results_dir", "workers", "device", "force", "variant")
DERIVED_NAME_MAX = 80  # a longer derived name is cut and ends with a hash of the whole


def notebook_defaults(study: Study) -> dict:
    """The notebook's ``parameters`` cell as a dict of values: its study's settings class's defaults, from which
    the cell is written (tests/test_settings.py fails when the two differ)."""
    return study.settings.defaults()


PARAMETERS_CELL = re.compile(r'^# %% tags=\["parameters"\]\n(.*?)\n\n(?=# %%)', re.S | re.M)


def parameters_cell(study: Study) -> str:
    """The source of the notebook's ``parameters`` cell (its jupytext ``.py``)."""
    found = PARAMETERS_CELL.search((PROJECT_ROOT / "notebooks" / f"{study.notebook}.py").read_text())
    if found is None:
        raise ValueError(f"notebooks/{study.notebook}.py has no cell tagged parameters")
    return found[1]


def write_parameters_cell(study: Study) -> list[Path]:
    """Write the study's parameters cell from its settings class into both files of the notebook's pair; returns
    the files it changed (none when the cell already reads as the class)."""
    import nbformat

    cell = study.settings.cell()
    py = PROJECT_ROOT / "notebooks" / f"{study.notebook}.py"
    text = py.read_text()
    found = PARAMETERS_CELL.search(text)
    changed = []
    if found[1] != cell:
        py.write_text(text[:found.start(1)] + cell + text[found.end(1):])
        changed.append(py)
    ipynb = py.with_suffix(".ipynb")
    nb = nbformat.read(ipynb, as_version=4)
    tagged = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    if tagged.source != cell:
        tagged.source = cell
        nbformat.write(nb, ipynb)
        changed.append(ipynb)
    return changed


def check_names(study: Study, names) -> None:
    """Reject parameter names the notebook does not have, naming each and its close matches."""
    params.unknown_names(f"parameter of {study.notebook}:", names, notebook_defaults(study))


def injected_names(history: list[str]) -> list[str]:
    """The names papermill passed to this kernel: the assignments of its injected-parameters cell, read
    from IPython's input history ``In`` (the sources of the cells executed so far)."""
    names = []
    for source in history:
        if source.lstrip().startswith(INJECTED_CELL):
            names += [t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
                      for t in node.targets if isinstance(t, ast.Name)]
    return names


def _key(value) -> str:
    """Equal for settings that run the same: numbers normalised as in run ids (10 == 10.0)."""
    try:
        return config_json({"v": value})
    except (TypeError, ValueError):
        return repr(value)


def _slug(value) -> str:
    if isinstance(value, dict):
        text = "-".join(f"{k}-{_slug(v)}" for k, v in sorted(value.items()))
    elif isinstance(value, (list, tuple)):
        text = "-".join(_slug(v) for v in value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "none"


def derive_name(changes: dict) -> str:
    """A file-name-safe variant name from the overridden settings: ``m0-0.3_seeds-3``."""
    name = "_".join(f"{key}-{_slug(value)}" for key, value in sorted(changes.items()))
    if len(name) > DERIVED_NAME_MAX:
        name = name[:DERIVED_NAME_MAX - 13].rstrip("-_.") + "-" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return name


def variant_of(study: Study, parameters: dict, settings: dict) -> tuple[str | None, dict]:
    """The variant a run writes (None: the canonical results) and the settings that differ from the
    profile's own. ``parameters``: what the notebook received (its namespace, or defaults plus ``-p``
    values); ``settings``: ``study.module.resolve(parameters)``. The rule is in the module docstring."""
    defaults = notebook_defaults(study)
    given = check_variant(parameters.get("variant"))
    operational = {k: parameters[k] for k in OPERATIONAL if k in parameters and k in defaults}
    reference = study.module.resolve({**defaults, **operational, "profile": settings["profile"]})
    changes = {k: settings.get(k) for k in sorted(set(settings) | set(reference))
               if k not in OPERATIONAL and _key(settings.get(k)) != _key(reference.get(k))}
    if not changes and given is None:
        return None, {}
    overridden = {k for k in defaults if k not in OPERATIONAL and k in parameters
                  and _key(parameters[k]) != _key(defaults[k])}
    named = {k: v for k, v in changes.items() if k in overridden} or changes
    return given or derive_name(named), changes


def resolve_command(study: Study, *, profile: str, parameters: dict, data_root: str | None = None,
                    results_dir: str = "results", variant: str | None = None) -> tuple[dict, str | None]:
    """The settings and the variant of a command line (``lib.dispatch``, ``lib.run_all``): its ``-p``
    ``parameters`` checked by name and value as the notebook would check them. No compute."""
    reserved = sorted(set(RESERVED) & set(parameters))
    if reserved:
        raise params.ParameterError(f"parameter {reserved[0]} is set by its own option ({', '.join(RESERVED)})")
    check_names(study, parameters)
    p = {**notebook_defaults(study), **parameters, "profile": profile, "data_root": data_root,
         "results_dir": results_dir, "variant": variant}
    settings = study.module.resolve(p)
    return settings, variant_of(study, p, settings)[0]


def open_store(study: Study, settings: dict, configs: list, results_dir: str | Path,
               variant: str | None, part: str = "") -> tuple[ResultsStore, list[str]]:
    """The store the runs write to and the run ids it reused from the canonical store (copied records);
    ``part``: the store of the study's simulations (:meth:`ResultsStore.part`) instead of its runs."""
    results = PROJECT_ROOT / results_dir
    canonical = ResultsStore(results, study.name, settings["profile"])
    canonical = canonical.part(part) if part else canonical
    if variant is None:
        return canonical, []
    store = ResultsStore(variant_root(results, variant), study.name, settings["profile"])
    store = store.part(part) if part else store
    return store, [] if settings.get("force") else store.copy_finished(canonical, configs)


VARIANT_NOTE = "variant.json"  # in a variant's root: per study, the profile and the overrides that made it


def describe_variant(root: Path, study: Study, profile: str, changes: dict) -> None:
    """Write, in the variant's root, the profile and the settings that made it, per study (merged with what other
    studies wrote there): the variants page builds the command that renders it from them (lib.report)."""
    path = Path(root) / VARIANT_NOTE
    known = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    known[study.name] = {"profile": profile, "overrides": json.loads(json.dumps(changes, default=str))}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(known, indent=1, sort_keys=True) + "\n")


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

SIMULATIONS = "simulations"  # the sub-folder of a study's runs that holds its simulations (Setup.simulate)


def download_datasets(study: Study, settings: dict, data_root: str | None, download: bool) -> None:
    """With ``download``, fetch the datasets of the study's whole plan before its ``check_data``, which would
    skip one it cannot load (the data are then in torchvision's cache for every process)."""
    if params.flag("download", download):
        load_datasets(study.module.plan(settings), data_root, download=True)


def unfinished(stores: list[ResultsStore], configs: list, settings: dict) -> list:
    """The configs a sweep of ``configs`` would train: those without a finished record in any of ``stores`` (a
    variant's and the canonical one it copies from), or all of them with ``force``; each once."""
    unique = {stores[0].run_id(c): c for c in configs}
    return [c for c in unique.values() if settings.get("force") or not any(s.is_finished(c) for s in stores)]


def check_data(study: Study, settings: dict, stores: list[ResultsStore], data_root: str | None):
    """A study's ``check_data`` (study 2: it may narrow the plan to the datasets found), or None without one. The
    datasets no run still has to train on are described from the facts recorded in ``stores`` (lib.run.datasets),
    not loaded, so that recorded runs render without the arrays."""
    if study.check_data is None:
        return None
    needed = dataset_facts.specs(unfinished(stores, study.module.plan(settings), settings))
    known = {label: facts for store in stores for label, facts in datasets.recorded(store).items()}
    return study.check_data(settings, data_root, {k: v for k, v in known.items() if k not in needed})


def relative(path: Path) -> str:
    """``path`` relative to the project root where it lies under it (what a reader of the notebook can find)."""
    path = Path(path)
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


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
        return f"{self.first_screen()}  \n{writes}  \n**Plan**: {runs}. **Data**: {data}."

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
        images: the subsets of the cpu profile say so) and the paper's."""
        names = sorted({as_dict(c).get("dataset", "") for c in self.configs} - {""})
        sizes = {f.name: f.train_images for f in self.datasets.values()
                 if f.name in names and not f.options and DATASETS[f.name].fetched}
        here = ", ".join((DATASETS[n].display_name if n in DATASETS else n)
                         + (f" ({sizes[n]:,} training images)" if n in sizes else "") for n in names) or "no dataset"
        return (f"**Profile `{self.settings['profile']}`** on {here}; the paper's data: "
                f"{self.study.module.PAPER_DATA}.")


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


    def two_looks(self, table_of: Callable[[pd.DataFrame, dict], pd.DataFrame], records: list[dict]) -> pd.DataFrame:
        """The study's verdict table over its shipped runs (``records``) and, for the canonical results, the runs of
        its extension plans (``lib.decide``): each planned claim whose look 2 has finished is read there against its
        boundary (:func:`lib.run.plans.two_looks`). ``table_of(runs, looks)``: the study's verdict table."""
        ext = plans.extension(self.store) if self.variant is None else plans.Extension()
        runs = self.study.module.runs_frame(records + ext.records)
        return plans.two_looks(table_of, runs, ext)

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


def verdict_table_html(frame: pd.DataFrame, central: str | None = None) -> str:
    """A table of lib.core.verdicts (:func:`lib.core.verdicts.table`) as a reader sees it
    (:func:`lib.core.verdict_html.table_html`): the columns of :data:`lib.core.verdicts.SHOWN`, no index, each row
    coloured by its verdict (the report's colours), ``central`` (the study's ``HEADLINE``) marked."""
    columns = [c for c in verdicts.SHOWN if c in frame]
    return (f"<style>{VERDICT_STYLE}</style><div style=\"overflow-x: auto\">"
            f"{verdict_html.table_html(frame, columns, central=central)}</div>")


def frame_html(frame: pd.DataFrame, central: str | None = None) -> str:
    """A table as the notebooks show it: a verdict table (:func:`verdict_table_html`, ``central`` marked) coloured by
    verdict; any other, pandas' own HTML, without the index column where the index is only the row numbers 0..n-1
    (a RangeIndex without a name says nothing to a reader)."""
    if {"verdict", "kind", "power"} <= set(frame.columns):
        return verdict_table_html(frame, central)
    if isinstance(frame.index, pd.RangeIndex) and frame.index.name is None:
        return frame.to_html(index=False, max_rows=pd.get_option("display.max_rows"),
                             max_cols=pd.get_option("display.max_columns"), notebook=True, border=0)
    return frame._repr_html_()


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
        central = getattr(module, "HEADLINE", None)
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame,
                                                                 lambda frame: frame_html(frame, central))
    nb = Setup(study, settings, configs, store, variant, changes, reused, facts, checked, data_root,
               namespace.get("results_dir", "results"), to_train)
    display(Markdown(nb.header()), metadata={HEADER: True})  # the reader's copy lifts its first line to the top
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
