"""How study 5's runs differ from FLAT's code (Junya-Chen/FlatCLR): its fidelity table, in the columns of
:mod:`lib.studies.fidelity`, built from the run configs, the study's settings and its data."""
from __future__ import annotations

import pandas as pd
import torch

from lib.core import params
from lib.core.augment import draw_simclr_params
from lib.core.data import DATASETS, data_shape
from lib.core.dataset_facts import facts_for
from lib.core.optim import LARS, lr_formula, scaled_lr
from lib.ssl.resnet import BasicBlock
from lib.ssl.training import SSLConfig, build_model
from lib.studies.fidelity import STAND_INS, constants, fidelity_frame, row, scale_reason
from lib.studies.flatnce_batch import LR_RULES

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
        row(f"learning-rate rule ({rule} arm)", lr_formula(lr, rule), "0.3 × B / 256",
             "main.py (--lr 0.6 at --batch_size 512, help '0.3*batch_size/256'); README.md (Quick Lookup)", "[code]",
             reason),
        row(f"learning rate per batch size ({rule} arm)", rates,
             ", ".join(f"{b}: {scaled_lr(0.3, b, 'linear'):.4g}" for b in batches),
             "main.py (--lr; help '0.3*batch_size/256')", "[code]", reason),
    ]


def flat_fidelity_table(configs, settings: dict | None = None, *, datasets: dict | None = None,
                        data_root: str | None = None) -> pd.DataFrame:
    """Study 5's runs against FLAT's code (Junya-Chen/FlatCLR, :data:`FLAT_FILES`): one row per setting
    with :data:`COLUMNS`, built from the run configs (``lib.studies.flatnce_batch.plan``) and from the
    network and optimiser they build, so a changed parameter shows up as a difference.

    The first config gives the model, training and evaluation rows; the losses, batch sizes and seeds
    are read across ``configs``. The image count and the input statistics are its dataset's facts in
    ``datasets`` (a notebook's ``nb.datasets``), else those of the dataset loaded from ``data_root``. ``settings``
    names the profile, whose reason is given for differences of scale. Where FLAT's code leaves a setting to the
    command line, the original is its default in ``main.py``.
    """
    import inspect

    configs = [configs] if isinstance(configs, SSLConfig) else list(configs)
    if not configs or not all(isinstance(c, SSLConfig) and c.method == "simclr" and not c.train_classes
                              and not c.imbalance_base for c in configs):
        params.fail("configs", configs, "a SimCLR SSLConfig or a non-empty list of them, on whole classes (no "
                                        "train_classes, no imbalance_base: study 5's runs)")
    c = configs[0]
    profile = (settings or {}).get("profile")
    scale = scale_reason(profile)
    ds = facts_for(c.dataset, c.dataset_options, datasets, data_root)
    training_images = min(c.train_subset, ds.train_images) if c.train_subset else ds.train_images
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
        row("losses compared", losses, "InfoNCE and FlatNCE", "main.py (--clr simclr | flatclr)", "[code]",
             "a single loss set for this run"),
        row("InfoNCE", "cross-entropy of [s⁺, 2N − 2 negatives] / τ over the 2N anchors of both views, "
             "cosine similarities", "cross-entropy of [s⁺, 2N − 2 negatives] / τ over the 2N anchors of both views, "
             "cosine similarities", "simclr.py (info_nce_loss)", "[code]"),
        row("FlatNCE", "v_i = logsumexp_j (s⁻_ij − s⁺_i) / τ; loss = mean_i exp(v_i − sg(v_i))",
             "v_i = logsumexp_j (s⁻_ij − s⁺_i) / τ; loss = mean_i exp(v_i − sg(v_i))",
             "flatclr.py (flat_loss, train)", "[code]"),
        row("FlatNCE's reported value", "the batch's InfoNCE", "the batch's InfoNCE",
             "flatclr.py (train: loss_vec.mean() − 1 + cross-entropy.detach())", "[code]"),
        row("temperature τ", c.temperature, 0.1, "main.py (--temperature)", "[code]",
             f"temperature = {c.temperature:g} set for this run"),
        # the network
        row("backbone", "ResNet-18", "ResNet-50 (--model res50; res18 selectable)",
             "main.py (--model); models/load_model.py", "[code]",
             "ResNet-18 (FLAT's --model res18) at every profile of this study"),
        row("stem", "3×3 convolution, stride 1, no max-pool", "3×3 convolution, stride 1, no max-pool",
             "models/resnet.py (ResNet: imagenet=False); models/load_model.py (CIFAR: imagenet=False)", "[code]"),
        row("width multiplier (features d)", f"{c.width_multiplier:g} ({d})", "1 (512)",
             "models/resnet.py (64 → 512 channels)", "[code]", scale),
        row("last BatchNorm of each residual branch", "zero-initialised" if zero_init else "weight 1",
             "weight 1", "models/resnet.py (zero_init_residual=False)", "[code]",
             "zero_init_residual set for this run"),
        row("projector", _describe_layers(model.projector.net), f"Linear({d}→{d}) → ReLU → Linear({d}→128)",
             "models/utils.py (ProjectionHead, nonlinear: MLPLayer(use_bn=False), hidden = in_channel); main.py "
             "(--proj_head_mode nonlinear, --num_proj_layers 2, --proj_out_dim 128)", "[code]",
             "projector_bn=True: SimCLR's head with BatchNorm" if c.projector_bn
             else "projector_hidden / projector_dim set for this run"),
        row("input normalisation", "the training images' own statistics: " + constants(ds.mean, ds.std),
             constants(FLAT_MEAN, FLAT_STD), "models/resnet.py (NormalizeByChannelMeanStd, cifar10)", "[code]",
             "our training normalises with the loaded training images' statistics; the first convolution has no bias "
             "and a BatchNorm follows it, so a common input scale cancels"
             + (f" (FLAT's std constants are {FLAT_STD[0] / ds.std[0]:.2f}× the red channel's pixel std here)"
                if c.dataset == "cifar10" else "")),
        # the optimiser
        row("optimiser", c.optimizer, "lars", "main.py (--optimizer); optimizer/load_optimizer_scheduler.py",
             "[code]", f"optimizer = {c.optimizer!r} set for this run"),
        row("LARS step", f"d = g + wd·w; v ← m·v + lr·{trust:g}·‖w‖/‖d‖·d; w ← w − v",
             "d = g + wd·w; v ← m·v + lr·0.001·‖w‖/‖d‖·d; w ← w − v",
             "optimizer/lars.py (classic_momentum, EETA_DEFAULT)", "[code]", "trust coefficient changed"),
        row("LARS exclusions", LARS_EXCLUSIONS[c.exclude_bias_and_norm], LARS_EXCLUSIONS[False],
             "optimizer/lars.py (step: the exclude lists are passed, their use is a TODO); "
             "optimizer/load_optimizer_scheduler.py", "[code]",
             "SimCLR's exclusion: in FLAT's step a parameter of norm 0 gets trust ratio 0, so the BatchNorm "
             "shifts, initialised at 0, never move"),
        row("momentum", c.momentum, 0.9, "optimizer/lars.py (LARS default; load_optimizer_scheduler.py passes none)",
             "[code]", f"momentum = {c.momentum:g} set for this run"),
        *[row for rule, lr in arms for row in _flat_lr_rows(rule, lr, batches)],
        row("weight decay", c.weight_decay, 1e-6, "main.py (--weight_decay)", "[code]",
             f"weight_decay = {c.weight_decay:g} set for this run"),
        row("schedule", "per step: linear warm-up to lr at its last step, then cosine to 0",
             "per step: linear warm-up from 0, then cosine to 1e-6",
             "optimizer/load_optimizer_scheduler.py (LambdaLR, stepped every iteration); optimizer/cos_anneal.py",
             "[code]", "optim.warmup_cosine (shared with study 4): the warm-up is one step ahead of FLAT's and "
                       "the cosine ends at 0 instead of 1e-6"),
        row("warm-up", f"{c.warmup_epochs / c.epochs:.0%} of the epochs", "10% of the epochs",
             "main.py (--warmup_epochs 10, --epochs 100)", "[code]", scale),
        row("epochs", c.epochs, 100, "main.py (--epochs)", "[code]", scale),
        row("batch sizes", ", ".join(map(str, batches)), "512 (one per run)", "main.py (--batch_size)", "[code]",
             "the study's grid (docs/studies.md: 16 … 512 on a CPU, up to 4096 on a GPU); the paper's grid is not in "
             "the code"),
        row("last partial batch; order", "dropped; reshuffled every epoch", "dropped; reshuffled every epoch",
             "main.py (DataLoader: shuffle=True, drop_last=True)", "[code]"),
        row("precision", "fp32", "fp32", "main.py (--fp16_precision, off by default); flatclr.py (autocast)",
             "[code]"),
        # the data and its augmentation
        row("training images", f"{training_images:,} ({DATASETS[c.dataset].display_name})",
             "50,000 (CIFAR-10)", "main.py (ContrastiveLearningDataset); data_aug/contrastive_learning_dataset.py",
             "[code]", data_reason),
        row("crop", f"RandomResizedCrop({size}), scale ({c.crop_min_scale:g}, 1), ratio (3/4, 4/3)",
             "RandomResizedCrop(32), scale (0.08, 1), ratio (3/4, 4/3)",
             "data_aug/contrastive_learning_dataset.py (get_simclr_pipeline_transform: torchvision's defaults)",
             "[code]", f"crop_min_scale = {c.crop_min_scale:g} set for this run" if size == 32 else data_reason),
        row("flip", "horizontal, p 0.5" if recipe["flip"] else "none", "horizontal, p 0.5",
             "data_aug/contrastive_learning_dataset.py (RandomHorizontalFlip)", "[code]", "flips turned off"),
        row("colour jitter", f"ColorJitter({', '.join(f'{j:g}' for j in recipe['jitter'])}), p {recipe['jitter_p']:g}",
             "ColorJitter(0.4, 0.4, 0.4, 0.1), p 0.8",
             "data_aug/contrastive_learning_dataset.py (get_dataset: s = 0.5 for cifar10; 0.8s, 0.8s, 0.8s, 0.2s)",
             "[code]", "lib.core.augment's jitter changed"),
        row("grayscale", f"p {recipe['grayscale_p']:g}", "p 0.2",
             "data_aug/contrastive_learning_dataset.py (RandomGrayscale)", "[code]", "augment's grayscale changed"),
        row("blur", "none", "none", "data_aug/contrastive_learning_dataset.py (gaussian=False for cifar10; only the "
             "--faster_version loader blurs)", "[code]"),
        # evaluation
        row("encoder evaluated", "the final epoch's", "each checkpoint saved every 2 epochs, probed in turn",
             "main.py (main_eval; --save_every_n_epochs 2)", "[code]", "one probe per run, of the final encoder"),
        row("linear probe",
             f"logistic regression by L-BFGS (at most {c.probe_steps} iterations), L2 {c.probe_weight_decay:g}, "
             "standardised features",
             "one Linear layer by SGD: lr 1.6, momentum 0.9, cosine, 100 epochs, batch 4096, no weight decay",
             "main.py (--fc_*); optimizer/load_optimizer_scheduler.py (load_fc_optimizer_scheduler); "
             "models/utils.py (SupervisedHead); train_fc.py", "[code]",
             "a convex problem solved to convergence: no learning rate or epoch count to tune"),
        row("probe inputs", "unaugmented images; backbone in eval mode, features computed once",
             "unaugmented images; backbone in train mode (BatchNorm on batch statistics)",
             "train_fc.py (model.train()); datasets/load_dataloader.py (ToTensor only; train_mode 'eval' loads "
             "ImageNet, so the CIFAR-10 probe's data path is not in the code)", "[code]",
             "the backbone's BatchNorm is not changed by the probe"),
        row("reported accuracy", "the final probe's test top-1", "the best test top-1 over the probe's epochs",
             "train_fc.py (best_top1_accuracy)", "[code]", "a best epoch chosen on the test set reads high"),
        row("kNN accuracy", f"backbone features, k = {c.knn_k}, τ = {c.knn_temperature:g}", "none",
             "flatclr.py (logs the contrastive logits' top-1 only)", "[code]",
             "a second, probe-free accuracy (SimCLR's CIFAR monitor)"),
        row("seeds", f"{seeds} per batch size and loss; each draws its run's initialisation, order and "
             "augmentation", "one run: torch.manual_seed(0) at import, np.random.seed(0)",
             "flatclr.py, simclr.py; data_aug/view_generator.py", "[code]",
             "several seeds per cell, for the per-batch-size tests"),
    ]
    return fidelity_frame(rows)
