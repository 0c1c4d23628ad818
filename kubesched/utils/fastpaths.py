"""A switch for kubesched's optimisations that must not change any placement.

Each fast path (memoised per-node results, whole-column evaluation, float arithmetic where it is
exact, memoised pod requests) has a plain counterpart. ``disabled()`` turns them all off so tests
can check, on seeded workloads, that every pod lands on the same node either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

ENABLED = True


def enabled() -> bool:
    return ENABLED


@contextmanager
def disabled() -> Iterator[None]:
    global ENABLED
    previous, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = previous
