"""Progress of long runs, on stderr, so that a large input is never minutes of silence.

Work is reported as phases (``loading manifests``, ``creating objects``, ``scheduling``), each
with how much is done out of how much (or no total, when the work cannot be counted as it goes,
as when one big file is parsed). Nothing is shown for runs shorter than ``delay``: small inputs
print exactly what they printed before. After that:

* on a terminal, a live rich progress bar, removed when the run ends;
* elsewhere (CI logs, ``2> file``), one plain line every ``interval`` seconds, or, with
  ``--logging-format json``, one structured log record per line instead.

The work itself only calls ``phase`` and ``update`` (an attribute assignment, cheap enough for a
hot loop); a background thread does the drawing, so a phase that reports nothing (a long parse)
still shows its elapsed time.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from kubesched.cli import logs

#: Seconds before anything is shown: runs shorter than this print nothing.
DELAY = 2.0
#: Seconds between plain progress lines when stderr is not a terminal.
PLAIN_INTERVAL = 5.0
#: Seconds between two looks of the drawing thread at the work's state.
POLL = 0.25
#: What the counts of the phases ``simulate`` reports are counts of.
UNITS = {"creating objects": "objects", "scheduling": "pods bound"}


class ProgressReporter:
    """Phases of work reported on ``stream``; see the module docstring.

    ``terminal`` (default: whether ``stream`` is one) picks the live bar or plain lines;
    ``clock`` and ``thread=False`` let tests drive ``tick`` by hand."""

    def __init__(self, stream: TextIO | None = None, *, terminal: bool | None = None, json_lines: bool = False,
                 delay: float = DELAY, interval: float = PLAIN_INTERVAL, clock: Callable[[], float] = time.monotonic,
                 thread: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = _is_terminal(self.stream) if terminal is None else terminal
        self.json_lines = json_lines
        self.delay = delay
        self.interval = interval
        self.clock = clock
        self.started = clock()
        #: (phase, done, total, unit, phase start): replaced whole, so the drawing thread reads a consistent tuple.
        self.state: tuple[str, int, int | None, str, float] | None = None
        self._last_line: float | None = None
        self._live: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if thread:
            self._thread = threading.Thread(target=self._run, name="kubesched-progress", daemon=True)
            self._thread.start()

    # --- what the work calls -------------------------------------------------------------------
    def phase(self, name: str, total: int | None = None, unit: str = "") -> None:
        """A new phase begins (the previous one is over)."""
        self.state = (name, 0, total, unit, self.clock())

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` units of the current phase are finished (out of ``total`` when it changed)."""
        state = self.state
        if state is not None:
            self.state = (state[0], done, state[2] if total is None else total, state[3], state[4])

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        """The callback shape ``simulate`` takes: a phase name with its counts."""
        state = self.state
        if state is None or state[0] != phase:
            self.phase(phase, total, UNITS.get(phase, ""))
        self.update(done, total)

    def close(self) -> None:
        """Stop drawing; the live bar is removed, plain lines already written stay."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- drawing ---------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(POLL):
            self.tick()

    def tick(self) -> None:
        """Show the current state, if the run has lasted long enough to deserve it."""
        state = self.state
        now = self.clock()
        if state is None or now - self.started < self.delay:
            return
        if self.terminal:
            self._draw_bar(state)
        elif self._last_line is None or now - self._last_line >= self.interval:
            self._last_line = now
            self._write_line(state, now)

    def _draw_bar(self, state: tuple[str, int, int | None, str, float]) -> None:
        name, done, total, _, _ = state
        if self._live is None:
            self._live = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  console=Console(file=self.stream, force_terminal=True), transient=True)
            self._live.start()
        task = self._tasks.get(name)
        if task is None:
            for finished in self._tasks.values():
                self._live.update(finished, visible=False)
            task = self._tasks[name] = self._live.add_task(name, total=total)
        self._live.update(task, completed=done, total=total)
        self._live.refresh()

    def _write_line(self, state: tuple[str, int, int | None, str, float], now: float) -> None:
        name, done, total, unit, phase_start = state
        elapsed = format_duration(now - phase_start)
        if self.json_lines:
            line = logs.json_line("Progress", phase=name, done=done, total=total, elapsed=elapsed)
        else:
            line = f"kubesched: {name}: {counts(done, total, unit)}{elapsed} elapsed"
        self.stream.write(line + "\n")
        self.stream.flush()


def counts(done: int, total: int | None, unit: str) -> str:
    """``12,345/386,000 pods (3%), `` or nothing when the phase has no count."""
    if not total:
        return ""
    label = f" {unit}" if unit else ""
    return f"{done:,}/{total:,}{label} ({100 * done // total}%), "


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration`` shape, to the second: ``35s``, ``1m5s``, ``1h2m3s``."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
