"""Cluster events and queueing hints: how a change in the cluster brings unschedulable pods back.

A plugin registers the events that could make a pod it rejected schedulable, each with an optional
queueing hint that looks at the change and says Queue or QueueSkip (upstream ``fwk.ClusterEvent``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import saturate
from kubesched.api.resources import content_key, pod_requests, status_sizes


class ActionType(IntFlag):
    Add = 1 << 0
    Delete = 1 << 1
    UpdateNodeAllocatable = 1 << 2
    UpdateNodeLabel = 1 << 3
    UpdateNodeTaint = 1 << 4
    UpdateNodeCondition = 1 << 5
    UpdateNodeAnnotation = 1 << 6
    UpdateNodeDeclaredFeature = 1 << 7
    UpdatePodLabel = 1 << 8
    UpdatePodScaleDown = 1 << 9
    UpdatePodToleration = 1 << 10
    UpdatePodSchedulingGatesEliminated = 1 << 11
    UpdatePodGeneratedResourceClaim = 1 << 12
    All = (1 << 13) - 1
    Update = All & ~(Add | Delete)


def action_label(action: ActionType) -> str:
    if action == ActionType.All:
        return "All"
    if action == ActionType.Update:
        return "Update"
    return action.name or str(int(action))


class Resource:
    """EventResource names, as upstream spells them (they appear in metric labels)."""

    Pod = "Pod"
    AssignedPod = "AssignedPod"
    UnschedulablePod = "UnschedulablePod"
    Node = "Node"
    PersistentVolume = "PersistentVolume"
    PersistentVolumeClaim = "PersistentVolumeClaim"
    CSINode = "storage.k8s.io/CSINode"
    CSIDriver = "storage.k8s.io/CSIDriver"
    VolumeAttachment = "storage.k8s.io/VolumeAttachment"
    CSIStorageCapacity = "storage.k8s.io/CSIStorageCapacity"
    StorageClass = "storage.k8s.io/StorageClass"
    ResourceClaim = "resource.k8s.io/ResourceClaim"
    ResourceSlice = "resource.k8s.io/ResourceSlice"
    DeviceClass = "resource.k8s.io/DeviceClass"
    Workload = "scheduling.k8s.io/Workload"
    WildCard = "*"

    @staticmethod
    def custom(group: str, version: str, plural: str) -> str:
        """A custom resource's EventResource, upstream's GVK form ``<plural>.<version>.<group>``
        (``podgroups.v1alpha1.scheduling.x-k8s.io``): the scheduler informs on it when a plugin
        registers an event for it."""
        return f"{plural}.{version}.{group}"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """An event: a resource and what happened to it. Its hash and label are worked out once: the
    queue looks events up for every pod it may requeue, and labels every in-flight event."""

    resource: str
    action: ActionType
    custom_label: str = ""
    #: ``ClusterEvent.Label()``, used in logs and the queue_incoming_pods_total metric.
    label: str = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", self.custom_label or f"{self.resource}{action_label(self.action)}")
        object.__setattr__(self, "_hash", hash((self.resource, int(self.action), self.custom_label)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[ClusterEvent], tuple[str, ActionType, str]]:
        # Made again where it is loaded: a string's hash differs from one process to the next.
        return ClusterEvent, (self.resource, self.action, self.custom_label)

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether a registered event (self) covers an incoming one (upstream ``ClusterEvent.Match``)."""
        if self.resource == Resource.WildCard:
            return bool(self.action & incoming.action)
        if self.resource == Resource.Pod:
            if incoming.resource not in (Resource.Pod, Resource.AssignedPod, Resource.UnschedulablePod):
                return False
        elif self.resource != incoming.resource:
            return False
        return bool(self.action & incoming.action)

    def is_wildcard(self) -> bool:
        return self.resource == Resource.WildCard and self.action == ActionType.All


class QueueingHint(IntEnum):
    QueueSkip = 0
    Queue = 1


QueueingHintFn = Callable[[dict[str, Any], Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


# Special events of the queue itself.
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"

EVENT_ASSIGNED_POD_ADD = ClusterEvent(Resource.AssignedPod, ActionType.Add)
EVENT_ASSIGNED_POD_UPDATE = ClusterEvent(Resource.AssignedPod, ActionType.Update)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(Resource.AssignedPod, ActionType.Delete)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(Resource.UnschedulablePod, ActionType.Add)
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(Resource.UnschedulablePod, ActionType.Update)
EVENT_UNSCHEDULED_POD_DELETE = ClusterEvent(Resource.UnschedulablePod, ActionType.Delete)
EVENT_NODE_ADD = ClusterEvent(Resource.Node, ActionType.Add)
EVENT_NODE_DELETE = ClusterEvent(Resource.Node, ActionType.Delete)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(Resource.WildCard, ActionType.All, UNSCHEDULABLE_TIMEOUT)
EVENT_FORCE_ACTIVATE = ClusterEvent(Resource.WildCard, ActionType.All, FORCE_ACTIVATE)


def unroll_wildcard() -> list[ClusterEvent]:
    """Every resource with action All: what a plugin without EnqueueExtensions is interested in
    (upstream ``UnrollWildCardResource``)."""
    resources = (Resource.Pod, Resource.Node, Resource.PersistentVolume, Resource.PersistentVolumeClaim,
                 Resource.CSINode, Resource.CSIDriver, Resource.CSIStorageCapacity, Resource.StorageClass,
                 Resource.VolumeAttachment, Resource.ResourceClaim, Resource.DeviceClass, Resource.ResourceSlice)
    return [ClusterEvent(r, ActionType.All) for r in resources]


def _meta(obj: Mapping[str, Any], field: str) -> Any:
    return (obj.get("metadata") or {}).get(field) or {}


def pod_scheduling_properties_change(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[ClusterEvent]:
    """``PodSchedulingPropertiesChange``: the specific UpdatePodXYZ events a pod update raises."""
    resource = Resource.AssignedPod if (new.get("spec") or {}).get("nodeName") else Resource.UnschedulablePod
    actions = []
    if _meta(new, "labels") != _meta(old, "labels"):
        actions.append(ActionType.UpdatePodLabel)
    if _scaled_down(new, old):
        actions.append(ActionType.UpdatePodScaleDown)
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if not new_spec.get("schedulingGates") and old_spec.get("schedulingGates"):
        actions.append(ActionType.UpdatePodSchedulingGatesEliminated)
    if len(new_spec.get("tolerations") or []) != len(old_spec.get("tolerations") or []):
        actions.append(ActionType.UpdatePodToleration)
    new_claims = (new.get("status") or {}).get("resourceClaimStatuses")
    if new_claims != (old.get("status") or {}).get("resourceClaimStatuses"):
        actions.append(ActionType.UpdatePodGeneratedResourceClaim)
    if not actions:
        actions.append(ActionType.Update)
    return [ClusterEvent(resource, a) for a in actions]


def _scaled_down(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether some request went down. Requests are a function of ``content_key`` alone, so equal
    keys (a kubelet's status write adds container statuses but no resources) cannot scale down."""
    if (new.get("spec") or {}).get("containers") == (old.get("spec") or {}).get("containers") and \
            (new.get("spec") or {}).get("initContainers") == (old.get("spec") or {}).get("initContainers") and \
            (new.get("status") or {}).get("containerStatuses") == (old.get("status") or {}).get("containerStatuses"):
        return False
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if new_spec is old_spec and not status_sizes(new.get("status") or {}) and not status_sizes(old.get("status") or {}):
        return False  # equal keys without building them: the same spec, and statuses that size nothing
    new_key = content_key(new)
    if new_key is not None and new_key == content_key(old):
        return False
    new_req = pod_requests(new)
    for name, old_amount in pod_requests(old).items():
        if name not in new_req:
            return True
        if _milli_value(old_amount) > _milli_value(new_req[name]):
            return True
    return False


def _milli_value(amount: Fraction) -> int:
    """``Quantity.MilliValue()``, which upstream compares for every resource (not just cpu)."""
    return saturate(math.ceil(amount * 1000))


def node_scheduling_properties_change(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[ClusterEvent]:
    """``NodeSchedulingPropertiesChange``: the UpdateNodeXYZ events a node update raises."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    new_status, old_status = new.get("status") or {}, old.get("status") or {}
    actions = []
    if bool(new_spec.get("unschedulable")) != bool(old_spec.get("unschedulable")) and not new_spec.get("unschedulable"):
        actions.append(ActionType.UpdateNodeTaint)
    if new_status.get("allocatable") != old_status.get("allocatable"):
        actions.append(ActionType.UpdateNodeAllocatable)
    if _meta(new, "labels") != _meta(old, "labels"):
        actions.append(ActionType.UpdateNodeLabel)
    if (new_spec.get("taints") or []) != (old_spec.get("taints") or []):
        actions.append(ActionType.UpdateNodeTaint)
    if _conditions(new_status) != _conditions(old_status):
        actions.append(ActionType.UpdateNodeCondition)
    if _meta(new, "annotations") != _meta(old, "annotations"):
        actions.append(ActionType.UpdateNodeAnnotation)
    return [ClusterEvent(Resource.Node, a) for a in actions]


def _conditions(status: Mapping[str, Any]) -> dict[str, str]:
    return {c.get("type"): c.get("status") for c in status.get("conditions") or []}
