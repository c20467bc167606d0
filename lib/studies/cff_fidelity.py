"""How a CFF run (studies 1-3) differs from CFF's original code: its fidelity table (columns:
:mod:`lib.studies.fidelity`), built from the live configs.

``cff_fidelity_table(configs, settings)`` lists every setting the original code fixes or that matters
for studies 1-3: our value (read from the run configs, so the table cannot drift from the code), the
original's value, the file of HosseinAghagol/ContrastiveFF it is read in (``main_CFF.py``, ``utils.py``,
``models/vit.py``, ``losses.py``) or the paper, the evidence tag, and a note: ``matches``, or
``[ours]: <why>``. Match or difference is decided by comparing the two values as shown, so a changed
parameter shows up as a difference.

Where the original is the MARGIN paper's setting rather than CFF's code default (L = 8), the paper's
value is the one compared with, and the source says both.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from lib.cff.diagnostics import expected_positive_pair_density
from lib.cff.training import CFFConfig, split_sizes
from lib.core import params
from lib.core.data import DATASETS, data_shape, num_classes
from lib.core.dataset_facts import DatasetFacts, facts_for
from lib.studies.fidelity import PROFILE_REASONS, STAND_INS, constants, fidelity_frame, row, scale_reason, shown

ORIGINAL_FILES = ("main_CFF.py", "utils.py", "models/vit.py", "losses.py")  # the files of CFF's code we read

CIFAR_NORMALIZATION = "mean (0.4914, 0.4822, 0.4465), std (0.2023, 0.1994, 0.2010)"  # as written in utils.py
UNKNOWN = "unknown (MARGIN's code is not public)"

# Per dataset, what CFF's code fixes (utils.py, set_loaders; torchvision's split sizes): CIFAR-10 and -100 only.
CFF_DATA = {
    "cifar10": dict(train=50_000, test=10_000, padding=12, flip=True, metric="top-1"),
    "cifar100": dict(train=50_000, test=10_000, padding=4, flip=True, metric="top-5"),
}
# The MARGIN paper's other datasets [paper]: no loader in CFF's code, and MARGIN's is not public.
MARGIN_DATA = ("svhn", "fashion_mnist")

# What each value of the contract's named choices does, for the table's "ours" column.
INIT = {
    "cff": ("N(0, 1) (torch.randn)",
            "Xavier-uniform in-projection, zero in- and out-projection biases (nn.MultiheadAttention)"),
    "trunc_normal": ("truncated normal, std 0.02",
                     "nn.Linear defaults for the qkv and output projections (Kaiming-uniform weights, uniform biases)"),
}
EVAL = {
    "cff": dict(encoder="the epoch with the lowest last-layer validation loss",
                val="two views with the training augmentation",
                probe_input="mean-pooled last-layer tokens of the first augmented view, re-augmented every epoch",
                probe_selection="lowest validation loss, on augmented views"),
    "clean": dict(encoder="the final epoch",
                  val="two views with the training augmentation (recorded, not used)",
                  probe_input="mean-pooled last-layer tokens of the unaugmented images, computed once",
                  probe_selection="lowest validation loss, on unaugmented views"),
}
EVAL_REASON = "eval_protocol='clean': the final encoder and a probe on fixed clean features (our earlier protocol)"


def _changed(config: CFFConfig, name: str) -> str:
    """The reason for a field that differs from the original although its default does not."""
    field = CFFConfig.__dataclass_fields__[name]
    return f"{name} = {shown(getattr(config, name))} set for this run (CFFConfig's default, {field.default!r}, " \
           "is the original's)"


def _augmentation(padding: int, flip: bool) -> str:
    return f"RandomCrop, padding {padding}" + (" + horizontal flip" if flip else ", no flip")


def _model_and_training_rows(c: CFFConfig, configs: Sequence[CFFConfig], scale: str) -> list[dict]:
    init, ev = c.init, EVAL[c.eval_protocol]
    modes = ", ".join(dict.fromkeys(x.margin_mode for x in configs))
    stabilizers = ", ".join(dict.fromkeys(x.stabilizer for x in configs))
    levels = sorted({x.aug_level for x in configs})
    return [
        # the model
        row("layers L", c.layers, 8, "MARGIN paper (L = 8); utils.py (parse_option) defaults to --L 5", "[paper]",
             scale),
        row("embedding dimension E", c.embed_dim, 128, "utils.py (parse_option: --E)", "[code]", scale),
        row("attention heads", c.heads, 4, "utils.py (parse_option: --H)", "[code]", scale),
        row("patch size", c.patch, 4, "utils.py (set_loaders: patch_size = 4 for CIFAR-10/-100)", "[code]",
             _changed(c, "patch")),
        row("layer 0", "Linear(C·p² → E) → ReLU → + learned position → block",
             "Linear(C·p² → E) → ReLU → + learned position → block",
             "models/vit.py (ViT: C = 3 hard-coded, PositionalEncoder)", "[code]"),
        row("encoder block", "pre-LN: x + MHA(LN x), then + MLP(LN x); MLP E → 2E → E, GELU; no dropout",
             "pre-LN: x + MHA(LN x), then + MLP(LN x); MLP E → 2E → E, GELU; no dropout",
             "models/vit.py (ViTEncoder)", "[code]"),
        row("tokens", "no CLS token; features = mean over tokens", "no CLS token; features = mean over tokens",
             "models/vit.py (ViT.forward); main_CFF.py (x.mean(1))", "[code]"),
        row("positional embedding init", INIT[init][0], INIT["cff"][0], "models/vit.py (PositionalEncoder)",
             "[code]", "init='trunc_normal': ViT's usual std 0.02 (our earlier default)"),
        row("attention init", INIT[init][1], INIT["cff"][1], "models/vit.py (ViTEncoder: nn.MultiheadAttention)",
             "[code]", "init='trunc_normal': separate nn.Linear projections with their defaults (our earlier default)"),
        row("other initialisation", "PyTorch defaults (Linear, LayerNorm)", "PyTorch defaults (Linear, LayerNorm)",
             "models/vit.py (ViT, ViTEncoder)", "[code]"),
        # layer-local training
        row("layer-local training",
             "each layer on its detached input; its loss on the pooled tokens of [view1; view2], labels tiled",
             "each layer on its detached input; its loss on the pooled tokens of [view1; view2], labels tiled",
             "main_CFF.py (one_epoch_stage1)", "[code]"),
        row("optimiser", "one AdamW over every layer's parameters, one step after all layers' backward passes",
             "one AdamW per layer, stepped right after that layer's backward pass", "utils.py (set_optimizers)",
             "[code]", "AdamW acts element-wise and every layer's input is detached (computed before the previous "
                       "layer's step in both), so the steps are the same"),
        row("learning rate", c.lr, 0.004, "utils.py (parse_option: --lr1)", "[code]", _changed(c, "lr")),
        row("AdamW betas and eps", "PyTorch defaults (0.9, 0.999), 1e-8", "PyTorch defaults (0.9, 0.999), 1e-8",
             "utils.py (set_optimizers)", "[code]"),
        row("weight decay", c.weight_decay, 0.01, "utils.py (set_optimizers: AdamW's default)", "[code]",
             _changed(c, "weight_decay")),
        row("learning-rate schedule", "none", "none", "main_CFF.py (stage 1 loop)", "[code]"),
        row("batch size (images, two views each)", c.batch_size, 512, "utils.py (parse_option: --batch_size)",
             "[code]", scale),
        row("epochs (stage 1)", c.epochs, 600,
             "utils.py (parse_option: --epochs1); the MARGIN paper's count is unknown", "[code]", scale),
        row("data order; last partial batch", "reshuffled every epoch; kept", "reshuffled every epoch; kept",
             "utils.py (set_loaders: DataLoader shuffle=True, no drop_last)", "[code]"),
        row("non-finite loss", "the run stops, recorded as diverged", "not checked", "main_CFF.py (one_epoch_stage1)",
             "[code]", "a diverged run is reported as such, not trained on with NaN weights"),
        # the loss
        row("temperature τ", c.temperature, 0.15, "utils.py (parse_option: --temp)", "[code]",
             _changed(c, "temperature")),
        row("margin schedule", f"linear over layers, m0 = {c.m0:g} → m_last = {c.m_last:g}",
             "linear over layers, m0 = 0.4 → m_last = 0.1", "utils.py (set_margins: np.linspace(m0, mL, L))",
             "[code]", _changed(c, "m0" if c.m0 != 0.4 else "m_last")),
        row("margin modes run", modes, "clamp", "losses.py (SupMCon: clamp only)", "[code]",
             "subtract (log p − m on positives, gradient-neutral) is the MARGIN paper's comparison arm [paper]; "
             "its implementation is ours (MARGIN's code is not public)"),
        row("clamp", "s' = min(s + m, 1) on positives (never the diagonal)",
             "s' = min(s + m, 1) on positives (never the diagonal)", "losses.py (SupMCon: torch.clamp where mask == 1)",
             "[code]"),
        row("logit stabiliser", stabilizers, "detach", "losses.py (SupMCon: logits_max.detach())", "[code]",
             "direct (the same row-max shift without stop-gradient) is the MARGIN factorial's second factor; "
             "its definition is ours (the paper's is not public)"),
        row("row max", "over the whole row, diagonal included", "over the whole row, diagonal included",
             "losses.py (SupMCon: torch.max(anchor_dot_contrast, dim=1))", "[code]"),
        row("positives", "same class, both views, self excluded", "same class, both views, self excluded",
             "losses.py (SupMCon: mask tiled, self masked)", "[code]"),
        row("denominator", "every other view in the batch", "every other view in the batch",
             "losses.py (SupMCon: logits_mask)", "[code]"),
        row("anchors without a positive", "contribute 0, counted in the mean over 2N anchors",
             "contribute 0, counted in the mean over 2N anchors", "losses.py (SupMCon: mask_pos_pairs, view(count, n))",
             "[code]"),
        row("loss prefactor", "none (no τ/τ_base)", "none (no τ/τ_base)", "losses.py (SupMCon)", "[code]"),
        row("extra augmentation", "none" if levels == [0] else "distortion levels " + ", ".join(map(str, levels)),
             "none", "utils.py (set_loaders: RandAugment(3, 14) only with --randaug, off by default)", "[code]",
             "study 3's difficulty knob (lib.core.augment.distort); the paper's exact knob is not public"),
        # evaluation
        row("train / validation split", f"{1 - c.val_fraction:.0%} / {c.val_fraction:.0%}, random",
             "90% / 10%, random", "utils.py (set_loaders: randperm, 0.9)", "[code]", _changed(c, "val_fraction")),
        row("stage-1 encoder evaluated", ev["encoder"], EVAL["cff"]["encoder"],
             "main_CFF.py (stage 1 loop: losses['valid'][-1], model_best.pth)", "[code]", EVAL_REASON),
        row("stage-1 validation views", ev["val"], EVAL["cff"]["val"],
             "utils.py (set_loaders: valid_dataset with train_transform)", "[code]", EVAL_REASON),
        row("probe head", "LayerNorm(E) + Linear(E → classes)", "LayerNorm(E) + Linear(E → classes)",
             "models/vit.py (classifier_head)", "[code]"),
        row("probe input", ev["probe_input"], EVAL["cff"]["probe_input"],
             "main_CFF.py (one_epoch_stage2: batch[0][0])", "[code]", EVAL_REASON),
        row("probe optimiser", f"AdamW, lr {c.probe_lr:g}", "AdamW, lr 0.0005",
             "utils.py (parse_option: --lr2); main_CFF.py (stage 2)", "[code]", _changed(c, "probe_lr")),
        row("probe epochs", c.probe_epochs, 50, "utils.py (parse_option: --epochs2)", "[code]", scale),
        row("probe batch size", c.probe_batch_size, 512,
             "utils.py (set_loaders: the stage-1 loaders, batch_size 512)", "[code]",
             "probe_batch_size is its own setting (CFF's probe shares the stage-1 loaders and their batch size)"),
        row("probe selection", ev["probe_selection"], EVAL["cff"]["probe_selection"],
             "main_CFF.py (stage 2 loop: losses['valid'], model_best.pth)", "[code]", EVAL_REASON),
        row("test images", "unaugmented, normalised", "unaugmented, normalised",
             "utils.py (set_loaders: test_transform)", "[code]"),
        # hazards of the original we do not copy, and our own measurements
        row("seeding", "each run's seed draws its split, data order, augmentation, probe and initialisation",
             "torch.manual_seed(trial) once, in set_loaders' --on_ram branch, before the split; initialisation, "
             "order and loader-worker augmentation follow from torch's global RNG", "utils.py (set_loaders)",
             "[code]", "every random draw of a run comes from its seed alone, so a run repeats exactly"),
        row("data in memory", "always; augmentation on every training view",
             "only with --on_ram; without it set_loaders fails (valid_dataset undefined) and the training set "
             "has no augmentation", "utils.py (set_loaders)", "[code]", "one path, with no flag to forget"),
        row("device", "any (CPU or CUDA)", "CUDA hard-coded", "main_CFF.py (.to('cuda')); losses.py (device='cuda')",
             "[code]", "runs without a GPU"),
        row("clamp activation rate (CAR)",
             "share of positive pairs with s + m > 1, per layer, mean over an epoch's batches", UNKNOWN,
             "MARGIN paper (the wording only)", "[ours]", "our definition, from the paper's wording"),
        row("gradient norm", "L2 norm of the layer loss's gradient w.r.t. the layer's parameters, mean over an "
             "epoch's steps", UNKNOWN, "MARGIN paper (4.0× lower under clamp [summary])", "[ours]",
             "our definition; the paper's and the epoch it reports are not public"),
    ]


def _dataset_rows(c: CFFConfig, facts: DatasetFacts, scale: str, reduced: bool) -> list[dict]:
    """Rows of one dataset: its images, augmentation, normalisation, positives per anchor and test metric."""
    name, options = c.dataset, c.dataset_options
    classes = num_classes(name, options)
    label = DATASETS[name].display_name + (f", {classes} classes" if DATASETS[name].options else "")
    size, channels = data_shape(name, options)
    n_train, _ = split_sizes(facts.train_images, c)
    info = DATASETS[name]
    if c.normalization == "subset":
        normalization = "the loaded subset's own statistics"
    elif info.norm_mean is None:  # generated or embedded: the loaded data is the whole dataset
        normalization = "the dataset's own statistics"
    else:  # read from the registry, so a changed constant shows up against CFF's
        normalization = constants(info.norm_mean, info.norm_std)
    ours = dict(images=f"{n_train:,} train / {facts.test_images:,} test",
                shape=f"{size}×{size}×{channels}, {(size // c.patch) ** 2} tokens",
                augmentation=_augmentation(c.padding, c.flip), normalization=normalization,
                positives=f"{expected_positive_pair_density(c.batch_size, classes):.0f}",
                metric="top-1 and top-5" if classes >= 5 else "top-1")
    positives = (f"{expected_positive_pair_density(512, classes):.0f}",
                 "losses.py (SupMCon: mask) at utils.py's batch size 512", "[code]")
    if name in CFF_DATA:
        cff = CFF_DATA[name]
        original = dict(
            images=(f"{round(0.9 * cff['train']):,} train / {cff['test']:,} test",
                    "utils.py (set_loaders: torchvision's splits, 90% trains)", "[code]"),
            shape=("32×32×3, 64 tokens", "utils.py (set_loaders: patch_size, num_patches)", "[code]"),
            augmentation=(_augmentation(cff["padding"], cff["flip"]), "utils.py (set_loaders: train_transform)",
                          "[code]"),
            normalization=(CIFAR_NORMALIZATION, "utils.py (set_loaders: v2.Normalize)", "[code]"),
            positives=positives,
            metric=(cff["metric"], "main_CFF.py (eval: topk(eval_mode)); utils.py (set_loaders: eval_mode)", "[code]"))
        reasons = dict(images=scale, shape=scale, positives=scale,
                       augmentation=f"padding {c.padding}, flip {c.flip} set for this run (lib.core.data's registry "
                                    "holds CFF's values)",
                       normalization="normalization='subset' (our earlier default)",
                       metric="both are recorded; the tables give top-1, and top-5 where CFF's code reports it")
    elif name in MARGIN_DATA:
        original = {key: (UNKNOWN, "MARGIN paper", "[ours]") for key in ours} | dict(positives=positives)
        reasons = dict(images="the full training split, 90% of it trains (CFF's split)",
                       shape="the native image size with patch 4",
                       augmentation="lib.core.data's registry entry: crop padding 4 (CIFAR-100's), no flip",
                       normalization="fixed constants of the full training split, as CFF's for CIFAR",
                       positives=scale, metric="both are recorded; the tables give top-1")
        if reduced:
            reasons["images"] = scale
    else:
        original = {key: ("— (not a dataset of the papers)", "—", "[ours]") for key in ours}
        reasons = {key: STAND_INS[name] for key in ours}
    return [row(f"{setting} ({label})", ours[key], *original[key], reasons[key])
            for key, setting in (("images", "training / test images"), ("shape", "image size and tokens"),
                                 ("augmentation", "augmentation"), ("normalization", "normalisation"),
                                 ("positives", "positives per anchor, balanced batch"), ("metric", "test metric"))]


def cff_fidelity_table(configs: CFFConfig | Sequence[CFFConfig], settings: dict | None = None, *,
                       datasets: dict | None = None, data_root: str | None = None) -> pd.DataFrame:
    """The fidelity table of a CFF study's runs against CFF's original code (module docstring).

    The first config gives the model, training and evaluation rows; the factor rows (margin modes,
    stabilisers, augmentation levels) list the values across ``configs``; each dataset among them gets
    its own rows, from its facts in ``datasets`` (a notebook's ``nb.datasets``), else from the dataset loaded from
    ``data_root`` (:func:`lib.core.dataset_facts.facts_for`).
    ``settings`` (a study's resolved settings) names the profile, whose reason is given for differences
    of scale.
    """
    configs = [configs] if isinstance(configs, CFFConfig) else list(configs)
    if not configs or not all(isinstance(c, CFFConfig) for c in configs):
        params.fail("configs", configs, "a CFFConfig or a non-empty list of them")
    profile = (settings or {}).get("profile")
    reduced = profile in PROFILE_REASONS
    scale = scale_reason(profile)
    rows = _model_and_training_rows(configs[0], configs, scale)
    # each dataset's first config; a generator's class count makes a dataset of its own (positive-pair density)
    firsts = {(c.dataset, num_classes(c.dataset, c.dataset_options)): c for c in reversed(configs)}
    for key in dict.fromkeys((c.dataset, num_classes(c.dataset, c.dataset_options)) for c in configs):
        first = firsts[key]
        rows += _dataset_rows(first, facts_for(first.dataset, first.dataset_options, datasets, data_root), scale,
                              reduced)
    return fidelity_frame(rows)
