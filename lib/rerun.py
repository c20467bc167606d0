"""Re-run exactly one recorded run: the command every record carries in ``extra.rerun``.

    python -m lib.rerun results/runs/01_margin_factorial/cpu/3f2a....json   # from a record
    python -m lib.rerun --train lib.cff.training.train_cff --config '{"seed": 0, ...}' --data-root ../shared/data
    python -m lib.rerun --check results/runs/01_margin_factorial/cpu/3f2a....json --data-root ../shared/data

The run's metrics are printed as JSON; nothing is written to the results store. For the numbers to
match, check out the record's ``environment.git_commit`` first (a record with ``git_dirty`` true was
made from uncommitted code). Given a record, it first prints (on stderr) the machine the record was
made on beside this one, and the agreement to expect: bit for bit only where the numerics agree (CPU
model and capability, kernel variables, BLAS, oneDNN, torch, numpy, threads:
``lib.run.provenance.NUMERICS_KEYS``); elsewhere float32 kernels round differently and training carries that
further (docs/notes/portability.md). ``--data-root`` is a property of the machine, not of the run.
``--check`` trains nothing: it builds the run's typed config (``lib.core.config.build``) and loads the data
it names, so that it shows in seconds whether the record would re-run here.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from lib.core.config import build, call
from lib.run import datasets
from lib.run.provenance import (
    NUMERICS_KEYS,
    environment,
    load_train_function,
    numerics_differences,
    train_function_name,
)


def dry_run(train_fn: Callable, config: dict, data_root: str | None = None) -> str:
    """Build ``config`` for ``train_fn`` and load the datasets it names, training nothing; a one-line summary."""
    typed = build(train_fn, config)
    sources = datasets.load_datasets([typed], data_root)
    data = "; ".join(f"{label}: {source}" for label, source in sources.items()) or "no dataset"
    return f"ok: {train_function_name(train_fn)}({type(typed).__name__}); data {data}"


def expected_agreement(recorded: dict, here: dict) -> str:
    """The record's machine beside this one (``recorded`` and ``here``: ``lib.run.provenance.environment()``
    dicts), one key a line, and a last line saying what agreement a re-run here can be expected to show."""
    width = max(map(len, NUMERICS_KEYS))
    lines = [f"{'':{width}}  {'recorded':<28}  here"]
    for key in NUMERICS_KEYS:
        mark = "" if recorded.get(key) == here.get(key) else "   <- differs"
        lines.append(f"{key:{width}}  {str(recorded.get(key, 'not recorded')):<28}  {here.get(key)}{mark}")
    unrecorded = [key for key in NUMERICS_KEYS if key not in recorded]
    differences = numerics_differences(recorded, here, keys=[key for key in NUMERICS_KEYS if key in recorded])
    if differences:
        lines.append(f"expect: not bit for bit ({len(differences)} numerics differ). float32 kernels round differently "
                     "here; a stable run agrees to about 1e-4 relative, a short or chaotic one (few steps, near "
                     "chance) can move as far as a change of seed: compare with the spread of the record's seeds, "
                     "not with its single numbers (docs/notes/portability.md).")
    elif unrecorded:
        lines.append(f"expect: not known; the record predates {', '.join(unrecorded)}. Where those agree, bit for "
                     f"bit at the record's commit {recorded.get('git_commit')}; where they differ, as far as float32 "
                     "rounding carries a run (docs/notes/portability.md).")
    elif recorded.get("git_dirty") or recorded.get("git_commit") != here.get("git_commit"):
        lines.append(f"expect: bit for bit at the record's commit {recorded.get('git_commit')}"
                     f"{' (made from uncommitted changes: not guaranteed)' if recorded.get('git_dirty') else ''}; "
                     f"this tree is at {here.get('git_commit')}{' with changes' if here.get('git_dirty') else ''}.")
    else:
        lines.append("expect: bit for bit (the same numerics and the record's commit).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("record", nargs="?", help="a run record (JSON); its train function and config are used")
    parser.add_argument("--train", help="module.function that trains one run, e.g. lib.cff.training.train_cff")
    parser.add_argument("--config", help="the run's config as JSON")
    parser.add_argument("--data-root", help="folder of <name>.npz arrays (else $DATA_ROOT, then torchvision's cache)")
    parser.add_argument("--check", action="store_true", help="build the config and load its data; train nothing")
    args = parser.parse_args(argv)
    if args.record:
        record = json.loads(open(args.record, encoding="utf-8").read())
        train, config = record["extra"].get("train"), record["config"]
        if train is None:
            parser.error(f"{args.record} names no train function (recorded before provenance was kept)")
        print(expected_agreement(record["environment"], environment()), file=sys.stderr)
    elif args.train and args.config:
        train, config = args.train, json.loads(args.config)
    else:
        parser.error("give a record file, or --train and --config")
    if args.check:
        print(dry_run(load_train_function(train), config, args.data_root))
        return 0
    metrics = call(load_train_function(train), config, data_root=args.data_root, progress=False)
    print(json.dumps(metrics, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
