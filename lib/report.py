"""One page over every study: ``results/index.html``.

    python -m lib.report                      # from results/ as the notebooks left it
    python -m lib.report --results-dir other

For each rendered notebook ``results/notebooks/<study>_<profile>.ipynb`` the page shows the study's
paper-vs-reproduced table (``results/tables/<study>_<profile>_paper_vs_reproduced.csv``: our number,
theirs, the evidence tag, the verdict), its key figure (the image output of the cell tagged
``key-figure``, else the notebook's first image, written to ``results/figures/``), where it came
from (profile, datasets, git commit of its runs) and links to the rendered notebook. Variants (runs
with other parameters than their profile's, under ``results/variants/<variant>/``) are not the
project's results: they are listed after every study, in a section of their own, with links to their
renders. The page is static HTML with relative links and no script, so it opens from a file system or any web server.
"""
from __future__ import annotations

import argparse
import base64
import html
import re
import sys
from pathlib import Path

import nbformat
import pandas as pd

from lib import PROJECT_ROOT
from lib.results import VARIANTS_DIR, atomic_write_text

RENDERED = re.compile(r"^(?P<study>\d\d_[a-z0-9_]+?)_(?P<profile>smoke|quick|cpu|paper)$")
PROFILE_ORDER = ("paper", "cpu", "quick", "smoke")  # the strongest evidence first

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.5rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } img { max-width: 100%; border: 1px solid #eee; }
.meta { color: #555; font-size: 0.9rem; } .verdict { max-width: 32rem; }
"""


def rendered_notebooks(results: Path) -> list[tuple[str, str, Path]]:
    """(study, profile, path) of every rendered notebook, by study, strongest profile first."""
    found = []
    for path in (results / "notebooks").glob("*.ipynb"):
        match = RENDERED.match(path.stem)
        if match:
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


def variants_section(results: Path) -> str:
    """The variants, apart from the studies' results: one row each, linking its render."""
    rows = []
    for variant, study, profile, notebook in variant_renders(results):
        meta = provenance(notebook.parents[1], study, profile)
        link = notebook.with_suffix(".html") if notebook.with_suffix(".html").exists() else notebook
        rows.append(f"<tr><td>{html.escape(variant)}</td><td>{html.escape(study)}</td><td>{profile}</td>"
                    f"<td>{meta.get('runs', '')}</td>"
                    f'<td><a href="{html.escape(link.relative_to(results).as_posix())}">'
                    f'{html.escape(link.name)}</a></td></tr>')
    if not rows:
        return ""
    return ('<h2 id="variants">Variants: experiments with other parameters, not the shipped results</h2>\n'
            f'<p class="meta">Runs whose parameters differ from their profile\'s, written under '
            f'<code>{VARIANTS_DIR}/&lt;variant&gt;/</code> (not versioned). Their verdicts are in their renders.</p>\n'
            "<table><tr><th>variant</th><th>study</th><th>profile</th><th>runs</th><th>render</th></tr>"
            + "".join(rows) + "</table>")


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
    """Datasets, commits and run count of the study's run table (empty when it has none)."""
    table = results / "tables" / f"{study}_{profile}.csv"
    if not table.exists():
        return {}
    runs = pd.read_csv(table)

    def distinct(column):
        return sorted(str(v) for v in runs[column].dropna().unique()) if column in runs else []

    dirty = bool(runs["git_dirty"].astype(str).str.lower().eq("true").any()) if "git_dirty" in runs else False
    return {"runs": len(runs), "datasets": distinct("dataset"), "commits": [c[:10] for c in distinct("git_commit")],
            "dirty": dirty}


def verdict_table(results: Path, study: str, profile: str) -> str:
    path = results / "tables" / f"{study}_{profile}_paper_vs_reproduced.csv"
    if not path.exists():
        return "<p>No paper-vs-reproduced table was written for this run.</p>"
    frame = pd.read_csv(path, dtype=str).fillna("")
    columns = [c for c in ("quantity", "ours", "paper", "evidence", "verdict") if c in frame]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = "".join(
        "<tr>" + "".join(f'<td class="{c}">{html.escape(row[c])}</td>' for c in columns) + "</tr>"
        for _, row in frame.iterrows())
    return f"<table><tr>{head}</tr>{rows}</table>"


def section(results: Path, study: str, profile: str, notebook: Path) -> str:
    figure = key_figure(notebook, results / "figures" / f"{study}_{profile}.png")
    meta = provenance(results, study, profile)
    links = [f'<a href="notebooks/{notebook.name}">{notebook.name}</a>']
    rendered_html = notebook.with_suffix(".html")
    if rendered_html.exists():
        links.insert(0, f'<a href="notebooks/{rendered_html.name}">rendered notebook</a>')
    facts = [f"profile <b>{profile}</b>"]
    if meta:
        facts.append(f"{meta['runs']} runs")
        facts.append("data " + ", ".join(html.escape(d) for d in meta["datasets"]))
        commits = ", ".join(meta["commits"]) or "unknown"
        facts.append(f"commit {commits}" + (" (with uncommitted changes)" if meta["dirty"] else ""))
    parts = [f'<h2 id="{study}_{profile}">{html.escape(study)} · {profile}</h2>',
             f'<p class="meta">{" · ".join(facts)} · {" · ".join(links)}</p>',
             verdict_table(results, study, profile)]
    if figure is not None:
        parts.append(f'<img src="figures/{figure.name}" alt="key figure of {html.escape(study)} ({profile})">')
    return "\n".join(parts)


def write_index(results_dir: str | Path = "results") -> Path:
    """Render ``<results>/index.html`` (and its figures) from what the notebooks wrote; return its path."""
    results = Path(results_dir)
    if not results.is_absolute():
        results = PROJECT_ROOT / results
    found = rendered_notebooks(results)
    contents = "".join(f'<li><a href="#{s}_{p}">{html.escape(s)} · {p}</a></li>' for s, p, _ in found)
    body = "\n".join(section(results, s, p, nb) for s, p, nb in found) or "<p>No rendered notebooks yet.</p>"
    variants = variants_section(results)
    if variants:  # after every study's results, never among them
        contents += '<li><a href="#variants">variants (not the shipped results)</a></li>'
        body += "\n" + variants
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Contrastive training dynamics: paper vs reproduced</title>
<style>{STYLE}</style></head>
<body><h1>Paper vs reproduced</h1>
<p class="meta">Every study's verdicts, from the tables its notebook wrote. Evidence tags as in STUDIES.md:
[paper] the paper's text, [code] its public code, [summary] secondary summaries, [ours] our decision.</p>
<ul>{contents}</ul>
{body}
</body></html>
"""
    index = results / "index.html"
    atomic_write_text(index, page)
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    args = parser.parse_args(argv)
    print(write_index(args.results_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
