"""results/index.html: a summary row per study, then every rendered study with its verdict table, key
figure, provenance and links."""
import base64
import html
import io
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import nbformat
import numpy as np
import pandas as pd
import pytest

from lib import PROJECT_ROOT, decide, report
from lib.core import verdicts
from lib.core.verdict_html import human
from lib.report import (
    KINDS,
    README_VERDICTS_BEGIN,
    README_VERDICTS_END,
    STUDY_SPEC,
    readme_block,
    readme_verdict_lines,
    verdict_kind,
    write_index,
)
from lib.run.results import ResultsStore
from lib.studies import STUDIES, find_study
from lib.studies.coverage import coverage
from lib.studies.extension import BUDGET_HOURS
from lib.studies.study import is_central

matplotlib.use("Agg")

SHIPPED = PROJECT_ROOT / "results"
# The verdict words of lib.core.verdicts' grammar (a typed record's "verdict"), in its order, each with the CSS class
# a reader should see counted
KNOWN = [("reproduced", "reproduced"), ("reproduced, smaller", "smaller"), ("contradicted", "contradicted"),
         ("not reproduced", "not-reproduced"), ("inconclusive", "inconclusive"), ("not measured", "not-measured"),
         ("not in the paper's regime", "out-of-regime"), ("exploratory", "exploratory"), ("check", "check")]
# verdicts as a table shows them (Assessment.verdict_text), with what decided them: sentences, never looked up
SENTENCES = ["inconclusive (power 33%; 12 seeds per arm for 80%)",
             "not in the paper's regime (layer-0 CAR of the clamp arm, final epoch (%) 32.4 < 50)",
             "inconclusive (decided by Brown–Forsythe, p 0.19; F-test p 0.0031)",
             "reproduced (decided by F-test, p 0.001; Brown–Forsythe p 0.03)",
             "reproduced (direction and significance)", "close (within 15 points)", "a verdict no rule knows", ""]


def _png() -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _assessment(word: str, quantity: str, claim_id: str, family: str) -> verdicts.Assessment:
    """A claim of one arm (``one_sample``, 5 seeds) whose observations lib.core.verdicts decides as ``word``, alone in
    its family; a check of ours for "check"."""
    z = np.array([-1.2, -0.4, 0.0, 0.5, 1.1])

    def seeds(values):
        return {seed: float(x) for seed, x in enumerate(values)}

    def claim(published, **fields):
        return verdicts.Claim(quantity, "one_sample", published, evidence="[paper]", family=family, id=claim_id,
                              **fields)

    if word == "check":
        return verdicts.check(quantity, "5/5 identical")
    regime = verdicts.Regime("layer-0 CAR of the clamp arm, final epoch (%)", 50.0, "CAR above half", "[paper]")
    return {"reproduced": lambda: verdicts.evaluate(claim(1.0), seeds(1.0 + 0.05 * z)),
            "reproduced, smaller": lambda: verdicts.evaluate(claim(10.0), seeds(1.0 + 0.05 * z)),
            "contradicted": lambda: verdicts.evaluate(claim(1.0), seeds(-1.0 + 0.05 * z)),
            "not reproduced": lambda: verdicts.evaluate(claim(10.0), seeds(0.1 + 0.2 * z)),
            "inconclusive": lambda: verdicts.evaluate(claim(1.0), seeds(0.3 + 2.0 * z)),
            "not measured": lambda: verdicts.evaluate(claim(1.0)),
            verdicts.OUT_OF_REGIME: lambda: verdicts.evaluate(claim(1.0, regime=regime), seeds(1.0 + 0.05 * z),
                                                              regime_value=32.4),
            "exploratory": lambda: verdicts.evaluate(claim(1.0, kind="exploratory"), seeds(1.0 + 0.05 * z)),
            }[word]()


def _verdict_table(results: Path, study: str, profile: str, words: list[str], *, ids: list[str] | None = None,
                   quantities: list[str] | None = None) -> pd.DataFrame:
    """A verdict table as a notebook writes it: one assessment per verdict word, decided by lib.core.verdicts
    (``verdicts.table(verdicts.decide(...))``), written by the store (``ResultsStore.write_frame``: the reader's CSV
    and the typed records the report reads). ``ids``: each claim's id (a check's is its quantity); the table, as
    written, is returned."""
    quantities = quantities or [f"claim {i} <{i}>" for i in range(len(words))]
    ids = ids or [f"s{int(study[:2])}.claim_{i}" for i in range(len(words))]
    decided = verdicts.decide([_assessment(word, quantity, claim_id, f"family {i}")
                               for i, (word, quantity, claim_id) in enumerate(zip(words, quantities, ids))])
    assert [a.verdict for a in decided] == words  # the fixture is what it says
    frame = verdicts.table(decided)
    ResultsStore(results, study, profile).write_frame("paper_vs_reproduced", frame)
    return frame


def _drop_shown(results: Path, study: str, profile: str) -> list[dict]:
    """The store's typed records as the engine wrote them before records carried their row's text (no "shown", as
    the records shipped before it): rewritten in place, and returned."""
    store = ResultsStore(results, study, profile)
    records = [{key: value for key, value in record.items() if key != "shown"} for record in store.verdict_records()]
    store.verdicts_path.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return records


@pytest.fixture
def results(tmp_path):
    """A results folder as the notebooks leave it: study 1 rendered at cpu (tagged key figure; runs from
    two commits, one of them with uncommitted changes; a verdict of each word of the grammar) and quick, study 6 at
    quick without a verdict table."""
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
    _verdict_table(tmp_path, "01_margin_factorial", "cpu", [word for word, _ in KNOWN])
    _verdict_table(tmp_path, "01_margin_factorial", "quick", ["not measured"])
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


def expected_classes(records: list[dict]) -> list[str]:
    """The CSS class of each typed record's row: its verdict word's in the grammar, or "superseded" for a record
    written before records carried their row's text."""
    return [verdict_kind(record["verdict"]) if "shown" in record else "superseded" for record in records]


def test_verdict_kinds_are_the_words_of_lib_verdicts():
    """A row's class is looked up by its typed record's verdict word: one class for each word of the grammar, each
    with its label on the page; a verdict as a table shows it (a sentence) is never parsed into one."""
    assert [word for word, _ in KNOWN] == list(verdicts.VERDICTS)
    for word, kind in KNOWN:
        assert verdict_kind(word) == kind, word
    assert set(KINDS) == {kind for _, kind in KNOWN} | {"superseded"}
    for text in SENTENCES:
        assert verdict_kind(text) is None, text  # words outside the grammar are never counted as one of its verdicts


def test_the_report_reads_the_typed_records_never_the_readers_csv(results):
    """report.verdicts: a row per typed record, in the records' order, with the text of its row as the reader's table
    shows it and its class from the record's verdict word (the inconclusive row's text is a sentence); the CSV beside
    the records is the reader's, and nothing the report shows changes with it. A record without its row's text is
    "superseded"; a store without records has no table, whatever CSV lies beside it."""
    written = pd.read_csv(results / "tables" / "01_margin_factorial_cpu_paper_vs_reproduced.csv", dtype=str)
    records = ResultsStore(results, "01_margin_factorial", "cpu").verdict_records()
    frame = report.verdicts(results, "01_margin_factorial", "cpu")
    assert list(frame["id"]) == [record["id"] for record in records] == list(written["id"])
    assert list(frame.verdict_word) == [record["verdict"] for record in records] == [word for word, _ in KNOWN]
    assert list(frame.css) == [kind for _, kind in KNOWN]
    for column in ("quantity", "ours", "paper", "n", "power", "verdict"):
        assert list(frame[column]) == list(written[column].fillna("")), column
    assert frame.set_index("id").loc["s1.claim_4", "verdict"].startswith("inconclusive (power ")
    written.assign(verdict="reproduced", ours="0 [0, 0]").to_csv(
        results / "tables" / "01_margin_factorial_cpu_paper_vs_reproduced.csv", index=False)
    pd.testing.assert_frame_equal(report.verdicts(results, "01_margin_factorial", "cpu"), frame)
    _drop_shown(results, "01_margin_factorial", "cpu")
    old = report.verdicts(results, "01_margin_factorial", "cpu")
    assert list(old.css) == ["superseded"] * len(KNOWN) and list(old["id"]) == list(frame["id"])
    ResultsStore(results, "01_margin_factorial", "cpu").verdicts_path.unlink()
    assert report.verdicts(results, "01_margin_factorial", "cpu") is None


def test_every_shipped_verdict_is_in_the_grammar_unless_its_table_awaits_a_re_run():
    """Every shipped typed record that carries its row's text: a word of the grammar, its sentence opening with that
    word and shown as the verdict, one row per id; records without their text only while the profile's re-run is
    incomplete."""
    paths = sorted((SHIPPED / "tables").glob("*_verdicts.json"))
    assert paths
    for path in paths:
        study, profile = re.match(r"(\d\d_[a-z0-9_]+?)_(quick|cpu|paper|smoke)_verdicts\.json$", path.name).groups()
        records = json.loads(path.read_text(encoding="utf-8"))
        assert records, path.name
        if all("shown" in record for record in records):
            ids = [record["id"] for record in records]
            assert len(set(ids)) == len(ids), path.name  # every reader joins on the id
            for record in records:
                where = (path.name, record["id"])
                assert record["verdict"] in verdicts.VERDICTS and record["kind"] in verdicts.KINDS, where
                assert verdict_kind(record["verdict"]) in KINDS, where
                text = record["verdict_text"]
                assert text == record["verdict"] or text.startswith(record["verdict"] + " ("), where
                assert record["shown"]["verdict"] == text, where
            tested = [record for record in records if record["kind"] == "claim"]
            assert (any(r["verdict"] == "not measured" for r in tested)
                    or all(r["shown"]["power"] != "–" for r in tested)), path.name
        else:  # written before records carried their text: allowed only while the profile's re-run is incomplete
            current = coverage(find_study(study), profile, SHIPPED).current
            assert not current, f"{path.name}: re-render it through lib.core.verdicts"


def test_every_study_names_the_id_of_a_central_row_of_its_shipped_tables():
    for study in STUDIES.values():
        module = study.module
        assert module.QUESTION and "\n" not in module.QUESTION
        # the central id is a claim the study declares, and central at the profile's own setting
        verdicts.statement_of(module.STATEMENTS, verdicts.statement_id(module.CENTRAL))
        assert is_central(module.CENTRAL, module)
        # the quick tables are re-rendered by the main job; a cpu table may predate today's ids until its re-run,
        # and then the summary shows no headline badge (test_summary_counts_equal_the_shipped_tables)
        records = ResultsStore(SHIPPED, study.name, "quick").verdict_records()
        if records is None:
            continue
        named = [record for record in records if record["id"] == module.CENTRAL]
        assert len(named) == 1, f"{study.name}: {module.CENTRAL}"
        assert named[0]["kind"] == "claim", f"{study.name}: the central row is a check, not the paper's claim"


def test_summary_has_a_row_per_study_with_its_verdicts_counted_by_kind(results):
    page = write_index(results).read_text()
    rows = summary_rows(page)
    assert list(rows) == ["01_margin_factorial", "06_stop_gradient_collapse"]
    assert page.index('class="summary"') < page.index("<h2")  # the summary comes first
    # study 1's row: no profile's plan is recorded here, so its strongest rendered one, cpu
    expected = Counter(kind for _, kind in KNOWN)
    assert badge_counts(rows["01_margin_factorial"]) == dict(expected)
    assert list(badge_counts(rows["01_margin_factorial"])) == [k for k in KINDS if k in expected]  # fixed order
    assert STUDIES["01"].module.QUESTION in rows["01_margin_factorial"]
    assert 'href="#01_margin_factorial_cpu"' in rows["01_margin_factorial"]
    assert 'href="#01_margin_factorial_quick"' in rows["01_margin_factorial"]  # the other profile, linked
    assert "no verdicts" in rows["06_stop_gradient_collapse"] and badge_counts(rows["06_stop_gradient_collapse"]) == {}
    # the headline: no row of this table has study 1's central id, and a badge never comes from another row
    assert (f"this table has no row of its central claim ({STUDIES['01'].module.CENTRAL})"
            in rows["01_margin_factorial"])
    for link in re.findall(r'href="#([^"]+)"', "".join(rows.values())):
        assert f'<h2 id="{link}">' in page
    # each verdict row of the cpu section carries its class
    section = page[page.index('<h2 id="01_margin_factorial_cpu">'):]
    section = section[:section.index("<h2", 1)]
    assert re.findall(r'<tr class="([a-z -]+)">', section) == [kind for _, kind in KNOWN]


def test_the_headline_is_the_central_claim_with_its_ci_and_power(results):
    """The summary's headline is the row whose id is the module's CENTRAL, at the profile's own setting: not the
    same claim read at an operating point (a row above it, with another verdict), nor a check."""
    module = STUDIES["01"].module
    point = next(iter(module.OPERATING_POINTS))
    frame = _verdict_table(results, "01_margin_factorial", "cpu", ["reproduced", "check", "inconclusive"],
                           ids=[verdicts.point_id(module.CENTRAL, point), "", module.CENTRAL],
                           quantities=[f"[{point}: epochs 2] VR of the paper", "a check of ours",
                                       "VR of the paper, seeds as the unit"])
    central = frame.set_index("id").loc[module.CENTRAL]
    at_point = frame.set_index("id").loc[verdicts.point_id(module.CENTRAL, point)]
    assert central.verdict.startswith("inconclusive (power ") and at_point.ours != central.ours
    row = summary_rows(write_index(results).read_text())["01_margin_factorial"]
    assert re.search(r'<span class="badge inconclusive"[^>]*>' + re.escape(html.escape(central.verdict)) + "</span> "
                     + re.escape(html.escape(human(central.quantity))), row)
    assert (f"ours <b>{html.escape(central.ours)}</b>; the paper's: {html.escape(central.paper)}; power "
            f"{central.power} at the paper's value, {central.n} seeds") in row
    assert f"<b>{html.escape(at_point.ours)}</b>" not in row


def test_a_table_written_before_records_carried_their_text_is_shown_apart_and_never_counted(results):
    """Typed records without their row's text (as the engine wrote them before): every row "superseded", whatever its
    verdict word, the central claim's too; none is counted as a verdict of the grammar."""
    module = STUDIES["01"].module
    _verdict_table(results, "01_margin_factorial", "cpu", ["reproduced", "inconclusive"],
                   ids=[module.CENTRAL, "s1.claim_1"])
    _drop_shown(results, "01_margin_factorial", "cpu")
    page = write_index(results).read_text()
    assert badge_counts(summary_rows(page)["01_margin_factorial"]) == {"superseded": 2}
    assert "was written before the verdict engine" in page
    assert len(re.findall(r'<tr class="superseded[ "]', page)) == 2
    assert '<span class="badge reproduced"' not in re.sub(r'<dl class="glossary">.*?</dl>', "", page, flags=re.S)


def _decide_printout(profile: str, capsys) -> str:
    assert decide.main(["--profile", profile, "--budget", f"{BUDGET_HOURS:g}", "--dry-run"]) == 0
    return capsys.readouterr().out


def _page_rows(section: str) -> list[dict]:
    """The rows of the page's "What it would take" table, each cell by its label, as text."""
    rows = []
    for row in re.findall(r'<tr><td class="study" data-label="study">.*?</tr>', section, re.S):
        cells = dict(re.findall(r'data-label="([^"]+)">(.*?)</td>', row, re.S))
        rows.append({label: html.unescape(re.sub(r"<[^>]+>", "", text)) for label, text in cells.items()})
    return rows


@pytest.mark.parametrize("profile", ["cpu", "quick"])
def test_what_it_would_take_lists_the_claims_runs_and_hours_of_lib_decides_dry_run(profile, capsys):
    """Issue 50 (one what next): the page's table is lib.decide's. From the shipped results, every claim the dry run
    plans or leaves over the budget is on the page with the same new runs and wall hours, and nothing else with a
    cost; every claim the page says no design decides is in the dry run with the same reason. (Both profiles' plans
    hold claims today, so the runs and hours are compared for real.)"""
    printout = _decide_printout(profile, capsys)
    designs = {(number, human(claim), int(runs), hours) for number, claim, runs, hours in re.findall(
        r"^\s*\d+\. (\d\d) (?:\[central\] )?(.+)\n\s+.*; (\d+) new runs, ([\d.]+) h \(total", printout, re.M)}
    designs |= {(number, human(claim), int(runs), hours) for number, claim, runs, hours in re.findall(
        r"^  - (\d\d) (.+?): over the budget: (\d+) runs, ([\d.]+) more hours", printout, re.M)}
    shown = {study.name: (profile, [profile]) for study in STUDIES.values()}
    rows = _page_rows(report.to_decide(SHIPPED, shown))
    assert rows, "the shipped tables have undecided claims at both profiles"
    on_page = {(r["study"][:2], r["claim"].removeprefix("[central] "), int(r["new runs"]), r["wall hours"])
               for r in rows if r["new runs"] != "–"}
    assert on_page == designs
    if not designs:  # nothing to plan within the budget at this profile today: the page shows why-nots only
        assert all(r["new runs"] == "–" for r in rows)
    reasons = re.findall(r"^  - (\d\d) (.+)$", printout, re.M)
    for row in rows:
        if row["new runs"] == "–":
            assert row["command"] == "–" and row["wall hours"] == "–"
            said = [(n, line) for n, line in reasons if line.endswith(": " + row["what would decide it"])]
            claims = {human(line[:-len(": " + row["what would decide it"])]) for _, line in said}
            assert row["claim"].removeprefix("[central] ") in claims, row
        else:
            assert row["command"].startswith(f"python -m lib.decide --profile {profile} --budget ")
    assert len({(r["study"], r["claim"]) for r in rows}) == len(rows)  # a claim once


def test_what_next_rows_are_the_pages_rows_of_one_study():
    """A study's own report can show what would decide its undecided rows: the same rows the page has for it."""
    table = report.what_next_table(SHIPPED, "quick")
    rows = report.what_next_rows(SHIPPED, "04_embedding_norms", "quick")
    assert list(rows.columns) == ["study", "profile", "claim", "central", "verdict", "decides", "runs", "hours",
                                  "command"]
    assert len(rows) and set(rows.study) == {"04_embedding_norms"}
    assert rows.claim.tolist() == table[table.study == "04_embedding_norms"].claim.tolist()
    planned = rows[rows.command != ""]
    assert len(planned) and (planned.runs > 0).all() and (planned.hours >= 0).all()
    assert (rows[rows.command == ""].runs.isna()).all()


def test_no_page_shows_a_parameter_check_as_content(tmp_path):
    """A parameter check stops a typo; it is never the page's answer to what an experiment would take (issue 50:
    "not a practical experiment: parameter seeds=2410 is not allowed")."""
    page = write_index(SHIPPED, output_dir=tmp_path).read_text()
    assert '<h2 id="to-decide">' in page
    pages = [page] + [p.read_text() for p in tmp_path.rglob("*.html") if p.name != "index.html" or p.parent != tmp_path]
    for text in pages:
        assert "is not allowed" not in text and "not a practical experiment" not in text


def test_summary_counts_equal_the_shipped_tables(tmp_path):
    page = write_index(SHIPPED, output_dir=tmp_path).read_text()
    rows = summary_rows(page)
    studies = sorted({p.stem.rsplit("_", 1)[0] for p in (SHIPPED / "notebooks").glob("*.ipynb")})
    assert sorted(rows) == studies
    for study, row in rows.items():
        shown = re.search(r'<div class="meta">(\w+)', row)[1]
        records = ResultsStore(SHIPPED, study, shown).verdict_records()
        assert records is not None, f"{study} {shown}: no typed records"
        assert badge_counts(row) == dict(Counter(expected_classes(records)))
        named = [record for record in records if record["id"] == STUDIES[study[:2]].module.CENTRAL]
        if named:
            assert "shown" in named[0], f"{study} {shown}: records written before they carried their text"
            assert f"<b>{html.escape(named[0]['shown']['ours'])}</b>" in row
        else:  # an older table without the row: no headline badge (never another row's)
            assert "this table has no row of its central claim" in row


def test_sections_show_provenance_verdicts_and_figure(results):
    page = write_index(results).read_text()
    assert page.count('<h2 id="0') == 3  # a section per render (the page's other headings aside)
    assert "claim 0 &lt;0&gt;" in page  # escaped, not raw HTML
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


def test_the_variants_page_sets_each_variants_central_verdict_beside_the_shipped_one(results):
    """Issue 50: a variant reads like a result; its row says what its central claim came to beside the shipped
    verdict. A variant store made of the shipped quick verdict table of study 1, its central row changed as a variant
    of other seeds might change it, beside the shipped table itself; records only, not rendered, and a rendered one.
    (The shipped typed records of study 1 at quick, its central record carrying its row's text.)"""
    here = ResultsStore(results, "01_margin_factorial", "quick")
    shutil.copy(ResultsStore(SHIPPED, "01_margin_factorial", "quick").verdicts_path, here.verdicts_path)
    module = find_study("01").module
    shipped = report.headline_row(report.verdicts(results, "01_margin_factorial", "quick"), module)
    assert shipped is not None and shipped.css != "superseded", "re-render study 1 at quick: its records lack text"
    for variant, verdict in (("seeds-9", "reproduced"), ("m0-0.3", "contradicted")):
        root = results / "variants" / variant
        (root / "tables").mkdir(parents=True)
        (root / "runs" / "01_margin_factorial" / "quick").mkdir(parents=True)
        (root / "runs" / "01_margin_factorial" / "quick" / "0123456789abcdef.json").write_text("{}")
        records = here.verdict_records()
        central = [record for record in records if record["id"] == module.CENTRAL]
        assert len(central) == 1
        central[0].update(verdict=verdict, verdict_text=verdict)
        central[0]["shown"].update(verdict=verdict, ours=f"{verdict} VR")
        ResultsStore(root, "01_margin_factorial", "quick").verdicts_path.write_text(
            json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    rendered = results / "variants" / "m0-0.3" / "notebooks"
    rendered.mkdir()
    shutil.copy(results / "notebooks" / "01_margin_factorial_quick.ipynb", rendered)
    report.write_variants_index(results, results / "variants")
    page = (results / "variants" / "index.html").read_text()
    rows = dict(re.findall(r"<tr><td>([^<]+)</td><td>01_margin_factorial</td>(.*?)</tr>", page, re.S))
    assert set(rows) == {"seeds-9", "m0-0.3"}
    for variant, verdict in (("seeds-9", "reproduced"), ("m0-0.3", "contradicted")):
        cells = re.findall(r"<td>(.*?)</td>", rows[variant], re.S)
        assert f'<span class="badge {verdict}"' in cells[2] and f"ours {verdict} VR" in cells[2]
        assert f'<span class="badge {shipped.css}"' in cells[3] and f"ours {html.escape(shipped.ours)}" in cells[3]
    assert "lib.run_all --only 01" in rows["seeds-9"] and "01_margin_factorial_quick.ipynb" in rows["m0-0.3"]


def test_a_smoke_run_changes_no_shipped_byte(results):
    """The smoke profile checks code paths: its render is left off the page, and git ignores every file a smoke
    run writes (records, tables, dataset facts, figure, renders), so a user's first run leaves the clone clean."""
    shipped = write_index(results).read_bytes()
    shutil.copy(results / "notebooks" / "01_margin_factorial_cpu.ipynb",
                results / "notebooks" / "01_margin_factorial_smoke.ipynb")
    _verdict_table(results, "01_margin_factorial", "smoke", ["inconclusive"])
    assert write_index(results).read_bytes() == shipped
    smoke = "05_flatnce_batch_size_smoke"
    written = ["results/runs/05_flatnce_batch_size/smoke/0123abcd.json", f"results/datasets/{smoke}.json",
               f"results/tables/{smoke}_per_cell.csv", f"results/figures/{smoke}.png",
               f"results/notebooks/{smoke}.ipynb", f"results/notebooks/{smoke}.html",
               f"results/notebooks/{smoke}_report.html"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=PROJECT_ROOT,
                             capture_output=True, text=True).stdout.split()
    assert ignored == written
    kept = subprocess.run(["git", "check-ignore", "--no-index", "results/tables/05_flatnce_batch_size_quick.csv"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert kept.returncode == 1  # a shipped profile's files stay tracked


def test_machines_are_named_and_cells_on_one_machine_only_are_counted():
    from lib.report import machine_statement

    def record(seed, arm, cpu=None, dataset="mnist", kernel_env=None):
        env = {"device": "cpu"} | ({"cpu_model": cpu, "cpu_capability": "AVX2"} if cpu else {})
        env |= {"kernel_env": kernel_env} if kernel_env else {}
        padding = 12 if dataset == "cifar10" else 4  # implied by the dataset: the statement leaves it out
        return {"config": {"seed": seed, "margin_mode": arm, "dataset": dataset, "padding": padding},
                "environment": env}

    assert machine_statement([record(0, "clamp"), record(1, "subtract")]).startswith("machine not recorded")
    assert machine_statement([record(0, "clamp", "A"), record(1, "subtract", "A")]) == "all on A (AVX2)"
    interleaved = [record(s, arm, "A" if s % 2 else "B") for s in range(4) for arm in ("clamp", "subtract")]
    assert machine_statement(interleaved) == ("runs on 2 machines: B (AVX2) 4, A (AVX2) 4; every cell of the design "
                                              "ran on more than one of them")
    split = [record(s, "clamp", "A") for s in range(3)] + [record(s, "subtract", "B") for s in range(2)]
    assert machine_statement(split) == (
        "runs on 2 machines: A (AVX2) 3, B (AVX2) 2; 2 of 2 cells of the design ran on one machine only: those arms "
        "are not balanced across machines (cells by machine: A (AVX2): margin_mode=clamp; B (AVX2): "
        "margin_mode=subtract)")
    # two datasets, each with both arms on one machine, and one arm's seeds split: the cells are named by the
    # fewest settings that vary (dataset, margin_mode; not the padding the dataset implies), so a reader sees
    # that each dataset's arms share a machine but for the split one; kernel variables that held the kernels
    # to an instruction set show in the machine's name
    pinned = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    by_dataset = ([record(s, arm, "A", "cifar10") for s in range(2) for arm in ("clamp", "subtract")]
                  + [record(s, arm, "A", "svhn", pinned) for s in range(2) for arm in ("clamp", "subtract")]
                  + [record(2, "subtract", "A", "cifar10", pinned)])
    b = "A (AVX2, MKL_ENABLE_INSTRUCTIONS=AVX2, ONEDNN_MAX_CPU_ISA=AVX2)"
    assert machine_statement(by_dataset) == (
        f"runs on 2 machines: {b} 5, A (AVX2) 4; 3 of 4 cells of the design ran on one machine only: those arms "
        f"are not balanced across machines (cells by machine: {b}: dataset=svhn margin_mode=clamp, dataset=svhn "
        f"margin_mode=subtract; A (AVX2): dataset=cifar10 margin_mode=clamp; {b} + A (AVX2): dataset=cifar10 "
        "margin_mode=subtract)")


def test_the_readme_lists_each_central_claim_as_the_shipped_tables_say():
    text = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    block = readme_block(text, README_VERDICTS_BEGIN, README_VERDICTS_END)
    assert block == "\n".join(readme_verdict_lines(SHIPPED)) + "\n", "run python -m lib.report --readme"
    assert block.count("\n- **") + block.startswith("- **") == len(STUDIES)


@pytest.mark.parametrize("number,profile,expected", [("01", "cpu", "CIFAR-10 (9,000 training images)"),
                                                     ("06", "cpu", "MNIST (5,000 training images)")])
def test_a_notebooks_first_line_says_the_training_images_the_index_says(number, profile, expected):
    """Issue 50: the notebooks said 10,000 training images (the size of the split) where the report and the README
    said 9,000 (what CFF's runs train on, 10% held out; study 6's students train on 5,000 of MNIST's). Both now read
    the shipped records' train_images (lib.run.datasets.training_images); a first screen set up over the shipped
    store, nothing loaded and nothing run."""
    from lib.notebook import Setup
    from lib.run import datasets
    from lib.run.results import ResultsStore
    from lib.studies.variants import notebook_defaults, unfinished

    study = STUDIES[number]
    settings = study.module.resolve({**notebook_defaults(study), "profile": profile})
    configs = study.module.plan(settings)
    store = ResultsStore(SHIPPED, study.name, profile)
    to_train = unfinished([store], configs, settings)
    setup = Setup(study, settings, configs, store, None, datasets=datasets.recorded(store), to_train=to_train)
    assert expected in setup.first_screen()
    shown = report.training_images(SHIPPED, study.name, profile)
    assert f"{shown[-1]:,} training images" in expected


def test_the_summary_names_the_scale_each_verdict_speaks_for(results):
    """The index's first screen: under each study its profile's training images (from the records) and the settings
    its module names in SCALE, from the profile, so a verdict at our scale is never read as one about the paper's."""
    from lib.report import scale, training_images

    module = STUDIES["01"].module
    assert scale(module, "cpu", [9000]) == ("training images 9,000; dataset cifar10; layers 4; embed dim 64; "
                                            "epochs 8; batch size 512; seeds 7")
    assert scale(module, "cpu").startswith("dataset cifar10")  # no records: the settings alone
    store = results / "runs" / "01_margin_factorial" / "cpu"
    store.mkdir(parents=True, exist_ok=True)
    for i, n in enumerate((300, 300, 1200)):
        (store / f"r{i}.json").write_text(json.dumps({"metrics": {"train_images": n}}))
    assert training_images(results, "01_margin_factorial", "cpu") == [300, 1200]
    row = summary_rows(write_index(results).read_text())["01_margin_factorial"]
    assert '<div class="meta scale">training images 300, 1,200; dataset cifar10;' in row


def test_the_readme_names_every_claim_read_at_an_operating_point_the_central_one_first():
    """Issue 49: the README says what the operating points decided. Rows of a declared operating point (an id
    "<claim>@<point>") are listed, the central claim's first and as "its" point, another claim by name; a bracket
    that is no operating point (study 5's arm names: a part of the id after ":"), a point the module does not declare
    and a check are not."""
    module = SimpleNamespace(OPERATING_POINTS={"car-matched": {"epochs": 2}}, CENTRAL="s1.vr")
    frame = pd.DataFrame({"id": ["s1.vr", "s1.means@car-matched", "s1.vr@car-matched", "s5.gain:flat",
                                 "s1.car@car-matched", "s1.vr@elsewhere"],
                          "quantity": ["VR = Var(clamp) of top-1", "[car-matched: epochs 2] mean difference",
                                       "[car-matched: epochs 2] VR = Var(clamp) of top-1", "[FLAT's rule] gain",
                                       "[car-matched: epochs 2] CAR", "[elsewhere: epochs 9] VR = Var(clamp) of top-1"],
                          "ours": ["0.3 [0.1, 4]", "2 [0.2, 3.9]", "1.1 [0.4, 3.4]", "1 [0, 2]", "53 [52, 54]",
                                   "0.9 [0.2, 5]"],
                          "verdict": ["not in the paper's regime", "inconclusive", "inconclusive", "inconclusive",
                                      "check", "inconclusive"],
                          "kind": ["claim", "claim", "claim", "claim", "check", "claim"]})
    assert [is_central(claim_id, module) for claim_id in frame["id"]] == [True, False, True, False, False, False]
    rows = report.operating_point_rows(frame, module)
    assert list(rows["id"]) == ["s1.vr@car-matched", "s1.means@car-matched"]
    sentences = [report.operating_point_sentence(row, module) for row in rows.itertuples()]
    assert sentences == [" At its operating point [car-matched: epochs 2]: 1.1 [0.4, 3.4], *inconclusive*.",
                         " At the operating point [car-matched: epochs 2], mean difference: 2 [0.2, 3.9], "
                         "*inconclusive*."]
    for none in (SimpleNamespace(CENTRAL="s1.vr", OPERATING_POINTS={}), SimpleNamespace(CENTRAL="s1.vr")):
        assert report.operating_point_rows(frame, none).empty  # a study with none


def test_the_cost_table_counts_every_record_and_the_decided_claims_of_the_typed_records(tmp_path):
    """Per study at its summary profile: every record under its runs folder (extensions and searches included), their
    wall hours, and the tested claims whose typed verdict answers the paper's claim; counted here from the files."""
    page = write_index(SHIPPED, tmp_path)
    section = page.read_text()[page.read_text().index('<h2 id="cost">'):]
    section = section[:section.index("</table>")]
    rows = re.findall(r"<tr><td>(\d\d[^<]*) · (\w+)</td><td>(\d+)</td><td>([^<]+)</td><td>(\d+) of (\d+)</td>"
                      r"<td>(yes|no)</td>", section)
    assert len(rows) == 6
    for name, profile, runs, hours, decided, claims, central in rows:
        study = name.replace(" ", "_")
        paths = list((SHIPPED / "runs" / study / profile).rglob("*.json"))
        seconds = sum(json.loads(p.read_text())["timings"]["wall_s"] for p in paths)
        assert int(runs) == len(paths) and float(hours) == pytest.approx(seconds / 3600, rel=1e-2)
        typed = [r for r in json.loads((SHIPPED / "tables" / f"{study}_{profile}_verdicts.json").read_text())
                 if r["kind"] == "claim"]
        answered = [r for r in typed if r["verdict"] in ("reproduced", "reproduced, smaller", "contradicted",
                                                         "not reproduced")]
        assert (int(decided), int(claims)) == (len(answered), len(typed))
        module = report.study_module(study)
        assert (central == "yes") == any(is_central(r["id"], module) for r in answered)
    assert f"Central claims decided: {sum(r[-1] == 'yes' for r in rows)} of 6." in section


def test_each_claim_row_links_the_run_records_of_its_cells(tmp_path):
    """A claim row of the page links its entry on the study's records page; there every listed record exists, and
    the seeds listed are at least the seeds per arm the claim's verdict counts (the cells hold the runs it read)."""
    page = write_index(SHIPPED, tmp_path).read_text()
    for study in ("01_margin_factorial", "04_embedding_norms"):
        listing = tmp_path / "records" / f"{study}_cpu.html"
        text = listing.read_text()
        typed = json.loads((SHIPPED / "tables" / f"{study}_cpu_verdicts.json").read_text())
        anchors = re.findall(rf'href="records/{study}_cpu\.html#claim-(\d+)">runs</a>', page)
        assert anchors and len(set(anchors)) == len(anchors)
        for anchor in anchors:
            record = typed[int(anchor)]
            entry = text[text.index(f'<h2 id="claim-{anchor}">'):]
            entry = entry[:entry.index("</ul>")]
            targets = [(listing.parent / link).resolve() for link in re.findall(r'<li><a href="([^"]+)"', entry)]
            assert targets and all(t.exists() for t in targets)
            seeds = {json.loads(t.read_text())["config"]["seed"] for t in targets}
            assert record["cells"] and len(seeds) >= max(record["n"]), (study, record["quantity"])
