"""lib.run_all renders safely: a failed notebook never replaces a good render, the job goes on and exits non-zero."""
import os
import shutil
import sys
import uuid
from pathlib import Path

import nbformat
import pytest

from lib import PROJECT_ROOT, execute, report, run_all
from tests.conftest import SHARED_DATA

CPU_RENDER = "01_margin_factorial_cpu"


@pytest.fixture
def results(tmp_path):
    """A copy of the shipped results/ (renders, tables, runs), for run_all's --results-dir. A render in progress in
    this checkout (its ``.rendering-*`` folder, lib.execute) is not shipped: copied, it would read as one of ours."""
    shutil.copytree(PROJECT_ROOT / "results", tmp_path / "results", ignore=shutil.ignore_patterns(".rendering-*"))
    return tmp_path / "results"


def test_recorded_runs_render_the_same_files_with_and_without_the_arrays(monkeypatch, capsys):
    """Every shipped cpu run of study 1 is recorded and its datasets are described (results/datasets): rendered
    with no data folder at all, then with the real subsets where they are here (else a folder that does not
    exist), the render reads no arrays, names no data folder and gives the same bytes. (In a results folder of
    its own under the ignored .cache/, so that the paths it prints lie under the project root.)"""
    monkeypatch.delenv("DATA_ROOT", raising=False)
    monkeypatch.setenv("TORCHVISION_CACHE", str(PROJECT_ROOT / ".cache" / "no_torchvision_cache"))
    results_dir = Path(".cache") / f"test-no-arrays-{uuid.uuid4().hex[:8]}" / "results"
    results = PROJECT_ROOT / results_dir
    try:
        for part in ("runs/01_margin_factorial/cpu", "datasets"):
            shutil.copytree(PROJECT_ROOT / "results" / part, results / part)
        copies = []
        for data_root in ([], ["--data-root", str(SHARED_DATA if SHARED_DATA.is_dir() else results / "no_data")]):
            command = ["--only", "01", "--profile", "cpu", "--results-dir", str(results_dir), *data_root]
            assert run_all.main(command) == 0
            assert "nothing to train" in capsys.readouterr().out
            copies.append({s: (results / "notebooks" / f"{CPU_RENDER}.{s}").read_bytes() for s in ("ipynb", "html")})
        assert copies[0] == copies[1]
        rendered = nbformat.reads(copies[0]["ipynb"].decode(), as_version=4)
        assert b"nothing here needs the arrays" in copies[0]["ipynb"]
        assert "data_root" not in rendered.metadata["papermill"]["parameters"]
    finally:
        shutil.rmtree(results.parent, ignore_errors=True)


def test_a_failed_render_leaves_the_shipped_render_byte_identical(results, tmp_path, monkeypatch, capsys):
    """A render that needs the arrays (here: its datasets' facts were never recorded) on a machine without them
    fails in the notebook's setup, and the shipped render stays."""
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))  # inherited by the kernel
    monkeypatch.delenv("DATA_ROOT", raising=False)
    (results / "datasets" / "01_margin_factorial_cpu.json").unlink()
    shipped = {s: (results / "notebooks" / f"{CPU_RENDER}.{s}").read_bytes() for s in ("ipynb", "html")}
    code = run_all.main(["--only", "01", "--profile", "cpu", "--data-root", str(tmp_path / "no_data"),
                         "--results-dir", str(results)])
    assert code == 1
    assert {s: (results / "notebooks" / f"{CPU_RENDER}.{s}").read_bytes() for s in ("ipynb", "html")} == shipped
    failed = nbformat.read(results / "notebooks" / execute.FAILED / f"{CPU_RENDER}.ipynb", as_version=4)
    assert any(o.get("ename") == "DatasetNotFoundError" for c in failed.cells for o in c.get("outputs", []))
    err = capsys.readouterr().err
    assert "01_margin_factorial.ipynb: DatasetNotFoundError" in err and f"failed/{CPU_RENDER}.ipynb" in err
    # the whole message reaches the terminal: what was tried and what to do, not only its first line
    assert "    Tried:" in err and "    What you can do:" in err and "--data-root" in err
    assert f'src="figures/{CPU_RENDER}.png"' in (results / "index.html").read_text()  # the report keeps its figure
    assert not list((results / "notebooks").glob(".rendering-*"))


def test_the_job_goes_on_after_a_failure_and_a_success_moves_the_render_into_place(results, monkeypatch, capsys):
    """papermill replaced by a stand-in: notebook 01 fails half-way, notebook 06 succeeds."""
    def stand_in(notebook, output, **kwargs):
        cell = nbformat.v4.new_code_cell("x = 1")
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), output)
        if "01_" in notebook:
            raise RuntimeError("half-way")

    monkeypatch.setattr(execute.papermill, "execute_notebook", stand_in)
    before = (results / "notebooks" / "01_margin_factorial_quick.ipynb").read_bytes()
    assert run_all.main(["--only", "01", "06", "--results-dir", str(results)]) == 1
    assert (results / "notebooks" / "01_margin_factorial_quick.ipynb").read_bytes() == before
    assert (results / "notebooks" / execute.FAILED / "01_margin_factorial_quick.ipynb").exists()
    rendered = nbformat.read(results / "notebooks" / "06_stop_gradient_collapse_quick.ipynb", as_version=4)
    assert (rendered.cells[0].source == "x = 1"
            and (results / "notebooks" / "06_stop_gradient_collapse_quick.html").exists())
    assert "RuntimeError: half-way" in capsys.readouterr().err


def test_a_variant_renders_under_its_own_folder(results, monkeypatch):
    monkeypatch.setattr(execute.papermill, "execute_notebook",
                        lambda notebook, output, **kwargs: nbformat.write(nbformat.v4.new_notebook(), output))
    shipped = (results / "notebooks" / "01_margin_factorial_quick.ipynb").read_bytes()
    assert run_all.main(["--only", "01", "--results-dir", str(results), "-p", "m0", "0.3"]) == 0
    assert (results / "variants" / "m0-0.3" / "notebooks" / "01_margin_factorial_quick.html").exists()
    assert (results / "notebooks" / "01_margin_factorial_quick.ipynb").read_bytes() == shipped
    # listed on the variants' own page, never on the shipped one
    assert "m0-0.3/notebooks/01_margin_factorial_quick.html" in (results / "variants" / "index.html").read_text()
    assert "m0-0.3" not in (results / "index.html").read_text()


def test_the_terminal_says_what_each_notebook_will_train(results, monkeypatch, capsys):
    """Every shipped quick run is recorded: "nothing to train"; a variant names how many of its runs it trains."""
    import re

    monkeypatch.setattr(execute.papermill, "execute_notebook",
                        lambda notebook, output, **kwargs: nbformat.write(nbformat.v4.new_notebook(), output))
    assert run_all.main(["--only", "06", "--results-dir", str(results)]) == 0
    shipped = len(list((results / "runs" / "06_stop_gradient_collapse" / "quick").glob("*.json")))
    assert (f"06_stop_gradient_collapse.ipynb: all {shipped} runs recorded, nothing to train; rendering"
            in capsys.readouterr().out)
    assert run_all.main(["--only", "01", "--results-dir", str(results), "-p", "seeds", "3", "-p", "m0", "0.3"]) == 0
    out = capsys.readouterr().out
    counts = re.search(r"01_margin_factorial.ipynb: (\d+) of (\d+) runs recorded, (\d+) to train", out)
    recorded, planned, to_train = map(int, counts.groups())
    assert 0 < recorded < planned and recorded + to_train == planned


def test_the_render_kernel_shuts_down_without_the_interrupt_that_only_logs_on_the_terminal(monkeypatch):
    """jupyter_client interrupts a kernel before every shutdown; after the last cell that SIGINT can only make
    ipykernel print "KeyboardInterrupt caught in kernel". The render's manager leaves it out then, and only then."""
    import asyncio

    from jupyter_client import AsyncKernelManager

    sent = []

    async def interrupt(self):
        sent.append(self.shutting_down)
    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = execute.LocalKernelManager()
    for shutting_down in (True, False):
        manager.shutting_down = shutting_down
        asyncio.run(manager._async_interrupt_kernel())
    assert sent == [False]


NUMPY_VS_LIBM = """
import math, sys
import numpy as np
x = np.geomspace(0.3, 300.0, 20000)
pairs = [(np.log(x), [math.log(v) for v in x]), (np.log10(x), [math.log10(v) for v in x]),
         (np.exp(x / 10), [math.exp(v / 10) for v in x]), (x ** 1.87, [v ** 1.87 for v in x])]
print(sum(int((a != np.array(b)).sum()) for a, b in pairs))
"""


def test_a_render_kernels_numpy_agrees_with_the_c_library_on_any_cpu():
    """What makes a figure the same file on every CPU: in a process with the kernel's environment, numpy's
    float64 log, log10, exp and power give the C library's results bit for bit (20,000 points each), as they do
    on an AVX2 CPU; on an AVX-512 CPU without the hold they differ in hundreds of points (checked where this
    CPU has AVX-512, so the test shows it can fail)."""
    import subprocess

    def mismatches(extra: dict) -> int:
        env = {k: v for k, v in os.environ.items() if k != execute.NUMPY_HOLD} | extra
        out = subprocess.run([sys.executable, "-c", NUMPY_VS_LIBM], env=env, capture_output=True, text=True,
                             check=True)
        return int(out.stdout.split()[-1])

    held = execute.numpy_held_to_avx2({})
    assert mismatches(held) == 0
    if held:
        assert mismatches({}) > 0
        mine = execute.numpy_held_to_avx2({execute.NUMPY_HOLD: "AVX512_SPR"})[execute.NUMPY_HOLD].split()
        assert mine[0] == "AVX512_SPR" and len(mine) == len(set(mine))  # a user's own choice is kept


def test_the_render_kernel_is_started_with_numpy_held(monkeypatch):
    """The kernel manager the renders use adds :func:`numpy_held_to_avx2`'s variables to the kernel's
    environment (planted here, so the wiring is checked on a CPU without AVX-512 too)."""
    import asyncio

    monkeypatch.setattr(execute, "numpy_held_to_avx2", lambda environ: {execute.NUMPY_HOLD: "PLANTED"})
    _, launch = asyncio.run(execute.LocalKernelManager(kernel_name="python3")._async_pre_start_kernel())
    assert launch["env"][execute.NUMPY_HOLD] == "PLANTED"
    assert launch["env"]["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize("profile", ["quick", "cpu"])
def test_every_shipped_render_is_recorded_and_described_so_a_clone_needs_no_arrays(profile, monkeypatch):
    """What lets a fresh clone re-render the shipped results without any data: each study's plan at the profile
    has a finished record for every run and recorded facts for every dataset it reads."""
    monkeypatch.delenv("DATA_ROOT", raising=False)
    monkeypatch.setenv("TORCHVISION_CACHE", str(PROJECT_ROOT / ".cache" / "no_torchvision_cache"))
    for study in run_all.STUDIES.values():
        job = run_all.plan_job(study, profile=profile, results_dir="results", parameters={})
        recorded, planned, described = run_all.recorded_of_plan(job, study, profile=profile, results_dir="results")
        assert (recorded, described) == (planned, True), study.name


def test_every_shipped_render_runs_the_notebook_as_it_stands():
    """A shipped render is stale when its notebook changed after it was rendered (a help text, a cell): a fresh
    clone's main job would then rewrite it, and a reader would see code the notebook no longer has. Every cell
    of every rendered notebook in results/notebooks, but the one papermill injects, is the notebook's cell."""
    renders = report.rendered_notebooks(PROJECT_ROOT / "results")
    assert renders
    stale = []
    for study, _, render in renders:
        source = nbformat.read(PROJECT_ROOT / "notebooks" / f"{study}.ipynb", as_version=4)
        rendered = nbformat.read(render, as_version=4)
        cells = [c.source for c in rendered.cells if "injected-parameters" not in c.metadata.get("tags", [])]
        if cells != [c.source for c in source.cells]:
            stale.append(render.name)
    assert not stale, f"re-render these (python -m lib.run_all --only NN --profile P): {stale}"


@pytest.mark.parametrize("command", ["lib.run_all", "lib.dispatch", "lib.decide", "lib.regime"])
def test_a_mistyped_profile_names_its_close_match_before_anything_runs(command, capsys):
    """Every command's --profile is checked as the notebooks check theirs: the error names the allowed profiles and
    the close match (issue 50), and argparse stops before any work."""
    import importlib

    module = importlib.import_module(command)
    argv = (["01"] if command == "lib.dispatch" else []) + ["--profile", "papr"]
    with pytest.raises(SystemExit) as stop:
        module.main(argv)
    assert stop.value.code == 2
    assert "one of smoke, quick, cpu, paper (did you mean paper?)" in capsys.readouterr().err
