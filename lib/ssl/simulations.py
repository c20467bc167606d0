"""The two simulations of NORMS (study 4) [code]: gradient descent on a cosine loss from points of a
given norm (convergence slows as the norm squared), and supervised InfoNCE on latent classes of
unequal frequency (do rarer classes end with smaller embedding norms?), in the authors' settings or in
ours before issue 17 (:data:`LATENT_SIMULATIONS`).

Simulations are runs too: :class:`SphereConfig` (one radius) and :class:`LatentClassConfig` (one seed)
are typed run configs, and :func:`simulate_sphere`, :func:`simulate_latent_class` and
:func:`simulate_latent_classes` (the seeds of one setting side by side) their training functions, so
that the notebook records each simulation like any other run and a re-render reads the records
instead of simulating again.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from lib.core import params
from lib.core.config import Config, build
from lib.core.losses import info_nce
from lib.ssl.evaluation import class_mean_norms, row_norms


def sphere_convergence(radii: Sequence[float], *, pairs: int = 500, dim: int = 20, lr: float = 10.0,
                       tolerance: float = 1e-3, max_steps: int = 200_000, seed: int = 0) -> dict:
    r"""Steps of gradient descent on a cosine loss until positive pairs align, for each starting norm.

    NORMS' theory check [code]: ``pairs`` pairs (a_i, b_i) in ``dim`` dimensions, each point drawn
    uniformly on the sphere and scaled to norm rho; plain gradient descent (step ``lr``, gradients
    by autograd) on every point of

        L = -mean_i cos(a_i, b_i)

    until mean_i cos(a_i, b_i) >= 1 - ``tolerance``. The gradient of cos(a, b) in a is
    (b/||b|| - cos a/||a||) / ||a||: orthogonal to a and of size ~ 1/rho, so the angle moves by
    ~ lr / (pairs rho^2) per step and the predicted number of steps grows as rho^2 (for a fixed
    lr / pairs). Being orthogonal, each step also grows the norm: ||a - lr g||^2 = ||a||^2 + lr^2 ||g||^2.

    Each radius is its own run from the same seed, in float64. Returns per radius (arrays [R]):
    ``steps`` (-1: not converged within ``max_steps``), ``min_norm_change`` (the smallest change of
    any point's norm in any step: >= 0 up to rounding), ``max_cos_grad`` (the largest |cos| between
    a point and its gradient: 0 up to rounding) and ``mean_norm``, a list of R arrays with the mean
    norm of all 2 * pairs points before the first step and after each step.
    """
    radii = [float(r) for r in radii]
    if not radii or not all(math.isfinite(r) and r > 0 for r in radii):
        raise ValueError(f"radii={radii!r} must be a non-empty list of finite numbers > 0")
    runs = [_align_on_sphere(rho, pairs=pairs, dim=dim, lr=lr, tolerance=tolerance, max_steps=max_steps, seed=seed)
            for rho in radii]
    return {"radii": np.asarray(radii), **{key: np.asarray([run[key] for run in runs])
                                           for key in ("steps", "min_norm_change", "max_cos_grad")},
            "mean_norm": [run["mean_norm"] for run in runs]}


def _align_on_sphere(rho: float, *, pairs: int, dim: int, lr: float, tolerance: float, max_steps: int,
                     seed: int) -> dict:
    """One radius of :func:`sphere_convergence`."""
    g = torch.Generator().manual_seed(seed)

    def row_norm(x):
        return torch.linalg.vector_norm(x, dim=-1, keepdim=True)

    a, b = (torch.randn(pairs, dim, generator=g, dtype=torch.float64) for _ in range(2))
    points = torch.cat([a / row_norm(a), b / row_norm(b)]).mul_(rho).requires_grad_()  # rows: a's, then b's
    min_change, max_cos, mean_norm, steps = math.inf, 0.0, [], -1
    for t in range(max_steps + 1):
        norms = row_norm(points)
        unit = points / norms
        cos = (unit[:pairs] * unit[pairs:]).sum(-1)
        mean_norm.append(norms.mean().item())
        if cos.mean().item() >= 1 - tolerance:
            steps = t
            break
        if t == max_steps:
            break
        (grad,) = torch.autograd.grad(-cos.mean(), [points])
        with torch.no_grad():
            grad_norms = row_norm(grad)
            alignment = ((points * grad).sum(-1, keepdim=True).abs() / (norms * grad_norms).clamp_min(1e-300))
            max_cos = max(max_cos, alignment.max().item())
            points.sub_(lr * grad)
            min_change = min(min_change, (row_norm(points) - norms).min().item())
    return {"steps": steps, "min_norm_change": min_change, "max_cos_grad": max_cos, "mean_norm": np.asarray(mean_norm)}


# The latent-class simulation's settings by name (the function's docstring says what each does).
# authors: Simulations.ipynb, cells 4-5 (SphericalDataset, attract_pairs_infonce_loss, train_and_analyze) [code];
# ours: this project's settings before issue 17 [ours].
LATENT_SIMULATIONS = {
    "authors": dict(sigma=1.0, project=True, observation_scale=10.0, counts="multinomial", positives="batch", lr=0.01),
    "ours": dict(sigma=0.3, project=False, observation_scale=1.0, counts="rounded", positives="dataset", lr=0.1),
}


def latent_class_data(class_weights: Sequence[float], *, samples: int, latent_dim: int, observed_dim: int,
                      sigma: float, project: bool, observation_scale: float, counts: str,
                      generator: torch.Generator) -> dict:
    r"""The latent classes and their observations (NORMS' simulation [code]).

    K class centres c_k uniform on the unit sphere in ``latent_dim`` dimensions; class sizes from
    ``class_weights`` w: ``counts="multinomial"`` draws each of ``samples`` labels with probability
    w_k / sum w (the authors'), ``"rounded"`` gives class k max(2, round(samples w_k / sum w)) points.
    A point of class k is l = c_k + sigma e, e ~ N(0, I), then l / ||l|| when ``project`` (back on the
    sphere); it is observed as x = M l with M = ``observation_scale`` G, G a fixed standard Gaussian
    [observed_dim x latent_dim] (the authors' x 10 gives inputs of varied magnitude). Points are
    ordered by class. Returns float32 ``latent`` [N, latent_dim], ``observations`` [N, observed_dim],
    ``mixing`` M, int64 ``labels`` [N] and ``counts`` [K].
    """
    weights = torch.as_tensor(np.asarray(class_weights, dtype=float))
    k = len(weights)
    centres = torch.randn(k, latent_dim, generator=generator)
    centres /= row_norms(centres)[:, None]
    if counts == "multinomial":
        drawn = torch.multinomial(weights / weights.sum(), samples, replacement=True, generator=generator)
        sizes = torch.bincount(drawn, minlength=k)
    elif counts == "rounded":
        sizes = torch.as_tensor(np.maximum(2, np.round(samples * weights.numpy() / weights.sum().item())).astype(int))
    else:
        raise ValueError(f"counts={counts!r} must be multinomial or rounded")
    labels = torch.repeat_interleave(torch.arange(k), sizes)
    latent = centres[labels] + sigma * torch.randn(len(labels), latent_dim, generator=generator)
    if project:
        latent /= row_norms(latent)[:, None]
    mixing = observation_scale * torch.randn(observed_dim, latent_dim, generator=generator)
    return {"latent": latent, "observations": latent @ mixing.T, "mixing": mixing, "labels": labels,
            "counts": sizes.numpy()}


def in_batch_positives(labels: torch.Tensor, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each anchor i of a batch, another member of its class in the same batch, chosen uniformly
    as the one with the largest of the i.i.d. U(0, 1) ``uniforms`` [..., B, B] in row i:
    ``(partner [..., B], has_partner bool [..., B])``; an anchor alone in its class in the batch gets
    itself and False. ``labels`` [..., B]; leading dimensions are batched (independent simulations)."""
    same = labels[..., :, None] == labels[..., None, :]
    same &= ~torch.eye(labels.shape[-1], dtype=torch.bool)
    has_partner = same.any(dim=-1)
    own = torch.arange(labels.shape[-1]).expand_as(labels)
    return torch.where(has_partner, uniforms.masked_fill(~same, -1.0).argmax(dim=-1), own), has_partner


def positive_mask(partner: torch.Tensor, has_partner: torch.Tensor) -> torch.Tensor:
    """bool [..., B, B]: the pairs (i, partner_i) of every anchor with a partner, made symmetric as the
    authors' loop makes them (so a row may hold more than one positive). Leading dimensions are batched."""
    n = partner.shape[-1]
    mask = torch.zeros(*partner.shape, n, dtype=torch.bool).scatter_(-1, partner[..., None], has_partner[..., None])
    return mask | mask.transpose(-1, -2)


def in_batch_pair_loss(z: torch.Tensor, positive: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    r"""The authors' supervised InfoNCE with one drawn positive per anchor (``attract_pairs_infonce_loss``
    in Simulations.ipynb [code]), for z [..., B, d] and the :func:`positive_mask` [..., B, B].

    With u = z / ||z|| and s_ij = u_i . u_j / temperature, for every row i with a positive

        l_i = -log( sum_{j: positive_ij} e^{s_ij} / sum_{j != i} e^{s_ij} + 1e-8 )

    and the loss is the mean of l_i over those rows, per entry of the leading dimensions (independent
    simulations): a tensor of their shape; 0, with a gradient, for a batch without a positive.
    """
    u = nn.functional.normalize(z, dim=-1)
    similarity = (u @ u.transpose(-1, -2) / temperature).exp()
    numerator = (similarity * positive).sum(dim=-1)
    denominator = similarity.sum(dim=-1) - similarity.diagonal(dim1=-2, dim2=-1)
    loss = -torch.log(numerator / denominator + 1e-8)
    rows = positive.any(dim=-1)
    return torch.where(rows, loss, 0).sum(dim=-1) / rows.sum(dim=-1).clamp(min=1)


def latent_class_simulation(class_weights: Sequence[float] = (1, 2, 4, 8), *, seeds: Sequence[int] = (0,),
                            simulation: str = "authors", samples: int = 2000, latent_dim: int = 10,
                            observed_dim: int = 64, hidden: int = 64, out_dim: int = 10, sigma: float | None = None,
                            lr: float | None = None, epochs: int = 100, batch_size: int = 128,
                            temperature: float = 1.0) -> list[dict]:
    r"""NORMS' latent-class simulation [code]: do rarer classes end with smaller embedding norms? One
    independent simulation per seed in ``seeds``, all trained side by side.

    The data: :func:`latent_class_data` with the settings of ``LATENT_SIMULATIONS[simulation]``
    (``sigma`` and ``lr`` override theirs). An MLP observed_dim -> hidden -> ReLU -> out_dim (PyTorch's
    default initialisation) is trained by plain SGD with step ``lr`` for ``epochs`` epochs of
    ceil(N / ``batch_size``) steps, with temperature-``temperature`` supervised InfoNCE whose positives
    are, by the simulation's ``positives``:

    - ``batch`` (the authors'): each epoch walks a fresh permutation of the points in batches (the last
      one smaller); each anchor's positive is another point of its class in the same batch
      (:func:`in_batch_positives`, :func:`positive_mask`, :func:`in_batch_pair_loss`);
    - ``dataset`` (ours): each step draws ``batch_size`` anchors uniformly from all points, each paired
      with another random point of its class anywhere in the data, and takes the cross-view
      :func:`lib.core.losses.info_nce` of the anchors' and the positives' embeddings.

    Seed s draws its data, batches and positives from its own generator and its initialisation from
    ``torch.manual_seed(s)``, so its result does not depend on the other seeds (up to float rounding:
    the seeds' MLPs run as one batched network, and plain SGD on the sum of their losses updates each by
    its own gradient). Returns per seed ``seed``, ``class_weights``, ``class_counts`` [K],
    ``class_norms`` [K] (mean ||f(x)|| over each class's points at the end; NaN for a class without
    points), ``class_norm_history`` [E + 1, K] (before training and after every epoch), ``final_loss``
    (mean over the last epoch's steps) and the simulation's ``settings``.
    """
    weights = np.asarray(class_weights, dtype=float)
    if weights.ndim != 1 or len(weights) < 2 or not (np.isfinite(weights).all() and (weights > 0).all()):
        raise ValueError(f"class_weights={class_weights!r} must be at least two positive numbers")
    if simulation not in LATENT_SIMULATIONS:
        raise ValueError(f"simulation={simulation!r} must be one of {', '.join(LATENT_SIMULATIONS)}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    settings = dict(LATENT_SIMULATIONS[simulation])
    settings.update({k: v for k, v in (("sigma", sigma), ("lr", lr)) if v is not None})
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    data = [latent_class_data(weights, samples=samples, latent_dim=latent_dim, observed_dim=observed_dim,
                              sigma=settings["sigma"], project=settings["project"],
                              observation_scale=settings["observation_scale"], counts=settings["counts"], generator=g)
            for g in generators]
    x = torch.stack([d["observations"] for d in data])  # [S, N, observed_dim]: every seed has N points
    labels = torch.stack([d["labels"] for d in data])
    n, k = x.shape[1], len(weights)
    layers = []
    for seed in seeds:
        torch.manual_seed(seed)
        layers.append((nn.Linear(observed_dim, hidden), nn.Linear(hidden, out_dim)))
    # the seeds' MLPs as batched weights [S, out, in] and biases [S, out]
    parameters = [torch.stack([getattr(pair[i], name).detach() for pair in layers]).requires_grad_()
                  for i in (0, 1) for name in ("weight", "bias")]
    w1, b1, w2, b2 = parameters
    optimizer = torch.optim.SGD(parameters, lr=settings["lr"])

    def mlp(inputs: torch.Tensor) -> torch.Tensor:  # [S, B, observed_dim] -> [S, B, out_dim]
        return torch.baddbmm(b2[:, None], torch.relu(torch.baddbmm(b1[:, None], inputs, w1.transpose(1, 2))),
                             w2.transpose(1, 2))

    history, losses = [], []

    def record():
        with torch.no_grad():
            norms = row_norms(mlp(x).flatten(0, 1)).view(len(seeds), n).numpy()
        history.append([class_mean_norms(norms[i], labels[i].numpy(), k)[0] for i in range(len(seeds))])

    seed_rows = torch.arange(len(seeds))[:, None]
    sizes = torch.stack([torch.as_tensor(d["counts"]) for d in data])  # [S, K]
    starts = torch.cumsum(sizes, 1) - sizes

    def batch_losses():
        """One epoch's per-seed losses [S], each computed when asked for (after the previous step's update)."""
        if settings["positives"] == "batch":
            perms = torch.stack([torch.randperm(n, generator=g) for g in generators])
            for start in range(0, n, batch_size):
                index = perms[:, start:start + batch_size]
                b = index.shape[1]
                uniforms = torch.stack([torch.rand(b, b, generator=g) for g in generators])
                mask = positive_mask(*in_batch_positives(labels[seed_rows, index], uniforms))
                yield in_batch_pair_loss(mlp(x[seed_rows, index]), mask, temperature)
        else:
            for _ in range(math.ceil(n / batch_size)):
                anchor = torch.stack([torch.randint(n, (batch_size,), generator=g) for g in generators])
                u = torch.stack([torch.rand(batch_size, generator=g) for g in generators])
                cls = labels[seed_rows, anchor]
                size, start = sizes[seed_rows, cls], starts[seed_rows, cls]
                other = (u * (size - 1)).long()
                other += (other >= anchor - start).long()  # skip the anchor itself
                za, zp = mlp(x[seed_rows, anchor]), mlp(x[seed_rows, start + other])
                yield torch.stack([info_nce(a, b, temperature) for a, b in zip(za, zp)])

    record()
    for _ in range(epochs):
        losses = []
        for loss in batch_losses():
            optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()
            optimizer.step()
            losses.append(loss.detach())
        record()
    history = np.asarray(history)  # [E + 1, S, K]
    final = torch.stack(losses).mean(dim=0).tolist() if losses else [math.nan] * len(seeds)
    return [{"seed": seed, "class_weights": weights, "class_counts": data[i]["counts"], "class_norms": history[-1, i],
             "class_norm_history": history[:, i], "final_loss": final[i], "settings": settings}
            for i, seed in enumerate(seeds)]


# ----------------------------------------------------------------------- the simulations as recorded runs

CURVE_POINTS = 101  # a radius's mean-norm curve is recorded at this many evenly spaced steps (its shape)


@dataclass(frozen=True)
class SphereConfig(Config):
    """One radius of :func:`sphere_convergence` as a run (defaults: NORMS' theory check)."""

    rho: float = 1.0
    pairs: int = 500
    dim: int = 20
    lr: float = 10.0
    tolerance: float = 1e-3
    max_steps: int = 200_000
    seed: int = 0

    def __post_init__(self):
        params.number("rho", self.rho, 0.0, low_open=True)
        params.integer("pairs", self.pairs, 1)
        params.integer("dim", self.dim, 2)
        params.number("lr", self.lr, 0.0, low_open=True)
        params.number("tolerance", self.tolerance, 0.0, 1.0, low_open=True)
        params.integer("max_steps", self.max_steps, 1)
        params.integer("seed", self.seed)


def simulate_sphere(config: SphereConfig, *, data_root: str | None = None, progress=None) -> dict:
    """One radius of the sphere simulation, as metrics: ``steps`` (-1: not converged), the two exact
    checks ``min_norm_change`` and ``max_cos_grad``, the mean norm at the start and the end and its mean
    growth per step, and its curve (``mean_norm_curve`` at ``curve_steps``, :data:`CURVE_POINTS` at most,
    the first and the last step among them). ``data_root`` and ``progress``: a training function's
    interface; the points are generated and the run takes seconds."""
    c = config
    run = _align_on_sphere(c.rho, pairs=c.pairs, dim=c.dim, lr=c.lr, tolerance=c.tolerance, max_steps=c.max_steps,
                           seed=c.seed)
    history = np.asarray(run["mean_norm"])
    shown = np.unique(np.linspace(0, len(history) - 1, min(CURVE_POINTS, len(history))).round().astype(int))
    return {"status": "ok", "steps": int(run["steps"]), "min_norm_change": float(run["min_norm_change"]),
            "max_cos_grad": float(run["max_cos_grad"]), "norm_start": float(history[0]),
            "norm_end": float(history[-1]),
            "norm_growth_per_step": float(np.diff(history).mean()) if len(history) > 1 else 0.0,
            "curve_steps": shown.tolist(), "mean_norm_curve": history[shown].tolist()}


@dataclass(frozen=True)
class LatentClassConfig(Config):
    """One seed of :func:`latent_class_simulation` as a run. ``sigma`` and ``lr`` are given, not taken from
    the simulation's settings, so that the record says what ran."""

    class_weights: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    simulation: str = "authors"
    sigma: float = LATENT_SIMULATIONS["authors"]["sigma"]
    lr: float = LATENT_SIMULATIONS["authors"]["lr"]
    samples: int = 2000
    epochs: int = 100
    latent_dim: int = 10
    observed_dim: int = 64
    hidden: int = 64
    out_dim: int = 10
    batch_size: int = 128
    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self):
        weights = self.class_weights
        if (not isinstance(weights, (list, tuple)) or len(weights) < 2
                or not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0
                           for w in weights)):
            params.fail("class_weights", weights, "at least two positive numbers")
        object.__setattr__(self, "class_weights", tuple(float(w) for w in weights))  # 1 and 1.0: one run id
        params.choice("simulation", self.simulation, LATENT_SIMULATIONS)
        params.number("sigma", self.sigma, 0.0)
        params.number("lr", self.lr, 0.0, low_open=True)
        params.integer("samples", self.samples, 4 * len(weights))
        params.integer("epochs", self.epochs, 1)
        for name in ("latent_dim", "observed_dim", "hidden", "out_dim", "batch_size"):
            params.integer(name, getattr(self, name), 1)
        params.number("temperature", self.temperature, 0.0, low_open=True)
        params.integer("seed", self.seed)


def simulate_latent_class(config: LatentClassConfig, *, data_root: str | None = None, progress=None) -> dict:
    """One seed of the latent-class simulation alone (a re-run of one record): see :func:`simulate_latent_classes`."""
    return simulate_latent_classes([config])[0]


def simulate_latent_classes(configs: list, *, data_root: str | None = None, device: str = "cpu",
                            progress=None) -> list[dict]:
    """The seeds of one latent-class setting side by side (``configs`` differ only in ``seed``; five times
    faster per seed than one by one), as one metrics dict per config: ``class_counts`` [K],
    ``class_norm_history`` [epochs + 1][K] and ``final_loss``. A seed's numbers agree with its run alone up
    to float rounding (:func:`latent_class_simulation`). ``data_root``, ``device`` and ``progress``: the
    interface of a batched training function (``lib.run.sweep``); it runs on the CPU."""
    typed = [build(simulate_latent_class, c) if isinstance(c, dict) else c for c in configs]
    first = typed[0]
    if any(c.replace(seed=first.seed) != first for c in typed):
        raise ValueError("configs must differ only in seed")
    results = latent_class_simulation(
        first.class_weights, seeds=[c.seed for c in typed], simulation=first.simulation, samples=first.samples,
        latent_dim=first.latent_dim, observed_dim=first.observed_dim, hidden=first.hidden, out_dim=first.out_dim,
        sigma=first.sigma, lr=first.lr, epochs=first.epochs, batch_size=first.batch_size,
        temperature=first.temperature)
    return [{"status": "ok", "class_counts": np.asarray(r["class_counts"]).tolist(),
             "class_norm_history": np.asarray(r["class_norm_history"]).tolist(), "final_loss": float(r["final_loss"])}
            for r in results]
