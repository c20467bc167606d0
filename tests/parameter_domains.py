"""What each notebook parameter accepts: a reference written apart from the validators in ``lib/``.

The domains come from the notebooks' parameter-cell comments and the studies' documented intent,
not from the checks in ``lib.core.params`` and ``lib/studies``: a test that derived its expectations
from the validators could not notice when a validator goes wrong. Allowed strings are written out
for the same reason.

A domain is what one parameter accepts with every other parameter at its notebook default and the
``smoke`` profile. Where the range depends on another parameter, the bound is computed from that
parameter's smoke-profile value (``PROFILES["smoke"]``) or its notebook default, and the domain
names it in ``partners``: a rejection may be reported under that parameter's name instead.

Each domain gives ``accepts(value)``, a few deterministic ``good_edges`` / ``bad_edges`` (the
bounds and just past them, wrong types) and hypothesis strategies ``good()`` / ``bad()``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch
from hypothesis import strategies as st

MAX_SEEDS = 1000  # lib.core.params.MAX_SEEDS, written out: the reference is not read from the code it checks

# Values of the wrong type for every kind of parameter; each kind adds its own (bools, None, ...).
WRONG_TYPES = ["", "1", "0.5", [], [1], {}, {"a": 1}]


def _is_real(value: Any) -> bool:
    """An int or float, not a bool (bool is an int subclass, but True is no number of epochs)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_finite_float(value: Any) -> float | None:
    """The number as a finite float, or None: NaN, infinities and ints beyond float range are no finite float."""
    if not _is_real(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _just_past(x: float, direction: int) -> float:
    """A number a relative hair beyond ``x`` (1e-9, not one ulp: products such as gamma * dt round)."""
    return x + direction * max(abs(x), 1.0) * 1e-9


@dataclass(frozen=True)
class Number:
    """A finite number (int or float, never bool) in [low, high]; either end may be open."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    optional: bool = False
    partners: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        x = _as_finite_float(value)
        if x is None:
            return False
        above_low = x > self.low if self.low_open else x >= self.low
        below_high = x < self.high if self.high_open else x <= self.high
        return above_low and below_high

    def good_edges(self) -> list:
        edges = [_just_past(self.low, +1) if self.low_open else self.low]
        if math.isfinite(self.high):
            edges += [_just_past(self.high, -1) if self.high_open else self.high, (self.low + self.high) / 2]
        else:
            edges += [self.low + 1.0, self.low + 1e6]
        edges += [i for i in range(math.floor(self.low), math.floor(self.low) + 3) if self.accepts(i)][:1]
        return edges + ([None] if self.optional else [])

    def bad_edges(self) -> list:
        edges = [_just_past(self.low, -1), math.floor(self.low) - 1, math.nan, math.inf, -math.inf, True, False]
        if self.low_open:
            edges.append(self.low)
        if math.isfinite(self.high):
            edges += [_just_past(self.high, +1), math.ceil(self.high) + 1]
            if self.high_open:
                edges.append(self.high)
        return edges + WRONG_TYPES + ([] if self.optional else [None])

    def good(self):
        high = self.high if math.isfinite(self.high) else None
        inside = st.floats(self.low, high, exclude_min=self.low_open, exclude_max=self.high_open,
                           allow_nan=False, allow_infinity=False)
        return st.one_of(st.sampled_from(self.good_edges()), inside)

    def bad(self):
        below = st.floats(max_value=self.low, exclude_max=not self.low_open)
        outside = [below]
        if math.isfinite(self.high):
            outside.append(st.floats(min_value=self.high, exclude_min=not self.high_open))
        return st.one_of(st.sampled_from(self.bad_edges()), *outside, st.just(math.nan))


@dataclass(frozen=True)
class Integer:
    """An int (never bool, never a float such as 2.0) >= minimum, at most ``maximum``; optionally
    a multiple of ``multiple_of`` or a divisor of ``divides``."""

    minimum: int
    maximum: float = math.inf
    multiple_of: int = 1
    divides: int | None = None
    optional: bool = False
    partners: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        return (self.minimum <= value <= self.maximum and value % self.multiple_of == 0
                and (self.divides is None or self.divides % value == 0))

    def _accepted_from(self, start: int, count: int) -> list[int]:
        found, value = [], start
        while len(found) < count and value <= min(self.maximum, start + 10_000):
            if self.accepts(value):
                found.append(value)
            value += 1
        return found

    def good_edges(self) -> list:
        edges = self._accepted_from(self.minimum, 2)
        if math.isfinite(self.maximum):
            edges.append(int(self.maximum))
        return edges + ([None] if self.optional else [])

    def bad_edges(self) -> list:
        edges = [self.minimum - 1, -1, float(self.minimum + self.multiple_of), self.minimum + 0.5, True, False]
        if math.isfinite(self.maximum):
            edges.append(int(self.maximum) + 1)  # not far past: a validator that let it through would build its plan
        if self.multiple_of > 1:
            edges.append(self._accepted_from(self.minimum, 1)[0] + 1)
        if self.divides is not None:
            edges += [next(v for v in range(max(self.minimum, 1), self.divides) if self.divides % v), 2 * self.divides]
        return [v for v in edges if not self.accepts(v)] + WRONG_TYPES + ([] if self.optional else [None])

    def good(self):
        if self.divides is not None:
            inside = st.sampled_from([v for v in range(max(self.minimum, 1), self.divides + 1) if self.accepts(v)])
        else:
            first = self._accepted_from(self.minimum, 1)[0]
            steps = int(min(50, (self.maximum - first) // self.multiple_of))  # small: seed counts build plans
            inside = st.integers(0, steps).map(lambda k: first + k * self.multiple_of)
        return st.one_of(st.sampled_from(self.good_edges()), inside)

    def bad(self):
        above = [st.integers(int(self.maximum) + 1, int(self.maximum) + 100)] if math.isfinite(self.maximum) else []
        return st.one_of(st.sampled_from(self.bad_edges()), st.integers(max_value=self.minimum - 1), *above,
                         st.integers(-100, 100).filter(lambda v: not self.accepts(v)),
                         st.floats(allow_nan=True), st.booleans())


def seed_count(minimum: int, *, optional: bool = False) -> Integer:
    """Seeds per cell: an integer in [minimum, MAX_SEEDS]; more is a typo that would build a huge plan."""
    return Integer(minimum, maximum=MAX_SEEDS, optional=optional)


@dataclass(frozen=True)
class Flag:
    """True or False, nothing else (not 0 or 1, not "True")."""

    optional: bool = False
    partners: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        return value is True or value is False or (value is None and self.optional)

    def good_edges(self) -> list:
        return [True, False] + ([None] if self.optional else [])

    def bad_edges(self) -> list:
        return [0, 1, 1.0, "True", "False", [True]] + WRONG_TYPES + ([] if self.optional else [None])

    def good(self):
        return st.sampled_from(self.good_edges())

    def bad(self):
        return st.one_of(st.sampled_from(self.bad_edges()), st.integers(), st.text(max_size=5))


@dataclass(frozen=True)
class Choice:
    """One string from a fixed set."""

    options: tuple[str, ...]
    optional: bool = False
    partners: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        return (value is None and self.optional) or (isinstance(value, str) and value in self.options)

    def good_edges(self) -> list:
        return list(self.options) + ([None] if self.optional else [])

    def bad_edges(self) -> list:
        near_misses = [o.upper() for o in self.options] + [f" {o}" for o in self.options] + [[o] for o in self.options]
        return ([v for v in near_misses if not self.accepts(v)] + [0, True] + WRONG_TYPES
                + ([] if self.optional else [None]))

    def good(self):
        return st.sampled_from(self.good_edges())

    def bad(self):
        return st.one_of(st.sampled_from(self.bad_edges()), st.text(max_size=8).filter(lambda v: not self.accepts(v)))


@dataclass(frozen=True)
class Choices:
    """A list of distinct strings from a fixed set, holding every one of ``required``; non-empty
    unless ``allow_empty``."""

    options: tuple[str, ...]
    required: tuple[str, ...] = ()
    allow_empty: bool = False
    optional: bool = False
    partners: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            return False
        return (len(set(value)) == len(value) and set(value) <= set(self.options)
                and set(self.required) <= set(value) and (bool(value) or self.allow_empty))

    def good_edges(self) -> list:
        smallest = [list(self.required)] if self.required else [[o] for o in self.options]
        return [v for v in smallest if self.accepts(v)] + [list(self.options), list(reversed(self.options))] + (
            [[]] if self.allow_empty else []) + ([None] if self.optional else [])

    def bad_edges(self) -> list:
        first = self.options[0]
        edges = [[], [first, first], list(self.options) + [first], [first, "unknown"], [first.upper()], [first, 1],
                 first, tuple(), {first: True}, [None]]
        edges += [[o for o in self.options if o != r] for r in self.required]
        return [v for v in edges if not self.accepts(v)] + [0, True] + ([] if self.optional else [None])

    def good(self):
        others = [o for o in self.options if o not in self.required]
        min_size = 0 if self.required or self.allow_empty else 1
        chosen = st.lists(st.sampled_from(others), unique=True, min_size=min_size) if others else st.just([])
        return st.one_of(st.sampled_from(self.good_edges()),
                         chosen.flatmap(lambda extra: st.permutations(list(self.required) + extra)))

    def bad(self):
        mixed = st.lists(st.one_of(st.sampled_from(self.options), st.text(max_size=6), st.integers()), max_size=4)
        return st.one_of(st.sampled_from(self.bad_edges()), mixed.filter(lambda v: not self.accepts(v)))


# ------------------------------------------------------------------ the allowed strings, written out

PROFILES = ("smoke", "quick", "cpu", "paper")  # every notebook: "smoke | quick | cpu | paper"
DATASETS = ("cifar10", "cifar100", "svhn", "fashion_mnist", "mnist", "digits", "shapes")  # the cells' dataset comment
GRAYSCALE = ("fashion_mnist", "mnist", "digits")  # one channel; the others are RGB
SHAPES_IMAGE_SIZE = 16  # lib.core.data: shapes images are generated at 16 px unless image_size says otherwise
MARGIN_MODES = ("clamp", "subtract", "none")  # lib.core.losses: the margin treatments
STABILIZERS = ("detach", "direct")  # lib.core.losses: the logit stabilisers
INITS = ("cff", "trunc_normal")  # lib.cff.model: CFF's initialisation, ours before issue 16
NORMALIZATIONS = ("fixed", "subset")  # lib.cff.training: the dataset's constants, or the loaded subset's statistics
EVAL_PROTOCOLS = ("cff", "clean")  # lib.cff.training: CFF's selection steps, or the final encoder on fixed features
# "auto | cpu | cuda": asking for a GPU that is not there fails before any compute
DEVICES = ("auto", "cpu") + (("cuda",) if torch.cuda.is_available() else ())
# Study 2's dataset entries (its cell comment): the real sets and the procedural stand-ins.
CROSS_DATASET_ENTRIES = ("cifar10", "cifar100", "svhn", "fashion_mnist", "mnist",
                         "shapes10", "shapes100", "shapes10_easy")
INTERVENTIONS = ("default", "weight_decay", "cut_init", "grad_scale", "cut_init+grad_scale")  # notebook 04's cell

profile = Choice(PROFILES)


def _image_size(dataset_options: dict) -> int:
    return dataset_options.get("image_size", SHAPES_IMAGE_SIZE)


def _cff_training(smoke: dict, image_size: int) -> dict:
    """The CFF training parameters notebooks 01-03 share."""
    return {
        # margins of the first and last layer; None: the profile's value, else CFFConfig's default
        "m0": Number(0.0, 1.0, optional=True), "m_last": Number(0.0, 1.0, optional=True),
        "temperature": Number(0.0, low_open=True, optional=True), "lr": Number(0.0, low_open=True, optional=True),
        "layers": Integer(1, optional=True),
        # attention splits the embedding evenly over the heads
        "embed_dim": Integer(1, multiple_of=smoke["heads"], optional=True, partners=("heads",)),
        "heads": Integer(1, divides=smoke["embed_dim"], optional=True, partners=("embed_dim",)),
        # non-overlapping patches tile the image (lib.cff.model.PatchEmbedding)
        "patch": Integer(1, divides=image_size, optional=True),
        "epochs": Integer(1, optional=True), "batch_size": Integer(1, optional=True),
        "probe_epochs": Integer(1, optional=True), "workers": Integer(1, optional=True),
        "train_subset": Integer(0, optional=True),  # 0: all
        "init": Choice(INITS, optional=True), "normalization": Choice(NORMALIZATIONS, optional=True),
        "eval_protocol": Choice(EVAL_PROTOCOLS, optional=True),
        "device": Choice(DEVICES), "force": Flag(),
    }


def margin_factorial(smoke: dict, defaults: dict) -> dict:
    """Notebook 01."""
    return {
        "profile": profile, "dataset": Choice(DATASETS, optional=True),
        "seeds": seed_count(1, optional=True),
        "dose_seeds": seed_count(0, optional=True),  # 0 skips the dose-response probe
        "trajectory_seeds": seed_count(0, optional=True),  # 0 skips the layer-0 trajectory runs
        "trajectory_epochs": Integer(1, optional=True),
        "dose_m0": Number(0.0, 1.0),
        "margin_modes": Choices(MARGIN_MODES), "stabilizers": Choices(STABILIZERS),
        **_cff_training(smoke, _image_size(smoke["dataset_options"])),
    }


def _clamp_against_subtract(smoke: dict, image_size: int) -> dict:
    """Notebooks 02 and 03: one stabiliser, the two margin arms, a variance per arm."""
    return {
        "seeds": seed_count(2, optional=True),  # a variance needs two runs per arm
        "margin_modes": Choices(MARGIN_MODES, required=("clamp", "subtract")),  # the VR's two arms
        "stabilizer": Choice(STABILIZERS, optional=True),
        **_cff_training(smoke, image_size),
    }


def cross_dataset(smoke: dict, defaults: dict) -> dict:
    """Notebook 02: every smoke entry is a shapes stand-in, generated at the shapes_options' size."""
    return {
        "profile": profile, "datasets": Choices(CROSS_DATASET_ENTRIES, optional=True),
        "skip_missing": Flag(optional=True),
        **_clamp_against_subtract(smoke, _image_size(smoke["shapes_options"])),
    }


def difficulty_sweep(smoke: dict, defaults: dict) -> dict:
    """Notebook 03: a difficulty knob needs shapes and levels in [0, 1]; aug_level works on any dataset."""
    difficulty_fits = smoke["dataset"] == "shapes" and all(0 <= level <= 1 for level in smoke["levels"])
    return {
        "profile": profile,
        "dataset": Choice(DATASETS if smoke["knob"] == "aug_level" else ("shapes",), optional=True, partners=("knob",)),
        "knob": Choice(("aug_level",) + (("difficulty",) if difficulty_fits else ()), optional=True,
                       partners=("levels",)),
        **_clamp_against_subtract(smoke, _image_size(smoke["dataset_options"])),
    }


def embedding_norms(smoke: dict, defaults: dict) -> dict:
    """Notebook 04."""
    # An unseen shapes set is RGB; it cannot be set beside grayscale training images.
    shapes_unseen = any(isinstance(e, dict) and e.get("dataset") == "shapes" for e in smoke["ood"])
    return {
        "profile": profile,
        # (a) the sphere
        "pairs": Integer(2, optional=True), "sphere_lr": Number(0.0, low_open=True, optional=True),
        "dim": Integer(2), "tolerance": Number(0.0, 1.0, low_open=True),
        # (b) latent classes: at least four points per class; sigma and lr default to the named simulation's
        "latent_simulation": Choice(("authors", "ours")),
        "latent_samples": Integer(4 * len(defaults["class_weights"]), optional=True, partners=("class_weights",)),
        "latent_sigma": Number(0.0, optional=True), "latent_epochs": Integer(1, optional=True),
        "latent_lr": Number(0.0, low_open=True, optional=True), "latent_seeds": seed_count(1, optional=True),
        # (c, d) images
        "dataset": Choice(tuple(d for d in DATASETS if not (shapes_unseen and d in GRAYSCALE)), optional=True,
                          partners=("ood",)),
        "imbalanced_dataset": Choice(DATASETS, optional=True),
        "methods": Choices(("simclr", "simsiam")),
        # either list may be empty while the other has runs; the smoke weight decays differ from the
        # methods' defaults, so the weight_decay intervention has runs
        "interventions": Choices(INTERVENTIONS, allow_empty=bool(smoke["imbalanced_interventions"]), optional=True,
                                 partners=("imbalanced_interventions",)),
        "imbalanced_interventions": Choices(INTERVENTIONS, allow_empty=bool(smoke["interventions"]), optional=True,
                                            partners=("interventions",)),
        "imbalance_base": Number(1.0, low_open=True, optional=True),  # class i keeps floor(n_i base^-i)
        "simclr_loss": Choice(("decoupled", "infonce", "flatnce"), optional=True),  # contrastive, on projections
        "simclr_lr": Number(0.0, low_open=True, optional=True), "simsiam_lr": Number(0.0, low_open=True, optional=True),
        "cut_simclr": Number(0.0, low_open=True, optional=True),
        "cut_simsiam": Number(0.0, low_open=True, optional=True),
        "grad_scale_power": Number(-4.0, 4.0, optional=True),
        "grad_scale_recipe": Choice(("authors", "ours")),  # SimCLR GradScale's lr and warm-up
        "zero_init_residual": Flag(), "color_jitter": Choice(("joint", "separate")),
        # SimSiam's micro-batches split the smoke batch into at least 2 images each
        "simsiam_micro_batches": Integer(1, maximum=smoke["batch_size"] // 2, divides=smoke["batch_size"],
                                         partners=("batch_size",)),
        "seeds": seed_count(1, optional=True),
        # at least 1/128 (the first ResNet stage keeps a channel), at most 16 (8,192 features)
        "width_multiplier": Number(1 / 128, 16.0, optional=True),
        "simsiam_dim": Integer(1, optional=True),
        "epochs": Integer(max(1, math.ceil(smoke["warmup_epochs"])), optional=True, partners=("warmup_epochs",)),
        # a batch needs negatives and BatchNorm statistics, and SimSiam's micro-batches at least 2 images each
        "batch_size": Integer(2 * defaults["simsiam_micro_batches"], multiple_of=defaults["simsiam_micro_batches"],
                              optional=True, partners=("simsiam_micro_batches",)),
        "warmup_epochs": Number(0.0, smoke["epochs"], optional=True, partners=("epochs",)),
        "probe_steps": Integer(1, optional=True), "workers": Integer(1, optional=True),
        "force": Flag(),
    }


def flatnce_batch(smoke: dict, defaults: dict) -> dict:
    """Notebook 05."""
    return {
        "profile": profile, "dataset": Choice(DATASETS, optional=True),
        "losses": Choices(("infonce", "flatnce")),
        "seeds": seed_count(1, optional=True),
        "epochs": Integer(max(1, math.ceil(smoke["warmup_epochs"])), optional=True, partners=("warmup_epochs",)),
        "warmup_epochs": Number(0.0, smoke["epochs"], optional=True, partners=("epochs",)),
        # at least 1/128 (the first ResNet stage keeps a channel), at most 16 (8,192 features)
        "width_multiplier": Number(1 / 128, 16.0, optional=True),
        "optimizer": Choice(("lars", "sgd", "adam"), optional=True),
        # the learning-rate arms: FLAT's linear 0.3 x B / 256 and our 0.6 x sqrt(B), any order (FLAT's runs first)
        "lr_rules": Choices(("linear", "sqrt"), optional=True),
        "projector_bn": Flag(optional=True),
        "temperature": Number(0.0, low_open=True, optional=True),
        "train_subset": Integer(0, optional=True), "probe_steps": Integer(1, optional=True),
        "workers": Integer(1, optional=True), "device": Choice(DEVICES), "force": Flag(),
    }


# The run config's γ when the gamma parameter is None (lib.collapse.training.CollapseConfig), written out.
COLLAPSE_GAMMA = 1.0


def stop_gradient(smoke: dict, defaults: dict) -> dict:
    """Notebook 06."""
    # every r * m is a whole number: m a multiple of each r's denominator (0.2 = 1/5 needs m = 5, 10, ...)
    whole = math.lcm(*(Fraction(str(r)).denominator for r in smoke["r_values"]))
    gamma = COLLAPSE_GAMMA if defaults["gamma"] is None else defaults["gamma"]
    return {
        "profile": profile,
        # the labels span n directions in d dimensions, and the teacher's D inputs as many
        "num_classes": Integer(2, maximum=min(smoke["embed_dim"], smoke["input_dim"]), optional=True,
                               partners=("embed_dim", "input_dim")),
        "embed_dim": Integer(smoke["num_classes"], optional=True, partners=("num_classes",)),
        "input_dim": Integer(smoke["num_classes"], optional=True, partners=("num_classes",)),
        "samples_per_class": Integer(2, multiple_of=whole, optional=True, partners=("r_values",)),
        # Euler's stability: gamma * dt at most 0.5
        "gamma": Number(0.0, 0.5 / smoke["dt"], low_open=True, optional=True, partners=("dt",)),
        "dt": Number(0.0, 0.5 / gamma, low_open=True, optional=True, partners=("gamma",)),
        "steps": Integer(10, optional=True), "student_steps": Integer(10, optional=True),
        "seeds": seed_count(1, optional=True),
        "head_init": Number(0.0, 10.0, low_open=True, optional=True),
        "head_rate": Number(0.0, 100.0, low_open=True, optional=True),
        "slow_head_rate": Number(0.0, 100.0),  # 0 skips the slow-head runs
        "readout_noise": Number(0.0, optional=True), "input_noise": Number(0.0, optional=True),
        "real_dataset": Choice(DATASETS, optional=True), "real_train_subset": Integer(0, optional=True),
        "force": Flag(),
    }


# Notebook (file stem) -> its table, built from the study's smoke profile and the notebook's defaults.
DOMAINS = {
    "01_margin_factorial": margin_factorial,
    "02_cross_dataset_reversal": cross_dataset,
    "03_difficulty_sweep": difficulty_sweep,
    "04_embedding_norms": embedding_norms,
    "05_flatnce_batch_size": flatnce_batch,
    "06_stop_gradient_collapse": stop_gradient,
}
