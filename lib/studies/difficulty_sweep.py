"""Study 3: the SVHN difficulty sweep (MARGIN paper), as run by notebooks/03_difficulty_sweep.

Design: study 1's clamp-against-subtract comparison repeated at several levels of one difficulty
knob, from none to severe, so that accuracy moves from near its ceiling towards chance; per level
the mean accuracy per arm, the variance ratio with its tests and the layer-0 clamp activation rate.
The paper's claim: VR is large only at intermediate difficulty with high positive-pair density.

Two knobs [ours for both; the paper's exact knob is not public]:

- ``aug_level``: the augmentation strength of :func:`lib.core.augment.distort` (0 = the dataset's
  standard crop/flip only, 4 = severe rotation, zoom, shift, contrast, brightness and noise), applied
  to the training views; the probe and the test set stay clean. Works on any dataset.
- ``difficulty``: the procedural ``shapes`` generator's difficulty (translation, contrast loss and
  pixel noise in the data itself, training and test alike): a controlled stand-in for a harder
  dataset, with no download.

The module runs past 400 lines because it declares the study's claims (``STATEMENTS``), the conditions of each
published point and its regime search beside the analysis that reads them.
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Optional

import numpy as np
import pandas as pd
from scipy import stats as st

from lib.cff.batched import train_cff_seeds
from lib.cff.training import CFFConfig, train_cff
from lib.core import params, settings, verdicts
from lib.core.augment import DISTORTION_LEVELS
from lib.core.config import as_dict
from lib.core.settings import setting
from lib.studies import common
from lib.studies.common import operating_point_column, shipped_runs

STUDY = "03_difficulty_sweep"
PAPER_DATA = "SVHN"  # the data of the paper's claims, named on the first screen of a render
QUESTION = ("Does the variance effect of margin clamping depend on task difficulty, large only at intermediate "
            "accuracy?")
CENTRAL = "s3.difficulty"  # its central claim's row id (at the profile's setting or a point)
SCALE = ("dataset", "levels", "train_subset", "layers", "embed_dim", "epochs", "batch_size", "seeds")
TRAIN = train_cff
KNOBS = ("aug_level", "difficulty")

# Published (accuracy %, VR, evidence) on SVHN, ceiling first.
PUBLISHED_POINTS = ((97.0, 0.25, "[paper]"), (26.8, 2.18, "[summary]"), (25.0, 16.73, "[paper/summary]"))
PUBLISHED_CHANCE = 10.0  # SVHN's ten digits
PUBLISHED_CEILING = PUBLISHED_POINTS[0][0]

PROFILES = {
    "smoke": dict(dataset="shapes",
                  dataset_options={"num_classes": 10, "difficulty": 0.3, "n_train": 400, "n_test": 200},
                  knob="aug_level", levels=[0, 4], seeds=2, layers=2, embed_dim=32, heads=2, patch=4, epochs=1,
                  batch_size=128, train_subset=0, probe_epochs=5, operating_points=[], workers=1,
                  # [ours] smoke trains one epoch: under CFF's init (position std 1) every seed's probe is then at
                  # chance, and the verdicts' code would not run; the smaller init leaves the seeds apart
                  init="trunc_normal"),
    "quick": dict(dataset="shapes", dataset_options={"num_classes": 10, "n_train": 3000, "n_test": 1000},
                  knob="difficulty", levels=[0.1, 0.2, 0.3, 0.4, 0.5], seeds=5, layers=3, embed_dim=32, heads=2,
                  patch=4, epochs=6, batch_size=256, train_subset=0, probe_epochs=15, operating_points=[], workers=2),
    # MNIST stands in for SVHN, which is not in the offline .npz folder (--data-root). Study 1's cpu model
    # (batch 512, probe_epochs 15: see there); 5 levels x 2 arms x 5 seeds = 50 runs. Measured at fe0d413
    # (docs/notes/queue.md): median 326 s a run two at a time, 4.6 run-hours, about 2.3 hours for the 50. Its
    # operating point (OPERATING_POINTS) adds 2 x POINT_SEEDS runs of under a minute each.
    "cpu": dict(dataset="mnist", dataset_options={}, knob="aug_level", levels=[0, 1, 2, 3, 4], seeds=5, layers=4,
                embed_dim=64, heads=4, patch=4, epochs=8, batch_size=512, train_subset=0, probe_epochs=15,
                operating_points=["two-epoch"], workers=2),
    "paper": dict(dataset="svhn", dataset_options={}, knob="aug_level", levels=[0, 1, 2, 3, 4], seeds=5, layers=8,
                  embed_dim=128, heads=4, patch=4, epochs=600, batch_size=512, train_subset=0, probe_epochs=50,
                  operating_points=[], workers=1),
}

# Operating points (issue 49; see margin_factorial.OPERATING_POINTS). The regime search (REGIME_SEARCH) found one
# setting that met the hard points' conditions on its one seed: augmentation level 1 after 2 epochs, 27.5% accuracy
# (the paper's 25% and 26.8% within 5 points) with the clamp arm's layer-0 CAR at 53.2% (>= 50%); after 8 or 32 epochs
# every hard level's CAR is 23-31%. Accuracy is the paper's moderator ("a point is matched by the accuracy it
# reaches"), and a short run is hard because it is not converged: the paths the MARGIN summary calls "sensitive to
# gradient perturbation but not fully converged". [ours] The paper trained every level for one length; ours differ.
# Measured on the point's 12 seeds per arm (2026-12-07): 34.7% accuracy, CAR 54.9%. Seed 0 was the lowest of the 12,
# so the point misses the accuracy condition and its rows read *not in the paper's regime*, saying by how much: the
# closest setting under 30 minutes a run, shown beside the shipped rows.
OPERATING_POINTS = {"two-epoch": {"levels": (1,), "overrides": {"epochs": 2}}}
# Seeds per arm at a point: the fewest whose power at the published contrast (66.9) reaches 80% at alpha / 6 (the
# family's six tested claims, the point's three beside the shipped three) with the 97% point's 6 seeds:
# lib.core.verdicts.contrast_power gives 0.72 at 8, 0.77 at 10, 0.805 at 12.
POINT_SEEDS = 12
# The contrast's 97% part at a point is study 2's SVHN-stand-in experiment at its own operating point (MNIST after 32
# epochs, 94.2%): one experiment, decided there, read here on its look-1 seeds (study 2's profile seeds, fixed before
# this study's point ran), so that its look 2 (plan 3f7709fd3b6cb7a2) does not make this claim a second look.
EASY_POINT = ("02_cross_dataset_reversal", "ease-matched")  # names only: study modules do not import each other


def _knob(name: str, value, s: dict) -> str:
    params.choice(name, value, KNOBS)
    if value != "aug_level" and s["dataset"] != "shapes":
        params.fail(name, value, "aug_level unless dataset is 'shapes' (only the generator has a difficulty)")
    return value


def _levels(name: str, levels, s: dict) -> list:
    if not isinstance(levels, (list, tuple)) or not levels or len(set(levels)) != len(levels):
        params.fail(name, levels, "a non-empty list of distinct knob levels")
    if s["knob"] == "aug_level":
        for level in levels:
            if isinstance(level, bool) or level not in DISTORTION_LEVELS:
                params.fail(name, levels, f"augmentation levels from {DISTORTION_LEVELS}")
        return sorted(levels)
    for level in levels:
        if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 <= level <= 1:
            params.fail(name, levels, "difficulties in [0, 1]")
    return sorted(float(level) for level in levels)


class Settings(common.CFFSettings):
    """Study 3's parameters (lib.core.settings): the cell of notebooks/03_difficulty_sweep is written from these
    lines and CFFSettings' (the training fields, checked by CFFConfig when the plan is built)."""

    profiles = PROFILES
    dataset: Optional[str] = setting(None, "cifar10 | cifar100 | svhn | fashion_mnist | mnist | digits | shapes")
    dataset_options: Optional[dict] = setting(None, 'lib.core.data.load_dataset options, e.g. {"num_classes": 10} '
                                                    "for shapes", settings.dataset_options(),
                                              fill=settings.profile_options)
    knob: Optional[str] = setting(None, "aug_level (augmentation strength, any dataset) | difficulty (shapes only)",
                                  _knob)
    levels: Optional[list] = setting(None, "knob levels, none to severe: aug_level 0..4, difficulty in [0, 1]",
                                     _levels)
    seeds: Optional[int] = setting(None, "seeds per arm and level", settings.seed_count(2))
    margin_modes: list = setting(list(common.ARMS), "margin treatments compared [paper]",
                                 common.margin_modes_with_both_arms)
    stabilizer: Optional[str] = setting(None, "logit stabiliser of every run (CFFConfig: {default} [code])",
                                        note="One logit stabiliser is enough: it is gradient-neutral.")
    operating_points: Optional[list] = settings.operating_points_setting(OPERATING_POINTS)


def resolve(p: dict) -> dict:
    """Check the notebook's parameters and fill the None ones (:class:`Settings`). No compute."""
    s = Settings.resolve(p)
    if s["operating_points"] and s["knob"] != "aug_level":
        params.fail("operating_points", s["operating_points"],
                    "[] unless knob is 'aug_level' (a point's levels are augmentation levels)")
    plan(s)  # every run config goes through CFFConfig once here, so a bad combination fails now
    return s


def _knob_settings(s: dict, level) -> dict:
    """The CFFConfig fields that put a run at ``level`` of the knob."""
    if s["knob"] == "aug_level":
        return dict(dataset_options=s["dataset_options"], aug_level=level)
    return dict(dataset_options={**s["dataset_options"], "difficulty": level})


def sweep_options(s: dict) -> dict:
    """run_sweep's keyword arguments: processes on the CPU, a cell's seeds batched on a GPU."""
    return common.cff_sweep_options(s, train_cff_seeds)


def plan(s: dict) -> list[CFFConfig]:
    """The run configs: levels x margin arms x seeds, then each operating point's levels x the two arms x
    max(seeds, :data:`POINT_SEEDS`) with its overrides."""
    configs = [Settings.run_config(s, dataset=s["dataset"], margin_mode=mode, stabilizer=s["stabilizer"], m0=s["m0"],
                                   seed=seed, **_knob_settings(s, level))
               for level in s["levels"] for mode in s["margin_modes"] for seed in range(s["seeds"])]
    configs += [Settings.run_config(s, dataset=s["dataset"], margin_mode=mode, stabilizer=s["stabilizer"], m0=s["m0"],
                                    seed=seed, **_knob_settings(s, level), **OPERATING_POINTS[point]["overrides"])
                for point in s["operating_points"] for level in OPERATING_POINTS[point]["levels"]
                for mode in common.ARMS for seed in range(max(s["seeds"], POINT_SEEDS))]
    return configs


def operating_point_of(config: CFFConfig | dict) -> str:
    """The operating point a run belongs to (:data:`OPERATING_POINTS`: one of its levels, every override matching),
    else "" (the sweep at the profile's setting)."""
    config = as_dict(config)
    for name, point in OPERATING_POINTS.items():
        if config["aug_level"] in point["levels"] and all(config[k] == v for k, v in point["overrides"].items()):
            return name
    return ""


def point_label(point: str) -> str:
    """How a row names the operating point it is read at, e.g. ``[two-epoch: aug_level 1, epochs 2]``."""
    spec = OPERATING_POINTS[point]
    settings_text = ", ".join([f"aug_level {'/'.join(map(str, spec['levels']))}",
                               *(f"{k} {v}" for k, v in spec["overrides"].items())])
    return f"[{point}: {settings_text}]"


# The regime search (python -m lib.regime --study 03): the paper's sweep spans ≈ 97% to 25% on SVHN; at cpu our MNIST
# levels span 80% to 12% after 8 epochs, so the easy end misses the paper's 97% (within 5 points [ours]). Study 2's
# ease search brought MNIST to 94.2% after 32 epochs: each level once at that length, clamp arm, seed 0, to see
# whether the sweep's easy end reaches the paper's and where its hard levels land (their accuracy and CAR). At 32
# epochs the hard levels end at CAR 23% (the 25% point needs 50%); the CAR is high early (70-80% during the first
# epoch at every level, 45-54% during the second), so each level is also trained for 1 and 2 epochs: can a short run
# be hard (25% within 5 points) and saturated at once? The paper's "not fully converged" paths fit a short run.
REGIME_SEARCH = ({"epochs": 32}, {"epochs": 1}, {"epochs": 2})


def regime_search_configs(s: dict) -> list[CFFConfig]:
    """The search's runs: the clamp arm at seed 0 at every level, with each change of :data:`REGIME_SEARCH`."""
    return [Settings.run_config(s, dataset=s["dataset"], margin_mode="clamp", stabilizer=s["stabilizer"], m0=s["m0"],
                                seed=0, **_knob_settings(s, level), **change)
            for change in REGIME_SEARCH for level in s["levels"]]


def regime_table(records: list[dict], shipped: pd.DataFrame, s: dict) -> pd.DataFrame:
    """One row per level and setting: the shipped runs (their seeds' mean accuracy, both arms; the clamp arm's CAR),
    each operating point's runs (the same means), then each search run: its top-1, CAR and wall seconds, and whether
    it meets the conditions of a published point (``in_regime``: at least 92% for the paper's 97%, or within 5 points
    of 26.8% or 25% with CAR >= 50%)."""
    keys = sorted({k for change in REGIME_SEARCH for k in change})

    def meets(top1, car):
        return any(not point_conditions(*point).misses((top1,) if point[1] < 1 else (top1, top1, car))
                   for point in PUBLISHED_POINTS)
    rows, everything, shipped = [], shipped, shipped_runs(shipped)
    for level in s["levels"]:
        base = shipped[shipped[s["knob"]] == level] if len(shipped) else shipped
        top1, car = (common.mean_accuracy(base), common.clamp_car(base)) if len(base) else (np.nan, np.nan)
        rows.append(dict(level=level, setting=f"shipped ({base.seed.nunique() if len(base) else 0} seeds)",
                         top1=top1, car_layer0_final=car, wall_s=np.nan, in_regime=meets(top1, car)))
    at = operating_point_column(everything)
    for point in s.get("operating_points") or []:  # a point's seeds read as the search's one seed is
        overrides = ", ".join(f"{k} = {v}" for k, v in OPERATING_POINTS[point]["overrides"].items())
        for level in OPERATING_POINTS[point]["levels"]:
            runs = everything[(at == point) & (everything[s["knob"]] == level)]
            if len(runs):
                top1, car = common.mean_accuracy(runs), common.clamp_car(runs)
                rows.append(dict(level=level, setting=f"{point} point: {overrides} ({runs.seed.nunique()} seeds)",
                                 top1=top1, car_layer0_final=car, wall_s=np.nan, in_regime=meets(top1, car)))
    for record in records:
        c, m = record["config"], record["metrics"]
        top1, car = 100 * m.get("top1", np.nan), 100 * m.get("car_layer0_final", np.nan)
        rows.append(dict(level=level_of(c, s["knob"]), setting=", ".join(f"{k} = {c[k]}" for k in keys),
                         top1=top1, car_layer0_final=car, wall_s=record["timings"].get("wall_s", np.nan),
                         in_regime=meets(top1, car)))
    return pd.DataFrame(rows).sort_values(["level", "setting"], kind="stable").reset_index(drop=True)


def level_of(config: CFFConfig | dict, knob: str):
    """The knob level of a run config (or its record form)."""
    config = as_dict(config)
    if knob == "aug_level":
        return config["aug_level"]
    return config["dataset_options"]["difficulty"]


def runs_frame(records: list[dict], knob: str | None = None) -> pd.DataFrame:
    """One row per run, with both knobs' settings (``aug_level``, ``difficulty``: the cells lib.decide reads) and,
    given the study's ``knob``, its level in column ``level`` (a run alone cannot say which knob was swept)."""
    factors = {"aug_level": lambda c: as_dict(c)["aug_level"],
               "difficulty": lambda c: as_dict(c)["dataset_options"].get("difficulty"),
               "operating_point": operating_point_of}
    return common.runs_frame(records, factors={**factors, **({"level": lambda c: level_of(c, knob)} if knob else {})})


def curves_frame(records: list[dict], knob: str) -> pd.DataFrame:
    """Long table of per-epoch, per-layer curves of every run, with its knob level in column ``level`` and its
    operating point in ``operating_point``."""
    return common.curves_frame(records, factors={"level": lambda c: level_of(c, knob),
                                                 "operating_point": operating_point_of})


def analyze(runs: pd.DataFrame, s: dict) -> pd.DataFrame:
    """One row per level: accuracy per arm and overall, VR and its tests, layer-0 CAR (percent): ``car0_<arm>``
    the all-epoch mean, the final epoch's CAR and gradient-norm ratio in :data:`common.FINAL_COLUMNS`. The sweep at
    the profile's setting only: an operating point's runs are read apart (:func:`paper_vs_reproduced`)."""
    runs = shipped_runs(runs)
    rows = []
    for level in s["levels"]:
        ok = runs[(runs.level == level) & (runs.status == "ok")]
        row = dict(level=level, runs_ok=len(ok), runs_not_ok=int(((runs.level == level) & (runs.status != "ok")).sum()))
        for mode in ("clamp", "subtract"):
            arm = ok[ok.margin_mode == mode]
            row[f"top1_{mode}"] = 100 * arm.top1.mean()
            row[f"sd_{mode}"] = 100 * arm.top1.std()
            row[f"car0_{mode}"] = 100 * arm.car_layer0.mean()
        row["top1_mean"] = 100 * ok[ok.margin_mode.isin(["clamp", "subtract"])].top1.mean()
        arms = common.compare_margin_arms(ok)
        variance = arms["variance"] if arms else {}
        for key in ("vr", "f_p", "ci_low", "ci_high", "levene_p", "brown_forsythe_p"):
            row[key] = variance.get(key, np.nan)
        row["welch_p"] = arms["welch"].p_value if arms else np.nan
        row["density"] = ok.positive_pair_density.mean()
        rows.append(row)
    return pd.DataFrame(rows).merge(common.final_epoch_columns(runs, "level"), on="level", how="left")


def relative_accuracy(acc, chance: float, ceiling: float):
    """Where an accuracy lies between chance (0) and the ceiling (1); NaN if the ceiling is at chance."""
    if ceiling <= chance:
        return np.full(np.shape(acc), np.nan)
    return (np.asarray(acc, dtype=float) - chance) / (ceiling - chance)


def spearman_exact(x, y) -> tuple[float, float]:
    """Spearman's rho and its two-sided p-value, exact by enumerating every permutation up to 8 points.

    A sweep has a handful of levels; there the asymptotic p-value of ``scipy.stats.spearmanr`` is
    far too small (rho = 1 on 5 points gets p ~ 1e-24; the exact p is 2/5! = 0.017).
    """
    rho = float(st.spearmanr(x, y).statistic)
    n = len(x)
    if n > 8 or not np.isfinite(rho):
        return rho, float(st.spearmanr(x, y).pvalue)
    rank_x, rank_y = st.rankdata(x), st.rankdata(y)
    perms = np.array(list(itertools.permutations(rank_y)))
    rhos = np.array([np.corrcoef(rank_x, perm)[0, 1] for perm in perms])
    return rho, float(np.mean(np.abs(rhos) >= abs(rho) - 1e-12))


FAMILY = "study 3"  # its claims are Holm-corrected together
MATCH_DISTANCE = 0.15  # a level measures a published point within this share of the chance-to-ceiling range [ours]
# The central claim, declared once: the VR near 25% accuracy over the VR near the ceiling (16.73 / 0.25 on SVHN).
HARD_OVER_CEILING = PUBLISHED_POINTS[2][1] / PUBLISHED_POINTS[0][1]  # 16.73 / 0.25
SCALE_TEXT = ("cpu: MNIST stands in for SVHN (not in the offline data), difficulty set by augmentation levels 0-4, "
              "study 1's cpu model, 5 seeds per arm, and the two-epoch operating point: level 1 after 2 epochs, "
              "12 seeds per arm, the regime search's closest setting to the hard points' accuracy and CAR, its 97% "
              "part study 2's ease-matched runs (32 epochs); quick: shapes at difficulty 0.1-0.5")
POINT_CONDITION = "our accuracy within 5 points of the paper's [ours] (accuracy is the moderator [paper/summary])"
def point_conditions(acc: float, vr: float, tag: str) -> verdicts.Conditions:
    """Every condition the paper states for one published point: its accuracy (the moderator: the easy point at
    least as easy, within :data:`common.EASE_TOLERANCE`; a hard point within that many points either side), and for
    a VR above 1, variance inflation, the clamp arm's high layer-0 CAR."""
    if vr < 1:
        return verdicts.Conditions((common.ease_regime(acc, tag),))
    return verdicts.Conditions((*common.accuracy_near(acc, tag), common.CAR_REGIME))


def _point_test(acc: float) -> dict:
    """How one published point's VR is tested, as its statement declares it: the paper's VR, its tag, and the
    conditions the paper states for it (:func:`point_conditions`)."""
    _, vr, tag = next(point for point in PUBLISHED_POINTS if point[0] == acc)
    return dict(measure="variance_ratio", published=vr, value_evidence=tag, regime=point_conditions(acc, vr, tag),
                family=FAMILY)


STATEMENTS = (
    verdicts.Statement("s3.difficulty", "the VR rises as the task gets harder: 0.25 at about 97% accuracy, 2.18 at "
                       "26.8%, 16.73 at 25% (SVHN)", "[paper/summary]",
                       "the VR at the level matched to 25% over the VR at the level matched to 97% (66.9 = 16.73 / "
                       "0.25) [ours: derived], levels matched by relative accuracy; " + SCALE_TEXT,
                       "both parts': the hard level's accuracy and CAR, the easy level's accuracy",
                       # its conditions are its two parts', read at the levels the row matches
                       measure="vr_contrast", published=HARD_OVER_CEILING, family=FAMILY,
                       value_evidence="[ours: derived from 16.73 [paper/summary] and 0.25 [paper]]",
                       published_text=f"{HARD_OVER_CEILING:.3g} = 16.73 / 0.25"),
    verdicts.Statement("s3.vr_26_8", "VR 2.18 at 26.8% accuracy", "[summary]",
                       "the VR at our level nearest 26.8% in relative accuracy; " + SCALE_TEXT,
                       POINT_CONDITION + "; layer-0 CAR >= 50% (a VR above 1) [summary]", **_point_test(26.8)),
    verdicts.Statement("s3.vr_25", "VR 16.73 at 25% accuracy", "[paper/summary]",
                       "the VR at our level nearest 25% in relative accuracy; " + SCALE_TEXT,
                       POINT_CONDITION + "; layer-0 CAR >= 50% (a VR above 1) [summary]", **_point_test(25.0)),
    verdicts.Statement("s3.vr_97", "VR 0.25 at about 97% accuracy (SVHN)", "[paper]",
                       "the VR at our easiest level: the same runs as study 2's SVHN reversal, shown here",
                       POINT_CONDITION + ": at least 92%", decided="s2.svhn_vr"),
)
POINT_IDS = {26.8: "s3.vr_26_8", 25.0: "s3.vr_25", 97.0: "s3.vr_97"}
DIFFICULTY = verdicts.statement_of(STATEMENTS, "s3.difficulty").claim(
    "difficulty: VR at the level matched to 25% accuracy over VR at the level matched to 97%")
# The paper's SVHN point at ≈ 97% (VR 0.25) is the same published number as study 2's SVHN reversal, and at every
# profile the same runs (study 2's SVHN entry; at cpu both read MNIST, the configs apart by train_subset alone): one
# experiment, one verdict. Study 2 owns it; this study shows the point's number and names the verdict's row.
OWNED_ELSEWHERE = {PUBLISHED_POINTS[0][0]: "study 2 (02_cross_dataset_reversal), its row \"SVHN: VR = "
                                           "Var(clamp)/Var(subtract)\""}


def point_values(runs: pd.DataFrame, level, vr: float) -> tuple:
    """What :func:`point_conditions` is read on at one level, in its order."""
    acc = common.mean_accuracy(runs[runs.level == level])
    return (acc,) if vr < 1 else (acc, acc, level_car(runs, level))


def seed_arms_at_level(runs: pd.DataFrame, level) -> tuple[dict, dict]:
    """Clamp's and subtract's ``{seed: top-1 in percent}`` at one level: the engine's input."""
    seeds = common.seed_observations(runs[runs.level == level], [], ["top1"])
    return tuple({int(r.seed): 100 * float(r.top1) for r in seeds[seeds.margin_mode == mode].itertuples()}
                 for mode in common.ARMS)


def level_car(runs: pd.DataFrame, level) -> float | None:
    """The clamp arm's final-epoch layer-0 CAR (percent) at one level: where the regime of a VR > 1 is read."""
    return common.clamp_car(runs[(runs.level == level) & (runs.status == "ok")])


def easy_point(runs: pd.DataFrame, s: dict, seeds: int) -> tuple[tuple[dict, dict], float] | None:
    """The 97% part of the contrast at an operating point (:data:`EASY_POINT`): of study 2's ``runs`` (its runs frame,
    with ``dataset`` and ``operating_point``), the runs of its point on this study's dataset and study 2's profile
    ``seeds`` (its look 1), as (clamp, subtract) ``{seed: top-1 %}`` and their mean accuracy; None without any."""
    if not len(runs):
        return None
    runs = runs[(runs.operating_point == EASY_POINT[1]) & (runs.dataset == s["dataset"]) & (runs.status == "ok")
                & (runs.seed < seeds)]
    if not len(runs):
        return None
    return seed_arms_at_level(runs.assign(level=0), 0), common.mean_accuracy(runs)


def verdict_table(runs: pd.DataFrame, looks: dict, settings: dict, *, summary: pd.DataFrame, chance: float,
                  stand_in: str | None, easy_part: tuple | None = None) -> pd.DataFrame:
    """The verdict table of ``runs``, the planned claims in ``looks`` read at their look: lib.core.looks.two_looks
    calls it once a look (through lib.notebook.Notebook.two_looks). Each published point is matched on ``summary``,
    look 1's, at every look. A run's ``level`` is its setting of the swept knob, a column of every runs frame. Each
    operating point's runs are read apart, their contrast's 97% part ``easy_part`` (:func:`easy_point`)."""
    runs = runs.assign(level=runs[settings["knob"]])
    at = operating_point_column(runs)
    points = {point: runs[at == point] for point in settings.get("operating_points") or []}
    return paper_vs_reproduced(summary, chance, stand_in, shipped_runs(runs), knob=settings["knob"], looks=looks,
                               points=points, easy_part=easy_part)


def point_claims(point: str, runs: pd.DataFrame, knob: str, on: str, easy: tuple | None) -> list:
    """The claims read again at an operating point, beside the shipped rows: the central contrast of the point's
    level over the 97% point (``easy``, :func:`easy_point`; None: not measured), then each hard published point's
    VR at that level. Every condition is read on the point's own runs; the 97% part's accuracy on its own."""
    label, epochs = point_label(point), OPERATING_POINTS[point]["overrides"].get("epochs")
    [level] = OPERATING_POINTS[point]["levels"]
    arms = seed_arms_at_level(runs, level)
    hard_point, easy_published = PUBLISHED_POINTS[2], PUBLISHED_POINTS[0]
    parts = tuple(replace(part, measured=f"{where}: {part.measured}")
                  for published, where in ((hard_point, f"level {level:g}"), (easy_published, "the 97% point"))
                  for part in point_conditions(*published).parts)
    contrast = replace(DIFFICULTY, id=verdicts.point_id(DIFFICULTY.id, point), regime=verdicts.Conditions(parts),
                       quantity=f"{label} {DIFFICULTY.quantity}{on}: level {level:g} after {epochs} epochs over the "
                                f"97% point (study 2's {EASY_POINT[1]} runs, their look-1 seeds)")
    if easy is None:
        out = [replace(verdicts.evaluate(contrast), notes={"why": f"the 97% point ({EASY_POINT[0]}, operating point "
                                                                  f"{EASY_POINT[1]}) has no finished runs here"})]
    else:
        easy_arms, easy_accuracy = easy
        out = [verdicts.evaluate_contrast(contrast, arms, [easy_arms], regime_value=(
            *point_values(runs, level, hard_point[1]), easy_accuracy))]
    cells = tuple(verdicts.cell(**{knob: level, "margin_mode": mode, "operating_point": point})
                  for mode in common.ARMS)
    for acc, vr, _ in PUBLISHED_POINTS[1:]:
        claim = verdicts.statement_of(STATEMENTS, POINT_IDS[acc]).claim(
            f"{label} VR at {acc:g}% accuracy{on}: our level {level:g} after {epochs} epochs")
        claim = replace(claim, id=verdicts.point_id(claim.id, point), cells=cells)
        out.append(verdicts.evaluate(claim, *arms, regime_value=point_values(runs, level, vr)))
    return out


def paper_vs_reproduced(summary: pd.DataFrame, chance: float, stand_in: str | None, runs: pd.DataFrame, *,
                        knob: str, looks: dict | None = None, points: dict | None = None,
                        easy_part: tuple | None = None) -> pd.DataFrame:
    """Every published number through the verdict engine (lib.core.verdicts), on the seed-level observations of
    ``runs``: the central claim (:data:`DIFFICULTY`, a contrast of two levels' VRs) and each published point's
    VR, Holm-corrected as one family; then our descriptions of the sweep: the trend over levels (exact
    Spearman), where the largest VR lies, and the accuracy range the knob spans.

    Accuracies differ between datasets, so each published point is matched with our level nearest to it in
    *relative* accuracy, (acc - chance) / (ceiling - chance), where the ceiling is the paper's 97% for SVHN and
    our easiest level's accuracy for us; a point with no level within :data:`MATCH_DISTANCE` is not measured.
    ``stand_in`` names the data when it is not SVHN. A point's VR names the cells of its level's arms (``knob``: the
    column they are read by) for lib.decide; ``looks``: the claims read at a planned look 2 (lib.core.looks.two_looks).
    ``summary`` is what the points are matched on: at a look 2, look 1's (the shipped runs), so that a claim keeps the
    level, and the name, it was planned with while ``runs`` adds its look-2 seeds. ``points``: each operating point's
    runs, whose claims (:func:`point_claims`, the contrast's 97% part ``easy_part``) join the same family.
    """
    on = f" (on {stand_in}, not SVHN)" if stand_in else ""
    measured = summary[np.isfinite(summary.vr)].reset_index(drop=True)
    tested, matched, owned = [], {}, []
    ceiling = summary.top1_mean.max() if len(summary) else np.nan
    ours_rel = relative_accuracy(measured.top1_mean, chance, ceiling) if len(measured) else np.array([])
    for acc, vr, tag in PUBLISHED_POINTS:
        target = float(relative_accuracy(acc, PUBLISHED_CHANCE, PUBLISHED_CEILING))
        quantity = f"VR at {acc:g}% accuracy ({target:.2f} of the way from chance to the ceiling){on}"
        i = int(np.argmin(np.abs(ours_rel - target))) if len(measured) else None
        distance = abs(float(ours_rel[i]) - target) if i is not None else np.nan
        if i is None:
            why = "too few finished runs"
        elif not distance <= MATCH_DISTANCE:  # also when the relative accuracy is undefined
            why = (f"no level at this relative accuracy (the nearest, level {measured.iloc[i].level:g}, is "
                   f"{distance:.2f} of the chance-to-ceiling range away)")
        else:
            why = ""
        if acc in OWNED_ELSEWHERE:  # another study decides it: its number is shown here, as a check
            claim = verdicts.Claim(quantity, "variance_ratio", vr, tag, kind="check")
        else:
            claim = verdicts.statement_of(STATEMENTS, POINT_IDS[acc]).claim(quantity)
        if why:
            if acc in OWNED_ELSEWHERE:
                owned.append(verdicts.check(f"{quantity}: the same experiment as study 2's SVHN reversal",
                                            f"not measured: {why}", f"{vr:g}", tag, POINT_IDS[acc]))
            else:
                tested.append(replace(verdicts.evaluate(claim), notes={"why": why}))
            continue
        r = measured.iloc[i]
        matched[acc] = r.level
        level = int(r.level) if knob == "aug_level" else float(r.level)  # as the run configs hold it
        claim = replace(claim, quantity=f"{claim.quantity}: our level {r.level:g}, {r.top1_mean:.1f}% accuracy, "
                                        f"{float(ours_rel[i]):.2f} of the way",
                        cells=tuple(verdicts.cell(**{knob: level, "margin_mode": mode}) for mode in common.ARMS))
        if acc in OWNED_ELSEWHERE:
            shown = verdicts.evaluate(claim, *seed_arms_at_level(runs, r.level))
            owned.append(verdicts.check(
                f"{claim.quantity}: the same experiment as study 2's SVHN reversal",
                f"{shown.estimate:.3g} ({' vs '.join(map(str, shown.n))} seeds): decided in {OWNED_ELSEWHERE[acc]}"
                if shown.measured else "not measured", f"{vr:g}", tag, POINT_IDS[acc]))
            continue
        tested.append(verdicts.evaluate(claim, *seed_arms_at_level(runs, r.level),
                                        regime_value=point_values(runs, r.level, vr)))
    hard, easy = matched.get(PUBLISHED_POINTS[2][0]), matched.get(PUBLISHED_POINTS[0][0])
    if hard is not None and easy is not None and hard != easy:
        # the composite inherits the conditions of its two parts, each read at its own level
        hard_point, easy_point = PUBLISHED_POINTS[2], PUBLISHED_POINTS[0]
        parts = tuple(replace(part, measured=f"level {level:g}: {part.measured}")
                      for point, level in ((hard_point, hard), (easy_point, easy))
                      for part in point_conditions(*point).parts)
        claim = replace(DIFFICULTY, quantity=f"{DIFFICULTY.quantity}{on}: level {hard:g} over level {easy:g}",
                        regime=verdicts.Conditions(parts))
        tested.insert(0, verdicts.evaluate_contrast(
            claim, seed_arms_at_level(runs, hard), [seed_arms_at_level(runs, easy)],
            regime_value=point_values(runs, hard, hard_point[1]) + point_values(runs, easy, easy_point[1])))
    else:
        tested.insert(0, replace(verdicts.evaluate(DIFFICULTY), notes={
            "why": "no two distinct levels match 25% and 97% accuracy"}))
    for point, point_runs in (points or {}).items():  # beside the shipped rows, in the same family
        tested += point_claims(point, point_runs, knob, on, easy_part)
    rows = verdicts.decide(tested, looks) + owned
    if len(measured) >= 3:
        rho, p = spearman_exact(measured.top1_mean, measured.vr)
        rows.append(verdicts.check(
            "trend over levels: Spearman rho of accuracy and VR (exact p; levels as the unit, a description)",
            f"rho = {rho:+.2f} (p = {p:.2g}, {len(measured)} levels): "
            + ("VR rises as accuracy falls" if rho < 0 else "VR does not rise as accuracy falls"),
            "rho = -1 (3 points: 0.25, 2.18, 16.73)", "[paper/summary]"))
    if len(measured):
        top = measured.loc[measured.vr.idxmax()]
        interior = top.level not in (measured.level.min(), measured.level.max())
        rows.append(verdicts.check(
            "where the largest VR lies (a description)",
            f"largest VR {top.vr:.2f} (F-test p = {top.f_p:.2g}, "
            f"scipy's Brown–Forsythe p = {top.get('brown_forsythe_p', np.nan):.2g}) "
            f"at level {top.level:g} ({top.top1_mean:.1f}%), "
            f"an {'intermediate' if interior else 'end'} level", "largest VR at 25% (SVHN)", "[paper]"))
        lowest = summary.loc[summary.top1_mean.idxmin()]
        rows.append(verdicts.check(
            "accuracy range of the knob",
            f"{ceiling:.1f}% -> {lowest.top1_mean:.1f}% (chance {chance:.0f}%): spans "
            f"{1 - float(relative_accuracy(lowest.top1_mean, chance, ceiling)):.0%} of the way from our ceiling to "
            f"chance (the paper's: {1 - float(relative_accuracy(25.0, PUBLISHED_CHANCE, PUBLISHED_CEILING)):.0%})",
            "about 97% -> 25% (chance 10%)", "[paper]"))
    return verdicts.table(rows)
