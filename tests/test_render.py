"""lib.render: re-rendering unchanged records gives byte-identical files; the reader's copies open with the findings."""
import base64
import contextlib
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import nbformat
import pytest
import torch

from lib import PROJECT_ROOT, execute, render, run_all
from lib.notebook import Setup
from lib.run.results import ResultsStore, variant_root
from lib.studies import STUDIES, stop_gradient
from lib.studies.variants import notebook_defaults, variant_of

NOTEBOOK = "06_stop_gradient_collapse"  # its shipped quick records are in today's form and need no data
PROFILE = "quick"
NAME = f"{NOTEBOOK}_{PROFILE}"


def snapshot(folder: Path) -> dict[str, bytes]:
    """The renders in ``folder`` and every PNG figure in its notebook, by name."""
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    nb = nbformat.reads(files[f"{NAME}.ipynb"].decode(), as_version=4)
    pngs = [o["data"]["image/png"] for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    return files | {f"figure-{i}.png": base64.b64decode(png) for i, png in enumerate(pngs)}


# A render's kernel under other torch kernels than this process's: AVX2 where this one runs AVX-512, the scalar
# ones elsewhere. A render reads records and formats numbers to their meaningful precision, so the CPU must not
# reach a file.
CAPABILITY = "ATEN_CPU_CAPABILITY"
OTHER_CAPABILITY = "avx2" if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else "default"


@pytest.fixture(scope="module")
def renders():
    """The notebook rendered three times from the same records, the last with its kernel under
    ``ATEN_CPU_CAPABILITY=OTHER_CAPABILITY``: copies of its shipped quick records in a variant of their own,
    in a results folder under the project's ignored .cache/ (removed afterwards), so rendering runs nothing,
    every path the notebook prints lies under the project root, and results/ is neither touched nor seen
    changing by the tests that read it beside this one (the suite runs in several processes)."""
    variant = f"test-render-{uuid.uuid4().hex[:8]}"
    results_dir = Path(".cache") / variant  # relative to the project root, as the notebook's results_dir is
    study = next(s for s in STUDIES.values() if s.notebook == NOTEBOOK)
    job = run_all.plan_job(study, profile=PROFILE, results_dir=str(results_dir), parameters={}, variant=variant)
    shipped = PROJECT_ROOT / "results" / "runs" / NOTEBOOK / PROFILE
    try:
        shutil.copytree(shipped, variant_root(PROJECT_ROOT / results_dir, variant) / "runs" / NOTEBOOK / PROFILE)
        snapshots = []
        for capability in (None, None, OTHER_CAPABILITY):
            with kernel_capability(capability):
                execute.render(job.notebook, profile=PROFILE, parameters=job.parameters, output_dir=job.output_dir)
            snapshots.append(snapshot(job.output_dir))
        yield snapshots
    finally:
        shutil.rmtree(PROJECT_ROOT / results_dir, ignore_errors=True)


@contextlib.contextmanager
def kernel_capability(capability: str | None):
    """The notebook's kernel (a process started from this one's environment) under ``capability``."""
    before = os.environ.get(CAPABILITY)
    if capability is not None:
        os.environ[CAPABILITY] = capability
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CAPABILITY, None)
        else:
            os.environ[CAPABILITY] = before


def test_re_rendering_unchanged_records_gives_byte_identical_html_ipynb_and_png(renders):
    first, second, _ = renders
    assert {f"{NAME}.ipynb", f"{NAME}.html", f"{NAME}{render.REPORT_SUFFIX}.html", "figure-0.png"} <= set(first)
    assert set(first) == set(second)
    assert [name for name in first if first[name] != second[name]] == []


def test_a_render_under_other_cpu_kernels_is_byte_identical(renders):
    first, _, other = renders
    assert set(first) == set(other)
    assert [name for name in first if first[name] != other[name]] == []


def test_the_readers_copies_open_with_the_findings_and_the_report_has_no_code(renders):
    files = renders[0]
    executed = nbformat.reads(files[f"{NAME}.ipynb"].decode(), as_version=4)
    tagged = [c for c in executed.cells if render.FINDINGS in c.metadata.get("tags", [])]
    assert [c.cell_type for c in tagged] == ["markdown", "code"]
    assert executed.cells.index(tagged[0]) > len(executed.cells) / 2  # the ipynb keeps the execution order
    reader = render.findings_first(executed)
    assert reader.cells[0].source.startswith("# Study 6") and "\n" not in reader.cells[0].source.strip()
    # the first screen: the fixture's records are a variant's, so its bold line leads (issue 50), then the profile,
    # the data and the paper's data; then the findings follow
    first = reader.cells[1].source
    variant, profile = first.split("\n")
    assert variant.startswith("**Writes variant `test-render-")
    assert profile.startswith("**Profile `quick`** on digits (scikit-learn), synthetic, teacher_student; ")
    assert profile.endswith(f"; the paper's data: {stop_gradient.PAPER_DATA}.")
    quick = stop_gradient.PROFILES["quick"]  # the model and length, by the study's SCALE keys
    assert f"num classes {quick['num_classes']}" in first and f"embed dim {quick['embed_dim']}" in first
    assert reader.cells[2:4] == tagged and "paper_vs_reproduced" in reader.cells[3].source
    full, report = files[f"{NAME}.html"].decode(), files[f"{NAME}{render.REPORT_SUFFIX}.html"].decode()
    for page in (full, report):  # the findings table comes before the first figure, its text left-aligned
        assert page.index('celltag_findings"') < page.index("<img ") and render.FINDINGS_CSS in page
    code_cells = {name: re.findall(r'class="jp-Cell jp-CodeCell[^"]*"', page) for name, page in
                  (("full", full), ("report", report))}
    assert len(code_cells["full"]) == len(code_cells["report"]) > 0
    assert not any("jp-mod-noInput" in c for c in code_cells["full"])
    assert all("jp-mod-noInput" in c for c in code_cells["report"]) and 'class="highlight' not in report


PROMPT = re.compile(r"\b(In|Out)\s?\[\s*\d*\]:")  # nbconvert's prompts ("Out[15]:"); its stylesheet names "Out[]"


def test_the_code_free_report_shows_no_prompts(tmp_path):
    """Issue 50: an "Out[15]:" beside a result whose code is hidden says nothing to a reader. A shipped executed
    notebook with results that carry an execution count (study 4's quick render) is rendered again in a temporary
    folder; its report has no prompt, while the reader's copy, code included, keeps them."""
    name = "04_embedding_norms_quick"
    executed = tmp_path / f"{name}.ipynb"
    shutil.copy(PROJECT_ROOT / "results" / "notebooks" / f"{name}.ipynb", executed)
    _, full, report = render.write_renders(executed, tmp_path / f"{name}.ipynb")
    assert PROMPT.findall(full.read_text(encoding="utf-8"))  # the test would see a prompt where there is one
    assert PROMPT.findall(report.read_text(encoding="utf-8")) == []


def test_a_variants_render_opens_with_its_variant_line_and_overrides_then_its_verdicts(tmp_path):
    """Issue 50: a variant's render once opened like the shipped results, its "writes variant" line far below the
    verdicts. The set-up header of a variant of study 6 (``seeds 4`` at quick, lib.notebook.Setup, nothing run) put
    in a shipped executed notebook: its reader's copies open, under the title, with the bold variant line and its
    overrides, then the profile line, then the verdicts; the header below goes on without them."""
    study = next(s for s in STUDIES.values() if s.notebook == NOTEBOOK)
    given = {**notebook_defaults(study), "profile": PROFILE, "seeds": 4}
    settings = study.module.resolve(given)
    variant, changes = variant_of(study, given, settings)
    store = ResultsStore(variant_root(tmp_path, variant), study.name, PROFILE)
    setup = Setup(study, settings, study.module.plan(settings), store, variant, changes)
    header = setup.header()
    assert header.startswith(f"**Writes variant `{variant}`**") and "(overrides: seeds = 4)" in header.split("\n")[0]
    executed = tmp_path / f"{NAME}.ipynb"
    nb = nbformat.read(PROJECT_ROOT / "results" / "notebooks" / f"{NAME}.ipynb", as_version=4)
    output = next(o for c in nb.cells for o in c.get("outputs", []) if o.get("metadata", {}).get(render.HEADER))
    output.data["text/markdown"] = header
    output.metadata[render.HEADER] = setup.lead_lines()
    nbformat.write(nb, executed)
    _, full, report = render.write_renders(executed, executed)
    for page in (full.read_text(encoding="utf-8"), report.read_text(encoding="utf-8")):
        lead = page.index(f"Writes variant <code>{variant}</code>")
        assert page.count(f"Writes variant <code>{variant}</code>") == 1
        assert page.index("<h1") < lead < page.index("Profile <code>quick</code>") < page.index('celltag_findings"')
        assert "Plan</strong>" in page[page.index('celltag_findings"'):]  # the rest of the header stays below


def test_no_absolute_path_of_the_machine_is_left(renders):
    for name, content in renders[0].items():
        if not name.endswith(".png"):
            text = content.decode()
            assert str(PROJECT_ROOT) not in text and str(Path.home()) not in text, name


def test_paths_are_rewritten_relative_to_the_project_whole_components_only():
    root = str(PROJECT_ROOT)
    folders = {root: ".", "/data/shared": "../../data/shared", "/home/me": "~"}
    text = (f"{root}/lib/studies/common.py:159: RuntimeWarning; cwd {root}; {root}-old/x; "
            "DATA_ROOT /data/shared/cifar10.npz; /home/me/.cache/tv; /home/meg")
    assert render.relative_paths(text, folders) == (
        f"lib/studies/common.py:159: RuntimeWarning; cwd .; {root}-old/x; "
        "DATA_ROOT ../../data/shared/cifar10.npz; ~/.cache/tv; /home/meg")


def test_widget_model_ids_are_renumbered_in_order_of_appearance():
    ids = [uuid.uuid4().hex for _ in range(2)]
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": ids[1], "version_major": 2, "version_minor": 0}}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
        nbformat.v4.new_output("display_data", data=view)])])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
                              "state": {ids[0]: {"state": {}}, ids[1]: {"state": {"layout": f"IPY_MODEL_{ids[0]}"}}}}}
    text = nbformat.writes(render.renumber_widgets(nb))
    assert ids[0] not in text and ids[1] not in text
    assert f'"model_id": "{1:032x}"' in text and f'"layout": "IPY_MODEL_{2:032x}"' in text


def test_without_saved_widget_state_the_widget_views_go_and_the_default_view_stays():
    data = {"application/vnd.jupyter.widget-view+json": {"model_id": uuid.uuid4().hex, "version_major": 2,
                                                         "version_minor": 0},
            "text/html": "<p>default view</p>", "text/plain": "Explorer(...)"}
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[
        nbformat.v4.new_output("display_data", data=data)])])
    out = render.renumber_widgets(nb).cells[0].outputs[0].data
    assert set(out) == {"text/html", "text/plain"} and out["text/html"] == "<p>default view</p>"


@pytest.mark.parametrize("capability", ["avx2", "default"])
def test_the_main_job_reproduces_the_shipped_renders_byte_for_byte_under_other_cpu_kernels(capability, tmp_path):
    """Issue 50: the shipped renders are a function of the records on any x86-64 CPU. The tracked files of this
    tree (a fresh clone's) are copied aside and the main job renders studies 5 and 6 there, under AVX2's kernels
    and under the scalar ones; every file under results/ must then be the shipped file, byte for byte. These two
    studies are the ones another CPU once changed (a float64 identity's last digit, a figure's default view)."""
    if capability == "avx2" and not torch.backends.cpu.get_cpu_capability().startswith(("AVX2", "AVX512")):
        pytest.skip("this CPU has no AVX2")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True)
    if listed.returncode:
        pytest.skip("not a git checkout: a fresh clone's files cannot be listed")
    copy = tmp_path / "clone"
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    env = {k: v for k, v in os.environ.items() if k not in ("DATA_ROOT", "PYTEST_XDIST_WORKER")}
    job = subprocess.run([sys.executable, "-m", "lib.run_all", "--only", "05", "06", "--profile", "quick"], cwd=copy,
                         env={**env, CAPABILITY: capability}, capture_output=True, text=True, timeout=900)
    assert job.returncode == 0, job.stderr[-3000:]
    changed = [p.relative_to(copy).as_posix() for p in sorted((copy / "results").rglob("*")) if p.is_file()
               and (not (PROJECT_ROOT / p.relative_to(copy)).is_file()
                    or p.read_bytes() != (PROJECT_ROOT / p.relative_to(copy)).read_bytes())]
    assert changed == []
