"""One page over every study: ``results/index.html``.

    python -m lib.report                      # from results/ as the notebooks left it
    python -m lib.report --results-dir other
    python -m lib.report --output-dir /tmp/page   # the same page written elsewhere (links point back)
    python -m lib.report --readme                 # also the README's list of central claims

The page opens with a summary: one row per study, from the strongest profile whose plan is fully recorded
(:func:`summary_profile`), with the study's question (``QUESTION`` in its module), its central claim (the
verdict-table row whose id the module names ``CENTRAL``: ours with its CI, the paper's value, the verdict and the
power) and its rows counted by verdict (:data:`KINDS`, the grammar of ``lib.core.verdicts``; our checks apart);
then "What it would take" (:func:`to_decide`): what ``python -m lib.decide --budget 8 --dry-run`` says, from the
same functions: each claim a two-look design can decide, with its runs, wall hours and command, and each inconclusive
or out-of-regime claim none decides, with why (:func:`what_next_rows` gives one study's). Then, for each rendered
notebook ``results/notebooks/<study>_<profile>.ipynb``, a section: where its records came from (profile, data,
runs, the git commit of each run: :func:`commit_statement`, and the machines: :func:`machine_statement`), its
paper-vs-reproduced table (``results/tables/<study>_<profile>_paper_vs_reproduced.csv``, written by
``lib.core.verdicts.table``: ours with its CI, the paper's, the evidence tag, seeds, power, seeds needed, Holm p,
verdict; a table written before the engine is shown apart and never counted), its key figure (the image
output of the cell tagged ``key-figure``, else the notebook's first image, written to ``figures/`` beside the
page) and links to the rendered notebook. Variants (runs with
other parameters than their profile's, under ``results/variants/<variant>/``) are not the project's
results: they are listed on a page of their own, ``results/variants/index.html``, with links to their
renders, so that a user's experiment never changes the shipped page; a ``smoke`` render, a check of the code
paths, is left out. The
page is static HTML with relative links, inline CSS and no script, so it opens from a file system or any
web server; the same records give the same bytes (no timestamps).

The module runs past 400 lines because the page is one document: the summary, the decide table, each study's
verdict table with its grammar badges, the coverage banners and the README's generated list are written here
together, so that they cannot disagree.
"""
from __future__ import annotations

import argparse
import base64
import functools
import html
import json
import os
import re
import shlex
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import nbformat
import pandas as pd

from lib import PROJECT_ROOT
from lib.core import verdict_html
from lib.core.forest import NARROW, forest_png
from lib.core.settings import literal
from lib.core.verdicts import CLASSES, COLOURS, DECIDED, SHOWN
from lib.render import REPORT_SUFFIX, stamp
from lib.run import datasets
from lib.run.files import atomic_write_bytes, atomic_write_text
from lib.run.plans import load_plans
from lib.run.results import FINISHED_STATUSES, VARIANTS_DIR, ResultsStore, variant_root
from lib.studies import STUDIES, extension, find_study
from lib.studies.coverage import coverage
from lib.studies.extension import BUDGET_HOURS
from lib.studies.study import is_central
from lib.studies.variants import VARIANT_NOTE

RENDERED = re.compile(r"^(?P<study>\d\d_[a-z0-9_]+?)_(?P<profile>smoke|quick|cpu|paper)$")
PROFILE_ORDER = ("paper", "cpu", "quick", "smoke")  # the strongest evidence first
SHIPPED_PROFILES = ("paper", "cpu", "quick")  # smoke checks code paths: git ignores its files, the page leaves it out
README = PROJECT_ROOT / "README.md"  # its generated blocks: :func:`write_readme_block`
STUDY_SPEC = PROJECT_ROOT / "docs" / "studies.md"  # the studies' claims and evidence tags, in the repository

# The verdicts of lib.core.verdicts' grammar, in the summary's order: CSS class -> label. "superseded" marks every row
# of a table written before the engine (a cpu table of superseded settings, until its re-run lands): its words
# are not the grammar's, so the page shows them apart and never counts them.
KINDS = {
    "reproduced": "reproduced",
    "smaller": "reproduced, smaller",
    "contradicted": "contradicted",
    "not-reproduced": "not reproduced",
    "inconclusive": "inconclusive",
    "not-measured": "not measured",
    "out-of-regime": "not in the paper's regime",
    "exploratory": "exploratory",
    "check": "check (ours)",
    "superseded": "written before the verdict engine",
}


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 80rem; margin: 0.8rem auto; padding: 0 0.8rem; color: #222;
  line-height: 1.35; }
h1 { font-size: 1.4rem; margin: 0 0 0.2rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } img { max-width: 100%; border: 1px solid #eee; }
.meta { color: #555; font-size: 0.85rem; margin: 0.2rem 0; } .scroll { overflow-x: auto; }
table.summary { width: 100%; font-size: 0.85rem; } .summary td.study a { white-space: nowrap; }
.summary th.study { width: 18%; } .summary th.q { width: 24%; } .summary th.finding { width: 38%; }
.summary th.verdicts { width: 20%; }
.verdicts td.n, .verdicts td.p_holm, .verdicts td.power { white-space: nowrap; }
tr.arm td { background: #eef2f7; font-weight: 600; } tr.central td { border-top: 2px solid #333; }
.flag { white-space: nowrap; } .finding .badge { white-space: normal; }
details.meta { margin: 0.2rem 0 0.6rem; } details.meta summary { cursor: pointer; }
.badge { display: inline-block; border-radius: 0.6rem; padding: 0 0.45rem; margin: 0.1rem 0.1rem 0.1rem 0;
  font-size: 0.78rem; white-space: nowrap; border: 1px solid transparent; }
img.forest { max-width: 100%; border: none; }
dl.glossary { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 0.6rem; font-size: 0.85rem;
  margin: 0.4rem 0; } dl.glossary dd { margin: 0; }
@media (max-width: 40rem) { dl.glossary { grid-template-columns: 1fr; } dl.glossary dd { margin-bottom: 0.3rem; } }
.badge.superseded { background: #fff; color: #777; border-color: #bbb; }
.stale { background: #fff4e5; border-left: 4px solid #e67e22; padding: 0.25rem 0.5rem; margin: 0.2rem 0 0.4rem;
  font-size: 0.85rem; }
tr.superseded td { color: #666; }
tr.check td { background: #fafcff; }
@media (max-width: 40rem) {
  h1 { font-size: 1.1rem; } .summary td.q { display: none; }  /* the question opens each study's section */
  table.summary, table.summary tbody, table.summary tr, table.summary td { display: block; width: auto; }
  table.summary tr:first-child { display: none; }
  table.summary tr { border: 1px solid #ccc; margin-bottom: 0.5rem; }
  table.summary td { border: none; padding: 0.1rem 0.4rem; } .summary td.study { white-space: normal; }
  .summary td.study div.meta { display: inline; margin-left: 0.4rem; }
  table.verdicts, table.verdicts tbody, table.verdicts tr, table.verdicts td { display: block; }
  table.verdicts thead { display: none; } table.verdicts tr { border-top: 2px solid #999; }
  table.verdicts td { border: none; padding: 0.1rem 0.4rem; } table.verdicts td.quantity { font-weight: 600; }
  table.verdicts td::before { content: attr(data-label) ": "; color: #666; font-weight: normal; }
  table.verdicts td.quantity::before, table.verdicts tr.arm td::before { content: none; }
  table.decide, table.decide tbody, table.decide tr, table.decide td { display: block; width: auto; }
  table.decide tr:first-child { display: none; } table.decide tr { border: 1px solid #ccc; margin-bottom: 0.5rem; }
  table.decide td { border: none; padding: 0.1rem 0.4rem; }
  table.decide td::before { content: attr(data-label) ": "; color: #666; }
}
"""
DARK = ("reproduced", "contradicted")  # badges whose colour wants white text
STYLE += "".join(  # each verdict's colour, from lib.core.verdicts (the notebooks' verdict tables use the same)
    f".badge.{css} {{ background: {colour}; color: {'#fff' if css in DARK else '#222'}; }}\n"
    f"tr.{css} td.verdict {{ border-left: 5px solid {colour}; }}\n" for css, colour in COLOURS.items())


def verdict_kind(word: str) -> str | None:
    """The CSS class (a key of :data:`KINDS`) of a verdict word of lib.core.verdicts' grammar (a typed record's
    ``verdict``); None for other words."""
    return CLASSES.get(word)


def rendered_notebooks(results: Path) -> list[tuple[str, str, Path]]:
    """(study, profile, path) of every rendered notebook of a shipped profile, by study, strongest profile first
    (a smoke render is a check of the code paths, never shipped: leaving it out, running it changes no byte of
    the page)."""
    found = []
    for path in (results / "notebooks").glob("*.ipynb"):
        match = RENDERED.match(path.stem)
        if match and match["profile"] in SHIPPED_PROFILES:
            found.append((match["study"], match["profile"], path))
    return sorted(found, key=lambda f: (f[0], PROFILE_ORDER.index(f[1])))


def variant_renders(results: Path) -> list[tuple[str, str, str, Path]]:
    """(variant, study, profile, path) of every rendered notebook of a variant, by variant and study."""
    found = []
    for path in (results / VARIANTS_DIR).glob("*/notebooks/*.ipynb"):
        match = RENDERED.match(path.stem)
        if match:
            found.append((path.parents[1].name, match["study"], match["profile"], path))
    return sorted(found, key=lambda f: (f[0], f[1], PROFILE_ORDER.index(f[2])))


def href(target: Path, page_dir: Path) -> str:
    """``target`` as an escaped link relative to the page's folder."""
    return html.escape(Path(os.path.relpath(target, page_dir)).as_posix())


def render_link(notebook: Path, page_dir: Path, text: str | None = None) -> str:
    """A link to the notebook's HTML render where there is one, else to the notebook itself."""
    target = notebook.with_suffix(".html") if notebook.with_suffix(".html").exists() else notebook
    return f'<a href="{href(target, page_dir)}">{html.escape(text or target.name)}</a>'


def variant_records(results: Path) -> list[tuple[str, str, str, int]]:
    """(variant, study, profile, records) of every variant store holding run records, rendered or not."""
    found = []
    for store in (results / VARIANTS_DIR).glob("*/runs/*/*"):
        records = sum(1 for _ in store.glob("*.json"))
        if store.is_dir() and records and store.parent.name[:2].isdigit():
            found.append((store.parents[2].name, store.parent.name, store.name, records))
    return sorted(found, key=lambda f: (f[0], f[1], PROFILE_ORDER.index(f[2]) if f[2] in PROFILE_ORDER else 99))


def render_command(results: Path, variant: str, study: str, profile: str) -> str:
    """The command that renders a variant's notebook from its records: its profile, the overrides that made it
    (the notebook wrote them in ``variant.json``) and its name."""
    note = results / VARIANTS_DIR / variant / VARIANT_NOTE
    described = json.loads(note.read_text(encoding="utf-8")) if note.exists() else {}
    overrides = described.get(study, {}).get("overrides", {})
    options = "".join(f" -p {name} {shlex.quote(literal(value))}" for name, value in overrides.items())
    return f"python -m lib.run_all --only {study_number(study)} --profile {profile}{options} --variant {variant}"


def central_verdict(results: Path, study: str, profile: str) -> str:
    """The verdict of the study's central claim at ``profile`` in the results folder ``results`` (the row named by
    its module's ``CENTRAL``, :func:`headline_row`) as a badge with our value, for the variants page to set a
    variant's beside the shipped one; "–" where that folder has no such row."""
    row = headline_row(verdicts(results, study, profile), study_module(study))
    if row is None:
        return '<span class="meta">–</span>'
    return (f'<span class="badge {row.css}" title="{html.escape(row.verdict)}">{html.escape(row.verdict)}</span> '
            f"ours {html.escape(row.ours)}")


def variants_section(results: Path, page_dir: Path) -> str:
    """The variants, apart from the studies' results: one row each, its central claim's verdict beside the shipped
    one of the same study and profile (:func:`central_verdict`), linking its render, or, for a variant whose records
    were written by papermill into a notebook elsewhere, the command that renders it here."""
    rows = []
    rendered = set()
    for variant, study, profile, notebook in variant_renders(results):
        rendered.add((variant, study, profile))
        runs = provenance(notebook.parents[1], study, profile).get("runs", "")
        rows.append(variant_row(results, variant, study, profile, runs, render_link(notebook, page_dir)))
    for variant, study, profile, records in variant_records(results):
        if (variant, study, profile) not in rendered:
            command = html.escape(render_command(results, variant, study, profile))
            rows.append(variant_row(results, variant, study, profile, records,
                                    f"not rendered here: <code>{command}</code>"))
    if not rows:
        return ""
    return ('<h2 id="variants">Variants: experiments with other parameters, not the shipped results</h2>\n'
            f'<p class="meta">Runs whose parameters differ from their profile\'s, written under '
            f'<code>{VARIANTS_DIR}/&lt;variant&gt;/</code> (not versioned). Each row sets the verdict of the study\'s '
            "central claim in the variant beside the shipped one at the same profile; every verdict is in the "
            "variant's render.</p>\n"
            '<div class="scroll"><table><tr><th>variant</th><th>study</th><th>profile</th><th>runs</th>'
            "<th>central claim: the variant</th><th>central claim: shipped</th><th>render</th></tr>"
            + "".join(rows) + "</table></div>")


def variant_row(results: Path, variant: str, study: str, profile: str, runs, render: str) -> str:
    """One row of :func:`variants_section`: the variant, its study, profile and runs, the central claim's verdict in
    the variant and in the shipped results, and ``render`` (a link, or the command that renders it)."""
    ours = central_verdict(variant_root(results, variant), study, profile)
    shipped = central_verdict(results, study, profile)
    return (f"<tr><td>{html.escape(variant)}</td><td>{html.escape(study)}</td><td>{profile}</td><td>{runs}</td>"
            f"<td>{ours}</td><td>{shipped}</td><td>{render}</td></tr>")


def key_figure(notebook: Path, out: Path) -> Path | None:
    """Write the notebook's key figure (tagged cell, else first image) as PNG to ``out``; None if it has none."""
    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    tagged = [c for c in cells if "key-figure" in c.metadata.get("tags", [])]
    for cell in tagged + cells:
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(base64.b64decode(png))
                return out
    return None


def provenance(results: Path, study: str, profile: str) -> dict:
    """Run count, statuses, datasets, the runs per (commit, dirty tree) and the machines
    (:func:`machine_statement`) of the study's run table (empty when it has none). A commit is shortened
    to 10 characters; an unrecorded one is "unknown"."""
    table = results / "tables" / f"{study}_{profile}.csv"
    if not table.exists():
        return {}
    runs = pd.read_csv(table, dtype=str)
    commits = runs.get("git_commit", pd.Series(index=runs.index, dtype=str)).fillna("unknown").str[:10]
    dirty = runs.get("git_dirty", pd.Series(index=runs.index, dtype=str)).fillna("").str.lower().eq("true")
    per_commit = pd.DataFrame({"commit": commits, "dirty": dirty}).value_counts().reset_index(name="runs")
    per_commit = per_commit.sort_values(["runs", "commit", "dirty"], ascending=[False, True, True])
    statuses = runs["status"].fillna("unknown").value_counts() if "status" in runs else pd.Series(dtype=int)
    tabled = set(runs.get("run_id", pd.Series(dtype=str)).dropna())
    records = [r for r in ResultsStore(results, study, profile).records() if r["run_id"] in tabled]
    return {"runs": len(runs), "machines": machine_statement(records),
            "statuses": sorted(statuses.items(), key=lambda s: (-s[1], s[0])),
            "datasets": sorted(runs["dataset"].dropna().unique()) if "dataset" in runs else [],
            "commits": [(r.commit, bool(r.dirty), int(r.runs)) for r in per_commit.itertuples()]}


def machine(record: dict) -> str:
    """The machine a record names: CPU model and torch's CPU capability, and the kernel variables that held MKL
    or oneDNN to an instruction set where any were set (GPU where one ran it)."""
    env = record.get("environment", {})
    if env.get("device") not in (None, "cpu"):
        return f"{env['device']} (CUDA {env.get('cuda')})"
    if "cpu_model" not in env:
        return "not recorded"
    pinned = "".join(f", {name}={value}" for name, value in sorted((env.get("kernel_env") or {}).items()))
    return f"{env['cpu_model']} ({env.get('cpu_capability')}{pinned})"


def _naming_keys(configs: list[dict]) -> list[str]:
    """The fewest settings that still tell the cells apart: those that vary, less any that another one
    implies (a dataset's padding), dropped from the fewest-valued first and numbers before names."""
    def values(key):
        return {json.dumps(c.get(key), sort_keys=True) for c in configs}

    def cells(keys):
        return len({json.dumps([c.get(k) for k in keys], sort_keys=True) for c in configs})

    keys = sorted((k for k in {k for c in configs for k in c} if len(values(k)) > 1),
                  key=lambda k: (len(values(k)), all(isinstance(c.get(k), str) for c in configs), k))
    full = cells(keys)
    for key in list(keys):
        if cells([k for k in keys if k != key]) == full:
            keys.remove(key)
    return sorted(keys)


MAX_CELLS_NAMED = 12  # beyond this many cells on one set of machines, the statement gives their count


def machine_statement(records: list[dict]) -> str:
    """Which machines made the runs, and whether every cell of the design (a config but its seed) ran on each
    of them: results differ between machines in the last bits and beyond (docs/notes/portability.md), so an
    arm that sat on one machine would carry the machine in its effect. Where cells sat on different machines
    it names them by the settings that vary between cells, so that a reader sees which comparisons share a
    machine (an arm against its partner on the same machine is still a fair comparison)."""
    if not records:
        return ""
    machines = Counter(machine(r) for r in records)
    if len(machines) == 1:
        (name, _), = machines.items()
        return ("machine not recorded (records written before the hardware was kept)" if name == "not recorded"
                else f"all on {name}")
    configs = [{k: v for k, v in r["config"].items() if k != "seed"} for r in records]
    varying = _naming_keys(configs)
    cells: dict[str, set[str]] = {}
    for config, r in zip(configs, records):
        label = " ".join(f"{k}={config.get(k)}" for k in varying) or "the one cell"
        cells.setdefault(label, set()).add(machine(r))
    one_machine = sum(len(on) == 1 for on in cells.values())
    statement = (f"runs on {len(machines)} machines: "
                 + ", ".join(f"{name} {n}" for name, n in machines.most_common()))
    if not one_machine:
        return statement + "; every cell of the design ran on more than one of them"
    by_machines: dict[tuple[str, ...], list[str]] = {}
    for label, on in cells.items():
        by_machines.setdefault(tuple(sorted(on, key=lambda m: (-machines[m], m))), []).append(label)
    order = sorted(by_machines, key=lambda on: (len(on), [-machines[m] for m in on], on))
    groups = "; ".join(
        " + ".join(on) + ": " + (", ".join(sorted(by_machines[on])) if len(by_machines[on]) <= MAX_CELLS_NAMED
                                 else f"{len(by_machines[on])} cells")
        for on in order)
    return (statement + f"; {one_machine} of {len(cells)} cells of the design ran on one machine only: those arms "
            f"are not balanced across machines (cells by machine: {groups})")


def commit_statement(commits: list[tuple[str, bool, int]]) -> str:
    """Which code the runs came from: one commit, or how many runs came from each (commit, tree state)."""
    def state(commit, dirty):
        return f"commit {commit}" + (" with uncommitted changes" if dirty else " (clean)")

    if not commits:
        return "no runs recorded"
    if len(commits) == 1:
        commit, dirty, runs = commits[0]
        return f"all {runs} runs from {state(commit, dirty)}"
    distinct = len({c for c, _, _ in commits})
    return (f"runs from {distinct} commit{'s' if distinct > 1 else ''}: "
            + ", ".join(f"{runs} from {state(commit, dirty)}" for commit, dirty, runs in commits))


def verdicts(results: Path, study: str, profile: str) -> pd.DataFrame | None:
    """The study's verdict table from its typed records (``<study>_<profile>_verdicts.json``, never the reader's CSV):
    per row the text the reader's table shows (the record's ``shown``), its ``id``, ``kind``, ``verdict_word``, the
    look it was read at (``look``, ``look_runs``, ``level``) and its CSS class ``css`` (:data:`KINDS`); None when
    the notebook wrote none. A record written before records carried their text is ``superseded``."""
    records = ResultsStore(results, study, profile).verdict_records()
    if records is None:
        return None
    unshown = dict.fromkeys(SHOWN, "–")  # a record written before records carried their text: its words only
    rows = [{**record.get("shown", {**unshown, "quantity": record["quantity"], "verdict": record["verdict"]}),
             "id": record["id"], "kind": record["kind"], "verdict_word": record["verdict"],
             "look": record.get("look") or "", "look_runs": record.get("look_runs"),
             "level": record.get("level"), "n_arms": record["n"],
             "css": (verdict_kind(record["verdict"]) or "superseded") if "shown" in record else "superseded"}
            for record in records]
    return pd.DataFrame(rows).fillna({"look": ""})


def engine_written(frame: pd.DataFrame | None) -> bool:
    return frame is not None and len(frame) > 0 and (frame.css != "superseded").all()


def badges(frame: pd.DataFrame) -> str:
    """The claims' verdicts counted by kind, one coloured badge per kind present (:data:`KINDS` order); the checks
    counted apart."""
    counts = frame.css.value_counts()
    return " ".join(f'<span class="badge {kind}" title="{counts[kind]} row(s): {label}">{label} {counts[kind]}'
                    "</span>" for kind, label in KINDS.items() if kind in counts)


def headline_row(frame: pd.DataFrame | None, module) -> pd.Series | None:
    """The row of the study's central claim at the profile's own setting (the id its module names ``CENTRAL``);
    None without it."""
    if frame is None or module is None:
        return None
    named = frame[frame["id"] == module.CENTRAL]
    return named.iloc[0] if len(named) else None


def headline(frame: pd.DataFrame, module) -> str:
    """The study's central claim: its verdict, ours with the CI, the paper's, the power and the seeds. A table
    without that row gets no badge: a badge never comes from another row."""
    row = headline_row(frame, module)
    if row is None:
        return (f'<span class="meta">this table has no row of its central claim'
                f'{f" ({html.escape(module.CENTRAL)})" if module is not None else ""}</span>')
    power = (f'; power {html.escape(row.power)} at the paper\'s value, {html.escape(row.n)} seeds'
             if row.get("power", "–") not in ("", "–") else "")
    return (f'<span class="badge {row.css}" title="{html.escape(row.verdict)}">{html.escape(row.verdict)}</span> '
            f"{html.escape(verdict_html.human(row.quantity))}: ours <b>{html.escape(row.ours)}</b>; the paper's: "
            f"{html.escape(row.paper)}{power}")


def training_images(results: Path, study: str, profile: str) -> list[int]:
    """The training-set sizes the profile's recorded runs report (:func:`lib.run.datasets.training_images`), over
    every dataset, distinct, ascending: the data size a verdict speaks for, read from the records rather than the
    settings (only records that report one are parsed)."""
    texts = [path.read_text(encoding="utf-8") for path in sorted((results / "runs" / study / profile).glob("*.json"))]
    records = [json.loads(text) for text in texts if '"train_images"' in text]
    return sorted({n for sizes in datasets.training_images(records).values() for n in sizes})


def scale(module, profile: str, images: list[int] = ()) -> str:
    """The scale a profile's verdicts speak for: its training images (from the records, :func:`training_images`),
    then its settings named by the module's ``SCALE`` keys (data, model, epochs, seeds). A setting the profile
    leaves to the run config's default (or 0: the whole set) is left out."""
    settings = getattr(module, "PROFILES", {}).get(profile, {})
    shown = [f"training images {', '.join(f'{n:,}' for n in images)}"] if images else []
    for key in getattr(module, "SCALE", ()):
        value = settings.get(key)
        if value in (None, 0, [], ""):
            continue
        text = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        shown.append(f"{key.replace('_', ' ')} {text}")
    return "; ".join(shown)


def study_module(study: str):
    """The study's module in the registry (None for a name it does not have)."""
    return next((s.module for s in STUDIES.values() if s.name == study), None)


def title(study: str) -> str:
    """``01_margin_factorial`` -> ``01 margin factorial``."""
    return study.replace("_", " ")


def shown_profiles(results: Path, found: list[tuple[str, str, Path]]) -> dict[str, tuple[str, list[str]]]:
    """study -> (the profile its summary shows, :func:`summary_profile`; its rendered profiles, strongest first),
    worked out once per page: each needs every profile's coverage, which reads the records."""
    profiles: dict[str, list[str]] = {}
    for study, profile, _ in found:
        profiles.setdefault(study, []).append(profile)
    return {study: (summary_profile(results, study, rendered), rendered) for study, rendered in profiles.items()}


def summary_profile(results: Path, study: str, profiles: list[str]) -> str:
    """The profile the summary shows: the strongest whose plan is fully recorded and whose verdicts the engine
    wrote, else the strongest whose plan is fully recorded, else the strongest one rendered."""
    module = study_module(study)
    if module is None:
        return profiles[0]
    current = [p for p in profiles if coverage(find_study(study), p, results).current]
    return next((p for p in current if engine_written(verdicts(results, study, p))), (current or profiles)[0])


def summary(results: Path, shown_by_study: dict[str, tuple[str, list[str]]]) -> str:
    """One row per study, from :func:`summary_profile`: question, the central claim's verdict with its CI and
    power, the claims' verdicts counted by kind, links."""
    rows = []
    for study, (shown, rendered) in shown_by_study.items():
        module = study_module(study)
        frame = verdicts(results, study, shown)
        others = [p for p in rendered if p != shown]
        also = "".join(f' · also <a href="#{study}_{p}">{p}</a>' for p in others)
        notes = [coverage(find_study(study), p, results).short() for p in rendered if module is not None]
        stale = "".join(f'<div class="stale">{html.escape(n)}</div>' for n in notes if n)
        size = scale(module, shown, training_images(results, study, shown)) if module is not None else ""
        rows.append(
            f'<tr class="study" id="summary-{study}"><td class="study"><a href="#{study}_{shown}">'
            f'{html.escape(title(study))}</a><div class="meta">{shown}{also}</div>'
            f'<div class="meta scale">{html.escape(size)}</div></td>'
            f'<td class="q">{html.escape(module.QUESTION) if module is not None else ""}</td>'
            f'<td class="finding">{headline(frame, module) if frame is not None and len(frame) else "no verdicts"}'
            f'{stale}</td>'
            f'<td class="verdicts">{badges(frame) if frame is not None else ""}</td></tr>')
    return ('<table class="summary"><tr><th class="study">study</th><th class="q">question</th>'
            '<th class="finding">central claim '
            '(ours with its interval at the level it is tested at, the paper\'s, the power to see it; a verdict '
            'speaks for the scale under the study\'s name, not for the paper\'s)'
            '</th><th class="verdicts">all rows</th></tr>'
            + "".join(rows) + "</table>")


def command_html(command: str) -> str:
    """A command (already HTML-escaped) whose line may break between its options but never inside one: each option
    with its values in a span that does not wrap."""
    groups: list[list[str]] = [[]]
    for token in command.split(" "):
        if token.startswith("-") and groups[-1]:
            groups.append([])
        groups[-1].append(token)
    return " ".join(f'<span class="flag">{" ".join(group)}</span>' for group in groups)


def study_number(study: str) -> str:
    return study.split("_", 1)[0]


def what_next_table(results: Path, profile: str) -> pd.DataFrame:
    """:func:`lib.studies.extension.what_next` for every study at ``profile``: the claims, runs, hours and commands
    that ``python -m lib.decide --profile <profile> --budget 8 --dry-run`` weighs, from the same functions, so that
    the page and the command cannot disagree (tests/test_report.py holds them to it)."""
    studies = list(STUDIES.values())
    found = extension.candidates(studies, profile, results_dir=str(results))
    workers = {study.name: extension.workers_of(study, profile) for study in studies}
    return extension.what_next(found, BUDGET_HOURS, workers)


def what_next_rows(results: Path, study: str, profile: str) -> pd.DataFrame:
    """What would decide one study's inconclusive and out-of-regime claims at ``profile``, with the command and its
    cost where a two-look design does, and why not where none does: :func:`what_next_table`'s rows of that study.
    The budget is weighed over every study, as ``lib.decide`` weighs it, so a study's rows say what its command
    does."""
    table = what_next_table(results, profile)
    return table[table.study == study].reset_index(drop=True)


def _what_next_row(row: pd.Series, shown: str) -> str:
    """One row of the page's "What it would take" table."""
    runs = "–" if pd.isna(row.runs) else str(int(row.runs))
    hours = "–" if pd.isna(row.hours) else f"{row.hours:.2f}"
    command = f"<code>{command_html(html.escape(row.command))}</code>" if row.command else "–"
    verdict = html.escape(row.verdict)
    return (f'<tr><td class="study" data-label="study">{html.escape(title(row.study))} · {shown}</td>'
            f'<td data-label="claim">{"[central] " if row.central else ""}'
            f'{html.escape(verdict_html.human(row.claim))}</td>'
            f'<td data-label="verdict"><span class="badge {verdict_kind(row.verdict) or ""}">{verdict}</span></td>'
            f'<td data-label="what would decide it">{html.escape(row.decides)}</td>'
            f'<td data-label="new runs">{runs}</td><td data-label="wall hours">{hours}</td>'
            f'<td data-label="command">{command}</td></tr>')


def open_claims(table: pd.DataFrame | None, study: str, profile: str) -> str:
    """Under a study's verdict table: what would decide each of its inconclusive and out-of-regime claims, from
    ``lib.decide``'s dry run (``table``: :func:`what_next_table` at ``profile``), with the command and its cost where
    a two-look design does and why not where none does; "" where it has none open."""
    rows = table[table.study == study] if table is not None and len(table) else pd.DataFrame()
    if rows.empty:
        return ""
    items = []
    for _, row in rows.iterrows():
        claim = f"{'[central] ' if row.central else ''}{verdict_html.human(row.claim)}"
        cost = "" if pd.isna(row.runs) else f" ({int(row.runs)} new runs, {row.hours:.2f} wall hours)"
        command = f": <code>{command_html(html.escape(row.command))}</code>" if row.command else ""
        items.append(f"<li><b>{html.escape(claim)}</b> — {html.escape(row.decides)}{cost}{command}</li>")
    return (f'<p class="meta">What would decide its open claims, as <code>{DECIDE_COMMAND.format(profile=profile)}'
            f"</code> weighs them:</p><ul class=\"meta\">{''.join(items)}</ul>")


def to_decide(results: Path, shown_by_study: dict[str, tuple[str, list[str]]],
              tables: dict[str, pd.DataFrame] | None = None) -> str:
    """The page's "What it would take": for the studies of the summary, at the profile it shows, what
    ``lib.decide``'s dry run at the README's budget says (:func:`what_next_table`): each claim a two-look design can
    decide with its design, new runs, wall hours and command, and each inconclusive or out-of-regime claim no such
    design decides, with why, said plainly. ``tables``: :func:`what_next_table` per profile, where the page has it."""
    rows = []
    profiles = sorted({shown for shown, _ in shown_by_study.values()}, key=PROFILE_ORDER.index)
    for profile in profiles:
        table = tables[profile] if tables and profile in tables else what_next_table(results, profile)
        studies = [study for study, (shown, _) in shown_by_study.items() if shown == profile]
        for _, row in table[table.study.isin(studies)].iterrows():
            rows.append(_what_next_row(row, profile))
    if not rows:
        return ""
    commands = ", ".join(f"<code>{DECIDE_COMMAND.format(profile=p)}</code>" for p in profiles)
    return ('<h2 id="to-decide">What it would take</h2><p class="meta">What '
            f"{commands} says of the claims above: each claim a two-look design can decide (its seeds fixed before "
            "its runs, O'Brien–Fleming boundaries at the claim's level α/m, 80% power at the paper's value; central "
            f"claims first within {BUDGET_HOURS:g} wall hours, then the cheapest), with its new runs, their wall hours "
            "from the measured time per run (divided among the study's parallel processes) and the command that "
            "records the plan and runs it; and each claim still inconclusive or out of the paper's regime that no "
            "such design decides, with why. Claims already decided, not measured at this profile, or held by an "
            "extension plan (below) are left out.</p><div class=\"scroll\"><table class=\"decide\"><tr>"
            "<th>study</th><th>claim</th><th>verdict</th><th>what would decide it</th><th>new runs</th>"
            "<th>wall hours</th><th>command</th></tr>" + "".join(rows) + "</table></div>")


DECIDE_COMMAND = f"python -m lib.decide --profile {{profile}} --budget {BUDGET_HOURS:g} --dry-run"


def planned_rows(results: Path) -> dict[tuple[str, str, str], tuple[dict, dict]]:
    """Every claim an extension plan extends: (profile, study, claim id) -> (the plan, the claim's part of it)."""
    planned = {}
    for profile in PROFILE_ORDER:
        for plan in load_plans(results, profile):
            for study, part in plan["studies"].items():
                for claim in part["claims"]:
                    planned[(profile, study, claim["id"])] = (plan, claim)
    return planned


def _boundary(level: float) -> str:
    """A look's boundary as the ledger says it: below a level that rounds to nothing (look 1 of a claim planned
    for many more seeds, O'Brien–Fleming's share underflows), no p can decide there."""
    return f"p &lt; {level:.2g}" if level > 0 else "none (no α spent)"


def planned_row(frame: pd.DataFrame | None, claim_id: str) -> pd.DataFrame:
    """The claim row of a verdict table with a plan's claim id (a check of that id, such as an experiment another
    study decides, is not the planned claim's row)."""
    if frame is None:
        return pd.DataFrame()
    return frame[(frame["id"] == claim_id) & (frame.kind == "claim")]


def ledger(results: Path) -> str:
    """The extensions' ledger: per planned claim, the seeds of each look, the boundaries, the verdict the plan
    found at look 1 and the verdict now, and at which look it stands (the table's ``look`` column)."""
    rows = []
    for (profile, study, claim_id), (_plan, claim) in planned_rows(results).items():
        now = planned_row(verdicts(results, study, profile), claim_id)
        verdict, look = (now.iloc[0].verdict, now.iloc[0].get("look", "")) if len(now) else ("not in the table", "")
        css = now.iloc[0].css if len(now) else ""
        rows.append(f'<tr><td data-label="study">{html.escape(title(study))} · {profile}</td>'
                    f'<td data-label="claim">{html.escape(verdict_html.human(claim["quantity"]))}</td>'
                    f'<td data-label="seeds per arm">{claim["n1"]} → {claim["n2"]}</td>'
                    f'<td data-label="boundaries">{_boundary(claim["level1"])}; {_boundary(claim["level2"])} '
                    f'(α = {claim["alpha"]:.2g})</td><td data-label="planned power">{claim["planned_power"]:.0%}</td>'
                    f'<td data-label="at look 1">{html.escape(claim["look1"]["verdict"])}</td>'
                    f'<td class="{css}" data-label="now">{html.escape(verdict)}</td>'
                    f'<td data-label="look">{html.escape(str(look))}</td></tr>')
    if not rows:
        return ""
    return ('<h2 id="extensions">Extensions: two looks</h2><p class="meta">Claims that <code>python -m lib.decide'
            "</code> extended with seeds planned before their runs. The shipped seeds are look 1, the extension look "
            "2; each look has its boundary (O'Brien–Fleming spending via Lan–DeMets, at the claim's level α/m), so "
            "that looking twice keeps the claim's error rate at α/m. A claim is read at look 2 only when all its "
            "planned runs have finished, and on those seeds alone; until then it is read at look 1 against look 1's "
            "boundary. The seeds of look 2 give 80% power at the published value (simulated with the claim's own "
            "test); a claim has two looks and no more. Plans and their designs: <code>results/plans/</code>.</p>"
            '<div class="scroll"><table class="decide"><tr><th>study</th><th>claim</th><th>seeds per arm, look 1 → 2'
            "</th><th>boundaries, look 1; look 2</th><th>planned power</th><th>verdict at look 1 (shipped)</th>"
            "<th>verdict now</th><th>look</th></tr>" + "".join(rows) + "</table></div>")


# The regime searches (python -m lib.regime), by study: the table's measured column, its label and the condition read.
SEARCHES = (("01_margin_factorial", "car_layer0_final", "layer-0 CAR, final epoch (%)", "CAR ≥ 50%?",
             "Study 1 (and the CIFAR-10 arms of studies 2–3): can a setting other than the treatment bring the clamp "
             "arm's layer-0 CAR to the paper's regime (≥ 50%)? An in-regime setting that leaves m0 at the paper's "
             "0.4 becomes an operating point of the profile (<code>operating_points</code>), read beside the "
             "shipped rows."),
            ("02_cross_dataset_reversal", "top1", "top-1 (%)", "within 5 points of the paper's?",
             "Study 2: can a setting bring the sets whose reversal the paper puts down to the task's ease (SVHN "
             "≈ 97%, MNIST standing in; Fashion-MNIST ≈ 92%) to the paper's accuracy, within 5 points [ours]?"),
            ("03_difficulty_sweep", "top1", "top-1 (%)", "meets a published point's conditions?",
             "Study 3: at the length that brought MNIST to 94% in study 2's search, does the sweep's easy end reach "
             "the paper's ≈ 97%, and where do its hard levels land (≈ 25–27% with CAR ≥ 50%)?"),
            ("05_flatnce_batch_size", "info_nce_factor", "1 - e^(-InfoNCE), final epoch", "factor ≤ 0.7?",
             "Study 5: at its smallest batch, can a setting other than the losses bring InfoNCE's gradient factor "
             "1 - e^(-InfoNCE) down to 0.7 or less, where FlatNCE's steps differ from InfoNCE's (the paper's "
             "small-batch regime)? At the shipped setting it ends near 1: the two losses take the same steps."))


def _search_table(table: pd.DataFrame, measured: str, label: str, condition: str) -> str:
    lead = [c for c in ("dataset", "lr_rule") if c in table]
    head = "".join(f"<th>{c}</th>" for c in (*lead, "setting (one change from the shipped one)", label,
                                             "top-1 (%)" if measured != "top1" else "layer-0 CAR (%)",
                                             "wall s (two runs at a time)", condition))
    other = "top1" if measured != "top1" else "car_layer0_final"
    digits = 3 if measured == "info_nce_factor" else 1  # a factor below 1, against 0.7
    def seconds(x):
        return "–" if pd.isna(x) else f"{x:.0f}"
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in lead)
                   + f'<td data-label="setting">{html.escape(str(r["setting"]))}</td>'
                   f'<td data-label="{label}">{r[measured]:.{digits}f}</td><td>{r[other]:.1f}</td>'
                   f'<td>{seconds(r["wall_s"])}</td><td>{"yes" if r["in_regime"] else "no"}</td></tr>'
                   for _, r in table.iterrows())
    return f'<div class="scroll"><table class="decide"><tr>{head}</tr>{rows}</table></div>'


def regime_search(results: Path) -> str:
    """The regime searches' tables (``python -m lib.regime``), per study and profile that has one: what each
    setting reached, its cost, and whether it meets the condition."""
    parts = []
    for study, measured, label, condition, question in SEARCHES:
        for profile in PROFILE_ORDER:
            path = results / "tables" / f"{study}_{profile}_regime_search.csv"
            if not path.exists():
                continue
            table = pd.read_csv(path)
            searched = table[~table.setting.str.startswith("shipped")]
            reached = searched[searched.in_regime]
            found = (f"{len(reached)} of {len(searched)} settings reach it on one seed: "
                     + ", ".join(html.escape(str(r.setting)) for r in reached.itertuples())
                     if len(reached) else f"none of {len(searched)} settings reaches it")
            hours = searched.wall_s.sum() / 3600
            parts.append(f"<h3>{title(study)} · {profile}</h3><p class=\"meta\">{question} {found}; "
                         f"{hours:.1f} run-hours.</p>" + _search_table(table, measured, label, condition))
    if not parts:
        return ""
    return ('<h2 id="regime-search">Regime searches (studies 1–3 and 5)</h2><p class="meta">Before spending seeds, '
            "<code>python -m lib.regime</code> trains one run per setting that plausibly brings a claim into the "
            "paper's regime, one change at a time, at the profile's own length; its runs are recorded like any "
            "run.</p>" + "".join(parts))


def run_seconds(folder: Path) -> tuple[int, float]:
    """(runs, their wall seconds) of every record under ``folder``: the study's runs, its extension plans' and its
    regime search's, which all cost the cores' time."""
    runs, seconds = 0, 0.0
    for path in sorted(folder.rglob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        runs += 1
        seconds += float((record.get("timings") or {}).get("wall_s") or 0.0)
    return runs, seconds


def cost(results: Path, shown_by_study: dict[str, tuple[str, list[str]]]) -> str:
    """What the verdicts cost: per study at the profile its summary shows, its runs and run-hours (searches and
    extensions included), the tested claims decided (:data:`lib.core.verdicts.DECIDED`, from the typed records),
    whether the central one is, and the run-hours per decided claim."""
    rows, decided_central = [], 0
    for study, (shown, _) in shown_by_study.items():
        records = ResultsStore(results, study, shown).verdict_records() or []
        module = study_module(study)
        claims = [r for r in records if r.get("kind") == "claim"]
        decided = [r for r in claims if r.get("verdict") in DECIDED]
        central = module is not None and any(is_central(r["id"], module) for r in decided)
        decided_central += central
        runs, seconds = run_seconds(results / "runs" / study / shown)
        per_claim = f"{seconds / 3600 / len(decided):.2g}" if decided else "–"
        rows.append(f"<tr><td>{html.escape(title(study))} · {shown}</td><td>{runs}</td>"
                    f"<td>{seconds / 3600:.3g}</td><td>{len(decided)} of {len(claims)}</td>"
                    f"<td>{'yes' if central else 'no'}</td><td>{per_claim}</td></tr>")
    if not rows:
        return ""
    return ('<h2 id="cost">What the verdicts cost</h2><p class="meta">Run-hours are the wall time of every recorded '
            "run, one at a time (two run side by side on two cores), its extension plans and regime searches "
            f"included. Central claims decided: {decided_central} of {len(rows)}.</p><div class=\"scroll\"><table><tr>"
            "<th>study</th>"
            "<th>runs</th><th>run-hours</th><th>tested claims decided</th><th>central claim decided</th>"
            "<th>run-hours per decided claim</th></tr>" + "".join(rows) + "</table></div>")


def verdict_table(frame: pd.DataFrame | None, central: Callable[[str], bool] | None = None,
                  links: list[tuple[str, str] | None] | None = None) -> str:
    """A study's verdict table in its section (:func:`lib.core.verdict_html.table_html`), the central claim marked;
    ``links``: per row, where the run records it reads are listed (:func:`records_page`)."""
    if frame is None:
        return "<p>No paper-vs-reproduced table was written for this run.</p>"
    columns = [c for c in ("quantity", "ours", "paper", "evidence", "n", "power", "seeds_needed", "p_holm",
                           "verdict") if c in frame]
    table = verdict_html.table_html(frame, columns, central=central, css=lambda row: row.css, table_class="verdicts",
                                    links=links)
    return f'<div class="scroll">{table}</div>'


def claim_runs(results: Path, study: str, profile: str) -> list[tuple[dict, list[dict] | None]]:
    """Each typed verdict record of the study's table with the finished run records it reads: those in one of its
    cells (:func:`lib.studies.extension.in_cells`, as lib.decide extends them), None for a check or a claim that
    names no cells (simulations, or a number derived from several cells)."""
    store = ResultsStore(results, study, profile)
    typed = store.verdict_records() or []
    runs = [r for r in store.records() if r["status"] in FINISHED_STATUSES]
    module = study_module(study)
    frame = module.runs_frame(runs) if runs and module is not None else pd.DataFrame()
    out = []
    for record in typed:
        cells = record.get("cells") or []
        if record.get("kind") != "claim" or not cells or frame.empty:
            out.append((record, None))
            continue
        out.append((record, [run for run, (_, row) in zip(runs, frame.iterrows()) if extension.in_cells(row, cells)]))
    return out


def records_page(results: Path, page_dir: Path, study: str, profile: str) -> tuple[Path, list[int | None]] | None:
    """``<page_dir>/records/<study>_<profile>.html``: per tested claim of the study's table, the cells it reads and a
    link to each run record in them (its config, seed, commit, machine and timings), so that a reader can go from a
    verdict to the runs behind it. Returns the page and, per row of the table, the claim's anchor (None where the
    claim names no cells); None where the study has no typed records."""
    found = claim_runs(results, study, profile)
    if not found:
        return None
    page = page_dir / "records" / f"{study}_{profile}.html"
    folder = results / "runs" / study / profile
    sections, anchors = [], []
    for i, (record, runs) in enumerate(found):
        if runs is None:
            anchors.append(None)
            continue
        anchors.append(i)
        cells = "; ".join(", ".join(f"{k} = {v}" for k, v in cell.items()) for cell in record["cells"])
        links = "".join(f'<li><a href="{href(folder / (run["run_id"] + ".json"), page.parent)}">{run["run_id"]}</a> '
                        f'<span class="meta">seed {html.escape(str(run["config"].get("seed")))}, '
                        f'{html.escape(str((run.get("environment") or {}).get("git_commit", ""))[:10])}</span></li>'
                        for run in runs)
        sections.append(f'<h2 id="claim-{i}">{html.escape(verdict_html.human(record["quantity"]))}</h2>'
                        f'<p class="meta">{html.escape(record["verdict"])} · the cells it reads: {html.escape(cells)}'
                        f" · {len(runs)} run records</p><ul>{links}</ul>")
    body = "".join(sections) or "<p>No tested claim of this table names cells of runs.</p>"
    atomic_write_text(page, f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title(study))} · {profile}: the run records of each claim</title>
<style>{STYLE}</style></head>
<body><h1>{html.escape(title(study))} · {profile}: the run records of each claim</h1>
<p class="meta">Back to <a href="{href(page_dir / "index.html", page.parent)}#{study}_{profile}">the report</a>. Each
record is one run: its config, run id (the hash of the config), seed, metrics, git commit, package versions,
machine and timings. Claims that read simulations or numbers derived from several cells are not listed.</p>
{body}
</body></html>
""")
    return page, anchors


def study_files(results: Path, study: str, profile: str) -> list[tuple[Path, str]]:
    """What a study's section links beside its renders, where it exists: the code-free report, the verdict table
    (CSV) and its typed records (JSON), and the folder of run records the table reads."""
    tables = results / "tables"
    files = [(results / "notebooks" / f"{study}_{profile}{REPORT_SUFFIX}.html", "report without code"),
             (tables / f"{study}_{profile}_paper_vs_reproduced.csv", "verdict table (CSV)"),
             (tables / f"{study}_{profile}_verdicts.json", "typed verdict records (JSON)"),
             (results / "runs" / study / profile, "run records")]
    return [(path, text) for path, text in files if path.exists()]


def section(results: Path, page_dir: Path, study: str, profile: str, notebook: Path,
            what_next: pd.DataFrame | None = None) -> str:
    figure = key_figure(notebook, page_dir / "figures" / f"{study}_{profile}.png")
    meta = provenance(results, study, profile)
    frame = verdicts(results, study, profile)
    links = [render_link(notebook, page_dir, "rendered notebook"), f'<a href="{href(notebook, page_dir)}">ipynb</a>']
    links += [f'<a href="{href(path, page_dir)}">{text}</a>' for path, text in study_files(results, study, profile)]
    facts = [f"profile <b>{profile}</b>"]
    if meta:
        statuses = ", ".join(f"{n} {html.escape(s)}" for s, n in meta["statuses"])
        facts.append(f"data {', '.join(html.escape(d) for d in meta['datasets']) or 'unknown'}")
        facts.append(f"{meta['runs']} runs" + (f" ({statuses})" if meta["statuses"][1:] else ""))
        facts.append(html.escape(commit_statement(meta["commits"])))
        if meta["machines"]:
            facts.append(html.escape(meta["machines"]))
    else:
        facts.append("no run table")
    module = study_module(study)
    parts = [f'<h2 id="{study}_{profile}">{html.escape(title(study))} · {profile}</h2>',
             f'<p class="meta">{" · ".join(facts)} · {" · ".join(links)}</p>']
    banner = coverage(find_study(study), profile, results).banner() if module is not None else None
    if banner:
        parts.append(f'<p class="stale"><b>{html.escape(banner.split(";")[0])}</b>;'
                     f'{html.escape(banner.split(";", 1)[1])}</p>')
    if module is not None:
        parts.append(f"<p><b>Question.</b> {html.escape(module.QUESTION)}</p>")
    if frame is not None:
        parts.append(f'<p class="meta">Verdicts: {badges(frame)}</p>')
    if frame is not None and not engine_written(frame):
        parts.append('<p class="meta">This table was written before the verdict engine: its words are not the '
                     "grammar of the others and nothing here counts it.</p>")
    listed = records_page(results, page_dir, study, profile) if engine_written(frame) else None
    links = None
    if listed is not None and len(listed[1]) == len(frame):
        page, anchors = listed
        links = [(f"{href(page, page_dir)}#claim-{a}", "runs") if a is not None else None for a in anchors]
    parts.append(verdict_table(frame, functools.partial(is_central, module=module) if module is not None else None,
                               links))
    parts.append(open_claims(what_next, study, profile))
    if figure is not None:
        parts.append(f'<img src="{href(figure, page_dir)}" alt="key figure of {html.escape(study)} ({profile})">')
    return "\n".join(parts)


def forest(results: Path, page_dir: Path, shown_by_study: dict[str, tuple[str, list[str]]]) -> str:
    """The page's first picture: every study's tested claims at the profile its summary shows, each interval at its
    level against the paper's value (:func:`lib.core.forest.forest_png`), written to ``figures/forest.png`` beside
    the page; "" where no study has typed verdict records."""
    studies, central = {}, {}
    for study, (shown, _) in shown_by_study.items():
        records = ResultsStore(results, study, shown).verdict_records()
        module = study_module(study)
        if records and module is not None:
            studies[f"{title(study)} ({shown})"] = records
            central[f"{title(study)} ({shown})"] = functools.partial(is_central, module=module)
    if not studies:
        return ""
    path, narrow = page_dir / "figures" / "forest.png", page_dir / "figures" / "forest_narrow.png"
    atomic_write_bytes(path, forest_png(studies, central))
    atomic_write_bytes(narrow, forest_png(studies, central, NARROW))  # a phone's: each label above its row
    return (f'<picture><source media="(max-width: 40rem)" srcset="{href(narrow, page_dir)}">'
            f'<img class="forest" src="{href(path, page_dir)}" alt="every tested claim: our estimate (dot) with its '
            'interval at the level it is decided at (bar), coloured by verdict, against the paper\'s value (diamond)">'
            "</picture>"
            '<p class="meta">Each row a claim the paper states: our estimate (dot) and its interval at the level the '
            "claim is decided at (bar; an arrow where it runs off the axis), the paper's value (diamond), no effect "
            "(grey). A hollow dot is a run outside the paper's regime, its label naming the condition it misses. "
            "Bold: the study's central claim. Ratios on a log axis.</p>")


GLOSSARY = (
    ("reproduced", "significant after Holm's correction, in the paper's direction, the interval reaching the paper's "
                   "value"),
    ("reproduced, smaller", "significant in the paper's direction, the whole interval short of the paper's value"),
    ("contradicted", "significant in the other direction"),
    ("not reproduced", "not significant, the interval wholly on the null's side of the paper's value"),
    ("inconclusive", "everything else, fewer than 3 seeds an arm included; the row gives the power the design had "
                     "at the paper's value"),
    ("not in the paper's regime", "our run misses a condition the paper states for the claim (its value named)"),
    ("not measured", "no run of this profile measures it"),
    ("exploratory", "the paper's claim read on seeds a plan registered for another version of it: shown, never "
                    "decided, until a plan of its own on fresh seeds"),
    ("check", "our own (an identity, a simulation, a description), never counted as a reproduction"),
)


def glossary(page_dir: Path) -> str:
    """Every verdict word, abbreviation and evidence tag the page uses, defined on its first screen."""
    words = "".join(f'<dt><span class="badge {CLASSES[word]}">{html.escape(word)}</span></dt>'
                    f"<dd>{html.escape(meaning)}</dd>" for word, meaning in GLOSSARY)
    return (f'<dl class="glossary">{words}'
            "<dt><b>CAR</b></dt><dd>clamp activation rate: the share of positive pairs whose margin the clamp holds "
            "at its bound, layer 0 unless named (the CFF papers: below 50% clamping likely has no effect)</dd>"
            "<dt><b>VR</b></dt><dd>variance ratio: the seed-to-seed variance of accuracy with clamping over without"
            "</dd><dt><b>evidence tags</b></dt><dd>[paper] the paper's text, [code] its public code, [summary] a "
            "secondary summary of the paper (a rule taken from one, such as the 50% CAR rule, is not the authors' "
            "own words), [ours] our decision</dd></dl>"
            f'<p class="meta">The rules, each with a worked example: <a href="'
            f'{href(PROJECT_ROOT / "docs" / "verdicts.md", page_dir)}">docs/verdicts.md</a>; every claim: '
            f'<a href="{href(PROJECT_ROOT / "docs" / "claims.md", page_dir)}">docs/claims.md</a>; every study, its '
            f'methods and the evidence behind each tag: <a href="{href(STUDY_SPEC, page_dir)}">docs/studies.md</a>.'
            "</p>")


def stamp_renders(results: Path) -> list[Path]:
    """Give every rendered notebook under ``results`` its coverage banner (``lib.coverage``: the re-run's
    progress while its tables are not today's plan), or take a banner out once they are; returns the files
    that changed (none where the banners are already right)."""
    return [path for study, profile, notebook in rendered_notebooks(results) if study_module(study) is not None
            for path in stamp(notebook, coverage(find_study(study), profile, results).banner())]


def as_of(results: Path, shown_by_study: dict[str, tuple[str, list[str]]]) -> str:
    """The page's first line: the date of the newest record the summary reads and the commit it ran at (from the
    records, so that the same records give the same page)."""
    newest = None
    for study, (profile, _) in shown_by_study.items():
        for record in ResultsStore(results, study, profile).records():
            if newest is None or record.get("written_at", "") > newest.get("written_at", ""):
                newest = record
    if newest is None:
        return ""
    commit = (newest.get("environment") or {}).get("git_commit") or "unknown"
    return (f'<p class="meta">Results as of {newest["written_at"][:10]} (the newest run the summary reads, at commit '
            f"<code>{html.escape(commit[:10])}</code>); each study's scale (data, model, epochs, seeds) under its "
            "name.</p>")


def write_index(results_dir: str | Path = "results", output_dir: str | Path | None = None) -> Path:
    """Render ``<output_dir>/index.html`` and its figures (``output_dir`` defaults to the results folder)
    from what the notebooks wrote under ``results_dir``; return the page's path. Written into the results
    folder itself, the page comes with the renders' coverage banners (:func:`stamp_renders`); written
    elsewhere, nothing under ``results_dir`` changes."""
    results = Path(results_dir)
    if not results.is_absolute():
        results = PROJECT_ROOT / results
    page_dir = Path(output_dir).resolve() if output_dir is not None else results
    if output_dir is None:
        stamp_renders(results)
    found = rendered_notebooks(results)
    shown = shown_profiles(results, found)
    # lib.decide's dry run once per profile: the page's "What it would take" and each section's open claims read it
    tables = {p: what_next_table(results, p) for p in dict.fromkeys(p for _, p, _ in found) if p in SHIPPED_PROFILES}
    body = "\n".join(section(results, page_dir, s, p, nb, tables.get(p)) for s, p, nb in found)
    body = body or "<p>No rendered notebooks yet.</p>"
    write_variants_index(results, page_dir / VARIANTS_DIR)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Contrastive training dynamics: paper against reproduced</title>
<style>{STYLE}</style></head>
<body><h1>Contrastive training dynamics: paper against reproduced</h1>
{as_of(results, shown)}
{forest(results, page_dir, shown) if found else ""}
{glossary(page_dir)}
<p class="meta">Below: one row per study, from its strongest profile whose plan is fully recorded, linking to its
section. A verdict speaks for the scale named under each study (data, model, epochs, seeds), never for the
paper's. Your own variants (runs with other parameters) are never listed here: <code>{VARIANTS_DIR}/index.html</code>
beside this page lists them, unversioned.</p>
{summary(results, shown) if found else ""}
{to_decide(results, shown, tables) if found else ""}
{ledger(results)}
{regime_search(results)}
{cost(results, shown) if found else ""}
{body}
</body></html>
"""
    index = page_dir / "index.html"
    atomic_write_text(index, page)
    return index


def write_variants_index(results: Path, page_dir: Path) -> Path | None:
    """``<page_dir>/index.html``: the variants under ``results`` (:func:`variants_section`), on a page of their
    own so that a user's experiments never change the shipped page; None (nothing written) without variants."""
    variants = variants_section(results, page_dir)
    if not variants:
        return None
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Variants: your experiments</title>
<style>{STYLE}</style></head>
<body><h1>Variants: your experiments</h1>
<p class="meta">The shipped results: <a href="{href(results / "index.html", page_dir)}">index.html</a>.</p>
{variants}
</body></html>
"""
    index = page_dir / "index.html"
    page_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(index, page)
    return index


def readme_block(text: str, begin: str, end: str) -> str:
    """A generated block of the README (between its markers ``begin`` and ``end``), or "" where it has none."""
    match = re.search(re.escape(begin) + r"\n(.*?)" + re.escape(end), text, flags=re.S)
    return match.group(1) if match else ""


def write_readme_block(lines: list[str], begin: str, end: str) -> None:
    """Put ``lines`` between the README's markers ``begin`` and ``end`` (which it must have)."""
    text = README.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"README.md has no {begin!r} ... {end!r} markers")
    new = "\n".join(lines) + "\n"
    old = readme_block(text, begin, end)
    README.write_text(text.replace(begin + "\n" + old + end, begin + "\n" + new + end, 1), encoding="utf-8")


README_VERDICTS_BEGIN = "<!-- verdicts: begin (python -m lib.report --readme) -->"
README_VERDICTS_END = "<!-- verdicts: end -->"


def readme_verdict_lines(results_dir: str | Path = "results") -> list[str]:
    """One README line per study, from the tables the summary shows (:func:`summary_profile`): the central
    claim, ours with its CI against the paper's, its verdict, and the other rows counted by kind."""
    results = Path(results_dir) if Path(results_dir).is_absolute() else PROJECT_ROOT / results_dir
    found = rendered_notebooks(results)
    lines = []
    for study, (shown, _) in shown_profiles(results, found).items():
        frame, module = verdicts(results, study, shown), study_module(study)
        row = headline_row(frame, module)
        if row is None:
            lines.append(f"- **{title(study)}** (`{shown}`): no verdict table with its central claim yet.")
            continue
        counts = frame.css.value_counts()
        listed = ", ".join(f"{KINDS[k]} {counts[k]}" for k in KINDS if k in counts and k != "check")
        checks = f"; {counts['check']} checks of our own" if "check" in counts else ""
        points = "".join(operating_point_sentence(point, module) for point in operating_point_rows(frame, module)
                         .itertuples())
        lines.append(f"- **{title(study)}** (`{shown}`): {verdict_html.human(row.quantity)}: {row.ours} against the "
                     f"paper's {row.paper}: *{row.verdict}*.{points} All claims: {listed}{checks}.")
    return lines


def operating_point_rows(frame: pd.DataFrame, module) -> pd.DataFrame:
    """The claims read again at an operating point of the profile (an id ``<claim>@<point>``, the point one of the
    module's ``OPERATING_POINTS``): where the shipped setting misses the paper's regime, the rows that can decide
    it. The central claim's come first."""
    points = set(getattr(module, "OPERATING_POINTS", {}))
    if not points or frame is None:
        return frame.iloc[0:0] if frame is not None else pd.DataFrame()
    at_point = frame["id"].map(lambda claim_id: claim_id.partition("@")[2] in points)
    rows = frame[at_point & (frame.kind == "claim")]  # claims only: a check decides nothing
    central = rows["id"].map(lambda claim_id: is_central(claim_id, module)).astype(bool)
    return pd.concat([rows[central], rows[~central]])


def operating_point_sentence(row, module) -> str:
    """A README sentence for one row of :func:`operating_point_rows`: the central claim's as "At its operating point",
    another claim's naming the claim (its quantity opens with the point's settings in brackets)."""
    point, quantity = row.quantity.split("] ", 1)
    if is_central(row.id, module):
        return f" At its operating point {point}]: {row.ours}, *{row.verdict}*."
    return f" At the operating point {point}], {verdict_html.human(quantity)}: {row.ours}, *{row.verdict}*."


README_EXTENSIONS_BEGIN = "<!-- extensions: begin (python -m lib.report --readme) -->"
README_EXTENSIONS_END = "<!-- extensions: end -->"


def readme_extension_lines(results_dir: str | Path = "results") -> list[str]:
    """One README line per claim an extension plan extends (:func:`planned_rows`): its verdict at look 1, as the
    plan found it, and its verdict now, from the study's table; a claim whose look 2 is complete says why it
    moved (the seeds of look 2 against its boundary), one still running says how far it is."""
    results = Path(results_dir) if Path(results_dir).is_absolute() else PROJECT_ROOT / results_dir
    lines = []
    for (profile, study, claim_id), (plan, claim) in planned_rows(results).items():
        frame = verdicts(results, study, profile)
        now = planned_row(frame, claim_id)
        if not len(now):
            owner = frame[(frame["id"] == claim_id) & (frame.kind == "check")] if frame is not None else frame
            if owner is not None and len(owner):  # the same experiment is another study's claim now
                lines.append(f"- **{title(study)}** (`{profile}`, plan `{plan['plan_id']}`): "
                             f"{verdict_html.human(claim['quantity'])}: the same experiment as another study's "
                             f"claim ({owner.iloc[0].ours}); this plan's look 2 is not read.")
            continue
        row, before = now.iloc[0], claim["look1"]["verdict"]
        head = (f"- **{title(study)}** (`{profile}`, plan `{plan['plan_id']}`): {verdict_html.human(row.quantity)}: "
                f"*{before}* at look 1")
        if row.look_runs is None and str(row.look).startswith("2"):
            # the plan registered its look-1 verdict as text: its first word is the grammar's word
            moved = "moved" if before.split(" (", 1)[0] != row.verdict_word else "stayed"
            after = KINDS.get(row.css, row.verdict_word)
            seeds = " vs ".join(map(str, row.n_arms)) + (" seeds" if len(row.n_arms) > 1 else " seeds per arm")
            lines.append(f"{head} → *{after}* at look 2 ({moved}): {row.ours} on {seeds}, read "
                         f"against look 2's boundary p < {float(row.level):.2g}.")
        else:
            read = (f": {row.look_runs[0]} of {row.look_runs[1]} runs in the rendered table." if row.look_runs
                    else ".")
            lines.append(f"{head}; look 2 ({claim['n1']} → {claim['n2']} seeds per arm) is running{read}")
    return lines or [f"- No extension plan yet: `{DECIDE_COMMAND.format(profile='cpu')}` proposes one."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    parser.add_argument("--output-dir", help="where the page and its figures go (default: the results folder)")
    parser.add_argument("--readme", action="store_true", help="also write the README's verdict blocks")
    args = parser.parse_args(argv)
    print(write_index(args.results_dir, args.output_dir))
    if args.readme:
        write_readme_block(readme_verdict_lines(args.results_dir), README_VERDICTS_BEGIN, README_VERDICTS_END)
        write_readme_block(readme_extension_lines(args.results_dir), README_EXTENSIONS_BEGIN, README_EXTENSIONS_END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
