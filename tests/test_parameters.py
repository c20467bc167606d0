"""Every notebook's parameter validator against a reference of what each parameter accepts.

A notebook's ``resolve`` runs before any compute. For every parameter with a domain in
``tests/parameter_domains.py`` a value is accepted exactly when the domain accepts it, and a
rejection is a ParameterError naming the parameter -- never a TypeError, KeyError or a traceback
from deep inside training. The domains are written from the notebooks' parameter comments and the
studies' documented intent, apart from the validators: expectations derived from the validators
would follow them when they go wrong (a ``number`` that lets NaN through would still "agree").

Values come from the domains' good and bad strategies and their edges (bounds and just past them),
and from a broad strategy of every JSON-ish type. Parameters without a domain (dict- and most
list-valued ones) keep the weaker check: an error, if raised, names the parameter.
"""
import importlib
import re
import sys
import typing

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lib.core.params import MAX_SEEDS, ParameterError
from lib.execute import notebooks
from tests.parameter_domains import DOMAINS

# Which parameters a notebook passes through without validating in resolve: paths and names, used only to read
# and write.
PATHS = {"data_root", "download", "results_dir", "variant"}  # variant (a folder name), download: lib.notebook checks

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-50, 50),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["quick", "cpu", "clamp", "subtract", "shapes", "cifar10", "infonce", "auto"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=4), scalars, max_size=3))


def _parameters_cell(path):
    """The notebook's parameters cell, run: its names with their defaults and their annotations."""
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    defaults = {k: v for k, v in namespace.items() if not k.startswith("__") and k != "Optional"}
    return defaults, namespace["__annotations__"]


def _study_and_defaults(path):
    """The study module a notebook imports as ``study`` and its parameters cell, as a dict."""
    source = path.with_suffix(".py").read_text()
    module = re.search(r"^from lib\.studies import (\w+) as study$", source, re.M)
    return importlib.import_module(f"lib.studies.{module[1]}"), _parameters_cell(path)[0]


def _domains(path, study, defaults):
    return DOMAINS[path.stem](study.PROFILES["smoke"], defaults)


def _named(error: ParameterError, names) -> set:
    return {n for n in names if re.search(rf"\b{n}\b", str(error))}


def _conflict(error: ParameterError) -> bool:
    """An error about two parameters names the other one with its value, e.g. '>= num_classes=9'."""
    return bool(re.search(r"\w+=\S+.*\w+=\S+", str(error)))


NOTEBOOKS = [nb for nb in notebooks() if re.search(r"^from lib\.studies import \w+ as study$",
                                                  nb.with_suffix(".py").read_text(), re.M)]
IDS = [p.stem for p in NOTEBOOKS]


# ---------------------------------------------------- values where lib once disagreed with the reference

def _too_large_for_a_float(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max


# Found by these tests and fixed in lib; kept as fixed examples since random draws rarely hit them.
FIXED_DISAGREEMENTS = [
    # params.number called math.isfinite(value), which raises OverflowError for such an int
    ("01_margin_factorial", "lr", 10 ** 400), ("06_stop_gradient_collapse", "gamma", -10 ** 400),
    # the SSL configs checked round(64 * width) < 1, and round(0.5) is 0: the documented minimum was rejected
    ("04_embedding_norms", "width_multiplier", 1 / 128), ("05_flatnce_batch_size", "width_multiplier", 1 / 128),
    # the same check: 64 * width overflowed to inf, and round(inf) raises OverflowError
    ("04_embedding_norms", "width_multiplier", 1e307), ("05_flatnce_batch_size", "width_multiplier", 1e307),
    # cff_config did not check it; the model raised ValueError only once the data was loaded
    ("01_margin_factorial", "patch", 3), ("02_cross_dataset_reversal", "patch", 32),
    ("03_difficulty_sweep", "patch", 5),
]


def _check_against_reference(study, defaults, domains, name, value):
    """resolve accepts ``name=value`` exactly when its domain does; a rejection names it (or a partner)."""
    domain = domains[name]
    try:
        study.resolve({**defaults, "profile": "smoke", name: value})
    except ParameterError as error:
        assert not domain.accepts(value), f"{name}={value!r} is in the reference {domain}, yet: {error}"
        named = _named(error, defaults)
        assert name in named or named & set(domain.partners), \
            f"{name}={value!r} raised an error that names neither it nor {domain.partners}: {error}"
    else:
        assert domain.accepts(value), f"{name}={value!r} is outside the reference {domain}, yet resolve accepted it"


# ------------------------------------------------------------------------------- the tests

def test_every_notebook_is_covered():
    assert NOTEBOOKS == notebooks(), "a notebook does not import its study module as `study`"
    assert set(DOMAINS) == {p.stem for p in NOTEBOOKS}, "every notebook, and only these, has a table of domains"


def _is_optional(annotation) -> bool:
    return typing.get_origin(annotation) is typing.Union and type(None) in typing.get_args(annotation)


def _scalar(annotation) -> bool:
    inner = ([a for a in typing.get_args(annotation) if a is not type(None)] if _is_optional(annotation)
             else [annotation])
    return inner in ([int], [float], [str], [bool])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_scalar_parameter_has_a_domain(path):
    """A parameter added to a notebook cannot slip past the reference."""
    study, _ = _study_and_defaults(path)
    defaults, annotations = _parameters_cell(path)
    domains = _domains(path, study, defaults)
    scalars_in_cell = {name for name, kind in annotations.items() if _scalar(kind)} - PATHS
    assert not scalars_in_cell - set(domains), f"scalar parameters without a domain: {scalars_in_cell - set(domains)}"
    assert not set(domains) - set(defaults), (
        f"domains of parameters the cell does not have: {set(domains) - set(defaults)}")
    for name, domain in domains.items():
        # None means "the profile's value" exactly where the cell declares Optional[...] = None
        declared = _is_optional(annotations[name]) and defaults[name] is None
        assert domain.optional == declared, f"{name}: the domain's optional={domain.optional}, the cell says {declared}"
        assert domain.accepts(defaults[name]), f"{name}: the notebook default {defaults[name]!r} is outside {domain}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_domain_edge_is_accepted_or_rejected_as_the_reference_says(path):
    """Each bound, just inside and just past it, and values of the wrong type; deterministic."""
    study, defaults = _study_and_defaults(path)
    domains = _domains(path, study, defaults)
    for name, domain in domains.items():
        for expected, edges in ((True, domain.good_edges()), (False, domain.bad_edges())):
            for value in edges:
                assert domain.accepts(value) is expected, (
                    f"the reference {domain} disagrees with its own edge {value!r}")
                _check_against_reference(study, defaults, domains, name, value)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_values_from_each_domain_are_accepted_or_rejected_as_the_reference_says(path):
    study, defaults = _study_and_defaults(path)
    domains = _domains(path, study, defaults)
    labelled = [st.tuples(st.just(name), st.just(good), domain.good() if good else domain.bad())
                for name, domain in domains.items() for good in (True, False)]

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=st.one_of(labelled))
    def check(case):
        name, good, value = case
        domain = domains[name]
        assert domain.accepts(value) is good, f"the {'good' if good else 'bad'} strategy of {domain} drew {value!r}"
        _check_against_reference(study, defaults, domains, name, value)

    check()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_random_parameter_values_fail_clearly_before_any_compute(path):
    study, defaults = _study_and_defaults(path)
    domains = _domains(path, study, defaults)
    names = sorted(set(defaults) - PATHS)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=st.sampled_from(names), value=values)
    def check(name, value):
        if name in domains:
            _check_against_reference(study, defaults, domains, name, value)
            return
        try:
            study.resolve({**defaults, "profile": "smoke", name: value})
        except ParameterError as error:
            # a value that conflicts with another parameter may be reported under either name
            named = _named(error, names)
            assert name in named or (named and value is not None and _conflict(error)), \
                f"{name}={value!r} raised an error that does not name it: {error}"

    check()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_seed_counts_are_bounded_so_no_plan_can_explode(path):
    study, defaults = _study_and_defaults(path)
    counts = [k for k in defaults if k.endswith("seeds")]
    assert counts, "every notebook has a seed count"
    for name in counts:
        with pytest.raises(ParameterError, match=rf"{name}=1000000000 .* to {MAX_SEEDS}"):
            study.resolve({**defaults, "profile": "smoke", name: 10**9})


@pytest.mark.parametrize("stem, name, value", [
    pytest.param(stem, name, value,
                 id=f"{stem[:2]}-{name}=" + ("huge_int" if _too_large_for_a_float(value) else repr(value)))
    for stem, name, value in FIXED_DISAGREEMENTS])
def test_values_where_lib_once_disagreed_with_the_reference(stem, name, value):
    path = next(p for p in NOTEBOOKS if p.stem == stem)
    study, defaults = _study_and_defaults(path)
    _check_against_reference(study, defaults, _domains(path, study, defaults), name, value)
