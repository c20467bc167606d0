"""Results store: one JSON record per training run plus one CSV table per (study, profile); ``docs/results-store.md``
documents the hashing rules, record schema, table columns and errors. A record's provenance (commit, machine,
kernels) comes from ``lib.run.provenance``; every file is written whole or not at all (``lib.run.files``).

    <root>/runs/<study>/<profile>/<run_id>.json     one record per run
    <root>/tables/<study>_<profile>.csv             the collected table (``write_table``)

``run_id = config_hash(config)``: the first 16 hex chars of the SHA-256 of ``config_json(config)`` (keys sorted,
integral floats as ints, non-finite floats refused, a config field added later left out at its default). Study
and profile select the folder, not the hash. A variant's store has the same layout under
``<results>/variants/<variant>/`` (``variant_root``; the rule is ``lib.studies.variants.variant_of``) and reuses a
canonical run by copying its record (``copy_finished``). ``FINISHED_STATUSES = ("ok", "diverged")``: a finished
run is skipped (``is_finished``); a "failed" one runs again. A corrupt record warns (``ResultsStoreWarning``) and
counts as absent; a failed write raises ``ResultsStoreError`` and leaves the target as it was.

The module runs past 400 lines because the store is one contract: the hashing, the record, its validation,
the tables, the typed verdict records a verdict table writes beside its CSV, and the runs another study computed
already (``same_computation``), which a sweep records instead of training them again.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

from lib.core.config import as_dict
from lib.run.files import ResultsStoreError, atomic_write_text, remove_stale_temp_files
from lib.run.provenance import environment

SCHEMA_VERSION = 2
LEGACY_SCHEMAS = (1,)  # upgraded by ResultsStore.migrate
STATUSES = ("ok", "diverged", "failed")
FINISHED_STATUSES = ("ok", "diverged")  # "failed" (an exception) is re-run next time

TABLE_LEAD_COLUMNS = ("study", "profile", "run_id", "seed", "dataset", "status")
TABLE_TAIL_COLUMNS = ("git_commit", "git_dirty", "torch", "device", "started_at", "wall_s")

_RECORD_KEYS = frozenset({
    "schema_version", "study", "profile", "run_id", "config_hash", "config", "seed", "dataset",
    "status", "metrics", "error", "environment", "timings", "extra", "written_at",
})
_RUN_ID_RE = re.compile(r"^[0-9a-f]{16}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_NONFINITE_TO_STR = {math.inf: "inf", -math.inf: "-inf"}
_STR_TO_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_LIB_DIR = Path(__file__).resolve().parent
VARIANTS_DIR = "variants"  # <results>/variants/<variant>/: a user's experiments, apart from the shipped results


class ResultsStoreWarning(UserWarning):
    """A record file is corrupt or inconsistent and is treated as absent."""


# --------------------------------------------------------------------------- plain JSON and the run id

def plain_json(obj: Any, where: str = "$", *, nonfinite: str = "reject") -> Any:
    """Plain-JSON copy of ``obj``: dicts (str keys), lists, str, int, float, bool, None.

    ``nonfinite``: "reject" raises ValueError on nan/inf; "encode" writes them as the strings
    "nan"/"inf"/"-inf".
    """
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        x = float(obj)
        if math.isfinite(x):
            return x
        if nonfinite == "encode":
            return "nan" if math.isnan(x) else _NONFINITE_TO_STR[x]
        raise ValueError(f"non-finite float {x!r} at {where} is not allowed here (strict JSON)")
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"dict key {k!r} at {where} must be a str")
            out[str(k)] = plain_json(v, f"{where}.{k}", nonfinite=nonfinite)
        return out
    if isinstance(obj, (list, tuple)):
        return [plain_json(v, f"{where}[{i}]", nonfinite=nonfinite) for i, v in enumerate(obj)]
    # numpy / torch scalars and arrays (duck-typed so torch is not imported here)
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return plain_json(obj.tolist(), where, nonfinite=nonfinite)
    if hasattr(obj, "item") and callable(obj.item):
        return plain_json(obj.item(), where, nonfinite=nonfinite)
    raise TypeError(f"value of type {type(obj).__name__} at {where} is not JSON-able")


def _map_leaves(leaf: Callable[[Any], Any], obj: Any) -> Any:
    """``obj`` (plain JSON) with ``leaf`` applied to every value that is not a dict or a list."""
    if isinstance(obj, dict):
        return {k: _map_leaves(leaf, v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_leaves(leaf, v) for v in obj]
    return leaf(obj)


def _decode_nonfinite(obj: Any) -> Any:
    return _map_leaves(lambda v: _STR_TO_NONFINITE.get(v, v) if isinstance(v, str) else v, obj)


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, no whitespace, repr-exact floats, tuples as lists.

    ``1`` and ``1.0`` stay different; nan/inf raise ValueError; non-str keys raise TypeError.
    """
    return json.dumps(plain_json(obj), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


def _integral_floats_as_ints(obj: Any) -> Any:
    return _map_leaves(lambda v: int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53 else v, obj)


def config_json(config: Any) -> str:
    """The text a config is hashed from: ``canonical_json`` of its dict form, integral floats as ints."""
    return json.dumps(_integral_floats_as_ints(plain_json(as_dict(config))), sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _runs(value) -> list[int] | None:
    """A verdict row's ``look_runs`` as its record keeps it: [finished, planned] while a look 2 runs, else None (a
    frame holds the missing value as NaN, which JSON has no word for)."""
    return [int(x) for x in value] if isinstance(value, (list, tuple)) else None


def config_hash(config: Any) -> str:
    """First 16 hex chars of sha256(config_json(config)); see the module docstring."""
    return hashlib.sha256(config_json(config).encode("ascii")).hexdigest()[:16]


def utc_now() -> str:
    """Current time, ISO-8601 UTC with milliseconds, e.g. 2025-01-31T12:00:00.123+00:00."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------- the store

def _check_name(kind: str, value: str) -> str:
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(f"{kind}={value!r} must match {_NAME_RE.pattern} (used in file names)")
    return value


def variant_root(results: os.PathLike | str, variant: str | None) -> Path:
    """The root of a variant's store under the results folder ``results``; ``results`` itself for the canonical one."""
    return Path(results) if variant is None else Path(results) / VARIANTS_DIR / _check_name("variant", variant)


def results_folder(root: os.PathLike | str) -> Path:
    """The results folder a store's ``root`` lies in: ``root`` itself, or ``<results>`` for a variant's
    ``<results>/variants/<variant>`` (the inverse of :func:`variant_root`)."""
    root = Path(root)
    return root.parent.parent if root.parent.name == VARIANTS_DIR else root


def _is_scalar(v: Any) -> bool:
    return not isinstance(v, (list, dict))


class ResultsStore:
    """Records of one study and profile under ``root``; see the module docstring."""

    def __init__(self, root: os.PathLike | str, study: str, profile: str):
        self.root = Path(root)
        self.study = _check_name("study", study)
        self.profile = _check_name("profile", profile)
        self.runs_dir = self.root / "runs" / study / profile
        self.table_path = self.root / "tables" / f"{study}_{profile}.csv"

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.root)!r}, study={self.study!r}, profile={self.profile!r})"

    def part(self, name: str) -> "ResultsStore":
        """The store of another kind of run of the same study and profile (its simulations), in the
        sub-folder ``name`` of the runs, with a table of its own: the study's own records and table
        never see these runs."""
        store = ResultsStore(self.root, self.study, self.profile)
        store.runs_dir = self.runs_dir / _check_name("part", name)
        store.table_path = self.table_path.with_name(f"{self.study}_{self.profile}_{name}.csv")
        return store

    def run_id(self, config: Any) -> str:
        return config_hash(config)

    def path(self, run_id: str) -> Path:
        if not isinstance(run_id, str) or not _RUN_ID_RE.match(run_id):
            raise ValueError(f"run_id={run_id!r} is not 16 lowercase hex chars")
        return self.runs_dir / f"{run_id}.json"

    # ---- reading

    def _read(self, path: Path) -> dict | None:
        """The decoded record at ``path``; None (with a warning) when corrupt, None if absent."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise ResultsStoreError(path, e) from e
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return self._corrupt(path, f"not valid JSON ({e})")
        if not isinstance(rec, dict):
            return self._corrupt(path, "not a JSON object")
        missing = _RECORD_KEYS - rec.keys()
        if missing:
            return self._corrupt(path, f"missing keys {sorted(missing)}")
        if rec["schema_version"] != SCHEMA_VERSION:
            hint = "; run `python -m lib.migrate` to upgrade it" if rec["schema_version"] in LEGACY_SCHEMAS else ""
            return self._corrupt(path, f"schema_version {rec['schema_version']!r} != {SCHEMA_VERSION}{hint}")
        if rec["run_id"] != path.stem:
            return self._corrupt(path, f"run_id {rec['run_id']!r} differs from the file name")
        if not isinstance(rec["config"], dict) or not isinstance(rec["metrics"], dict) \
                or not isinstance(rec["timings"], dict) or not isinstance(rec["environment"], dict):
            return self._corrupt(path, "config/metrics/timings/environment must be objects")
        for key in ("metrics", "timings", "extra"):
            rec[key] = _decode_nonfinite(rec[key])
        return rec

    @staticmethod
    def _corrupt(path: Path, why: str) -> None:
        warnings.warn(f"corrupt results record {path}: {why}; treated as absent",
                      ResultsStoreWarning, stacklevel=3)
        return None

    def load(self, run_id: str) -> dict | None:
        """The record of ``run_id``; None if absent or corrupt (corrupt: a warning names it)."""
        return self._read(self.path(run_id))

    def is_finished(self, config: Any) -> bool:
        """True if a valid record of ``config`` exists with status in FINISHED_STATUSES."""
        run_id = self.run_id(config)
        rec = self.load(run_id)
        if rec is None or rec["status"] not in FINISHED_STATUSES:
            return False
        if config_json(rec["config"]) != config_json(config):  # hash collision guard
            warnings.warn(f"results record {self.path(run_id)} holds another config with the "
                          f"same hash; treated as not finished", ResultsStoreWarning, stacklevel=2)
            return False
        return True

    def records(self) -> list[dict]:
        """All valid records, sorted by run_id; corrupt files are warned about and skipped."""
        if not self.runs_dir.is_dir():
            return []
        out = []
        for p in sorted(self.runs_dir.glob("*.json")):
            if not _RUN_ID_RE.match(p.stem):
                warnings.warn(f"ignoring {p}: file name is not a run id", ResultsStoreWarning,
                              stacklevel=2)
                continue
            rec = self._read(p)
            if rec is not None:
                out.append(rec)
        return sorted(out, key=lambda r: r["run_id"])

    # ---- writing

    def copy_finished(self, source: ResultsStore, configs: Iterable[Any]) -> list[str]:
        """Copy the finished records of ``configs`` that ``source`` holds and this store lacks (a variant
        reusing the canonical runs it shares); the run ids copied. The files are copied byte for byte."""
        copied = []
        for config in configs:
            run_id = self.run_id(config)
            if run_id not in copied and not self.is_finished(config) and source.is_finished(config):
                atomic_write_text(self.path(run_id), source.path(run_id).read_text(encoding="utf-8"))
                copied.append(run_id)
        return copied

    def same_computation(self, config: Any) -> dict | None:
        """A finished record of another study at this profile whose run computed what ``config`` computes, or None:
        the same config (at the paper profile study 2's SVHN entry and study 3's easiest level are one config), or
        one apart only in ``train_subset`` where the other run took every image it could (``train_subset`` 0, its
        ``train_images`` T) and ``config`` asks for at least T (at cpu, study 2's MNIST entry at 9,000 images
        against study 3's easiest level, which trains on all 9,000)."""
        config = plain_json(as_dict(config), "config")
        candidates = [config]
        if config.get("train_subset"):
            candidates.append({**config, "train_subset": 0})
        folders = sorted((self.root / "runs").glob(f"*/{self.profile}")) if (self.root / "runs").is_dir() else []
        for folder in folders:
            if folder.parent.name == self.study:
                continue
            other = ResultsStore(self.root, folder.parent.name, self.profile)
            for candidate in candidates:
                rec = other.load(self.run_id(candidate))
                if rec is None or rec["status"] not in FINISHED_STATUSES or \
                        config_json(rec["config"]) != config_json(candidate):
                    continue
                if candidate is config or config["train_subset"] >= rec["metrics"].get("train_images", math.inf):
                    return rec
        return None

    def adopt_same_computations(self, configs: Iterable[Any]) -> list[str]:
        """Record here, without training, each of ``configs`` this store lacks that another study's run computed
        (:meth:`same_computation`): that record's metrics, timings and environment under this config, with
        ``extra.same_computation`` naming it (``<study>/<run_id>``), so that one experiment is trained once. The run
        ids adopted."""
        adopted = []
        for config in configs:
            if self.is_finished(config):
                continue
            found = self.same_computation(config)
            if found is None:
                continue
            cfg = plain_json(as_dict(config), "config")
            run_id = self.run_id(cfg)
            raw = json.loads(ResultsStore(self.root, found["study"], self.profile).path(found["run_id"])
                             .read_text(encoding="utf-8"))
            raw.update(study=self.study, run_id=run_id, config_hash=run_id, config=cfg, written_at=utc_now(),
                       extra={**raw["extra"], "same_computation": f"{found['study']}/{found['run_id']}"})
            text = json.dumps(raw, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False)
            atomic_write_text(self.path(run_id), text + "\n")
            adopted.append(run_id)
        return adopted

    def remove_stale_temp_files(self) -> list[Path]:
        """Delete the temp files of writers on this host that were killed mid-write (module docstring)."""
        return remove_stale_temp_files(self.runs_dir) if self.runs_dir.is_dir() else []

    def write(self, config: Any, *, seed: int, dataset: str, status: str, metrics: dict,
              timings: dict, error: str | None = None, extra: dict | None = None) -> dict:
        """Build, atomically write and return the record of one run (schema: module docstring).

        The returned dict is what ``load`` gives back (non-finite metrics as floats).
        """
        if status not in STATUSES:
            raise ValueError(f"status={status!r}; choose one of {', '.join(STATUSES)}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            if hasattr(seed, "item"):
                seed = seed.item()
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise TypeError(f"seed={seed!r} must be an int")
        if not isinstance(dataset, str):
            raise TypeError(f"dataset={dataset!r} must be a str")
        config = as_dict(config)
        for name, val in (("seed", seed), ("dataset", dataset)):
            if isinstance(config, dict) and name in config and config[name] != val:
                raise ValueError(f"{name}={val!r} contradicts config[{name!r}]={config[name]!r}")
        if error is not None and not isinstance(error, str):
            error = str(error)
        for name, d in (("metrics", metrics), ("timings", timings), ("extra", extra)):
            if d is not None and not isinstance(d, dict):
                raise TypeError(f"{name} must be a dict, got {type(d).__name__}")
        cfg = plain_json(config, "config")
        run_id = self.run_id(cfg)
        record = {
            "schema_version": SCHEMA_VERSION,
            "study": self.study,
            "profile": self.profile,
            "run_id": run_id,
            "config_hash": run_id,
            "config": cfg,
            "seed": int(seed),
            "dataset": dataset,
            "status": status,
            "metrics": plain_json(metrics, "metrics", nonfinite="encode"),
            "error": error,
            # git_dirty speaks of the code: records, tables and renders anywhere in the results folder
            # (a variant's own, or canonical records not yet committed) leave it clean
            "environment": environment(exclude=[results_folder(self.root)]),
            "timings": plain_json(timings, "timings", nonfinite="encode"),
            "extra": plain_json(extra or {}, "extra", nonfinite="encode"),
            "written_at": utc_now(),
        }
        text = json.dumps(record, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False)
        atomic_write_text(self.path(run_id), text + "\n")
        for key in ("metrics", "timings", "extra"):
            record[key] = _decode_nonfinite(record[key])
        return record

    # ---- the table

    def table(self):
        """One row per valid record, columns in the documented stable order, rows by run_id."""
        import pandas as pd

        recs = self.records()
        config_keys = sorted({k for r in recs for k in r["config"]})
        metric_keys = sorted({k for r in recs for k, v in r["metrics"].items() if _is_scalar(v)})
        columns = [*TABLE_LEAD_COLUMNS, *(f"config.{k}" for k in config_keys),
                   *(f"metric.{k}" for k in metric_keys), *TABLE_TAIL_COLUMNS]
        rows = []
        for r in recs:
            row = {k: r[k] for k in TABLE_LEAD_COLUMNS}
            for k in config_keys:
                if k in r["config"]:
                    v = r["config"][k]
                    row[f"config.{k}"] = v if _is_scalar(v) else canonical_json(v)
            for k in metric_keys:
                v = r["metrics"].get(k)
                if _is_scalar(v):
                    row[f"metric.{k}"] = v
            env, tim = r["environment"], r["timings"]
            for k in ("git_commit", "git_dirty", "torch", "device"):
                row[k] = env.get(k)
            row["started_at"] = tim.get("started_at")
            row["wall_s"] = tim.get("wall_s")
            rows.append(row)
        return pd.DataFrame(rows, columns=columns)

    def write_table(self) -> Path:
        """Atomically write ``table()`` to ``<root>/tables/<study>_<profile>.csv``; its path."""
        text = self.table().to_csv(index=False, lineterminator="\n")
        atomic_write_text(self.table_path, text)
        return self.table_path

    def write_frame(self, name: str, frame) -> Path:
        """Atomically write an analysis table to ``<root>/tables/<study>_<profile>_<name>.csv``. A verdict table (one
        with a ``record`` column, :meth:`lib.core.verdicts.Assessment.record`) also writes its typed records, each
        with the look it was read at and the text of its row, to ``<study>_<profile>_verdicts.json``
        (:meth:`verdict_records`: what every program reads), and the CSV stays the reader's table without them."""
        path = self.table_path.with_name(f"{self.study}_{self.profile}_{_check_name('name', name)}.csv")
        if "record" in frame:  # each record with the look it was read at and its row as the reader's table shows it
            shown = [c for c in frame.columns if c not in ("record", "look", "look_runs")]
            records = [{**json.loads(row["record"]), "look": row.get("look"),
                        "look_runs": _runs(row.get("look_runs")), "shown": {c: str(row[c]) for c in shown}}
                       for _, row in frame.iterrows()]
            text = json.dumps(records, indent=1, ensure_ascii=False, allow_nan=False)
            atomic_write_text(self.verdicts_path, text + "\n")
            frame = frame.drop(columns=[c for c in ("record", "look_runs") if c in frame])
        atomic_write_text(path, frame.to_csv(index=False, lineterminator="\n"))
        return path

    @property
    def verdicts_path(self) -> Path:
        return self.table_path.with_name(f"{self.study}_{self.profile}_verdicts.json")

    def verdict_records(self) -> list[dict] | None:
        """The typed verdict records the study's notebook last wrote at this profile (None where it wrote none)."""
        path = self.verdicts_path
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    # ---- migration

    def migrate(self, upgrade: Callable[[dict], tuple[dict, dict]]) -> list[tuple[str, str]]:
        """Rewrite every record of an earlier schema, or whose config ``upgrade`` changes, in today's form.

        ``upgrade(record) -> (config, extra)``: the record's config in today's form, and entries to set
        in its ``extra`` (e.g. the training function's name). The run id becomes the hash of the new
        config (the file is renamed; the first id stays in ``extra.legacy_run_id``); metrics, timings,
        environment and ``written_at`` are kept. Repeating a migration changes nothing. Returns the
        (old, new) run ids of the records rewritten.
        """
        changed = []
        for path in sorted(self.runs_dir.glob("*.json")) if self.runs_dir.is_dir() else []:
            record = json.loads(path.read_text(encoding="utf-8"))
            if record.get("schema_version") not in (*LEGACY_SCHEMAS, SCHEMA_VERSION):
                self._corrupt(path, f"schema_version {record.get('schema_version')!r} cannot be migrated")
                continue
            config, extra = upgrade(record)
            config = plain_json(as_dict(config), "config")
            run_id = config_hash(config)
            new = {**record, "schema_version": SCHEMA_VERSION, "config": config, "run_id": run_id,
                   "config_hash": run_id, "extra": {**record["extra"], **extra}}
            if run_id != record["run_id"]:
                new["extra"].setdefault("legacy_run_id", record["run_id"])
            if new == record:
                continue
            text = json.dumps(new, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False)
            atomic_write_text(self.path(run_id), text + "\n")
            if run_id != path.stem:
                path.unlink()
            changed.append((record["run_id"], run_id))
        return changed
