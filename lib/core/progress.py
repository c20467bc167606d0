"""Progress bars, one way for every loop: a bar over a sweep's runs, fed by each run's training steps.

    sweep = progress.Sweep(len(todo), "margin_factorial [quick]")   # lib.run.sweep: the runs to train
    with progress.reporting(sweep.listener(run_id)):                 # a run in this process ...
        train(config)                                                # ... whose loop calls steps()
    sweep.finished(run_id)
    sweep.close()

    bar = progress.steps(total_steps, "cff seed 3", enabled)  # a training loop (lib.cff.training, lib.ssl.training)
    bar.update(); bar.close()

A training loop reports its steps through :func:`steps`. Inside a sweep (:func:`reporting` set, in this
process or in a pool worker that relays to the sweep's process through a queue) the steps move the
sweep's bar: each run in flight counts with the fraction of its steps done, so the bar moves and its
ETA is right long before the first run ends, and the runs in flight are named after the bar. A loop
outside a sweep (``train_cff(config, progress=True)``) shows a bar of its own.

Where the bar goes (:func:`style`):

- ``widget``: a Jupyter kernel with a frontend: tqdm's notebook widget (``tqdm.auto``).
- ``lines``: a kernel executed by papermill (its injected ``# Parameters`` cell ran), or a stream that is
  not a terminal (a log): one plain line per update, at most every ``TEXT_INTERVAL_S`` and every
  ``TEXT_STEP`` of the total, so a rendered notebook or a log keeps at most about 50 lines of a bar.
  papermill streams a kernel's stderr as it comes, which is how ``lib.run_all`` shows them live.
- ``terminal``: tqdm's bar redrawn in place on stderr.

``enabled=None`` shows bars in a kernel and on a terminal, not in a pipe or log (pytest, a Slurm task);
True shows them anywhere, False nowhere. A sweep whose runs are all recorded shows no bar: one line
saying so, the same every time, so re-rendering a notebook from unchanged records changes nothing.
Nothing here draws random numbers or changes the order of any work.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable

from tqdm import std as tqdm_std

INJECTED_CELL = "# Parameters"  # the first line of the cell papermill injects with the -p values

TEXT_INTERVAL_S = 5.0  # lines style: at least this long between two lines of a bar ...
TEXT_STEP = 0.02  # ... and at least this fraction of its total done in between (<= ~50 lines a bar)
REDRAW_INTERVAL_S = 0.5  # widget and terminal: redrawn in place, so only the cost of a redraw matters
REPORT_INTERVAL_S = 0.25  # a run's steps reach its sweep at most this often
SWEEP_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"

Listener = Callable[[int, int, str], None]  # (steps done, steps in all, run label)
_listener: Listener | None = None  # where steps() reports while a sweep's run trains in this process


def _kernel():
    """The running IPython kernel's shell, or None (a terminal IPython is not a kernel)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell if shell is not None and "IPKernelApp" in shell.config else None


def style() -> str:
    """``widget``, ``lines`` or ``terminal``: how a bar shows here (module docstring)."""
    shell = _kernel()
    if shell is not None:
        executed_by_papermill = any(cell.lstrip().startswith(INJECTED_CELL) for cell in shell.user_ns.get("In", []))
        return "lines" if executed_by_papermill else "widget"
    return "terminal" if sys.stderr.isatty() else "lines"


class _Lines:
    """A stream for tqdm that turns each in-place redraw ('\\r' + the bar) into a line of its own: a log
    and a rendered notebook keep every redraw, which in place would pile up on one line."""

    def __init__(self, stream):
        self.stream, self.last = stream, ""

    def write(self, text: str) -> None:
        line = text.lstrip("\r").rstrip()
        if line and line != self.last:  # tqdm shows a finished bar once more when it closes
            self.stream.write(line + "\n")
            self.last = line

    def flush(self) -> None:
        self.stream.flush()


def shown(enabled: bool | None) -> bool:
    """Whether a bar shows: ``enabled``, else in a kernel and on a terminal but not in a pipe or log."""
    return enabled if enabled is not None else style() != "lines" or _kernel() is not None


def bar(total: float, desc: str, *, unit: str, enabled: bool | None = None, leave: bool = True,
        bar_format: str | None = None, postfix: str | None = None) -> tqdm_std.tqdm:
    """The one progress-bar factory: a tqdm bar in this place's :func:`style`, or a silent one."""
    how = style()
    options = dict(total=total, desc=desc, unit=unit, leave=leave, bar_format=bar_format, postfix=postfix,
                   disable=not shown(enabled))
    if how == "widget":
        from tqdm.auto import tqdm as auto

        return auto(mininterval=REDRAW_INTERVAL_S, miniters=0, **options)
    if how == "terminal":
        return tqdm_std.tqdm(mininterval=REDRAW_INTERVAL_S, miniters=0, file=sys.stderr, **options)
    return tqdm_std.tqdm(mininterval=TEXT_INTERVAL_S, miniters=TEXT_STEP * total, file=_Lines(sys.stderr),
                         ascii=True, **options)


class _Relay:
    """What :func:`steps` returns inside a sweep: a bar's ``update``/``close`` that report to the listener,
    at most every ``REPORT_INTERVAL_S`` and at the last step (a pool worker's reports cross a pipe)."""

    def __init__(self, total: int, desc: str, listener: Listener):
        self.n, self.total, self.desc, self.listener = 0, total, desc, listener
        self.last = time.monotonic()
        listener(0, total, desc)  # the run is in flight from its first step on

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= REPORT_INTERVAL_S or self.n >= self.total:
            self.last = now
            self.listener(self.n, self.total, self.desc)

    def close(self) -> None:
        pass


def steps(total: int, desc: str, enabled: bool | None = None):
    """The progress of one run's training steps: reported to the sweep it is part of, else its own bar."""
    if enabled is not False and _listener is not None:
        return _Relay(total, desc, _listener)
    return bar(total, desc, unit="step", enabled=enabled, leave=False)


@contextmanager
def reporting(listener: Listener | None):
    """Within: :func:`steps` reports to ``listener`` (a sweep's, or a pool worker's relay to it)."""
    global _listener
    previous, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = previous


class Sweep:
    """The bar over a sweep's ``total`` runs to train (of ``recorded + total``): a run counts 1 when
    recorded and, while in flight, the fraction of its steps done (a batched cell of S seeds, S times that).

    In the widget and terminal styles each run in flight also has a bar of its steps under the sweep's;
    in the lines style it is named after the sweep's bar with its percentage instead, so that one line
    says it all and two bars never interleave.
    """

    def __init__(self, total: int, desc: str, *, enabled: bool | None = None, recorded: int = 0):
        self.total, self.done = total, 0
        self.in_flight: dict[str, tuple[int, float, str]] = {}  # key -> (runs, fraction of steps done, label)
        self.run_bars: dict[str, tqdm_std.tqdm] = {}
        self.recorded: set[str] = set()  # keys finished: a pool worker's late report of one is dropped
        if total == 0:  # nothing to train: one line, the same every time (no elapsed time)
            if shown(enabled):
                print(f"{desc}: all {recorded} runs recorded, nothing to train", flush=True)
            enabled = False
        self.bar = bar(total, desc, unit="run", enabled=enabled, bar_format=SWEEP_FORMAT, postfix=f"0/{total} runs")
        self.nested = not self.bar.disable and style() != "lines"

    def listener(self, key: str, runs: int = 1) -> Listener:
        """The listener of the run (or batched cell of ``runs`` seeds) ``key`` while it trains."""
        def report(done: int, total: int, desc: str) -> None:
            if key in self.recorded:
                return
            self.in_flight[key] = (runs, done / total, desc)
            if self.nested:
                if key not in self.run_bars:
                    self.run_bars[key] = bar(total, desc, unit="step", enabled=True, leave=False)
                self.run_bars[key].update(done - self.run_bars[key].n)
            self._show()
        return report

    def finished(self, key: str) -> None:
        """One run recorded (of the cell ``key`` when batched): it counts 1, no longer its fraction."""
        self.in_flight.pop(key, None)
        self.recorded.add(key)
        if key in self.run_bars:
            self.run_bars.pop(key).close()
        self.done += 1
        self._show()

    def _show(self) -> None:
        if self.bar.disable:
            return
        running = "" if self.nested else "".join(f"; {label} {100 * fraction:.0f}%"
                                                 for _, fraction, label in self.in_flight.values())
        self.bar.set_postfix_str(f"{self.done}/{self.total} runs{running}", refresh=False)
        self.bar.update(self.done + sum(runs * fraction for runs, fraction, _ in self.in_flight.values()) - self.bar.n)

    def close(self) -> None:
        for run_bar in self.run_bars.values():
            run_bar.close()
        self.bar.close()
