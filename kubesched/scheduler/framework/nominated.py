"""The nodes with pods nominated to them, each with its nominees added, kept up to date incrementally
beside the scheduler's node table (upstream has no such structure: ``RunFilterPluginsWithNominatedPods``
copies the node and adds the nominees on every call).

Once preemption is under way, hundreds or thousands of nodes have a preemptor nominated to them,
and every pod scheduled must fit on each of them with the nominees of at least its priority
added; so must the preemptor being dry-run. Copying those nodes for every attempt costs more than
the rest of the attempt. The overlay keeps one ``view`` table holding, for each node with nominees,
a copy of the node with *all* its nominees added, and rewrites a row only when its node changed
in the scheduler's table (the table's per-row versions say which) or the node's nominations
changed (the nominator's journal says which; it also records when a nominee leaves or re-enters
the queue, since a nominee in flight is seen with only its identity, as upstream).

A view row stands for a pod's check where every nominee there counts for that pod: priority at
least the pod's, and not the pod itself. The others (nodes with nominees of mixed priorities, the
pod's own nominated node) are answered from ``mixed``: the caller copies them as before.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Protocol, cast

import numpy as np

from kubesched.api.types import PodInfo
from kubesched.scheduler.nodetable.table import NodeTable

_NO_ROWS = np.empty(0, dtype=np.int64)


class NominationJournal(Protocol):
    """Names of the nodes whose nominated pods may have changed since it was last drained."""

    def drain(self) -> set[str]:
        ...


class NominationSource(Protocol):
    """A nominator that keeps journals (the scheduling queue)."""

    def nominated_node_names(self) -> list[str]:
        ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        ...

    def nomination_journal(self) -> NominationJournal:
        ...


class NomineeChecks:
    """What the overlay says for one pod: the scheduler-table rows whose view rows stand for the
    pod's check (``rows``, with ``view_rows`` the matching rows of ``view``), and the other nodes
    with nominees that count for the pod (``mixed``: name -> those nominees)."""

    __slots__ = ("mixed", "rows", "view", "view_rows")

    def __init__(self, view: NodeTable, rows: np.ndarray, view_rows: np.ndarray, mixed: dict[str, list[PodInfo]]) -> None:
        self.view = view
        self.rows = rows
        self.view_rows = view_rows
        self.mixed = mixed


class NominatedOverlay:
    """See the module docstring."""

    def __init__(self, table: NodeTable, source: NominationSource) -> None:
        self.table = table
        self.source = source
        self.journal = source.nomination_journal()
        self.view = NodeTable()
        #: Per view row: the node's row in ``table``, that row's version when copied, and the
        #: lowest and highest priority of its nominees.
        self.main_row = np.zeros(self.view.capacity, dtype=np.int64)
        self.built = np.zeros(self.view.capacity, dtype=np.int64)
        self.min_priority = np.zeros(self.view.capacity, dtype=np.int64)
        self.max_priority = np.zeros(self.view.capacity, dtype=np.int64)
        #: Node name -> its nominees, in nomination order (as the queue resolved them).
        self.nominees: dict[str, tuple[PodInfo, ...]] = {}
        #: Nominee uid -> node name.
        self.node_of: dict[str, str] = {}
        self._generation = -1

    # --- keeping up --------------------------------------------------------------------------
    def sync(self) -> None:
        """Bring the view up to date with the table and the nominations."""
        dirty = self.journal.drain()
        table = self.table
        if self._generation != table.generation:
            if self._generation < 0:
                dirty.update(self.source.nominated_node_names())
            dirty.update(self._remap())
            self._generation = table.generation
        n = self.view.n
        if n:
            stale = np.flatnonzero(table.row_version[self.main_row[:n]] != self.built[:n])
            if len(stale):
                names = self.view.names
                dirty.update(names[r] for r in stale.tolist())
        for name in dirty:
            self._rewrite(name)

    def _remap(self) -> list[str]:
        """After nodes were added or removed: each view row's row in the table again; the names of
        the nodes gone (their rows must go too)."""
        gone = []
        row_of = self.table.row_of
        for view_row, name in enumerate(self.view.names):
            row = row_of.get(name)
            if row is None:
                gone.append(name)
            else:
                self.main_row[view_row] = row
        return gone

    def _rewrite(self, name: str) -> None:
        row = self.table.row_of.get(name)
        pods = self.source.nominated_pods_for_node(name) if row is not None else []
        for pod in self.nominees.pop(name, ()):
            if self.node_of.get(pod.uid) == name:
                del self.node_of[pod.uid]
        if not pods or row is None:
            self._drop(name)
            return
        info = self.table.infos[row].clone()
        for pod in pods:
            info.add_pod(pod)
            self.node_of[pod.uid] = name
        self.nominees[name] = tuple(pods)
        view = self.view
        view_row = view.set_node(info)
        if view.capacity > len(self.main_row):
            self._grow(view.capacity)
        priorities = [p.priority for p in pods]
        self.main_row[view_row] = row
        self.built[view_row] = self.table.row_version[row]
        self.min_priority[view_row] = min(priorities)
        self.max_priority[view_row] = max(priorities)

    def _drop(self, name: str) -> None:
        view = self.view
        view_row = view.row_of.get(name)
        if view_row is None:
            return
        last = view.n - 1
        view.remove_node(name)
        if view_row != last:
            for column in (self.main_row, self.built, self.min_priority, self.max_priority):
                column[view_row] = column[last]

    def _grow(self, capacity: int) -> None:
        def widen(column: np.ndarray) -> np.ndarray:
            out = np.zeros(capacity, dtype=column.dtype)
            out[: len(column)] = column
            return out

        self.main_row, self.built = widen(self.main_row), widen(self.built)
        self.min_priority, self.max_priority = widen(self.min_priority), widen(self.max_priority)

    # --- reading -----------------------------------------------------------------------------
    def checks_for(self, pod: PodInfo) -> NomineeChecks:
        """Where ``pod`` must also fit beside nominated pods (see ``NomineeChecks``)."""
        n = self.view.n
        if n == 0:
            return NomineeChecks(self.view, _NO_ROWS, _NO_ROWS, {})
        priority = pod.priority
        whole = self.min_priority[:n] >= priority
        partial = np.flatnonzero(~whole & (self.max_priority[:n] >= priority)).tolist()
        own = self.node_of.get(pod.uid)
        own_row = self.view.row_of.get(own) if own is not None else None
        if own_row is not None and whole[own_row]:
            whole[own_row] = False
            partial.append(own_row)
        mixed: dict[str, list[PodInfo]] = {}
        names = self.view.names
        for view_row in partial:
            name = names[view_row]
            counted = self.nominees_for(name, pod)
            if counted:
                mixed[name] = counted
        view_rows = np.flatnonzero(whole)
        return NomineeChecks(self.view, self.main_row[view_rows], view_rows, mixed)

    def totals(self, pod: PodInfo, rows: np.ndarray, names: Iterable[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Per row of ``rows`` (the table's): how many nominees count for ``pod`` there and their
        summed requests of each resource in ``names``; from the view's columns (the node's own
        pods subtracted) where every nominee counts."""
        table, view = self.table, self.view
        checks = self.checks_for(pod)
        view_of = np.full(table.n, -1, dtype=np.int64)
        view_of[checks.rows] = checks.view_rows
        view_rows = view_of[rows]
        whole = np.flatnonzero(view_rows >= 0)
        source, target = rows[whole], view_rows[whole]
        count = np.zeros(len(rows), dtype=np.int64)
        count[whole] = view.pod_count[target] - table.pod_count[source]
        requests = {}
        for name in names:
            column = np.zeros(len(rows), dtype=np.int64)
            index, view_index = table.resource_index.get(name), view.resource_index.get(name)
            if view_index is not None:
                column[whole] = view.requested[view_index, target] - (0 if index is None else table.requested[index, source])
            requests[name] = column
        if checks.mixed:
            position_of = {row: position for position, row in enumerate(rows.tolist())}
            for name, pods in checks.mixed.items():
                position = position_of.get(table.row_of[name])
                if position is None:
                    continue
                count[position] = len(pods)
                for resource, column in requests.items():
                    column[position] = sum(p.requests.get(resource, 0) for p in pods)
        return count, requests

    def nominees_for(self, name: str, pod: PodInfo) -> list[PodInfo]:
        """The pods nominated to node ``name`` that count for ``pod``: priority at least its own,
        other than itself (upstream's ``addGENominatedPods`` filter)."""
        pods = self.nominees.get(name)
        if pods is None:
            return []
        priority, uid = pod.priority, pod.uid
        return [p for p in pods if p.priority >= priority and p.uid != uid]


_OVERLAYS: weakref.WeakKeyDictionary[NodeTable, NominatedOverlay] = weakref.WeakKeyDictionary()


def nominated_overlay(table: NodeTable, nominator: object) -> NominatedOverlay | None:
    """The overlay of ``table`` with ``nominator``'s nominations, synced; None when the nominator
    keeps no journal (then callers ask it node by node)."""
    if getattr(nominator, "nomination_journal", None) is None:
        return None
    overlay = _OVERLAYS.get(table)
    if overlay is None or overlay.source is not nominator:
        overlay = _OVERLAYS[table] = NominatedOverlay(table, cast(NominationSource, nominator))
    overlay.sync()
    return overlay

