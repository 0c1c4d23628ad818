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

Domain-scoped plugins (pods counted per topology domain: PodTopologySpread, InterPodAffinity) are
the exception: one placement moves every node of its zone, so where they run, a reusing cycle runs
them again (PreFilter; Filter on the rows whose verdict may have moved where the plugin can
tell, ``SignPlugin.filter_moved_rows``: for InterPodAffinity the rows of the domains whose counts
moved, for PodTopologySpread with one constraint the rows of the domains whose verdict moved,
else on every row; PreScore, Score over the feasible rows) and reuses the other plugins' results;
only the cycles that keep their totals do this.

An entry is only used when nothing but rows changed: same table, no node added, removed or
relabelled (``NodeTable.generation``), no other object changed (``HandleContext.objects_version``),
no nominated pod anywhere. Otherwise the cycle runs in full and leaves a new entry.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.memo import FEW_ROWS
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.nodetable.table import NodeTable

#: Beyond this many changed rows a full cycle costs about what refreshing them does.
MAX_CHANGED_ROWS = 64


_NO_FAILURE = np.iinfo(np.int32).max
NO_ROWS = np.zeros(0, dtype=np.int64)
#: A domain-scoped plugin's ``filter_basis`` where its PreFilter skipped it (it passes every row).
SKIPPED_FILTER = object()


def union_of_rows(found: list[np.ndarray]) -> np.ndarray:
    """The rows in any of ``found`` (a few short arrays of rows), ascending (in Python: cheaper
    than numpy's calls for a few rows)."""
    found = [rows for rows in found if len(rows)]
    if not found:
        return NO_ROWS
    if len(found) == 1:
        return found[0]
    return np.array(sorted({row for rows in found for row in rows.tolist()}), dtype=np.int64)


@dataclass
class _Verdicts:
    """Per row, the position of the first failing Filter plugin of a group (``_NO_FAILURE``: none)
    and its status id (-1: passes)."""

    first_pos: np.ndarray
    ids: np.ndarray

    @classmethod
    def passing(cls, n: int) -> _Verdicts:
        return cls(np.full(n, _NO_FAILURE, dtype=np.int32), np.full(n, -1, dtype=np.int32))


@dataclass
class BatchEntry:
    """One cycle's results over every row of ``table``, valid at ``version`` (see the module
    docstring). Filter verdicts are kept in three groups, the plugins that read only the node,
    those that read the pods on it (``Framework.pod_readers``) and the domain-scoped ones (run
    again over every row by each cycle, ``rerun``), and combined (``first_pos``, ``ids``: the first
    failure by configured position, as one pass over every plugin finds it); ids index ``statuses``."""

    key: tuple[Any, ...]
    table: NodeTable
    generation: int
    objects: int
    version: int
    state: CycleState
    node_only: _Verdicts
    pod_reading: _Verdicts
    domain: _Verdicts
    first_pos: np.ndarray
    ids: np.ndarray
    statuses: list[Status] = field(default_factory=list)
    #: The domain-scoped plugins a cycle reusing the entry runs again (``Framework.domain_reruns``).
    rerun: frozenset[str] = frozenset()
    #: Whether ``domain`` passes every row (as a new entry's does).
    domain_passes: bool = True
    #: Whether the domain-scoped plugin's verdicts are kept per domain (``RankedTotals.allow_slots``)
    #: rather than in ``domain``, which then passes every row.
    slot_mode: bool = False
    #: In slot mode, each row's slot and whether each slot passes, as of the last cycle.
    slots: tuple[np.ndarray, np.ndarray] = (NO_ROWS, NO_ROWS)
    #: What ``domain`` was computed from (``Framework.domain_filter_basis``; None: not known).
    domain_basis: dict[str, Any] | None = None
    #: Per Score plugin not skipped: raw scores by row, and which rows hold a current one.
    raw: dict[str, np.ndarray] = field(default_factory=dict)
    known: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per Score plugin, its normalised scores over every row, while its raw scores stay put.
    normalized: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per Score plugin, how many rows lack a current raw score (0 spares looking for them).
    missing: dict[str, int] = field(default_factory=dict)
    _status_index: dict[Status, int] = field(default_factory=dict)
    #: The weighted totals the fast batched cycle keeps (``RankedTotals``), None until one builds them.
    ranked: RankedTotals | None = None
    #: Rows whose verdicts or raw scores moved since ``ranked`` last read them (tracked while it exists).
    dirty: set[int] = field(default_factory=set)

    def add_statuses(self, statuses: list[Status]) -> np.ndarray:
        """Indices in ``statuses`` of the given statuses, appending those not seen (equal statuses
        share one index, so the list stays as short as the distinct reasons); the last slot maps
        id -1 (pass) to -1."""
        out = np.empty(len(statuses) + 1, dtype=np.int32)
        out[-1] = -1
        for i, status in enumerate(statuses):
            out[i] = self._status_id(status)
        return out

    def _status_id(self, status: Status | None) -> int:
        """The index of ``status`` in ``statuses``, appended if not seen; -1 for None (a pass)."""
        if status is None:
            return -1
        at = self._status_index.get(status)
        if at is None:
            at = self._status_index[status] = len(self.statuses)
            self.statuses.append(status)
        return at

    def set_filters(self, group: _Verdicts, rows: np.ndarray,
                    answer: tuple[np.ndarray, np.ndarray, list[Status]]) -> None:
        """Store one group's answer for ``rows`` (``Framework.run_batch_filters``'s triple) and
        combine the groups there."""
        first_pos, ids, statuses = answer
        self._store(group, rows, first_pos, self.add_statuses(statuses).take(ids))

    def set_row_filters(self, row: int, answer: tuple[int, Status | None]) -> None:
        """Store the pod-reading group's answer for one row (``Framework.run_row_filters``'s pair)."""
        self._store_row(self.pod_reading, row, answer)

    def set_domain_row(self, row: int, answer: tuple[int, Status | None]) -> None:
        """Store the domain-scoped plugins' answer for one row whose verdict may have moved, if it
        did (as ``set_domain_rows`` stores a few rows)."""
        if self._store_row(self.domain, row, answer, only_moved=True):
            self.domain_passes = answer[1] is None and not bool((self.domain.ids >= 0).any())

    def _store_row(self, group: _Verdicts, row: int, answer: tuple[int, Status | None], only_moved: bool = False) -> bool:
        """``_store`` of one row; with ``only_moved``, nothing when the answer is the stored one.
        Whether it stored."""
        first_pos, status_id = answer[0], self._status_id(answer[1])
        if only_moved and group.first_pos[row] == first_pos and group.ids[row] == status_id:
            return False
        group.first_pos[row], group.ids[row] = first_pos, status_id
        self._combine_row(row)
        self._touch(None, [row])
        return True

    def _store(self, group: _Verdicts, rows: np.ndarray, first_pos: np.ndarray, ids: np.ndarray) -> None:
        """Store one group's verdicts (ids already into ``statuses``) for ``rows``, combine the
        groups there, and mark the rows dirty."""
        group.first_pos[rows] = first_pos
        group.ids[rows] = ids
        if len(rows) <= FEW_ROWS:  # row by row: cheaper than numpy calls on a few rows
            for row in rows.tolist():
                self._combine_row(row)
        else:
            self.first_pos[rows], self.ids[rows] = _first_failures((self.node_only, self.pod_reading, self.domain), rows)
        self._touch(None, rows.tolist())

    def _combine_row(self, row: int) -> None:
        """The first failure of one row among the groups (by configured position)."""
        node_only, pod_reading, domain = self.node_only, self.pod_reading, self.domain
        a, b, c = node_only.first_pos[row], pod_reading.first_pos[row], domain.first_pos[row]
        first = node_only if a <= b and a <= c else pod_reading if b <= c else domain
        self.first_pos[row], self.ids[row] = first.first_pos[row], first.ids[row]

    def set_domain_filters(self, answer: tuple[np.ndarray, np.ndarray, list[Status]]) -> bool:
        """Store the domain-scoped plugins' answer for every row: where it moved on a few rows,
        as ``set_filters`` stores rows; where it moved on many, combining the groups again
        everywhere. Whether it moved on many (the kept totals then compare feasibility as a
        whole, ``RankedTotals.take_feasible``)."""
        first_pos, ids, statuses = answer
        domain = self.domain
        if not statuses and self.domain_passes:  # passing everywhere, as before: nothing moved
            return False
        ids = self.add_statuses(statuses).take(ids)
        self.domain_passes = not statuses
        moved = np.flatnonzero((ids != domain.ids) | (first_pos != domain.first_pos))
        if len(moved) <= MAX_MOVED_TOTALS:
            if len(moved):
                self._store(domain, moved, first_pos[moved], ids[moved])
            return False
        domain.first_pos[:], domain.ids[:] = first_pos, ids
        self.first_pos[:], self.ids[:] = _first_failures((self.node_only, self.pod_reading, domain), slice(None))
        return True

    def keep_domain_slots(self, slots: bool) -> None:
        """Keep the domain-scoped verdicts per domain (``slots``) or per row. On a change the kept
        totals are built again, and ``domain`` starts passing every row and is not known to derive
        from any state (filtered in full in the per-row mode)."""
        if slots == self.slot_mode:
            return
        self.slot_mode = slots
        self.domain_basis = None
        if not self.domain_passes:
            self.domain.first_pos[:], self.domain.ids[:] = _NO_FAILURE, -1
            self.first_pos[:], self.ids[:] = _first_failures((self.node_only, self.pod_reading, self.domain), slice(None))
            self.domain_passes = True
        self.ranked = None

    def set_domain_rows(self, rows: np.ndarray, answer: tuple[np.ndarray, np.ndarray, list[Status]]) -> None:
        """Store the domain-scoped plugins' answer for ``rows``, the only rows where it may have
        moved (``Framework.domain_filter_moved_rows``); the rows where it did are combined again."""
        first_pos, ids, statuses = answer
        domain = self.domain
        ids = self.add_statuses(statuses).take(ids)
        moved = np.flatnonzero((ids != domain.ids[rows]) | (first_pos != domain.first_pos[rows]))
        if len(moved):
            self._store(domain, rows[moved], first_pos[moved], ids[moved])
            self.domain_passes = not bool((domain.ids >= 0).any())

    def set_raw(self, name: str, rows: np.ndarray, values: np.ndarray) -> None:
        """Store a Score plugin's raw scores for ``rows``."""
        column = self.raw.get(name)
        if column is None:
            column = self.raw[name] = np.zeros(self.table.n, dtype=np.int64)
            self.known[name] = np.zeros(self.table.n, dtype=bool)
            self.missing[name] = self.table.n
        column[rows] = values
        known = self.known[name]
        self.missing[name] -= len(rows) - _known_among(known, rows)
        known[rows] = True
        if len(rows):
            self.normalized.pop(name, None)
            self._touch(name, rows.tolist())

    def set_raw_row(self, name: str, row: int, value: int) -> None:
        """Store a Score plugin's raw score for one row whose column exists (``set_raw`` of one row)."""
        self.raw[name][row] = value
        known = self.known[name]
        if not known[row]:
            known[row] = True
            self.missing[name] -= 1
        self.normalized.pop(name, None)
        self._touch(name, [row])

    def forget(self, name: str, rows: np.ndarray) -> None:
        """Rows whose raw scores of plugin ``name`` are no longer current."""
        known = self.known[name]
        self.missing[name] += _known_among(known, rows)
        known[rows] = False
        self._touch(name, rows.tolist())

    def _touch(self, name: str | None, rows: list[int]) -> None:
        """Rows whose verdicts (``name`` None) or raw scores of plugin ``name`` moved: the kept
        totals must read them again, and that plugin's normalisation is stale."""
        ranked = self.ranked
        if ranked is not None and rows:
            self.dirty.update(rows)
            if name is not None:
                ranked.stale.add(name)

    def lacks(self, name: str, row: int) -> bool:
        """Whether one row lacks a current raw score of plugin ``name`` whose column exists."""
        return self.missing[name] > 0 and not self.known[name][row]

    def lacking(self, name: str, rows: np.ndarray | None) -> np.ndarray:
        """Those of ``rows`` (None: every row) without a current raw score of plugin ``name``."""
        known = self.known.get(name)
        if known is None:
            return np.arange(self.table.n) if rows is None else rows
        if not self.missing[name]:
            return NO_ROWS
        if rows is None:
            return np.flatnonzero(~known)
        if len(rows) <= FEW_ROWS:  # the usual answers (all, none) without numpy calls
            count = _known_among(known, rows)
            if count in (0, len(rows)):
                return rows if count == 0 else NO_ROWS
        lacking: np.ndarray = rows[~known[rows]]
        return lacking


def _first_failures(groups: tuple[_Verdicts, ...], rows: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``rows``, the first failure among the groups' (by configured position)."""
    first_pos, ids = groups[0].first_pos[rows], groups[0].ids[rows]
    for group in groups[1:]:
        earlier = group.first_pos[rows] < first_pos
        first_pos, ids = np.where(earlier, group.first_pos[rows], first_pos), np.where(earlier, group.ids[rows], ids)
    return first_pos, ids


def _known_among(known: np.ndarray, rows: np.ndarray) -> int:
    """How many of ``rows`` are ``known`` (row by row for a few rows: cheaper than numpy calls)."""
    if len(rows) <= FEW_ROWS:
        return sum(1 for row in rows.tolist() if known[row])
    return int(np.count_nonzero(known[rows]))


_LOWEST = np.iinfo(np.int64).min
#: Beyond this many totals to rewrite, computing every total again costs less than one at a time.
MAX_MOVED_TOTALS = 16


@dataclass
class RankedTotals:
    """An entry's weighted total scores in visiting order (``order``, the table's; infeasible
    positions hold the lowest int64), kept across the batched cycles that reuse the entry: a cycle
    rewrites the positions of the rows that moved (``BatchEntry.dirty``) and finds the best total
    in one pass over the array, where the generic cycle scores, normalises and weights every node
    again. A row that changes feasibility, or a move of a normalising plugin's raw scores
    (``BatchEntry._touch``), makes normalisations stale: the next cycle normalises again and
    rewrites the totals of the rows whose normalised scores moved, or every total when too many
    did (a normalisation over the feasible rows may move them all)."""

    order: np.ndarray
    #: Per row, its position in ``order``.
    position: np.ndarray
    feasible: np.ndarray
    count: int
    in_order: np.ndarray
    #: Per normalising Score plugin, its normalised scores over the feasible rows (by row); per
    #: domain-scoped one, its scores this cycle (``Algorithm._keep_scores``).
    normalized: dict[str, np.ndarray] = field(default_factory=dict)
    #: The normalisations whose raw scores moved since they were computed.
    stale: set[str] = field(default_factory=set)
    #: Per plugin that normalises by its extremes (``BatchScorePlugin.normalizes_by_extremes``), the
    #: lowest and highest raw score over the rows its kept normalisation read.
    extremes: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Whether the feasible rows moved since the normalisations were computed (all are stale).
    feasibility_moved: bool = False
    #: Whether ``in_order`` holds every feasible row's total (else it is computed again in full).
    complete: bool = False
    #: The highest total and its positions, ascending (None: found again by the next ``best``): an
    #: array as ``best`` finds them, a list once ``update`` edits it (most batches of totals
    #: recomputed every cycle never do, and need not pay for the list).
    top: int | None = None
    ties: list[int] | np.ndarray = field(default_factory=list)
    #: In slot mode (``BatchEntry.slot_mode``), the domain-scoped verdict per slot of a node label
    #: and per row (``allow_slots``): ``feasible`` and the totals are then the other plugins', and a
    #: row is chosen only where both let it. ``count`` counts the rows both let.
    slot_ok: np.ndarray | None = None
    allowed: np.ndarray | None = None
    allowed_in_order: np.ndarray | None = None

    @classmethod
    def of(cls, entry: BatchEntry, order: np.ndarray) -> RankedTotals:
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        feasible = entry.ids < 0
        return cls(order, position, feasible, int(np.count_nonzero(feasible)), np.full(len(order), _LOWEST, dtype=np.int64))

    def take_feasible(self, entry: BatchEntry) -> None:
        """Read every row's verdict (after the domain-scoped plugins ran again over all of them):
        the rows that changed feasibility are rewritten (dirty), or every total when many did."""
        feasible = entry.ids < 0
        flipped = np.flatnonzero(feasible != self.feasible)
        if not len(flipped):
            return
        self.feasible = feasible
        self.count = int(np.count_nonzero(self.effective()))
        self.feasibility_moved = True
        if len(flipped) > MAX_MOVED_TOTALS:
            self.complete = False
        else:
            entry.dirty.update(flipped.tolist())

    def take_verdicts(self, entry: BatchEntry) -> None:
        """Read the verdicts of the entry's dirty rows (rewritten anyway)."""
        ids, feasible, allowed = entry.ids, self.feasible, self.allowed
        for row in entry.dirty:
            now = bool(ids[row] < 0)
            if now != feasible[row]:
                feasible[row] = now
                if allowed is None or allowed[row]:
                    self.count += 1 if now else -1
                self.feasibility_moved = True

    def effective(self) -> np.ndarray:
        """Per row, whether it is feasible: ``feasible``, and allowed by the slots in slot mode."""
        return self.feasible if self.allowed is None else self.feasible & self.allowed

    def allow_slots(self, codes: np.ndarray, slot_ok: np.ndarray) -> None:
        """Slot mode: the domain-scoped verdict per slot (``slot_ok``, the last slot for rows
        without the label) and each row's slot (``codes``, -1: the last). Where it moved, every
        total is computed again (normalisations over the feasible rows may move with it)."""
        if self.slot_ok is not None and self.slot_ok.tobytes() == slot_ok.tobytes():
            return
        self.slot_ok = slot_ok
        self.allowed = allowed = slot_ok.take(codes)
        self.allowed_in_order = allowed.take(self.order)
        self.count = int(np.count_nonzero(self.feasible & allowed))
        self.feasibility_moved = True
        self.complete = False

    def keep_scores(self, name: str, scores: np.ndarray, moved: set[int], extremes: tuple[int, int] | None = None) -> None:
        """A plugin's normalised (or domain-scoped) scores by row, normalised again this cycle
        (over raw scores whose lowest and highest are ``extremes``, where the plugin normalises by
        them): the rows where they moved join ``moved``, or every total is stale when too many did."""
        old = self.normalized.get(name)
        self.normalized[name] = scores
        if extremes is None:
            self.extremes.pop(name, None)
        else:
            self.extremes[name] = extremes
        if not self.complete:
            return
        if old is None or old is scores or len(old) != len(scores):  # the same array may have been updated in place
            self.complete = False
            return
        changed = np.flatnonzero(old != scores)
        if len(changed) > MAX_MOVED_TOTALS:
            self.complete = False
        else:
            moved.update(changed.tolist())

    def recompute(self, parts: list[tuple[np.ndarray, int]]) -> None:
        """Every total again from ``parts`` (per Score plugin: its scores by row, its weight)."""
        n = len(self.order)
        total, scratch = np.zeros(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        for scores, weight in parts:  # in place: no temporary arrays per plugin
            total += scores[:n] if weight == 1 else np.multiply(scores[:n], weight, out=scratch)
        if self.count != n:
            np.putmask(total, ~self.feasible, _LOWEST)
        self.in_order = total.take(self.order)
        self.complete = True
        self.top = None

    def update(self, rows: list[int], parts: list[tuple[np.ndarray, int]]) -> None:
        """The totals of ``rows`` again from ``parts`` (as ``recompute``), one row at a time; the
        highest total's positions follow (found again only when a total passes it or none is left)."""
        in_order, position, feasible, allowed = self.in_order, self.position, self.feasible, self.allowed
        for row in rows:
            at = int(position[row])
            old = int(in_order[at])
            new = sum(int(scores[row]) * weight for scores, weight in parts) if feasible[row] else int(_LOWEST)
            in_order[at] = new
            if allowed is not None and not allowed[row]:
                continue  # never chosen while its slot fails
            top = self.top
            if top is None or new == old:
                continue
            if new > top:
                self.top = None
            elif old == top:
                ties = self._tie_list()
                del ties[bisect.bisect_left(ties, at)]
                if not ties:
                    self.top = None
            elif new == top:
                bisect.insort(self._tie_list(), at)

    def _tie_list(self) -> list[int]:
        ties = self.ties
        if isinstance(ties, np.ndarray):
            ties = self.ties = ties.tolist()
        return ties

    def best(self, start: int, rng: random.Random) -> int:
        """The row of a highest total; ties are taken as ``select_host`` takes them from the
        totals in visiting order rotated to begin at position ``start`` (one random draw)."""
        if self.top is None:
            in_order = self.in_order
            if self.allowed_in_order is not None:
                in_order = np.where(self.allowed_in_order, in_order, _LOWEST)
            self.top = int(in_order.max())
            self.ties = np.flatnonzero(in_order == self.top)
        ties = self.ties
        k = 0 if len(ties) == 1 else rng.randrange(len(ties))
        # The ties before ``start`` are visited last.
        first = int(np.searchsorted(ties, start)) if isinstance(ties, np.ndarray) else bisect.bisect_left(ties, start)
        return int(self.order[ties[(first + k) % len(ties)]])


@dataclass
class BatchCycle:
    """What one scheduling cycle knows of batching: the pod's key, the entry it reuses (with the
    rows changed since), or the entry it is filling for the next pod."""

    key: tuple[Any, ...]
    #: The table's version when the cycle began: what the entry is valid at once the cycle ends.
    version: int = 0
    reuse: BatchEntry | None = None
    #: The rows changed since the reused entry was valid, ascending.
    changed: np.ndarray = field(default_factory=lambda: NO_ROWS)
    fill: BatchEntry | None = None
    #: Whether the reused entry's changed rows were refreshed (not so when one node was tried).
    refreshed: bool = False
    #: Whether the cycle records an explanation (it then cannot keep its totals).
    explained: bool = False


class BatchCache:
    """A profile's last entry (one: batches are consecutive pods of one shape)."""

    def __init__(self) -> None:
        self.entry: BatchEntry | None = None
        #: Cycles served from an entry, and cycles run in full with a batch key (for tests and logs).
        self.reused = 0
        self.filled = 0
        #: Of the reused cycles, those served from the kept totals (``RankedTotals``).
        self.kept = 0

    def begin(self, key: tuple[Any, ...] | None, table: NodeTable, objects: int | None, shareable: bool,
              pod_readers: frozenset[str]) -> BatchCycle | None:
        """The batching side of a cycle for a pod with ``key`` (None: not batchable). ``shareable``
        says whether the cycle may use or leave an entry at all (no nominations, no nominated node);
        ``objects`` is the objects version (None: unknown, nothing is shared); the raw scores of
        ``pod_readers`` on changed rows are stale."""
        if key is None or objects is None or not shareable:
            self.entry = None
            return None
        entry = self.entry
        if entry is not None and entry.key == key and entry.table is table and entry.generation == table.generation \
                and entry.objects == objects and len(entry.ids) == table.n:
            rows = table.changed_rows(entry.version)
            if len(rows) <= MAX_CHANGED_ROWS:
                for name in entry.known:
                    if name in pod_readers:
                        entry.forget(name, rows)  # computed again where needed
                return BatchCycle(key, table.version, reuse=entry, changed=rows)
        self.entry = None
        return BatchCycle(key, table.version)

    def new_entry(self, cycle: BatchCycle, table: NodeTable, objects: int) -> BatchEntry:
        """An empty entry for ``cycle`` over ``table`` as it is now (the cycle state is copied in
        once PreScore ran)."""
        n = table.n
        return BatchEntry(cycle.key, table, table.generation, objects, table.version, CycleState(), _Verdicts.passing(n),
                          _Verdicts.passing(n), _Verdicts.passing(n), np.full(n, _NO_FAILURE, dtype=np.int32),
                          np.full(n, -1, dtype=np.int32))

    def keep(self, entry: BatchEntry, reused: bool) -> None:
        """The cycle that filled or reused ``entry`` succeeded: the next pod may use it."""
        self.entry = entry
        if reused:
            self.reused += 1
        else:
            self.filled += 1

    def drop(self) -> None:
        self.entry = None


# --- upstream's node hints ------------------------------------------------------------------------
#: Upstream's ``maxBatchAge``: older results are not handed out.
MAX_BATCH_AGE = 0.5


@dataclass
class _Ranking:
    """The rest of a cycle's feasible nodes with their total scores, best first when popped
    (upstream ``sortedNodeScores``: ties in random order)."""

    signature: str
    names: np.ndarray
    totals: np.ndarray
    created: float

    def pop(self, rng: random.Random) -> str:
        best = np.flatnonzero(self.totals == self.totals.max())
        at = int(best[rng.randrange(len(best))]) if len(best) > 1 else int(best[0])
        name = str(self.names[at])
        self.names = np.delete(self.names, at)
        self.totals = np.delete(self.totals, at)
        return name


class OpportunisticBatch:
    """Upstream's OpportunisticBatching (``framework/runtime/batch.go``, gate OpportunisticBatching):
    when the previous cycle placed a pod with the same signature on a node this pod no longer
    fits, this pod is offered the next node of that cycle's ranking, and takes it if the node
    passes the filters, without scoring. Upstream signs pods only where this gives the ranking one
    full cycle would give; its default profile signs none (PodTopologySpread's system default
    constraints).

    ``hint`` is upstream's ``GetNodeHint`` and ``store`` its ``StoreScheduleResults``; the
    scheduling cycle counter, the clock and the random source are the scheduler's.
    """

    def __init__(self, now: Callable[[], float], rng: random.Random) -> None:
        self.now = now
        self.rng = rng
        self.ranking: _Ranking | None = None
        self.last_cycle = -1
        self.last_chosen = ""
        #: Pods placed on a hinted node (upstream's ``batchedPods``).
        self.batched_pods = 0

    def hint(self, signature: str | None, cycle: int, fits_last_chosen: Callable[[str], bool]) -> str:
        """The node to try first, or "" (upstream ``GetNodeHint``). ``fits_last_chosen(name)``
        runs the filters on the node the previous pod took."""
        ranking = self.ranking
        if ranking is None or not len(ranking.names):
            return ""
        usable = (cycle == self.last_cycle + 1 and signature is not None and signature == ranking.signature
                  and self.now() - ranking.created <= MAX_BATCH_AGE and not fits_last_chosen(self.last_chosen))
        if not usable:
            self.ranking = None
            return ""
        return ranking.pop(self.rng)

    def store(self, signature: str | None, hinted: str, chosen: str, rest: tuple[NodeTable, np.ndarray, np.ndarray] | None,
              cycle: int) -> None:
        """Remember the cycle's outcome (upstream ``StoreScheduleResults``): a taken hint keeps the
        ranking; otherwise ``rest`` (the table, and the other feasible rows with their totals)
        becomes it."""
        self.last_cycle, self.last_chosen = cycle, chosen
        if hinted and hinted == chosen:
            self.batched_pods += 1
            return
        if signature is None or rest is None or not len(rest[1]):
            self.ranking = None
            return
        table, rows, totals = rest
        self.ranking = _Ranking(signature, table.names_array()[rows], totals, self.now())
