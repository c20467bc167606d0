"""Evaluation of a trained self-supervised network (studies 4 and 5).

Backbone quality: :func:`embed` (frozen features of unaugmented images), :func:`knn_accuracy`
(weighted kNN, the SimCLR CIFAR monitor) and :func:`linear_probe` (logistic regression on frozen
features, trained to convergence). Norm diagnostics (NORMS, study 4): :func:`row_norms`,
:func:`class_mean_norms`, :func:`knn_correct` and :func:`norm_buckets` (the norm as confidence),
:func:`recalibrate_batchnorm`, :func:`project`, and :func:`norm_diagnostics`, which also scores
unseen sets (the norm as an in-distribution score, :func:`lib.core.stats.auroc_test`), as
:func:`initial_ood_scores` does for the untrained model.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from lib.core.augment import normalize
from lib.core.data import get_dataset
from lib.core.stats import auroc_test, rank_correlation

# The backbone metrics a run reports, and the norm metrics study 4's runs add: NaN when a run diverged.
BACKBONE_METRICS = ("knn_top1", "probe_top1", "probe_top5", "probe_objective")
NORM_METRICS = ("norm_mean_train", "norm_mean_test", "knn_confidence_top1", "norm_rho", "norm_p")


@torch.no_grad()
def embed(model: nn.Module, images: torch.Tensor, mean, std, *, batch_size: int = 512) -> torch.Tensor:
    """Backbone features of uint8 images, unaugmented, with the model in eval mode (BatchNorm uses
    its running statistics); the model's train/eval mode is restored afterwards."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    # no memory-format conversion: a convolution with channels-last weights gives channels-last output
    feats = [model.features(normalize(images[i:i + batch_size].to(device), mean, std))
             for i in range(0, len(images), batch_size)]
    model.train(was_training)
    return torch.cat(feats)


@torch.no_grad()
def knn_predict(train_features: torch.Tensor, train_labels: torch.Tensor, test_features: torch.Tensor, *,
                k: int = 200, temperature: float = 0.1, num_classes: int | None = None,
                chunk: int = 1024) -> torch.Tensor:
    r"""Weighted kNN labels (InstDisc, Wu et al. 2018; the SimCLR CIFAR monitors).

    Features are L2-normalised; for a test point x the k training points of highest cosine
    similarity s_j vote for their labels with weight exp(s_j / temperature):

        score_c(x) = sum_{j in top-k(x), y_j = c} exp(s_j / temperature),   prediction = argmax_c score_c

    ``k`` is capped at the number of training points; ``num_classes`` defaults to max label + 1.
    Test points are scored ``chunk`` at a time to bound memory. Returns int64 [M] labels.
    """
    if train_features.ndim != 2 or test_features.ndim != 2 or train_features.shape[1] != test_features.shape[1]:
        raise ValueError(f"features must be [N, d] and [M, d], got {tuple(train_features.shape)} "
                         f"and {tuple(test_features.shape)}")
    if train_labels.shape != (len(train_features),):
        raise ValueError(f"train_labels must be [{len(train_features)}], got {tuple(train_labels.shape)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r} must be an int >= 1")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature={temperature} must be > 0")
    num_classes = int(train_labels.max()) + 1 if num_classes is None else num_classes
    k = min(k, len(train_features))
    bank = F.normalize(train_features.float(), dim=1)
    predictions = []
    for part in F.normalize(test_features.float(), dim=1).split(chunk):
        similarity, index = (part @ bank.T).topk(k, dim=1)
        votes = torch.zeros(len(part), num_classes, device=part.device)
        votes.scatter_add_(1, train_labels[index], (similarity / temperature).exp())
        predictions.append(votes.argmax(dim=1))
    return torch.cat(predictions)


def knn_accuracy(train_features, train_labels, test_features, test_labels, *, k: int = 200,
                 temperature: float = 0.1, num_classes: int | None = None) -> float:
    """Top-1 accuracy of :func:`knn_predict` on the test points."""
    predicted = knn_predict(train_features, train_labels, test_features, k=k, temperature=temperature,
                            num_classes=num_classes)
    return (predicted == test_labels.to(predicted.device)).float().mean().item()


def linear_probe(train_features: torch.Tensor, train_labels: torch.Tensor, test_features: torch.Tensor,
                 test_labels: torch.Tensor, *, num_classes: int, steps: int = 500,
                 weight_decay: float = 1e-4) -> dict:
    r"""Multinomial logistic regression on frozen features, trained to convergence.

    Features are standardised with the training set's per-dimension mean and std; the head
    W x + b minimises mean cross-entropy + weight_decay / 2 * ||W||^2 over the whole training set
    with L-BFGS (strong-Wolfe line search, at most ``steps`` iterations). Returns top-1 (and top-5
    when there are at least 5 classes) test accuracy and the final training objective.
    """
    mean, std = train_features.mean(dim=0), train_features.std(dim=0).clamp(min=1e-6)
    x_train, x_test = (train_features - mean) / std, (test_features - mean) / std
    head = nn.Linear(x_train.shape[1], num_classes).to(x_train.device)
    optimizer = torch.optim.LBFGS(head.parameters(), lr=1.0, max_iter=steps, history_size=20,
                                  tolerance_grad=1e-7, tolerance_change=1e-10, line_search_fn="strong_wolfe")

    def objective():
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(head(x_train), train_labels) + 0.5 * weight_decay * head.weight.square().sum()
        loss.backward()
        return loss

    final = optimizer.step(objective).item()
    with torch.no_grad():
        logits = head(x_test)
    top1 = (logits.argmax(dim=1) == test_labels).float().mean().item()
    if num_classes >= 5:
        top5 = (logits.topk(5, dim=1).indices == test_labels[:, None]).any(dim=1).float().mean().item()
    else:
        top5 = float("nan")
    return {"probe_top1": top1, "probe_top5": top5, "probe_objective": final}


def backbone_evaluation(c, f_train: torch.Tensor, y_train: torch.Tensor, f_test: torch.Tensor,
                        y_test: torch.Tensor, *, num_classes: int) -> dict:
    """kNN top-1 (:func:`knn_accuracy`, ``c.knn_k``, ``c.knn_temperature``) and the linear probe
    (:func:`linear_probe`, ``c.probe_steps``, ``c.probe_weight_decay``) on frozen features."""
    return {
        "knn_top1": knn_accuracy(f_train, y_train, f_test, y_test, k=c.knn_k, temperature=c.knn_temperature,
                                 num_classes=num_classes),
        **linear_probe(f_train, y_train, f_test, y_test, num_classes=num_classes, steps=c.probe_steps,
                       weight_decay=c.probe_weight_decay),
    }


def row_norms(z: torch.Tensor) -> torch.Tensor:
    """||z_i||, the Euclidean norm of each row (the embedding norm of each sample)."""
    return torch.linalg.vector_norm(z, dim=1)


def class_mean_norms(norms, labels, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean norm and sample count per class: float64 [K] (NaN for an empty class) and int64 [K]."""
    norms, labels = np.asarray(norms, dtype=float), np.asarray(labels)
    counts = np.bincount(labels, minlength=num_classes)
    sums = np.bincount(labels, weights=norms, minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), counts


@torch.no_grad()
def knn_correct(bank: torch.Tensor, bank_labels: torch.Tensor, queries: torch.Tensor, query_labels: torch.Tensor, *,
                k: int = 10, exclude_self: bool = False, chunk: int = 1024) -> torch.Tensor:
    """Whether the majority label of each query's k cosine-nearest bank rows is the query's label.

    Rows are L2-normalised; each of the k neighbours gets one vote (ties go to the smaller label).
    ``exclude_self=True`` says the queries *are* the bank (row i = bank row i), and leaves each
    query's own row out of its neighbours: the authors' variant of the confidence check, scored on
    training embeddings [ours for leaving self out]. Returns bool [M].
    """
    if exclude_self and queries.shape != bank.shape:
        raise ValueError("exclude_self=True needs the queries to be the bank itself")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(bank) - exclude_self:
        raise ValueError(f"k={k!r} must be an int in [1, {len(bank) - exclude_self}]")
    num_classes = int(max(bank_labels.max(), query_labels.max())) + 1
    unit_bank = nn.functional.normalize(bank.float(), dim=1)
    unit_queries = nn.functional.normalize(queries.float(), dim=1)
    bank_labels = bank_labels.to(bank.device)
    correct = []
    for start in range(0, len(queries), chunk):
        similarity = unit_queries[start:start + chunk] @ unit_bank.T
        if exclude_self:
            rows = torch.arange(len(similarity), device=similarity.device)
            similarity[rows, rows + start] = float("-inf")
        index = similarity.topk(k, dim=1).indices
        votes = torch.zeros(len(index), num_classes, device=index.device)
        votes.scatter_add_(1, bank_labels[index], torch.ones_like(index, dtype=votes.dtype))
        correct.append(votes.argmax(dim=1) == query_labels[start:start + chunk].to(index.device))
    return torch.cat(correct)


def norm_buckets(norms, correct, buckets: int = 20) -> dict:
    r"""Accuracy per bucket of the min-max scaled norm (NORMS' confidence plot).

        u_i = (n_i - min n) / (max n - min n),   bucket b_i = min(floor(u_i B), B - 1)

    Returns float64 arrays over the B buckets: ``centre`` (of the bucket in u), ``count`` and
    ``accuracy`` (mean correctness, NaN for an empty bucket).
    """
    norms, correct = np.asarray(norms, dtype=float), np.asarray(correct, dtype=float)
    if norms.shape != correct.shape or norms.ndim != 1 or len(norms) == 0:
        raise ValueError("norms and correct must be 1-D of the same, non-zero length")
    span = norms.max() - norms.min()
    u = (norms - norms.min()) / span if span > 0 else np.zeros_like(norms)
    bucket = np.minimum((u * buckets).astype(int), buckets - 1)
    count = np.bincount(bucket, minlength=buckets).astype(float)
    hits = np.bincount(bucket, weights=correct, minlength=buckets)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(count > 0, hits / np.maximum(count, 1), np.nan)
    return {"centre": (np.arange(buckets) + 0.5) / buckets, "count": count, "accuracy": accuracy}


@torch.no_grad()
def recalibrate_batchnorm(model: nn.Module, batches) -> None:
    """Re-estimate every BatchNorm's running mean and variance from ``batches`` (model inputs), exactly.

    Each BatchNorm's statistics are reset and, with ``momentum=None``, become the plain average of the
    per-batch means and (unbiased) variances over one training-mode pass without gradients; the
    momenta and the train/eval mode are restored afterwards. Why [ours]: with momentum 0.1 the
    running averages still carry their initial values (mean 0, variance 1) after a few dozen steps,
    which after cut-initialisation (far smaller activations) makes eval-mode outputs orders of
    magnitude too small; after long training the re-estimate changes little.
    """
    batch_norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in batch_norms]
    for m in batch_norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average of the batches' statistics
    was_training = model.training
    model.train()
    for batch in batches:
        model(batch)
    for m, momentum in zip(batch_norms, momenta):
        m.momentum = momentum
    model.train(was_training)


@torch.no_grad()
def project(model: nn.Module, features: torch.Tensor, *, batch_size: int = 1024) -> torch.Tensor:
    """The projector's outputs (the embeddings whose norms the study reads) of backbone features,
    in eval mode (BatchNorm on running statistics); the model's mode is restored."""
    was_training = model.training
    model.eval()
    out = torch.cat([model.projector(features[i:i + batch_size]) for i in range(0, len(features), batch_size)])
    model.train(was_training)
    return out


def _stored(values: torch.Tensor, limit: int) -> list:
    """The first ``limit`` values (the sets are in random class order), rounded to float32's precision."""
    return [float(f"{v:.7g}") for v in values[:limit].double().tolist()]


def run_test_set(ds, c) -> tuple[torch.Tensor, torch.Tensor]:
    """The test images and labels a run is evaluated on: those of its ``train_classes`` (all when empty)."""
    if not c.train_classes:
        return ds.x_test, ds.y_test
    keep = torch.isin(ds.y_test, torch.tensor(c.train_classes))
    return ds.x_test[keep], ds.y_test[keep]


def _recalibrate(model: nn.Module, ds, x_train: torch.Tensor) -> None:
    """:func:`recalibrate_batchnorm` on the unaugmented training images, 512 at a time."""
    recalibrate_batchnorm(model, (normalize(x_train[i:i + 512], ds.mean, ds.std) for i in range(0, len(x_train), 512)))


def evaluate(model: nn.Module, ds, x_train: torch.Tensor, y_train: torch.Tensor, c, data_root: str | None) -> dict:
    """Everything a finished run measures, in eval mode: :func:`backbone_evaluation` of the backbone
    features of the unaugmented training (``x_train``, ``y_train``) and test images (:func:`run_test_set`)
    and, when ``c.diagnostics == "norms"``, :func:`norm_diagnostics`. First, when ``c.recalibrate_bn``, every
    BatchNorm is re-estimated on the unaugmented training images (:func:`recalibrate_batchnorm`).
    ``c`` is the run's :class:`lib.ssl.training.SSLConfig`."""
    device = x_train.device
    if c.recalibrate_bn:
        _recalibrate(model, ds, x_train)
    x_test, y_test = run_test_set(ds, c)
    h_train, h_test = embed(model, x_train, ds.mean, ds.std), embed(model, x_test.to(device), ds.mean, ds.std)
    y_train, y_test = y_train.to(device), y_test.to(device)
    out = backbone_evaluation(c, h_train, y_train, h_test, y_test, num_classes=ds.num_classes)
    if c.diagnostics == "norms":
        out.update(norm_diagnostics(model, ds, h_train, y_train, h_test, y_test, c, data_root))
    return out


def norm_diagnostics(model: nn.Module, ds, h_train: torch.Tensor, y_train: torch.Tensor, h_test: torch.Tensor,
                     y_test: torch.Tensor, c, data_root: str | None) -> dict:
    """The norms of the projector outputs of backbone features ``h_*`` as confidence and as an
    in-distribution score (NORMS, study 4):

    - ``norm_mean_train``/``norm_mean_test``; ``class_norms``/``class_counts`` on the training set;
    - held-out confidence: kNN (k = ``c.confidence_k``, cosine, majority) of each test embedding
      against the training embeddings; ``knn_confidence_top1``, Spearman ``norm_rho``/``norm_p`` of
      norm and correctness, and ``buckets`` (:func:`norm_buckets`);
    - the authors' variant: training embeddings against the other training embeddings, ``*_train``;
    - per unseen set (``c.ood``): :func:`ood_scores`; the first ``c.stored_norms`` per-sample norms of
      every set in ``stored``.
    """
    z_train, z_test = project(model, h_train), project(model, h_test)
    n_train, n_test = row_norms(z_train).cpu(), row_norms(z_test).cpu()
    class_norms, class_counts = class_mean_norms(n_train.numpy(), y_train.cpu().numpy(), ds.num_classes)
    out = dict(norm_mean_train=n_train.mean().item(), norm_mean_test=n_test.mean().item(),
               class_norms=class_norms.tolist(), class_counts=class_counts.tolist())

    k = min(c.confidence_k, len(z_train) - 1)
    correct = knn_correct(z_train, y_train, z_test, y_test, k=k).cpu()
    correct_train = knn_correct(z_train, y_train, z_train, y_train, k=k, exclude_self=True).cpu()
    for suffix, norms, hits in (("", n_test, correct), ("_train", n_train, correct_train)):
        rho, p = rank_correlation(norms.numpy(), hits.numpy())
        buckets = norm_buckets(norms.numpy(), hits.numpy(), c.buckets)
        out.update({f"knn_confidence_top1{suffix}": hits.float().mean().item(), f"norm_rho{suffix}": rho,
                    f"norm_p{suffix}": p, f"buckets{suffix}": {key: v.tolist() for key, v in buckets.items()}})

    stored = {"test": _stored(n_test, c.stored_norms), "test_correct": correct[:c.stored_norms].int().tolist()}
    scores, stored_unseen = ood_scores(model, ds, n_test, c, data_root)
    out.update(scores)
    out["stored"] = {**stored, **stored_unseen}
    return out


def ood_scores(model: nn.Module, ds, n_test: torch.Tensor, c, data_root: str | None, *,
               prefix: str = "") -> tuple[dict, dict]:
    """The norm as a score of being from the training distribution, per unseen set of ``c.ood``: the
    AUROC of the test set's norms ``n_test`` against those of the unseen set's test images (of its
    ``classes`` when the spec lists them), its Mann-Whitney p and the unseen set's mean norm, as
    ``auroc_<prefix><label>``, ``auroc_p_<prefix><label>`` and ``norm_mean_<prefix><label>``
    (:func:`ood_label`); and the first ``c.stored_norms`` norms of each set, under ``<prefix><label>``.
    AUROC > 0.5: unseen images get smaller norms. Unseen images are normalised with the training
    data's statistics: the network's input as it was trained."""
    device = next(model.parameters()).device
    out, stored = {}, {}
    for spec in c.ood:
        unseen = get_dataset(spec["dataset"], spec["dataset_options"], data_root)
        if unseen.x_test.shape[1:] != ds.x_test.shape[1:]:
            raise ValueError(f"unseen set {ood_label(spec)} has images {tuple(unseen.x_test.shape[1:])}, the training "
                             f"data {tuple(ds.x_test.shape[1:])}: give it image_size and channels options")
        x = unseen.x_test
        if "classes" in spec:
            x = x[torch.isin(unseen.y_test, torch.tensor(spec["classes"]))]
        n_unseen = row_norms(project(model, embed(model, x.to(device), ds.mean, ds.std))).cpu()
        label = prefix + ood_label(spec)
        score, p = auroc_test(n_test.numpy(), n_unseen.numpy())
        out.update({f"auroc_{label}": score, f"auroc_p_{label}": p, f"norm_mean_{label}": n_unseen.mean().item()})
        stored[label] = _stored(n_unseen, c.stored_norms)
    return out, stored


INIT_PREFIX = "init_"  # metrics of the untrained model: auroc_init_<label>, norm_mean_init_test, ...


def initial_ood_scores(model: nn.Module, ds, x_train: torch.Tensor, c, data_root: str | None) -> dict:
    """:func:`ood_scores` of the model as it is now (called on the untrained model, with the run's seed),
    prefixed ``init_``, with ``norm_mean_init_test``; ``stored`` holds the sets' first norms under
    ``init_test`` and ``init_<label>``. It scores a copy, BatchNorm re-estimated on the unaugmented training
    images when ``c.recalibrate_bn`` (as the trained model is), so the run itself is left as it was.
    Why [ours]: unseen images can get different norms from the architecture and their input
    statistics alone; the trained AUROC means something only beside this one."""
    model = copy.deepcopy(model)
    if c.recalibrate_bn:
        _recalibrate(model, ds, x_train)
    x_test, _ = run_test_set(ds, c)
    n_test = row_norms(project(model, embed(model, x_test.to(x_train.device), ds.mean, ds.std))).cpu()
    out, stored = ood_scores(model, ds, n_test, c, data_root, prefix=INIT_PREFIX)
    return {**out, f"norm_mean_{INIT_PREFIX}test": n_test.mean().item(),
            "stored": {f"{INIT_PREFIX}test": _stored(n_test, c.stored_norms), **stored}}


def ood_label(spec: dict) -> str:
    """A short name of an unseen set: its dataset, the options that change its content (not size or
    channels) and its classes when it lists them (``classes5-9`` for a range)."""
    options = "_".join(f"{k}{v}" for k, v in sorted(spec["dataset_options"].items())
                       if k not in ("image_size", "channels", "n_train", "n_test"))
    label = spec["dataset"] + (f"_{options}" if options else "")
    classes = spec.get("classes")
    if classes:
        contiguous = list(classes) == list(range(classes[0], classes[-1] + 1))
        label += "_classes" + (f"{classes[0]}-{classes[-1]}" if contiguous else "+".join(map(str, classes)))
    return label
