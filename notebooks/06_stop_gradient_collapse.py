# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Study 6 — frustration and stop-gradient in a minimal model of collapse
#
# **Question** (Yao, Li & Liu 2026, "A Minimal Model of Representation Collapse"): when some samples are
# *frustrated* — attached to every label instead of one — does gradient flow first align samples with their
# labels and then slowly collapse the label geometry, at a rate set by the frustrated fraction r? And does a
# shared head with stop-gradient prevent that collapse?
#
# > **This model is a reconstruction, not the paper's equations.** The paper's equations are not public. The
# > model below is ours [ours]: the simplest one we found that is consistent with every claim stated in the
# > paper's abstract and in secondary summaries. Where it reproduces a claimed rate or eigenvalue, that shows our
# > algebra and integrators are right and that the claims are mutually consistent — it does not confirm the
# > paper's derivation.
#
# **The model** (formulas and derivations in `lib/collapse/model.py` and `theory.py`). n label embeddings v_b,
# N sample embeddings u_i in R^d; a clean sample is attached to its own label, a frustrated one to every label with
# weight 1/n (row-stochastic P). Loss L = ½ Σ_ib P_ib |u_i − v_b|². Gradient flow with rate γ, each block normalised
# by its attached weight (samples 1, labels m): du_i/dt = −γ(u_i − Σ_b P_ib v_b), dv_b/dt = −γ(v_b − Σ_i P_ib u_i / m).
# Class contrasts obey d/dt (c̃, ṽ) = −γ [[1, −1], [−(1 − r), 1]] (c̃, ṽ), eigenvalues γ(1 ± √(1 − r)):
# alignment at ≈ 2γ, then collapse of every inter-label distance at the **slow rate γ(1 − √(1 − r)) ≈ γr/2**.
#
# **Head and stop-gradient**: a shared W predicts each side of a pair from the other,
# ½ Σ P_ib (|W u_i − sg(v_b)|² + |W v_b − sg(u_i)|²). With stop-gradient the fixed points have
# W² c_a = (1 − r) c_a + r c̄: eigenvalue 1 on the mean direction, 1 − r on the class directions, at any scale.
#
# Evidence tags: **[paper]** the abstract, **[summary]** secondary summaries (approximate), **[ours]** our decision
# where the sources are silent. The specification is `docs/studies.md` ("Study 6"); the study's settings and
# analysis are in `lib/studies/stop_gradient.py`, one run (its config and training) in `lib/collapse/training.py`.

# %% tags=["parameters"]
# From lib/studies/stop_gradient.py (Settings): edit there, then: python -m lib.notebook --parameters NN --write
from typing import Optional

profile: str = "quick"  # smoke | quick | cpu | paper: every parameter left as None takes the profile's value
num_classes: Optional[int] = None  # n: classes, one label embedding each
embed_dim: Optional[int] = None  # d: embedding dimension (at least num_classes)
samples_per_class: Optional[int] = None  # m: samples per class; every r * m must be a whole number
r_values: Optional[list] = None  # frustrated fractions r, each in [0, 1)
gamma: Optional[float] = None  # γ: the gradient-flow rate (config: 1) [ours]
dt: Optional[float] = None  # integrators' time step; a gradient-descent learning rate is rate * dt; gamma * dt ≤ 0.5
steps: Optional[int] = None  # steps of the embedding-only and head models (they run to time steps * dt)
seeds: Optional[int] = None  # seeds per r: each seed is one random start of samples, labels and inputs
student_steps: Optional[int] = None  # gradient-descent steps of the teacher–student and real-data students
head_init: Optional[float] = None  # W starts as head_init * I (config: 1, the no-head model) [ours]
head_rate: Optional[float] = None  # W's rate in γ units (config: 10) [ours]: the head adapts faster than the embeddings
slow_head_rate: float = 1.0  # also run stop-gradient with this slower head rate, to see when it fails (0 skips) [ours]
# readout_noise: a fixed Gaussian noise added to the predictions before the nearest-label readout
readout_noise: Optional[float] = None  # std of the readout noise (config: 0.05) [ours]
input_dim: Optional[int] = None  # D: input dimension of the linear teacher–student model
# input_noise is relative to the class prototypes, which have unit norm
input_noise: Optional[float] = None  # norm of the teacher's input noise (config: 0.05) [ours]
real_dataset: Optional[str] = None  # the real-data check: digits (embedded) | mnist | fashion_mnist | cifar10 | ...
real_train_subset: Optional[int] = None  # training images of the real-data check (0: all)
data_root: Optional[str] = None  # folder of <name>.npz arrays; None: $DATA_ROOT, then torchvision's cache
download: bool = False  # True: torchvision may download a real dataset found nowhere (needs internet)
results_dir: str = "results"  # records and tables go here (relative to the project root)
variant: Optional[str] = None  # None: canonical results, or results/variants/<name>/ when a parameter is overridden
force: bool = False  # re-run configs that already have a finished record

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from lib.collapse.theory import fast_rate, slow_rate
from lib.notebook import setup
from lib.studies import stop_gradient as study

# checks every parameter, loads the data a run trains on; says where results go
nb = setup(study, globals(), precision=4)
settings, configs, store = nb.settings, nb.configs, nb.store
display(Markdown(
    f"n = {settings['num_classes']} classes, d = {settings['embed_dim']}, "
    f"m = {settings['samples_per_class']} samples per class, r ∈ {settings['r_values']}, γ = {settings['gamma']}, "
    f"dt = {settings['dt']}, {settings['steps']} steps "
    f"(γt up to {settings['gamma'] * settings['dt'] * settings['steps']:g}), "
    f"{settings['seeds']} seeds; students {settings['student_steps']} steps; "
    f"head W(0) = {settings['head_init']}·I at rate {settings['head_rate']}γ; "
    f"readout noise {settings['readout_noise']}, teacher input noise {settings['input_noise']}."))

# %% [markdown]
# ## Runs
# One record per (experiment, mode, r, seed). Runs with a finished record are skipped, so an interrupted sweep
# resumes where it stopped. To run them elsewhere first, in a process pool or as a Slurm array, use
# `python -m lib.dispatch 06 --profile <profile>` (`--backend slurm`, see the README): this cell then only collects.

# %%
records, runs = nb.run(study.runs_frame, show=["experiment", "mode", "r", "seed"])
curves = study.curves_frame(records)
out = study.analyze(runs, settings)
# Distances are shown relative to each run's start, so seeds with different starts line up.
start = curves[curves.t == 0].set_index(["run_id", "metric"]).value
curves["ratio"] = curves.value / start.reindex(pd.MultiIndex.from_frame(curves[["run_id", "metric"]])).to_numpy()
curves["r_label"] = curves.r.map(lambda r: f"r = {r:g}")
r_order = [f"r = {r:g}" for r in settings["r_values"]]

# %% [markdown]
# ## A. The embedding-only model: alignment, then collapse
# Left: the minimum inter-label distance (relative to its start) under gradient descent through autograd (solid)
# and the closed form (dashed), one line per seed. Right: nearest-label accuracy over all samples, exact (solid) and
# with the fixed readout noise (dashed). Frustrated samples end at the mean label, right only by chance, so the exact
# accuracy tops out near 1 − r + r/n. The collapse is scale-free: the exact nearest-label ranking survives it until the
# label distances reach float64 rounding (about 1e-16 of the embeddings' size, where the simulated distance flattens
# while the closed form, computed from the contrasts alone, goes on), and accuracy with readout noise falls once the
# labels are closer together than the noise.

# %%
emb = curves[curves.experiment == "embedding"]
fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
dist = emb[emb.metric.isin(["min_label_distance", "min_label_distance_closed_form"])].copy()
dist["source"] = dist.metric.map({"min_label_distance": "gradient descent",
                                  "min_label_distance_closed_form": "closed form"})
sns.lineplot(data=dist, x="t", y="ratio", hue="r_label", hue_order=r_order, style="source", units="seed",
             estimator=None, palette="viridis", ax=axes[0])
axes[0].set(yscale="log", xlabel="time t", ylabel="min inter-label distance / start",
            title="Label geometry: simulation and closed form")
axes[0].legend(fontsize=8, loc="lower left")
acc = emb[emb.metric.isin(["accuracy", "accuracy_noisy"]) & (emb.t > 0)].copy()
acc["readout"] = acc.metric.map({"accuracy": "exact", "accuracy_noisy": f"noise {settings['readout_noise']:g}"})
sns.lineplot(data=acc, x="t", y="value", hue="r_label", hue_order=r_order, style="readout", errorbar=None,
             palette="viridis", ax=axes[1])
axes[1].axhline(1 / settings["num_classes"], color="grey", linestyle=":", label="chance")
axes[1].set(xscale="log", xlabel="time t", ylabel="nearest-label accuracy",
            title="Accuracy rises, then the geometry collapses")
axes[1].legend(fontsize=8, loc="upper left")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### The slow rate against γ(1 − √(1 − r)), and the alignment rate
# The slow rate is fitted to log(min label distance) for γt ≥ 10 (the fast mode is gone by then) down to 1e-10 of its
# start (float64 rounding below that). RK4 integrates the hand-written flow; gradient descent is the Euler step of the
# same flow, whose rate is −log(1 − λ dt)/dt rather than λ (column `slow_theory_gd`). The fast rate is fitted to the
# amplitude of the fast contrast mode, |√(1 − r) c̃ − ṽ|. `gd_vs_euler`: the largest difference between the
# autograd trajectory and the hand-written Euler trajectory; `rk4_vs_closed_form`: the largest relative difference of
# the label distances.

# %%
rates = out.get("rates", pd.DataFrame())
display(rates[["r", "seeds", "slow_theory", "slow_fit_rk4", "slow_rel_err_rk4", "slow_fit_gd", "slow_theory_gd",
               "slow_rel_err_gd_vs_discrete", "slow_small_r", "fast_theory", "fast_fit_rk4", "fast_fit_gd",
               "fast_theory_gd", "distance_final_ratio", "gd_vs_euler", "rk4_vs_closed_form"]])
rates_path = store.write_frame("rates", rates)
emb_runs = runs[(runs.experiment == "embedding") & (runs.status == "ok")]
grid = np.linspace(0, max(settings["r_values"]) * 1.05 + 1e-9, 200)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
fits = emb_runs.melt(id_vars=["r", "seed"], value_vars=["slow_rate_fit_rk4", "slow_rate_fit_gd"], var_name="fit",
                     value_name="rate")
sns.scatterplot(data=fits, x="r", y="rate", hue="fit", style="fit", s=70, ax=axes[0])
axes[0].plot(grid, [slow_rate(r, settings["gamma"]) for r in grid], color="black", label="γ(1 − √(1 − r))")
axes[0].plot(grid, settings["gamma"] * grid / 2, color="grey", linestyle=":", label="γr/2")
axes[0].set(xlabel="frustrated fraction r", ylabel="slow rate", title="Collapse rate: fitted against theory")
axes[0].legend()
fits = emb_runs.melt(id_vars=["r", "seed"], value_vars=["fast_rate_fit_rk4", "fast_rate_fit_gd"], var_name="fit",
                     value_name="rate")
sns.scatterplot(data=fits, x="r", y="rate", hue="fit", style="fit", s=70, ax=axes[1])
axes[1].plot(grid, [fast_rate(r, settings["gamma"]) for r in grid], color="black", label="γ(1 + √(1 − r))")
axes[1].axhline(2 * settings["gamma"], color="grey", linestyle=":", label="2γ")
axes[1].set(xlabel="frustrated fraction r", ylabel="fast rate", title="Alignment rate: fitted against theory")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## B. A shared head, with and without stop-gradient
# Class separation (the minimum inter-label distance relative to its start) for the embedding-only model (no head),
# the head with stop-gradient and the head without it, one line per seed. The readout with a head is the sample's
# prediction W u_i.

# %%
head_rate_label = {settings["head_rate"]: "",
                   settings["slow_head_rate"]: f", slow head ({settings['slow_head_rate']:g}γ)"}
sep = curves[curves.experiment.isin(["embedding", "head"]) & (curves.metric == "min_label_distance")].copy()
mode_label = {"none": "no head", "sg": "head + stop-gradient", "no_sg": "head, no stop-gradient"}
sep["model"] = [mode_label[m] + ("" if e == "embedding" else head_rate_label.get(h, ""))
                for e, m, h in zip(sep.experiment, sep["mode"], sep.head_rate)]
g = sns.relplot(data=sep, x="t", y="ratio", hue="model", col="r_label", col_order=r_order, kind="line", units="seed",
                estimator=None, height=3.2, aspect=0.95, col_wrap=min(5, len(r_order)))
g.set(yscale="log")
g.set_titles("{col_name}")
g.set_axis_labels("time t", "class separation / start")
g.figure.suptitle("Stop-gradient keeps the labels apart; without it they collapse even with the head", y=1.03)
plt.show()
display(out.get("head"))

# %% [markdown]
# ### The spectrum of W² at the stop-gradient fixed point
# A = V⁺ W² V is W² on the span of the labels (V: the labels as columns). Predicted: 1 on the mean direction and
# 1 − r on the n − 1 class directions. `final_speed` in the table above is the norm of the flow at the end: near 0 at a
# fixed point.

# %%
w2 = out.get("w2", pd.DataFrame())
display(w2)
w2_path = store.write_frame("w2_spectrum", w2)
sg_runs = runs[(runs.experiment == "head") & (runs["mode"] == "sg") & (runs.head_rate == settings["head_rate"])
               & runs.w2_eigenvalues.notna()]
eigs = sg_runs[["r", "seed", "w2_eigenvalues"]].explode("w2_eigenvalues").astype({"w2_eigenvalues": float})
fig, ax = plt.subplots(figsize=(6.5, 4.2))
sns.stripplot(data=eigs, x="r", y="w2_eigenvalues", native_scale=True, jitter=0.004, alpha=0.6, ax=ax,
              label="eigenvalues of W²")
ax.plot(grid, 1 - grid, color="tab:red", label="1 − r (class directions)")
ax.axhline(1, color="black", linestyle="--", label="1 (mean direction)")
handles, labels = ax.get_legend_handles_labels()
ax.legend(dict(zip(labels, handles)).values(), dict(zip(labels, handles)).keys())
ax.set(xlabel="frustrated fraction r", ylabel="eigenvalue", title="W² on the labels' span, stop-gradient fixed point")
plt.show()
if "slow_head" in out:
    display(Markdown(f"**A slower head** (rate {settings['slow_head_rate']:g}γ, stop-gradient): "
                     "the class directions shrink at the slow rate until W² reaches 1 − r; "
                     "if some shrink too far first, they are lost (a dimensional collapse) "
                     "and `class_min` drops to 0."))
    display(out["slow_head"])

# %% [markdown]
# ## C. The linear teacher–student model
# A linear teacher maps each class's one-hot code to a unit-norm input prototype; a frustrated sample's input is the
# teacher's image of the uniform code, equally close to every class. A linear student S maps inputs to embeddings,
# trained with learnable labels and the head, with and without stop-gradient. Training accuracy counts frustrated
# samples against their nominal class (right by chance, 1/n); the dotted line is 1 − r + r/n.

# %%
ts = out.get("teacher_student", pd.DataFrame())
display(ts)
ts_path = store.write_frame("teacher_student", ts)
ts_runs = runs[(runs.experiment == "teacher_student") & (runs.status == "ok")]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
sns.lineplot(data=ts_runs, x="r", y="min_label_distance_final_ratio", hue="mode", marker="o", errorbar=None, ax=axes[0])
axes[0].set(yscale="log", xlabel="frustrated fraction r", ylabel="label distance, end / start",
            title="Label distance at the end")
long = ts_runs.melt(id_vars=["r", "seed", "mode"], value_vars=["accuracy_final", "accuracy_noisy_final"],
                    var_name="readout", value_name="accuracy")
long["readout"] = long.readout.map({"accuracy_final": "exact",
                                    "accuracy_noisy_final": f"noise {settings['readout_noise']:g}"})
sns.lineplot(data=long, x="r", y="accuracy", hue="mode", style="readout", marker="o", errorbar=None, ax=axes[1])
axes[1].plot(grid, 1 - grid, color="black", label="1 − r")
axes[1].plot(grid, 1 - grid + grid / settings["num_classes"], color="black", linestyle=":", label="1 − r + r/n")
axes[1].set(xlabel="frustrated fraction r", ylabel="training accuracy", title="Accuracy against 1 − r")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## D. Real data
# The same student on real images (flattened, standardised per pixel): a fraction r of every class is frustrated
# (attached to every label). Test accuracy is on the clean test set, read out through the head. Unlike the teacher's
# inputs, real images are not exactly linearly separable: a linear student cannot put every image on its label, and
# without stop-gradient that unexplained part pulls the labels together like frustration does — so here the no-SG
# student can collapse even at r = 0.

# %%
real = out.get("real", pd.DataFrame())
display(real)
real_path = store.write_frame("real", real)
rc = curves[(curves.experiment == "real") & curves.metric.isin(["min_label_distance", "test_accuracy"])].copy()
rc["y"] = np.where(rc.metric == "min_label_distance", rc.ratio, rc.value)
g = sns.relplot(data=rc, x="t", y="y", hue="mode", row="metric", col="r_label", col_order=r_order, kind="line",
                errorbar=None, height=2.8, aspect=1.0, facet_kws={"sharey": "row"})
g.set_titles(template="{col_name}")
for ax in g.axes[0]:
    ax.set_yscale("log")
g.set_axis_labels("time t", "")
g.axes[0][0].set_ylabel("label distance / start")
g.axes[1][0].set_ylabel("clean test accuracy")
g.figure.suptitle(f"Real data ({settings['real_dataset']}): separation and test accuracy", y=1.02)
plt.show()

# %% [markdown] tags=["findings"]
# ## Paper against reproduced
# One verdict engine (`lib/core/verdicts.py`, rules in `docs/verdicts.md`), seeds as the unit, each interval at the
# level its test is decided at. The one claim tested, and the central one, is the real-data run: stop-gradient keeps
# the classes apart on real images (log10 separation end / start, with SG − without, per seed; the paper gives no
# size, so it is tested against one decade, ours; the paper's real-data setting is not known). **The model is our
# reconstruction** of the paper's, built to agree with every claim: the same contrasts in the teacher–student
# model, the shared head and "collapse only with frustration" are therefore **checks**, shown with their numbers,
# never counted as reproductions; so are rates and spectra against our own closed forms, which agree by
# construction. `[summary]` claims are known only approximately, so the paper column gives the forms they take.

# %% tags=["findings"]
comparison = study.paper_vs_reproduced(out, settings)
comparison_path = store.write_frame("paper_vs_reproduced", comparison)
display(comparison)

# %% [markdown]
# ## Re-run one run

# %%
nb.show_rerun(records)

# %% [markdown]
# ## Explore the results

# %%
nb.explore()

# %% [markdown]
# ### The minimal model, by hand
# Section A and B's model from one small random start (n = 4 classes of 10 samples, d = 8), with this notebook's γ,
# dt and head rate to start from: move r to see the label geometry collapse at γ(1 − √(1 − r)) without a head (the
# closed form dotted) and stay apart with the head and stop-gradient; slow the head (head_rate) to see when it fails.

# %%
from lib import explore

explore.collapse_explorer(gamma=settings["gamma"], dt=settings["dt"], head_rate=settings["head_rate"])
