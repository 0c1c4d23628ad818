"""VolumeZone: the zone / region labels of the PVs a pod's claims are bound to must match the
node's (upstream ``volumezone``).

PreFilter resolves the pod's bound PVs once into (key, allowed values) pairs; Filter compares them
with the node label columns, one numpy comparison per pair. Nodes without any topology label pass
(single-zone clusters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.types import PodInfo
from kubesched.api.volume import (
    LABEL_REGION,
    LABEL_REGION_BETA,
    LABEL_ZONE,
    LABEL_ZONE_BETA,
    WAIT_FOR_FIRST_CONSUMER,
    binding_mode,
    claim_class,
    label_zones_to_set,
    meta,
    not_found,
    pod_volumes,
    spec,
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
from kubesched.scheduler.plugins.volumeutil.claims import pvc_volume_claims, queue_if_pvc_volume_of_pod

PRE_FILTER_KEY = "PreFilter" + names.VolumeZone
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

TOPOLOGY_LABELS = (LABEL_ZONE_BETA, LABEL_REGION_BETA, LABEL_ZONE, LABEL_REGION)
_GA = {LABEL_REGION_BETA: LABEL_REGION, LABEL_ZONE_BETA: LABEL_ZONE}


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv: Mapping) -> list[PVTopology]:
    """``getPVTopologies``: one entry per topology label of the PV; unparsable values are ignored."""
    labels = meta(pv).get("labels") or {}
    out = []
    for key in TOPOLOGY_LABELS:
        if key in labels:
            values = label_zones_to_set(labels[key])
            if values is not None:
                out.append(PVTopology(meta(pv).get("name", ""), key, values))
    return out


class VolumeZone(SignPlugin, PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions):
    name = names.VolumeZone

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._conflict = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_CONFLICT)

    def _objects(self, kind: str) -> Mapping[str, Mapping]:
        return self.handle.objects(kind) if self.handle is not None else {}

    # --- PreFilter ----------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.volumes(pod)]

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        fragment = signers.claimless_volumes(pod)
        return fragment if isinstance(fragment, Status) else [fragment]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        topologies, status = self.topologies_of(pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, Status(Code.Skip)
        state.write(PRE_FILTER_KEY, tuple(topologies))
        return None, None

    def topologies_of(self, pod: PodInfo) -> tuple[list[PVTopology], Status | None]:
        """``getPVbyPod``: the topologies of the PVs bound to the pod's claims; unbound
        WaitForFirstConsumer claims are skipped, any other missing piece is unresolvable."""
        names_ = pvc_volume_claims(pod)
        if not names_:
            return [], None
        pvcs, pvs, classes = self._objects("PersistentVolumeClaim"), self._objects("PersistentVolume"), self._objects("StorageClass")
        out: list[PVTopology] = []
        for claim in names_:
            if not claim:
                return [], _unresolvable("PersistentVolumeClaim had no name")
            pvc = pvcs.get(f"{pod.namespace}/{claim}")
            if pvc is None:
                return [], _unresolvable(not_found("persistentvolumeclaim", claim))
            pv_name = spec(pvc).get("volumeName") or ""
            if not pv_name:
                sc_name = claim_class(pvc)
                if not sc_name:
                    return [], _unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
                sc = classes.get(sc_name)
                if sc is None:
                    return [], _unresolvable(not_found("storageclass.storage.k8s.io", sc_name))
                mode = binding_mode(sc)
                if mode is None:
                    return [], _unresolvable(f'VolumeBindingMode not set for StorageClass "{sc_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return [], _unresolvable("PersistentVolume had no name")
            pv = pvs.get(pv_name)
            if pv is None:
                return [], _unresolvable(not_found("persistentvolume", pv_name))
            out.extend(pv_topologies(pv))
        return out, None

    # --- Filter ---------------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        if not pod_volumes(pod):
            return None
        topologies = state.get(PRE_FILTER_KEY)
        if topologies is None:
            computed, status = self.topologies_of(pod)
            if status is not None:
                return FilterVerdict.all_fail(len(nodes), status)
            topologies = tuple(computed)
        if not topologies:
            return None
        constrained = np.zeros(len(nodes), dtype=bool)
        for key in TOPOLOGY_LABELS:
            constrained |= nodes.labels(key) >= 0
        if not constrained.any():
            return None
        matches = np.ones(len(nodes), dtype=bool)
        for topology in topologies:
            matches &= self._matches(nodes, topology)
        return FilterVerdict.fail_where(constrained & ~matches, self._conflict)

    @staticmethod
    def _matches(nodes: NodeBatch, topology: PVTopology) -> np.ndarray:
        """The node's value of the key (or of its GA form when the node lacks the key) is allowed."""
        codes = nodes.labels(topology.key)
        ok = _codes_allowed(nodes, topology.key, codes, topology.values)
        ga = _GA.get(topology.key)
        if ga is None:
            return ok
        ga_codes = nodes.labels(ga)
        return np.where(codes >= 0, ok, _codes_allowed(nodes, ga, ga_codes, topology.values))

    # --- requeueing -----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.StorageClass, ActionType.Add), self.is_schedulable_after_storage_class_added),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel)),
            ClusterEventWithHint(ClusterEvent(Resource.PersistentVolumeClaim, ActionType.Add | ActionType.Update),
                                 self.is_schedulable_after_pvc_change),
            ClusterEventWithHint(ClusterEvent(Resource.PersistentVolume, ActionType.Add | ActionType.Update),
                                 self.is_schedulable_after_pv_change),
        ]

    is_schedulable_after_pvc_change = staticmethod(queue_if_pvc_volume_of_pod)

    @staticmethod
    def is_schedulable_after_storage_class_added(pod: dict, old: Any, new: Any) -> QueueingHint:
        if binding_mode(new or {}) != WAIT_FOR_FIRST_CONSUMER:
            return QueueingHint.QueueSkip
        return QueueingHint.Queue

    @staticmethod
    def is_schedulable_after_pv_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        if old is None:
            return QueueingHint.Queue
        if pv_topologies(old) != pv_topologies(new or {}):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip


def _unresolvable(message: str) -> Status:
    return Status(Code.UnschedulableAndUnresolvable, message)


def _codes_allowed(nodes: NodeBatch, key: str, codes: np.ndarray, values: frozenset[str]) -> np.ndarray:
    column = nodes.table.label_column(key)
    if column is None:
        return np.zeros(len(codes), dtype=bool)
    wanted = [column.vocab[v] for v in values if v in column.vocab]
    if not wanted:
        return np.zeros(len(codes), dtype=bool)
    return np.isin(codes, wanted)
