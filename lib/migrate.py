"""Upgrade the records of a results folder to today's schema (``lib.run.results.SCHEMA_VERSION``).

    python -m lib.migrate                 # every study and profile under results/
    python -m lib.migrate --results-dir my_results

For each record: its training function (``extra.train``; for records written before it was kept, the
study's training function; renamed functions through ``lib.run.provenance.RENAMED``), its config in today's form
(``config_class(train).from_legacy``), the run id that config hashes to, and the command that re-runs
it. Metrics, timings and environment stay as they were, and each collected table is rewritten from the
upgraded records. Repeating it changes nothing. A run is never re-run: its id is migrated instead.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from lib import PROJECT_ROOT
from lib.core.config import as_dict, build
from lib.run.provenance import load_train_function, rerun_command, train_function_name
from lib.run.results import ResultsStore
from lib.studies import STUDIES


def _data_root(rerun: str | None) -> str | None:
    words = shlex.split(rerun or "")
    return words[words.index("--data-root") + 1] if "--data-root" in words else None


def upgrader(default_train: str):
    """``upgrade(record) -> (config, extra)`` for ``ResultsStore.migrate``."""
    def upgrade(record: dict) -> tuple[dict, dict]:
        train = record["extra"].get("train") or default_train
        train_fn = load_train_function(train)
        config = as_dict(build(train_fn, record["config"], legacy=True))
        return config, {"train": train_function_name(train_fn),
                        "rerun": rerun_command(train_fn, config, _data_root(record["extra"].get("rerun")))}
    return upgrade


def migrate(results_dir: str | Path = "results") -> dict[str, int]:
    """Migrate every study's records under ``results_dir``; the number rewritten per store."""
    root = PROJECT_ROOT / results_dir
    counts = {}
    for study in STUDIES.values():
        name = study.module.STUDY
        for folder in sorted((root / "runs" / name).glob("*/")):
            store = ResultsStore(root, name, folder.name)
            changed = store.migrate(upgrader(train_function_name(study.train_fn)))
            if changed or not store.table_path.exists():
                store.write_table()
            counts[f"{name}/{folder.name}"] = len(changed)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    args = parser.parse_args(argv)
    for store, n in migrate(args.results_dir).items():
        print(f"{store}: {n} records upgraded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
