"""How study 4's runs and simulations differ from the NORMS authors' code (Andrew-Draganov/SSLEmbeddingNorms):
its fidelity table, in the columns of :mod:`lib.studies.fidelity`, built from the run configs and the study's
settings."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from lib.core import params
from lib.core.optim import lr_formula
from lib.ssl.simulations import LATENT_SIMULATIONS, LatentClassConfig
from lib.ssl.training import SSLConfig
from lib.studies.embedding_norms import data_of, intervention_of
from lib.studies.fidelity import fidelity_frame, row, scale_reason

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
        row("backbone", f"ResNet-18, CIFAR stem, {features} features", "ResNet-18, CIFAR stem, 512 features",
             "models.py (get_backbone); model_comparison.py (resnet_version 18)", "[code]", scale),
        row("zero_init_residual", c.zero_init_residual, True, "models.py (get_backbone: zero_init_residual=True)",
             "[code]", "zero_init_residual=False: torchvision's default (our runs before issue 17)"),
    ]
    if simclr:
        bn = "BN → " if simclr.projector_bn else ""
        rows += [
            row("SimCLR projector", f"Linear(d → {simclr.projector_hidden}) → {bn}ReLU → "
                 f"Linear({simclr.projector_hidden} → {simclr.projector_dim})",
                 "Linear(d → 128) → ReLU → Linear(128 → 128)",
                 "models.py (SimCLR: Projector n_layers=2; simclr_default.yml bn: False)", "[code]",
                 "set for this run (METHOD_SETTINGS holds the authors' head)"),
            row("SimCLR loss", simclr.loss, "decoupled", "losses.py (nt_xent: attractive + repulsive, the diagonal "
                 "masked, view-1 anchors against view-2 rows)", "[code]",
                 "simclr_loss set for this run (SimCLR's NT-Xent or FlatNCE instead)"),
            row("SimCLR temperature", simclr.temperature, 0.5, "simclr_default.yml (temperature)", "[code]",
                 "set for this run"),
            row("SimCLR optimiser", f"SGD, momentum {simclr.momentum:g}, no Nesterov",
                 "SGD, momentum 0.9, no Nesterov", "training_loop.py (train_simclr); simclr_default.yml", "[code]"),
            row("SimCLR weight decay", f"{simclr.weight_decay:g}, every parameter" if not simclr.exclude_bias_and_norm
                 else f"{simclr.weight_decay:g}, not on biases and norms", "1e-06, every parameter",
                 "simclr_default.yml; training_loop.py (SGD on model.parameters())", "[code]", "set for this run"),
            row("SimCLR learning rate", lr_formula(simclr.lr, simclr.lr_scaling), "0.3 × B / 256",
                 "simclr_default.yml (0.6 at model_comparison.py's batch 512)", "[code]", "set for this run"),
        ]
    if simsiam:
        d, h = simsiam.projector_dim, simsiam.predictor_hidden or max(1, simsiam.projector_dim // 4)
        k = simsiam.batch_size // simsiam.micro_batch if simsiam.micro_batch else 1
        rows += [
            row("SimSiam projector", f"3 × Linear to D = {d}, BN after each, ReLU between",
                 "3 × Linear to D = 2048, BN after each, ReLU between", "models.py (Projector, n_layers=3)", "[code]",
                 scale),
            row("SimSiam predictor", f"Linear(D → {h}) → BN → ReLU → Linear({h} → D)",
                 "Linear(D → 512) → BN → ReLU → Linear(512 → D)", "models.py (Predictor: funnel D / 4)", "[code]",
                 scale),
            row("Linear biases before a BatchNorm", "none", "kept (nn.Linear's default)",
                 "models.py (Projector, Predictor)", "[code]", "a bias before BatchNorm is removed by its centring"),
            row("SimSiam loss", f"{simsiam.loss}: symmetric negative cosine, stop-gradient on z",
                 "simsiam: symmetric negative cosine, stop-gradient on z",
                 "losses.py (symmetric_attractive_loss, t = 1); models.py (SimSiam.forward: detach)", "[code]"),
            row("SimSiam optimiser", f"SGD, momentum {simsiam.momentum:g}, no Nesterov", "SGD, momentum 0.9, Nesterov",
                 "simsiam_default.yml (nesterov: True); training_loop.py (train_simsiam)", "[code]",
                 "lib.core.optim's SGD has no Nesterov option"),
            row("SimSiam weight decay", f"{simsiam.weight_decay:g}", "0.0005", "simsiam_default.yml", "[code]",
                 "set for this run"),
            row("SimSiam learning rate", lr_formula(simsiam.lr, simsiam.lr_scaling), "0.05 × B / 256",
                 "simsiam_default.yml (0.2 at the effective batch 1024)", "[code]", "set for this run"),
            row("SimSiam predictor rate", "the base rate, not scheduled" if simsiam.fixed_predictor_lr
                 else "scheduled with the rest", "the base rate, not scheduled",
                 "training_loop.py (train_simsiam: pred_optimizer has no scheduler)", "[code]", "set for this run"),
            row("SimSiam micro-batches", f"{k} of {simsiam.batch_size // k} images, gradients summed",
                 "8 of 128 images, gradients summed",
                 "simsiam_default.yml (batch_size 128, effective_batch_size 1024); training_loop.py (train_simsiam: "
                 "loss not divided)", "[code]",
                 scale + " (8 micro-batches of batch_size / 8)" if k == 8 else
                 "simsiam_micro_batches set for this run (1: the whole batch in one pass, before issue 17)"),
            row("SimSiam schedule steps", "one per update", "counted per micro-batch, stepped per update: the warm-up "
                 "spans 80 epochs and the cosine only 1/8 of its course", "training_loop.py (train_simsiam: "
                 "get_lr(step, len(train_loader), ...))", "[code]", "a slip of the original, not copied"),
        ]
    return rows


def _norms_training_rows(c, grad_scale, settings: dict, scale: str) -> list[dict]:
    recipe = ("lr 0.05 × B / 256, warm-up 19.5% of the epochs")
    rows = [
        row("learning rate as applied", "the nominal rate × warm-up and cosine", "learning_rate squared × warm-up and "
             "cosine", "utils.py (get_lr); training_loop.py (LambdaLR)", "[code]", SQUARED),
        row("schedule", f"linear warm-up over {c.warmup_epochs:g} of {c.epochs} epochs, then cosine to 0",
             "linear warm-up over 10 of 512 epochs, then cosine to 0.001 (× the rate)",
             "utils.py (get_lr); simclr_default.yml (lr_warmup_epochs, lr_epochs)", "[code]", scale),
        row("batch size (images, two views each)", c.batch_size, "512 (SimCLR), 1024 (SimSiam, effective)",
             "model_comparison.py (batch_size 512); simsiam_default.yml", "[code]", scale),
        row("epochs", c.epochs, 512, "simclr_default.yml, simsiam_default.yml (epochs)", "[code]", scale),
        row("GradScale power p", settings["grad_scale_power"], 1, "model_comparison.py ('power': 1)", "[code]",
             "grad_scale_power set for this run"),
        row("GradScale placement", "raw projections of both views (SimCLR), raw predictions (SimSiam)",
             "raw projections of both views (SimCLR), raw predictions (SimSiam)",
             "losses.py (RescaleNorm in nt_xent and symmetric_attractive_loss)", "[code]"),
        row("SimCLR GradScale recipe",
             f"lr {lr_formula(grad_scale.lr, grad_scale.lr_scaling)}, "
             f"warm-up {grad_scale.warmup_epochs / grad_scale.epochs:.1%} of the epochs"
             if grad_scale else "not run", recipe,
             "model_comparison.py ('gradscale': learning_rate 0.1 at batch 512, lr_warmup_epochs 100 of 512)", "[code]",
             "grad_scale_recipe='ours': the other runs' rate and warm-up (before issue 17; diverged at cpu scale)"),
        row("cut-initialisation", f"every parameter ÷ c once; c = {settings['cut_simclr']:g} (SimCLR)",
             "every parameter ÷ c once; c = 3 (SimCLR)", "utils.py (cut_weights); model_comparison.py ('cut': 3)",
             "[code]", "cut_simclr set for this run"),
        row("cut-initialisation, SimSiam", f"c = {settings['cut_simsiam']:g}", "not in the public code",
             "model_comparison.py runs SimCLR only", "[summary]", "docs/studies.md: c = 9, non-contrastive"),
        row("crop", f"RandomResizedCrop, scale ({c.crop_min_scale:g}, 1), flip p 0.5",
             "RandomResizedCrop, scale (0.2, 1), flip p 0.5", "data_utils.py (get_transforms)", "[code]",
             "set for this run"),
        row("colour jitter", NORMS_JITTER[c.color_jitter], NORMS_JITTER["separate"], "data_utils.py (get_transforms)",
             "[code]", "color_jitter='joint': SimCLR's single jitter op, as FLAT's code (before issue 17)"),
        row("grayscale", "p 0.2", "p 0.2", "data_utils.py (get_transforms)", "[code]"),
        row("input normalisation", "per-channel mean and std of the training images", "none (ToTensor only)",
             "data_utils.py (BASE_TRANSFORM: Normalize commented out)", "[code]",
             "standardised inputs as in every study here; unseen sets get the training data's statistics"),
        row("imbalanced subset", "class i keeps ⌊n_i · base^−i⌋ (base 1.5 for 10 classes)",
             "class i keeps ⌊5000 · 1.5^−i⌋ (CIFAR-10)", "data_utils.py (CIFAR10_Unbalanced.throw_away_samples)",
             "[code]", "n_i: the class's images in the loaded subset (" + scale + ")"),
        row("kNN accuracy", "weighted kNN, k 200, t 0.1, on unaugmented training features",
             "weighted kNN, k 200, t 0.1, on augmented training features (RandomResizedCrop, flip)",
             "knn_monitor.py; lin_evaluator.py (get_accuracies: the loader with knn_transform)", "[code]",
             "a fixed bank: the same number for the same network"),
        row("linear probe", "L-BFGS to convergence on frozen features, eval mode",
             "SGD for 2 epochs on augmented images, the backbone in train mode",
             "lin_evaluator.py (get_accuracies); simclr_default.yml (finetune_epochs 2)", "[code]",
             "2 epochs do not converge, and train mode moves BatchNorm's statistics (docs/studies.md: hazards)"),
        row("BatchNorm before evaluation", "re-estimated on the unaugmented training images" if c.recalibrate_bn
             else "running averages", "running averages", "model_comparison.py (save_ablations: model.eval())",
             "[code]",
             "after few steps or cut-initialisation the running averages are far off"),
        row("norm as confidence", f"held-out kNN (k {c.confidence_k}) per bucket of {c.buckets}, the authors' "
             "variant on training embeddings beside it", f"kNN on training embeddings per bucket of {c.buckets}",
             "Norm as Accuracy.ipynb", "[code]", "held-out scoring: training points are their own neighbours"),
    ]
    return rows


def _norms_ood_rows(ood_configs: Sequence, settings: dict, scale: str) -> list[dict]:
    c = ood_configs[0] if ood_configs else None
    near = ", ".join(map(str, settings["unseen_classes"])) or "none"
    far = ", ".join(spec["dataset"] for spec in settings["ood"]) or "none"
    return [
        row("OOD test (primary)", f"trained on classes {', '.join(map(str, c.train_classes))}, held-out test classes "
             f"{near} unseen" if c else "not run", "no OOD code in the public repository",
             "— (the paper states the claim)", "[ours]",
             "near-OOD: unseen classes of the same images, so input statistics do not decide the AUROC"),
        row("OOD sets (secondary)", far, "no OOD code in the public repository", "—", "[ours]",
             "far-OOD sets differ in input statistics already at initialisation"),
        row("OOD AUROC at initialisation", "beside the trained one, every set" if c else "not run",
             "no OOD code in the public repository", "—", "[ours]",
             "an ordering present before training is not learned confidence"),
    ]


def _norms_simulation_rows(settings: dict) -> list[dict]:
    sim = LATENT_SIMULATIONS[settings["latent_simulation"]]
    batch = LatentClassConfig.batch_size  # the study leaves it at the config's default
    chosen = f"latent_simulation='{settings['latent_simulation']}'"
    return [
        row("sphere: pairs, dimension, step, tolerance",
             f"{settings['pairs']}, {settings['dim']}, {settings['sphere_lr']:g}, {settings['tolerance']:g}",
             "500, 20, 10, 0.001", "Simulations.ipynb (cell 1)", "[code]", "set for this profile or run"),
        row("latent: noise σ", settings["latent_sigma"], 1.0, "Simulations.ipynb (cell 5: class_vars = ones)",
             "[code]", f"{chosen} or latent_sigma set"),
        row("latent: points projected back to the sphere", sim["project"], True,
             "Simulations.ipynb (SphericalDataset: points / norm)", "[code]", chosen),
        row("latent: observation matrix scale", sim["observation_scale"], 10.0,
             "Simulations.ipynb (SphericalDataset: randn(64, 10) * 10)", "[code]", chosen),
        row("latent: class sizes", "multinomial draw" if sim["counts"] == "multinomial" else "rounded shares",
             "multinomial draw", "Simulations.ipynb (SphericalDataset: torch.multinomial)", "[code]", chosen),
        row("latent: positives", "a random same-class point in the batch" if sim["positives"] == "batch"
             else "a random same-class point in the whole data", "a random same-class point in the batch",
             "Simulations.ipynb (attract_pairs_infonce_loss)", "[code]", chosen),
        row("latent: optimiser", f"SGD, lr {settings['latent_lr']:g}", "SGD, lr 0.01",
             "Simulations.ipynb (cell 5: learning_rate=0.01)", "[code]", f"{chosen} or latent_lr set"),
        row("latent: points, epochs, batch", f"{settings['latent_samples']}, {settings['latent_epochs']}, {batch}",
             "2000, 100, 128", "Simulations.ipynb (cell 5: 500 × 4 classes, num_epochs=100; DataLoader batch_size 128)",
             "[code]", "set for this profile or run"),
        row("latent: seeds", settings["latent_seeds"], 5, "Simulations.ipynb (cell 5: num_runs = 5)", "[code]",
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
    scale = scale_reason(profile)

    def default(c):
        return data_of(c.as_dict()) == "balanced" and intervention_of(c.as_dict()) == "default"

    simclr = _norms_first(configs, "simclr", default) or _norms_first(configs, "simclr", lambda c: True)
    simsiam = _norms_first(configs, "simsiam", default) or _norms_first(configs, "simsiam", lambda c: True)
    grad_scale = _norms_first(configs, "simclr", lambda c: c.grad_scale_power != 0)
    ood = [c for c in configs if c.train_classes]
    rows = (_norms_model_rows(simclr, simsiam, scale) + _norms_training_rows(simclr or simsiam, grad_scale, settings,
                                                                           scale)
            + _norms_ood_rows(ood, settings, scale) + _norms_simulation_rows(settings))
    return fidelity_frame(rows)
