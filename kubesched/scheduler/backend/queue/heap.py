"""A keyed priority heap (upstream ``pkg/scheduler/backend/heap``) on top of ``heapq``.

Upstream's heap keeps each item's index so it can delete or re-sort it in place. ``heapq`` cannot,
so deletions and updates here are lazy: the old entry is marked dead and skipped when it surfaces,
and the heap is rebuilt once dead entries outnumber live ones. Pop and push stay in C.

The ordering is a comparator (a QueueSort ``less``), so entries carry ``__lt__``; items that
compare equal pop in insertion order (the counter), which makes PrioritySort FIFO on ties. Where
the comparator comes with a key function of the same order (PrioritySort's), each slot is a
``(key, counter, entry)`` tuple, so popping and pushing compare in C without calling Python.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Below this many dead entries the heap is never rebuilt: rebuilding tiny heaps costs more than it saves.
_MIN_DEAD_TO_COMPACT = 64


class _EntryBase(ABC, Generic[T]):
    """A heap slot; each heap makes its own subclass whose ``<`` is the heap's comparator, so a
    comparison is one Python call rather than a lookup of the comparator on every compare."""

    __slots__ = ("item", "key", "live", "seq")

    def __init__(self, item: T, key: str, seq: int) -> None:
        self.item = item
        self.key = key
        self.seq = seq
        self.live = True

    @abstractmethod
    def __lt__(self, other: _EntryBase[T]) -> bool:
        """Whether this entry pops before ``other``."""


def _entry_class(less: Callable[[T, T], bool]) -> type[_EntryBase[T]]:
    """An entry type whose ``<`` is ``less`` with the insertion counter as the final tie-break."""

    class _Entry(_EntryBase[T]):
        __slots__ = ()

        def __lt__(self, other: _EntryBase[T]) -> bool:
            a, b = self.item, other.item
            if less(a, b):
                return True
            if less(b, a):
                return False
            return self.seq < other.seq

    return _Entry


def _identity(item: T) -> T:
    return item


class KeyedHeap(Generic[T]):
    """Items ordered by ``less`` and addressable by a string key (upstream ``heap.Heap``).

    ``snapshot`` freezes an item when its entry dies: a dead entry stays in the array until it
    surfaces and keeps being compared, so it must keep comparing as it did when it was pushed even
    if the caller goes on to change the live object (timestamps, backoff expiry, the pod itself).
    """

    def __init__(self, less: Callable[[T, T], bool], snapshot: Callable[[T], T] = _identity,
                 sort_key: Callable[[T], Any] | None = None) -> None:
        """``sort_key``: a key function ordering items exactly as ``less`` does, or None."""
        self._entry = _entry_class(less)
        self._snapshot = snapshot
        self._sort_key = sort_key
        #: Slots: ``(key, counter, entry)``, where the key is the entry itself without ``sort_key``.
        self._heap: list[tuple[Any, int, _EntryBase[T]]] = []
        self._live: dict[str, _EntryBase[T]] = {}
        self._seq = 0
        self._dead = 0

    def __len__(self) -> int:
        return len(self._live)

    def __bool__(self) -> bool:
        return bool(self._live)

    def __contains__(self, key: str) -> bool:
        return key in self._live

    def __iter__(self) -> Iterator[T]:
        return (e.item for e in self._live.values())

    def get(self, key: str) -> T | None:
        entry = self._live.get(key)
        return None if entry is None else entry.item

    def add_or_update(self, key: str, item: T) -> None:
        """Insert ``item``, replacing (and re-sorting) any item under the same key.

        The caller must not have changed a queued item's sort fields before calling this: remove it
        first, change it, then add it back (the old entry must keep its old ordering).
        """
        if key in self._live:
            self._kill(self._live[key])
        self._seq += 1
        entry = self._entry(item, key, self._seq)
        self._live[key] = entry
        heapq.heappush(self._heap, (entry if self._sort_key is None else self._sort_key(item), self._seq, entry))

    def remove(self, key: str) -> T | None:
        entry = self._live.pop(key, None)
        if entry is None:
            return None
        item = entry.item
        self._kill(entry)
        return item

    def peek(self) -> T | None:
        heap = self._heap
        while heap and not heap[0][2].live:
            heapq.heappop(heap)
            self._dead -= 1
        return heap[0][2].item if heap else None

    def pop(self) -> T | None:
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)[2]
            if entry.live:
                del self._live[entry.key]
                return entry.item
            self._dead -= 1
        return None

    def _kill(self, entry: _EntryBase[T]) -> None:
        entry.live = False
        entry.item = self._snapshot(entry.item)
        self._dead += 1
        if self._dead > _MIN_DEAD_TO_COMPACT and self._dead > len(self._live):
            self._heap = [slot for slot in self._heap if slot[2].live]
            heapq.heapify(self._heap)
            self._dead = 0
