"""Typed run configs: one frozen dataclass per training method, and the few functions that move a
config between its typed form (what a training function takes) and its record form (a JSON dict).

A config class subclasses :class:`Config`, declares its fields with their defaults (the one place a
default lives) and checks them in ``__post_init__``, raising :class:`lib.core.params.ParameterError` that
names the field. A training function takes it as its first parameter, ``config``, annotated with the
class: ``train_cff(config: CFFConfig, *, data_root=None, device="cpu", progress=None) -> dict``. That
annotation is how the sweep, ``lib.rerun`` and ``lib.migrate`` rebuild a config from a record.

``from_legacy`` maps a config dict written under an earlier record schema to today's fields (renamed
fields, fields added since with the value that leaves the run as it was); it must accept a dict that is
already in today's form, so that a migration can be repeated.

A field added after runs were recorded, whose default computes what the runs did before it existed, is declared
``field(default=..., metadata={ADDED: "2026-12"})`` (:data:`ADDED`, the month it came): while it holds that
default it is left out of the record form, so out of the run id (``lib.run.results.config_hash``), and every
recorded run keeps its id; any other value enters both. Code reading a record's config takes such a field with
``.get(name, default)``.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable

from lib.core import params


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of the typed configs: construction from a dict that rejects unknown keys by name."""

    @classmethod
    def from_dict(cls, values: dict) -> "Config":
        params.unknown_names(f"{cls.__name__} field", values, (f.name for f in dataclasses.fields(cls)))
        return cls(**values)

    @classmethod
    def from_legacy(cls, values: dict) -> "Config":
        """A config recorded under an earlier schema; the base class had no renames."""
        return cls.from_dict(values)

    def replace(self, **changes) -> "Config":
        """A copy with ``changes`` applied and checked again."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return as_dict(self)


ADDED = "added"  # the metadata key of a field added after runs were recorded (module docstring)


def added_at_default(f: dataclasses.Field, value: Any) -> bool:
    """Whether field ``f`` was added after runs were recorded and ``value`` is its default, at which a run computes
    what it did before the field existed."""
    if ADDED not in f.metadata:
        return False
    if f.default is not dataclasses.MISSING:
        return value == f.default
    return f.default_factory is not dataclasses.MISSING and value == f.default_factory()


def as_dict(config: Any) -> dict:
    """The record form of a config: a typed config's fields as a dict, but a field added later while it holds its
    default (:func:`added_at_default`); a dict is returned as it is."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config)
                if not added_at_default(f, getattr(config, f.name))}
    if isinstance(config, dict):
        return config
    raise TypeError(f"a run config is a typed config or a dict, not {type(config).__name__}")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return as_dict(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _config_annotation(train_fn: Callable) -> tuple[type | None, str]:
    """``(config class, "")`` of a training function, or ``(None, why it has none)``."""
    try:
        hints = typing.get_type_hints(train_fn)
    except (NameError, TypeError, AttributeError) as err:  # an annotation that does not resolve
        return None, f"its annotations do not resolve ({type(err).__name__}: {err})"
    cls = hints.get("config")
    if cls is None:
        return None, "it has no parameter `config` with a type annotation"
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return None, f"its `config` is annotated {cls!r}, not a Config dataclass"
    return cls, ""


def config_class(train_fn: Callable) -> type | None:
    """The config class a training function takes (its ``config`` annotation); None if it takes none."""
    return _config_annotation(train_fn)[0]


def build(train_fn: Callable, values: dict, *, legacy: bool = False) -> Config:
    """The config ``train_fn`` takes, from its record form (``legacy``: from an earlier schema)."""
    cls, why = _config_annotation(train_fn)
    if cls is None:
        raise TypeError(f"{getattr(train_fn, '__qualname__', train_fn)} is not a training function: {why} "
                        "(its first parameter must be `config`, annotated with a Config class)")
    return (cls.from_legacy if legacy else cls.from_dict)(dict(values))


def call(train_fn: Callable, config: Config | dict, **options) -> dict:
    """Train one run: ``train_fn(config, **options)``; a config in its record form is built first."""
    if isinstance(config, dict):
        config = build(train_fn, config)
    return train_fn(config, **options)
