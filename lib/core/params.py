"""Checking notebook parameters before any compute: each error names the parameter and what is allowed."""
from __future__ import annotations

import argparse
import difflib
import math
from typing import Any, Iterable

PROFILE_NAMES = ("smoke", "quick", "cpu", "paper")
PROFILE_METAVAR = "{" + ",".join(PROFILE_NAMES) + "}"  # how a command's --profile shows its values


class ParameterError(ValueError):
    """A notebook parameter has a value that is not allowed."""


def fail(name: str, value: Any, allowed: str) -> None:
    raise ParameterError(f"parameter {name}={value!r} is not allowed: {allowed}")


def _did_you_mean(value: Any, allowed: Iterable, n: int = 2) -> str:
    """" (did you mean X?)" for a string close to one of ``allowed`` (difflib), else "": the one place a typo's
    suggestion is worked out, for a bad value (a notebook's parameter, a command's --profile) and an unknown name."""
    close = difflib.get_close_matches(value, [str(a) for a in allowed], n=n) if isinstance(value, str) else []
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        fail(name, value, f"one of {', '.join(allowed)}{_did_you_mean(value, allowed)}")
    return value


def profile_option(value: str) -> str:
    """argparse's ``type`` for a command's ``--profile``: a profile name, or the error that names the close match
    (``--profile papr``: "did you mean paper?"), as a notebook's parameter check does."""
    try:
        return choice("profile", value, PROFILE_NAMES)
    except ParameterError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def choices(name: str, values: Any, allowed: Iterable[str]) -> list[str]:
    allowed = tuple(allowed)
    if not isinstance(values, (list, tuple)) or not values or len(set(map(str, values))) != len(values):
        fail(name, values, f"a non-empty list of distinct values from {', '.join(allowed)}")
    for v in values:
        if not isinstance(v, str) or v not in allowed:
            fail(name, values, f"a non-empty list of distinct values from {', '.join(allowed)}"
                               f"{_did_you_mean(v, allowed)}")
    return list(values)


def integer(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        fail(name, value, f"an integer >= {minimum}")
    return value


MAX_SEEDS = 1000  # per cell; more is a typo, and would build a plan of that many runs before any check could stop it


def seeds(name: str, value: Any, minimum: int = 1) -> int:
    """A seed count: an integer in [minimum, MAX_SEEDS]."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_SEEDS:
        fail(name, value, f"an integer from {minimum} to {MAX_SEEDS}")
    return value


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def number(name: str, value: Any, low: float = 0.0, high: float = math.inf, *, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bracket = "(" if low_open else "["
        fail(name, value, f"a finite number in {bracket}{low}, {high}]")
    return float(value)


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        fail(name, value, "True or False")
    return value


def unknown_names(kind: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Reject names not in ``known``, naming each and its close matches (a typo such as ``seedz``)."""
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if unknown:
        hints = [f"{name}{_did_you_mean(name, known, n=3)}" for name in unknown]
        raise ParameterError(f"unknown {kind} {', '.join(hints)}; known: {', '.join(known)}")
