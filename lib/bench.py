"""Speed benchmark: ratios measured side by side in one run (absolute times on shared machines are noise).

    python -m lib.bench            # the full table
    python -m lib.bench --quick    # fewer repetitions
    python -m lib.bench --json bench.json
    python -m lib.bench --notebooks smoke   # only: each notebook's wall time against its profile's budget
    python -m lib.bench --device cuda       # the prepared GPU check (below)

Rows: this machine's fp32 matmul rate; the CFF training step at the paper's config (E=128, H=4,
L=8, patch 4, two views) as images/s, model FLOPs per image (torch.utils.flop_counter), GFLOP/s
and the fraction of the matmul rate (measured just before and after each step row, as the
machine's speed drifts); the library's batched augmentation against torchvision's PIL
pipeline; the data share of a step; the linear probe's share of a `cpu`-profile run; seeds run
in parallel processes against one at a time; page faults per re-allocation of a 64 MiB block with
glibc's malloc settings and with ``keep_freed_memory``; and, last, the SimCLR training step of studies 4-5
(ResNet-18 with the CIFAR stem, batch 256, two views) at widths 1, 0.5 and 0.25. After the CFF step rows, the
same step with each layer compiled (``torch.compile``) against eager, in turns: 0.97x on 2026-12-07 (AMD EPYC,
AVX-512, beside two training processes), so training stays eager. With
``--notebooks PROFILE`` it instead executes every notebook at that profile (into a temporary
folder) and prints its wall time against the profile's budget (README, Profiles).

``--device cuda`` is the project's one prepared GPU check, short enough for a lent GPU's few minutes:
the CFF step at the paper's model (L=8, E=128, batch 512) on the GPU, one seed; a cell's 7 seeds as one
batched model (``lib.cff.batched``) against the one-seed step run 7 times (images/s and the ratio); the
SimCLR step (ResNet-18 width 1, batch 512, two views) and study 5's largest batch (its paper profile's,
a FlatNCE step), images/s or the out-of-memory error; and the batched-equals-separate tests of
``tests/test_batched.py`` on CUDA.

The module runs past 400 lines because each row of the benchmark's table is measured here side by side with
its baseline (the step, the data path, the probe, batched seeds, the SSL step, the notebooks), so that every
ratio comes from one run on one machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from lib.cff.batched import batched_cff_step, stack_seeds
from lib.cff.training import (
    CHUNK_TOKENS,
    CFFConfig,
    cff_probe,
    cff_step,
    new_model,
    new_optimizer,
    train_cff,
    two_views,
)
from lib.core.augment import augment, simclr_views
from lib.core.data import DatasetNotFoundError, get_dataset, load_dataset
from lib.core.losses import margin_schedule
from lib.core.optim import scaled_lr
from lib.execute import notebooks, render
from lib.run.results import ResultsStore
from lib.run.sweep import run_sweep
from lib.ssl.training import SSLConfig, build_model, build_optimizer, keep_freed_memory, make_step
from lib.studies import flatnce_batch, margin_factorial

PAPER_CFF = dict(embed_dim=128, heads=4, layers=8, patch=4)


def timed(fn, *, repeat: int, warmup: int = 1) -> float:
    """Median seconds of ``fn()`` over ``repeat`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def matmul_gflops(n: int = 2048, repeat: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / timed(lambda: a @ b, repeat=repeat, warmup=2) / 1e9


def beside_matmul(measure) -> dict:
    """``measure()``'s row with ``matmul_gflops``: the matmul rate taken just before and just after it.

    On a shared host the machine's speed drifts by tens of percent within minutes, so a fraction of
    the matmul rate is only fair against a rate measured at the same time as the step.
    """
    before = matmul_gflops()
    row = measure()
    return dict(row, matmul_gflops=(before + matmul_gflops()) / 2)


def cifar10(data_root: str | None):
    """CIFAR-10 if it can be found offline, else procedural 32x32 images of the same shape."""
    try:
        return load_dataset("cifar10", data_root=data_root)
    except DatasetNotFoundError:
        return load_dataset("shapes", image_size=32, n_train=10240, n_test=10240)


def training_step(config: CFFConfig, ds, batch: int, *, chunk_tokens: int = CHUNK_TOKENS):
    """train_cff's step on one fixed batch: ``(step, views)`` closures and the step's model FLOPs per image."""
    gen = torch.Generator().manual_seed(config.seed)
    model = new_model(ds, config)
    optimizer = new_optimizer(model.parameters(), config)
    margins = margin_schedule(config.m0, config.m_last, config.layers)
    x, y = ds.x_train[:batch], ds.y_train[:batch]
    labels = torch.cat([y, y])

    def views():
        return two_views(x, config, ds, gen)

    def step():
        cff_step(model, optimizer, views(), labels, margins, margin_mode=config.margin_mode,
                 stabilizer=config.stabilizer, temperature=config.temperature, chunk_tokens=chunk_tokens)

    with FlopCounterMode(display=False) as counter:
        step()
    return step, views, counter.get_total_flops() / batch


def cff_step_rate(ds, batch: int, *, repeat: int, chunk_tokens: int = CHUNK_TOKENS) -> dict:
    """Images/s and FLOPs per image of the real training step at the paper's config (augmentation included)."""
    step, views, flops_per_image = training_step(CFFConfig(**PAPER_CFF), ds, batch, chunk_tokens=chunk_tokens)
    step_s = timed(step, repeat=repeat)
    data_s = timed(views, repeat=max(3, repeat))
    return dict(batch=batch, images_per_s=batch / step_s, gflop_per_image=flops_per_image / 1e9,
                gflops=flops_per_image * batch / step_s / 1e9, data_share=data_s / step_s)


def compiled_step_ratio(ds, batch: int, *, repeat: int) -> dict:
    """The CFF step with each layer compiled (``torch.compile``, inductor) against the same step eager, two models of
    the same seed measured in turns so that a busy machine slows both alike (issue 49, item 5: a run made cheaper
    without changing what it computes). Compilation's one-off seconds are reported apart."""
    eager, _, _ = training_step(CFFConfig(**PAPER_CFF), ds, batch)
    compiled, _, _ = training_step(CFFConfig(**PAPER_CFF), ds, batch)
    model = next(c.cell_contents for c in compiled.__closure__ if isinstance(c.cell_contents, torch.nn.Module))
    for i, layer in enumerate(model.layers):
        model.layers[i] = torch.compile(layer)
    start = time.perf_counter()
    compiled()
    compile_s = time.perf_counter() - start
    eager()
    eager_s, compiled_s = [], []
    for _ in range(max(3, repeat)):
        eager_s.append(timed(eager, repeat=1, warmup=0))
        compiled_s.append(timed(compiled, repeat=1, warmup=0))
    return dict(batch=batch, eager_s=float(np.median(eager_s)), compiled_s=float(np.median(compiled_s)),
                compile_s=compile_s, speedup=float(np.median(eager_s) / np.median(compiled_s)))


def augmentation_rates(x_uint8: torch.Tensor, *, batches: int, batch: int = 512) -> dict:
    """Two augmented views per image: the library on tensor batches vs torchvision PIL + DataLoader."""
    import torchvision.transforms as T
    from PIL import Image

    gen = torch.Generator().manual_seed(0)
    mean, std = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
    n = batches * batch
    x = x_uint8[:n]

    def library():
        for i in range(0, n, batch):
            for _ in range(2):
                augment(x[i:i + batch], padding=12, flip=True, mean=mean, std=std, generator=gen)

    transform = T.Compose([T.RandomCrop(32, padding=12), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize(mean, std)])
    hwc = x.permute(0, 2, 3, 1).numpy()

    class TwoViews(torch.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            img = Image.fromarray(hwc[i])
            return transform(img), transform(img)

    def pil(workers):
        loader = torch.utils.data.DataLoader(TwoViews(), batch_size=batch, shuffle=True, num_workers=workers)
        for _ in loader:
            pass

    lib_s = timed(library, repeat=3)
    rates = {"library": n / lib_s}
    for workers in (0, 2):
        rates[f"pil_{workers}_workers"] = n / timed(partial(pil, workers), repeat=1, warmup=0)
    return rates


def probe_share(data_root: str | None, *, steps: int) -> dict:
    """The probe's share of a `cpu`-profile run of study 1: probe time / (training + probe)."""
    settings = margin_factorial.PROFILES["cpu"]
    keys = ("dataset", "dataset_options", "layers", "embed_dim", "heads", "patch", "epochs", "batch_size",
            "probe_epochs")
    config = CFFConfig(**{k: settings[k] for k in keys})
    try:
        ds = get_dataset(config.dataset, config.dataset_options, data_root)
    except DatasetNotFoundError:
        config = CFFConfig(**{**{k: settings[k] for k in keys}, "dataset": "shapes",
                              "dataset_options": {"n_train": 10000, "n_test": 10000, "image_size": 32}})
        ds = get_dataset(config.dataset, config.dataset_options, data_root)
    step, _, _ = training_step(config, ds, config.batch_size)
    step_s = timed(step, repeat=steps)
    n_train = round(len(ds.y_train) * (1 - config.val_fraction))
    train_s = step_s * config.epochs * -(-n_train // config.batch_size)
    model = new_model(ds, config)
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(len(ds.y_train), generator=gen)
    n_val = round(config.val_fraction * len(order))
    t0 = time.perf_counter()
    cff_probe(model, ds, config, train_idx=order[n_val:], val_idx=order[:n_val], generator=gen)
    probe_s = time.perf_counter() - t0
    return dict(train_s_estimated=train_s, probe_s=probe_s, probe_share=probe_s / (train_s + probe_s))


def parallel_seed_scaling(seeds: int, epochs: int, tmp: Path) -> dict:
    """A cell of seeds through the dispatcher: one process per core against one process at a time.

    Ideal scaling is ``cores`` times the one-at-a-time throughput (each process gets one thread).
    Process start-up (importing torch, loading the data) is included, as in a real sweep.
    """
    cores = os.cpu_count() or 1
    base = dict(dataset="shapes", dataset_options={"n_train": 4000, "n_test": 500, "image_size": 32}, layers=4,
                embed_dim=64, heads=4, epochs=epochs, batch_size=256, probe_epochs=5)
    configs = [CFFConfig(seed=s, **base) for s in range(seeds)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    run_sweep(ResultsStore(tmp / "serial", "bench", "smoke"), configs, train_cff, workers=1, force=True, progress=False)
    serial_s = time.perf_counter() - t0
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    run_sweep(ResultsStore(tmp / "parallel", "bench", "smoke"), configs, train_cff, workers=cores, force=True,
              progress=False)
    parallel_s = time.perf_counter() - t0
    return dict(seeds=seeds, workers=cores, serial_s=serial_s, parallel_s=parallel_s, speedup=serial_s / parallel_s)


_REALLOCATE = """
import resource, sys, torch
from lib.ssl.training import keep_freed_memory
if sys.argv[1] == "kept" and not keep_freed_memory():
    sys.exit(3)
numbers = 64 * 2**20 // 4  # a 64 MiB float32 block: above glibc's largest mmap threshold (32 MiB)
for _ in range(3):  # the heap grows to its steady size
    torch.empty(numbers).fill_(1.0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.empty(numbers).fill_(1.0)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def reallocation_page_faults() -> dict:
    """Minor page faults per re-allocation of a 64 MiB block (4 KiB pages: 16384 if every page is
    faulted in again), each in a fresh process: ``default`` with glibc's malloc settings, ``kept``
    after :func:`lib.ssl.training.keep_freed_memory` (NaN where the C library is not glibc). What the kernel
    counts depends on the machine (transparent huge pages, the allocator), so this is a benchmark row,
    not a test; the test checks that the setting is applied (tests/test_ssl.py)."""
    def faults(mode: str) -> float:
        run = subprocess.run([sys.executable, "-c", _REALLOCATE, mode], capture_output=True, text=True, timeout=300,
                             cwd=Path(__file__).resolve().parents[1])
        return float(run.stdout) if run.returncode == 0 else float("nan")
    return {"default": faults("default"), "kept": faults("kept")}


SIMCLR_WIDTHS = (1.0, 0.5, 0.25)


def simclr_step_rate(batch: int = 256, width_multiplier: float = 1.0, *, repeat: int = 3, channels_last: bool = True,
                     keep_memory: bool = True, loss: str = "infonce", optimizer: str = "lars",
                     x_uint8: torch.Tensor | None = None, device: str = "cpu", count_flops: bool = True) -> dict:
    """Images/s and model FLOPs per image of one full SimCLR training step on ``device``.

    The step is :func:`lib.ssl.training.train_ssl`'s (``make_step`` of an ``SSLConfig`` with its defaults,
    FLAT's recipe): two augmented views of ``batch`` images (from ``x_uint8``, uint8 [>= batch, 3, 32,
    32]; procedural 32x32 images if None), augmented on ``device``, forward and backward through
    ResNet-18 and projector as one batch of 2 x ``batch``, the loss, and the optimizer's update.
    With ``count_flops``, FLOPs are counted by ``torch.utils.flop_counter`` over one step
    (convolutions and matrix products, forward and backward); without, the FLOP columns are NaN.
    ``keep_memory`` calls :func:`lib.ssl.training.keep_freed_memory` first, as training does (process-wide:
    whatever runs later in the process keeps it). Returns ``batch``, ``width_multiplier``,
    ``images_per_s``, ``gflop_per_image``, ``gflops`` (achieved rate) and ``data_share`` (the
    augmentation's share of the step time).
    """
    if keep_memory:
        keep_freed_memory()
    if x_uint8 is None:
        x_uint8 = load_dataset("shapes", image_size=32, n_train=max(batch, 10), n_test=10).x_train
    if len(x_uint8) < batch:
        raise ValueError(f"batch={batch} needs at least as many images; x_uint8 has {len(x_uint8)}")
    x = x_uint8[:batch].to(device)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    c = SSLConfig(loss=loss, optimizer=optimizer, width_multiplier=width_multiplier, batch_size=batch, device=device)
    model = build_model(c, x.shape[1]).to(device, memory_format=memory_format)
    step = make_step(model, build_optimizer(model, c, scaled_lr(c.lr, batch, c.lr_scaling)), c)
    mean, std = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)

    def synced(fn):
        def run():
            fn()
            if x.is_cuda:
                torch.cuda.synchronize(x.device)
        return run

    def views():
        return simclr_views(x, mean=mean, std=std, generator=gen).contiguous(memory_format=memory_format)

    flops_per_image = float("nan")
    if count_flops:
        with FlopCounterMode(display=False) as counter:
            step(views())
        flops_per_image = counter.get_total_flops() / batch
    step_s = timed(synced(lambda: step(views())), repeat=repeat)
    data_s = timed(synced(views), repeat=max(3, repeat))
    return dict(batch=batch, width_multiplier=width_multiplier, images_per_s=batch / step_s,
                gflop_per_image=flops_per_image / 1e9, gflops=flops_per_image * batch / step_s / 1e9,
                data_share=data_s / step_s)


def simclr_width_rates(x_uint8: torch.Tensor, *, repeat: int, batch: int = 256) -> list[dict]:
    """:func:`simclr_step_rate` (two views, LARS, InfoNCE) at each of :data:`SIMCLR_WIDTHS`,
    each row with its ``speedup`` in images/s over width 1.

    Run it last: the step calls :func:`lib.ssl.training.keep_freed_memory`, which keeps this process's freed
    memory for good, so anything measured after it would run under another allocator policy.
    """
    rows = [beside_matmul(partial(simclr_step_rate, batch=batch, width_multiplier=width, repeat=repeat,
                                  x_uint8=x_uint8))
            for width in SIMCLR_WIDTHS]
    return [dict(r, speedup=r["images_per_s"] / rows[0]["images_per_s"]) for r in rows]


NOTEBOOK_BUDGET_S = {"smoke": 60, "quick": 15 * 60 / 6}  # per notebook: quick's 15 min is for all six


def gpu_cell_rates(ds, *, seeds: int = 7, batch: int = 512, repeat: int = 5, device: str = "cuda") -> dict:
    """Images/s of a cell's ``seeds`` seeds at the paper's model: one seed's step run ``seeds`` times, against
    all of them as one stacked model in one batched step (each seed's own views, as in training)."""
    configs = [CFFConfig(**PAPER_CFF, seed=s) for s in range(seeds)]
    margins = margin_schedule(configs[0].m0, configs[0].m_last, configs[0].layers)
    kw = dict(margin_mode="clamp", stabilizer="detach", temperature=configs[0].temperature)
    gen = torch.Generator().manual_seed(0)
    x, y = ds.x_train[:batch].to(device), ds.y_train[:batch].to(device)
    views = torch.stack([two_views(x, configs[0], ds, gen) for _ in range(seeds)])
    labels = torch.cat([y, y]).expand(seeds, -1).contiguous()

    def sync(fn):
        def run():
            fn()
            torch.cuda.synchronize(device) if str(device).startswith("cuda") else None
        return run

    model = new_model(ds, configs[0], device)
    optimizer = new_optimizer(model.parameters(), configs[0])
    one_s = timed(sync(lambda: cff_step(model, optimizer, views[0], labels[0], margins, **kw)), repeat=repeat)
    base, params = stack_seeds([new_model(ds, c, device) for c in configs])
    stacked_optimizer = new_optimizer(params.values(), configs[0])
    cell_s = timed(sync(lambda: batched_cff_step(base, params, stacked_optimizer, views, labels, margins, **kw)),
                   repeat=repeat)
    return dict(seeds=seeds, batch=batch, one_seed_images_per_s=batch / one_s,
                batched_images_per_s=seeds * batch / cell_s, ratio=(seeds * batch / cell_s) / (batch / one_s))


def simclr_gpu_rows(x_uint8: torch.Tensor, *, repeat: int, device: str = "cuda", width_multiplier: float = 1.0,
                    batch: int = 512, largest: int | None = None) -> list[dict]:
    """The GPU check's SimCLR rows: the InfoNCE step at ``batch`` (two views) and study 5's FlatNCE step at
    ``largest`` (None: the largest batch of its paper profile), both with :func:`simclr_step_rate` at
    ``width_multiplier`` on ``device``. Each row has a ``label`` and either ``images_per_s`` or, when the
    device ran out of memory, ``oom`` (the error's first line)."""
    largest = largest or flatnce_batch.PROFILES["paper"]["batch_sizes"][-1]
    rows = []
    for label, loss, b in ((f"SimCLR step, InfoNCE, batch {batch}", "infonce", batch),
                           (f"study 5's largest batch: FlatNCE step, batch {largest}", "flatnce", largest)):
        row = dict(label=label, batch=b)
        try:
            row.update(simclr_step_rate(b, width_multiplier, repeat=repeat, loss=loss, x_uint8=x_uint8, device=device,
                                        count_flops=False))
        except torch.OutOfMemoryError as err:
            row["oom"] = str(err).strip().splitlines()[0]
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
        rows.append(row)
    return rows


def gpu_check(data_root: str | None, *, quick: bool, device: str = "cuda") -> int:
    """The prepared GPU check (module docstring). Returns 0 when the CUDA tests pass."""
    if not torch.cuda.is_available():
        print("--device cuda: no CUDA device is visible here", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}", flush=True)
    ds = cifar10(data_root)
    print(f"images: {ds.source}", flush=True)
    r = gpu_cell_rates(ds, repeat=3 if quick else 10, device=device)
    print("| measurement (paper model: L=8, E=128, batch 512, two views) | images/s |", flush=True)
    print("| --- | --- |")
    print(f"| a cell of {r['seeds']} seeds, one seed at a time (cff_step) | {r['one_seed_images_per_s']:.0f} |")
    print(f"| a cell of {r['seeds']} seeds, batched (lib.cff.batched) | {r['batched_images_per_s']:.0f} |")
    print(f"| batched / loop | {r['ratio']:.2f}x |", flush=True)
    print("\n| SimCLR step (ResNet-18 width 1, CIFAR stem, two views, LARS; FLAT's recipe) | images/s |", flush=True)
    print("| --- | --- |")
    for row in simclr_gpu_rows(ds.x_train, repeat=2 if quick else 5, device=device):
        rate = f"{row['images_per_s']:.0f}" if "oom" not in row else f"out of memory: {row['oom']}"
        print(f"| {row['label']} | {rate} |", flush=True)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "tests/test_batched.py", "-k", "cuda"],
                           cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
    summary = tests.stdout.strip().splitlines()[-1] if tests.stdout.strip() else tests.stderr.strip()
    print(f"| batched equals separate on CUDA (tests/test_batched.py -k cuda) | {summary} |", flush=True)
    return tests.returncode


def notebook_times(profile: str) -> list[dict]:
    """Each notebook executed with papermill at ``profile`` into a temporary results folder: its wall time."""
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for nb in notebooks():
            t0 = time.perf_counter()
            render(nb, profile=profile, results_dir=tmp, output_dir=Path(tmp) / "notebooks")
            rows.append(dict(notebook=nb.stem, seconds=time.perf_counter() - t0))
            print(f"{nb.stem} [{profile}]: {rows[-1]['seconds']:.0f} s = "
                  f"{rows[-1]['seconds'] / NOTEBOOK_BUDGET_S[profile]:.2f} of its "
                  f"{NOTEBOOK_BUDGET_S[profile]:.0f} s budget",
                  flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", type=Path, help="also write the headline figures to this JSON file")
    parser.add_argument("--data-root", help="folder with cifar10.npz (else $DATA_ROOT; else procedural images)")
    parser.add_argument("--notebooks", choices=sorted(NOTEBOOK_BUDGET_S),
                        help="only time every notebook at this profile")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cuda: the prepared GPU check instead of the CPU table")
    args = parser.parse_args(argv)
    if args.notebooks:
        notebook_times(args.notebooks)
        return 0
    if args.device == "cuda":
        return gpu_check(args.data_root, quick=args.quick)
    import tempfile

    repeat = 2 if args.quick else 5
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores", flush=True)
    gflops = matmul_gflops()
    print(f"matmul 2048x2048 fp32: {gflops:.0f} GFLOP/s", flush=True)

    ds = cifar10(args.data_root)
    print(f"images: {ds.source}", flush=True)
    step_rows = [beside_matmul(partial(cff_step_rate, ds, b, repeat=repeat)) for b in (512, 128)]
    whole = beside_matmul(lambda: cff_step_rate(ds, 512, repeat=repeat, chunk_tokens=2**62))
    for r in step_rows:
        print(f"CFF step (E=128, L=8, batch {r['batch']}): {r['images_per_s']:.1f} images/s, "
              f"{r['gflop_per_image']:.2f} GFLOP/image, {r['gflops']:.0f} GFLOP/s = "
              f"{r['gflops'] / r['matmul_gflops']:.0%} of the matmul rate beside it ({r['matmul_gflops']:.0f}); "
              f"data {r['data_share']:.1%} of the step", flush=True)
    print(f"CFF step, batch 512 as one chunk (no cache blocking): {whole['images_per_s']:.1f} images/s = "
          f"{whole['gflops'] / whole['matmul_gflops']:.0%} of matmul; chunks of {CHUNK_TOKENS} tokens are "
          f"{step_rows[0]['images_per_s'] / whole['images_per_s']:.2f}x faster", flush=True)

    compiled = compiled_step_ratio(ds, 128, repeat=repeat)
    print(f"CFF step (batch 128) with each layer compiled (torch.compile): {compiled['speedup']:.2f}x eager "
          f"({compiled['compiled_s']:.2f} s against {compiled['eager_s']:.2f} s a step, medians of turns; compiling "
          f"took {compiled['compile_s']:.0f} s once)", flush=True)

    aug = augmentation_rates(ds.x_train, batches=4 if args.quick else 16)
    for name, rate in aug.items():
        print(f"augmentation, two views, {name}: {rate:.0f} images/s "
              f"({rate / aug['pil_0_workers']:.1f}x PIL with 0 workers)", flush=True)

    probe = probe_share(args.data_root, steps=repeat)
    print(f"probe: {probe['probe_s']:.1f} s of a {probe['train_s_estimated'] + probe['probe_s']:.0f} s cpu-profile run "
          f"= {probe['probe_share']:.1%}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        seeds = parallel_seed_scaling(2 if args.quick else 4, 1 if args.quick else 3, Path(tmp))
    print(f"seeds in parallel: {seeds['seeds']} runs, {seeds['workers']} processes of 1 thread: "
          f"{seeds['speedup']:.2f}x one single-threaded process at a time "
          f"({seeds['speedup'] / seeds['workers']:.0%} of ideal)", flush=True)

    faults = reallocation_page_faults()
    print(f"allocator: page faults per 64 MiB re-allocation: {faults['default']:.0f} with glibc's defaults, "
          f"{faults['kept']:.0f} after keep_freed_memory (what training runs with)", flush=True)

    # Last, on purpose: see simclr_width_rates.
    simclr = simclr_width_rates(ds.x_train, repeat=1 if args.quick else 3)
    for r in simclr:
        print(f"SimCLR step (ResNet-18 CIFAR stem, width {r['width_multiplier']:g}, batch {r['batch']}, "
              "two views): "
              f"{r['images_per_s']:.1f} images/s, {r['gflop_per_image']:.2f} GFLOP/image, {r['gflops']:.0f} GFLOP/s = "
              f"{r['gflops'] / r['matmul_gflops']:.0%} of the matmul rate beside it ({r['matmul_gflops']:.0f}); "
              f"{r['speedup']:.1f}x the images/s of width 1", flush=True)

    headline = dict(
        matmul_gflops=gflops,
        cff_step_fraction_of_matmul=step_rows[0]["gflops"] / step_rows[0]["matmul_gflops"],
        aug_speedup_vs_pil=aug["library"] / aug["pil_0_workers"],
        data_share_of_step=step_rows[0]["data_share"],
        compiled_cff_step_speedup=compiled["speedup"],
        probe_share_of_run=probe["probe_share"],
        parallel_seed_scaling=seeds["speedup"] / seeds["workers"],
        page_faults_per_reallocation_kept=faults["kept"],
        simclr_step_fraction_of_matmul=simclr[0]["gflops"] / simclr[0]["matmul_gflops"],
    )
    if args.json:
        args.json.write_text(json.dumps(headline, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
