"""Node-batch evaluation of storage constraints, and a feed of storage object changes.

The volume plugins evaluate PV node affinity, StorageClass allowed topologies and
CSIStorageCapacity node topologies over a whole batch of nodes with numpy (one array operation per
requirement), and keep per-node indexes that must be refreshed when PVCs, PVs, classes, CSINodes or
VolumeAttachments change. ``ChangeFeed`` numbers those changes as the informers report them, so an
index can catch up with exactly what changed since it last looked.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.api.selectors import IN, InvalidSelector, NodeSelector, Requirement, parse_label_selector
from kubesched.api.volume import ANN_MIGRATED_PLUGINS, IN_TREE_PLUGINS, annotations_of, csinode_limits
from kubesched.scheduler.nodetable.selectors import label_selector_mask, requirement_mask
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable

if TYPE_CHECKING:
    from kubesched.client.informers import Handler


def pv_affinity_mask(batch: NodeBatch, selector: NodeSelector | None) -> np.ndarray:
    """Which nodes satisfy a PV's required node affinity (``CheckNodeAffinity``, vectorised).

    Field requirements see an empty node name, as upstream's label-only node does."""
    size = len(batch)
    if selector is None:
        return np.ones(size, dtype=bool)
    out = np.zeros(size, dtype=bool)
    for term in selector.terms:
        if term.errors or not all(("" in req.values) == (req.op == IN) for req in term.fields):
            continue
        mask = np.ones(size, dtype=bool)
        for req in term.labels:
            mask &= requirement_mask(batch, req)
        out |= mask
    return out


def topology_terms_mask(batch: NodeBatch, terms: list[Mapping] | None) -> np.ndarray:
    """``MatchTopologySelectorTerms`` of a StorageClass's allowedTopologies over the batch."""
    size = len(batch)
    if not terms:
        return np.ones(size, dtype=bool)
    out = np.zeros(size, dtype=bool)
    for term in terms:
        exprs = term.get("matchLabelExpressions") or []
        if not exprs or any(not e.get("values") for e in exprs):
            continue
        mask = np.ones(size, dtype=bool)
        for e in exprs:
            mask &= requirement_mask(batch, Requirement(e.get("key", ""), IN, frozenset(e.get("values") or [])))
        out |= mask
    return out


def node_topology_mask(batch: NodeBatch, node_topology: Mapping | None) -> np.ndarray:
    """Nodes a CSIStorageCapacity is accessible from (``nodeHasAccess``): none without a topology."""
    if node_topology is None:
        return np.zeros(len(batch), dtype=bool)
    try:
        selector = parse_label_selector(node_topology)
    except InvalidSelector:
        return np.zeros(len(batch), dtype=bool)
    return label_selector_mask(batch, selector)


def names_mask(batch: NodeBatch, name: str) -> np.ndarray:
    """Nodes of the batch named ``name`` (at most one)."""
    row = batch.table.row_of.get(name, -1)
    return batch.row_ids() == row


def rows_mask(batch: NodeBatch, rows: set[int] | frozenset[int]) -> np.ndarray:
    if not rows:
        return np.zeros(len(batch), dtype=bool)
    return np.isin(batch.row_ids(), np.fromiter(rows, dtype=np.int64, count=len(rows)))


class ChangeFeed:
    """Numbered changes of some kinds, recorded by informer handlers.

    ``since(seq)`` returns the changes after ``seq``, or None when they are not known (no informers
    to subscribe to, or older than the retained window): the caller must then assume everything
    changed. ``seq`` is the number of the latest change. With ``window`` 0 only the numbers are kept
    (for callers that only need to know whether something changed).
    """

    def __init__(self, handle: Any, kinds: tuple[str, ...], window: int = 20_000) -> None:
        self.seq = 0
        self.kinds = kinds
        #: Number of the latest change of each kind.
        self.kind_seq: dict[str, int] = dict.fromkeys(kinds, 0)
        self._entries: deque[tuple[int, str, Any, Any]] = deque()
        self._window = window
        self.live = _subscribe(handle, kinds, self._record)

    def _record(self, kind: str, old: Any, new: Any) -> None:
        self.seq += 1
        self.kind_seq[kind] = self.seq
        if self._window:
            self._entries.append((self.seq, kind, old, new))
            if len(self._entries) > self._window:
                self._entries.popleft()

    def since(self, seq: int) -> list[tuple[int, str, Any, Any]] | None:
        if not self.live:
            return None
        if seq >= self.seq:
            return []
        if not self._entries or self._entries[0][0] > seq + 1:
            return None
        return [e for e in self._entries if e[0] > seq]


def _subscribe(handle: Any, kinds: tuple[str, ...], record: Callable[[str, Any, Any], None]) -> bool:
    informers = getattr(getattr(handle, "ctx", None), "informers", None)
    if informers is None or not hasattr(informers, "informer"):
        return False
    for kind in kinds:
        informers.informer(kind).add_handler(_recording_handler(kind, record))
    return True


def _recording_handler(kind: str, record: Callable[[str, Any, Any], None]) -> Handler:
    """An informer ``Handler`` that records every add, update and delete of ``kind``."""
    from kubesched.client.informers import Handler

    def on_add(obj: Any, _initial: bool) -> None:
        record(kind, None, obj)

    def on_update(old: Any, new: Any) -> None:
        record(kind, old, new)

    def on_delete(obj: Any) -> None:
        record(kind, obj, None)

    return Handler(on_add=on_add, on_update=on_update, on_delete=on_delete)


class CSINodeView:
    """Per table row: whether the node has a CSINode, the in-tree plugins it migrated, and its
    attach limit per CSI driver (``spec.drivers[].allocatable.count``, -1 when absent)."""

    def __init__(self, table: NodeTable, csinodes: Mapping[str, Mapping]) -> None:
        size = table.capacity
        self.present = np.zeros(size, dtype=bool)
        #: Whether the node's CSINode sets an attach limit for any driver.
        self.any_limit = np.zeros(size, dtype=bool)
        self.migrated: dict[str, np.ndarray] = {}
        self.limits: dict[str, np.ndarray] = {}
        self.objects: dict[int, Mapping] = {}
        for name, csinode in csinodes.items():
            row = table.row_of.get(name)
            if row is None:
                continue
            self.present[row] = True
            self.objects[row] = csinode
            self._add_migrated(row, csinode, size)
            for driver, count in csinode_limits(csinode).items():
                arr = self.limits.get(driver)
                if arr is None:
                    arr = self.limits[driver] = np.full(size, -1, dtype=np.int64)
                arr[row] = count
                self.any_limit[row] = True

    def _add_migrated(self, row: int, csinode: Mapping, size: int) -> None:
        value = annotations_of(csinode).get(ANN_MIGRATED_PLUGINS, "")
        if not value:
            return
        known = {p.name for p in IN_TREE_PLUGINS}
        for plugin in value.split(","):
            if plugin not in known:
                continue
            arr = self.migrated.get(plugin)
            if arr is None:
                arr = self.migrated[plugin] = np.zeros(size, dtype=bool)
            arr[row] = True

    def migrated_mask(self, batch: NodeBatch, plugin: str) -> np.ndarray:
        arr = self.migrated.get(plugin)
        return np.zeros(len(batch), dtype=bool) if arr is None else batch.col(arr)

    def limit(self, batch: NodeBatch, driver: str) -> np.ndarray:
        arr = self.limits.get(driver)
        return np.full(len(batch), -1, dtype=np.int64) if arr is None else batch.col(arr)


class CSINodeViews:
    """``CSINodeView`` per table (the live one and preemption's scratch ones), rebuilt only when the
    table's nodes or the CSINodes changed."""

    def __init__(self, feed: ChangeFeed | None) -> None:
        self.feed = feed
        self._views: weakref.WeakKeyDictionary[NodeTable, tuple[tuple[int, int], CSINodeView]] = weakref.WeakKeyDictionary()

    def view(self, table: NodeTable, csinodes: Mapping[str, Mapping]) -> CSINodeView:
        feed = self.feed
        if feed is None or not feed.live or "CSINode" not in feed.kind_seq:
            return CSINodeView(table, csinodes)
        stamp = (table.generation, feed.kind_seq["CSINode"])
        cached = self._views.get(table)
        if cached is not None and cached[0] == stamp and len(cached[1].present) == table.capacity:
            return cached[1]
        view = CSINodeView(table, csinodes)
        self._views[table] = (stamp, view)
        return view


class ClassIndex:
    """Names of the objects of one kind (PersistentVolumes) by class, in the informer's order, kept
    up to date from a ChangeFeed of that kind (rebuilt from the objects when changes were missed)."""

    def __init__(self, feed: ChangeFeed | None, class_of: Callable[[Mapping], str]) -> None:
        self.feed = feed
        self.class_of = class_of
        self._names: dict[str, dict[str, None]] | None = None
        self._synced = 0

    def names(self, objects: Mapping[str, Mapping], cls: str) -> list[str]:
        """Names of the objects of class ``cls`` (``objects`` is the informer's store)."""
        self._sync(objects)
        return list((self._names or {}).get(cls, ()))

    def _sync(self, objects: Mapping[str, Mapping]) -> None:
        feed = self.feed
        changes = feed.since(self._synced) if feed is not None and self._names is not None else None
        if changes is None:
            self._names = {}
            for name, obj in objects.items():
                self._names.setdefault(self.class_of(obj), {})[name] = None
        else:
            for _, _, old, new in changes:
                self._apply(old, new)
        if feed is not None:
            self._synced = feed.seq

    def _apply(self, old: Mapping | None, new: Mapping | None) -> None:
        assert self._names is not None
        name = ((new or old or {}).get("metadata") or {}).get("name", "")
        before = None if old is None else self.class_of(old)
        after = None if new is None else self.class_of(new)
        if before == after:
            return
        if before is not None:
            self._names.get(before, {}).pop(name, None)
        if after is not None:
            self._names.setdefault(after, {})[name] = None

