"""Every notebook's parameter validator, driven with hundreds of random values (hypothesis).

A notebook's ``resolve`` runs before any compute. Whatever value one parameter takes, it either
accepts it or raises ParameterError naming that parameter -- never a TypeError, KeyError or a
traceback from deep inside training. The values are drawn from every JSON-ish type, so most of
them are wrong for the parameter they land on.
"""
import importlib
import math
import re

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.params import MAX_SEEDS, ParameterError
from lib.run_all import notebooks

# Which parameters a notebook passes through without validating: paths, used only to read and write.
PATHS = {"data_root", "results_dir"}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-50, 50),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["quick", "cpu", "clamp", "subtract", "shapes", "cifar10", "infonce", "auto"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=4), scalars, max_size=3))


def _study_and_defaults(path):
    """The study module a notebook imports as ``study`` and its parameters cell, as a dict."""
    source = path.with_suffix(".py").read_text()
    module = re.search(r"^from lib\.studies import (\w+) as study$", source, re.M)
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    defaults = {k: v for k, v in namespace.items() if not k.startswith("__") and k != "Optional"}
    return importlib.import_module(f"lib.studies.{module[1]}"), defaults


def _conflict(error: ParameterError) -> bool:
    """An error about two parameters names the other one with its value, e.g. '>= num_classes=9'."""
    return bool(re.search(r"\w+=\S+.*\w+=\S+", str(error)))


NOTEBOOKS = [nb for nb in notebooks() if re.search(r"^from lib\.studies import \w+ as study$",
                                                  nb.with_suffix(".py").read_text(), re.M)]


def test_every_notebook_is_covered():
    assert NOTEBOOKS == notebooks(), "a notebook does not import its study module as `study`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_random_parameter_values_fail_clearly_before_any_compute(path):
    study, defaults = _study_and_defaults(path)
    names = sorted(set(defaults) - PATHS)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=st.sampled_from(names), value=values)
    def check(name, value):
        try:
            study.resolve({**defaults, "profile": "smoke", name: value})
        except ParameterError as error:
            # a value that conflicts with another parameter may be reported under either name
            named = [n for n in names if re.search(rf"\b{n}\b", str(error))]
            assert name in named or (named and value is not None and _conflict(error)), \
                f"{name}={value!r} raised an error that does not name it: {error}"

    check()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_non_finite_numbers_are_rejected_for_every_numeric_parameter(path):
    study, defaults = _study_and_defaults(path)
    numeric = [k for k, v in defaults.items() if isinstance(v, float) and k not in PATHS]
    for name in numeric:
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(ParameterError, match=name):
                study.resolve({**defaults, "profile": "smoke", name: bad})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_seed_counts_are_bounded_so_no_plan_can_explode(path):
    study, defaults = _study_and_defaults(path)
    counts = [k for k in defaults if k.endswith("seeds")]
    assert counts, "every notebook has a seed count"
    for name in counts:
        with pytest.raises(ParameterError, match=rf"{name}=1000000000 .* to {MAX_SEEDS}"):
            study.resolve({**defaults, "profile": "smoke", name: 10**9})
        study.resolve({**defaults, "profile": "smoke", name: MAX_SEEDS})  # the bound itself is allowed
