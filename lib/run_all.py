"""The main job: execute every notebook with papermill, render it to HTML, update the tables.

    python -m lib.run_all                      # every notebook, quick profile, embedded data
    python -m lib.run_all --profile cpu --data-root ../shared/data --only 01
    python -m lib.run_all --only 01 -p seeds 3 -p m0 0.3        # a variant: results/variants/m0-0.3_seeds-3/

Rendered notebooks go to results/notebooks/<notebook>_<profile>.{ipynb,html}; each notebook writes
its own records and tables under results/. Parameters that change a profile's settings (``-p``) make
a variant, by the notebooks' own rule (``lib.studies.variants.variant_of``; ``--variant`` names it): its
records, tables and renders go under results/variants/<variant>/ and the shipped ones are not touched.
Every parameter name is checked against each selected notebook before anything runs.

While a notebook executes, its stderr streams here: the progress of its runs (``lib.core.progress``).
A notebook is executed into a temporary file and moved into place with its HTML only when it
succeeded (``lib.execute``), so a failed run never replaces a good render: it is kept in <renders>/failed/, where
the report does not look; the job goes on with the other notebooks and exits non-zero, naming each
failure. The job ends by writing results/index.html (lib.report).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lib import PROJECT_ROOT
from lib.core import dataset_facts
from lib.core.params import PROFILE_METAVAR, ParameterError, profile_option
from lib.dispatch import parse_value
from lib.execute import FAILED, NOTEBOOKS, notebooks, render
from lib.report import write_index
from lib.run import datasets
from lib.run.results import ResultsStore, variant_root
from lib.studies import STUDIES
from lib.studies.study import Study
from lib.studies.variants import RESERVED, check_data, relative, resolve_command, unfinished


@dataclass(frozen=True)
class Job:
    """One notebook to render: its parameters as papermill passes them, and where its render goes."""

    notebook: Path
    parameters: dict
    output_dir: Path
    variant: str | None


def plan_job(study: Study, *, profile: str, results_dir: str, parameters: dict, variant: str | None = None,
             data_root: str | None = None, download: bool = False) -> Job:
    """Check the parameters as the notebook will (names, values) and decide canonical or variant. No compute."""
    _, name = resolve_command(study, profile=profile, parameters=parameters, data_root=data_root,
                              results_dir=results_dir, variant=variant)
    given = {**parameters, "profile": profile, "results_dir": results_dir,
             **({"variant": variant} if variant is not None else {}),
             **({"data_root": data_root} if data_root is not None else {}),
             **({"download": True} if download else {})}
    output_dir = variant_root(PROJECT_ROOT / results_dir, name) / "notebooks"
    return Job(NOTEBOOKS / f"{study.notebook}.ipynb", given, output_dir, name)


def recorded_of_plan(job: Job, study: Study, *, profile: str, results_dir: str) -> tuple[int, int, bool]:
    """``(recorded, planned, described)``: the runs of the job's plan with a finished record (in its own store, or,
    for a variant, in the canonical one it copies from), all of them, and whether every dataset they read is
    described by recorded facts (lib.run.datasets); the data are checked first where the plan depends on them
    (``check_data``), as the notebook does. No training."""
    settings, _ = resolve_command(study, profile=profile, parameters={k: v for k, v in job.parameters.items()
                                                                       if k not in RESERVED},
                                  data_root=job.parameters.get("data_root"), results_dir=results_dir,
                                  variant=job.parameters.get("variant"))
    results = PROJECT_ROOT / results_dir
    stores = [ResultsStore(results, study.name, profile)]
    if job.variant is not None:
        stores.append(ResultsStore(variant_root(results, job.variant), study.name, profile))
    check_data(study, settings, stores, job.parameters.get("data_root"))
    configs = {stores[0].run_id(c): c for c in study.module.plan(settings)}
    known = {label for store in stores for label in datasets.recorded(store)}
    described = set(dataset_facts.specs(list(configs.values()))) <= known
    return len(configs) - len(unfinished(stores, list(configs.values()), settings)), len(configs), described


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="quick", type=profile_option, metavar=PROFILE_METAVAR)
    parser.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 03")
    parser.add_argument("--data-root", help="folder of <name>.npz arrays (else $DATA_ROOT, then torchvision's cache)")
    parser.add_argument("--download", action="store_true", help="let torchvision download missing datasets")
    parser.add_argument("--results-dir", default="results", help="relative to the project root")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a notebook parameter, as papermill's -p (checked against every selected notebook)")
    parser.add_argument("--variant", help="name of the variant the runs write (default: derived from the -p overrides)")
    args = parser.parse_args(argv)
    selected = notebooks(args.only)
    if not selected:
        parser.error(f"no notebook matches --only {args.only}; have: {[nb.name for nb in notebooks()]}")
    parameters = {name: parse_value(value) for name, value in args.parameter}
    data_root = str(Path(args.data_root).resolve()) if args.data_root else None
    by_notebook = {s.notebook: s for s in STUDIES.values()}
    try:
        jobs = [plan_job(by_notebook[nb.stem], profile=args.profile, results_dir=args.results_dir,
                         parameters=parameters, variant=args.variant, data_root=data_root, download=args.download)
                for nb in selected]
    except ParameterError as err:
        parser.error(str(err))
    failed = []
    for job in jobs:
        t0 = time.perf_counter()
        try:
            recorded, planned, described = recorded_of_plan(job, by_notebook[job.notebook.stem],
                                                            profile=args.profile, results_dir=args.results_dir)
            print(f"{job.notebook.name}: " + (f"all {planned} runs recorded, nothing to train; rendering"
                                              if recorded == planned else
                                              f"{recorded} of {planned} runs recorded, {planned - recorded} to "
                                              "train (progress below); executing"), flush=True)
            # Recorded runs whose data are described render without the arrays, and the render does not name the
            # data folder it was not given: the same files on a machine with the arrays and on one without.
            needs_arrays = recorded < planned or not described
            parameters = {k: v for k, v in job.parameters.items() if needs_arrays or k != "data_root"}
            html = render(job.notebook, profile=args.profile, results_dir=args.results_dir,
                          parameters=parameters, output_dir=job.output_dir)
        except Exception as err:  # a failed notebook must not stop the others; it is named at the end
            kept = relative(job.output_dir / FAILED / f"{job.notebook.stem}_{args.profile}.ipynb")
            # the exception's whole message (what was tried, what to do), indented under the notebook's name
            why = f"{getattr(err, 'ename', type(err).__name__)}: {getattr(err, 'evalue', err)}".rstrip()
            why = why.replace("\n", "\n    ")
            failed.append(f"{job.notebook.name}: {why}\n    (executed notebook kept in {kept})")
            print(f"{job.notebook.name}: FAILED after {time.perf_counter() - t0:.0f} s; {failed[-1]}", flush=True)
            continue
        variant = f" (variant {job.variant})" if job.variant else ""
        print(f"{job.notebook.name}: {time.perf_counter() - t0:.0f} s -> {relative(html)}{variant}", flush=True)
    print(f"report: {write_index(args.results_dir)}", flush=True)
    if failed:
        print("failed, their previous renders kept:\n  " + "\n  ".join(failed), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
