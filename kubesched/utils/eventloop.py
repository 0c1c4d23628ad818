"""The event loop of the API server's processes (``kubesched apiserver``, ``up``'s server).

An API server's work per request is mostly transport: reading the request, TLS, writing the
response, and a watch event to each watcher. uvloop runs those in C (libuv and its own TLS
protocol), which takes about an eighth off the server process's CPU per request; asyncio's
pure-Python loop is kept where uvloop is not installed (Windows) and for the scheduler's own
processes, whose time is in scheduling, not transport (measured there, uvloop changed nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def server_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed, else None (asyncio's default loop)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_server(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the server loop (see the module docstring)."""
    with asyncio.Runner(loop_factory=server_loop_factory()) as runner:
        return runner.run(main)
