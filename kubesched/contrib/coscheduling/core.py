"""The PodGroup manager: what Coscheduling knows about groups between scheduling cycles
(scheduler-plugins ``pkg/coscheduling/core``).

It answers PreFilter (is the whole group there, was it refused recently, could the cluster hold
its ``minResources`` at all), Permit (have ``minMember`` of the group been assumed or bound) and
keeps two short-lived sets keyed by group: groups that passed the resource check (so siblings do
not redo it, for the permit waiting time) and groups backed off after a failure. Both expire on
the scheduler's clock, so simulations on virtual time behave as a cluster would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import format_quantity
from kubesched.api.resources import CPU, PODS, to_int
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.contrib.coscheduling.index import GroupPods, assigned_pods
from kubesched.contrib.coscheduling.pod_group import (
    GROUP,
    PLURAL,
    VERSION,
    InvalidPodGroup,
    PodGroup,
    pod_group_full_name,
    pod_group_label,
)
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.utils.clock import Clock


class PermitOutcome(Enum):
    """What the manager says at Permit (upstream ``core.Status``)."""

    POD_GROUP_NOT_SPECIFIED = "PodGroup not specified"
    POD_GROUP_NOT_FOUND = "PodGroup not found"
    SUCCESS = "Success"
    WAIT = "Wait"
    #: Wait, and the pod is the first of its group to be assigned: it activates its siblings.
    FIRST_WAIT = "Wait (first of the group)"


class PreFilterRefusal(Exception):
    """Why a pod's group cannot be scheduled now; the message is what the pod's status shows."""


class ExpiringSet:
    """Keys that expire after their own time to live, on ``clock.now()`` (upstream's go-cache
    entries)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}

    def add(self, key: str, ttl: float) -> None:
        self._until[key] = self._clock.now() + ttl

    def __contains__(self, key: object) -> bool:
        until = self._until.get(str(key))
        if until is None:
            return False
        if self._clock.now() >= until:
            del self._until[str(key)]
            return False
        return True

    def discard(self, key: str) -> None:
        self._until.pop(key, None)


class PodGroupManager:
    """Reads PodGroups through the handle's custom-object lister, pods through its informer and
    assigned pods through the cycle's snapshot."""

    def __init__(self, handle: Any, schedule_timeout: float) -> None:
        self.handle = handle
        self.schedule_timeout = schedule_timeout
        self.permitted = ExpiringSet(handle.clock)
        self.backed_off = ExpiringSet(handle.clock)
        #: PodGroups, through an informer the scheduler starts with its others.
        self.pod_groups = handle.custom_objects(GROUP, VERSION, PLURAL)
        #: The informer's pods by group.
        self.group_pods = GroupPods.subscribed(handle)

    # --- lookups -----------------------------------------------------------------------------------
    def pod_group(self, pod: Mapping[str, Any]) -> tuple[str, PodGroup | None]:
        """The pod's group full name and PodGroup (None when the pod names none, or it does not
        exist); InvalidPodGroup when it exists but cannot be used."""
        name = pod_group_label(pod)
        if not name:
            return "", None
        full_name = pod_group_full_name(pod)
        namespace = full_name.split("/", 1)[0]
        raw = self.pod_groups.get(namespace, name)
        return full_name, None if raw is None else PodGroup.parse(raw)

    def siblings(self, namespace: str, group: str) -> list[dict[str, Any]]:
        """Every pod of the group known to the scheduler's informer, scheduled or not, except
        those that finished (upstream lists them through the pod lister)."""
        return self.group_pods.pods(namespace, group)

    def assigned_count(self, group: str, namespace: str, besides: str = "") -> int:
        """Pods of the group that are assumed or bound: those on a node of the snapshot
        (upstream ``CalculateAssignedPods``), the pod with uid ``besides`` left out."""
        return assigned_pods(self.handle.snapshot).count(f"{namespace}/{group}", besides)

    def creation_time(self, pod: PodInfo, queued_at: float) -> float:
        """The wall time a pod sorts by: its PodGroup's creation, or (without one) the time the
        pod first entered the queue (``queued_at``, on the scheduler's monotonic clock)."""
        try:
            _, group = self.pod_group(pod.pod)
        except InvalidPodGroup:
            group = None
        if group is not None:
            return group.created
        clock = self.handle.clock
        return clock.wall() - (clock.now() - queued_at)

    # --- PreFilter ---------------------------------------------------------------------------------
    def pre_filter(self, pod: PodInfo) -> None:
        """Raise PreFilterRefusal when the pod's group was refused recently, is smaller than its
        ``minMember``, or the cluster lacks room for its ``minResources``."""
        full_name, group = self.pod_group(pod.pod)
        if group is None:
            return
        if full_name in self.backed_off:
            raise PreFilterRefusal(f"podGroup {full_name} failed recently")
        siblings = self.group_pods.count(group.namespace, group.name)
        if siblings < group.min_member:
            raise PreFilterRefusal(f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                                   f"current pods number: {siblings}, minMember of group: {group.min_member}")
        if group.min_resources is None or full_name in self.permitted:
            return
        wanted = {name: amount for name, amount in group.min_resources.items()}
        wanted[PODS] = Fraction(group.min_member)
        table = self.handle.snapshot
        gap = cluster_resource_gap(table.infos[: table.n], wanted, full_name, assigned_pods(table).by_node(full_name))
        if gap:
            raise PreFilterRefusal(f"resource gap: {format_gap(gap)}")
        self.permitted.add(full_name, self.schedule_timeout)

    # --- Permit ------------------------------------------------------------------------------------
    def permit(self, pod: PodInfo) -> PermitOutcome:
        """Success once this pod completes ``minMember`` assigned pods of its group; Wait before
        (FIRST_WAIT when it is the group's first assigned pod)."""
        full_name, group = self.pod_group(pod.pod)
        if not full_name:
            return PermitOutcome.POD_GROUP_NOT_SPECIFIED
        if group is None:
            return PermitOutcome.POD_GROUP_NOT_FOUND
        # The pod is assumed on its node by now (upstream's snapshot does not show it yet): count
        # it once, whichever way the snapshot holds it.
        others = self.assigned_count(group.name, group.namespace, besides=pod.uid)
        if others + 1 >= group.min_member:
            return PermitOutcome.SUCCESS
        return PermitOutcome.FIRST_WAIT if others == 0 else PermitOutcome.WAIT

    def wait_time(self, group: PodGroup | None) -> float:
        """The PodGroup's ``scheduleTimeoutSeconds`` when set and positive, else the plugin's
        ``permitWaitingTimeSeconds`` (upstream ``GetWaitTimeDuration``)."""
        if group is not None and group.schedule_timeout_seconds:
            return float(group.schedule_timeout_seconds)
        return self.schedule_timeout

    def activate_siblings(self, pod: PodInfo, state: CycleState) -> None:
        """Ask for the other pods of the group to be moved to the active queue at the end of this
        cycle (upstream ``ActivateSiblings`` through ``PodsToActivate``): once the group's first
        pod waits at Permit, the rest are worth trying now rather than at their next event.

        Only the first assigned pod of the group asks (upstream's ``PermitState.Activate``): if
        every waiting pod re-activated its siblings, a group that cannot fit would have its
        rejected pods sent straight back to the active queue, past their backoff, by the next
        sibling to wait, and the scheduler would retry the group in a hot loop."""
        group = pod_group_label(pod.pod)
        if not group:
            return
        for p in self.siblings(pod.namespace, group):
            if p["metadata"].get("uid") != pod.uid and not (p.get("spec") or {}).get("nodeName"):
                state.pods_to_activate[f"{pod.namespace}/{p['metadata']['name']}"] = PodInfo(p)

    def back_off(self, full_name: str, seconds: float) -> None:
        """Refuse the group at PreFilter for ``seconds``."""
        if seconds > 0:
            self.backed_off.add(full_name, seconds)

    def forget_permitted(self, full_name: str) -> None:
        """The group's resource check is to be redone (it reached PostFilter or Unreserve)."""
        self.permitted.discard(full_name)


def cluster_resource_gap(nodes: Iterable[NodeInfo], wanted: Mapping[str, Fraction], group: str,
                         own: Mapping[str, list[PodInfo]] | None = None) -> dict[str, int]:
    """What of ``wanted`` the nodes cannot hold together, counting each node's free room as if the
    group's own pods were not there (upstream ``CheckClusterResource``); {} when it fits.
    ``own``: the group's pods by node name, when an index has them (else each node's pods are
    looked through)."""
    left = {name: to_int(name, amount) for name, amount in wanted.items()}
    left = {name: amount for name, amount in left.items() if amount > 0}
    for info in nodes:
        if info.node is None:
            continue
        mine = own.get(info.name, []) if own is not None else [p for p in info.pods.values() if pod_group_full_name(p.pod) == group]
        free = _free_without(info, mine)
        for name in list(left):
            left[name] -= free.get(name, 0)
            if left[name] <= 0:
                del left[name]
        if not left:
            return {}
    return left


def _free_without(info: NodeInfo, own: list[PodInfo]) -> dict[str, int]:
    """The node's allocatable minus what its pods other than ``own`` request, and its free pod slots."""
    requested = dict(info.requested)
    for pod in own:
        for name, amount in pod.requests.items():
            requested[name] = requested.get(name, 0) - amount
    free = {name: amount - requested.get(name, 0) for name, amount in info.allocatable.items() if name != PODS}
    free[PODS] = info.allocatable.get(PODS, 0) - (len(info.pods) - len(own))
    return free


def format_gap(gap: Mapping[str, int]) -> str:
    """The missing amounts as Go prints a ResourceList of quantities: ``map[cpu:500m pods:1]``."""
    return "map[" + " ".join(f"{name}:{format_quantity(amount, milli=name == CPU)}" for name, amount in sorted(gap.items())) + "]"


__all__ = [
    "ExpiringSet",
    "PermitOutcome",
    "PodGroupManager",
    "PreFilterRefusal",
    "cluster_resource_gap",
    "format_gap",
]
