"""The main job: execute every notebook with papermill, render it to HTML, update the tables.

    python -m lib.run_all                      # every notebook, quick profile, embedded data
    python -m lib.run_all --profile cpu --data-root ../shared/data --only 01

Rendered notebooks go to results/notebooks/<notebook>_<profile>.{ipynb,html}; each notebook writes
its own records and tables under results/. The job ends by writing results/index.html, every
study's paper-vs-reproduced verdicts on one page (lib.report).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
import papermill
from nbconvert import HTMLExporter

from lib import PROJECT_ROOT
from lib.params import PROFILE_NAMES
from lib.report import write_index

NOTEBOOKS = PROJECT_ROOT / "notebooks"


def notebooks(only: list[str] | None = None) -> list[Path]:
    """The project's notebooks in order, optionally those whose name starts with one of ``only``."""
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [nb for nb in found if any(nb.name.startswith(o) for o in only)]
    return found


def render(notebook: Path, *, profile: str, results_dir: str = "results", parameters: dict | None = None,
           output_dir: Path | None = None) -> Path:
    """Execute one notebook with papermill and write its .ipynb and .html; return the HTML path."""
    output_dir = output_dir or PROJECT_ROOT / results_dir / "notebooks"
    output_dir.mkdir(parents=True, exist_ok=True)
    executed = output_dir / f"{notebook.stem}_{profile}.ipynb"
    papermill.execute_notebook(str(notebook), str(executed), cwd=str(PROJECT_ROOT), kernel_name="python3",
                               parameters={"profile": profile, "results_dir": results_dir, **(parameters or {})},
                               progress_bar=False)
    html, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
    html_path = executed.with_suffix(".html")
    html_path.write_text(html, encoding="utf-8")
    return html_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="quick", choices=PROFILE_NAMES)
    parser.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 03")
    parser.add_argument("--data-root", help="folder of <name>.npz arrays (else $DATA_ROOT, then torchvision's cache)")
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    args = parser.parse_args(argv)
    selected = notebooks(args.only)
    if not selected:
        parser.error(f"no notebook matches --only {args.only}; have: {[nb.name for nb in notebooks()]}")
    extra = {"data_root": str(Path(args.data_root).resolve())} if args.data_root else {}
    for nb in selected:
        t0 = time.perf_counter()
        html = render(nb, profile=args.profile, results_dir=args.results_dir, parameters=extra)
        shown = html.relative_to(PROJECT_ROOT) if html.is_relative_to(PROJECT_ROOT) else html
        print(f"{nb.name}: {time.perf_counter() - t0:.0f} s -> {shown}", flush=True)
    print(f"report: {write_index(args.results_dir)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
