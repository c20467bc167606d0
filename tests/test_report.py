"""results/index.html: every rendered study with its verdict table, key figure, provenance and links."""
import base64
import io
import re
import shutil
import subprocess

import matplotlib
import nbformat
import pandas as pd
import pytest

from lib.report import write_index

matplotlib.use("Agg")


def _png() -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture
def results(tmp_path):
    """A results folder as two notebooks leave it: one with a tagged key figure, one without any figure."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "tables").mkdir()
    first = nbformat.v4.new_code_cell("plot()")
    key = nbformat.v4.new_code_cell("key()", metadata={"tags": ["key-figure"]})
    first.outputs = [nbformat.v4.new_output("display_data", data={"image/png": _png()})]
    key.outputs = [nbformat.v4.new_output("display_data", data={"image/png": _png(), "text/plain": "<Figure>"})]
    nbformat.write(nbformat.v4.new_notebook(cells=[first, key]), tmp_path / "notebooks" / "01_study_quick.ipynb")
    (tmp_path / "notebooks" / "01_study_quick.html").write_text("<html></html>")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]),
                   tmp_path / "notebooks" / "02_other_cpu.ipynb")
    pd.DataFrame({"quantity": ["VR", "CAR"], "ours": ["0.91", "60%"], "paper": ["5.90", "60.7%"],
                  "evidence": ["[paper]", "[paper]"], "verdict": ["not reproduced at this scale", "close <15 pts"]}
                 ).to_csv(tmp_path / "tables" / "01_study_quick_paper_vs_reproduced.csv", index=False)
    pd.DataFrame({"run_id": ["a", "b"], "dataset": ["shapes", "shapes"], "git_commit": ["0123456789abcdef"] * 2,
                  "git_dirty": [False, True]}).to_csv(tmp_path / "tables" / "01_study_quick.csv", index=False)
    return tmp_path


def test_index_shows_each_study_with_its_verdicts_figure_and_provenance(results):
    page = write_index(results).read_text()
    assert page.count("<h2") == 2
    assert "not reproduced at this scale" in page and "close &lt;15 pts" in page  # escaped, not raw HTML
    assert "2 runs" in page and "data shapes" in page and "commit 0123456789 (with uncommitted changes)" in page
    assert "No paper-vs-reproduced table" in page  # the second study wrote none, and the page says so
    key = nbformat.read(results / "notebooks" / "01_study_quick.ipynb", as_version=4).cells[1]
    assert (results / "figures" / "01_study_quick.png").read_bytes() == base64.b64decode(
        key.outputs[0]["data"]["image/png"])
    assert not (results / "figures" / "02_other_cpu.png").exists()


def test_every_link_and_image_of_the_index_resolves(results):
    page = write_index(results).read_text()
    targets = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert targets, "the page links nothing"
    for target in targets:
        assert (results / target).is_file(), f"{target} does not resolve"


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="Debian's chromium is not installed (apt-get install chromium) "
                           "for the headless browser check")
def test_index_loads_in_headless_chromium_without_console_errors(results, tmp_path_factory):
    index = write_index(results)
    screenshot = tmp_path_factory.mktemp("shot") / "index.png"
    run = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path_factory.mktemp('profile')}", "--enable-logging=stderr", "--v=0",
         f"--screenshot={screenshot}", "--window-size=1200,1600", index.as_uri()],
        capture_output=True, text=True, timeout=120)
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "ERR_FILE_NOT_FOUND" in line]
    assert run.returncode == 0 and screenshot.stat().st_size > 10_000
    assert console == []


def test_variants_are_listed_after_every_study_apart_from_them(results):
    variant = results / "variants" / "m0-0.3_seeds-3"
    (variant / "notebooks").mkdir(parents=True)
    shutil.copy(results / "notebooks" / "01_study_quick.ipynb", variant / "notebooks" / "01_study_quick.ipynb")
    (variant / "notebooks" / "01_study_quick.html").write_text("<html></html>")
    page = write_index(results).read_text()
    # a study's section each, none for the variant
    assert page.count("<h2") == 3 and page.count('<img src="figures/') == 1
    variants = page.index('<h2 id="variants">')
    assert variants > page.rindex('<h2 id="0') and "not the shipped results" in page[variants:]
    assert 'href="variants/m0-0.3_seeds-3/notebooks/01_study_quick.html"' in page[variants:]
