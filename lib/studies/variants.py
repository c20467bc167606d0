"""The variant rule and the store a command's runs write to, shared by the notebooks (``lib.notebook``),
``lib.dispatch``, ``lib.run_all``, ``lib.decide``, ``lib.regime`` and ``lib.studies.coverage``.

A profile's canonical results are the runs of its own parameters (:func:`variant_of`). The settings are resolved
once with the parameters given and once with the notebook's defaults for the same profile; any difference,
leaving out the operational parameters (:data:`OPERATIONAL`: where data and results live, whether data may be
downloaded, how many workers, which device, ``force``), makes the run a *variant*. It is named by the ``variant``
parameter, else from the overridden settings (``m0-0.3_seeds-3``), and its records, tables and renders live under
``<results>/variants/<variant>/`` (``lib.run.results.variant_root``). Here too: which configs of a plan still
have to train (:func:`unfinished`) and a study's data check given the facts its recorded runs keep
(:func:`check_data`, ``lib.run.datasets``).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from lib.core import dataset_facts, params
from lib.core.settings import check_variant
from lib.run import datasets
from lib.run.files import atomic_write_text
from lib.run.results import ResultsStore, config_json, variant_root
from lib.studies.study import Study

# The repository root (lib/__init__.py's PROJECT_ROOT, which a module of this floor does not import): relative
# results folders are resolved against it.
PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Parameters that say where and how a run happens, not what it computes: they never make a variant.
RESERVED = ("profile", "data_root", "download", "results_dir", "variant")  # set by a command's own option, not -p
OPERATIONAL = ("data_root", "download", "results_dir", "workers", "device", "force", "variant")
DERIVED_NAME_MAX = 80  # a longer derived name is cut and ends with a hash of the whole


def notebook_defaults(study: Study) -> dict:
    """The notebook's ``parameters`` cell as a dict of values: its study's settings class's defaults, from which
    the cell is written (tests/test_settings.py fails when the two differ)."""
    return study.settings.defaults()


def check_names(study: Study, names) -> None:
    """Reject parameter names the notebook does not have, naming each and its close matches."""
    params.unknown_names(f"parameter of {study.notebook}:", names, notebook_defaults(study))


def _key(value) -> str:
    """Equal for settings that run the same: numbers normalised as in run ids (10 == 10.0)."""
    try:
        return config_json({"v": value})
    except (TypeError, ValueError):
        return repr(value)


def _slug(value) -> str:
    if isinstance(value, dict):
        text = "-".join(f"{k}-{_slug(v)}" for k, v in sorted(value.items()))
    elif isinstance(value, (list, tuple)):
        text = "-".join(_slug(v) for v in value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "none"


def derive_name(changes: dict) -> str:
    """A file-name-safe variant name from the overridden settings: ``m0-0.3_seeds-3``."""
    name = "_".join(f"{key}-{_slug(value)}" for key, value in sorted(changes.items()))
    if len(name) > DERIVED_NAME_MAX:
        name = name[:DERIVED_NAME_MAX - 13].rstrip("-_.") + "-" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return name


def variant_of(study: Study, parameters: dict, settings: dict) -> tuple[str | None, dict]:
    """The variant a run writes (None: the canonical results) and the settings that differ from the
    profile's own. ``parameters``: what the notebook received (its namespace, or defaults plus ``-p``
    values); ``settings``: ``study.module.resolve(parameters)``. The rule is in the module docstring."""
    defaults = notebook_defaults(study)
    given = check_variant(parameters.get("variant"))
    operational = {k: parameters[k] for k in OPERATIONAL if k in parameters and k in defaults}
    reference = study.module.resolve({**defaults, **operational, "profile": settings["profile"]})
    changes = {k: settings.get(k) for k in sorted(set(settings) | set(reference))
               if k not in OPERATIONAL and _key(settings.get(k)) != _key(reference.get(k))}
    if not changes and given is None:
        return None, {}
    overridden = {k for k in defaults if k not in OPERATIONAL and k in parameters
                  and _key(parameters[k]) != _key(defaults[k])}
    named = {k: v for k, v in changes.items() if k in overridden} or changes
    return given or derive_name(named), changes


def resolve_command(study: Study, *, profile: str, parameters: dict, data_root: str | None = None,
                    results_dir: str = "results", variant: str | None = None) -> tuple[dict, str | None]:
    """The settings and the variant of a command line (``lib.dispatch``, ``lib.run_all``): its ``-p``
    ``parameters`` checked by name and value as the notebook would check them. No compute."""
    reserved = sorted(set(RESERVED) & set(parameters))
    if reserved:
        raise params.ParameterError(f"parameter {reserved[0]} is set by its own option ({', '.join(RESERVED)})")
    check_names(study, parameters)
    p = {**notebook_defaults(study), **parameters, "profile": profile, "data_root": data_root,
         "results_dir": results_dir, "variant": variant}
    settings = study.module.resolve(p)
    return settings, variant_of(study, p, settings)[0]


def open_store(study: Study, settings: dict, configs: list, results_dir: str | Path,
               variant: str | None, part: str = "") -> tuple[ResultsStore, list[str]]:
    """The store the runs write to and the run ids it reused from the canonical store (copied records);
    ``part``: the store of the study's simulations (:meth:`ResultsStore.part`) instead of its runs."""
    results = PROJECT_ROOT / results_dir
    canonical = ResultsStore(results, study.name, settings["profile"])
    canonical = canonical.part(part) if part else canonical
    if variant is None:
        return canonical, []
    store = ResultsStore(variant_root(results, variant), study.name, settings["profile"])
    store = store.part(part) if part else store
    return store, [] if settings.get("force") else store.copy_finished(canonical, configs)


VARIANT_NOTE = "variant.json"  # in a variant's root: per study, the profile and the overrides that made it


def describe_variant(root: Path, study: Study, profile: str, changes: dict) -> None:
    """Write, in the variant's root, the profile and the settings that made it, per study (merged with what other
    studies wrote there): the variants page builds the command that renders it from them (lib.report)."""
    path = Path(root) / VARIANT_NOTE
    known = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    known[study.name] = {"profile": profile, "overrides": json.loads(json.dumps(changes, default=str))}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(known, indent=1, sort_keys=True) + "\n")


def download_datasets(study: Study, settings: dict, data_root: str | None, download: bool) -> None:
    """With ``download``, fetch the datasets of the study's whole plan before its ``check_data``, which would
    skip one it cannot load (the data are then in torchvision's cache for every process)."""
    if params.flag("download", download):
        datasets.load_datasets(study.module.plan(settings), data_root, download=True)


def unfinished(stores: list[ResultsStore], configs: list, settings: dict) -> list:
    """The configs a sweep of ``configs`` would train: those without a finished record in any of ``stores`` (a
    variant's and the canonical one it copies from), or all of them with ``force``; each once."""
    unique = {stores[0].run_id(c): c for c in configs}
    return [c for c in unique.values() if settings.get("force") or not any(s.is_finished(c) for s in stores)]


def check_data(study: Study, settings: dict, stores: list[ResultsStore], data_root: str | None):
    """A study's ``check_data`` (study 2: it may narrow the plan to the datasets found), or None without one. The
    datasets no run still has to train on are described from the facts recorded in ``stores`` (lib.run.datasets),
    not loaded, so that recorded runs render without the arrays."""
    if study.check_data is None:
        return None
    needed = dataset_facts.specs(unfinished(stores, study.module.plan(settings), settings))
    known = {label: facts for store in stores for label, facts in datasets.recorded(store).items()}
    return study.check_data(settings, data_root, {k: v for k, v in known.items() if k not in needed})


def relative(path: Path) -> str:
    """``path`` relative to the project root where it lies under it (what a reader of the notebook can find)."""
    path = Path(path)
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)
