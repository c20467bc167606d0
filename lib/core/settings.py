"""A study's parameters declared once: one class per study, one line per parameter.

    class Settings(StudySettings):
        profiles = PROFILES   # profile name -> the values it sets
        config = SSLConfig    # the run config its runs take
        epochs: Optional[int] = setting(None, "training epochs at every batch size (FLAT's code: {paper})")
        seeds: Optional[int] = setting(None, "seeds per batch size and loss", check=seed_count())

Each line says a parameter's name, its type (the annotation, kept as written), its default, its one-line
help and, where the study itself must check it, how. From the class come

- the notebook's ``parameters`` cell (:meth:`StudySettings.cell`): the same lines as Python, each help as
  its comment; ``tests/test_settings.py`` fails when a notebook's cell differs, and
  ``python -m lib.notebook --parameters NN --write`` rewrites it;
- the settings of a run (:meth:`StudySettings.resolve`): a parameter left as None (its default) takes the
  profile's value where the profile sets one, else the run config's default where it is a field of the
  config (so a study never sees another family's defaults), else stays None; then each ``check`` runs once,
  in the order of declaration;
- the fields every run config of the study shares (:meth:`StudySettings.config_values`): every parameter
  that is a field of ``config``, so a new config hyperparameter reaches the runs by its one line here.

A parameter without ``check`` must be a field of ``config``: the run config checks it (naming it) when the
study builds its plan, which ``resolve`` does before any compute. So each value is checked in one place:
by the study when the study owns it (a list of batch sizes, a seed count), by the config when the config does.
:class:`RunOptions` declares the parameters every study shares (the profile, where data and results live,
``force``), :class:`ParallelRuns` adds the workers and the device; in a cell the profile comes first, a study's
own lines next, these last.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

import torch

from lib.core import params
from lib.core.data import DATASETS

Check = Callable[[str, Any, dict], Any]  # (name, value, the settings declared before it) -> the checked value


@dataclass(frozen=True)
class Setting:
    """One parameter: its default in the notebook's cell, its help, its check and how a None takes a value."""

    default: Any  # the literal of the parameters cell
    help: str  # one line, the cell's comment
    check: Check | None = None  # None: a field of the run config, which checks it
    note: str = ""  # a comment line above the parameter in the cell (an example, a list of choices)
    fill: Callable[[dict, dict], Any] | None = None  # (settings so far, the profile's values) -> value for a None
    name: str = ""  # set by the class that declares it
    annotation: str = ""

    def __set_name__(self, owner, name):
        object.__setattr__(self, "name", name)


def setting(default: Any, help: str, check: Check | None = None, *, note: str = "",
            fill: Callable[[dict, dict], Any] | None = None) -> Any:
    """Declare one parameter in a :class:`StudySettings` class (see the module docstring)."""
    return Setting(default, help, check, note, fill)


def operating_points_setting(points: dict) -> Any:
    """A study's ``operating_points`` parameter (issue 49): the names of its ``points``, the settings of its profile
    at which a claim's stated condition holds, read beside the shipped setting; an empty list runs none."""
    def check(name: str, value, s: dict) -> list:
        return [] if value == [] else params.choices(name, value, list(points))
    return setting(None, "operating points read beside the shipped setting: " + " | ".join(points) + " ([] for none)",
                   check)


def _annotation_text(annotation: Any) -> str:
    """An annotation as the cell writes it: as written (a string, under postponed annotations), else its name."""
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


def _help_with_default(cls: type, name: str, text: str) -> str:
    """A help text whose ``{default}`` is the run config's default of the field ``name``, read from its declaration
    (so that no help copies a default by hand)."""
    if "{default}" not in text:
        return text
    config = getattr(cls, "config", None)
    if config is None or name not in config.__dataclass_fields__:
        raise TypeError(f"{cls.__name__}.{name}: its help names {{default}}, but it is no field of a run config")
    return text.replace("{default}", help_value(_config_default(config, name)))


def _help_with_paper(cls: type, name: str, text: str) -> str:
    """A help text whose ``{paper}`` is the value the study's ``paper`` profile sets for ``name``, read from the
    profile (so that no help copies it by hand). A family's class without profiles (CFFSettings) leaves it for the
    study's class to fill."""
    if "{paper}" not in text or not cls.profiles:
        return text
    if name not in cls.profiles.get("paper", {}):
        raise TypeError(f"{cls.__name__}.{name}: its help names {{paper}}, but the paper profile does not set it")
    return text.replace("{paper}", help_value(cls.profiles["paper"][name]))


def help_value(value: Any) -> str:
    """A value as a help text says it: numbers in their shortest form, a list's items joined by commas (a list of more
    than four as its first two, "...", its last, so that the line stays short)."""
    if isinstance(value, (list, tuple)):
        shown = [*value[:2], "...", value[-1]] if len(value) > 4 else value
        return ", ".join(v if v == "..." else help_value(v) for v in shown)
    if not isinstance(value, float):
        return str(value)
    plain = f"{value:g}"
    if not math.isfinite(value) or value == 0:
        return plain
    mantissa, exponent = f"{value:.12e}".split("e")
    scientific = f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"  # 1e-4, not 0.0001 or 1e-04
    return scientific if len(scientific) < len(plain) else plain


def _config_default(config: type, name: str) -> Any:
    field = config.__dataclass_fields__[name]
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


def literal(value: Any) -> str:
    """``value`` as the cell writes it: strings in double quotes, the rest as Python."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value!r} has no Python literal: a parameters cell holds literals only (papermill)")
    return repr(value)


class StudySettings:
    """Base of a study's settings class. Subclasses set ``profiles`` and ``config`` and declare parameters."""

    profiles: ClassVar[dict] = {}
    config: ClassVar[type | None] = None
    declared: ClassVar[dict[str, Setting]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = {}
        for name, value in vars(cls).items():
            if isinstance(value, Setting):
                annotation = cls.__dict__.get("__annotations__", {}).get(name)
                if annotation is None:
                    raise TypeError(f"{cls.__name__}.{name}: a setting needs its type as an annotation")
                own[name] = dataclasses.replace(value, annotation=_annotation_text(annotation),
                                                help=_help_with_default(cls, name, value.help))
        inherited = {}
        for base in cls.__bases__:
            inherited.update(getattr(base, "declared", {}))
        own = {k: dataclasses.replace(v, help=_help_with_paper(cls, k, v.help)) for k, v in own.items()}
        inherited = {k: dataclasses.replace(v, help=_help_with_paper(cls, k, v.help)) for k, v in inherited.items()}
        # the profile first, a study's own parameters next, then those it inherits (a family's, then RunOptions'),
        # each in the place its class gave it, also where the study re-declares one (its own help)
        declared = {**{k: v for k, v in own.items() if k not in inherited},
                    **{k: own.get(k, v) for k, v in inherited.items()}}
        cls.declared = {k: declared[k] for k in sorted(declared, key=lambda k: k != "profile")}
        unknown = sorted({k for values in cls.profiles.values() for k in values} - set(cls.declared))
        if unknown:
            raise TypeError(f"{cls.__name__}: its profiles set {', '.join(unknown)}, which it does not declare")
        if cls.config is not None:
            fields = {f.name for f in dataclasses.fields(cls.config)}
            unchecked = [n for n, s in cls.declared.items() if s.check is None and n not in fields]
            if unchecked:
                raise TypeError(f"{cls.__name__}: {', '.join(unchecked)} has no check and is no field of "
                                f"{cls.config.__name__}, so nothing would check it")

    @classmethod
    def defaults(cls) -> dict:
        """The parameters cell's values."""
        return {name: _copy(s.default) for name, s in cls.declared.items()}

    @classmethod
    def cell(cls) -> str:
        """The notebook's ``parameters`` cell, as its source; its first line says where a parameter is declared."""
        where = cls.__module__.replace(".", "/") + ".py"
        lines = [f"# From {where} ({cls.__name__}): edit there, then: python -m lib.notebook --parameters NN --write",
                 "from typing import Optional", ""]
        for s in cls.declared.values():
            if s.note:
                lines.append(f"# {s.note}")
            lines.append(f"{s.name}: {s.annotation} = {literal(s.default)}  # {s.help}")
        return "\n".join(lines)

    @classmethod
    def config_fields(cls) -> list[str]:
        """The parameters that are fields of the run config, in the order of declaration."""
        fields = {f.name for f in dataclasses.fields(cls.config)} if cls.config else set()
        return [name for name in cls.declared if name in fields]

    @classmethod
    def config_values(cls, s: dict) -> dict:
        """The config fields every run of these settings shares."""
        return {name: s[name] for name in cls.config_fields()}

    @classmethod
    def run_config(cls, s: dict, **run) -> Any:
        """One run's checked config: the declared config fields of ``s``, overridden by ``run``."""
        return cls.config(**{**cls.config_values(s), **run})

    @classmethod
    def resolve(cls, p: dict) -> dict:
        """The settings of parameters ``p`` (a notebook's namespace: names it does not declare are ignored).

        ``profile`` is checked first; then, in the order of declaration, each parameter given as None (where None is
        its default) takes the profile's value, else the config's default, else stays None, and its check runs.
        No compute."""
        profile = params.choice("profile", p.get("profile"), cls.profiles)
        chosen = cls.profiles[profile]
        s: dict = {"profile": profile}
        config_fields = set(cls.config_fields())
        for name, declared in cls.declared.items():
            if name == "profile":
                continue
            value = p.get(name, declared.default)
            if value is None and declared.default is None:  # None means "the profile's" only where it is the default
                if declared.fill is not None:
                    value = declared.fill(s, chosen)
                elif name in chosen:
                    value = _copy(chosen[name])
                elif name in config_fields:
                    value = _config_default(cls.config, name)
            if isinstance(value, str) and _takes_literal(declared.annotation):
                value = _literal_text(value)  # papermill's -p passes a list or dict as its text
            s[name] = value if declared.check is None else declared.check(name, value, s)
        return s


def _takes_literal(annotation: str) -> bool:
    """Whether a parameter's declared type is a list or a dict, whose value papermill's ``-p`` hands over as text."""
    return re.search(r"\b(list|dict|List|Dict)\b", annotation) is not None


def _literal_text(text: str) -> Any:
    """A list's or dict's literal given as text (``'[16, 32]'``), as its value; other text is left as it is, for
    the parameter's check to refuse with the allowed values."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text
    return value if isinstance(value, (list, dict)) else text


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value)) if isinstance(value, (list, dict)) else value


# ------------------------------------------------------------------------- checks, each naming its parameter

def integer(minimum: int = 0) -> Check:
    return lambda name, value, s: params.integer(name, value, minimum)


def number(low: float = 0.0, high: float = math.inf, *, low_open: bool = False) -> Check:
    return lambda name, value, s: params.number(name, value, low, high, low_open=low_open)


def seed_count(minimum: int = 1) -> Check:
    return lambda name, value, s: params.seeds(name, value, minimum)


def flag() -> Check:
    return lambda name, value, s: params.flag(name, value)


def choice(allowed) -> Check:
    return lambda name, value, s: params.choice(name, value, allowed)


def choices(allowed, *, keep_order: bool = False) -> Check:
    """A non-empty list of distinct values from ``allowed``; ``keep_order``: sorted in ``allowed``'s order."""
    def check(name, value, s):
        chosen = params.choices(name, value, allowed)
        return [v for v in allowed if v in chosen] if keep_order else chosen
    return check


def optional_text() -> Check:
    """None or a string (a path, a name)."""
    def check(name, value, s):
        if value is not None and not isinstance(value, str):
            params.fail(name, value, "None or a string")
        return value
    return check


def text() -> Check:
    def check(name, value, s):
        if not isinstance(value, str):
            params.fail(name, value, "a string")
        return value
    return check


VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def check_variant(value: Any) -> str | None:
    """A variant's name: None (derived from the overrides) or a folder name."""
    if value is not None and not (isinstance(value, str) and VARIANT_NAME.match(value)):
        params.fail("variant", value, "None (derived from the overrides) or a name of letters, digits, '.', '_' "
                                      "and '-', starting with a letter or digit, at most 80 characters")
    return value


def variant_name() -> Check:
    return lambda name, value, s: check_variant(value)


DEVICES = ("auto", "cpu", "cuda")


def device() -> Check:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``; asking for a missing GPU fails here."""
    def check(name, value, s):
        chosen = params.choice(name, value, DEVICES)
        if chosen == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        if chosen == "cuda" and not torch.cuda.is_available():
            params.fail(name, value, "'cpu' or 'auto': no CUDA device is visible")
        return chosen
    return check


def profile_options(s: dict, chosen: dict) -> dict:
    """``dataset_options`` left as None: the profile's, when the dataset is the profile's (its options belong
    to its dataset), else none."""
    return _copy(chosen["dataset_options"]) if s["dataset"] == chosen["dataset"] else {}


def dataset_options() -> Check:
    """A dict of ``lib.core.data.load_dataset`` options; none for a dataset that takes none (a bad dataset name is
    left to the run config, which names it)."""
    def check(name, value, s):
        dataset = DATASETS.get(s["dataset"]) if isinstance(s.get("dataset"), str) else None
        if not isinstance(value, dict) or (dataset is not None and not dataset.options and value):
            params.fail(name, value, f"a dict of lib.core.data.load_dataset options ({{}}: {s['dataset']} takes none)")
        return value
    return check


class RunOptions(StudySettings):
    """The parameters every study shares: the profile, where data and results live, and whether finished runs are
    run again. But for the profile they say how a run happens, never what it computes."""

    profile: str = setting("quick", "smoke | quick | cpu | paper: every parameter left as None takes the profile's "
                                    "value", choice(params.PROFILE_NAMES))

    data_root: Optional[str] = setting(None, "folder of <name>.npz arrays; None: $DATA_ROOT, then torchvision's cache",
                                    optional_text())
    download: bool = setting(False, "True: torchvision may download a real dataset found nowhere (needs internet)",
                             flag())
    results_dir: str = setting("results", "records and tables go here (relative to the project root)", text())
    variant: Optional[str] = setting(None, "None: canonical results, or results/variants/<name>/ when a parameter "
                                           "is overridden", variant_name())
    force: bool = setting(False, "re-run configs that already have a finished record", flag())


class ParallelRuns(RunOptions):
    """:class:`RunOptions` and where the runs train: in how many processes, on which device."""

    workers: Optional[int] = setting(None, "runs in parallel processes; the cores are divided among them", integer(1))
    device: str = setting("auto", "auto | cpu | cuda", device())
