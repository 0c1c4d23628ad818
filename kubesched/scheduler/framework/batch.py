"""Batches of same-shaped pods: the previous cycle's filter verdicts and raw scores, reused for the
next pod with the same batch key, exactly (kubesched's counterpart of upstream's
``framework/runtime/batch.go``, which hands the next pod the previous ranking's next node).

Replicas of one workload ask the same question of the same nodes; between two of them the cluster
changed in a few rows only: the node that got the last pod (assumed, then bound), nodes where pods
were deleted. A ``BatchEntry`` keeps, for every row of the node table, the verdict of the batch
Filter plugins and the raw score of each Score plugin, with the PreFilter and PreScore state they
were computed from. The next pod with the same key (``Framework.batch_key``: everything the plugins
read of the pod) gets a copy of that state, the Filter plugins and raw scores are recomputed on the
rows changed since, and everything that spans nodes is computed again as always: the visiting
order, ``numFeasibleNodesToFind``, normalisation over the feasible nodes, weights, host selection.
So the verdicts, scores and chosen node are those of a cycle that ran every plugin on every node.

An entry is only used when nothing but rows changed: same table, no node added, removed or
relabelled (``NodeTable.generation``), no other object changed (``HandleContext.objects_version``),
no nominated pod anywhere, and every domain-scoped plugin (pods counted per topology domain)
skipped in the cycle the entry came from. Otherwise the cycle runs in full and leaves a new entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.nodetable.table import NodeTable

#: Beyond this many changed rows a full cycle costs about what refreshing them does.
MAX_CHANGED_ROWS = 64


@dataclass
class BatchEntry:
    """One cycle's results over every row of ``table``, valid at ``version`` (see the module
    docstring). ``ids`` index ``statuses`` (-1: the node passes the batch filters)."""

    key: tuple[Any, ...]
    table: NodeTable
    generation: int
    objects: int
    version: int
    state: CycleState
    first_pos: np.ndarray
    ids: np.ndarray
    statuses: list[Status]
    #: Per Score plugin not skipped: raw scores by row, and which rows hold one.
    raw: dict[str, np.ndarray] = field(default_factory=dict)
    known: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    _status_index: dict[Status, int] = field(default_factory=dict)

    def add_statuses(self, statuses: list[Status]) -> np.ndarray:
        """Indices in ``statuses`` of the given statuses, appending those not seen (equal statuses
        share one index, so the list stays as short as the distinct reasons)."""
        index = self._status_index
        if not index:
            index.update((s, i) for i, s in reversed(list(enumerate(self.statuses))))
        out = np.empty(len(statuses) + 1, dtype=np.int32)
        out[-1] = -1  # ids of -1 (pass) map to -1
        for i, status in enumerate(statuses):
            at = index.get(status)
            if at is None:
                at = index[status] = len(self.statuses)
                self.statuses.append(status)
            out[i] = at
        return out

    def set_filters(self, rows: np.ndarray, first_pos: np.ndarray, ids: np.ndarray, statuses: list[Status]) -> None:
        """Store the batch filters' answer for ``rows`` (``ids`` index ``statuses``)."""
        self.first_pos[rows] = first_pos
        self.ids[rows] = self.add_statuses(statuses)[ids]

    def set_raw(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        """Store a Score plugin's raw scores for ``rows``."""
        column = self.raw.get(name)
        if column is None:
            column = self.raw[name] = np.zeros(self.table.n, dtype=np.int64)
        column[rows] = values


@dataclass
class BatchCycle:
    """What one scheduling cycle knows of batching: the pod's key, the entry it reuses (with the
    rows changed since), or the entry it is filling for the next pod."""

    key: tuple[Any, ...]
    #: The table's version when the cycle began: what the entry is valid at once the cycle ends.
    version: int = 0
    reuse: BatchEntry | None = None
    changed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    fill: BatchEntry | None = None


class BatchCache:
    """A profile's last entry (one: batches are consecutive pods of one shape)."""

    def __init__(self) -> None:
        self.entry: BatchEntry | None = None
        #: Cycles served from an entry, and cycles run in full with a batch key (for tests and logs).
        self.reused = 0
        self.filled = 0

    def begin(self, key: tuple[Any, ...] | None, table: NodeTable, objects: int | None, shareable: bool) -> BatchCycle | None:
        """The batching side of a cycle for a pod with ``key`` (None: not batchable). ``shareable``
        says whether the cycle may use or leave an entry at all (no nominations, no nominated node);
        ``objects`` is the objects version (None: unknown, nothing is shared)."""
        if key is None or objects is None or not shareable:
            self.entry = None
            return None
        entry = self.entry
        if entry is not None and entry.key == key and entry.table is table and entry.generation == table.generation \
                and entry.objects == objects and len(entry.ids) == table.n:
            rows = table.changed_rows(entry.version)
            if len(rows) <= MAX_CHANGED_ROWS:
                changed = np.zeros(table.n, dtype=bool)
                changed[rows] = True
                entry.known[rows] = False  # raw scores of changed rows are computed again when needed
                return BatchCycle(key, table.version, reuse=entry, changed=changed)
        self.entry = None
        return BatchCycle(key, table.version)

    def new_entry(self, cycle: BatchCycle, table: NodeTable, objects: int, state: CycleState) -> BatchEntry:
        """An empty entry for ``cycle`` over ``table`` as it is now; ``state`` is copied later."""
        n = table.n
        return BatchEntry(cycle.key, table, table.generation, objects, table.version, state,
                          np.full(n, np.iinfo(np.int32).max, dtype=np.int32), np.full(n, -1, dtype=np.int32), [],
                          known=np.zeros(n, dtype=bool))

    def keep(self, entry: BatchEntry, reused: bool) -> None:
        """The cycle that filled or reused ``entry`` succeeded: the next pod may use it."""
        self.entry = entry
        if reused:
            self.reused += 1
        else:
            self.filled += 1

    def drop(self) -> None:
        self.entry = None
