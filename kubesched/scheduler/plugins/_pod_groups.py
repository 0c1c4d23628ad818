"""The incremental pod index InterPodAffinity and PodTopologySpread read instead of walking every pod.

It is a node table extension (``table.extension(POD_INDEX, PodIndex)``) told about every pod add
and remove, and keeps:

* **groups**: pods sharing (namespace, labels, terminating), with their per-row counts. A selector
  is evaluated once per group, never per pod;
* **match views**: for a predicate over groups (terms ANDed: namespaces + label selector), a dense
  per-row count of the pods matching it, created on first use, then updated on every pod add and
  remove through the groups' lists of views they belong to. Counting the pods matching a term on
  every node is then reading an array;
* **term counts**: for every distinct (anti-)affinity term carried by existing pods, per kind
  (required anti-affinity, required affinity, preferred affinity, preferred anti-affinity), how
  many pods on each row carry it. Existing pods' terms are matched against the incoming pod once
  per distinct term (and cached), so symmetry costs O(distinct terms), not O(pods).

``node_removed`` forgets everything about a row (per-row pod entries are kept for that), as the
table's Extension protocol requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kubesched.api.selectors import InvalidSelector, LabelSelector
from kubesched.api.types import AffinityTerm, NodeInfo, PodInfo
from kubesched.scheduler.nodetable.table import NodeTable

POD_INDEX = "PodIndex"

REQUIRED_ANTI, REQUIRED_AFFINITY, PREFERRED_AFFINITY, PREFERRED_ANTI = 0, 1, 2, 3
_TERM_KINDS = (
    (REQUIRED_ANTI, "required_anti_affinity_terms"),
    (REQUIRED_AFFINITY, "required_affinity_terms"),
    (PREFERRED_AFFINITY, "preferred_affinity_terms"),
    (PREFERRED_ANTI, "preferred_anti_affinity_terms"),
)

#: A row counter switches from a dict to a dense array past this many rows.
DENSE_AT = 48
#: Match views kept; past that the least recently used quarter is dropped.
MAX_VIEWS = 256
#: Cached term-vs-incoming-pod answers per term before the cache is reset.
MAX_MATCH_CACHE = 1024

GroupKey = tuple[str, frozenset, bool]


def pod_index(table: NodeTable) -> PodIndex:
    """The table's pod index, built on first use."""
    return table.extension(POD_INDEX, PodIndex)


@dataclass(frozen=True, slots=True)
class Clause:
    """Pods in ``namespaces`` (None: every namespace) whose labels match ``selector``."""

    namespaces: frozenset[str] | None
    selector: LabelSelector

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector.matches(labels)


class RowCounts:
    """How many of something each row holds: a dict while few rows are involved, a dense array after."""

    __slots__ = ("dense", "sparse", "total")

    def __init__(self) -> None:
        self.sparse: dict[int, int] = {}
        self.dense: np.ndarray | None = None
        self.total = 0

    def add(self, row: int, delta: int, capacity: int) -> None:
        self.total += delta
        if self.dense is not None:
            self.dense[row] += delta
            return
        count = self.sparse.get(row, 0) + delta
        if count:
            self.sparse[row] = count
        else:
            self.sparse.pop(row, None)
        if len(self.sparse) > DENSE_AT:
            dense = np.zeros(capacity, dtype=np.int64)
            for r, c in self.sparse.items():
                dense[r] = c
            self.dense, self.sparse = dense, {}

    def grow(self, capacity: int) -> None:
        if self.dense is not None and len(self.dense) < capacity:
            dense = np.zeros(capacity, dtype=np.int64)
            dense[: len(self.dense)] = self.dense
            self.dense = dense

    def move(self, src: int, dst: int) -> None:
        if self.dense is not None:
            self.dense[dst] = self.dense[src]
            self.dense[src] = 0
            return
        count = self.sparse.pop(src, 0)
        if count:
            self.sparse[dst] = count

    def weights(self, n: int) -> tuple[np.ndarray | None, np.ndarray]:
        """(rows, counts); rows None means counts is dense over rows ``0..n-1``."""
        if self.dense is not None:
            return None, self.dense[:n]
        rows = np.fromiter(self.sparse.keys(), dtype=np.int64, count=len(self.sparse))
        counts = np.fromiter(self.sparse.values(), dtype=np.int64, count=len(self.sparse))
        return rows, counts


class PodGroup:
    """Pods sharing namespace, labels and being terminating or not."""

    __slots__ = ("key", "labels", "namespace", "rows", "size", "terminating", "views")

    def __init__(self, key: GroupKey, namespace: str, labels: Mapping[str, str], terminating: bool) -> None:
        self.key = key
        self.namespace = namespace
        self.labels = dict(labels)
        self.terminating = terminating
        self.rows: dict[int, int] = {}
        self.size = 0
        self.views: list[MatchView] = []


class MatchView:
    """Per-row count of the pods matching every clause (terminating pods only if asked)."""

    __slots__ = ("clauses", "counts", "include_terminating", "last_used", "live")

    def __init__(self, clauses: frozenset[Clause], include_terminating: bool, capacity: int) -> None:
        self.clauses = clauses
        self.include_terminating = include_terminating
        self.counts = np.zeros(capacity, dtype=np.int64)
        self.last_used = 0
        self.live = True

    def weights(self, n: int) -> tuple[None, np.ndarray]:
        """(None, counts): dense over rows ``0..n-1``, as ``RowCounts.weights`` gives them."""
        return None, self.counts[:n]

    def admits(self, group: PodGroup) -> bool:
        if group.terminating and not self.include_terminating:
            return False
        return all(c.matches(group.namespace, group.labels) for c in self.clauses)


class TermCount:
    """Rows hosting pods that carry ``term`` (with multiplicity), and which incoming pods it matches."""

    __slots__ = ("match_cache", "rows", "term")

    def __init__(self, term: AffinityTerm) -> None:
        self.term = term
        self.rows = RowCounts()
        self.match_cache: dict[tuple, bool] = {}

    def matches(self, pod: PodInfo, pod_key: tuple, ns_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches(incoming pod, its namespace labels)``, cached per incoming pod shape."""
        hit = self.match_cache.get(pod_key)
        if hit is None:
            if len(self.match_cache) >= MAX_MATCH_CACHE:
                self.match_cache.clear()
            hit = self.match_cache[pod_key] = self.term.matches(pod, ns_labels)
        return hit


def pod_terms(pod: PodInfo) -> tuple[tuple[int, AffinityTerm], ...]:
    """The (kind, term) pairs an existing pod carries; a kind that fails to parse contributes none,
    as upstream's PodInfo keeps the kinds that parsed."""
    out: list[tuple[int, AffinityTerm]] = []
    for kind, attr in _TERM_KINDS:
        try:
            terms = getattr(pod, attr)
        except InvalidSelector:
            continue
        out.extend((kind, t) for t in terms)
    return tuple(out)


def is_terminating(pod: PodInfo) -> bool:
    return pod.deletion_timestamp is not None


class PodIndex:
    """The extension; see the module docstring."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.capacity = table.capacity
        self.groups: dict[GroupKey, PodGroup] = {}
        self.views: dict[tuple[frozenset[Clause], bool], MatchView] = {}
        self.terms: tuple[dict[AffinityTerm, TermCount], ...] = ({}, {}, {}, {})
        self.row_pods: dict[int, dict[str, tuple[PodGroup, tuple[tuple[int, AffinityTerm], ...]]]] = {}
        self._tick = 0

    # --- Extension protocol ---------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        self.capacity = capacity
        for view in self.views.values():
            counts = np.zeros(capacity, dtype=np.int64)
            counts[: len(view.counts)] = view.counts
            view.counts = counts
        for kind in self.terms:
            for tc in kind.values():
                tc.rows.grow(capacity)

    def node_set(self, row: int, info: NodeInfo) -> None:
        self.row_pods.setdefault(row, {})

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for group, terms in self.row_pods.pop(row, {}).values():
            self._account(row, group, terms, -1)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        entries = self.row_pods.setdefault(row, {})
        old = entries.pop(pod.uid, None)
        if old is not None:
            self._account(row, old[0], old[1], -1)
        group = self._group_for(pod)
        terms = pod_terms(pod) if pod.has_affinity else ()
        entries[pod.uid] = (group, terms)
        self._account(row, group, terms, 1)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        entry = self.row_pods.get(row, {}).pop(pod.uid, None)
        if entry is not None:
            self._account(row, entry[0], entry[1], -1)

    def move_row(self, src: int, dst: int) -> None:
        entries = self.row_pods.pop(src, {})
        self.row_pods[dst] = entries
        groups = {id(g): g for g, _ in entries.values()}
        for group in groups.values():
            group.rows[dst] = group.rows.pop(src)
        moved: set[int] = set()
        for _, terms in entries.values():
            for kind, term in terms:
                tc = self.terms[kind].get(term)
                if tc is not None and id(tc) not in moved:
                    moved.add(id(tc))
                    tc.rows.move(src, dst)
        for view in self.views.values():
            view.counts[dst] = view.counts[src]
            view.counts[src] = 0

    # --- queries --------------------------------------------------------------------------------
    def view(self, clauses: frozenset[Clause], include_terminating: bool) -> MatchView:
        """The view counting, per row, the pods matching every clause."""
        key = (clauses, include_terminating)
        view = self.views.get(key)
        if view is None:
            view = self._build_view(clauses, include_terminating)
        self._tick += 1
        view.last_used = self._tick
        return view

    def term_counts(self, kind: int) -> dict[AffinityTerm, TermCount]:
        return self.terms[kind]

    # --- internals ------------------------------------------------------------------------------
    def _group_for(self, pod: PodInfo) -> PodGroup:
        terminating = is_terminating(pod)
        labels = pod.labels
        key = (pod.namespace, frozenset(labels.items()), terminating)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = PodGroup(key, pod.namespace, labels, terminating)
            group.views = [v for v in self.views.values() if v.admits(group)]
        return group

    def _account(self, row: int, group: PodGroup, terms: tuple[tuple[int, AffinityTerm], ...], sign: int) -> None:
        group.size += sign
        count = group.rows.get(row, 0) + sign
        if count:
            group.rows[row] = count
        else:
            group.rows.pop(row, None)
        for view in group.views:
            view.counts[row] += sign
        if group.size == 0:
            self.groups.pop(group.key, None)
        for kind, term in terms:
            counters = self.terms[kind]
            tc = counters.get(term)
            if tc is None:
                if sign < 0:
                    continue
                tc = counters[term] = TermCount(term)
            tc.rows.add(row, sign, self.capacity)
            if tc.rows.total == 0:
                del counters[term]

    def _build_view(self, clauses: frozenset[Clause], include_terminating: bool) -> MatchView:
        if len(self.views) >= MAX_VIEWS:
            self._evict()
        view = MatchView(clauses, include_terminating, self.capacity)
        counts = view.counts
        for group in self.groups.values():
            if view.admits(group):
                group.views.append(view)
                for row, count in group.rows.items():
                    counts[row] += count
        self.views[(clauses, include_terminating)] = view
        return view

    def _evict(self) -> None:
        ordered = sorted(self.views.items(), key=lambda kv: kv[1].last_used)
        for key, view in ordered[: max(1, len(ordered) // 4)]:
            view.live = False
            del self.views[key]
        for group in self.groups.values():
            group.views = [v for v in group.views if v.live]
