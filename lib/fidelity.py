"""How a CFF run (studies 1-3) differs from CFF's original code: one table, built from the live configs.

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
from typing import Any

import pandas as pd
import torch
from IPython.display import HTML

from lib import params
from lib.augment import draw_simclr_params
from lib.cff import CFFConfig, split_indices
from lib.data import DATASETS, data_shape, get_dataset, num_classes
from lib.diagnostics import expected_positive_pair_density
from lib.optim import LARS, lr_formula, scaled_lr
from lib.resnet import BasicBlock
from lib.simulations import LATENT_SIMULATIONS, LatentClassConfig
from lib.ssl import SSLConfig, build_model, training_indices
from lib.studies.embedding_norms import data_of, intervention_of
from lib.studies.flatnce_batch import LR_RULES

COLUMNS = ("setting", "ours", "original", "source", "evidence", "note")
ORIGINAL_FILES = ("main_CFF.py", "utils.py", "models/vit.py", "losses.py")  # the files of CFF's code we read

# Why a profile's scale differs from the published one (README, "Profiles").
PROFILE_REASONS = {
    "smoke": "smoke profile: the smallest scale that exercises every code path (tests, CI)",
    "quick": "quick profile: embedded data and a small model, enough to show each mechanism qualitatively",
    "cpu": "cpu profile: reduced scale to fit 2 h per study on 2 cores",
}

CIFAR_NORMALIZATION = "mean (0.4914, 0.4822, 0.4465), std (0.2023, 0.1994, 0.2010)"  # as written in utils.py


def _constants(mean: Sequence[float], std: Sequence[float]) -> str:
    return f"mean ({', '.join(f'{m:.4f}' for m in mean)}), std ({', '.join(f'{s:.4f}' for s in std)})"


UNKNOWN = "unknown (MARGIN's code is not public)"

# Per dataset, what CFF's code fixes (utils.py, set_loaders; torchvision's split sizes): CIFAR-10 and -100 only.
CFF_DATA = {
    "cifar10": dict(train=50_000, test=10_000, padding=12, flip=True, metric="top-1"),
    "cifar100": dict(train=50_000, test=10_000, padding=4, flip=True, metric="top-5"),
}
# The MARGIN paper's other datasets [paper]: no loader in CFF's code, and MARGIN's is not public.
MARGIN_DATA = ("svhn", "fashion_mnist")
# The reason a dataset outside the papers is run [ours].
STAND_INS = {
    "mnist": "MNIST stands in for SVHN (a digit set near its accuracy ceiling) where SVHN is not at hand",
    "shapes": "the procedural embedded stand-in (no download; classes and difficulty are parameters)",
    "digits": "scikit-learn's embedded 8x8 digits (no download)",
}

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


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _changed(config: CFFConfig, name: str) -> str:
    """The reason for a field that differs from the original although its default does not."""
    field = CFFConfig.__dataclass_fields__[name]
    return f"{name} = {_show(getattr(config, name))} set for this run (CFFConfig's default, {field.default!r}, " \
           "is the original's)"


def _augmentation(padding: int, flip: bool) -> str:
    return f"RandomCrop, padding {padding}" + (" + horizontal flip" if flip else ", no flip")


def _row(setting, ours, original, source, evidence, reason="") -> dict:
    return dict(setting=setting, ours=_show(ours), original=_show(original), source=source, evidence=evidence,
                reason=reason)


def as_html(table: pd.DataFrame) -> HTML:
    """A fidelity table as a notebook shows it: folded under a one-line summary (how many settings differ from
    the original, ``[ours]``), left-aligned, no index column, and the same bytes on every render (a fixed table
    id where pandas would draw a random one; an HTML object, whose plain-text form carries no memory address)."""
    ours = int(table["note"].str.startswith("[ours]").sum()) if "note" in table else 0
    body = (table.style.set_uuid("fidelity").set_properties(**{"text-align": "left"}).hide(axis="index")
            .to_html())
    return HTML(f"<details><summary>{len(table)} settings beside the original's, {ours} of them ours ([ours], "
                f"with the reason): open to read them</summary>\n{body}</details>")


def _table(rows: list[dict]) -> pd.DataFrame:
    """The fidelity table: a row matches when our value equals the original's, else it is marked [ours]."""
    table = pd.DataFrame(rows)
    matches = table.ours == table.original
    table["note"] = ["matches" if same else f"[ours]: {reason}" for same, reason in zip(matches, table.reason)]
    return table[list(COLUMNS)]


def _model_and_training_rows(c: CFFConfig, configs: Sequence[CFFConfig], scale: str) -> list[dict]:
    init, ev = c.init, EVAL[c.eval_protocol]
    modes = ", ".join(dict.fromkeys(x.margin_mode for x in configs))
    stabilizers = ", ".join(dict.fromkeys(x.stabilizer for x in configs))
    levels = sorted({x.aug_level for x in configs})
    return [
        # the model
        _row("layers L", c.layers, 8, "MARGIN paper (L = 8); utils.py (parse_option) defaults to --L 5", "[paper]",
             scale),
        _row("embedding dimension E", c.embed_dim, 128, "utils.py (parse_option: --E)", "[code]", scale),
        _row("attention heads", c.heads, 4, "utils.py (parse_option: --H)", "[code]", scale),
        _row("patch size", c.patch, 4, "utils.py (set_loaders: patch_size = 4 for CIFAR-10/-100)", "[code]",
             _changed(c, "patch")),
        _row("layer 0", "Linear(C·p² → E) → ReLU → + learned position → block",
             "Linear(C·p² → E) → ReLU → + learned position → block",
             "models/vit.py (ViT: C = 3 hard-coded, PositionalEncoder)", "[code]"),
        _row("encoder block", "pre-LN: x + MHA(LN x), then + MLP(LN x); MLP E → 2E → E, GELU; no dropout",
             "pre-LN: x + MHA(LN x), then + MLP(LN x); MLP E → 2E → E, GELU; no dropout",
             "models/vit.py (ViTEncoder)", "[code]"),
        _row("tokens", "no CLS token; features = mean over tokens", "no CLS token; features = mean over tokens",
             "models/vit.py (ViT.forward); main_CFF.py (x.mean(1))", "[code]"),
        _row("positional embedding init", INIT[init][0], INIT["cff"][0], "models/vit.py (PositionalEncoder)",
             "[code]", "init='trunc_normal': ViT's usual std 0.02 (our earlier default)"),
        _row("attention init", INIT[init][1], INIT["cff"][1], "models/vit.py (ViTEncoder: nn.MultiheadAttention)",
             "[code]", "init='trunc_normal': separate nn.Linear projections with their defaults (our earlier default)"),
        _row("other initialisation", "PyTorch defaults (Linear, LayerNorm)", "PyTorch defaults (Linear, LayerNorm)",
             "models/vit.py (ViT, ViTEncoder)", "[code]"),
        # layer-local training
        _row("layer-local training",
             "each layer on its detached input; its loss on the pooled tokens of [view1; view2], labels tiled",
             "each layer on its detached input; its loss on the pooled tokens of [view1; view2], labels tiled",
             "main_CFF.py (one_epoch_stage1)", "[code]"),
        _row("optimiser", "one AdamW over every layer's parameters, one step after all layers' backward passes",
             "one AdamW per layer, stepped right after that layer's backward pass", "utils.py (set_optimizers)",
             "[code]", "AdamW acts element-wise and every layer's input is detached (computed before the previous "
                       "layer's step in both), so the steps are the same"),
        _row("learning rate", c.lr, 0.004, "utils.py (parse_option: --lr1)", "[code]", _changed(c, "lr")),
        _row("AdamW betas and eps", "PyTorch defaults (0.9, 0.999), 1e-8", "PyTorch defaults (0.9, 0.999), 1e-8",
             "utils.py (set_optimizers)", "[code]"),
        _row("weight decay", c.weight_decay, 0.01, "utils.py (set_optimizers: AdamW's default)", "[code]",
             _changed(c, "weight_decay")),
        _row("learning-rate schedule", "none", "none", "main_CFF.py (stage 1 loop)", "[code]"),
        _row("batch size (images, two views each)", c.batch_size, 512, "utils.py (parse_option: --batch_size)",
             "[code]", scale),
        _row("epochs (stage 1)", c.epochs, 600,
             "utils.py (parse_option: --epochs1); the MARGIN paper's count is unknown", "[code]", scale),
        _row("data order; last partial batch", "reshuffled every epoch; kept", "reshuffled every epoch; kept",
             "utils.py (set_loaders: DataLoader shuffle=True, no drop_last)", "[code]"),
        _row("non-finite loss", "the run stops, recorded as diverged", "not checked", "main_CFF.py (one_epoch_stage1)",
             "[code]", "a diverged run is reported as such, not trained on with NaN weights"),
        # the loss
        _row("temperature τ", c.temperature, 0.15, "utils.py (parse_option: --temp)", "[code]",
             _changed(c, "temperature")),
        _row("margin schedule", f"linear over layers, m0 = {c.m0:g} → m_last = {c.m_last:g}",
             "linear over layers, m0 = 0.4 → m_last = 0.1", "utils.py (set_margins: np.linspace(m0, mL, L))",
             "[code]", _changed(c, "m0" if c.m0 != 0.4 else "m_last")),
        _row("margin modes run", modes, "clamp", "losses.py (SupMCon: clamp only)", "[code]",
             "subtract (log p − m on positives, gradient-neutral) is the MARGIN paper's comparison arm [paper]; "
             "its implementation is ours (MARGIN's code is not public)"),
        _row("clamp", "s' = min(s + m, 1) on positives (never the diagonal)",
             "s' = min(s + m, 1) on positives (never the diagonal)", "losses.py (SupMCon: torch.clamp where mask == 1)",
             "[code]"),
        _row("logit stabiliser", stabilizers, "detach", "losses.py (SupMCon: logits_max.detach())", "[code]",
             "direct (the same row-max shift without stop-gradient) is the MARGIN factorial's second factor; "
             "its definition is ours (the paper's is not public)"),
        _row("row max", "over the whole row, diagonal included", "over the whole row, diagonal included",
             "losses.py (SupMCon: torch.max(anchor_dot_contrast, dim=1))", "[code]"),
        _row("positives", "same class, both views, self excluded", "same class, both views, self excluded",
             "losses.py (SupMCon: mask tiled, self masked)", "[code]"),
        _row("denominator", "every other view in the batch", "every other view in the batch",
             "losses.py (SupMCon: logits_mask)", "[code]"),
        _row("anchors without a positive", "contribute 0, counted in the mean over 2N anchors",
             "contribute 0, counted in the mean over 2N anchors", "losses.py (SupMCon: mask_pos_pairs, view(count, n))",
             "[code]"),
        _row("loss prefactor", "none (no τ/τ_base)", "none (no τ/τ_base)", "losses.py (SupMCon)", "[code]"),
        _row("extra augmentation", "none" if levels == [0] else "distortion levels " + ", ".join(map(str, levels)),
             "none", "utils.py (set_loaders: RandAugment(3, 14) only with --randaug, off by default)", "[code]",
             "study 3's difficulty knob (lib.augment.distort); the paper's exact knob is not public"),
        # evaluation
        _row("train / validation split", f"{1 - c.val_fraction:.0%} / {c.val_fraction:.0%}, random",
             "90% / 10%, random", "utils.py (set_loaders: randperm, 0.9)", "[code]", _changed(c, "val_fraction")),
        _row("stage-1 encoder evaluated", ev["encoder"], EVAL["cff"]["encoder"],
             "main_CFF.py (stage 1 loop: losses['valid'][-1], model_best.pth)", "[code]", EVAL_REASON),
        _row("stage-1 validation views", ev["val"], EVAL["cff"]["val"],
             "utils.py (set_loaders: valid_dataset with train_transform)", "[code]", EVAL_REASON),
        _row("probe head", "LayerNorm(E) + Linear(E → classes)", "LayerNorm(E) + Linear(E → classes)",
             "models/vit.py (classifier_head)", "[code]"),
        _row("probe input", ev["probe_input"], EVAL["cff"]["probe_input"],
             "main_CFF.py (one_epoch_stage2: batch[0][0])", "[code]", EVAL_REASON),
        _row("probe optimiser", f"AdamW, lr {c.probe_lr:g}", "AdamW, lr 0.0005",
             "utils.py (parse_option: --lr2); main_CFF.py (stage 2)", "[code]", _changed(c, "probe_lr")),
        _row("probe epochs", c.probe_epochs, 50, "utils.py (parse_option: --epochs2)", "[code]", scale),
        _row("probe batch size", c.probe_batch_size, 512,
             "utils.py (set_loaders: the stage-1 loaders, batch_size 512)", "[code]",
             "probe_batch_size is its own setting (CFF's probe shares the stage-1 loaders and their batch size)"),
        _row("probe selection", ev["probe_selection"], EVAL["cff"]["probe_selection"],
             "main_CFF.py (stage 2 loop: losses['valid'], model_best.pth)", "[code]", EVAL_REASON),
        _row("test images", "unaugmented, normalised", "unaugmented, normalised",
             "utils.py (set_loaders: test_transform)", "[code]"),
        # hazards of the original we do not copy, and our own measurements
        _row("seeding", "each run's seed draws its split, data order, augmentation, probe and initialisation",
             "torch.manual_seed(trial) once, in set_loaders' --on_ram branch, before the split; initialisation, "
             "order and loader-worker augmentation follow from torch's global RNG", "utils.py (set_loaders)",
             "[code]", "every random draw of a run comes from its seed alone, so a run repeats exactly"),
        _row("data in memory", "always; augmentation on every training view",
             "only with --on_ram; without it set_loaders fails (valid_dataset undefined) and the training set "
             "has no augmentation", "utils.py (set_loaders)", "[code]", "one path, with no flag to forget"),
        _row("device", "any (CPU or CUDA)", "CUDA hard-coded", "main_CFF.py (.to('cuda')); losses.py (device='cuda')",
             "[code]", "runs without a GPU"),
        _row("clamp activation rate (CAR)",
             "share of positive pairs with s + m > 1, per layer, mean over an epoch's batches", UNKNOWN,
             "MARGIN paper (the wording only)", "[ours]", "our definition, from the paper's wording"),
        _row("gradient norm", "L2 norm of the layer loss's gradient w.r.t. the layer's parameters, mean over an "
             "epoch's steps", UNKNOWN, "MARGIN paper (4.0× lower under clamp [summary])", "[ours]",
             "our definition; the paper's and the epoch it reports are not public"),
    ]


def _dataset_rows(c: CFFConfig, data_root: str | None, scale: str, reduced: bool) -> list[dict]:
    """Rows of one dataset: its images, augmentation, normalisation, positives per anchor and test metric."""
    name, options = c.dataset, c.dataset_options
    classes = num_classes(name, options)
    label = DATASETS[name].display_name + (f", {classes} classes" if DATASETS[name].options else "")
    size, channels = data_shape(name, options)
    ds = get_dataset(name, options, data_root)
    train_idx, _ = split_indices(ds, c, torch.Generator().manual_seed(c.seed))
    info = DATASETS[name]
    if c.normalization == "subset":
        normalization = "the loaded subset's own statistics"
    elif info.norm_mean is None:  # generated or embedded: the loaded data is the whole dataset
        normalization = "the dataset's own statistics"
    else:  # read from the registry, so a changed constant shows up against CFF's
        normalization = _constants(info.norm_mean, info.norm_std)
    ours = dict(images=f"{len(train_idx):,} train / {len(ds.y_test):,} test",
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
                       augmentation=f"padding {c.padding}, flip {c.flip} set for this run (lib.data's registry "
                                    "holds CFF's values)",
                       normalization="normalization='subset' (our earlier default)",
                       metric="both are recorded; the tables give top-1, and top-5 where CFF's code reports it")
    elif name in MARGIN_DATA:
        original = {key: (UNKNOWN, "MARGIN paper", "[ours]") for key in ours} | dict(positives=positives)
        reasons = dict(images="the full training split, 90% of it trains (CFF's split)",
                       shape="the native image size with patch 4",
                       augmentation="lib.data's registry entry: crop padding 4 (CIFAR-100's), no flip",
                       normalization="fixed constants of the full training split, as CFF's for CIFAR",
                       positives=scale, metric="both are recorded; the tables give top-1")
        if reduced:
            reasons["images"] = scale
    else:
        original = {key: ("— (not a dataset of the papers)", "—", "[ours]") for key in ours}
        reasons = {key: STAND_INS[name] for key in ours}
    return [_row(f"{setting} ({label})", ours[key], *original[key], reasons[key])
            for key, setting in (("images", "training / test images"), ("shape", "image size and tokens"),
                                 ("augmentation", "augmentation"), ("normalization", "normalisation"),
                                 ("positives", "positives per anchor, balanced batch"), ("metric", "test metric"))]


def cff_fidelity_table(configs: CFFConfig | Sequence[CFFConfig], settings: dict | None = None, *,
                       data_root: str | None = None) -> pd.DataFrame:
    """The fidelity table of a CFF study's runs against CFF's original code (module docstring).

    The first config gives the model, training and evaluation rows; the factor rows (margin modes,
    stabilisers, augmentation levels) list the values across ``configs``; each dataset among them gets
    its own rows (its data is loaded through ``lib.data.get_dataset`` from ``data_root``, once per process).
    ``settings`` (a study's resolved settings) names the profile, whose reason is given for differences
    of scale.
    """
    configs = [configs] if isinstance(configs, CFFConfig) else list(configs)
    if not configs or not all(isinstance(c, CFFConfig) for c in configs):
        params.fail("configs", configs, "a CFFConfig or a non-empty list of them")
    profile = (settings or {}).get("profile")
    reduced = profile in PROFILE_REASONS
    scale = PROFILE_REASONS[profile] if reduced else "set for this run (the published value is the original's)"
    rows = _model_and_training_rows(configs[0], configs, scale)
    # each dataset's first config; a generator's class count makes a dataset of its own (positive-pair density)
    firsts = {(c.dataset, num_classes(c.dataset, c.dataset_options)): c for c in reversed(configs)}
    for key in dict.fromkeys((c.dataset, num_classes(c.dataset, c.dataset_options)) for c in configs):
        rows += _dataset_rows(firsts[key], data_root, scale, reduced)
    return _table(rows)


# ------------------------------------------------------------------- study 4: NORMS (SSLEmbeddingNorms)

# The files of Andrew-Draganov/SSLEmbeddingNorms that study 4 follows.
NORMS_FILES = ("CLA/experiments/model_comparison.py", "CLA/training/models.py", "CLA/training/training_loop.py",
               "CLA/training/lin_evaluator.py", "CLA/utils/data_utils.py", "CLA/utils/losses.py",
               "CLA/utils/utils.py", "CLA/utils/knn_monitor.py", "configs/simclr_default.yml",
               "configs/simsiam_default.yml", "Simulations.ipynb", "Norm as Accuracy.ipynb")
# The authors' colour jitter for CIFAR (data_utils.py, get_transforms: s = 0.5, strengths 0.8 s and 0.2 s).
NORMS_JITTER = {"separate": "four RandomApply(p 0.8), one per op: brightness 0.4, contrast 0.4, saturation 0.4, "
                            "hue 0.1, in that order",
                "joint": "one RandomApply(p 0.8) of ColorJitter(0.4, 0.4, 0.4, 0.1), the ops in random order"}
SQUARED = ("the authors' LambdaLR multiplies learning_rate by get_lr(..., lr_max=learning_rate), squaring the rate "
           "(utils.py); we use the nominal rates")


def _norms_first(configs: Sequence, method: str, test) -> Any:
    return next((c for c in configs if c.method == method and test(c)), None)


def _norms_model_rows(simclr, simsiam, scale: str) -> list[dict]:
    c = simclr or simsiam
    features = 8 * max(1, round(64 * c.width_multiplier))
    rows = [
        _row("backbone", f"ResNet-18, CIFAR stem, {features} features", "ResNet-18, CIFAR stem, 512 features",
             "models.py (get_backbone); model_comparison.py (resnet_version 18)", "[code]", scale),
        _row("zero_init_residual", c.zero_init_residual, True, "models.py (get_backbone: zero_init_residual=True)",
             "[code]", "zero_init_residual=False: torchvision's default (our runs before issue 17)"),
    ]
    if simclr:
        bn = "BN → " if simclr.projector_bn else ""
        rows += [
            _row("SimCLR projector", f"Linear(d → {simclr.projector_hidden}) → {bn}ReLU → "
                 f"Linear({simclr.projector_hidden} → {simclr.projector_dim})",
                 "Linear(d → 128) → ReLU → Linear(128 → 128)",
                 "models.py (SimCLR: Projector n_layers=2; simclr_default.yml bn: False)", "[code]",
                 "set for this run (METHOD_SETTINGS holds the authors' head)"),
            _row("SimCLR loss", simclr.loss, "decoupled", "losses.py (nt_xent: attractive + repulsive, the diagonal "
                 "masked, view-1 anchors against view-2 rows)", "[code]",
                 "simclr_loss set for this run (SimCLR's NT-Xent or FlatNCE instead)"),
            _row("SimCLR temperature", simclr.temperature, 0.5, "simclr_default.yml (temperature)", "[code]",
                 "set for this run"),
            _row("SimCLR optimiser", f"SGD, momentum {simclr.momentum:g}, no Nesterov",
                 "SGD, momentum 0.9, no Nesterov", "training_loop.py (train_simclr); simclr_default.yml", "[code]"),
            _row("SimCLR weight decay", f"{simclr.weight_decay:g}, every parameter" if not simclr.exclude_bias_and_norm
                 else f"{simclr.weight_decay:g}, not on biases and norms", "1e-06, every parameter",
                 "simclr_default.yml; training_loop.py (SGD on model.parameters())", "[code]", "set for this run"),
            _row("SimCLR learning rate", lr_formula(simclr.lr, simclr.lr_scaling), "0.3 × B / 256",
                 "simclr_default.yml (0.6 at model_comparison.py's batch 512)", "[code]", "set for this run"),
        ]
    if simsiam:
        d, h = simsiam.projector_dim, simsiam.predictor_hidden or max(1, simsiam.projector_dim // 4)
        k = simsiam.batch_size // simsiam.micro_batch if simsiam.micro_batch else 1
        rows += [
            _row("SimSiam projector", f"3 × Linear to D = {d}, BN after each, ReLU between",
                 "3 × Linear to D = 2048, BN after each, ReLU between", "models.py (Projector, n_layers=3)", "[code]",
                 scale),
            _row("SimSiam predictor", f"Linear(D → {h}) → BN → ReLU → Linear({h} → D)",
                 "Linear(D → 512) → BN → ReLU → Linear(512 → D)", "models.py (Predictor: funnel D / 4)", "[code]",
                 scale),
            _row("Linear biases before a BatchNorm", "none", "kept (nn.Linear's default)",
                 "models.py (Projector, Predictor)", "[code]", "a bias before BatchNorm is removed by its centring"),
            _row("SimSiam loss", f"{simsiam.loss}: symmetric negative cosine, stop-gradient on z",
                 "simsiam: symmetric negative cosine, stop-gradient on z",
                 "losses.py (symmetric_attractive_loss, t = 1); models.py (SimSiam.forward: detach)", "[code]"),
            _row("SimSiam optimiser", f"SGD, momentum {simsiam.momentum:g}, no Nesterov", "SGD, momentum 0.9, Nesterov",
                 "simsiam_default.yml (nesterov: True); training_loop.py (train_simsiam)", "[code]",
                 "lib.optim's SGD has no Nesterov option"),
            _row("SimSiam weight decay", f"{simsiam.weight_decay:g}", "0.0005", "simsiam_default.yml", "[code]",
                 "set for this run"),
            _row("SimSiam learning rate", lr_formula(simsiam.lr, simsiam.lr_scaling), "0.05 × B / 256",
                 "simsiam_default.yml (0.2 at the effective batch 1024)", "[code]", "set for this run"),
            _row("SimSiam predictor rate", "the base rate, not scheduled" if simsiam.fixed_predictor_lr
                 else "scheduled with the rest", "the base rate, not scheduled",
                 "training_loop.py (train_simsiam: pred_optimizer has no scheduler)", "[code]", "set for this run"),
            _row("SimSiam micro-batches", f"{k} of {simsiam.batch_size // k} images, gradients summed",
                 "8 of 128 images, gradients summed",
                 "simsiam_default.yml (batch_size 128, effective_batch_size 1024); training_loop.py (train_simsiam: "
                 "loss not divided)", "[code]",
                 scale + " (8 micro-batches of batch_size / 8)" if k == 8 else
                 "simsiam_micro_batches set for this run (1: the whole batch in one pass, before issue 17)"),
            _row("SimSiam schedule steps", "one per update", "counted per micro-batch, stepped per update: the warm-up "
                 "spans 80 epochs and the cosine only 1/8 of its course", "training_loop.py (train_simsiam: "
                 "get_lr(step, len(train_loader), ...))", "[code]", "a slip of the original, not copied"),
        ]
    return rows


def _norms_training_rows(c, grad_scale, settings: dict, scale: str) -> list[dict]:
    recipe = ("lr 0.05 × B / 256, warm-up 19.5% of the epochs")
    rows = [
        _row("learning rate as applied", "the nominal rate × warm-up and cosine", "learning_rate squared × warm-up and "
             "cosine", "utils.py (get_lr); training_loop.py (LambdaLR)", "[code]", SQUARED),
        _row("schedule", f"linear warm-up over {c.warmup_epochs:g} of {c.epochs} epochs, then cosine to 0",
             "linear warm-up over 10 of 512 epochs, then cosine to 0.001 (× the rate)",
             "utils.py (get_lr); simclr_default.yml (lr_warmup_epochs, lr_epochs)", "[code]", scale),
        _row("batch size (images, two views each)", c.batch_size, "512 (SimCLR), 1024 (SimSiam, effective)",
             "model_comparison.py (batch_size 512); simsiam_default.yml", "[code]", scale),
        _row("epochs", c.epochs, 512, "simclr_default.yml, simsiam_default.yml (epochs)", "[code]", scale),
        _row("GradScale power p", settings["grad_scale_power"], 1, "model_comparison.py ('power': 1)", "[code]",
             "grad_scale_power set for this run"),
        _row("GradScale placement", "raw projections of both views (SimCLR), raw predictions (SimSiam)",
             "raw projections of both views (SimCLR), raw predictions (SimSiam)",
             "losses.py (RescaleNorm in nt_xent and symmetric_attractive_loss)", "[code]"),
        _row("SimCLR GradScale recipe",
             f"lr {lr_formula(grad_scale.lr, grad_scale.lr_scaling)}, "
             f"warm-up {grad_scale.warmup_epochs / grad_scale.epochs:.1%} of the epochs"
             if grad_scale else "not run", recipe,
             "model_comparison.py ('gradscale': learning_rate 0.1 at batch 512, lr_warmup_epochs 100 of 512)", "[code]",
             "grad_scale_recipe='ours': the other runs' rate and warm-up (before issue 17; diverged at cpu scale)"),
        _row("cut-initialisation", f"every parameter ÷ c once; c = {settings['cut_simclr']:g} (SimCLR)",
             "every parameter ÷ c once; c = 3 (SimCLR)", "utils.py (cut_weights); model_comparison.py ('cut': 3)",
             "[code]", "cut_simclr set for this run"),
        _row("cut-initialisation, SimSiam", f"c = {settings['cut_simsiam']:g}", "not in the public code",
             "model_comparison.py runs SimCLR only", "[summary]", "docs/studies.md: c = 9, non-contrastive"),
        _row("crop", f"RandomResizedCrop, scale ({c.crop_min_scale:g}, 1), flip p 0.5",
             "RandomResizedCrop, scale (0.2, 1), flip p 0.5", "data_utils.py (get_transforms)", "[code]",
             "set for this run"),
        _row("colour jitter", NORMS_JITTER[c.color_jitter], NORMS_JITTER["separate"], "data_utils.py (get_transforms)",
             "[code]", "color_jitter='joint': SimCLR's single jitter op, as FLAT's code (before issue 17)"),
        _row("grayscale", "p 0.2", "p 0.2", "data_utils.py (get_transforms)", "[code]"),
        _row("input normalisation", "per-channel mean and std of the training images", "none (ToTensor only)",
             "data_utils.py (BASE_TRANSFORM: Normalize commented out)", "[code]",
             "standardised inputs as in every study here; unseen sets get the training data's statistics"),
        _row("imbalanced subset", "class i keeps ⌊n_i · base^−i⌋ (base 1.5 for 10 classes)",
             "class i keeps ⌊5000 · 1.5^−i⌋ (CIFAR-10)", "data_utils.py (CIFAR10_Unbalanced.throw_away_samples)",
             "[code]", "n_i: the class's images in the loaded subset (" + scale + ")"),
        _row("kNN accuracy", "weighted kNN, k 200, t 0.1, on unaugmented training features",
             "weighted kNN, k 200, t 0.1, on augmented training features (RandomResizedCrop, flip)",
             "knn_monitor.py; lin_evaluator.py (get_accuracies: the loader with knn_transform)", "[code]",
             "a fixed bank: the same number for the same network"),
        _row("linear probe", "L-BFGS to convergence on frozen features, eval mode",
             "SGD for 2 epochs on augmented images, the backbone in train mode",
             "lin_evaluator.py (get_accuracies); simclr_default.yml (finetune_epochs 2)", "[code]",
             "2 epochs do not converge, and train mode moves BatchNorm's statistics (docs/studies.md: hazards)"),
        _row("BatchNorm before evaluation", "re-estimated on the unaugmented training images" if c.recalibrate_bn
             else "running averages", "running averages", "model_comparison.py (save_ablations: model.eval())",
             "[code]",
             "after few steps or cut-initialisation the running averages are far off"),
        _row("norm as confidence", f"held-out kNN (k {c.confidence_k}) per bucket of {c.buckets}, the authors' "
             "variant on training embeddings beside it", f"kNN on training embeddings per bucket of {c.buckets}",
             "Norm as Accuracy.ipynb", "[code]", "held-out scoring: training points are their own neighbours"),
    ]
    return rows


def _norms_ood_rows(ood_configs: Sequence, settings: dict, scale: str) -> list[dict]:
    c = ood_configs[0] if ood_configs else None
    near = ", ".join(map(str, settings["unseen_classes"])) or "none"
    far = ", ".join(spec["dataset"] for spec in settings["ood"]) or "none"
    return [
        _row("OOD test (primary)", f"trained on classes {', '.join(map(str, c.train_classes))}, held-out test classes "
             f"{near} unseen" if c else "not run", "no OOD code in the public repository",
             "— (the paper states the claim)", "[ours]",
             "near-OOD: unseen classes of the same images, so input statistics do not decide the AUROC"),
        _row("OOD sets (secondary)", far, "no OOD code in the public repository", "—", "[ours]",
             "far-OOD sets differ in input statistics already at initialisation"),
        _row("OOD AUROC at initialisation", "beside the trained one, every set" if c else "not run",
             "no OOD code in the public repository", "—", "[ours]",
             "an ordering present before training is not learned confidence"),
    ]


def _norms_simulation_rows(settings: dict) -> list[dict]:
    sim = LATENT_SIMULATIONS[settings["latent_simulation"]]
    batch = LatentClassConfig.batch_size  # the study leaves it at the config's default
    chosen = f"latent_simulation='{settings['latent_simulation']}'"
    return [
        _row("sphere: pairs, dimension, step, tolerance",
             f"{settings['pairs']}, {settings['dim']}, {settings['sphere_lr']:g}, {settings['tolerance']:g}",
             "500, 20, 10, 0.001", "Simulations.ipynb (cell 1)", "[code]", "set for this profile or run"),
        _row("latent: noise σ", settings["latent_sigma"], 1.0, "Simulations.ipynb (cell 5: class_vars = ones)",
             "[code]", f"{chosen} or latent_sigma set"),
        _row("latent: points projected back to the sphere", sim["project"], True,
             "Simulations.ipynb (SphericalDataset: points / norm)", "[code]", chosen),
        _row("latent: observation matrix scale", sim["observation_scale"], 10.0,
             "Simulations.ipynb (SphericalDataset: randn(64, 10) * 10)", "[code]", chosen),
        _row("latent: class sizes", "multinomial draw" if sim["counts"] == "multinomial" else "rounded shares",
             "multinomial draw", "Simulations.ipynb (SphericalDataset: torch.multinomial)", "[code]", chosen),
        _row("latent: positives", "a random same-class point in the batch" if sim["positives"] == "batch"
             else "a random same-class point in the whole data", "a random same-class point in the batch",
             "Simulations.ipynb (attract_pairs_infonce_loss)", "[code]", chosen),
        _row("latent: optimiser", f"SGD, lr {settings['latent_lr']:g}", "SGD, lr 0.01",
             "Simulations.ipynb (cell 5: learning_rate=0.01)", "[code]", f"{chosen} or latent_lr set"),
        _row("latent: points, epochs, batch", f"{settings['latent_samples']}, {settings['latent_epochs']}, {batch}",
             "2000, 100, 128", "Simulations.ipynb (cell 5: 500 × 4 classes, num_epochs=100; DataLoader batch_size 128)",
             "[code]", "set for this profile or run"),
        _row("latent: seeds", settings["latent_seeds"], 5, "Simulations.ipynb (cell 5: num_runs = 5)", "[code]",
             "the effect is weak: at least 20 seeds, for a test against chance"),
    ]


def norms_fidelity_table(configs: Sequence, settings: dict) -> pd.DataFrame:
    """The fidelity table of study 4's runs and simulations against the NORMS authors' code
    (Andrew-Draganov/SSLEmbeddingNorms, :data:`NORMS_FILES`), in the columns of :func:`cff_fidelity_table`.

    ``configs`` are the study's run configs (``lib.studies.embedding_norms.plan``), ``settings`` its resolved
    settings: the model and optimiser rows read each method's default balanced run, the training rows the
    first SimCLR default run (else SimSiam's), the GradScale recipe the first SimCLR GradScale run, the OOD
    rows the OOD runs, the simulation rows the settings. Match or difference is decided by comparing the
    values as shown.
    """
    configs = list(configs)
    if not configs or not all(isinstance(c, SSLConfig) for c in configs):
        params.fail("configs", configs, "a non-empty list of SSLConfig")
    profile = settings.get("profile")
    scale = PROFILE_REASONS.get(profile, "set for this run (the published value is the original's)")

    def default(c):
        return data_of(c.as_dict()) == "balanced" and intervention_of(c.as_dict()) == "default"

    simclr = _norms_first(configs, "simclr", default) or _norms_first(configs, "simclr", lambda c: True)
    simsiam = _norms_first(configs, "simsiam", default) or _norms_first(configs, "simsiam", lambda c: True)
    grad_scale = _norms_first(configs, "simclr", lambda c: c.grad_scale_power != 0)
    ood = [c for c in configs if c.train_classes]
    rows = (_norms_model_rows(simclr, simsiam, scale) + _norms_training_rows(simclr or simsiam, grad_scale, settings,
                                                                           scale)
            + _norms_ood_rows(ood, settings, scale) + _norms_simulation_rows(settings))
    return _table(rows)

# ------------------------------------------------------------------ study 5: FLAT's code (Junya-Chen/FlatCLR)

# The files of FLAT's code read for study 5 (no licence: read, never copied).
FLAT_FILES = ("main.py", "models/utils.py", "models/resnet.py", "models/load_model.py", "optimizer/lars.py",
              "optimizer/load_optimizer_scheduler.py", "optimizer/cos_anneal.py", "flatclr.py", "simclr.py",
              "data_aug/contrastive_learning_dataset.py", "data_aug/view_generator.py", "train_fc.py",
              "datasets/load_dataloader.py", "README.md")
FLAT_LOSSES = {"infonce": "InfoNCE", "flatnce": "FlatNCE"}
FLAT_MEAN, FLAT_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)  # models/resnet.py, cifar10
LARS_EXCLUSIONS = {True: "biases and BatchNorm parameters: no weight decay, no trust ratio",
                   False: "none: every parameter decayed and trust-scaled"}


def _describe_layers(layers: torch.nn.Sequential) -> str:
    """A Sequential as "Linear(d→h) → BatchNorm → ReLU → Linear(h→o)" (its Linear dimensions read off)."""
    def one(m):
        if isinstance(m, torch.nn.Linear):
            return f"Linear({m.in_features}→{m.out_features})"
        return {torch.nn.BatchNorm1d: "BatchNorm", torch.nn.ReLU: "ReLU"}.get(type(m), type(m).__name__)
    return " → ".join(one(m) for m in layers)


# Why study 5's sqrt arm runs 0.6 x sqrt(B) [ours] (lib.studies.flatnce_batch.LR_RULES), with the measurements
# behind it.
SQRT_ARM_REASON = ("the study's second arm, lr = 0.6 × √B: FLAT's rate is set for 100 epochs of 50,000 images; at the "
                   "quick profile (5 epochs of 1,024 images) its runs stay at chance (InfoNCE within 1% of "
                   "log(2N − 1)), and at the cpu profile its summed step size is 83× below FLAT's; "
                   "0.6 × √B trained at this scale (the records before issue 17: linear-probe top-1 45-48% on the "
                   "CIFAR-10 subset at the cpu profile, kNN 30-43% on shapes at the quick profile); on the quick "
                   "setting 0.075 and 0.15 × √B left most seeds near chance, 0.6 trained every seed "
                   "(docs/notes/ssl.md). SimCLR's "
                   "published square-root base is 0.075 (Chen et al. 2020, appendix B.1); 0.6 is ours")


def _flat_lr_rows(rule: str, lr: float, batches: list[int]) -> list[dict]:
    """The learning-rate rows of one arm of study 5: its rule and its rate at each batch size, beside FLAT's."""
    reason = (SQRT_ARM_REASON if rule == "sqrt" and lr == LR_RULES["sqrt"]
              else f"lr = {lr:g}, lr_scaling = {rule!r} set for this run")
    rates = ", ".join(f"{b}: {scaled_lr(lr, b, rule):.4g}" for b in batches)
    return [
        _row(f"learning-rate rule ({rule} arm)", lr_formula(lr, rule), "0.3 × B / 256",
             "main.py (--lr 0.6 at --batch_size 512, help '0.3*batch_size/256'); README.md (Quick Lookup)", "[code]",
             reason),
        _row(f"learning rate per batch size ({rule} arm)", rates,
             ", ".join(f"{b}: {scaled_lr(0.3, b, 'linear'):.4g}" for b in batches),
             "main.py (--lr; help '0.3*batch_size/256')", "[code]", reason),
    ]


def flat_fidelity_table(configs, settings: dict | None = None, *, data_root: str | None = None) -> pd.DataFrame:
    """Study 5's runs against FLAT's code (Junya-Chen/FlatCLR, :data:`FLAT_FILES`): one row per setting
    with :data:`COLUMNS`, built from the run configs (``lib.studies.flatnce_batch.plan``) and from the
    network and optimiser they build, so a changed parameter shows up as a difference.

    The first config gives the model, training and evaluation rows; the losses, batch sizes and seeds
    are read across ``configs``. Its dataset is loaded (``lib.data.get_dataset`` from ``data_root``) for
    the image count and the input statistics. ``settings`` names the profile, whose reason is given
    for differences of scale. Where FLAT's code leaves a setting to the command line, the original is
    its default in ``main.py``.
    """
    import inspect

    configs = [configs] if isinstance(configs, SSLConfig) else list(configs)
    if not configs or not all(isinstance(c, SSLConfig) and c.method == "simclr" for c in configs):
        params.fail("configs", configs, "a SimCLR SSLConfig or a non-empty list of them")
    c = configs[0]
    profile = (settings or {}).get("profile")
    scale = PROFILE_REASONS.get(profile, "set for this run (the published value is the original's)")
    ds = get_dataset(c.dataset, c.dataset_options, data_root)
    size, channels = data_shape(c.dataset, c.dataset_options)
    model = build_model(c, channels)
    d = model.feature_dim
    zero_init = any(isinstance(m, BasicBlock) and not m.bn2.weight.any() for m in model.modules())
    recipe = {k: v.default for k, v in inspect.signature(draw_simclr_params).parameters.items()}
    trust = inspect.signature(LARS).parameters["trust_coefficient"].default
    batches = sorted({x.batch_size for x in configs})
    losses = " and ".join(FLAT_LOSSES[name] for name in dict.fromkeys(x.loss for x in configs))
    seeds = len({x.seed for x in configs})
    arms = list(dict.fromkeys((x.lr_scaling, x.lr) for x in configs))  # the learning-rate arms, in plan order
    stand_in = c.dataset != "cifar10"
    data_reason = STAND_INS.get(c.dataset, "a dataset outside FLAT's CIFAR-10 runs") if stand_in else scale
    rows = [
        # the losses
        _row("losses compared", losses, "InfoNCE and FlatNCE", "main.py (--clr simclr | flatclr)", "[code]",
             "a single loss set for this run"),
        _row("InfoNCE", "cross-entropy of [s⁺, 2N − 2 negatives] / τ over the 2N anchors of both views, "
             "cosine similarities", "cross-entropy of [s⁺, 2N − 2 negatives] / τ over the 2N anchors of both views, "
             "cosine similarities", "simclr.py (info_nce_loss)", "[code]"),
        _row("FlatNCE", "v_i = logsumexp_j (s⁻_ij − s⁺_i) / τ; loss = mean_i exp(v_i − sg(v_i))",
             "v_i = logsumexp_j (s⁻_ij − s⁺_i) / τ; loss = mean_i exp(v_i − sg(v_i))",
             "flatclr.py (flat_loss, train)", "[code]"),
        _row("FlatNCE's reported value", "the batch's InfoNCE", "the batch's InfoNCE",
             "flatclr.py (train: loss_vec.mean() − 1 + cross-entropy.detach())", "[code]"),
        _row("temperature τ", c.temperature, 0.1, "main.py (--temperature)", "[code]",
             f"temperature = {c.temperature:g} set for this run"),
        # the network
        _row("backbone", "ResNet-18", "ResNet-50 (--model res50; res18 selectable)",
             "main.py (--model); models/load_model.py", "[code]",
             "ResNet-18 (FLAT's --model res18) at every profile of this study"),
        _row("stem", "3×3 convolution, stride 1, no max-pool", "3×3 convolution, stride 1, no max-pool",
             "models/resnet.py (ResNet: imagenet=False); models/load_model.py (CIFAR: imagenet=False)", "[code]"),
        _row("width multiplier (features d)", f"{c.width_multiplier:g} ({d})", "1 (512)",
             "models/resnet.py (64 → 512 channels)", "[code]", scale),
        _row("last BatchNorm of each residual branch", "zero-initialised" if zero_init else "weight 1",
             "weight 1", "models/resnet.py (zero_init_residual=False)", "[code]",
             "zero_init_residual set for this run"),
        _row("projector", _describe_layers(model.projector.net), f"Linear({d}→{d}) → ReLU → Linear({d}→128)",
             "models/utils.py (ProjectionHead, nonlinear: MLPLayer(use_bn=False), hidden = in_channel); main.py "
             "(--proj_head_mode nonlinear, --num_proj_layers 2, --proj_out_dim 128)", "[code]",
             "projector_bn=True: SimCLR's head with BatchNorm" if c.projector_bn
             else "projector_hidden / projector_dim set for this run"),
        _row("input normalisation", "the training images' own statistics: " + _constants(ds.mean, ds.std),
             _constants(FLAT_MEAN, FLAT_STD), "models/resnet.py (NormalizeByChannelMeanStd, cifar10)", "[code]",
             "lib.ssl normalises with the loaded training images' statistics; the first convolution has no bias "
             "and a BatchNorm follows it, so a common input scale cancels"
             + (f" (FLAT's std constants are {FLAT_STD[0] / ds.std[0]:.2f}× the red channel's pixel std here)"
                if c.dataset == "cifar10" else "")),
        # the optimiser
        _row("optimiser", c.optimizer, "lars", "main.py (--optimizer); optimizer/load_optimizer_scheduler.py",
             "[code]", f"optimizer = {c.optimizer!r} set for this run"),
        _row("LARS step", f"d = g + wd·w; v ← m·v + lr·{trust:g}·‖w‖/‖d‖·d; w ← w − v",
             "d = g + wd·w; v ← m·v + lr·0.001·‖w‖/‖d‖·d; w ← w − v",
             "optimizer/lars.py (classic_momentum, EETA_DEFAULT)", "[code]", "trust coefficient changed"),
        _row("LARS exclusions", LARS_EXCLUSIONS[c.exclude_bias_and_norm], LARS_EXCLUSIONS[False],
             "optimizer/lars.py (step: the exclude lists are passed, their use is a TODO); "
             "optimizer/load_optimizer_scheduler.py", "[code]",
             "SimCLR's exclusion: in FLAT's step a parameter of norm 0 gets trust ratio 0, so the BatchNorm "
             "shifts, initialised at 0, never move"),
        _row("momentum", c.momentum, 0.9, "optimizer/lars.py (LARS default; load_optimizer_scheduler.py passes none)",
             "[code]", f"momentum = {c.momentum:g} set for this run"),
        *[row for rule, lr in arms for row in _flat_lr_rows(rule, lr, batches)],
        _row("weight decay", c.weight_decay, 1e-6, "main.py (--weight_decay)", "[code]",
             f"weight_decay = {c.weight_decay:g} set for this run"),
        _row("schedule", "per step: linear warm-up to lr at its last step, then cosine to 0",
             "per step: linear warm-up from 0, then cosine to 1e-6",
             "optimizer/load_optimizer_scheduler.py (LambdaLR, stepped every iteration); optimizer/cos_anneal.py",
             "[code]", "lib.optim.warmup_cosine (shared with study 4): the warm-up is one step ahead of FLAT's and "
                       "the cosine ends at 0 instead of 1e-6"),
        _row("warm-up", f"{c.warmup_epochs / c.epochs:.0%} of the epochs", "10% of the epochs",
             "main.py (--warmup_epochs 10, --epochs 100)", "[code]", scale),
        _row("epochs", c.epochs, 100, "main.py (--epochs)", "[code]", scale),
        _row("batch sizes", ", ".join(map(str, batches)), "512 (one per run)", "main.py (--batch_size)", "[code]",
             "the study's grid (docs/studies.md: 16 … 512 on a CPU, up to 4096 on a GPU); the paper's grid is not in "
             "the code"),
        _row("last partial batch; order", "dropped; reshuffled every epoch", "dropped; reshuffled every epoch",
             "main.py (DataLoader: shuffle=True, drop_last=True)", "[code]"),
        _row("precision", "fp32", "fp32", "main.py (--fp16_precision, off by default); flatclr.py (autocast)",
             "[code]"),
        # the data and its augmentation
        _row("training images", f"{len(training_indices(c, ds)):,} ({DATASETS[c.dataset].display_name})",
             "50,000 (CIFAR-10)", "main.py (ContrastiveLearningDataset); data_aug/contrastive_learning_dataset.py",
             "[code]", data_reason),
        _row("crop", f"RandomResizedCrop({size}), scale ({c.crop_min_scale:g}, 1), ratio (3/4, 4/3)",
             "RandomResizedCrop(32), scale (0.08, 1), ratio (3/4, 4/3)",
             "data_aug/contrastive_learning_dataset.py (get_simclr_pipeline_transform: torchvision's defaults)",
             "[code]", f"crop_min_scale = {c.crop_min_scale:g} set for this run" if size == 32 else data_reason),
        _row("flip", "horizontal, p 0.5" if recipe["flip"] else "none", "horizontal, p 0.5",
             "data_aug/contrastive_learning_dataset.py (RandomHorizontalFlip)", "[code]", "flips turned off"),
        _row("colour jitter", f"ColorJitter({', '.join(f'{j:g}' for j in recipe['jitter'])}), p {recipe['jitter_p']:g}",
             "ColorJitter(0.4, 0.4, 0.4, 0.1), p 0.8",
             "data_aug/contrastive_learning_dataset.py (get_dataset: s = 0.5 for cifar10; 0.8s, 0.8s, 0.8s, 0.2s)",
             "[code]", "lib.augment's jitter changed"),
        _row("grayscale", f"p {recipe['grayscale_p']:g}", "p 0.2",
             "data_aug/contrastive_learning_dataset.py (RandomGrayscale)", "[code]", "lib.augment's grayscale changed"),
        _row("blur", "none", "none", "data_aug/contrastive_learning_dataset.py (gaussian=False for cifar10; only the "
             "--faster_version loader blurs)", "[code]"),
        # evaluation
        _row("encoder evaluated", "the final epoch's", "each checkpoint saved every 2 epochs, probed in turn",
             "main.py (main_eval; --save_every_n_epochs 2)", "[code]", "one probe per run, of the final encoder"),
        _row("linear probe",
             f"logistic regression by L-BFGS (at most {c.probe_steps} iterations), L2 {c.probe_weight_decay:g}, "
             "standardised features",
             "one Linear layer by SGD: lr 1.6, momentum 0.9, cosine, 100 epochs, batch 4096, no weight decay",
             "main.py (--fc_*); optimizer/load_optimizer_scheduler.py (load_fc_optimizer_scheduler); "
             "models/utils.py (SupervisedHead); train_fc.py", "[code]",
             "a convex problem solved to convergence: no learning rate or epoch count to tune"),
        _row("probe inputs", "unaugmented images; backbone in eval mode, features computed once",
             "unaugmented images; backbone in train mode (BatchNorm on batch statistics)",
             "train_fc.py (model.train()); datasets/load_dataloader.py (ToTensor only; train_mode 'eval' loads "
             "ImageNet, so the CIFAR-10 probe's data path is not in the code)", "[code]",
             "the backbone's BatchNorm is not changed by the probe"),
        _row("reported accuracy", "the final probe's test top-1", "the best test top-1 over the probe's epochs",
             "train_fc.py (best_top1_accuracy)", "[code]", "a best epoch chosen on the test set reads high"),
        _row("kNN accuracy", f"backbone features, k = {c.knn_k}, τ = {c.knn_temperature:g}", "none",
             "flatclr.py (logs the contrastive logits' top-1 only)", "[code]",
             "a second, probe-free accuracy (SimCLR's CIFAR monitor)"),
        _row("seeds", f"{seeds} per batch size and loss; each draws its run's initialisation, order and "
             "augmentation", "one run: torch.manual_seed(0) at import, np.random.seed(0)",
             "flatclr.py, simclr.py; data_aug/view_generator.py", "[code]",
             "several seeds per cell, for the per-batch-size tests"),
    ]
    return _table(rows)
