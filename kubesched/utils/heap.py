"""The garbage collector's settings for a process that holds a large, long-lived heap.

A scheduler keeps every node and pod of its cluster (the store's objects, the informers' caches,
the node table's rows) for as long as it runs, and allocates many short-lived objects per pod. With
CPython's default thresholds the young generation is collected every 700 net allocations and each
collection that reaches the oldest generation walks the whole heap: in `kubesched bench
SchedulingBasic` (5000 nodes, 11,000 pods) the collector took about 0.6 s of CPU, most of it in
full collections of objects that never become garbage. Moving what exists after start-up (modules,
configuration) out of the collector's view (``gc.freeze``) and collecting the young generation
every 50,000 allocations halves that, and cycles still get collected.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: Net allocations of container objects between two young-generation collections (CPython: 700).
YOUNG_THRESHOLD = 50_000


@contextlib.contextmanager
def loading_long_lived() -> Iterator[None]:
    """No collection while the block runs, then the heap settled (``settle_long_lived_heap``).
    For a command's imports: modules, classes and functions live as long as the process and make
    no garbage cycles, so the collections CPython would run meanwhile (about 80 at `kubesched
    run`'s start, 20-45 ms of CPU) find nothing to free."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        settle_long_lived_heap()


def settle_long_lived_heap() -> None:
    """Freeze what the process holds now and collect the young generation less often; the older
    generations keep CPython's thresholds (and its rule that a full collection waits until a
    quarter of the long-lived objects are new)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
