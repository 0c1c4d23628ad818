"""Per node, what its pods of each priority add up to: a node table extension, so that the dry run
can tell the nodes where preemption cannot help from columns, without looking at their pods.

A preemptor may only evict pods of lower priority. Where even evicting all of them leaves too
little room (by NodeResourcesFit's own test, nominated pods of at least its priority added), the
node is no candidate; in a full cluster that is most nodes a preemptor visits. Priorities come in
a handful of levels (PriorityClasses), so the index keeps, per level, a pod count and the summed
requests of every resource as columns, updated on each pod added or removed like the table's own
``requested`` column; the totals below a priority are the sum of a few columns.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.nodetable.table import NodeTable

EXTENSION_KEY = "defaultpreemption.levels"


class _Level:
    """One priority's pods: their count and summed requests, per row."""

    __slots__ = ("count", "requests")

    def __init__(self, capacity: int) -> None:
        self.count = np.zeros(capacity, dtype=np.int64)
        self.requests: dict[str, np.ndarray] = {}

    def column(self, name: str) -> np.ndarray:
        column = self.requests.get(name)
        if column is None:
            column = self.requests[name] = np.zeros(len(self.count), dtype=np.int64)
        return column

    def arrays(self) -> list[np.ndarray]:
        return [self.count, *self.requests.values()]


class PriorityLevels:
    """The table extension (see the module docstring)."""

    def __init__(self, table: NodeTable) -> None:
        self.capacity = table.capacity
        self.levels: dict[int, _Level] = {}

    # --- Extension --------------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        for level in self.levels.values():
            level.count = _widen(level.count, capacity)
            level.requests = {name: _widen(column, capacity) for name, column in level.requests.items()}
        self.capacity = capacity

    def node_set(self, row: int, info: NodeInfo) -> None:
        """Pods come with ``pod_added`` (the table feeds each one after this)."""

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for level in self.levels.values():
            for column in level.arrays():
                column[row] = 0

    def pod_added(self, row: int, pod: PodInfo) -> None:
        self._account(row, pod, 1)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        self._account(row, pod, -1)

    def move_row(self, src: int, dst: int) -> None:
        for level in self.levels.values():
            for column in level.arrays():
                column[dst] = column[src]
                column[src] = 0

    def _account(self, row: int, pod: PodInfo, sign: int) -> None:
        level = self.levels.get(pod.priority)
        if level is None:
            level = self.levels[pod.priority] = _Level(self.capacity)
        level.count[row] += sign
        for name, amount in pod.requests.items():
            level.column(name)[row] += sign * amount

    # --- queries ----------------------------------------------------------------------------
    def below(self, priority: int, rows: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Per row of ``rows``: how many pods have a priority lower than ``priority``, and their
        summed requests by resource name."""
        count = np.zeros(len(rows), dtype=np.int64)
        requests: dict[str, np.ndarray] = {}
        for value, level in self.levels.items():
            if value >= priority:
                continue
            count += level.count[rows]
            for name, column in level.requests.items():
                total = requests.get(name)
                requests[name] = column[rows] if total is None else total + column[rows]
        return count, requests


def priority_levels(table: NodeTable) -> PriorityLevels:
    """The table's index, built (and fed every node and pod) on first use."""
    levels: PriorityLevels = table.extension(EXTENSION_KEY, PriorityLevels)
    return levels


def _widen(column: np.ndarray, capacity: int) -> np.ndarray:
    out = np.zeros(capacity, dtype=column.dtype)
    out[: len(column)] = column
    return out
