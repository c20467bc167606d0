"""Where a record came from: the repository's commit, the machine and the kernels that made its numbers
(:func:`environment`, :func:`hardware`), the training function it names (``extra.train``) and the command that
re-runs it (``extra.rerun``), and the way back from that name to the function.

:data:`NUMERICS_KEYS` are the parts of the environment that decide whether two runs of one config can agree bit for
bit (:func:`numerics_differences`; ``docs/notes/portability.md``). A record keeps the training function's name it
was written with. Functions that moved or were renamed since are found through :data:`RENAMED` (a whole module, or
one function), so every shipped record still re-runs: ``lib.migrate`` rewrites records to today's names where that
is wanted, ``lib.rerun`` runs them either way.
"""
from __future__ import annotations

import functools
import importlib
import json
import os
import platform as _platform
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

_LIB_DIR = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- the machine

def _git(args: list[str], cwd: Path) -> str | None:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout if p.returncode == 0 else None


def _git_state(exclude: Iterable[os.PathLike | str] = ()) -> tuple[str, bool]:
    top = _git(["rev-parse", "--show-toplevel"], _LIB_DIR)
    if top is None:
        return "unknown", False
    top_path = Path(top.strip())
    head = _git(["rev-parse", "HEAD"], top_path)
    commit = head.strip() if head else "unknown"  # "unknown" also before the first commit
    spec = ["."]
    for p in exclude:
        try:
            rel = Path(p).resolve().relative_to(top_path.resolve())
        except ValueError:
            continue  # outside the repository: cannot make it dirty anyway
        if str(rel) != ".":
            spec.append(f":(exclude){rel.as_posix()}")
    status = _git(["status", "--porcelain", "--", *spec], top_path)
    return commit, bool(status and status.strip())


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None


def _cpuinfo(field: str) -> str | None:
    """The value of /proc/cpuinfo's first line that starts with ``field``; None where there is none (not Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(field):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's first ``model name`` on Linux, else what ``platform`` says."""
    return _cpuinfo("model name") or _platform.processor() or _platform.machine() or "unknown"


# The CPU's instruction-set extensions that MKL and oneDNN choose their kernels by, whatever torch's own capability
# says: a virtual machine may shorten the model name, and ATEN_CPU_CAPABILITY=avx2 on an AVX-512 CPU still leaves
# MKL and oneDNN their AVX-512 paths.
ISA_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def _cpu_flags() -> str | None:
    """The :data:`ISA_FLAGS` this CPU has (its /proc/cpuinfo ``flags``), space-separated; None where unknown."""
    flags = _cpuinfo("flags")
    return None if flags is None else " ".join(flag for flag in ISA_FLAGS if flag in set(flags.split()))


# Environment variables that steer which kernels the BLAS and oneDNN inside torch dispatch to (torch's own
# kernels follow ATEN_CPU_CAPABILITY, which shows in cpu_capability).
KERNEL_ENV_VARS = ("MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "MKL_DEBUG_CPU_TYPE", "DNNL_MAX_CPU_ISA",
                   "ONEDNN_MAX_CPU_ISA", "DNNL_DEFAULT_FPMATH_MODE", "ONEDNN_DEFAULT_FPMATH_MODE")


@functools.lru_cache(maxsize=1)  # fixed for the life of a process (ATEN_CPU_CAPABILITY is read at start)
def hardware() -> dict:
    """What made a run's numbers, below the code: the machine and the kernels torch dispatches to.

    cpu_model (e.g. "AMD EPYC"); cpu_flags: the instruction-set extensions MKL and oneDNN dispatch by
    (:data:`ISA_FLAGS` present); cpu_capability: the instruction set of torch's own CPU kernels
    ("DEFAULT", "AVX2", "AVX512", ...; the environment variable ``ATEN_CPU_CAPABILITY`` can lower it);
    cpu_count; blas and onednn: the BLAS library and oneDNN version torch was built with (read from
    ``torch.__config__.show()``; None where not stated); kernel_env: those of :data:`KERNEL_ENV_VARS`
    that are set; cuda: the CUDA version torch was built with where a GPU is present, else None.
    float32 kernels for different instruction sets sum in different orders, so runs of one config agree
    bit for bit only where these agree (:func:`numerics_differences`).
    """
    kernel_env = {name: os.environ[name] for name in KERNEL_ENV_VARS if name in os.environ}
    try:
        import torch
    except ImportError:
        return {"cpu_model": _cpu_model(), "cpu_flags": _cpu_flags(), "cpu_capability": None,
                "cpu_count": os.cpu_count(),
                "blas": None, "onednn": None, "kernel_env": kernel_env, "cuda": None}
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
    onednn = re.search(r"(?:MKL-DNN|oneDNN) v([\w.]+)", config)
    return {
        "cpu_model": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": os.cpu_count(),
        "blas": " ".join(filter(None, [blas and blas.group(1), mkl and mkl.group(1)])) or None,
        "onednn": onednn.group(1) if onednn else None,
        "kernel_env": kernel_env,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
    }


# The environment keys that decide whether two runs of one config can give bit-identical numbers.
NUMERICS_KEYS = ("device", "cuda", "cpu_model", "cpu_flags", "cpu_capability", "kernel_env", "blas", "onednn", "torch",
                 "numpy", "torch_threads")


def numerics_differences(recorded: dict, here: dict, keys: Iterable[str] = NUMERICS_KEYS) -> list[str]:
    """How two environments differ in what changes float results in the last bits, one line per key
    (``"cpu_capability: AVX512 (recorded) vs AVX2 (here)"``); empty where bit-identity can be expected.
    A key a record lacks (written before it was kept) counts as a difference: nothing says it agrees."""
    def shown(value):
        return "not recorded" if value is None else value
    return [f"{key}: {shown(recorded.get(key))} (recorded) vs {shown(here.get(key))} (here)"
            for key in keys if recorded.get(key) != here.get(key)]


def environment(exclude: Iterable[os.PathLike | str] = ()) -> dict:
    """Where the run happened.

    git_commit: HEAD of the repository containing ``lib/`` ("unknown" without git or before the
    first commit); git_dirty: tracked changes or untracked non-ignored files (False without
    git), ignoring the paths in ``exclude`` (a store passes its results folder, :func:`results_folder`,
    so that results do not mark the tree dirty); python, torch, torchvision, numpy versions (None if missing);
    platform; hostname; device ("cpu" or the CUDA device name); torch_threads; and
    :func:`hardware`'s keys (CPU model and capability, BLAS, oneDNN, kernel variables, CUDA).
    """
    commit, dirty = _git_state(exclude)
    try:
        import torch
        torch_version = torch.__version__
        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        threads = torch.get_num_threads()
    except ImportError:
        torch_version, device, threads = None, "cpu", None
    try:
        import numpy
        numpy_version = numpy.__version__
    except ImportError:
        numpy_version = None
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "python": sys.version.split()[0],
        "torch": torch_version,
        "torchvision": _version("torchvision"),
        "numpy": numpy_version,
        "platform": _platform.platform(),
        "hostname": socket.gethostname(),
        "device": device,
        "torch_threads": threads,
        **hardware(),
    }


# --------------------------------------------------------------------------- the training function
# Training functions and modules renamed or moved since records were written: old name -> today's.
RENAMED: dict[str, str] = {
    "lib.ssl.train_simclr": "lib.ssl.training.train_ssl",
    "lib.norms.train_norms": "lib.ssl.training.train_ssl",
    "lib.studies.stop_gradient.run": "lib.collapse.training.train_collapse",
    # lib/ packaged by concern (issue 28): the modules that became packages or moved into one
    "lib.cff": "lib.cff.training",
    "lib.ssl": "lib.ssl.training",
    "lib.collapse_train": "lib.collapse.training",
    "lib.simulations": "lib.ssl.simulations",
}


def train_function_name(train_fn: Callable) -> str:
    """``module.function`` of an importable training function (what the command imports)."""
    return f"{train_fn.__module__}.{train_fn.__qualname__}"


def rerun_command(train_fn: Callable, config: dict, data_root: str | None = None) -> str:
    """The shell command, run from the project root, that re-runs ``train_fn`` on ``config`` and prints its metrics;
    ``config`` is the run config's record form (``lib.core.config.as_dict``), as the record keeps it."""
    if not isinstance(config, dict):
        raise TypeError(f"rerun_command: config must be a run config's record form (a dict), not {type(config)}")
    config_json = json.dumps(config, sort_keys=True, separators=(",", ":"))
    command = f"python -m lib.rerun --train {train_function_name(train_fn)} --config {shlex.quote(config_json)}"
    return command + (f" --data-root {shlex.quote(str(data_root))}" if data_root else "")


def today_name(name: str) -> str:
    """A recorded training function's name as it is today (:data:`RENAMED`: the function, else its module)."""
    if name in RENAMED:
        return RENAMED[name]
    module, _, function = name.rpartition(".")
    return f"{RENAMED[module]}.{function}" if module in RENAMED else name


def load_train_function(name: str) -> Callable:
    """The training function a record names (``module.function``, an old name through :data:`RENAMED`)."""
    module, _, function = today_name(name).rpartition(".")
    if not module:
        raise SystemExit(f"--train {name!r}: give module.function, e.g. lib.cff.training.train_cff")
    return getattr(importlib.import_module(module), function)
