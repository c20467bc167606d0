"""Issue 57: the HTML copies lib.render writes load nothing from the network (no script, stylesheet or font)."""
import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from lib import PROJECT_ROOT, render

NETWORK = re.compile(r"\s*(https?:)?//", re.IGNORECASE)  # http://, https:// and protocol-relative //host
LOADING = {"script": "src", "link": "href", "img": "src", "iframe": "src", "source": "src", "audio": "src",
           "video": "src", "embed": "src", "object": "data"}  # the attribute each tag fetches as the page opens
# In CSS, @import and url() fetch (stylesheets, fonts, images); a URL in a comment does not.
CSS_LOAD = re.compile(r"""@import\s+(?:url\(\s*)?["']?\s*(?:https?:)?//[^;]*|url\(\s*["']?\s*(?:https?:)?//[^)]*\)""",
                      re.IGNORECASE)
# In a script, a URL string is what it would load: nbconvert's MathJax, mermaid and widget loaders build their tags
# or import() calls from one.
SCRIPT_LOAD = re.compile(r"""["'`]https?://[^"'`\s]*""", re.IGNORECASE)


class NetworkLoads(HTMLParser):
    """Collects what an HTML page would fetch from the network: the ``src``/``href`` of tags that load
    (:data:`LOADING`; ``<a href>`` is a link a reader may follow, not a load), @import and url() in stylesheets and
    style attributes, and URL strings inside scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.inside: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        name = LOADING.get(tag)
        if name and NETWORK.match(attrs.get(name) or ""):
            self.found.append(f"<{tag} {name}={attrs[name]}>")
        self.found += CSS_LOAD.findall(attrs.get("style") or "")
        self.inside = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag):
        self.inside = None

    def handle_data(self, data):
        if self.inside == "style":
            self.found += CSS_LOAD.findall(data)
        elif self.inside == "script":
            self.found += SCRIPT_LOAD.findall(data)


def network_loads(html: str) -> list[str]:
    """What the page ``html`` would fetch from the network, as found (empty: it opens offline as it is)."""
    parser = NetworkLoads()
    parser.feed(html)
    parser.close()
    return parser.found


def shipped_network_loads(folder: Path = PROJECT_ROOT / "results" / "notebooks") -> dict[str, list[str]]:
    """``{file name: network_loads}`` of every rendered notebook HTML in ``folder`` that loads anything. After
    re-rendering (``python -m lib.run_all``), check the shipped ones with
    ``python -m pytest -p no:xdist tests/test_offline_reports.py -k shipped``."""
    loads = {path.name: network_loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.html"))}
    return {name: found for name, found in loads.items() if found}


# nbconvert's head before issue 57, abridged: what the checker must find, and what it must leave alone
OLD_HEAD = """<html><head><script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>
<style>/* https://github.com/danlevan/google-material-color */ @import url("https://fonts.example/x.css");
@font-face { src: url(//fonts.example/f.woff2); } .a { background: url(data:image/png;base64,AAAA); }</style>
<link rel="stylesheet" href="https://cdn.example/lab.css"><link rel="icon" href="favicon.ico">
<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe"> </script>
<script type="module">const m = (await import("https://cdnjs.cloudflare.com/ajax/libs/mermaid/m.mjs")).default;
// see https://developer.mozilla.org/ in a comment</script></head>
<body><a href="https://arxiv.org/abs/2002.05709">the paper</a><img src="data:image/png;base64,AAAA"></body></html>"""


def test_the_checker_finds_each_kind_of_network_load_and_leaves_links_and_comments_alone():
    found = network_loads(OLD_HEAD)
    assert found == [
        "<script src=https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js>",
        '@import url("https://fonts.example/x.css")', "url(//fonts.example/f.woff2)",
        "<link href=https://cdn.example/lab.css>",
        "<script src=https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe>",
        '"https://cdnjs.cloudflare.com/ajax/libs/mermaid/m.mjs']


def small_executed_notebook() -> nbformat.NotebookNode:
    """An executed notebook as papermill leaves one, without a kernel: a title with LaTeX math and a link, a code
    cell with a prompt, a printed line and a PNG figure, and a findings table (tagged, moved under the title)."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()  # a PNG's signature: the page only embeds it
    title = nbformat.v4.new_markdown_cell(
        "# Study 0: offline\nThe temperature $\\tau$ scales $$\\frac{s}{\\tau}$$; see "
        "[the paper](https://arxiv.org/abs/2002.05709).", id="title")
    code = nbformat.v4.new_code_cell("print('loss')\nfigure()", id="code", execution_count=1, outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="loss 0.5\n"),
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})])
    findings = nbformat.v4.new_code_cell("paper_vs_reproduced()", id="findings", execution_count=2, outputs=[
        nbformat.v4.new_output("display_data", data={"text/html": "<table><tr><td>reproduced</td></tr></table>",
                                                     "text/plain": "reproduced"})])
    findings.metadata["tags"] = [render.FINDINGS]
    return nbformat.v4.new_notebook(cells=[title, code, findings])


def test_both_html_copies_of_a_render_load_nothing_from_the_network(tmp_path):
    """The reader's copy and the code-free report, written by lib.render.write_renders as lib.execute does after
    papermill, and by lib.render.stamp (a coverage banner put on a shipped render): no script, stylesheet or font
    from the network; the LaTeX source shows as plain text, the link to the paper stays a link."""
    executed = tmp_path / "00_offline_quick.ipynb"
    nbformat.write(small_executed_notebook(), executed)
    _, full, report = render.write_renders(executed, executed)
    assert report.name == f"00_offline_quick{render.REPORT_SUFFIX}.html"
    pages = {full.name: full.read_text(encoding="utf-8"), report.name: report.read_text(encoding="utf-8")}
    changed = render.stamp(executed, "Not the plan of today.")
    assert set(changed) == {executed, full, report}
    pages |= {f"stamped {path.name}": path.read_text(encoding="utf-8") for path in (full, report)}
    for name, page in pages.items():
        assert network_loads(page) == [], name
        assert "<script" not in page and "<link" not in page, name  # none is needed: CSS and figures are inline
        assert "$\\tau$" in page and 'href="https://arxiv.org/abs/2002.05709"' in page, name
        assert page.index('celltag_findings"') < page.index("<img ") and 'src="data:image/png;base64,' in page, name
    assert "loss 0.5" in pages[full.name] and "print" in pages[full.name]
    assert 'class="highlight' not in pages[report.name]  # the report's copy still has no code
    assert all("Not the plan of today." in pages[f"stamped {path.name}"] for path in (full, report))


# The shipped renders predate issue 57 until lib.run_all renders them again: those still carry nbconvert's CDN script
# tags. They are left out (skipped, named); every other shipped HTML copy must load nothing from the network.
def test_the_shipped_html_copies_load_nothing_from_the_network():
    shipped = sorted((PROJECT_ROOT / "results" / "notebooks").glob("*.html"))
    assert shipped
    loads = shipped_network_loads()
    stale = sorted(name for name, found in loads.items() if any(f.startswith("<script src=") for f in found))
    assert {name: found for name, found in loads.items() if name not in stale} == {}
    if stale:
        pytest.skip(f"{len(stale)} of {len(shipped)} shipped HTML copies still load nbconvert's CDN scripts "
                    f"(e.g. {stale[0]}): rendered before issue 57; re-render them (python -m lib.run_all), "
                    "then this test checks every one")
