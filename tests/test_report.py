"""results/index.html: a summary row per study, then every rendered study with its verdict table, key
figure, provenance and links."""
import base64
import html
import io
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import matplotlib
import nbformat
import pandas as pd
import pytest

from lib import PROJECT_ROOT
from lib.report import KINDS, STUDY_SPEC, verdict_kind, write_index
from lib.studies import STUDIES, common

matplotlib.use("Agg")

SHIPPED = PROJECT_ROOT / "results"
# Verdicts as the study modules write them, each with the kind a reader should see counted
KNOWN = [("reproduced (direction and significance)", "reproduced"),
         ("close (within 15 points); measured on shapes10, not on CIFAR-10", "reproduced"),
         ("direction only, not significant at this scale", "direction"),
         ("direction reproduced (one seed per arm: no test)", "direction"),
         ("not reproduced at this scale (p >= 0.05)", "not-reproduced"),
         ("includes 1: not reproduced at this scale", "not-reproduced"),
         ("not measured", "not-measured"),
         ("not measured (not in this profile's datasets)", "not-measured"),
         ("identical twins: pooling them doubles the F-test's degrees of freedom", "note")]


def _png() -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _verdict_table(path: Path, verdicts: list[str]) -> None:
    pd.DataFrame({"quantity": [f"claim {i} <{i}>" for i in range(len(verdicts))],
                  "ours": [f"{i}.5" for i in range(len(verdicts))], "paper": ["1.0"] * len(verdicts),
                  "evidence": ["[paper]"] * len(verdicts), "verdict": verdicts}).to_csv(path, index=False)


@pytest.fixture
def results(tmp_path):
    """A results folder as the notebooks leave it: study 1 rendered at cpu (tagged key figure; runs from
    two commits, one of them with uncommitted changes) and quick, study 6 at quick without a verdict table."""
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "tables").mkdir()
    first = nbformat.v4.new_code_cell("plot()")
    key = nbformat.v4.new_code_cell("key()", metadata={"tags": ["key-figure"]})
    first.outputs = [nbformat.v4.new_output("display_data", data={"image/png": _png()})]
    key.outputs = [nbformat.v4.new_output("display_data", data={"image/png": _png(), "text/plain": "<Figure>"})]
    nbformat.write(nbformat.v4.new_notebook(cells=[first, key]),
                   tmp_path / "notebooks" / "01_margin_factorial_cpu.ipynb")
    (tmp_path / "notebooks" / "01_margin_factorial_cpu.html").write_text("<html></html>")
    for name in ("01_margin_factorial_quick", "06_stop_gradient_collapse_quick"):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]),
                       tmp_path / "notebooks" / f"{name}.ipynb")
    _verdict_table(tmp_path / "tables" / "01_margin_factorial_cpu_paper_vs_reproduced.csv",
                   [v for v, _ in KNOWN] + ["a verdict no rule knows"])
    _verdict_table(tmp_path / "tables" / "01_margin_factorial_quick_paper_vs_reproduced.csv", ["not measured"])
    pd.DataFrame({"run_id": list("abcde"), "dataset": ["cifar10"] * 5, "status": ["ok"] * 4 + ["diverged"],
                  "git_commit": ["0123456789abcdef"] * 3 + ["fedcba9876543210"] * 2,
                  "git_dirty": [False, False, False, True, True]}
                 ).to_csv(tmp_path / "tables" / "01_margin_factorial_cpu.csv", index=False)
    return tmp_path


def summary_rows(page: str) -> dict[str, str]:
    """study -> the HTML of its summary row."""
    return dict(re.findall(r'<tr class="study" id="summary-([^"]+)">(.*?)</tr>', page, re.S))


def badge_counts(cell: str) -> dict[str, int]:
    """kind -> count of the verdict badges in one summary cell."""
    return {kind: int(n) for kind, n in re.findall(r'<span class="badge ([a-z-]+)"[^>]*>[^<]*? (\d+)</span>', cell)}


def test_verdict_kinds_of_the_study_modules_verdicts():
    for verdict, kind in KNOWN:
        assert verdict_kind(verdict) == kind, verdict
    # the verdict function the CFF studies share, in each of its branches
    assert verdict_kind(common.verdict_variance_ratio(3.0, 0.01, 5.9)) == "reproduced"
    assert verdict_kind(common.verdict_variance_ratio(3.0, 0.2, 5.9)) == "direction"
    assert verdict_kind(common.verdict_variance_ratio(0.5, 0.2, 5.9)) == "not-reproduced"
    assert verdict_kind(common.verdict_variance_ratio(0.5, 0.01, 5.9)) == "not-reproduced"
    assert verdict_kind(common.verdict_variance_ratio(float("nan"), 0.01, 5.9)) == "not-measured"
    # study 3's caveat does not hide the verdict after it
    assert verdict_kind("no level at this relative accuracy (the nearest is 0.30 of the chance-to-ceiling range "
                        "away); direction only, not significant at this scale") == "direction"
    assert verdict_kind("a verdict no rule knows") is None


def test_every_shipped_verdict_has_a_known_kind():
    tables = sorted((SHIPPED / "tables").glob("*_paper_vs_reproduced.csv"))
    assert tables
    unknown = [(t.name, v) for t in tables for v in pd.read_csv(t, dtype=str).verdict.fillna("")
               if verdict_kind(v) is None]
    assert unknown == [], "add a rule to lib.report.VERDICT_RULES for these verdicts"


def test_every_study_names_a_headline_row_of_its_shipped_tables():
    for study in STUDIES.values():
        assert study.module.QUESTION and "\n" not in study.module.QUESTION
        # the quick tables are re-rendered by the main job; a cpu table may predate today's row names until its
        # re-run, and then the summary shows no headline badge (test_summary_counts_equal_the_shipped_tables)
        for table in (SHIPPED / "tables").glob(f"{study.name}_quick_paper_vs_reproduced.csv"):
            quantities = pd.read_csv(table, dtype=str).quantity
            assert quantities.str.startswith(study.module.HEADLINE).any(), f"{table.name}: {study.module.HEADLINE}"


def test_summary_has_a_row_per_study_with_its_verdicts_counted_by_kind(results):
    page = write_index(results).read_text()
    rows = summary_rows(page)
    assert list(rows) == ["01_margin_factorial", "06_stop_gradient_collapse"]
    assert page.index('class="summary"') < page.index("<h2")  # the summary comes first
    # study 1's row: its strongest profile, cpu, counted from the table's verdicts, the unknown one as "other"
    expected = Counter(kind for _, kind in KNOWN) + Counter(other=1)
    assert badge_counts(rows["01_margin_factorial"]) == dict(expected)
    assert list(badge_counts(rows["01_margin_factorial"])) == [k for k in KINDS if k in expected]  # fixed order
    assert STUDIES["01"].module.QUESTION in rows["01_margin_factorial"]
    assert 'href="#01_margin_factorial_cpu"' in rows["01_margin_factorial"]
    assert 'href="#01_margin_factorial_quick"' in rows["01_margin_factorial"]  # the other profile, linked
    assert "no verdicts" in rows["06_stop_gradient_collapse"] and badge_counts(rows["06_stop_gradient_collapse"]) == {}
    # the headline: study 1 names no row of this table, and a badge never comes from another row
    assert "this table has no headline row" in rows["01_margin_factorial"]
    assert not re.search(r'>reproduced</span> claim', rows["01_margin_factorial"])
    for link in re.findall(r'href="#([^"]+)"', "".join(rows.values())):
        assert f'<h2 id="{link}">' in page
    # each verdict row of the section carries its kind
    assert page.count('<tr class="other">') == 1 and page.count('<tr class="note">') == 1


def test_summary_counts_equal_the_shipped_tables(tmp_path):
    page = write_index(SHIPPED, output_dir=tmp_path).read_text()
    rows = summary_rows(page)
    studies = sorted({p.stem.rsplit("_", 1)[0] for p in (SHIPPED / "notebooks").glob("*.ipynb")})
    assert sorted(rows) == studies
    for study, row in rows.items():
        shown = re.search(r'<div class="meta">(\w+)', row)[1]
        table = pd.read_csv(SHIPPED / "tables" / f"{study}_{shown}_paper_vs_reproduced.csv", dtype=str)
        assert badge_counts(row) == dict(Counter(verdict_kind(v) or "other" for v in table.verdict.fillna("")))
        named = table[table.quantity.str.startswith(STUDIES[study[:2]].module.HEADLINE)]
        if len(named):
            assert f"<b>{html.escape(named.iloc[0].ours)}</b>" in row
        else:  # an older table without the row: no headline badge (never another row's)
            assert "this table has no headline row" in row


def test_sections_show_provenance_verdicts_and_figure(results):
    page = write_index(results).read_text()
    assert page.count("<h2") == 3
    assert "a verdict no rule knows" in page and "claim 0 &lt;0&gt;" in page  # escaped, not raw HTML
    assert "data cifar10" in page and "5 runs (4 ok, 1 diverged)" in page
    # which runs came from which commit, plainly
    assert ("runs from 2 commits: 3 from commit 0123456789 (clean), 2 from commit fedcba9876 with uncommitted "
            "changes") in page
    assert "No paper-vs-reproduced table" in page and "no run table" in page  # study 6 wrote neither
    cells = nbformat.read(results / "notebooks" / "01_margin_factorial_cpu.ipynb", as_version=4).cells
    key = next(cell for cell in cells if "key-figure" in cell.metadata.get("tags", []))
    assert (results / "figures" / "01_margin_factorial_cpu.png").read_bytes() == base64.b64decode(
        key.outputs[0]["data"]["image/png"])
    assert not (results / "figures" / "06_stop_gradient_collapse_quick.png").exists()


def test_one_commit_is_named_once(results):
    runs = pd.read_csv(results / "tables" / "01_margin_factorial_cpu.csv").assign(git_dirty=True)
    runs.assign(git_commit="0123456789abcdef").to_csv(results / "tables" / "01_margin_factorial_cpu.csv", index=False)
    assert "all 5 runs from commit 0123456789 with uncommitted changes" in write_index(results).read_text()


def test_the_same_records_give_the_same_page(results, tmp_path_factory):
    first = write_index(results).read_bytes()
    assert write_index(results).read_bytes() == first
    elsewhere = write_index(results, output_dir=tmp_path_factory.mktemp("page"))
    assert (elsewhere.parent / "figures" / "01_margin_factorial_cpu.png").exists()


def test_every_link_and_image_resolves_inside_the_repository(results, tmp_path_factory):
    for page_dir in (results, tmp_path_factory.mktemp("page")):
        page = write_index(results, output_dir=page_dir)
        targets = [(page.parent / t).resolve() for t in re.findall(r'(?:src|href)="([^"#]+)"', page.read_text())]
        assert STUDY_SPEC in targets  # the study specification in the repository, written by docs/
        assert "STUDIES.md" not in page.read_text()
        for target in targets:
            assert target == STUDY_SPEC or target.is_file(), f"{target} does not resolve"


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="Debian's chromium is not installed (apt-get install chromium) "
                           "for the headless browser check")
def test_index_loads_in_headless_chromium_without_console_errors(results, tmp_path_factory):
    index = write_index(results)
    for width, height in ((1280, 800), (390, 844)):
        screenshot = tmp_path_factory.mktemp("shot") / "index.png"
        run = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path_factory.mktemp('profile')}", "--enable-logging=stderr", "--v=0",
             f"--screenshot={screenshot}", f"--window-size={width},{height}", index.as_uri()],
            capture_output=True, text=True, timeout=300)
        console = [line for line in run.stderr.splitlines() if "CONSOLE" in line or "ERR_FILE_NOT_FOUND" in line]
        assert run.returncode == 0 and screenshot.stat().st_size > 10_000
        assert console == []


def test_variants_are_listed_on_their_own_page_and_never_change_the_shipped_one(results):
    shipped = write_index(results).read_bytes()
    variant = results / "variants" / "m0-0.3_seeds-3"
    (variant / "notebooks").mkdir(parents=True)
    shutil.copy(results / "notebooks" / "01_margin_factorial_cpu.ipynb",
                variant / "notebooks" / "01_margin_factorial_quick.ipynb")
    (variant / "notebooks" / "01_margin_factorial_quick.html").write_text("<html></html>")
    assert write_index(results).read_bytes() == shipped  # a variant changes no byte of the shipped page
    page = (results / "variants" / "index.html").read_text()
    assert "not the shipped results" in page and 'href="../index.html"' in page
    assert 'href="m0-0.3_seeds-3/notebooks/01_margin_factorial_quick.html"' in page


def test_machines_are_named_and_cells_on_one_machine_only_are_counted():
    from lib.report import machine_statement

    def record(seed, arm, cpu=None):
        env = {"device": "cpu"} | ({"cpu_model": cpu, "cpu_capability": "AVX2"} if cpu else {})
        return {"config": {"seed": seed, "margin_mode": arm}, "environment": env}

    assert machine_statement([record(0, "clamp"), record(1, "subtract")]).startswith("machine not recorded")
    assert machine_statement([record(0, "clamp", "A"), record(1, "subtract", "A")]) == "all on A (AVX2)"
    interleaved = [record(s, arm, "A" if s % 2 else "B") for s in range(4) for arm in ("clamp", "subtract")]
    assert machine_statement(interleaved) == ("runs on 2 machines: B (AVX2) 4, A (AVX2) 4; every cell of the design "
                                              "ran on more than one of them")
    split = [record(s, "clamp", "A") for s in range(3)] + [record(s, "subtract", "B") for s in range(2)]
    assert machine_statement(split) == ("runs on 2 machines: A (AVX2) 3, B (AVX2) 2; 2 of 2 cells of the design ran "
                                        "on one machine only: those arms are not balanced across machines")
