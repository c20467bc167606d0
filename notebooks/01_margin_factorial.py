# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Study 1 — CIFAR-10 margin factorial
#
# **Question** (Steier 2026, building on Contrastive Forward-Forward): does clamping the positive-pair
# similarity at `min(s + m, 1)` inflate the seed-to-seed variance of accuracy, compared with the
# gradient-neutral alternative of subtracting `m` from the positive log-probabilities?
#
# **Design**: margin mode {clamp, subtract} × logit stabiliser {detach, direct} × seeds; per run the
# top-1 linear-probe accuracy and, per layer and epoch, the loss, the clamp activation rate (CAR) and
# the gradient norm. A dose-response probe repeats the clamp arm with a smaller layer-0 margin. A
# layer-0 trajectory experiment [ours] trains layer 0 alone for longer, clamp against subtract, to see
# where its gradient-norm ratio goes after the main runs' last epoch.
#
# Evidence tags: **[code]** read in CFF's public code, **[paper]** the MARGIN paper's abstract,
# **[summary]** secondary summaries (approximate), **[ours]** our decision where the sources are
# silent. The specification is `docs/studies.md` ("Study 1", "The CFF model"); the library decisions are in
# `lib/cff/training.py` and `lib/studies/margin_factorial.py`.

# %% tags=["parameters"]
# From lib/studies/margin_factorial.py (Settings): edit there, then: python -m lib.notebook --parameters NN --write
from typing import Optional

profile: str = "quick"  # smoke | quick | cpu | paper: every parameter left as None takes the profile's value
dataset: Optional[str] = None  # cifar10 | cifar100 | svhn | fashion_mnist | mnist | digits | shapes
dataset_options: Optional[dict] = None  # load_dataset options, e.g. {"num_classes": 10, "difficulty": 0.3}
seeds: Optional[int] = None  # seeds per factorial cell (paper: 7)
margin_modes: list = ["clamp", "subtract"]  # margin treatments compared [paper]
stabilizers: list = ["detach", "direct"]  # logit stabilisers compared [paper]
dose_m0: float = 0.2  # layer-0 margin of the dose-response probe [summary]
dose_seeds: Optional[int] = None  # clamp seeds at dose_m0 (0 skips the probe)
trajectory_seeds: Optional[int] = None  # seeds per arm of the layer-0-alone trajectory runs (0 skips them)
trajectory_epochs: Optional[int] = None  # epochs of the layer-0-alone trajectory runs
operating_points: Optional[list] = None  # operating points read beside the shipped setting: car-matched ([] for none)
m0: Optional[float] = None  # layer-0 margin (CFFConfig: 0.4 [code])
m_last: Optional[float] = None  # last-layer margin; linear in between (CFFConfig: 0.1 [code])
temperature: Optional[float] = None  # contrastive temperature (CFFConfig: 0.15 [code])
lr: Optional[float] = None  # AdamW learning rate of every layer (CFFConfig: 4e-3 [code])
layers: Optional[int] = None  # encoder layers (paper: 8)
embed_dim: Optional[int] = None  # embedding dimension E (paper: 128)
heads: Optional[int] = None  # attention heads (paper: 4)
patch: Optional[int] = None  # patch size (paper: 4)
epochs: Optional[int] = None  # contrastive epochs (CFF default 600; MARGIN's count unknown)
batch_size: Optional[int] = None  # images per batch, two views each (paper: 512)
train_subset: Optional[int] = None  # use this many training images (0: all)
probe_epochs: Optional[int] = None  # linear-probe epochs [code: 50]
init: Optional[str] = None  # cff: CFF's initialisation [code] | trunc_normal: position std 0.02 [ours]
normalization: Optional[str] = None  # fixed: the dataset's constants, CFF's for CIFAR [code] | subset: its own
eval_protocol: Optional[str] = None  # cff: best-validation encoder, probe on augmented views [code] | clean
workers: Optional[int] = None  # runs in parallel processes; the cores are divided among them
device: str = "auto"  # auto | cpu | cuda: on a GPU the seeds of a cell train as one batched model
data_root: Optional[str] = None  # folder of <name>.npz arrays; None: $DATA_ROOT, then torchvision's cache
download: bool = False  # True: torchvision may download a real dataset found nowhere (needs internet)
results_dir: str = "results"  # records and tables go here (relative to the project root)
variant: Optional[str] = None  # None: canonical results, or results/variants/<name>/ when a parameter is overridden
force: bool = False  # re-run configs that already have a finished record

# %%
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from lib.notebook import setup
from lib.studies import common
from lib.studies import margin_factorial as study

nb = setup(study, globals())  # checks every parameter, loads the data a run trains on; says where results go
settings, configs, store = nb.settings, nb.configs, nb.store
display(Markdown(
    f"{settings['seeds']} seeds per cell, {settings['dose_seeds']} dose-response seeds, "
    f"{settings['trajectory_seeds']} seeds per arm of the layer-0 trajectory runs ({settings['trajectory_epochs']} "
    "epochs); "
    f"L={settings['layers']}, E={settings['embed_dim']}, {settings['epochs']} epochs, "
    f"m0={settings['m0']:g}, m_last={settings['m_last']:g}, τ={settings['temperature']:g}, lr={settings['lr']:g}, "
    f"batch {settings['batch_size']}."))

# %% [markdown]
# ## Fidelity to the original code
# Every setting of these runs beside CFF's public code (HosseinAghagol/ContrastiveFF), with the file it is
# read in and its evidence tag; each difference is marked [ours] with its reason. The table is built from
# the run configs (`lib.studies.fidelity`), so a changed parameter shows up in it.

# %%
from lib.studies.cff_fidelity import cff_fidelity_table
from lib.studies.fidelity import as_html

display(as_html(cff_fidelity_table(configs, settings, datasets=nb.datasets)))

# %% [markdown]
# ## Runs
# Runs with a finished record are skipped, so an interrupted sweep resumes where it stopped. To run them
# elsewhere first, in a process pool or as a Slurm array, use
# `python -m lib.dispatch 01 --profile <profile>` (`--backend slurm`, see the README): this cell then only collects.

# %%
records, runs = nb.run(study.runs_frame, show=["margin_mode", "stabilizer", "m0", "layers", "epochs", "seed"])
curves = study.curves_frame(records)

# %% [markdown]
# ## Accuracy per cell
# Every seed is a dot; the bar is the cell mean with its 95% CI.

# %%
out = study.analyze(runs, settings)
display(out["cells"])
main_runs = (study.main_runs(runs, settings)[lambda d: (d.status == "ok") & (d.m0 == settings["m0"])]
             .assign(top1_pct=lambda d: 100 * d.top1))
fig, ax = plt.subplots(figsize=(6, 4))
sns.pointplot(data=main_runs, x="margin_mode", y="top1_pct", hue="stabilizer", dodge=0.3, linestyle="none",
              errorbar=("ci", 95), seed=0, capsize=0.1, ax=ax, legend=False)
sns.stripplot(data=main_runs, x="margin_mode", y="top1_pct", hue="stabilizer", dodge=True, alpha=0.7, ax=ax)
ax.set(xlabel="margin mode", ylabel="top-1 test accuracy (%)", title="Accuracy per cell, every seed shown")
plt.show()

# %% [markdown]
# ## Variance ratio and the tests
# A seed's detach and direct runs are twins (the stabilisers are gradient-neutral): every test counts a seed
# once, the mean of its two runs. VR = Var(clamp) / Var(subtract) over seeds; two-sided F-test, Levene
# (mean-centred), Brown–Forsythe (median-centred), percentile-bootstrap 95% CI over seeds; Welch's t-test of
# the means; the two-way ANOVA of accuracy on margin × stabiliser (on runs: it asks whether the stabiliser
# matters). Power and the seeds each claim would need are in the verdict table below.

# %%
if "pooled" in out:
    vr_rows = [dict(comparison=f"m0={settings['m0']}", **out["pooled"])]
    if "dose" in out:
        vr_rows.append(dict(comparison=f"dose m0={settings['dose_m0']}", **out["dose"]))
    vr_table = pd.DataFrame(vr_rows)
    display(vr_table)
    w = out["welch"]
    display(Markdown(
        f"Welch's t-test over seeds, clamp − subtract: {w.mean_diff:+.2f} points, t = {w.t:.2f}, df = {w.df:.1f}, "
        f"p = {w.p_value:.3g}."))
    if "anova" in out:
        display(out["anova"])  # the residual row has no F or p: lib.notebook.frame_html shows "–"
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.errorbar(vr_table.comparison, vr_table.vr, yerr=[vr_table.vr - vr_table.ci_low, vr_table.ci_high - vr_table.vr],
                fmt="o", capsize=6)
    ax.axhline(1, color="grey", linestyle="--")
    ax.axhline(5.90, color="tab:red", linestyle=":", label="paper, m0=0.4: 5.90")
    ax.set(yscale="log", ylabel="Var(clamp) / Var(subtract)", title="Variance ratio with bootstrap 95% CI")
    ax.legend()
    plt.show()

# %% [markdown]
# ## Clamp activation rate and gradient norm per layer
# CAR is measured for every arm: under `subtract` it shows what clamping would have saturated.

# %%
main_curves = study.main_runs(curves, settings)[lambda d: d.m0 == settings["m0"]]
for metric, label in [("car", "clamp activation rate"), ("grad_norm", "gradient norm of the layer loss")]:
    data = main_curves[main_curves.metric == metric]
    if data.empty:
        continue
    g = sns.relplot(data=data, x="epoch", y="value", hue="margin_mode", col="layer", kind="line",
                    errorbar="sd", height=2.6, aspect=1.0, col_wrap=min(4, settings["layers"]))
    g.set_axis_labels("epoch", label)
    g.figure.suptitle(f"{label} per layer (mean ± sd over seeds)", y=1.03)
    plt.show()

# %% [markdown]
# ## Layer 0 per epoch: the final epoch against the all-epoch mean
# The paper reports a layer-0 CAR and a gradient-norm ratio without saying at which epoch. An average
# over all epochs mixes the first epochs, where clamping has not yet set in, with the last ones, so the
# verdicts below compare the final epoch and give the all-epoch mean beside it. Per epoch: the layer-0
# CAR of each arm (mean over seeds with its 95% t-interval) and the gradient-norm ratio subtract / clamp
# (ratio of the arm means, 95% percentile-bootstrap CI over seeds, each arm resampled on its own; Welch's
# test of the per-seed gradient norms). A seed's detach and direct runs are twins, so they count as one
# observation: their mean.

# %%
main_trajectory = common.layer0_trajectory(main_curves)
display(main_trajectory)
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
common.plot_layer0_trajectory(left, right, main_trajectory, published_ratio=study.PUBLISHED_GRAD_RATIO,
                              title=f"L={settings['layers']}: ")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Layer-0 trajectory experiment: does the gradient-norm ratio keep growing toward 4.0x?
# CFF trains each layer on its own loss, so layer 0 alone (`layers=1`) is layer 0 of the full model
# without the layers above it, and cheap to run for longer. Clamp against subtract, one stabiliser
# (`detach`), the factorial's m0, the probe on fixed features (the probe is not the point here). These
# runs are kept out of every analysis above. Growth is judged on the least-squares slope of the ratio
# over the last epochs, with a CI from the same bootstrap.

# %%
trajectory = study.trajectory_experiment(curves, settings)
if trajectory is None:
    display(Markdown("No layer-0 trajectory runs in both arms (`trajectory_seeds` = 0 skips them)."))
else:
    t = trajectory["trend"]
    display(trajectory["table"][["epoch", "seeds_clamp", "seeds_subtract", "car_clamp", "car_subtract",
                                 "grad_norm_clamp", "grad_norm_subtract", "grad_norm_ratio", "ratio_low",
                                 "ratio_high", "grad_norm_welch_p"]])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    common.plot_layer0_trajectory(left, right, trajectory["table"], published_ratio=study.PUBLISHED_GRAD_RATIO,
                                  title="layer 0 alone: ")
    plt.tight_layout()
    plt.show()
    display(Markdown(
        f"**Does the ratio keep growing toward {study.PUBLISHED_GRAD_RATIO:.1f}x?** At epoch {t['final_epoch']} "
        f"the gradient-norm ratio subtract / clamp is {t['ratio']:.2f}x (95% CI [{t['ratio_low']:.2f}, "
        f"{t['ratio_high']:.2f}]); over the last {t['fitted']} epochs it changes by {t['slope']:+.3f} per epoch "
        f"(95% CI [{t['slope_low']:+.3f}, {t['slope_high']:+.3f}]). Reading: {study.trend_reading(t)}."))

# %% [markdown] tags=["findings"]
# ## Paper against reproduced
# Every claim goes through one verdict engine (`lib/core/verdicts.py`, rules in `docs/verdicts.md`): seeds are the
# unit (a seed's detach and direct twins averaged), each estimate has its interval at the level its test is decided
# at (α/m in a study of m tested claims; the `ci_level` column), p is Holm-corrected across the study's claims, and
# each row gives the design's power at the published value and the seeds per arm that would give 80%. *Reproduced*
# needs significance in the paper's direction with the CI reaching the published value; *not reproduced* needs that
# interval wholly on the null's side of it; fewer than 3 seeds an arm decide nothing; *inconclusive* gives the
# power the design had and the seeds it would take. The published "no mean difference" is tested for equivalence
# within ±1 point [ours] (TOST). The gradient-norm and CAR rows compare our final epoch (the paper's epoch is
# unknown). An operating point of the profile (`operating_points`, found by `python -m lib.regime`) reads the VR, the
# mean difference and the gradient ratio again where the clamp arm's CAR reaches the paper's regime, beside the rows
# at the scaled-down original settings. Checks of our own come last and are never counted as reproductions.
# Profiles below `paper` use a reduced model and far fewer epochs: a verdict there is a statement about this scale,
# not about the paper.

# %% tags=["findings"]
comparison = nb.two_looks(records, trajectory=trajectory)
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
