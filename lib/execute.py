"""Executing a notebook: papermill runs it in a local kernel, and the executed notebook becomes its renders.

    from lib.execute import notebooks, render
    render(notebooks(["01"])[0], profile="quick")   # results/notebooks/01_margin_factorial_quick.{ipynb,html,...}

:func:`render` executes one notebook into a temporary file and moves it into place with its HTML copies
(``lib.render.write_renders``) only when it succeeded, so a failed run never replaces a good render: it is kept
in ``<renders>/failed/``, where the report does not look. The kernel (:class:`LocalKernelManager`) talks over
local sockets and runs numpy's loops no higher than AVX2, so a render is the same file on any x86-64 CPU with
AVX2. ``lib.run_all`` (the main job) and ``lib.bench`` execute notebooks through here.
"""
from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Mapping

import papermill
from jupyter_client.manager import AsyncKernelManager
from traitlets import default

from lib import PROJECT_ROOT
from lib.render import write_renders

NOTEBOOKS = PROJECT_ROOT / "notebooks"
FAILED = "failed"  # <renders>/failed/: failed executions, kept for reading, never shown by the report


def notebooks(only: list[str] | None = None) -> list[Path]:
    """The project's notebooks in order, optionally those whose name starts with one of ``only``."""
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [nb for nb in found if any(nb.name.startswith(o) for o in only)]
    return found


NUMPY_HOLD = "NPY_DISABLE_CPU_FEATURES"  # read by numpy once, at import


def numpy_held_to_avx2(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment a notebook's kernel gets on top of ``environ`` so that numpy runs no SIMD loop above AVX2:
    ``{NPY_DISABLE_CPU_FEATURES: ...}`` naming the AVX-512 targets of this numpy build that this CPU has, added
    to any the user named; empty on a CPU without them.

    Why: numpy picks its loops by CPU at import. On AVX-512 its float64 log, log10, exp and power round
    differently in the last bit from AVX2 CPUs (where they agree with the C library), and matplotlib's log axes
    take np.log10 of every point, so an antialiased pixel of a figure flips and the shipped render changes
    (docs/notes/portability.md). Rendering is not where speed matters."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    above = [t for t in __cpu_dispatch__ if (t.startswith("AVX512") or t == "X86_V4") and __cpu_features__.get(t)]
    if not above:
        return {}
    named = environ.get(NUMPY_HOLD, "").replace(",", " ").split()
    return {NUMPY_HOLD: " ".join(dict.fromkeys(named + above))}


class LocalKernelManager(AsyncKernelManager):
    """The notebooks' kernel over local sockets (IPC) in the system's temporary folder, where jupyter_client
    removes them at shutdown: no network port, and no warning from the kernel that TCP traffic is unencrypted.
    Shut down without the interrupt jupyter_client sends first: the render has run every cell by then, and a
    SIGINT landing while the kernel is idle only prints "KeyboardInterrupt caught in kernel" on the terminal.
    Its numpy runs no SIMD loop above AVX2 (:func:`numpy_held_to_avx2`), so a render is the same file on any
    x86-64 CPU with AVX2."""

    async def _async_pre_start_kernel(self, **kw):
        environ = kw.get("env", os.environ)
        kw["env"] = {**environ, **numpy_held_to_avx2(environ)}
        return await super()._async_pre_start_kernel(**kw)

    @default("transport")
    def _default_transport(self):
        return "ipc"

    @default("ip")
    def _default_ip(self):
        return os.path.join(tempfile.gettempdir(), f"companion-kernel-{uuid.uuid4().hex[:12]}")

    async def _async_interrupt_kernel(self) -> None:
        if not self.shutting_down:  # a user's interrupt still reaches the kernel
            await super()._async_interrupt_kernel()


def render(notebook: Path, *, profile: str, results_dir: str = "results", parameters: dict | None = None,
           output_dir: Path | None = None) -> Path:
    """Execute one notebook with papermill into a temporary file; on success move it and its renders
    (``lib.render``) to ``<output_dir>/<notebook>_<profile>{.ipynb,.html,_report.html}`` and return the HTML
    path. On failure the executed notebook goes to ``<output_dir>/failed/`` and the error is raised; the previous
    render stays as it was."""
    output_dir = output_dir or PROJECT_ROOT / results_dir / "notebooks"
    output_dir.mkdir(parents=True, exist_ok=True)
    target = output_dir / f"{notebook.stem}_{profile}.ipynb"
    with tempfile.TemporaryDirectory(dir=output_dir, prefix=".rendering-") as tmp:
        executed = Path(tmp) / target.name
        try:
            papermill.execute_notebook(str(notebook), str(executed), cwd=str(PROJECT_ROOT), kernel_name="python3",
                                       kernel_manager_class=LocalKernelManager,
                                       parameters={"profile": profile, "results_dir": results_dir,
                                                   **(parameters or {})},
                                       progress_bar=False, stderr_file=sys.stderr,  # streams the runs' bars
                                       # no widget state: a static render shows each widget's own text/html
                                       # (the explorers' default view), not a widget that needs a live kernel
                                       store_widget_state=False)
        except BaseException:
            if executed.exists():
                (output_dir / FAILED).mkdir(exist_ok=True)
                os.replace(executed, output_dir / FAILED / target.name)
            raise
        for path in write_renders(executed, target):  # the ipynb and its two HTML copies (lib.render)
            os.replace(path, output_dir / path.name)
    (output_dir / FAILED / target.name).unlink(missing_ok=True)  # an older run's failure is stale now
    return target.with_suffix(".html")
