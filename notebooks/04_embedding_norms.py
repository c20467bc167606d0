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
# # Study 4 — embedding norms: convergence, confidence, OOD and the interventions
#
# **Paper** (Draganov et al., ICML 2025, "On the Importance of Embedding Norms in Self-Supervised
# Learning"): a loss that sees an embedding z only through z/‖z‖ has a gradient orthogonal to z,
# of size ∝ 1/‖z‖. So every step grows the norm, and the larger the norm the slower the embedding
# turns: convergence slows as ‖z‖². Samples the network has fitted well end with large norms, so the
# norm is a confidence score and is small for unseen data. Two interventions counter the slowdown:
# **cut-initialisation** (divide every parameter by c once, so norms start small) and **GradScale**
# (identity forward; backward multiplies row i's gradient by ‖z_i‖^p, which for p = 1 cancels the 1/‖z‖).
#
# **Four parts**, each with its own table and plots:
#
# - **(a)** gradient descent on −mean cosine from pairs of norm ρ: steps to converge against ρ, the
#   fitted log-log slope beside the predicted 2, and the norm's growth per step;
# - **(b)** the latent-class simulation (the authors' settings, at least 20 seeds): per-class embedding
#   norm against class frequency, and how often the rarest class ends smallest, against chance;
# - **(c)** SimCLR and SimSiam (ResNet-18, CIFAR stem, narrower for CPU runs) with the default
#   settings, stronger weight decay, cut-initialisation and GradScale, on balanced and imbalanced
#   data, with kNN and linear-probe accuracy;
# - **(d)** the norm as confidence (held-out kNN accuracy per norm bucket, rank correlation) and as
#   an OOD score: the OOD runs train the default recipe on half of the classes and score the held-out
#   classes' test images as unseen (near-OOD, the primary test), other datasets as secondary sets
#   (far-OOD), each by the AUROC at initialisation beside the trained one.
#
# **Data.** `cpu` trains on the offline CIFAR-10 subset (10,000 training images; the OOD runs on its
# classes 0–4) and scores CIFAR-10's test classes 5–9 (near) and Fashion-MNIST and MNIST converted to
# 32×32×3 (far) as unseen sets. Far sets differ from CIFAR in their input statistics, and their norms
# differ already at initialisation: only the near set, images of the same kind, can show learned
# confidence. `smoke` and `quick` train on the procedural `shapes` generator at 32×32 (16×16 for
# `smoke`; the OOD runs on classes 0–4, classes 5–9 held out) and score shapes drawn from another seed
# and scikit-learn's digits as far sets: **a controlled stand-in, not CIFAR** — their accuracies and
# AUROCs say nothing about CIFAR's, only whether the mechanisms show. `quick` also trains for two
# epochs only: the interventions' effects on accuracy need far longer training; what it can show is
# their effect on the norms.
#
# Evidence tags: **[paper]** the paper's abstract, **[code]** the authors' public code
# (Andrew-Draganov/SSLEmbeddingNorms), **[summary]** secondary summaries (approximate), **[ours]** our
# decision. Specification: `docs/studies.md` ("Study 4"); library: `lib/ssl/training.py` (config and training),
# `lib/ssl/evaluation.py`, `lib/ssl/interventions.py`, `lib/ssl/simulations.py`, `lib/studies/embedding_norms.py`.
#
# The authors' training details are the defaults, each a named parameter: the backbone's
# `zero_init_residual`, the four separate colour jitters (`color_jitter`), SimSiam's gradient summed over
# 8 micro-batches per step (`simsiam_micro_batches`), and SimCLR GradScale's own recipe (lr 0.1 at
# batch 512, 100 of 512 epochs of warm-up: `grad_scale_recipe`). The table "Fidelity to the original
# code" below lists every setting beside theirs.
#
# Decisions [ours]: SGD with momentum 0.9 at the SimCLR (0.3) and SimSiam (0.05) papers' base rates ×
# batch/256 (the authors' schedule multiplies the base rate by itself); both views go through the
# network as one batch; the confidence kNN is a majority vote of the 10 cosine-nearest training
# embeddings, and the authors' variant on training embeddings leaves each point out of its own
# neighbours; before evaluation every BatchNorm's statistics are re-estimated exactly on the
# unaugmented training images (after a few dozen steps the running averages still carry their
# initial values, which after cut-initialisation shrinks eval-mode outputs by orders of magnitude);
# the SimCLR loss is the authors' decoupled cross-view form unless `simclr_loss` says `standard`
# (SimCLR's NT-Xent) — the tables say which ran.

# %% tags=["parameters"]
# From lib/studies/embedding_norms.py (Settings): edit there, then: python -m lib.notebook --parameters NN --write
from typing import Optional

profile: str = "quick"  # smoke | quick | cpu | paper: every parameter left as None takes the profile's value
# (a) convergence on the sphere [code]
radii: Optional[list] = None  # starting norms rho of the pairs (paper: 0.25, 0.5, ..., 10)
pairs: Optional[int] = None  # positive pairs (paper: 500)
sphere_lr: Optional[float] = None  # gradient-descent step (paper: 10 with 500 pairs; steps depend on lr / pairs)
dim: int = 20  # dimension of the points [code]
tolerance: float = 0.001  # converged when the mean cosine reaches 1 - tolerance [code]
# (b) latent classes [code]
class_weights: list = [1, 2, 4, 8]  # class frequencies, rarest first [code]
# authors: sigma 1 then back to the sphere, inputs x10, in-batch positives, lr 0.01 [code]; ours: before issue 17
latent_simulation: str = "authors"  # authors | ours
latent_samples: Optional[int] = None  # points over all classes (authors: 2000)
latent_sigma: Optional[float] = None  # within-class noise around the unit-norm centres (None: the simulation's)
latent_epochs: Optional[int] = None  # SGD epochs of the MLP, batches of 128 (authors: 100)
latent_lr: Optional[float] = None  # SGD step (None: the simulation's)
latent_seeds: Optional[int] = None  # independent simulations (20 or more in every profile; smoke's last 3 epochs)
# (c, d) images
dataset: Optional[str] = None  # training data: cifar10 | cifar100 | svhn | fashion_mnist | mnist | digits | shapes
# dataset_options, e.g. shapes' {"num_classes": 10, "image_size": 32}
dataset_options: Optional[dict] = None  # lib.core.data.load_dataset options
imbalanced_dataset: Optional[str] = None  # data of the imbalanced runs (paper: cifar100)
methods: list = ["simclr", "simsiam"]  # simclr | simsiam
interventions: Optional[list] = None  # balanced: default | weight_decay | cut_init | grad_scale | cut_init+grad_scale
imbalanced_interventions: Optional[list] = None  # on the imbalanced subset (the same names; [] for none)
imbalance_base: Optional[float] = None  # class i keeps floor(n_i base^-i); None: 1.5 (10 classes), 1.03365 (100) [code]
# decoupled: the authors' cross-view form [code]; infonce: SimCLR's NT-Xent
simclr_loss: Optional[str] = None  # SimCLR runs' loss: decoupled (None) [code] | infonce | flatnce
simclr_weight_decays: Optional[list] = None  # values of the weight_decay runs (default 1e-6; paper sweep 0, 1e-8, 1e-4)
simsiam_weight_decays: Optional[list] = None  # the same for SimSiam (default 5e-4; paper sweep 0, 5e-6, 0.05)
simclr_lr: Optional[float] = None  # SimCLR base learning rate, times batch/256 (None: 0.3) [ours]
simsiam_lr: Optional[float] = None  # SimSiam base learning rate, times batch/256 (None: 0.05) [ours]
cut_simclr: Optional[float] = None  # cut-initialisation divisor for SimCLR, contrastive (None: 3) [code]
cut_simsiam: Optional[float] = None  # cut-initialisation divisor for SimSiam, non-contrastive (None: 9) [code]
grad_scale_power: Optional[float] = None  # GradScale power p of the grad_scale runs (None: 1) [code]
# authors: SimCLR GradScale at lr 0.05 x batch/256 with 100/512 of the epochs as warm-up [code]; ours: the others'
grad_scale_recipe: str = "authors"  # authors | ours
zero_init_residual: bool = True  # each residual branch's last BatchNorm starts at 0 [code]; False: ours before
color_jitter: str = "separate"  # separate: four RandomApply(p 0.8), one per op [code] | joint: one for all (ours)
seeds: Optional[int] = None  # seeds per run
width_multiplier: Optional[float] = None  # ResNet-18 channel multiplier (paper: 1, 512 features)
simsiam_dim: Optional[int] = None  # SimSiam projector width D; predictor D -> D/4 -> D (paper: 2048)
epochs: Optional[int] = None  # training epochs (paper: 512)
batch_size: Optional[int] = None  # images per batch, two views each (paper: 256)
simsiam_micro_batches: int = 8  # SimSiam's gradient summed over this many micro-batches per step [code]; 1: ours
warmup_epochs: Optional[float] = None  # linear warm-up before the cosine schedule (paper: 10)
probe_steps: Optional[int] = None  # L-BFGS iterations of the linear probe
# the OOD runs train on the other classes; None: the upper half (CIFAR-10: 5-9); [] for no OOD runs [ours]
unseen_classes: Optional[list] = None  # held-out classes of the training data: the near-OOD set
# far-OOD sets of the OOD runs, resized to the training data
ood: Optional[list] = None  # unseen sets: names or {"dataset": ..., "dataset_options": {...}}
workers: Optional[int] = None  # runs in parallel processes; the cores are divided among them
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
from matplotlib.ticker import FuncFormatter, LogFormatter, LogLocator, NullFormatter

from lib.core.dataset_facts import facts_for, label_of
from lib.notebook import setup
from lib.ssl.evaluation import ood_label
from lib.ssl.simulations import simulate_latent_class, simulate_latent_classes, simulate_sphere
from lib.studies import embedding_norms as study

nb = setup(study, globals())  # checks every parameter, loads the data a run trains on; says where results go
settings, configs, store = nb.settings, nb.configs, nb.store
# the datasets' facts (recorded with the runs; read from the arrays only where a run trains), the training sets
# first, then the OOD runs' unseen sets: the held-out classes (near-OOD, the primary test), then the far sets
datasets = {label_of(c.dataset, c.dataset_options): nb.dataset(c) for c in configs}
unseen = {ood_label(spec): facts_for(spec["dataset"], spec["dataset_options"], nb.datasets, data_root)
          for spec in study.unseen_sets(settings)}
ood_labels = list(unseen)
near_label = ood_label(study.near_ood_set(settings)) if settings["unseen_classes"] else None
stand_in = None if settings["dataset"] in ("cifar10", "cifar100") else settings["dataset"]
MIN_BUCKET = 10  # norm buckets with fewer test samples are left out of the plots (their accuracy is noise)


def radius_axis(ax):
    """Log-scaled x axis labelled at 1, 2 and 5 times the powers of ten: the cpu profile's radii are too dense
    on a log axis to label each without the labels overlapping."""
    ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def norm_histograms(ax, run, title, labels, *, prefix=""):
    """The seen classes' test-set norms against the unseen sets' ``labels``, on a log axis (unseen norms can be
    far larger); ``prefix="init_"``: the same at initialisation."""
    stored, metrics = run["metrics"]["stored"], run["metrics"]
    sets = {"test, seen classes": stored[f"{prefix}test"], **{label: stored[f"{prefix}{label}"] for label in labels}}
    values = np.concatenate([np.asarray(v) for v in sets.values()])
    bins = np.geomspace(values[values > 0].min(), values.max(), 50)
    for label, v in sets.items():
        auc = "" if label.startswith("test") else f" (AUROC {metrics[f'auroc_{prefix}{label}']:.2f})"
        ax.hist(v, bins=bins, alpha=0.5, density=True, label=label + auc)
    ax.set(xscale="log", xlabel="‖z‖ (projector output, log scale)", ylabel="density", title=title)
    # norms within a decade get only minor ticks, labelled 1.2×10⁰ by default and overlapping: plain numbers,
    # minor ticks labelled only where the axis spans little more than a decade
    ax.xaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    ax.legend(fontsize="x-small")
display(Markdown(
    f"Image runs ({', '.join(settings['methods'])}; "
    f"{settings['seeds']} seed(s); width ×{settings['width_multiplier']}, {settings['epochs']} epochs, "
    f"batch {settings['batch_size']}; "
    f"SimCLR loss `{settings['simclr_loss']}`) on `{settings['dataset']}` {settings['dataset_options'] or ''}"
    + (" — **a stand-in for CIFAR**" if stand_in else "") + ".\n\n"
    + "\n".join(f"- `{label}`: {facts.describe()}" for label, facts in datasets.items())
    + f"\n\nOOD runs: trained on the classes other than {settings['unseen_classes']}; unseen sets (test images, "
    "converted to the training data's size and channels):\n\n"
    + "\n".join(f"- `{label}`" + (" (near-OOD: the held-out classes)" if label == near_label else " (far-OOD)")
                 + f": {facts.describe()}" for label, facts in unseen.items())))

# %% [markdown]
# ## Fidelity to the original code
# Every setting of these runs and simulations beside the NORMS authors' public code
# (Andrew-Draganov/SSLEmbeddingNorms), with the file it is read in and its evidence tag; each difference is
# marked [ours] with its reason. The table is built from the run configs and settings (`lib.studies.fidelity`), so a
# changed parameter shows up in it.

# %%
from lib.studies.fidelity import as_html
from lib.studies.norms_fidelity import norms_fidelity_table

display(as_html(norms_fidelity_table(configs, settings)))

# %% [markdown]
# ## (a) Convergence on the sphere and the growth of the norm
# Each of `pairs` pairs starts with both points uniform on the sphere, scaled to norm ρ; plain
# gradient descent (autograd) on L = −mean cos(a_i, b_i) runs until the mean cosine reaches
# 1 − `tolerance`. Since the gradient of cos(a, b) in a is (b/‖b‖ − cos·a/‖a‖)/‖a‖, the predicted
# number of steps grows as ρ² (slope 2 on log-log axes), and each step grows every norm:
# ‖a − lr·g‖² = ‖a‖² + lr²‖g‖². The table gives, per ρ, the steps, steps/ρ², the mean norm at the
# start and at convergence, its mean growth per step, and two exact checks: the smallest change of
# any point's norm in any step (never negative) and the largest |cos| between a point and its
# gradient (zero up to rounding).

# %%
sphere = study.simulation_runs(nb.simulate(simulate_sphere, study.sphere_configs(settings)))  # recorded, like runs
convergence = study.convergence_table(sphere)
fit = study.fit_convergence(convergence)
store.write_frame("convergence", convergence)
display(convergence)
display(Markdown(f"Fitted log-log slope of steps on ρ: **{fit['slope']:.3f} ± {fit['ci']:.3f}** (95% CI, "
                 f"{fit['radii']} radii); predicted **2**."))
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
ok = convergence[convergence.steps > 0]
left.loglog(ok.rho, ok.steps, "o", label="steps to converge")
rho_line = np.geomspace(ok.rho.min(), ok.rho.max())
left.loglog(rho_line, np.exp(np.mean(np.log(ok.steps) - fit["slope"] * np.log(ok.rho))) * rho_line ** fit["slope"],
            label=f"fit: slope {fit['slope']:.2f}")
left.loglog(rho_line, ok.steps_over_rho2.median() * rho_line ** 2, "--", color="grey", label="slope 2 (predicted)")
left.set(xlabel="starting norm ρ", ylabel="gradient steps", title="Convergence slows as ρ²")
radius_axis(left)
left.legend()
for run in sorted(sphere, key=lambda run: run["rho"]):
    steps, curve = np.asarray(run["curve_steps"]), np.asarray(run["mean_norm_curve"])
    right.plot(steps / max(1, steps[-1]), curve / curve[0], label=f"ρ = {run['rho']:g}")
right.set(xlabel="fraction of the run (steps / steps to converge)", ylabel="mean norm / starting norm",
          title="The norm grows at every step")
right.legend(fontsize="small", ncol=2)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## (b) Latent classes: is the embedding norm smaller for rarer classes?
# The authors' simulation (`latent_simulation="authors"`, `Simulations.ipynb`): K classes with centres on
# the unit sphere in 10 dimensions and frequencies ∝ `class_weights`; points = centre + N(0, σ²) with σ = 1,
# projected back to the sphere; observed through a fixed random 64×10 matrix scaled ×10; an MLP
# 64 → 64 → 10 trained by SGD (lr 0.01, 100 epochs, batches of 128) with supervised InfoNCE (temperature 1)
# whose positive is a random same-class point of the same batch. `latent_simulation="ours"` gives our
# earlier settings (σ 0.3 without projection, no ×10, positives from the whole data, lr 0.1). The effect
# is weak even in the authors' setting, so the verdict counts the seeds in which the rarest class ends with
# the smallest mean norm and tests that count against chance (1/K, one-sided exact binomial test); the
# Spearman ρ of class frequency and norm is given beside it. The growth (end / start) removes the random
# scale each class's centre gets from the mixing matrix.

# %%
latent_runs = study.simulation_runs(nb.simulate(simulate_latent_class, study.latent_configs(settings),
                                                batched_fn=simulate_latent_classes))  # the seeds side by side
latent = study.latent_table(latent_runs)
latent_summary = study.latent_summary(latent)
store.write_frame("latent_classes", latent)
display(latent.groupby("weight")[["count", "norm_start", "norm_end", "norm_growth"]].mean())
display(Markdown(
    f"The rarest class ends with the smallest mean norm in **{latent_summary['rarest_smallest_count']} of "
    f"{latent_summary['seeds']} seeds** (chance: {latent_summary['chance'] * latent_summary['seeds']:.1f}; "
    f"one-sided binomial p = {latent_summary['p_rarest']:.2g}). Spearman ρ of class frequency with the final "
    f"norm: **{latent_summary['rho_norm']:+.2f}** (p = {latent_summary['p_norm']:.2g}); with the growth: "
    f"**{latent_summary['rho_growth']:+.2f}** (p = {latent_summary['p_growth']:.2g}), pooled over seeds."))
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
for ax, column, label in ((axes[0], "norm_end", "final mean norm"),
                          (axes[1], "norm_growth", "final / initial mean norm")):
    sns.stripplot(data=latent, x="weight", y=column, hue="seed", palette="tab10", ax=ax, legend=False)
    sns.pointplot(data=latent, x="weight", y=column, color="black", errorbar=None, ax=ax)
    ax.set(xlabel="class frequency (weight)", ylabel=label, title=f"Per class: {label}")
for k, weight in enumerate(settings["class_weights"]):
    curve = np.nanmean([np.asarray(r["class_norm_history"])[:, k] for r in latent_runs], axis=0)
    axes[2].plot(np.arange(len(curve)), curve, label=f"weight {weight:g}")
axes[2].set(xlabel="epoch", ylabel="mean norm (mean over seeds)", title="Class norms during training")
axes[2].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## (c) SimCLR and SimSiam with the interventions
# One run per method, data (balanced, or the imbalanced subset with class i keeping
# ⌊n_i·base^−i⌋ images), intervention and seed, and the OOD runs of part (d) (data `seen_classes`: the
# default recipe on the classes not held out; their accuracies are on those classes' test images).
# `knn_top1`: weighted kNN (k = 200, temperature 0.1) on normalised backbone features; `probe_top1`:
# linear probe on the frozen backbone (both in percent, on the balanced test set); `*_vs_default`: the
# change against the same method's default run; `norm_*`: mean projector-output norm in the first and
# last epoch (training batches, train mode) and on the test set (eval mode, BatchNorm statistics
# re-estimated); `spread_last_epoch`: √d × the mean per-dimension std of z/‖z‖ over a batch, SimSiam's
# collapse monitor (1 = spread over the sphere, 0 = collapsed);
# `class_norm_count_rho`: Spearman ρ of the per-class training-set norm with the class's image count.
# Runs with a finished record are skipped, so an interrupted sweep resumes where it stopped. To run them
# elsewhere first, in a process pool or as a Slurm array, use
# `python -m lib.dispatch 04 --profile <profile>` (`--backend slurm`, see the README): this cell then only collects.

# %%
records, runs = nb.run(study.runs_frame, show=["method", "data", "intervention", "seed"])
display(Markdown("Measured training step: "
                 + ", ".join(f"{m} {g.step_s.median():.3f} s" for m, g in runs.groupby("method"))
                 + f"; training time of all runs {(runs.steps * runs.step_s).sum() / 60:.1f} core-minutes."))
interventions_summary = study.intervention_table(runs)
store.write_frame("interventions", interventions_summary)
display(interventions_summary)

# %%
ok_runs = runs[runs.status == "ok"].copy()
fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
for ax, metric, label in ((axes[0], "knn_top1", "kNN top-1 (%)"), (axes[1], "probe_top1", "linear probe top-1 (%)")):
    shown = ok_runs.assign(value=100 * ok_runs[metric], arm=ok_runs.method + " · " + ok_runs.data)
    sns.barplot(data=shown, x="arm", y="value", hue="kind", errorbar=None, ax=ax)
    ax.axhline(100 / next(iter(datasets.values())).num_classes, color="grey", linestyle=":", label="chance")
    ax.set(xlabel="", ylabel=label, title=label)
    ax.tick_params(axis="x", rotation=20)
    ax.legend(fontsize="x-small")
steps_long = pd.DataFrame([dict(step=i, norm=v, method=r["config"]["method"],
                                kind=study.intervention_of(r["config"]).split("=")[0],
                                data="imbalanced" if r["config"]["imbalance_base"] else "balanced")
                           for r in records if r["status"] == "ok"
                           for i, v in enumerate(r["metrics"]["norm_per_step"])])
balanced_steps = steps_long[steps_long.data == "balanced"]
sns.lineplot(data=balanced_steps, x="step", y="norm", hue="kind", style="method", errorbar=None, ax=axes[2])
axes[2].set(yscale="log", xlabel="training step", ylabel="mean ‖z‖ of the batch",
            title="Embedding norm during training (balanced)")
axes[2].legend(fontsize="x-small")
plt.tight_layout()
plt.show()

# %% [markdown]
# Per-class embedding norm on the imbalanced training subset, against the class's image count
# (the paper: rarer, less-seen classes end with smaller norms).

# %%
class_rows = [dict(method=r["config"]["method"], intervention=study.intervention_of(r["config"]), count=n, norm=v)
              for r in records if r["status"] == "ok" and r["config"]["imbalance_base"]
              for n, v in zip(r["metrics"]["class_counts"], r["metrics"]["class_norms"]) if n > 0]
if class_rows:
    class_norms = pd.DataFrame(class_rows)
    grid = sns.relplot(data=class_norms, x="count", y="norm", hue="intervention", col="method", kind="line", marker="o",
                       seed=0, facet_kws={"sharey": False}, height=3.6, aspect=1.3)
    grid.set(xscale="log", xlabel="training images of the class", ylabel="mean ‖z‖ of the class")
    plt.show()
else:
    display(Markdown("No imbalanced runs in this profile."))

# %% [markdown]
# ## (d) The norm as confidence and as an OOD score
# **Confidence.** Each test embedding is classified by a majority vote of its 10 cosine-nearest
# training embeddings (held out: the test set against the training bank); the accuracy per bucket
# of the min–max scaled norm (20 buckets; the plots leave out buckets with fewer than 10 samples)
# and the Spearman ρ of norm with correctness. Beside it the
# authors' variant, training embeddings against the other training embeddings (`*_train`).
# **OOD.** From the OOD runs (trained on the seen classes only): the AUROC of the norm as an
# in-distribution score, the seen classes' test images against each unseen set's (above 0.5: smaller
# norms for unseen data, as the paper says), with the Mann–Whitney p-value and both sets' mean norms,
# after training and at initialisation (the same seed's untrained network, BatchNorm re-estimated on the
# same training images). The primary test is the near-OOD set, the held-out classes' test images: images
# of the same kind, so that only what training learned can order them. The far sets are secondary: an
# unseen set whose pixel statistics differ strongly from the training data's (e.g. digits' black
# backgrounds at full contrast), normalised with the training data's mean and std, reaches the network
# far outside its training input range, and its norms differ already at initialisation — the AUROC then
# measures the inputs, not learned confidence. Only a trained AUROC above the one at initialisation says
# that training made unseen data's norms smaller.

# %%
confidence = study.confidence_table(runs)
store.write_frame("confidence", confidence)
display(confidence)
ood_results = study.ood_table(runs, ood_labels, near_label)
store.write_frame("ood", ood_results)
display(ood_results)
buckets = study.bucket_frame(records)
buckets_train = study.bucket_frame(records, variant="_train")
fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
for ax, frame, title in ((axes[0], buckets, "held out: test against the training bank"),
                         (axes[1], buckets_train, "authors' variant: training embeddings")):
    shown = frame[frame["count"] >= MIN_BUCKET]
    sns.lineplot(data=shown, x="centre", y="accuracy", hue="kind", style="method", marker="o", errorbar=None, ax=ax)
    ax.set(xlabel="norm bucket (min-max scaled norm)", ylabel="kNN (k = 10) accuracy", title=title)
    ax.legend(fontsize="x-small")
plt.tight_layout()
plt.show()

# %% [markdown]
# Norms of the seen classes' test images against each unseen set's, per OOD run: at initialisation
# (left) and trained (right).

# %%
ood_runs = [r for r in records if r["status"] == "ok" and study.data_of(r["config"]) == "seen_classes"]
if ood_runs:
    fig, axes = plt.subplots(len(ood_runs), 2, figsize=(13, 4 * len(ood_runs)), squeeze=False)
    for row, r in zip(axes, ood_runs):
        name = f"{r['config']['method']}, seed {r['config']['seed']}"
        norm_histograms(row[0], r, f"{name}: at initialisation", ood_labels, prefix="init_")
        norm_histograms(row[1], r, f"{name}: trained", ood_labels)
    plt.tight_layout()
    plt.show()
else:
    display(Markdown("No OOD runs (`unseen_classes` is empty)."))

# %% [markdown]
# ## Summary figure
# Left: convergence against the starting norm (part a). Middle: held-out kNN accuracy per norm
# bucket for the default runs (part d). Right: the seen classes' test-set norms against the held-out
# classes' (near-OOD) for the SimCLR OOD run, or the first OOD run, trained (part d).

# %% tags=["key-figure"]
# The summary is read at the page's width, three panels across: seaborn's "talk" fonts (1.5 times the notebook's)
# keep its labels legible there.
with sns.plotting_context("talk"):
    fig, axes = plt.subplots(1, 3, figsize=(18, 6.2))
    axes[0].loglog(ok.rho, ok.steps, "o", label=f"ours: slope {fit['slope']:.2f}")
    axes[0].loglog(rho_line, ok.steps_over_rho2.median() * rho_line ** 2, "--", color="grey",
                   label="predicted: slope 2")
    axes[0].set(xlabel="starting norm ρ", ylabel="steps to converge", title="(a) convergence slows as ρ²")
    radius_axis(axes[0])
    axes[0].legend()
    default_buckets = buckets[(buckets.intervention == "default") & (buckets["count"] >= MIN_BUCKET)]
    sns.lineplot(data=default_buckets, x="centre", y="accuracy", hue="method", marker="o", errorbar=None, ax=axes[1])
    axes[1].set(xlabel="min-max scaled norm (bucket)", ylabel="held-out kNN accuracy", title="(d) norm as confidence")
    shown_run = next((r for r in ood_runs if r["config"]["method"] == "simclr"), ood_runs[0] if ood_runs else None)
    if shown_run is not None:
        init_auc = shown_run["metrics"][f"auroc_init_{near_label}"]
        norm_histograms(axes[2], shown_run, f"(d) near-OOD ({shown_run['config']['method']};\nAUROC at "
                        f"initialisation {init_auc:.2f})", [near_label])
        # the sets' names are long: under the panel, where they cover no bars
        axes[2].legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22))
    fig.suptitle(f"Embedding norms — profile {settings['profile']} on {settings['dataset']}"
                 + (" (a stand-in for CIFAR)" if stand_in else ""))
    plt.tight_layout()
    plt.show()

# %% [markdown] tags=["findings"]
# ## Paper against reproduced
# Every claim goes through one verdict engine (`lib/core/verdicts.py`, rules in `docs/verdicts.md`): seeds are the
# unit, each estimate has its interval at the level its test is decided at (α/m in a study of m tested claims; the
# `ci_level` column), p is Holm-corrected across the study's claims, and each row gives the design's power at the
# published value and the seeds per arm for 80%. A claim with one seed per arm is *not measured*: a spread over
# seeds is what a verdict needs. The confidence claim is the per-seed Spearman rho of norm and correctness; the OOD
# claim the per-seed AUROC gain of training over initialisation (an ordering already there before training is not
# learned), the near-OOD set (held-out classes) first. The paper gives no size for these, so they are tested
# against our smallest effect of interest, as the paper column says. Each intervention is its own claim against the
# default's seeds. (a) is a simulation of the paper's theorem: a check, never counted as a reproduction. Rows
# measured on a stand-in say so. Profiles below `paper` train a narrow network for a few epochs: a verdict there is
# a statement about this scale, not about the paper. A claim that `python -m lib.decide` extended is read a second
# time on its planned seeds, against its O'Brien–Fleming boundary, once all its runs have finished; the `look`
# column says at which look each row was decided (`docs/verdicts.md`).

# %% tags=["findings"]
comparison = nb.two_looks(records, fit=fit, convergence=convergence, latent=latent, ood_labels=ood_labels,
                          near_label=near_label, stand_in=stand_in)
store.write_frame("paper_vs_reproduced", comparison)
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
# ### The sphere simulation, by hand
# Section (a) at one starting norm ρ, with this notebook's lr, pairs and dimension to start from: the mean norm of
# the points at every gradient step until the pairs align. Doubling ρ takes four times the steps, and the norm only
# grows.

# %%
from lib import explore

explore.sphere_explorer(lr=settings["sphere_lr"], pairs=settings["pairs"], dim=settings["dim"])
