"""The renders of an executed notebook: the notebook itself, made reproducible, and two HTML copies for readers.

    from lib.render import write_renders
    write_renders(executed, target)   # <target>.ipynb, <target>.html, <target>_report.html beside `executed`

``lib.run_all`` calls it after papermill has executed a notebook. Three files come out:

- ``<notebook>_<profile>.ipynb``: the executed notebook in execution order, so it runs top to bottom again
  as it stands; only what changes from one execution to the next is taken out (below).
- ``<notebook>_<profile>.html``: the reader's copy, code included, with the cells tagged ``findings`` (the
  paper-vs-reproduced table, computed near the end) moved under the title, their text left-aligned; a variant's
  render says so first, its bold variant line and overrides above the profile line and the findings.
- ``<notebook>_<profile>_report.html``: the same without input cells (nbconvert's ``exclude_input``).

Both HTML copies load nothing from the network (:data:`OFFLINE_TEMPLATE`): they open offline without console
errors, and the same file on every reader's machine.

Re-rendering from unchanged records gives byte-identical files. What an execution would otherwise leave
different: papermill's start, end and duration and the kernel's execution timestamps (removed), the id
papermill gives its injected-parameters cell and the ids of widget models (renumbered in order), papermill's
temporary output path (replaced by the target's), and absolute paths of the machine in sources and outputs —
warnings name ``/…/lib/studies/common.py``, a data source ``/…/shared/data/cifar10.npz`` — rewritten relative to
the project root (the data root and ``$DATA_ROOT`` as the relative path from it, the home folder as ``~``). The
figures are made deterministic in the notebooks' kernel (``lib.notebook.setup``, ``lib.plots``).
"""
from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

from lib import PROJECT_ROOT

FINDINGS = "findings"  # the tag of the cells moved under the title in the reader's copies
COVERAGE = "coverage"  # the tag of the banner saying a render's tables are not today's plan (lib.coverage)
HEADER = "lib.header"  # output metadata of the notebook set-up's header: how many of its lines lead the reader's copy
# (True: one, the profile line; a variant's two: its bold line with its overrides, then that one)
REPORT_SUFFIX = "_report"  # <notebook>_<profile>_report.html: the copy without input cells
INJECTED_ID = "injected-parameters"  # papermill gives its injected cell a random id; the tag it has is stable
TIMINGS = ("start_time", "end_time", "duration")  # papermill's, in the notebook's and each cell's metadata
WIDGET_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")  # ipywidgets' model ids: uuid4 hex, new each time
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"  # an output that shows a widget model
# JupyterLab's stylesheet right-aligns every table cell; the findings are sentences, read from the left.
FINDINGS_CSS = """<style>
.celltag_findings .jp-RenderedHTMLCommon td, .celltag_findings .jp-RenderedHTMLCommon th {
  text-align: left; vertical-align: top; }
</style>
"""


def path_replacements(nb: nbformat.NotebookNode) -> dict[str, str]:
    """``{absolute folder: what replaces it}``: the project root, the notebook's data root (its ``data_root``
    parameter) and ``$DATA_ROOT`` relative to the project root, the home folder as ``~``."""
    data_roots = [nb.metadata.get("papermill", {}).get("parameters", {}).get("data_root"), os.environ.get("DATA_ROOT")]
    folders = {str(Path.home()): "~"}
    for root in data_roots:
        if root and Path(root).is_absolute():
            folders[str(Path(root))] = os.path.relpath(root, PROJECT_ROOT)
    folders[str(PROJECT_ROOT)] = "."
    return {folder: short for folder, short in folders.items() if folder != os.sep}


def relative_paths(text: str, replacements: dict[str, str]) -> str:
    """``text`` with every absolute folder of ``replacements`` (the longest first, whole path components only)
    replaced: ``/home/me/project/lib/x.py`` -> ``lib/x.py``, ``/home/me/project`` -> ``.``."""
    for folder in sorted(replacements, key=len, reverse=True):
        short = replacements[folder]
        text = re.sub(re.escape(folder) + r"(/|(?![\w.-]))",
                      lambda m, short=short: (short + "/" if short != "." else "") if m[1] else short, text)
    return text


def _rewrite_text(node, rewrite):
    """Apply ``rewrite`` to every string of an output's JSON-like content, images left alone."""
    if isinstance(node, str):
        return rewrite(node)
    if isinstance(node, list):
        return [_rewrite_text(v, rewrite) for v in node]
    if isinstance(node, dict):
        return {k: v if k.startswith("image/") else _rewrite_text(v, rewrite) for k, v in node.items()}
    return node


def reproducible(nb: nbformat.NotebookNode, target: Path) -> nbformat.NotebookNode:
    """The executed notebook with what differs between executions of unchanged records taken out (module
    docstring); ``target``: where it goes (papermill recorded a temporary path)."""
    nb = copy.deepcopy(nb)
    replacements = path_replacements(nb)

    def rewrite(text: str) -> str:
        return relative_paths(text, replacements)

    run = nb.metadata.get("papermill")
    if run is not None:
        for key in TIMINGS:
            run.pop(key, None)
        run["input_path"] = rewrite(run.get("input_path", ""))
        run["output_path"] = rewrite(str(target))
        run["parameters"] = _rewrite_text(run.get("parameters", {}), rewrite)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for key in TIMINGS:
            cell.metadata.get("papermill", {}).pop(key, None)
        if INJECTED_ID in cell.metadata.get("tags", []):
            cell.id = INJECTED_ID
        cell.source = rewrite(cell.source)
        if "outputs" in cell:
            cell.outputs = [nbformat.from_dict(_rewrite_text(o, rewrite)) for o in cell.outputs]
    return renumber_widgets(nb)


def renumber_widgets(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Widget model ids replaced by numbers in a fixed order — the models the outputs show, in cell order, then
    the models each of those refers to in the saved widget state (``IPY_MODEL_<id>``), breadth first — so an
    explorer's saved view does not change the file from one execution to the next. Without saved state the
    widget views are dropped from the outputs: each explorer's text/html default view beside them stays."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    if not state:  # rendered without widget state (lib.run_all): a view of a model nobody saved shows nothing
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                output.get("data", {}).pop(WIDGET_VIEW, None)
        return nb
    text = nbformat.writes(nb)
    queue = [i for c in nb.cells for o in c.get("outputs", [])
             for i in WIDGET_ID.findall(json.dumps(o.get("data", {}).get(WIDGET_VIEW, {})))]
    order = {}
    while queue:
        model_id = queue.pop(0)
        if model_id in state and model_id not in order:
            order[model_id] = f"{len(order) + 1:032x}"
            queue += WIDGET_ID.findall(json.dumps(state[model_id], sort_keys=True))
    for model_id in sorted(set(state) - set(order), key=lambda i: json.dumps(state[i], sort_keys=True)):
        order[model_id] = f"{len(order) + 1:032x}"  # not shown (left by a closed widget): by content
    return nbformat.reads(WIDGET_ID.sub(lambda m: order.get(m[0], m[0]), text), as_version=4)


def first_screen(nb: nbformat.NotebookNode) -> str | None:
    """The lines of the set-up header (an output marked :data:`HEADER`) that lead the reader's copy: as many as the
    mark says (True: one), a variant's bold line with its overrides, then the profile, data and the paper's data."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            lines = output.get("metadata", {}).get(HEADER)
            if lines:
                text = output.get("data", {}).get("text/markdown", "")
                return "\n".join(text.split("\n")[:int(lines)]).rstrip() or None
    return None


def findings_first(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The reader's order: under the title (the first line of the first, markdown, cell) a variant's line and the
    run's profile and data (:func:`first_screen`, then left out of the header they came from), a ``coverage`` banner
    (:func:`stamp`), then the cells tagged ``findings``; the rest of the title cell follows."""
    findings = [c for c in nb.cells if {FINDINGS, COVERAGE} & set(c.metadata.get("tags", []))]
    findings.sort(key=lambda c: COVERAGE not in c.metadata.get("tags", []))  # the banner before the findings
    if not findings:
        return nb
    screen = first_screen(nb)
    nb = copy.deepcopy(nb)
    rest = [c for c in nb.cells if not {FINDINGS, COVERAGE} & set(c.metadata.get("tags", []))]
    title, intro = rest[0], rest[1:]
    if title.cell_type == "markdown" and "\n" in title.source.strip():
        heading, body = title.source.split("\n", 1)
        intro.insert(0, nbformat.v4.new_markdown_cell(body.strip("\n"), id=f"{title.id}-intro"))
        title = nbformat.v4.new_markdown_cell(heading, id=title.id)
    lead = [nbformat.v4.new_markdown_cell(screen, id=f"{title.id}-screen")] if screen else []
    if screen:  # the lines now lead the copy: the set-up header below goes on from the next one
        for cell in intro:
            for output in cell.get("outputs", []):
                lines = int(output.get("metadata", {}).get(HEADER) or 0)
                if lines:
                    rest = output["data"]["text/markdown"].split("\n", lines)
                    output["data"]["text/markdown"] = rest[lines] if len(rest) > lines else ""
    nb.cells = [title, *lead, *copy.deepcopy(findings), *intro]
    return nb


# nbconvert's lab template (its index.html.j2) with the blocks emptied that load scripts from a CDN, so the HTML
# copies load nothing from the network (issue 57): offline, each script tag was a console error and a feature gone.
# - require.js: only for outputs that need it (application/javascript, widgets); no notebook here makes one.
# - MathJax and its configuration: no notebook writes LaTeX math; were one to, a reader would see its source as
#   plain text (``$\tau$`` stays ``$\tau$``), readable without a typesetter fetched from a CDN.
# - mermaid.js: imported from a CDN only where a ```mermaid block is shown (none is); it would show as its source.
# - the widget renderer: only where the notebook keeps widget state. lib.execute saves none, so renumber_widgets
#   drops the widget views and each widget's text/html default view shows; a notebook that did keep state would
#   show its widgets here as nothing (its ipynb keeps them).
# The stylesheets and fonts are already inlined by nbconvert (no <link>, no @import, no url() to the network).
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def to_html(nb: nbformat.NotebookNode, title: str, *, exclude_input: bool = False) -> str:
    # the code-free report shows no prompts at all: an "Out[15]:" beside a result whose input is hidden says nothing
    exporter = HTMLExporter(raw_template=OFFLINE_TEMPLATE, exclude_input=exclude_input,
                            exclude_input_prompt=exclude_input, exclude_output_prompt=exclude_input)
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return html.replace("</head>", FINDINGS_CSS + "</head>", 1)


def stamp(rendered: Path, banner: str | None) -> list[Path]:
    """Put ``banner`` at the top of the shipped render ``rendered`` (``<notebook>_<profile>.ipynb``), or take
    an earlier one out (None), and write its two HTML copies again; no cell is executed. The files are
    rewritten only where their bytes change; returns those that changed. The HTML copies are made from the
    notebook, so where it is already right (and they exist) they are left alone: converting every render took
    most of a report's time."""
    nb = nbformat.read(rendered, as_version=4)
    nb.cells = [c for c in nb.cells if COVERAGE not in c.metadata.get("tags", [])]
    if banner:
        cell = nbformat.v4.new_markdown_cell(f"> **{banner}**", id="coverage-banner")
        cell.metadata["tags"] = [COVERAGE]
        nb.cells.insert(1, cell)
    text = nbformat.writes(nb) + "\n"
    copies = html_copies(rendered.parent, rendered.stem)
    if rendered.read_text(encoding="utf-8") == text and all(path.exists() for path in copies):
        return []
    texts = {rendered: text, **dict(zip(copies, html_texts(nb, rendered.stem)))}
    changed = [path for path, text in texts.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    for path in changed:
        path.write_text(texts[path], encoding="utf-8")
    return changed


def write_renders(executed: Path, target: Path) -> list[Path]:
    """Render the executed notebook ``executed`` for ``target`` (``<folder>/<notebook>_<profile>.ipynb``):
    the ipynb rewritten in place and its two HTML copies beside it, named after ``target``; returns the three
    paths, for the caller to move into ``target``'s folder."""
    nb = reproducible(nbformat.read(executed, as_version=4), target)
    nbformat.write(nb, executed)
    copies = html_copies(executed.parent, target.stem)
    for path, text in zip(copies, html_texts(nb, target.stem)):
        path.write_text(text, encoding="utf-8")
    return [executed, *copies]


def html_copies(folder: Path, stem: str) -> tuple[Path, Path]:
    """The two HTML copies of the render ``<stem>.ipynb`` in ``folder``: the reader's copy, code included, and
    the report's copy without input cells."""
    return folder / f"{stem}.html", folder / f"{stem}{REPORT_SUFFIX}.html"


def html_texts(nb: nbformat.NotebookNode, stem: str) -> tuple[str, str]:
    """The texts of :func:`html_copies` for the executed notebook ``nb``, both opening with its findings."""
    reader = findings_first(nb)
    return to_html(reader, stem), to_html(reader, stem, exclude_input=True)
