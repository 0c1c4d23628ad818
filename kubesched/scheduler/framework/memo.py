"""Memoised per-node values: recomputed only for the nodes that changed since the last use.

Many plugin results depend only on one node's own row and on something about the pod (its request
vector, its tolerations): for the replicas of one workload they are the same on every cycle except
for the one node that got the last pod. ``RowMemo`` keeps such arrays per key and refreshes only
the rows whose ``row_version`` moved; a plugin still computes them with its ordinary vectorised
function, called on a batch of the changed rows, or, given one, with its scalar form row by row
when only a few rows changed (a numpy call costs more than the arithmetic of a row: the common case
of one changed row, the node that got the last pod). Results are exactly what a full recomputation
gives.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from kubesched.scheduler.framework.interface import FilterVerdict
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable

#: Keys kept per memo (distinct pod shapes in flight); the least recently used go first.
MAX_ENTRIES = 64
#: Up to this many changed rows, failure keys are mapped to codes one by one (cheaper than ``np.unique``).
_FEW = 16
#: Up to this many changed rows, work row by row (a plugin's scalar form ``per_row``, a kept sum)
#: costs less than a numpy call on them: the common case of one changed row, the node that got the
#: last pod.
FEW_ROWS = 4

#: A plugin's value for one row of the table (the scalar form of its vectorised function).
PerRow = Callable[[int], int]


class _Entry:
    __slots__ = ("codes", "status_index", "statuses", "values", "version")

    def __init__(self, values: np.ndarray, version: int) -> None:
        self.values = values
        self.version = version
        #: For verdicts: per row -1 (pass) or the index in ``statuses`` of the row's failure key.
        self.codes: np.ndarray | None = None
        self.statuses: list[Status] = []
        self.status_index: dict[int, int] = {}


class RowMemo:
    """Per-key arrays over all rows of one table, refreshed where rows changed."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def _entry(self, key: Hashable, compute: Callable[[NodeBatch], np.ndarray],
               per_row: PerRow | None = None) -> tuple[_Entry, np.ndarray | None]:
        """The entry for ``key`` brought up to date, and the rows just recomputed (None: all)."""
        table = self.table
        entry = self._entries.get(key)
        if entry is None or len(entry.values) != table.n:
            entry = _Entry(np.asarray(compute(table.all_rows())), table.version)
            self._entries[key] = entry
            if len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)
            return entry, None
        self._entries.move_to_end(key)
        rows = table.changed_rows(entry.version)
        if per_row is not None and 0 < len(rows) <= FEW_ROWS:
            values = entry.values
            for row in rows.tolist():
                values[row] = per_row(row)
        elif len(rows):
            entry.values[rows] = compute(table.batch(rows))
        entry.version = table.version
        return entry, rows

    def values(self, key: Hashable, compute: Callable[[NodeBatch], np.ndarray], nodes: NodeBatch,
               memoise: bool = True, per_row: PerRow | None = None) -> np.ndarray:
        """``compute`` over ``nodes`` (a batch of this table), served from the memo unless
        ``memoise`` is off (the caller's fast paths are); ``per_row``, its scalar form, if any."""
        if not memoise:
            return np.asarray(compute(nodes))
        entry, _ = self._entry(key, compute, per_row)
        return nodes.col(entry.values)

    def verdict(self, key: Hashable, keys: Callable[[NodeBatch], np.ndarray], status: Callable[[int], Status],
                nodes: NodeBatch, memoise: bool = True, per_row: PerRow | None = None) -> FilterVerdict | None:
        """A FilterVerdict from per-node failure keys (0: the node passes; equal keys share the
        Status ``status(key)`` builds), memoised like ``values``."""
        if not memoise:
            return FilterVerdict.from_keys(np.asarray(keys(nodes)), _StatusOf(status))
        entry, fresh = self._entry(key, keys, per_row)
        if fresh is None or entry.codes is None:
            entry.codes = self._codes(entry, entry.values, status)
        elif len(fresh):
            entry.codes[fresh] = self._codes(entry, entry.values[fresh], status)
        codes = nodes.col(entry.codes)
        if _all_pass(codes):
            return None
        return FilterVerdict(codes, entry.statuses)

    @classmethod
    def _codes(cls, entry: _Entry, keys: np.ndarray, status: Callable[[int], Status]) -> np.ndarray:
        """Codes of ``keys``, adding the Status of keys not seen before."""
        if len(keys) <= _FEW:
            return np.array([cls._code(entry, key, status) for key in keys.tolist()], dtype=np.int32)
        unique, inverse = np.unique(keys, return_inverse=True)
        lookup = np.array([cls._code(entry, key, status) for key in unique.tolist()], dtype=np.int32)
        return lookup[inverse.reshape(-1)]

    @staticmethod
    def _code(entry: _Entry, key: int, status: Callable[[int], Status]) -> int:
        if key == 0:
            return -1
        index = entry.status_index.get(key)
        if index is None:
            index = entry.status_index[key] = len(entry.statuses)
            entry.statuses.append(status(key))
        return index


def _all_pass(codes: np.ndarray) -> bool:
    """Whether every code is -1 (a pass); code by code for a few (cheaper than numpy calls)."""
    if len(codes) <= FEW_ROWS:
        return all(code < 0 for code in codes.tolist())
    return not (codes >= 0).any()


class _StatusOf(dict[int, Status]):
    """A mapping that builds the Status of a failure key on demand (for ``FilterVerdict.from_keys``)."""

    def __init__(self, build: Callable[[int], Status]) -> None:
        super().__init__()
        self.build = build

    def __missing__(self, key: int) -> Status:
        value = self[key] = self.build(key)
        return value


def memo_of(table: NodeTable, name: str) -> RowMemo:
    """The memo named ``name`` on ``table`` (created on first use; it is not an extension, it only reads versions)."""
    memo = table.memos.get(name)
    if memo is None:
        memo = table.memos[name] = RowMemo(table)
    return memo
