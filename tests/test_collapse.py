"""The minimal collapse model (lib/collapse: model.py, theory.py, student.py): gradients, sectors, closed
form, slow rate, stop-gradient fixed point."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from lib.collapse import model as C
from lib.collapse import student as CS
from lib.collapse import theory as CT
from lib.studies import find_study, stop_gradient
from lib.studies.variants import resolve_command


def _start(n=5, m=20, r=0.2, d=8, seed=0):
    att = C.balanced_attachment(n, m, r)
    u0, v0 = C.init_embeddings(att, d, torch.Generator().manual_seed(seed))
    return att, u0, v0


def _unequal_attachment(seed=0):
    """Unequal class sizes and a random frustrated subset: the flow's formulas must not assume balance."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (37,), generator=g)
    labels[:4] = torch.arange(4)  # every class present
    return C.attachment(labels, C.random_frustration(labels, 0.3, g), 4)


@pytest.mark.parametrize("mode", C.MODES)
@pytest.mark.parametrize("balanced", [True, False])
def test_autograd_gradient_of_the_loss_equals_the_hand_written_flow(mode, balanced):
    att = _start()[0] if balanced else _unequal_attachment()
    g = torch.Generator().manual_seed(1)
    d = 6
    u = torch.randn(att.num_samples, d, generator=g, dtype=C.DTYPE)
    v = torch.randn(att.num_classes, d, generator=g, dtype=C.DTYPE)
    W = torch.randn(d, d, generator=g, dtype=C.DTYPE)  # a generic head, not a special point
    hand = C.flow(u, v, att, W, mode, gamma=0.7, head_rate=3.0)
    auto = C.autograd_flow(u, v, att, W, mode, gamma=0.7, head_rate=3.0)
    for h, a in zip(hand, auto):
        if h is None:
            assert a is None and mode == "none"
            continue
        torch.testing.assert_close(h, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", C.MODES)
def test_student_chain_rule_equals_autograd(mode):
    att = _unequal_attachment(2)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(att.num_samples, 9, generator=g, dtype=C.DTYPE)
    S = torch.randn(5, 9, generator=g, dtype=C.DTYPE)
    v = torch.randn(att.num_classes, 5, generator=g, dtype=C.DTYPE)
    W = None if mode == "none" else torch.randn(5, 5, generator=g, dtype=C.DTYPE)
    hand = CS.student_velocity(x, att, mode, 1.3, 2.0, "euler")(S, v, W)
    auto = CS.student_velocity(x, att, mode, 1.3, 2.0, "gd")(S, v, W)
    for h, a in zip(hand, auto):
        if h is not None:
            torch.testing.assert_close(h, a, rtol=1e-12, atol=1e-12)


def test_gradient_descent_takes_the_euler_steps_of_the_flow():
    att, u0, v0 = _start()
    kw = dict(mode="none", gamma=1.0, dt=0.1, steps=300, record=[300])
    gd, euler = C.simulate(att, u0, v0, integrator="gd", **kw), C.simulate(att, u0, v0, integrator="euler", **kw)
    torch.testing.assert_close(gd["u"], euler["u"], rtol=0, atol=1e-12)
    torch.testing.assert_close(gd["v"], euler["v"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("r", [0.0, 0.1, 0.4])
def test_flow_eigenvalues_are_the_closed_form_sector_rates(r):
    n, m, gamma = 4, 10, 1.7
    att = C.balanced_attachment(n, m, r)
    eig = torch.linalg.eigvals(CT.flow_matrix(att, gamma))
    assert eig.imag.abs().max() < 1e-10  # similar to a symmetric matrix: real spectrum
    np.testing.assert_allclose(np.sort(eig.real.numpy()), CT.sector_eigenvalues(n, m, r, gamma), atol=1e-10)
    assert CT.slow_rate(r, gamma) == pytest.approx(gamma * (1 - math.sqrt(1 - r)))
    assert CT.slow_rate(r, gamma) + CT.fast_rate(r, gamma) == pytest.approx(2 * gamma)  # trace of the contrast block
    assert CT.slow_rate(r, gamma) * CT.fast_rate(r, gamma) == pytest.approx(gamma ** 2 * r)  # its determinant


@pytest.mark.parametrize("r", [0.0, 0.2])
def test_closed_form_matches_the_rk4_integration(r):
    att, u0, v0 = _start(r=r)
    tr = C.simulate(att, u0, v0, mode="none", gamma=1.3, dt=0.05, steps=400, integrator="rk4", record=[400])
    u_t, v_t = CT.closed_form(att, u0, v0, gamma=1.3, t=20.0)
    torch.testing.assert_close(tr["u"], u_t, rtol=0, atol=1e-9)
    torch.testing.assert_close(tr["v"], v_t, rtol=0, atol=1e-9)
    # and at t = 0 the closed form is the start
    u_0, v_0 = CT.closed_form(att, u0, v0, gamma=1.3, t=0.0)
    torch.testing.assert_close(u_0, u0)
    torch.testing.assert_close(v_0, v0)


def test_fit_decay_rate_recovers_an_exponential():
    t = np.linspace(0, 50, 200)
    assert CT.fit_decay_rate(t, 3 * np.exp(-0.37 * t)) == pytest.approx(0.37, rel=1e-10)


@pytest.mark.parametrize("integrator", ["gd", "rk4"])
@pytest.mark.parametrize("r", [0.05, 0.1, 0.2, 0.4])
def test_simulated_slow_rate_matches_the_closed_form_within_2_percent(r, integrator):
    att, u0, v0 = _start(r=r)
    gamma, dt = 1.0, 0.1
    tr = C.simulate(att, u0, v0, mode="none", gamma=gamma, dt=dt, steps=2000, integrator=integrator)
    fitted = CT.fit_decay_rate(tr["t"], tr["min_label_distance"], t_min=10 / gamma)
    assert fitted == pytest.approx(CT.slow_rate(r, gamma), rel=0.02)
    # Sharper: each integrator's own exact rate, -log(1 - lambda dt)/dt for gradient descent's Euler steps.
    exact = CT.euler_rate(CT.slow_rate(r, gamma), dt) if integrator == "gd" else CT.slow_rate(r, gamma)
    assert fitted == pytest.approx(exact, rel=1e-6)


def test_r0_preserves_the_minimum_label_distance():
    att, u0, v0 = _start(r=0.0)
    # Aligned start (every sample on its label): a fixed point, the distance is preserved exactly.
    aligned = v0[att.labels]
    tr = C.simulate(att, aligned, v0, mode="none", dt=0.1, steps=1000, integrator="euler")
    d = np.asarray(tr["min_label_distance"])
    np.testing.assert_allclose(d, d[0], rtol=1e-12)
    # Random start: the distance settles at the closed-form limit,
    # the min over pairs of |(c~ + v~)_a - (c~ + v~)_b| / 2.
    tr = C.simulate(att, u0, v0, mode="none", dt=0.1, steps=1000, integrator="rk4")
    c0 = torch.stack([u0[att.labels == a].mean(0) for a in range(att.num_classes)])
    limit = C.min_label_distance((c0 + v0) / 2)
    d = np.asarray(tr["min_label_distance"])
    late = np.asarray(tr["t"]) >= 30
    np.testing.assert_allclose(d[late], limit, rtol=1e-9)
    assert limit > 0.1 * d[0]


@pytest.mark.parametrize("r", [0.1, 0.4])
def test_frustration_drives_the_minimum_label_distance_below_1e_6_of_its_start(r):
    att, u0, v0 = _start(r=r)
    gamma, dt = 1.0, 0.1
    horizon = (math.log(1e7) / CT.slow_rate(r, gamma)) + 20  # time for the slow mode to fall by 1e7, plus the transient
    for start_u in (u0, v0[att.labels]):  # random and aligned starts
        tr = C.simulate(att, start_u, v0, mode="none", gamma=gamma, dt=dt, steps=math.ceil(horizon / dt),
                        integrator="euler")
        d = tr["min_label_distance"]
        assert d[-1] < 1e-6 * d[0]


@pytest.mark.parametrize("r", [0.2, 0.4])
def test_stop_gradient_fixed_point_has_w2_eigenvalues_1_and_1_minus_r(r):
    att, u0, v0 = _start(n=10, m=20, r=r, d=16)
    tr = C.simulate(att, u0, v0, C.head_start(16, 1.0), mode="sg", gamma=1.0, dt=0.1, steps=2500, head_rate=10.0,
                    integrator="euler")
    speed = torch.cat([x.flatten() for x in C.flow(tr["u"], tr["v"], att, tr["W"], "sg", 1.0, 10.0)]).norm()
    assert speed < 1e-6, "not at a fixed point"
    spectrum = C.w2_spectrum(tr["W"], tr["v"])
    assert spectrum["mean_direction"] == pytest.approx(1.0, abs=1e-3)
    np.testing.assert_allclose(spectrum["class_directions"], 1 - r, atol=1e-3)
    eig = np.asarray(spectrum["eigenvalues"])
    assert np.sum(np.abs(eig - 1) < 1e-3) == 1 and np.sum(np.abs(eig - (1 - r)) < 1e-3) == att.num_classes - 1
    # The fixed-point identity behind it: W^2 c_a = (1 - r) c_a + r c_bar for the clean class means.
    clean = ~att.frustrated
    c = torch.stack([tr["u"][clean & (att.labels == a)].mean(0) for a in range(att.num_classes)])
    torch.testing.assert_close(c @ (tr["W"] @ tr["W"]).T, (1 - r) * c + r * c.mean(0), rtol=0, atol=1e-6)
    assert tr["min_label_distance"][-1] > 0.1 * tr["min_label_distance"][0]  # separation stays finite


def test_without_stop_gradient_the_head_does_not_prevent_collapse():
    att, u0, v0 = _start(n=5, m=10, r=0.2, d=8)
    tr = C.simulate(att, u0, v0, C.head_start(8, 1.0), mode="no_sg", gamma=1.0, dt=0.1, steps=3000, head_rate=10.0,
                    integrator="euler")
    assert tr["min_label_distance"][-1] < 1e-6 * tr["min_label_distance"][0]


def test_r_times_samples_per_class_must_be_whole():
    with pytest.raises(ValueError, match="whole number"):
        C.balanced_attachment(4, 10, 0.05)


def test_closed_form_label_distances_decay_exactly_at_the_slow_rate():
    att, u0, v0 = _start(r=0.3)
    # Late enough that the fast mode is below 1e-30 of the slow one; far below float64 rounding of positions.
    d = CT.closed_form_min_label_distance(att, u0, v0, 1.0, [60.0, 300.0])
    assert d[1] < 1e-16  # the embeddings are O(1): below their float64 rounding, yet still exact
    assert math.log(d[0] / d[1]) / 240.0 == pytest.approx(CT.slow_rate(0.3), rel=1e-9)


# --------------------------------------------------------------------------- one run: CollapseConfig


def _quick_plan():

    return stop_gradient.plan(stop_gradient.resolve({"profile": "quick", "slow_head_rate": 1.0}))


def test_fields_an_experiment_does_not_read_are_none_and_leave_its_run_id_alone():
    from lib.collapse.training import USES, CollapseConfig
    from lib.run.results import config_hash

    embedding = CollapseConfig(experiment="embedding", input_noise=0.3, head_rate=2.0, train_subset=7, dataset="mnist")
    assert (embedding.mode, embedding.head_rate, embedding.input_noise, embedding.train_subset) == (None,) * 4
    assert embedding.dataset == "synthetic" and embedding.num_classes == 10
    assert config_hash(embedding) == config_hash(CollapseConfig(experiment="embedding"))
    real = CollapseConfig(experiment="real", dataset="mnist", num_classes=3, samples_per_class=5, input_dim=1)
    assert (real.num_classes, real.samples_per_class, real.input_dim, real.dataset) == (None, None, None, "mnist")
    # a field an experiment reads does change its run id
    teacher = CollapseConfig(experiment="teacher_student")
    assert config_hash(teacher.replace(input_noise=0.3)) != config_hash(teacher)
    assert set(USES["teacher_student"]) > set(USES["embedding"])


@pytest.mark.parametrize("changes, field", [
    ({"r": 0.05, "samples_per_class": 10}, "r"),  # r * m = 0.5: not a whole number of frustrated samples
    ({"r": 1.0}, "r"), ({"embed_dim": 4, "num_classes": 5}, "embed_dim"), ({"num_classes": 1}, "num_classes"),
    ({"gamma": 2.0, "dt": 0.3}, "dt"), ({"steps": 9}, "steps"), ({"seed": -1}, "seed"),
    ({"experiment": "heads"}, "experiment"), ({"experiment": "head", "mode": "none"}, "mode"),
    ({"experiment": "head", "head_rate": 0.0}, "head_rate"), ({"experiment": "real", "dataset": "imagenet"}, "dataset"),
    ({"experiment": "teacher_student", "input_dim": 9}, "input_dim"),
    ({"experiment": "real", "train_subset": -1}, "train_subset"), ({"readout_noise": float("nan")}, "readout_noise"),
])
def test_a_bad_run_config_fails_naming_the_field(changes, field):
    from lib.collapse.training import CollapseConfig
    from lib.core.params import ParameterError

    with pytest.raises(ParameterError, match=rf"parameter {field}="):
        CollapseConfig(**changes)


def test_a_record_of_the_first_schema_builds_the_config_the_plan_makes():
    """Records written before the typed config had only the fields their experiment read, under today's names."""
    from lib.collapse.training import train_collapse
    from lib.core.config import as_dict, build

    legacy = {"embedding": dict(dataset="synthetic", dim=16, dt=0.1, experiment="embedding", gamma=1.0, num_classes=10,
                                r=0.2, readout_noise=0.05, samples_per_class=20, seed=1, steps=3000),
              "real": dict(dataset="digits", dim=16, dt=0.1, experiment="real", gamma=1.0, head_init=1.0,
                           head_rate=10.0, mode="sg", r=0.2, readout_noise=0.05, seed=1, steps=2000, train_subset=0)}
    planned = _quick_plan()
    for values in legacy.values():
        config = build(train_collapse, values, legacy=True)
        assert config in planned
        assert build(train_collapse, as_dict(config), legacy=True) == config  # today's form migrates to itself


def test_every_profile_key_is_a_parameter_and_the_config_fields_reach_every_run():
    """The model's fields the notebook exposes under CollapseConfig's names, written out; each reaches the runs of
    the experiments that read it."""
    exposed = {"num_classes", "embed_dim", "samples_per_class", "gamma", "dt", "steps", "readout_noise", "input_dim",
               "input_noise", "head_init", "head_rate"}
    assert set(stop_gradient.Settings.config_fields()) == exposed
    for profile, values in stop_gradient.PROFILES.items():
        assert set(values) <= set(stop_gradient.Settings.declared), profile
    s = stop_gradient.resolve({"profile": "smoke", "input_noise": 0.125, "head_init": 0.5})
    configs = stop_gradient.plan(s)  # a config drops the fields its experiment does not read (None)
    assert {c.input_noise for c in configs if c.experiment == "teacher_student"} == {0.125}
    assert {c.head_init for c in configs if c.experiment == "head"} == {0.5}


def test_a_parameter_left_as_none_takes_the_profile_then_the_config_default():
    from lib.collapse.training import CollapseConfig

    s = stop_gradient.resolve({"profile": "smoke", "slow_head_rate": 0.0, "embed_dim": 12})
    assert s["embed_dim"] == 12 and s["num_classes"] == stop_gradient.PROFILES["smoke"]["num_classes"]
    assert s["head_rate"] == CollapseConfig.head_rate and s["gamma"] == CollapseConfig.gamma
    configs = stop_gradient.plan(s)
    assert all(isinstance(c, CollapseConfig) and c.embed_dim == 12 for c in configs)
    assert {c.steps for c in configs if c.experiment in ("teacher_student", "real")} == {s["student_steps"]}


# ------------------------------------------------------------------ study 6's claims through the verdict engine


def _claim_runs(sg_ratio: float, no_sg_ratio: float, zero_ratio: float, seeds: int = 3) -> pd.DataFrame:
    """Planted runs of study 6's three claim experiments: per seed and r, the final/initial separation ratio
    (with SG ``sg_ratio``, without ``no_sg_ratio``; the embedding model ``zero_ratio`` at r = 0 and
    ``no_sg_ratio`` at r > 0), each seed's ratio multiplied by 1.5^seed so that the seeds differ."""
    rows = []
    for seed in range(seeds):
        jitter = 1.5 ** seed
        for r in (0.0, 0.1, 0.2):
            rows.append(dict(status="ok", experiment="embedding", mode="none", r=r, seed=seed, head_rate=1.0,
                             min_label_distance_final_ratio=(zero_ratio if r == 0 else no_sg_ratio) * jitter))
            for experiment in ("teacher_student", "head"):
                for mode, ratio in (("sg", sg_ratio), ("no_sg", no_sg_ratio)):
                    rows.append(dict(status="ok", experiment=experiment, mode=mode, r=r, seed=seed, head_rate=1.0,
                                     min_label_distance_final_ratio=ratio * jitter))
    slow = [dict(rows[-1], head_rate=0.1, min_label_distance_final_ratio=1e-12)]  # a slow-head run: left out
    return pd.DataFrame(rows + slow)


def test_study6_claim_is_the_real_data_run_and_the_reconstruction_rows_are_checks():
    """The models are our reconstruction, built to agree with every claim: their rows are checks with their numbers,
    never reproductions. The one claim tested, and the central one, is the real-data run."""
    s, _ = resolve_command(find_study("06"), profile="smoke", parameters={})
    runs = _claim_runs(sg_ratio=0.9, no_sg_ratio=1e-4, zero_ratio=0.5)
    real = runs[runs.experiment == "teacher_student"].assign(experiment="real")
    table = stop_gradient.paper_vs_reproduced({"runs": pd.concat([runs, real])}, {**s, "head_rate": 1.0})
    central = table.iloc[0]
    assert central["id"] == stop_gradient.CENTRAL and f"on {s['real_dataset']}" in central.quantity
    # with SG - without, per seed: log10(0.9) - log10(1e-4) whatever the seed's factor, over 3 seeds per arm
    assert central.ours.startswith(f"{math.log10(0.9) + 4:.3g} [") and central.n == "3 vs 3"
    assert central.kind == "claim" and central.verdict == "reproduced"
    reconstruction = table[table.quantity.str.contains("our reconstruction")]
    assert len(reconstruction) == 3 and set(reconstruction.verdict) == {"check"}
    assert set(reconstruction.kind) == {"check"} and set(table[table.kind == "claim"].quantity) == {central.quantity}
    frustration = table[table.quantity.str.startswith("embedding model")].iloc[0]
    assert frustration.ours.startswith(f"{math.log10(0.5) + 4:.3g} [")
    head = table[table.quantity.str.startswith("shared head")].iloc[0]
    assert head.ours.startswith(f"{math.log10(0.9) + 4:.3g} [")  # the slow-head run is not among them
    # no collapse without SG on real data: the claim is contradicted by the numbers
    flipped_runs = _claim_runs(1e-4, 0.9, 0.5)
    flipped_real = flipped_runs[flipped_runs.experiment == "teacher_student"].assign(experiment="real")
    flipped = stop_gradient.paper_vs_reproduced({"runs": pd.concat([flipped_runs, flipped_real])},
                                                {**s, "head_rate": 1.0})
    assert flipped.iloc[0].verdict == "contradicted"
    # without real-data runs the claim is not measured: the reconstruction cannot stand in for it
    alone = stop_gradient.paper_vs_reproduced({"runs": runs}, {**s, "head_rate": 1.0})
    assert alone.iloc[0].verdict == "not measured"
