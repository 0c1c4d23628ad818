"""VolumeRestrictions: a pod may not share certain disks with pods already on a node, and may not
use a ReadWriteOncePod claim that another scheduled pod uses (upstream ``volumerestrictions``).

* Disk conflicts (GCE PD, AWS EBS, Ceph RBD, iSCSI inline volumes) are node-local: a table
  extension indexes, per disk identity, the rows whose pods mount it and how (read-only or not),
  so Filter finds the conflicting rows with a few dictionary lookups.
* ReadWriteOncePod is cluster-wide: PreFilter counts how many of the pod's RWOP claims are used by
  any scheduled pod (another extension keeps claim reference counts), AddPod/RemovePod adjust the
  count for preemption, and Filter rejects every node while the count is positive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.api.volume import READ_WRITE_ONCE_POD, has_access_mode, not_found, pod_volumes, raw_pod_claims
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterExtensions,
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
from kubesched.scheduler.plugins.volumeutil.batch import rows_mask
from kubesched.scheduler.plugins.volumeutil.claims import pvc_volume_claims, queue_if_pvc_volume_of_pod

PRE_FILTER_KEY = "PreFilter" + names.VolumeRestrictions
EXTENSION_KEY = names.VolumeRestrictions
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

GCE, EBS, ISCSI, RBD = "gce", "ebs", "iscsi", "rbd"


@dataclass(frozen=True, slots=True)
class Disk:
    """One restricted inline disk of a pod: its kind, identity, access and (RBD) Ceph monitors."""

    kind: str
    key: Any
    read_only: bool
    monitors: frozenset[str] = frozenset()

    def conflicts_with(self, other: Disk) -> bool:
        """``isVolumeConflict`` for two disks of the same kind and identity."""
        if self.kind == EBS:
            return True
        if self.kind == RBD and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)


def _disk_of(volume: Mapping) -> Disk | None:
    gce = volume.get("gcePersistentDisk")
    if gce is not None:
        return Disk(GCE, gce.get("pdName", ""), bool(gce.get("readOnly")))
    ebs = volume.get("awsElasticBlockStore")
    if ebs is not None:
        return Disk(EBS, ebs.get("volumeID", ""), bool(ebs.get("readOnly")))
    iscsi = volume.get("iscsi")
    if iscsi is not None:
        return Disk(ISCSI, iscsi.get("iqn", ""), bool(iscsi.get("readOnly")))
    rbd = volume.get("rbd")
    if rbd is not None:
        key = (rbd.get("pool") or "rbd", rbd.get("image", ""))
        return Disk(RBD, key, bool(rbd.get("readOnly")), frozenset(rbd.get("monitors") or []))
    return None


def pod_disks(pod: PodInfo) -> tuple[Disk, ...]:
    """The pod's GCE PD / AWS EBS / iSCSI / RBD inline volumes (``needsRestrictionsCheck``)."""
    return pod_memo(pod, "_kvol_disks", lambda: tuple(d for d in map(_disk_of, pod_volumes(pod)) if d is not None))


def _raw_disks(pod: Mapping) -> list[Disk]:
    return [d for d in map(_disk_of, (pod.get("spec") or {}).get("volumes") or []) if d is not None]


def conflicting(disks: tuple[Disk, ...] | list[Disk], existing: list[Disk]) -> bool:
    """``satisfyVolumeConflicts`` negated: some disk of the pod conflicts with an existing one."""
    return any(d.kind == e.kind and d.key == e.key and d.conflicts_with(e) for d in disks for e in existing)


class _Index:
    """Table extension: how many pods use each claim through a ``persistentVolumeClaim`` volume
    (upstream's snapshot ``usedPVCSet``) and which restricted disks sit on which rows."""

    def __init__(self, table: NodeTable) -> None:
        self.claim_users: Counter[str] = Counter()
        self.disks: dict[tuple[str, Any], dict[int, list[Disk]]] = {}
        self._rows: dict[int, dict[str, tuple[tuple[str, ...], tuple[Disk, ...]]]] = {}

    def grow(self, capacity: int) -> None:
        return None

    def node_set(self, row: int, info: NodeInfo) -> None:
        self._rows.setdefault(row, {})

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for claims, disks in self._rows.pop(row, {}).values():
            self._account(row, claims, disks, -1)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        claims = tuple(f"{pod.namespace}/{c}" for c in pvc_volume_claims(pod))
        disks = pod_disks(pod)
        if not claims and not disks:
            return
        pods = self._rows.setdefault(row, {})
        if pod.uid in pods:
            self._account(row, *pods.pop(pod.uid), -1)
        pods[pod.uid] = (claims, disks)
        self._account(row, claims, disks, 1)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        entry = self._rows.get(row, {}).pop(pod.uid, None)
        if entry is not None:
            self._account(row, *entry, -1)

    def move_row(self, src: int, dst: int) -> None:
        pods = self._rows.pop(src, {})
        self._rows[dst] = pods
        for _, disks in pods.values():
            for d in disks:
                by_row = self.disks[(d.kind, d.key)]
                moved = by_row.pop(src, None)
                if moved is not None:
                    by_row[dst] = moved

    def _account(self, row: int, claims: tuple[str, ...], disks: tuple[Disk, ...], sign: int) -> None:
        for key in claims:
            self.claim_users[key] += sign
            if self.claim_users[key] <= 0:
                del self.claim_users[key]
        for d in disks:
            by_row = self.disks.setdefault((d.kind, d.key), {})
            if sign > 0:
                by_row.setdefault(row, []).append(d)
                continue
            on_row = by_row.get(row, [])
            if d in on_row:
                on_row.remove(d)
            if not on_row:
                by_row.pop(row, None)
            if not by_row:
                del self.disks[(d.kind, d.key)]

    def conflicting_rows(self, disks: tuple[Disk, ...]) -> set[int]:
        rows: set[int] = set()
        for d in disks:
            for row, existing in self.disks.get((d.kind, d.key), {}).items():
                if any(d.conflicts_with(e) for e in existing):
                    rows.add(row)
        return rows


class _State:
    """PreFilter state: the pod's ReadWriteOncePod claim names and how many scheduled pods use them."""

    __slots__ = ("conflicts", "rwop_claims")

    def __init__(self, rwop_claims: frozenset[str], conflicts: int) -> None:
        self.rwop_claims = rwop_claims
        self.conflicts = conflicts

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicts)

    def update_with_pod(self, pod: PodInfo, sign: int) -> None:
        self.conflicts += sign * sum(1 for name in pvc_volume_claims(pod) if name in self.rwop_claims)


class _Extensions(PreFilterExtensions):
    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        return _update(state, pod_to_add, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        return _update(state, pod_to_remove, -1)


def _update(state: CycleState, pod: PodInfo, sign: int) -> Status | None:
    s = state.get(PRE_FILTER_KEY)
    if s is None:
        return Status.from_error(RuntimeError(f'cannot read "{PRE_FILTER_KEY}" from cycleState'))
    s.update_with_pod(pod, sign)
    return None


class VolumeRestrictions(SignPlugin, PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions):
    name = names.VolumeRestrictions

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._extensions = _Extensions()
        self._disk_status = Status(Code.Unschedulable, ERR_REASON_DISK_CONFLICT)
        self._rwop_status = Status(Code.Unschedulable, ERR_REASON_RWOP_CONFLICT)

    def _index(self, table: NodeTable) -> _Index:
        return table.extension(EXTENSION_KEY, _Index)

    # --- PreFilter ----------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.volumes(pod)]

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        fragment = signers.claimless_volumes(pod)
        return fragment if isinstance(fragment, Status) else [fragment]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        needs_check = bool(pod_disks(pod))
        claims = pvc_volume_claims(pod)
        if not claims and not needs_check:
            return None, Status(Code.Skip)
        rwop: set[str] = set()
        pvcs = self.handle.objects("PersistentVolumeClaim") if self.handle is not None else {}
        for claim in claims:
            pvc = pvcs.get(f"{pod.namespace}/{claim}")
            if pvc is None:
                return None, Status(Code.UnschedulableAndUnresolvable, not_found("persistentvolumeclaim", claim))
            if has_access_mode(pvc, READ_WRITE_ONCE_POD):
                rwop.add(claim)
        conflicts = 0
        if rwop:
            users = self._index(nodes.table).claim_users
            conflicts = sum(1 for claim in rwop if users.get(f"{pod.namespace}/{claim}", 0) > 0)
        if not needs_check and conflicts == 0:
            return None, Status(Code.Skip)
        state.write(PRE_FILTER_KEY, _State(frozenset(rwop), conflicts))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self._extensions

    # --- Filter ---------------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        disks = pod_disks(pod)
        keys = np.zeros(len(nodes), dtype=np.int64)
        if disks:
            keys[rows_mask(nodes, self._index(nodes.table).conflicting_rows(disks))] = 1
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            error = Status.from_error(RuntimeError(f'cannot read "{PRE_FILTER_KEY}" from cycleState'))
            keys[keys == 0] = 2
            return FilterVerdict.from_keys(keys, {1: self._disk_status, 2: error})
        if s.conflicts > 0:
            keys[keys == 0] = 2
        return FilterVerdict.from_keys(keys, {1: self._disk_status, 2: self._rwop_status})

    # --- requeueing -----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete), self.is_schedulable_after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(Resource.PersistentVolumeClaim, ActionType.Add),
                                 self.is_schedulable_after_pvc_added),
        ]

    is_schedulable_after_pvc_added = staticmethod(queue_if_pvc_volume_of_pod)

    @staticmethod
    def is_schedulable_after_pod_deleted(pod: dict, old: Any, new: Any) -> QueueingHint:
        deleted = old or {}
        if ((deleted.get("metadata") or {}).get("namespace") or "default") != ((pod.get("metadata") or {}).get("namespace") or "default"):
            return QueueingHint.QueueSkip
        if conflicting(_raw_disks(pod), _raw_disks(deleted)):
            return QueueingHint.Queue
        claims = {ref.claim for ref in raw_pod_claims(pod) if not ref.ephemeral}
        if any(not ref.ephemeral and ref.claim in claims for ref in raw_pod_claims(deleted)):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip
