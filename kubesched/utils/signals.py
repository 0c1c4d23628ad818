"""Signal handlers on the running event loop, for the long-running commands (``up``,
``apiserver``, ``run``)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterable

#: What stops a long-running command: Ctrl-C and a termination request (kubelet, systemd, kill).
TERMINATION = (signal.SIGINT, signal.SIGTERM)


def on_signals(callback: Callable[[], None], signals: Iterable[signal.Signals] = TERMINATION) -> None:
    """Call ``callback`` on the running loop whenever one of ``signals`` arrives. A loop without
    signal support (Windows, a loop outside the main thread) keeps the default handling instead."""
    loop = asyncio.get_running_loop()
    for sig in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, callback)
