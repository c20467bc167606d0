"""Every study's coverage at a profile: how much of its plan is recorded, and whether its shipped tables are
today's (``lib.studies.coverage`` says what each word means).

    python -m lib.coverage                  # every study's cpu profile: one line each
    python -m lib.coverage --profile quick
    python -m lib.coverage --readme         # rewrite the README's block of these lines
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lib.report import write_readme_block
from lib.studies import STUDIES
from lib.studies.coverage import coverage

README_BEGIN = "<!-- coverage: begin (python -m lib.coverage --readme) -->"
README_END = "<!-- coverage: end -->"


def readme_lines(profile: str = "cpu", results_dir: str | Path = "results") -> list[str]:
    """One README line per study: its banner, or that its shipped tables are today's plan."""
    lines = []
    for study in STUDIES.values():
        c = coverage(study, profile, results_dir)
        lines.append(f"- `{study.notebook}`: " + (c.banner() or f"{profile} tables at today's settings "
                                                              f"({c.planned} runs)."))
    return lines


def write_readme(profile: str = "cpu") -> None:
    write_readme_block(readme_lines(profile), README_BEGIN, README_END)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--readme", action="store_true", help="rewrite the README's coverage block")
    args = parser.parse_args(argv)
    if args.readme:
        write_readme(args.profile)
    print("\n".join(readme_lines(args.profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
