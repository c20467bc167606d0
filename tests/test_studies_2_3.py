"""Studies 2 and 3: the augmentation-strength knob, per-dataset data handling, densities, verdicts."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from lib import PROJECT_ROOT
from lib.cff.diagnostics import expected_run_density, positive_pair_density
from lib.cff.training import CFFConfig, train_cff
from lib.core.augment import DISTORTION_LEVELS, distort, normalize
from lib.core.config import as_dict
from lib.core.data import DATASETS, DatasetNotFoundError, load_dataset
from lib.core.params import ParameterError
from lib.run.results import config_hash
from lib.studies import cross_dataset, difficulty_sweep
from tests.conftest import SHARED_DATA, missing_data


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def digit_images() -> torch.Tensor:
    """Real images (scikit-learn's digits, embedded) upscaled to 16x16 so that rotations show."""
    return load_dataset("digits", image_size=16).x_train[:400]


# ------------------------------------------------------------------ the augmentation-strength knob


def test_level_0_is_the_identity_and_draws_nothing(digit_images):
    g = gen(0)
    state = g.get_state()
    assert distort(digit_images, 0, g) is digit_images
    assert torch.equal(g.get_state(), state)  # so a level-0 run is the run without the knob


@pytest.mark.parametrize("level", DISTORTION_LEVELS[1:])
def test_every_level_is_a_valid_image_transformation(level, digit_images):
    out = distort(digit_images, level, gen(1))
    assert out.dtype == torch.uint8 and out.shape == digit_images.shape
    assert not torch.equal(out, digit_images)
    assert torch.equal(distort(digit_images, level, gen(1)), out)  # reproducible from the generator
    assert not torch.equal(distort(digit_images, level, gen(2)), out)  # and random across generators


def test_levels_are_distinct_and_the_mean_pixel_change_grows_with_the_level(digit_images):
    outs = [distort(digit_images, level, gen(3)) for level in DISTORTION_LEVELS]
    for i in range(len(outs)):
        for j in range(i + 1, len(outs)):
            assert not torch.equal(outs[i], outs[j]), f"levels {i} and {j} give the same images"
    change = [(o.float() - digit_images.float()).abs().mean().item() for o in outs]
    assert change[0] == 0
    assert all(a < b for a, b in zip(change, change[1:])), change
    # The severe level moves pixels by a large share of their range, not by rounding noise.
    assert change[-1] > 0.2 * 255


def test_distortion_is_independent_per_image():
    same = load_dataset("digits", image_size=16).x_train[:1].repeat(64, 1, 1, 1)
    out = distort(same, 2, gen(4)).flatten(1)
    assert len(torch.unique(out, dim=0)) == 64


@pytest.mark.parametrize("level", [-1, 5, 1.5, True, "2"])
def test_distort_rejects_a_bad_level(level, digit_images):
    with pytest.raises(ValueError, match="level"):
        distort(digit_images, level, gen(0))


def test_aug_level_in_the_cff_config():
    base = CFFConfig(dataset="shapes")
    assert base.aug_level == 0  # the default: no extra augmentation
    stronger = CFFConfig(dataset="shapes", aug_level=3)
    assert stronger.aug_level == 3 and config_hash(stronger) != config_hash(base)
    for bad in (5, -1, 1.0, "1"):
        with pytest.raises(ParameterError, match="aug_level"):
            CFFConfig(dataset="shapes", aug_level=bad)


def test_a_strong_level_changes_the_run(tiny_cff):
    plain = train_cff(CFFConfig(seed=1, **tiny_cff))
    strong = train_cff(CFFConfig(seed=1, aug_level=4, **tiny_cff))
    assert strong["status"] == "ok" and strong["curves"]["loss"] != plain["curves"]["loss"]


# ------------------------------------------------------------------------------ real datasets


@pytest.mark.parametrize("name", ["cifar10", "fashion_mnist", "mnist"])
def test_real_datasets_are_normalised_with_their_own_statistics(name):
    if not (SHARED_DATA / f"{name}.npz").is_file():
        pytest.skip(missing_data(str(SHARED_DATA / f"{name}.npz")))
    ds = load_dataset(name, data_root=SHARED_DATA)
    x = normalize(ds.x_train[:4000], ds.mean, ds.std)
    per_channel = x.transpose(0, 1).flatten(1)
    assert per_channel.mean(1).abs().max() < 0.05 and (per_channel.std(1) - 1).abs().max() < 0.05


def test_augmentation_per_dataset_follows_studies_md():
    """CIFAR-10 pad 12 + flip [code], CIFAR-100 pad 4 + flip [code], SVHN and Fashion-MNIST pad 4, and
    no flip for the digit sets [ours]."""
    expected = {"cifar10": (12, True), "cifar100": (4, True), "svhn": (4, False), "fashion_mnist": (4, False),
                "mnist": (4, False)}
    for name, (padding, flip) in expected.items():
        c = CFFConfig(dataset=name)
        assert (c.padding, c.flip) == (padding, flip) == (DATASETS[name].crop_padding, DATASETS[name].flip)
    assert not any(DATASETS[d].flip for d in ("svhn", "mnist", "digits"))


# ------------------------------------------------------------------- study 2: data and density


def _study2_settings(**overrides) -> dict:
    p = dict(profile="smoke", margin_modes=["clamp", "subtract"], stabilizer="detach", m0=0.4, m_last=0.1,
             temperature=0.15, lr=0.004, force=False)
    return cross_dataset.resolve({**p, **overrides})


def test_missing_dataset_fails_with_the_data_layers_message(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))
    s = _study2_settings(datasets=["cifar100", "shapes10"], skip_missing=False)
    with pytest.raises(DatasetNotFoundError, match="'cifar100' was not found"):
        cross_dataset.check_data(s, str(tmp_path))


def test_skip_missing_leaves_the_dataset_out_and_keeps_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))
    s = _study2_settings(datasets=["cifar100", "shapes10"], skip_missing=True)
    sources, skipped = cross_dataset.check_data(s, str(tmp_path))
    assert list(sources) == ["shapes10"] and list(skipped) == ["cifar100"]
    assert "was not found" in skipped["cifar100"] and "What you can do" in skipped["cifar100"]
    assert {c.dataset for c in cross_dataset.plan(s)} == {"shapes"}
    table = cross_dataset.paper_vs_reproduced(pd.DataFrame(columns=["dataset", "like", "vr"]), skipped,
                                              pd.DataFrame(columns=["dataset", "margin_mode", "seed", "status"]))
    cifar100 = table[table.quantity.str.startswith("CIFAR-100")].iloc[0]
    assert cifar100.verdict == "not measured" and cifar100.ours.startswith("not measured: skipped: ")
    assert "was not found" in cifar100.ours


def test_every_missing_dataset_skipped_is_a_parameter_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "no_cache"))
    s = _study2_settings(datasets=["cifar100", "svhn"], skip_missing=True)
    with pytest.raises(ParameterError, match="datasets"):
        cross_dataset.check_data(s, str(tmp_path))


def test_run_density_matches_the_expectation_of_train_cffs_batching():
    """Simulate train_cff's batching (random 10% held out, shuffled batches, the last one smaller) on
    a class-balanced label set: the mean density is the study's expectation."""
    m, k, batch = 1000, 10, 128
    labels = torch.arange(m) % k
    g = gen(0)
    per_run = []
    for _ in range(300):
        order = torch.randperm(m, generator=g)
        train = labels[order[round(0.1 * m):]]
        perm = torch.randperm(len(train), generator=g)
        per_run.append(np.mean([positive_pair_density(torch.cat([y, y]))
                                for y in train[perm].split(batch)]))
    expected = expected_run_density(m, batch, k)
    assert abs(np.mean(per_run) - expected) < 4 * np.std(per_run) / math.sqrt(len(per_run))
    # the last, smaller batch pulls the run's mean below a full batch's expectation
    assert expected < cross_dataset.expected_positive_pair_density(batch, k, m)


def test_the_density_a_run_records_matches_the_expectation(tiny_cff):
    """A real run on the class-balanced shapes data records a density within 5% of the expectation."""
    config = {**tiny_cff, "epochs": 12, "probe_epochs": 1}
    options = config["dataset_options"]
    measured = train_cff(CFFConfig(**config))["positive_pair_density"]
    expected = expected_run_density(options["n_train"], config["batch_size"], options["num_classes"])
    assert measured == pytest.approx(expected, rel=0.05)


def test_entries_round_trip_through_their_configs():
    s = _study2_settings(datasets=["shapes10", "shapes100", "shapes10_easy"])
    entries = [cross_dataset.entry_of(c) for c in cross_dataset.plan(s)]
    assert sorted(set(entries)) == ["shapes10", "shapes100", "shapes10_easy"]
    assert entries.count("shapes100") == len(s["margin_modes"]) * s["seeds"]


# ------------------------------------------------------------------ verdict tables (both studies)


def _summary_row(dataset, like, vr, p, car, acc=90.0):
    return dict(dataset=dataset, like=like, vr=vr, f_p=p, ci_low=vr / 3, ci_high=vr * 3, vr_top5=np.nan, car0_clamp=car,
                car0_clamp_final=car, final_epoch=8, top1_clamp=acc, top1_subtract=acc, density_measured=50.0,
                density_expected=50.0, density_balanced=49.0)


def _runs(dataset, vr, car, seeds=8):
    """Seed-level runs of one dataset whose sample variance ratio clamp / subtract is exactly ``vr``."""
    z = np.random.default_rng(0).normal(size=seeds)
    z = (z - z.mean()) / z.std(ddof=1)
    return [dict(dataset=dataset, margin_mode=mode, seed=i, status="ok", run_id=f"{dataset}-{mode}-{i}",
                 top1=0.5 + 0.01 * scale * x, top5=np.nan, car_layer0_final=car / 100)
            for mode, scale in (("clamp", math.sqrt(vr)), ("subtract", 1.0)) for i, x in enumerate(z)]


def test_study2_uses_the_real_dataset_before_a_stand_in_and_says_which():
    planted = [("fashion_mnist", "fashion_mnist", 0.1, 40.0), ("mnist", "svhn", 3.0, 70.0),
               ("cifar10", "cifar10", 0.8, 38.0)]
    summary = pd.DataFrame([_summary_row(d, like, vr, 0.01, car) for d, like, vr, car in planted])
    runs = pd.DataFrame([r for d, _, vr, car in planted for r in _runs(d, vr, car)])
    by = cross_dataset.paper_vs_reproduced(summary, {}, runs).set_index("quantity")
    fm = by.loc["Fashion-MNIST: VR = Var(clamp)/Var(subtract)"]  # its own entry: no stand-in named
    assert fm.ours.startswith("0.1 [") and fm.n == "8 vs 8"
    assert "SVHN: VR = Var(clamp)/Var(subtract) (on mnist, a stand-in)" in by.index
    assert by.loc["CIFAR-100: VR = Var(clamp)/Var(subtract)"].ours == "not measured: not in this profile's datasets"
    # the reversal: CIFAR-10's 0.8 over the geometric mean of 3 (mnist for SVHN) and 0.1
    reversal = by.loc[by.index.str.startswith("the reversal")].iloc[0]
    assert reversal.ours.startswith(f"{0.8 / math.sqrt(3.0 * 0.1):.3g} [")
    assert "SVHN (mnist), Fashion-MNIST (fashion_mnist)" in reversal.name
    # mnist, the only dataset with CAR >= 50%, is also the only one with significant inflation
    assert by.loc["high CAR is necessary, not sufficient (a description across datasets)"].ours.endswith(
        "every dataset with CAR >= 50% shows significant inflation")


def _level_runs(level, vr, acc, seeds=8):
    z = np.random.default_rng(1).normal(size=seeds)
    z = (z - z.mean()) / z.std(ddof=1)
    return [dict(level=level, margin_mode=mode, seed=i, status="ok", run_id=f"{level}-{mode}-{i}",
                 top1=acc / 100 + 0.01 * scale * x)
            for mode, scale in (("clamp", math.sqrt(vr)), ("subtract", 1.0)) for i, x in enumerate(z)]


def test_study3_matches_published_points_by_relative_accuracy():
    # chance 10%, ceiling 95%: 26% accuracy lies 0.19 of the way up, as the paper's 26.8% of 97%
    levels = [(0, 95.0, 0.3), (1, 70.0, 1.5), (2, 26.0, 12.0), (3, 12.0, 2.0)]
    summary = pd.DataFrame([_level_row(level, acc, vr, 0.04) for level, acc, vr in levels])
    runs = pd.DataFrame([r for level, acc, vr in levels for r in _level_runs(level, vr, acc)])
    table = difficulty_sweep.paper_vs_reproduced(summary, chance=10.0, stand_in="mnist", runs=runs, knob="aug_level")
    ceiling, hard = _by_start(table, "VR at 97% accuracy"), _by_start(table, "VR at 26.8% accuracy")
    # the 97% point is study 2's SVHN reversal (the same runs): shown here, decided there
    assert ceiling.quantity.endswith(": our level 0, 95.0% accuracy, 1.00 of the way: the same experiment as study "
                                     "2's SVHN reversal")
    assert ceiling.kind == "check" and ceiling.ours.startswith("0.3 (8 vs 8 seeds): decided in study 2")
    assert hard.quantity.endswith(": our level 2, 26.0% accuracy, 0.19 of the way")
    assert hard.ours.startswith("12 [")
    assert all("(on mnist, not SVHN)" in q for q in table[table.kind == "claim"].quantity)
    # the central claim: level 2's VR over level 0's, 12 / 0.3 = 40 against the published 16.73 / 0.25
    difficulty = table.iloc[0]
    assert difficulty["id"] == difficulty_sweep.CENTRAL and difficulty.ours.startswith("40 [")
    assert difficulty.quantity.endswith("level 2 over level 0")
    assert "rho" in _by_start(table, "trend over levels").ours
    assert "an intermediate level" in _by_start(table, "where the largest VR lies").ours


def _by_start(table: pd.DataFrame, start: str) -> pd.Series:
    hits = table[table.quantity.str.startswith(start)]
    assert len(hits) == 1, (start, list(table.quantity))
    return hits.iloc[0]


def _level_row(level, acc, vr, p):
    return dict(level=level, top1_mean=acc, vr=vr, f_p=p, ci_low=vr / 3, ci_high=vr * 3)


def test_study3_level_parameters_are_checked():
    p = dict(profile="smoke", margin_modes=["clamp", "subtract"], stabilizer="detach", m0=0.4, m_last=0.1,
             temperature=0.15, lr=0.004, force=False)
    for name, value in [("levels", [0, 7]), ("levels", []), ("levels", [1, 1]), ("knob", "rotation"),
                        ("seeds", 1), ("margin_modes", ["clamp"])]:
        with pytest.raises(ParameterError, match=name):
            difficulty_sweep.resolve({**p, name: value})
    with pytest.raises(ParameterError, match="knob"):  # only the generator has a difficulty
        difficulty_sweep.resolve({**p, "dataset": "mnist", "knob": "difficulty", "levels": [0.1]})
    s = difficulty_sweep.resolve({**p, "knob": "difficulty", "levels": [0.5, 0.1]})
    assert s["levels"] == [0.1, 0.5]
    levels = [difficulty_sweep.level_of(c, "difficulty") for c in difficulty_sweep.plan(s)]
    assert levels[::s["seeds"] * 2] == [0.1, 0.5]


def test_study3_another_dataset_drops_the_profiles_shapes_options():
    p = dict(profile="smoke", margin_modes=["clamp", "subtract"], stabilizer="detach", m0=0.4, m_last=0.1,
             temperature=0.15, lr=0.004, force=False)
    s = difficulty_sweep.resolve({**p, "dataset": "mnist"})
    assert s["dataset_options"] == {} and {c.dataset for c in difficulty_sweep.plan(s)} == {"mnist"}
    with pytest.raises(ParameterError, match="dataset_options"):
        difficulty_sweep.resolve({**p, "dataset": "mnist", "dataset_options": {"num_classes": 10}})


def test_spearman_exact_p_value_enumerates_the_permutations():
    rho, p = difficulty_sweep.spearman_exact([1, 2, 3, 4, 5], [10, 8, 6, 4, 2])
    assert rho == pytest.approx(-1) and p == pytest.approx(2 / 120)  # only the two perfect orders are as extreme
    # one adjacent swap of 4 ranks: rho = 0.8; as extreme are the 3 swaps and their 3 reversals, plus
    # the 2 perfect orders: 8 of 4! = 24 permutations
    rho, p = difficulty_sweep.spearman_exact([1, 2, 3, 4], [1, 3, 2, 4])
    assert rho == pytest.approx(0.8) and p == pytest.approx(8 / 24)


# ------------------------------------------------------------------ profiles and notebook parameters (studies 1-3)


@pytest.mark.parametrize("notebook", ["01_margin_factorial", "02_cross_dataset_reversal", "03_difficulty_sweep"])
def test_every_profile_key_is_a_notebook_parameter_and_config_fields_default_to_none(notebook):
    """A profile key the notebook cannot override would be a hidden setting; a config field with a
    value in the parameters cell would be a second default beside CFFConfig's."""
    import dataclasses
    from pathlib import Path

    from lib.studies import margin_factorial

    source = (Path(__file__).resolve().parents[1] / "notebooks" / f"{notebook}.py").read_text()
    cell = source.split('# %% tags=["parameters"]\n', 1)[1].split("\n# %%", 1)[0]
    defaults: dict = {}
    exec(cell, defaults)
    module = {"01_margin_factorial": margin_factorial, "02_cross_dataset_reversal": cross_dataset,
              "03_difficulty_sweep": difficulty_sweep}[notebook]
    fields = {f.name for f in dataclasses.fields(CFFConfig)}
    for profile, overrides in module.PROFILES.items():
        assert set(overrides) <= set(defaults), (profile, set(overrides) - set(defaults))
    for name in set(defaults) & fields:
        assert defaults[name] is None, f"{notebook}: {name} = {defaults[name]!r}"
    assert module.TRAIN is train_cff


def test_a_config_parameter_left_as_none_takes_the_profile_else_the_config_default():
    from lib.studies import margin_factorial

    p = dict(profile="smoke", margin_modes=["clamp"], stabilizers=["detach"], dose_m0=0.2, device="cpu")
    s = margin_factorial.resolve(p)
    assert s["embed_dim"] == margin_factorial.PROFILES["smoke"]["embed_dim"]  # the profile's
    assert (s["m0"], s["lr"]) == (CFFConfig.m0, CFFConfig.lr)  # no profile sets them: CFFConfig's
    s = margin_factorial.resolve({**p, "m0": 0.3, "embed_dim": 16})
    assert {(c.m0, c.embed_dim) for c in margin_factorial.plan(s) if c.m0 != 0.2} == {(0.3, 16)}


def test_study3_regime_search_trains_every_level_once_per_length_and_keeps_the_recorded_ids():
    """The search is the clamp arm at seed 0, one run per level and change of REGIME_SEARCH, each differing from the
    profile's run at that level by the change alone; adding lengths leaves the ids of the runs already recorded."""
    s = difficulty_sweep.resolve({"profile": "cpu"})
    configs = difficulty_sweep.regime_search_configs(s)
    assert len(configs) == len(difficulty_sweep.REGIME_SEARCH) * len(s["levels"])
    shipped = {difficulty_sweep.level_of(c, s["knob"]): c for c in difficulty_sweep.plan(s)
               if c.margin_mode == "clamp" and c.seed == 0}
    for config in configs:
        base = shipped[difficulty_sweep.level_of(config, s["knob"])]
        changed = {k for k in vars(config) if getattr(config, k) != getattr(base, k)}
        assert changed <= {"epochs"}
    assert sorted({c.epochs for c in configs}) == sorted(change["epochs"] for change in difficulty_sweep.REGIME_SEARCH)
    recorded = PROJECT_ROOT / "results" / "runs" / "03_difficulty_sweep" / "cpu" / "regime_search"
    ids = {config_hash(c) for c in configs if c.epochs == 32}
    assert ids <= {p.stem for p in recorded.glob("*.json")}


def _point_frame(clamp, subtract, car=0.6, level=1):
    """An operating point's runs at one level: top-1 as fractions, the clamp arm's final CAR ``car``."""
    rows = [dict(run_id=f"{mode}-{seed}", level=level, aug_level=level, margin_mode=mode, seed=seed, top1=value,
                 status="ok",
                 car_layer0_final=car, operating_point="two-epoch")
            for mode, values in (("clamp", clamp), ("subtract", subtract)) for seed, value in enumerate(values)]
    return pd.DataFrame(rows)


def test_study3_operating_point_reads_the_contrast_over_study_2s_easy_point_and_both_hard_points():
    """At the point, the contrast is VR(point's level) / VR(97% point), the latter on the arms it is given; its
    conditions are both parts' (the hard level's accuracy and CAR, the easy part's accuracy); the two hard points'
    VRs are read on the same arms, named by the point, with cells lib.decide can extend. Without the easy part the
    contrast is not measured, saying why."""
    rng = np.random.default_rng(3)
    clamp, subtract = 0.27 + 0.04 * rng.standard_normal(12), 0.27 + 0.01 * rng.standard_normal(12)
    easy = tuple({seed: 94 + sd * rng.standard_normal() for seed in range(6)} for sd in (0.3, 0.2))
    runs = _point_frame(clamp, subtract)
    contrast, vr26, vr25 = difficulty_sweep.point_claims("two-epoch", runs, "aug_level", "", (easy, 94.0))
    hard_vr = np.var(100 * clamp, ddof=1) / np.var(100 * subtract, ddof=1)
    easy_vr = np.var(list(easy[0].values()), ddof=1) / np.var(list(easy[1].values()), ddof=1)
    assert contrast.estimate == pytest.approx(hard_vr / easy_vr)
    assert contrast.claim.quantity.startswith("[two-epoch: aug_level 1, epochs 2] difficulty:")
    assert contrast.in_regime and vr25.in_regime and vr26.in_regime
    assert vr25.estimate == pytest.approx(hard_vr) and vr25.claim.published == 16.73 and vr26.claim.published == 2.18
    assert {dict(c)["operating_point"] for c in vr25.claim.cells} == {"two-epoch"}
    # the easy part below 92%, or the hard level's CAR below 50%: out of the paper's regime, each saying which
    assert not difficulty_sweep.point_claims("two-epoch", runs, "aug_level", "", (easy, 85.0))[0].in_regime
    low_car = difficulty_sweep.point_claims("two-epoch", _point_frame(clamp, subtract, car=0.4), "aug_level",
                                            "", (easy, 94.0))
    assert not any(a.in_regime for a in low_car)
    missing = difficulty_sweep.point_claims("two-epoch", runs, "aug_level", "", None)[0]
    assert not missing.measured and "ease-matched" in missing.notes["why"]


def test_study3_easy_point_reads_study_2s_ease_matched_runs_on_their_look_1_seeds():
    """Of study 2's records, only its ease-matched runs on this study's dataset and study 2's profile seeds (0-5 at
    cpu) make the 97% part; a look-2 seed of study 2's plan, or a run at the shipped length, does not."""
    s = difficulty_sweep.resolve({"profile": "cpu"})
    config = {**as_dict(cross_dataset.Settings.run_config(cross_dataset.resolve({"profile": "cpu"}), dataset="mnist",
                                                          dataset_options={}, margin_mode="clamp", stabilizer="detach",
                                                          m0=0.4, seed=0, epochs=32))}
    def record(mode, seed, epochs=32, top1=0.9):
        return {"config": {**config, "margin_mode": mode, "seed": seed, "epochs": epochs}, "seed": seed,
                "run_id": f"{mode}-{seed}-{epochs}", "status": "ok", "metrics": {"top1": top1}, "dataset": "mnist"}
    records = [record(m, seed, top1=0.9 + 0.01 * seed) for m in ("clamp", "subtract") for seed in range(8)]
    records += [record("clamp", 0, epochs=8, top1=0.5)]
    seeds = cross_dataset.PROFILES["cpu"]["seeds"]
    (clamp, subtract), accuracy = difficulty_sweep.easy_point(cross_dataset.runs_frame(records), s, seeds)
    assert sorted(clamp) == sorted(subtract) == list(range(6)) and seeds == 6
    assert accuracy == pytest.approx(100 * np.mean([0.9 + 0.01 * seed for seed in range(6)]))
    assert difficulty_sweep.easy_point(pd.DataFrame(), s, seeds) is None
    assert difficulty_sweep.EASY_POINT == (cross_dataset.STUDY, "ease-matched")
    assert "ease-matched" in cross_dataset.OPERATING_POINTS


def test_study3_verdict_table_reads_the_points_contrast_on_the_easy_part_it_is_given():
    """Through the table the notebook builds: the point's contrast is measured on the 97% part passed to it (a name
    inside the table once shadowed it, which left the row unmeasured), beside the shipped rows in one family."""
    rng = np.random.default_rng(5)
    point = _point_frame(0.27 + 0.04 * rng.standard_normal(12), 0.27 + 0.01 * rng.standard_normal(12))
    easy = tuple({seed: 94 + sd * rng.standard_normal() for seed in range(6)} for sd in (0.3, 0.2))
    summary = pd.DataFrame(columns=["level", "top1_mean", "vr", "f_p", "ci_low", "ci_high"], dtype=float)
    table = difficulty_sweep.paper_vs_reproduced(summary, 10.0, None, point.iloc[:0], knob="aug_level",
                                                 points={"two-epoch": point}, easy_part=(easy, 94.0))
    row = table[table.quantity.str.startswith("[two-epoch: aug_level 1, epochs 2] difficulty:")].iloc[0]
    assert row.verdict != "not measured" and not row.verdict.startswith("not in the paper's regime")
    without = difficulty_sweep.paper_vs_reproduced(summary, 10.0, None, point.iloc[:0], knob="aug_level",
                                                   points={"two-epoch": point})
    assert without[without.quantity.str.startswith("[two-epoch: aug_level 1, epochs 2] difficulty:")
                   ].iloc[0].verdict == "not measured"


def test_study3_regime_table_reads_an_operating_points_seeds_apart_from_the_shipped_level():
    """The search's table gives each operating point's seeds their own row (mean accuracy of both arms, the clamp
    arm's CAR), and the shipped row of the same level keeps only the shipped runs."""
    s = difficulty_sweep.resolve({"profile": "cpu"})
    point = _point_frame([0.30, 0.40, 0.35], [0.31, 0.39, 0.36], car=0.55).assign(epochs=2)
    shipped = _point_frame([0.70, 0.80], [0.72, 0.78], car=0.40).assign(operating_point="", epochs=8)
    table = difficulty_sweep.regime_table([], pd.concat([shipped, point], ignore_index=True), s)
    level1 = table[table.level == 1].set_index("setting")
    assert level1.loc["shipped (2 seeds)", "top1"] == pytest.approx(75.0)
    assert level1.loc["shipped (2 seeds)", "car_layer0_final"] == pytest.approx(40.0)
    row = level1.loc["two-epoch point: epochs = 2 (3 seeds)"]
    assert row.top1 == pytest.approx(35.1666666, abs=1e-4) and row.car_layer0_final == pytest.approx(55.0)
    assert not row.in_regime  # 35.2% is more than 5 points from 26.8% and from 25%
