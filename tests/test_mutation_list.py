"""The mutation check's list (tests/mutation_check.py) still plants its bugs in today's code.

Each mutation is exact text replacements in one lib file and the tests expected to catch it. When
the code is reflowed or changed, a replacement can stop matching, and the check then fails only
when someone runs it (minutes). This test reads today's files instead, in well under a second:
every replacement applies exactly once, in order, and every test the mutation names exists.
"""
from __future__ import annotations

import ast

import pytest

from tests.mutation_check import MUTATIONS, ROOT


def _test_functions(path) -> set[str]:
    """Names of the module-level test functions of a test file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}


def test_mutation_names_are_unique():
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("m", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_replacement_applies_exactly_once_to_todays_file(m):
    path = ROOT / m.path
    assert path.is_file(), f"{m.name}: {m.path} does not exist"
    original = text = path.read_text()
    for old, new in m.replacements:
        assert old != new, f"{m.name}: a replacement that changes nothing"
        assert text.count(old) == 1, f"{m.name}: {old!r} occurs {text.count(old)} times in {m.path}, not once"
        text = text.replace(old, new)
    assert text != original
    compile(text, str(path), "exec")  # the planted bug is a bug, not a syntax error


@pytest.mark.parametrize("m", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_named_test_exists(m):
    assert m.tests, f"{m.name} names no test"
    for spec in m.tests:
        file, _, name = spec.partition("::")
        path = ROOT / file
        assert path.is_file(), f"{m.name}: no test file {file}"
        functions = _test_functions(path)
        assert functions, f"{m.name}: {file} has no test functions"
        if name:
            assert name.split("[")[0] in functions, f"{m.name}: {file} has no test {name}"
