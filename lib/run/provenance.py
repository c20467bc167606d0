"""What a record says about where it came from: the training function it names (``extra.train``) and the
command that re-runs it (``extra.rerun``), and the way back from that name to the function.

A record keeps the name it was written with. Functions that moved or were renamed since are found through
:data:`RENAMED` (a whole module, or one function), so every shipped record still re-runs: ``lib.migrate``
rewrites records to today's names where that is wanted, ``lib.rerun`` runs them either way.
"""
from __future__ import annotations

import importlib
import json
import shlex
from typing import Callable

from lib.core.config import as_dict

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


def rerun_command(train_fn: Callable, config, data_root: str | None = None) -> str:
    """The shell command, run from the project root, that re-runs ``train_fn`` on ``config`` and prints its metrics."""
    config_json = json.dumps(as_dict(config), sort_keys=True, separators=(",", ":"))
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
