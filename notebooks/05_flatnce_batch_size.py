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
# # Study 5 — FlatNCE against InfoNCE across batch sizes
#
# **Question** (Chen et al. 2021, "Simpler, Faster, Stronger: Breaking the log-K Curse on Contrastive
# Learners with FlatNCE"): InfoNCE with N pairs per batch can never certify more than log(2N − 1)
# nats, and as its value l falls its gradient shrinks by the factor 1 − e^(−l). FlatNCE keeps the
# gradient direction of each anchor and drops that factor: per anchor,
# ∇FlatNCE = ∇InfoNCE / (1 − e^(−InfoNCE)). The paper reports that FlatNCE beats InfoNCE at every
# batch size on CIFAR-10, most at small batches.
#
# **Design**: SimCLR — ResNet-18 with the CIFAR stem, a 2-layer projector to 128, temperature 0.1,
# the SimCLR augmentation, LARS — trained with each loss at each batch size for several seeds. Per
# run: kNN (k = 200, weighted) and linear-probe top-1 of the frozen backbone; per epoch the InfoNCE
# value against its log(2N − 1) ceiling, the gradient-scale factor 1 − e^(−InfoNCE) and the entropy
# of the softmax over the 2N − 2 negatives (FlatNCE runs report the InfoNCE value of their batches
# beside their constant loss value of 1).
#
# With LARS every layer's step size is set by its trust ratio, so multiplying the whole gradient by
# a constant changes nothing: what FlatNCE changes is the *weighting of anchors* — towards anchors
# whose InfoNCE is already small. Where InfoNCE stays near its ceiling, 1 − e^(−l) is close to 1
# for every anchor and the two losses nearly coincide.
#
# **Recipe**: FLAT's code [code] in every profile — LARS, 10% of the epochs as warm-up, a projector
# without BatchNorm; the fidelity table below compares every setting with FlatCLR's files. The learning-rate
# rule is an **arm** of the study (`lr_rules`), crossed with batch size, loss and seed; every table, figure
# and verdict is per arm, never pooled:
#
# - `linear` — FLAT's rule lr = 0.3 × B / 256 [code], the first arm of every profile. It is set for 100
#   epochs of 50,000 images: at the quick profile (5 epochs of 1,024 images) its runs stayed at chance —
#   InfoNCE ended within 1% of its ceiling log(2N − 1) — and at the cpu profile its summed step size is
#   83× below FLAT's. Where InfoNCE ends within 1% of its ceiling, FlatNCE's anchor weights are nearly
#   uniform and LARS cancels a uniform scale, so the two losses should take nearly the same steps; the
#   gradient-scale check says where that happened, and the verdicts report what the accuracies measured.
# - `sqrt` — lr = 0.6 × √B [ours], the second arm of the quick and cpu profiles: the rate this project ran
#   before issue 17, which trains in a few epochs (linear-probe top-1 45–48% on the CIFAR-10 subset at the
#   cpu profile, kNN 30–43% on shapes at the quick profile). SimCLR's published square-root base is 0.075
#   (Chen et al. 2020, appendix B.1); 0.6 is 8× that, chosen for short schedules (on the quick setting
#   0.075 and 0.15 × √B left most seeds near chance, 0.6 trained every seed: `docs/notes/ssl.md`). This
#   arm asks the paper's question where the networks learn, at a rate that is not FLAT's.
#
# SimCLR's BatchNorm projector is `-p projector_bn True` [ours] (a variant). Every batch size trains for
# the same number of epochs, as in the paper, so a larger batch takes fewer steps: the tables keep the step
# count beside the accuracy.
#
# Evidence tags: **[code]** read in FLAT's public code, **[paper]** the paper's abstract,
# **[summary]** secondary summaries (approximate), **[ours]** our decision. Specification:
# `docs/studies.md` ("Study 5"); library: `lib/ssl/training.py`, `lib/core/losses.py`, `lib/studies/flatnce_batch.py`.

# %% tags=["parameters"]
# From lib/studies/flatnce_batch.py (Settings): edit there, then: python -m lib.notebook --parameters NN --write
from typing import Optional

profile: str = "quick"  # smoke | quick | cpu | paper: every parameter left as None takes the profile's value
dataset: Optional[str] = None  # cifar10 | cifar100 | svhn | fashion_mnist | mnist | digits | shapes
# dataset_options, e.g. {"num_classes": 10, "image_size": 32}
dataset_options: Optional[dict] = None  # lib.core.data.load_dataset options for shapes
batch_sizes: Optional[list] = None  # images per step N (2N - 2 negatives per anchor); the paper: 16, 32, ..., 4096
losses: list = ["infonce", "flatnce"]  # contrastive losses compared [paper]
seeds: Optional[int] = None  # seeds per batch size and loss
epochs: Optional[int] = None  # training epochs at every batch size (FLAT's code: 100)
warmup_epochs: Optional[float] = None  # linear warm-up epochs, then cosine to 0 (FLAT's code: 10)
width_multiplier: Optional[float] = None  # ResNet-18 channel multiplier: 512 * width_multiplier features (paper: 1)
optimizer: Optional[str] = None  # lars | sgd | adam (FLAT's code: lars)
# learning-rate rules: linear: 0.3 × B / 256 (FLAT's code) | sqrt: 0.6 × √B [ours]
lr_rules: Optional[list] = None  # each an arm; every table and verdict is per arm
projector_bn: Optional[bool] = None  # BatchNorm in the projector's hidden layer (FLAT's code: none; SimCLR: yes)
temperature: Optional[float] = None  # softmax temperature of both losses (SSLConfig: 0.1) [code]
train_subset: Optional[int] = None  # use this many training images (0: all)
probe_steps: Optional[int] = None  # L-BFGS iterations of the linear probe [ours]
operating_points: Optional[list] = None  # operating points read beside the shipped setting: small-batch ([] for none)
workers: Optional[int] = None  # runs in parallel processes; the cores are divided among them
device: str = "auto"  # auto | cpu | cuda: on a GPU the runs go one at a time
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

from lib.notebook import setup
from lib.studies import flatnce_batch as study

nb = setup(study, globals())  # checks every parameter, loads the data a run trains on; says where results go
settings, configs, store = nb.settings, nb.configs, nb.store
data = nb.dataset(configs[0])  # its facts: recorded with the runs; read from the arrays only where a run trains
train_images = study.check_batch_sizes(settings, data.train_images)  # a batch larger than the data fails here
paper = study.PROFILES["paper"]
scale = pd.DataFrame([
    ("data", (f"{settings['dataset']} {settings['dataset_options'] or ''}: {train_images} training, "
              f"{data.test_images} test images"), "CIFAR-10: 50,000 training, 10,000 test images"),
    ("backbone", f"ResNet-18, width {settings['width_multiplier']:g} "
                 f"({round(64 * settings['width_multiplier']) * 8} features)",
     "ResNet-18 (--model res18), width 1 (512 features)"),
    ("batch sizes", ", ".join(map(str, settings["batch_sizes"])),
     f"{paper['batch_sizes'][0]} ... {paper['batch_sizes'][-1]}"),
    ("epochs (warm-up)", f"{settings['epochs']} ({settings['warmup_epochs']:g})",
     f"{paper['epochs']} ({paper['warmup_epochs']:g})"),
    ("optimizer, learning rate (arms)",
     f"{settings['optimizer']}, " + "; ".join(study.ARM_LABELS[rule] for rule in settings["lr_rules"]),
     "lars, 0.3 × B / 256"),
    ("projector", "with BatchNorm" if settings["projector_bn"] else "without BatchNorm", "without BatchNorm"),
    ("seeds per cell", str(settings["seeds"]), "not stated"),
], columns=["", f"this run ({settings['profile']})", "paper (FLAT [code])"])
display(Markdown(f"Device: {settings['device']}."))
display(scale)
if settings["profile"] != "paper":
    display(Markdown(
        f"**Scale**: this is the `{settings['profile']}` profile, far below the paper's: "
        f"{settings['epochs']} epochs instead of 100, a {settings['width_multiplier']:g}-width network, "
        + ("procedural `shapes` images as a stand-in for CIFAR-10" if settings["dataset"] != "cifar10"
           else f"{train_images} CIFAR-10 images instead of 50,000")
        + ". It shows the mechanism and the direction of effects at this scale, not the paper's accuracies; "
          "a \"not reproduced\" below is a statement about this scale."))

# %% [markdown]
# ## Fidelity to the original code
# Every setting of these runs beside FLAT's public code (Junya-Chen/FlatCLR: `main.py`, `models/utils.py`,
# `models/resnet.py`, `optimizer/`, `flatclr.py`, `data_aug/`, `train_fc.py`), with the file it is read in
# and its evidence tag; each difference is marked [ours] with its reason. Where FLAT's code leaves a setting
# to the command line, the original is `main.py`'s default. The table is built from the run configs and the
# network they build (`lib.studies.fidelity`), so a changed parameter shows up in it.

# %%
from lib.studies.fidelity import as_html
from lib.studies.flat_fidelity import flat_fidelity_table

display(as_html(flat_fidelity_table(configs, settings, datasets=nb.datasets)))

# %% [markdown]
# ## Runs
# Runs with a finished record are skipped, so an interrupted sweep resumes where it stopped. To run them
# elsewhere first, in a process pool or as a Slurm array, use
# `python -m lib.dispatch 05 --profile <profile>` (`--backend slurm`, see the README): this cell then only collects.

# %%
records, runs = nb.run(study.runs_frame, show=["lr_rule", "loss", "batch_size", "operating_point", "seed"])
curves = study.curves_frame(records)
# An operating point's runs (settings["operating_points"]) are read in the verdicts, beside the rows at the shipped
# batch sizes; the tables and figures by batch size below show the profile's own settings.
runs, curves = study.at_shipped_setting(runs), study.at_shipped_setting(curves)

# %% [markdown]
# ## Accuracy per learning-rate rule, batch size and loss
# Two tables of the same cells, so that each fits the page: first the accuracies in percent (mean and
# standard deviation over seeds, to 0.1 point) beside the steps and the learning rate (every batch size
# trains for the same epochs, so larger batches take fewer steps); then the final diagnostics, InfoNCE-run
# and FlatNCE-run averages over the last epoch's steps. The table written to `results/tables/` keeps every
# column at full precision. The figure below draws the accuracies themselves, for context: the paired
# differences the claims test are drawn beside the verdicts ("Paper against reproduced").

# %%
out = study.analyze(runs, settings)
cells_path = store.write_frame("per_cell", out["cells"])
# Short names and rounded numbers: the full table is cut at the right of the page.
accuracy = out["cells"][["lr_rule", "batch_size", "loss", "runs", "steps", "lr", "probe_mean", "probe_sd",
                         "knn_mean", "knn_sd"]].round({"probe_mean": 1, "probe_sd": 1, "knn_mean": 1, "knn_sd": 1})
accuracy.columns = ["rule", "B", "loss", "seeds", "steps", "lr", "probe %", "probe sd", "kNN %", "kNN sd"]
display(accuracy)
final_diagnostics = out["cells"][["lr_rule", "batch_size", "loss", "info_nce_final", "info_nce_ceiling",
                                  "info_nce_factor_final", "grad_scale_final", "negative_entropy_final"]].round(3)
final_diagnostics.columns = ["rule", "B", "loss", "InfoNCE", "log(2N − 1)", "1 − e^(−InfoNCE)",
                             "steps' grad scale", "negatives' entropy"]
display(final_diagnostics)

# %%
ok_runs = runs[runs.status == "ok"]
long = ok_runs.melt(id_vars=["lr_rule", "loss", "batch_size", "seed"], value_vars=list(study.METRICS),
                    var_name="metric", value_name="accuracy").assign(accuracy=lambda d: 100 * d.accuracy,
                                                  metric=lambda d: d.metric.map(study.METRICS))
long = long.assign(lr_rule=lambda d: d.lr_rule.map(study.ARM_LABELS))
g = sns.relplot(data=long, x="batch_size", y="accuracy", hue="loss", col="metric", row="lr_rule", kind="line",
                marker="o", errorbar="sd", err_style="bars", height=3.8, aspect=1.15, facet_kws={"sharey": False},
                row_order=[study.ARM_LABELS[rule] for rule in settings["lr_rules"]])
for (rule, metric), ax in g.axes_dict.items():
    seeds_here = long[(long.metric == metric) & (long.lr_rule == rule)]
    sns.stripplot(data=seeds_here, x="batch_size", y="accuracy", hue="loss", native_scale=True, alpha=0.4, size=4,
                  legend=False, ax=ax)
    ax.axhline(100 / data.num_classes, color="grey", linestyle=":")
    ax.set(xscale="log", xlabel="batch size N (log2 axis)", ylabel="top-1 test accuracy (%)", title=f"{rule}\n{metric}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(settings["batch_sizes"], labels=[str(b) for b in settings["batch_sizes"]])
g.figure.suptitle(f"Accuracy against batch size (mean ± sd over {settings['seeds']} seeds, dots: seeds; "
                  f"dotted: chance) — {settings['dataset']}, {settings['profile']} profile", y=1.04)
plt.show()

# %% [markdown]
# ## FlatNCE against InfoNCE: the tests
# Per learning-rate rule and batch size, FlatNCE − InfoNCE in points with Welch's t-test (two-sided;
# needs two seeds per loss). Then, per rule, the two-way ANOVA of accuracy on loss × batch size
# (type-II sums of squares): the `loss` row asks whether FlatNCE differs on average, the interaction
# whether the difference depends on the batch size — "most at small batches" needs it.

# %%
comparison = out["comparison"]
if not comparison.empty:
    store.write_frame("flatnce_vs_infonce", comparison)
    display(comparison)
for rule, by_metric in out["anova"].items():
    for short, anova in by_metric.items():
        note = f" — {anova.attrs['note']}" if anova.attrs.get("note") else ""
        display(Markdown(f"**[{study.ARM_LABELS[rule]}] Two-way ANOVA, {study.METRICS[short + '_top1']}** "
                         f"(`{anova.attrs['model']}`){note}"))
        display(anova)  # the residual row has no F or p: lib.notebook.frame_html shows "–"

# %% [markdown]
# ## The diagnostics over training
# Rows: InfoNCE (dashed: its log(2N − 1) ceiling, the value when every similarity is equal), the
# gradient-scale factor 1 − e^(−InfoNCE) by which InfoNCE's gradient of an anchor is smaller than
# FlatNCE's, and the entropy of the softmax over the negatives (dashed: log(2N − 2), uniform
# weights). Columns: batch sizes; one figure per learning-rate rule. Mean ± sd over seeds.

# %%
for rule in settings["lr_rules"]:
    diagnostics = curves[curves.metric.isin(list(study.DIAGNOSTIC_LABELS)) & (curves.lr_rule == rule)]
    if diagnostics.empty:
        continue
    g = sns.relplot(data=diagnostics, x="epoch", y="value", hue="loss", row="metric", col="batch_size", kind="line",
                    errorbar="sd", marker="o", height=2.4, aspect=1.15,
                    row_order=list(study.DIAGNOSTIC_LABELS), facet_kws={"sharey": "row"})
    for (metric, batch), ax in g.axes_dict.items():
        if metric != "grad_scale":
            ax.axhline(study.ceilings(batch)[metric], color="grey", linestyle="--")
        ax.set_title(f"N = {batch}" if metric == "info_nce" else "")  # the top row names the batch
    for label, ax in zip(study.DIAGNOSTIC_LABELS.values(), g.axes[:, 0]):
        ax.set_ylabel(label)
    g.figure.suptitle(f"[{study.ARM_LABELS[rule]}] Diagnostics per epoch (dashed: the value with all similarities "
                      "equal)", y=1.02)
    plt.show()

# %% [markdown]
# ## The log-K ceiling against the batch size
# Final-epoch InfoNCE against log(2N − 1), and the gradient-scale factor, per batch size. The gap
# between InfoNCE and its ceiling is the mutual-information bound the run certifies; the factor is
# how much InfoNCE damps its own gradient. Line style: the learning-rate rule. The table gives, per rule,
# batch size and loss, the final-epoch InfoNCE and 1 − e^(−InfoNCE) of it (means over seeds): the factor
# the verdict below reads.

# %%
final = ok_runs.assign(bound=ok_runs.info_nce_ceiling - ok_runs.info_nce_final,
                       lr_rule=ok_runs.lr_rule.map(study.ARM_LABELS))
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
sns.lineplot(data=final, x="batch_size", y="info_nce_final", hue="loss", style="lr_rule", marker="o", errorbar="sd",
             ax=left)
sizes = np.array(settings["batch_sizes"])
left.plot(sizes, np.log(2 * sizes - 1), color="grey", linestyle="--", label="log(2N - 1)")
left.set(ylabel="final-epoch InfoNCE (nats)", title="InfoNCE and its ceiling")
left.legend()
sns.lineplot(data=final, x="batch_size", y="grad_scale_final", hue="loss", style="lr_rule", marker="o",
             errorbar="sd", ax=right)
right.set(ylabel="1 - e^(-InfoNCE)", title="gradient-scale factor, final epoch")
for ax in (left, right):
    ax.set_xscale("log", base=2)
    ax.set_xticks(settings["batch_sizes"], labels=[str(b) for b in settings["batch_sizes"]])
    ax.set_xlabel("batch size N (log2 axis)")
plt.tight_layout()
plt.show()
factors = study.factor_by_batch(out)
store.write_frame("gradient_scale_by_batch", factors)
display(factors)

# %% [markdown]
# ## The gradient identity
# Through the library's own `flat_nce` and `info_nce` (the losses every run trains with), on random
# float64 projections of two views (8 pairs, 16 anchors): FlatNCE's gradient against the mean over
# anchors of each anchor's InfoNCE gradient divided by 1 − e^(−l_i), by autograd.

# %%
identity_error = study.gradient_identity_error(temperature=settings["temperature"])
display(Markdown(f"Largest relative deviation (16 anchors): **{study.deviation_text(identity_error)}**."))

# %% [markdown] tags=["findings"]
# ## Paper against reproduced
# Every claim goes through one verdict engine (`lib/core/verdicts.py`, rules in `docs/verdicts.md`), one set per
# learning-rate rule (the quantity starts with the arm): seeds are the unit, each estimate has its interval at the
# level its test is decided at (α/m in a study of m tested claims; the `ci_level` column), p is Holm-corrected
# across the study's claims, and each row gives the design's power and the seeds per arm for 80%. The central claim
# is FlatNCE − InfoNCE on the linear probe averaged over the batch sizes (each seed's mean over them), under FLAT's
# rule; each batch size follows, and "largest at small batches" is the gain at the smallest batch minus the gain at
# the largest. The paper publishes no CIFAR-10 gain, so the claims are tested against our smallest gain that
# matters (1 point), as the paper column says. The ImageNet and transfer numbers are not measured by any profile
# here. The gradient identity and the gradient-scale factor are checks of our own. FlatNCE and InfoNCE runs of one
# seed share its initialisation and data order, so each claim is the paired t on the per-seed differences. A claim
# that `python -m lib.decide` extended is read a second time on its planned seeds, against its boundary, once all its
# runs have finished (the `look` column).

# %% tags=["findings"]
verdicts = nb.two_looks(records, identity_error=identity_error)
store.write_frame("paper_vs_reproduced", verdicts)
display(verdicts)

# %% [markdown] tags=["findings"]
# ### FlatNCE − InfoNCE per batch size
# The claims' quantity itself, per batch size: FlatNCE − InfoNCE in accuracy points, each seed's two runs
# paired (one seed's runs share initialisation and data order), on the linear probe and on the kNN, one
# panel per learning-rate rule. Small dots: the seeds; a filled dot with a bar: their mean with its interval
# at the level of that batch size's verdict above (the `ci_level` column: α/m); a hollow dot: a mean shown
# without an interval, for the reason the legend gives. Fewer than 3 seeds per arm decide nothing in this
# project, so such a cell shows its seeds and their mean, and no interval. The dotted line is our smallest
# gain that matters (1 point), the value the verdicts test against. The numbers are written to the table
# `gain_by_batch`.

# %% tags=["findings", "key-figure"]
gains = study.seed_gains(runs, settings)
if not gains.empty:
    gain_table = study.gain_intervals(gains, verdicts)
    store.write_frame("gain_by_batch", gain_table)
    fig = study.plot_gains(gains, gain_table, f"FlatNCE − InfoNCE per batch size, paired by seed — "
                                              f"{settings['dataset']}, {settings['profile']} profile")
    plt.show()

# %% [markdown]
# ## Re-run one run

# %%
nb.show_rerun(records)

# %% [markdown]
# ## Explore the results

# %%
nb.explore()
