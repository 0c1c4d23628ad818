"""NodeVolumeLimits: a node may not get more volumes of a CSI driver attached than its CSINode
allows (``spec.drivers[].allocatable.count``) (upstream ``nodevolumelimits/csi.go``).

Volumes are counted once per unique ``<driver>/<volumeHandle>``: CSI PVs, in-tree PVs and inline
volumes migrated to CSI, generic ephemeral volumes, unbound claims (by their StorageClass's
provisioner), and the node's VolumeAttachments.

What the pods on a node already use is kept per row in a table extension: the row's unique volumes
and a count per driver, recomputed only for rows whose pods changed or whose claims, PVs, classes,
CSINode or VolumeAttachments changed (told by the informers through a ``ChangeFeed``). Filter then
compares count arrays with the CSINode limits for the whole batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.api.volume import (
    PORTWORX,
    claim_class,
    csi_migration_on,
    csinode_limits,
    inline_plugin,
    meta,
    migratable_provisioner,
    migrated_plugins,
    name_of,
    not_found,
    pod_volumes,
    pv_plugin,
    spec,
    translate_pv,
    translation_error,
    volume_claim,
    volume_handle,
    volume_is_for_pod,
)
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._resource_allocation import pod_memo
from kubesched.scheduler.plugins.volumeutil.batch import ChangeFeed, CSINodeView, CSINodeViews, rows_mask
from kubesched.scheduler.plugins.volumeutil.claims import queue_if_claim_of_pod

PRE_FILTER_KEY = "PreFilter" + names.NodeVolumeLimits
EXTENSION_KEY = names.NodeVolumeLimits
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
WATCHED = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "VolumeAttachment")
#: Prefix of the handles of unbound claims (upstream: random per plugin instance). One value for
#: the process, since every profile's plugin shares a table's index.
VOLUME_ID_PREFIX = "kubesched-unbound"

#: Conditions under which a volume counts on a node (``isCSIMigrationOn``).
ALWAYS = "always"          # a CSI volume
CSINODE = "csinode"        # migrated in-tree plugin whose migration is complete: needs a CSINode


def _condition(plugin: str) -> str | None:
    """When an in-tree plugin's volumes count as CSI ones: with any CSINode, only when the CSINode
    lists the plugin (Portworx), or never (plugins whose migration the scheduler does not consider)."""
    if not csi_migration_on(plugin):
        return None
    return plugin if plugin == PORTWORX else CSINODE


def counts_on(condition: str, csinode: Mapping | None) -> bool:
    if condition == ALWAYS:
        return True
    if csinode is None:
        return False
    return condition == CSINODE or condition in migrated_plugins(csinode)


def may_count(pod: PodInfo) -> bool:
    """PreFilter's test: a PVC, a generic ephemeral volume or an inline migratable volume."""
    return pod_memo(pod, "_kvol_may_count", lambda: any(
        volume_claim(pod.name, v) is not None or inline_plugin(v) is not None for v in pod_volumes(pod)))


class ResolveError(Exception):
    def __init__(self, message: str, unresolvable: bool = False) -> None:
        super().__init__(message)
        self.unresolvable = unresolvable


@dataclass
class Resolved:
    """A pod's attachable volumes: unique name -> (driver, condition); the errors met where a
    condition applies (inline volumes whose ID cannot be translated), in volume order; and what
    the answer read."""

    volumes: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)
    claims: set[str] = field(default_factory=set)
    pvs: set[str] = field(default_factory=set)

    def first_error(self, csinode: Mapping | None) -> str | None:
        """The first error that applies to a node with this CSINode."""
        return next((message for condition, message in self.errors if counts_on(condition, csinode)), None)


class Resolver:
    """``filterAttachableVolumes`` against the current PVCs, PVs and StorageClasses."""

    def __init__(self, objects: Any) -> None:
        self.pvcs: Mapping[str, Mapping] = objects("PersistentVolumeClaim")
        self.pvs: Mapping[str, Mapping] = objects("PersistentVolume")
        self.classes: Mapping[str, Mapping] = objects("StorageClass")

    def resolve(self, pod: PodInfo, new_pod: bool, out: Resolved) -> Resolved:
        """Adds the pod's volumes to ``out``; raises ResolveError for an error on every node."""
        for vol in pod_volumes(pod):
            ref = volume_claim(pod.name, vol)
            if ref is not None:
                self._claim(pod, ref.claim, ref.ephemeral, new_pod, out)
            else:
                self._inline(vol, out)
        return out

    def _claim(self, pod: PodInfo, claim: str, ephemeral: bool, new_pod: bool, out: Resolved) -> None:
        if not claim:
            raise ResolveError("PersistentVolumeClaim had no name")
        key = f"{pod.namespace}/{claim}"
        out.claims.add(key)
        pvc = self.pvcs.get(key)
        if pvc is None:
            if new_pod:
                raise ResolveError(f"looking up PVC {key}: {not_found('persistentvolumeclaim', claim)}", unresolvable=True)
            return
        if ephemeral:
            problem = volume_is_for_pod(pod.namespace, pod.name, pod.uid, pvc)
            if problem is not None:
                raise ResolveError(problem)
        info = self._driver_info(pvc, out)
        if info is not None:
            driver, handle, condition = info
            out.volumes[f"{driver}/{handle}"] = (driver, condition)

    def _driver_info(self, pvc: Mapping, out: Resolved) -> tuple[str, str, str] | None:
        """``getCSIDriverInfo``: from the bound PV (translated when in-tree), else from the class."""
        pv_name = spec(pvc).get("volumeName") or ""
        pv = self.pvs.get(pv_name) if pv_name else None
        if pv_name:
            out.pvs.add(pv_name)
        if pv is None:
            return self._driver_info_from_class(pvc)
        csi = spec(pv).get("csi")
        if csi is not None:
            if not csi.get("driver") or not csi.get("volumeHandle"):
                return None
            return csi["driver"], csi["volumeHandle"], ALWAYS
        plugin = pv_plugin(pv)
        condition = None if plugin is None else _condition(plugin.name)
        translated = translate_pv(pv) if condition is not None else None
        if plugin is None or condition is None or translated is None:
            return None
        return plugin.driver, translated["spec"]["csi"]["volumeHandle"], condition

    def _driver_info_from_class(self, pvc: Mapping) -> tuple[str, str, str] | None:
        """``getCSIDriverInfoFromSC``: the provisioner and a handle unique to the claim."""
        sc = self.classes.get(claim_class(pvc)) if claim_class(pvc) else None
        if sc is None:
            return None
        handle = f"{VOLUME_ID_PREFIX}-{meta(pvc).get('namespace', '')}/{name_of(pvc)}"
        provisioner = sc.get("provisioner") or ""
        plugin = migratable_provisioner(provisioner)
        if plugin is None:
            return (provisioner, handle, ALWAYS) if provisioner else None
        condition = _condition(plugin.name)
        return None if condition is None else (plugin.driver, handle, condition)

    @staticmethod
    def _inline(vol: Mapping, out: Resolved) -> None:
        """``checkAttachableInlineVolume``: inline in-tree volumes count once migrated; translating
        one is an error only on the nodes where its migration is on."""
        plugin = inline_plugin(vol)
        if plugin is None:
            return
        condition = _condition(plugin.name)
        if condition is None:
            return
        handle = volume_handle(plugin, vol[plugin.source])
        if handle is None:
            out.errors.append((condition, f"converting volume({vol.get('name', '')}) from inline to csi: "
                                          f"{translation_error(vol[plugin.source])}"))
            return
        out.volumes[f"{plugin.driver}/{handle}"] = (plugin.driver, condition)


# --- per-row index ------------------------------------------------------------------------------------
@dataclass
class _Row:
    pod_volumes: dict[str, str] = field(default_factory=dict)   # unique -> driver, from the pods
    counts: dict[str, int] = field(default_factory=dict)         # driver -> attached (pods and attachments)
    error: str | None = None
    claims: set[str] = field(default_factory=set)
    pvs: set[str] = field(default_factory=set)


class _Index:
    """Table extension: per row, the volumes its pods (and VolumeAttachments) use."""

    def __init__(self, table: NodeTable, plugin: NodeVolumeLimits) -> None:
        self.table = table
        self.plugin = plugin
        self.pods: dict[int, dict[str, PodInfo]] = {}
        self.rows: dict[int, _Row] = {}
        self.dirty: set[int] = set()
        self.all_dirty = True
        self.synced = plugin.feed.seq if plugin.feed is not None else 0
        self.counts: dict[str, np.ndarray] = {}
        self.unique_rows: dict[str, set[int]] = {}
        self.claim_rows: dict[str, set[int]] = {}
        self.pv_rows: dict[str, set[int]] = {}
        self.error_rows: set[int] = set()

    # --- Extension protocol -------------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        for driver, arr in self.counts.items():
            if len(arr) < capacity:
                wider = np.zeros(capacity, dtype=np.int64)
                wider[: len(arr)] = arr
                self.counts[driver] = wider

    def node_set(self, row: int, info: NodeInfo) -> None:
        self.pods.setdefault(row, {})
        self.dirty.add(row)

    def node_removed(self, row: int, info: NodeInfo) -> None:
        self._drop(row)
        self.pods.pop(row, None)
        self.dirty.discard(row)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        if may_count(pod):
            self.pods.setdefault(row, {})[pod.uid] = pod
            self.dirty.add(row)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        if self.pods.get(row, {}).pop(pod.uid, None) is not None:
            self.dirty.add(row)

    def move_row(self, src: int, dst: int) -> None:
        self._drop(dst)
        result = self.rows.get(src)
        self._drop(src)
        self.pods[dst] = self.pods.pop(src, {})
        if src in self.dirty or result is None:
            self.dirty.discard(src)
            self.dirty.add(dst)
        else:
            self._store(dst, result)

    # --- refreshing ---------------------------------------------------------------------------------
    def sync(self, csinodes: Mapping[str, Mapping], view: CSINodeView) -> None:
        """Recompute every row whose inputs changed since the last call."""
        feed = self.plugin.feed
        changes = feed.since(self.synced) if feed is not None else None
        if changes is None:
            self.all_dirty = True
        else:
            for _, kind, old, new in changes:
                self._mark(kind, old, new)
        if feed is not None:
            self.synced = feed.seq
        rows = range(self.table.n) if self.all_dirty else sorted(r for r in self.dirty if r < self.table.n)
        self.all_dirty = False
        self.dirty.clear()
        if not rows:
            return
        resolver = self.plugin.resolver()
        attachments = self.plugin.attachments_by_node()
        for row in rows:
            self._drop(row)
            name = self.table.names[row]
            self._store(row, self._compute(row, resolver, csinodes.get(name), attachments.get(name, ())))

    def _mark(self, kind: str, old: Any, new: Any) -> None:
        if kind == "StorageClass":
            self.all_dirty = True
            return
        for obj in (old, new):
            if obj is None:
                continue
            if kind == "PersistentVolumeClaim":
                self.dirty |= self.claim_rows.get(f"{meta(obj).get('namespace', '')}/{name_of(obj)}", set())
            elif kind == "PersistentVolume":
                self.dirty |= self.pv_rows.get(name_of(obj), set())
                ref = spec(obj).get("claimRef") or {}
                self.dirty |= self.claim_rows.get(f"{ref.get('namespace', '')}/{ref.get('name', '')}", set())
            elif kind == "CSINode":
                row = self.table.row_of.get(name_of(obj))
                if row is not None:
                    self.dirty.add(row)
            elif kind == "VolumeAttachment":
                row = self.table.row_of.get(spec(obj).get("nodeName", ""))
                if row is not None:
                    self.dirty.add(row)

    def _compute(self, row: int, resolver: Resolver, csinode: Mapping | None, attachments: Any) -> _Row:
        result = _Row()
        resolved = Resolved()
        try:
            for pod in self.pods.get(row, {}).values():
                resolver.resolve(pod, False, resolved)
        except ResolveError as e:
            result.error = str(e)
        result.error = resolved.first_error(csinode) or result.error
        result.claims, result.pvs = resolved.claims, resolved.pvs
        for unique, (driver, condition) in resolved.volumes.items():
            if counts_on(condition, csinode):
                result.pod_volumes[unique] = driver
        attached = dict(result.pod_volumes)
        for unique, driver, pv_name in self.plugin.attachment_volumes(attachments, resolver):
            if pv_name:
                result.pvs.add(pv_name)
            attached.setdefault(unique, driver)
        for driver in attached.values():
            result.counts[driver] = result.counts.get(driver, 0) + 1
        return result

    def _store(self, row: int, result: _Row) -> None:
        self.rows[row] = result
        for unique in result.pod_volumes:
            self.unique_rows.setdefault(unique, set()).add(row)
        for key in result.claims:
            self.claim_rows.setdefault(key, set()).add(row)
        for name in result.pvs:
            self.pv_rows.setdefault(name, set()).add(row)
        for driver, count in result.counts.items():
            arr = self.counts.get(driver)
            if arr is None:
                arr = self.counts[driver] = np.zeros(self.table.capacity, dtype=np.int64)
            arr[row] = count
        if result.error is not None:
            self.error_rows.add(row)

    def _drop(self, row: int) -> None:
        result = self.rows.pop(row, None)
        if result is None:
            return
        for index, keys in ((self.unique_rows, result.pod_volumes), (self.claim_rows, result.claims), (self.pv_rows, result.pvs)):
            for key in keys:
                rows = index.get(key)
                if rows is not None:
                    rows.discard(row)
                    if not rows:
                        del index[key]
        for driver in result.counts:
            self.counts[driver][row] = 0
        self.error_rows.discard(row)


# --- the plugin ---------------------------------------------------------------------------------------
class _Keys:
    """Per node of a batch, the first failure found (checks run in upstream's order)."""

    def __init__(self, size: int) -> None:
        self.keys = np.zeros(size, dtype=np.int64)
        self.statuses: dict[int, Status] = {}

    def fail(self, where: np.ndarray, status: Status) -> None:
        where = where & (self.keys == 0)
        if where.any():
            key = len(self.statuses) + 1
            self.statuses[key] = status
            self.keys[where] = key

    def verdict(self) -> FilterVerdict | None:
        return FilterVerdict.from_keys(self.keys, self.statuses)


@dataclass
class _State:
    """The pod's attachable volumes and errors (``Resolved``), or the error that fails every node,
    computed once per cycle."""

    resolved: Resolved
    error: Status | None = None

    def clone(self) -> _State:
        return self


class NodeVolumeLimits(SignPlugin, PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions):
    name = names.NodeVolumeLimits

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.feed = ChangeFeed(handle, WATCHED) if handle is not None else None
        self._views = CSINodeViews(self.feed)
        self._exceeded = Status(Code.Unschedulable, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)

    def _objects(self, kind: str) -> Mapping[str, Mapping]:
        return self.handle.objects(kind) if self.handle is not None else {}

    def resolver(self) -> Resolver:
        return Resolver(self._objects)

    def attachments_by_node(self) -> dict[str, list[Mapping]]:
        out: dict[str, list[Mapping]] = {}
        for va in self._objects("VolumeAttachment").values():
            out.setdefault(spec(va).get("nodeName", ""), []).append(va)
        return out

    def attachment_volumes(self, attachments: Any, resolver: Resolver) -> list[tuple[str, str, str]]:
        """(unique name, driver, PV name) of VolumeAttachments, by their PV's or inline CSI handle."""
        out = []
        for va in attachments:
            driver = spec(va).get("attacher", "")
            source = spec(va).get("source") or {}
            pv_name = source.get("persistentVolumeName") or ""
            handle = ""
            if pv_name:
                pv = resolver.pvs.get(pv_name)
                if pv is not None:
                    csi = spec(pv).get("csi")
                    if csi is None:
                        translated = translate_pv(pv)
                        csi = translated["spec"]["csi"] if translated is not None else None
                    handle = (csi or {}).get("volumeHandle", "")
            else:
                handle = ((source.get("inlineVolumeSpec") or {}).get("csi") or {}).get("volumeHandle", "")
            if driver and handle:
                out.append((f"{driver}/{handle}", driver, pv_name))
        return out

    # --- PreFilter ----------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.volumes(pod)]

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        fragment = signers.claimless_volumes(pod)
        return fragment if isinstance(fragment, Status) else [fragment]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not may_count(pod):
            return None, Status(Code.Skip)
        state.write(PRE_FILTER_KEY, self._resolve_now(pod))
        return None, None

    # --- Filter ---------------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        if not pod_volumes(pod):
            return None
        s: _State | None = state.get(PRE_FILTER_KEY)
        if s is None:
            s = self._resolve_now(pod)
        resolved = s.resolved
        if not resolved.volumes and not resolved.errors and s.error is None:
            return None
        csinodes = self._objects("CSINode")
        view = self._views.view(nodes.table, csinodes)
        keys = _Keys(len(nodes))
        for condition, message in resolved.errors:
            keys.fail(self._applies(nodes, view, condition), Status.from_error(RuntimeError(message)))
        if s.error is not None:
            keys.fail(np.ones(len(nodes), dtype=bool), s.error)
        if resolved.volumes and view.limits:
            self._check_limits(nodes, view, csinodes, resolved, keys)
        return keys.verdict()

    def _check_limits(self, nodes: NodeBatch, view: CSINodeView, csinodes: Mapping[str, Mapping], resolved: Resolved,
                      keys: _Keys) -> None:
        """On nodes with a limit for a driver of the pod's volumes: an error resolving the pods
        already there (where any of the pod's volumes counts), else whether the new volumes fit."""
        index: _Index = nodes.table.extension(EXTENSION_KEY, lambda t: _Index(t, self))
        index.sync(csinodes, view)
        failed = np.zeros(len(nodes), dtype=bool)
        applies_any = np.zeros(len(nodes), dtype=bool)
        new_by_driver: dict[str, np.ndarray] = {}
        for unique, (driver, condition) in resolved.volumes.items():
            applies = self._applies(nodes, view, condition)
            applies_any |= applies
            if driver in view.limits:
                new = new_by_driver.setdefault(driver, np.zeros(len(nodes), dtype=np.int64))
                new += applies & ~rows_mask(nodes, index.unique_rows.get(unique, set()))
        for driver, new in new_by_driver.items():
            limit = view.limit(nodes, driver)
            counts = index.counts.get(driver)
            attached = nodes.col(counts) if counts is not None else 0
            failed |= (limit >= 0) & (new > 0) & (attached + new > limit)
        errors = applies_any & nodes.col(view.any_limit) & rows_mask(nodes, index.error_rows)
        rows = nodes.row_ids()
        for position in np.flatnonzero(errors):
            single = np.zeros(len(nodes), dtype=bool)
            single[position] = True
            keys.fail(single, Status.from_error(RuntimeError(index.rows[int(rows[position])].error or "")))
        keys.fail(failed, self._exceeded)

    def _resolve_now(self, pod: PodInfo) -> _State:
        resolved = Resolved()
        try:
            self.resolver().resolve(pod, True, resolved)
        except ResolveError as e:
            code = Code.UnschedulableAndUnresolvable
            return _State(resolved, Status(code, str(e)) if e.unresolvable else Status.from_error(RuntimeError(str(e))))
        return _State(resolved)

    @staticmethod
    def _applies(nodes: NodeBatch, view: CSINodeView, condition: str) -> np.ndarray:
        if condition == ALWAYS:
            return np.ones(len(nodes), dtype=bool)
        if condition == CSINODE:
            return nodes.col(view.present)
        return view.migrated_mask(nodes, condition)

    # --- requeueing -----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.CSINode, ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(Resource.CSINode, ActionType.Update), self.is_schedulable_after_csinode_updated),
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete), self.is_schedulable_after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.PersistentVolumeClaim, ActionType.Add), self.is_schedulable_after_pvc_added),
            ClusterEventWithHint(ClusterEvent(Resource.VolumeAttachment, ActionType.Delete),
                                 self.is_schedulable_after_volume_attachment_deleted),
        ]

    @staticmethod
    def is_schedulable_after_pod_deleted(pod: dict, old: Any, new: Any) -> QueueingHint:
        deleted = old or {}
        volumes = spec(deleted).get("volumes") or []
        if not volumes or not spec(deleted).get("nodeName"):
            return QueueingHint.QueueSkip
        for vol in volumes:
            if vol.get("persistentVolumeClaim") is not None or vol.get("ephemeral") is not None or inline_plugin(vol) is not None:
                return QueueingHint.Queue
        return QueueingHint.QueueSkip

    is_schedulable_after_pvc_added = staticmethod(queue_if_claim_of_pod)

    @staticmethod
    def is_schedulable_after_volume_attachment_deleted(pod: dict, old: Any, new: Any) -> QueueingHint:
        """A detach frees a slot of the attacher's driver: queue a pod with any ``persistentVolumeClaim``
        volume (its driver is not worth resolving here), or with an inline migratable volume whose CSI
        driver is the attacher (whatever the attachment's source: upstream compares the attacher)."""
        volumes = spec(pod).get("volumes") or []
        if any(vol.get("persistentVolumeClaim") is not None for vol in volumes):
            return QueueingHint.Queue
        driver = spec(old or {}).get("attacher")
        for vol in volumes:
            plugin = inline_plugin(vol)
            if plugin is None:
                continue
            if volume_handle(plugin, vol[plugin.source]) is None:
                return QueueingHint.Queue  # upstream: a translation error queues the pod
            if driver and plugin.driver == driver:
                return QueueingHint.Queue
        return QueueingHint.QueueSkip

    @staticmethod
    def is_schedulable_after_csinode_updated(pod: dict, old: Any, new: Any) -> QueueingHint:
        """Queue when some driver's attach limit went up (or went away)."""
        before, after = csinode_limits(old or {}), csinode_limits(new or {})
        for driver, count in before.items():
            if driver not in after or after[driver] > count:
                return QueueingHint.Queue
        return QueueingHint.QueueSkip

