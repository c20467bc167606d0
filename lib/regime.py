"""The regime searches of the CFF studies: can a setting we can afford bring a claim into the paper's regime?

    python -m lib.regime --profile cpu --data-root ../shared/data        # run what is missing, write the table
    python -m lib.regime --profile cpu --dry-run                         # the runs, and which are recorded
    python -m lib.regime --study 02 --profile cpu --data-root ../shared/data   # study 2's ease search

The CFF papers say clamping inflates the seed-to-seed variance where layer-0 CAR is at least 50% [summary]; at
cpu our clamp arm ends at 32%, so studies 1-3's variance-inflation claims are *not in the paper's regime* and
``lib.decide`` does not spend seeds on them. This command trains study 1's clamp arm once per change of
``margin_factorial.REGIME_SEARCH`` (one seed each, at the profile's length), records the runs like any run
(``results/runs/01_margin_factorial/<profile>/regime_search/``) and writes
``results/tables/01_margin_factorial_<profile>_regime_search.csv``: the CAR each setting reached, its cost, and
whether it reaches 50%. The report shows the table. A setting that reaches the regime on one seed is a
candidate for an operating point, not a verdict.

``--study 02`` runs study 2's ease search instead (``cross_dataset.REGIME_SEARCH``): the paper explains the
reversals of SVHN and Fashion-MNIST by the task's ease (≈ 97% and ≈ 92%), so each setting's accuracy is read against
the paper's, within ``common.EASE_TOLERANCE``. ``--study 03`` runs the sweep's levels at study 2's longer length
and at 1 and 2 epochs (the CAR is high early); ``--study 05`` looks for FlatNCE's small-batch regime, where
InfoNCE's gradient factor 1 - e^(-InfoNCE) falls to at most 0.7 (``flatnce_batch.REGIME_SEARCH``). A study's
search lives in its module: ``regime_search_configs`` and ``regime_table``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lib.core.params import PROFILE_METAVAR, profile_option
from lib.run.results import FINISHED_STATUSES
from lib.run.sweep import run_sweep
from lib.studies import find_study
from lib.studies.variants import open_store, resolve_command

PART = "regime_search"  # the store part and the table's name
SEARCHES = ("01", "02", "03", "05")  # the studies whose module declares a regime search


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", default="01", choices=SEARCHES, help="whose search (default: study 1's)")
    parser.add_argument("--profile", default="cpu", type=profile_option, metavar=PROFILE_METAVAR)
    parser.add_argument("--data-root", help="folder of <name>.npz arrays (else $DATA_ROOT, then torchvision's cache)")
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    parser.add_argument("--workers", type=int, default=2, help="processes")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    args = parser.parse_args(argv)
    data_root = str(Path(args.data_root).resolve()) if args.data_root else None
    study = find_study(args.study)
    settings, _ = resolve_command(study, profile=args.profile, parameters={}, data_root=data_root,
                                  results_dir=args.results_dir)
    configs = study.module.regime_search_configs(settings)
    store, _ = open_store(study, settings, configs, args.results_dir, None, PART)
    missing = [c for c in configs if not store.is_finished(c)]
    print(f"regime search {study.name} [{args.profile}]: {len(configs)} runs, {len(missing)} to run", flush=True)
    if args.dry_run:
        return 0
    records = run_sweep(store, configs, study.train_fn, workers=args.workers, data_root=data_root, progress=True)
    shipped, _ = open_store(study, settings, [], args.results_dir, None)
    finished = [r for r in shipped.records() if r["status"] in FINISHED_STATUSES]
    table = study.module.regime_table([r for r in records if r["status"] in FINISHED_STATUSES],
                                      study.module.runs_frame(finished), settings)
    path = shipped.write_frame(PART, table)
    print(table.to_string(index=False))
    print(f"table: {path}")
    return 0 if all(r["status"] in FINISHED_STATUSES for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
