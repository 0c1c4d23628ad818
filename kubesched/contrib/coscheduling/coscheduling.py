"""Coscheduling: all-or-nothing scheduling of a PodGroup (scheduler-plugins
``pkg/coscheduling/coscheduling.go``).

A pod labelled ``scheduling.x-k8s.io/pod-group: <name>`` belongs to the PodGroup ``<name>`` of
its namespace. Its pods are kept together in the queue (QueueSort by priority, then the group's
creation time, then name), refused at PreFilter while fewer than ``minMember`` exist or the
cluster cannot hold ``minResources``, and held at Permit until ``minMember`` of them are assumed
or bound: the pod that completes the quorum allows every waiting sibling, so they bind together.
When a pod of the group fails to fit, PostFilter rejects the group's waiting pods at once (unless
the group is nearly complete), so their reserved room goes back to the cluster instead of being
held until the Permit timeout; a Permit timeout (Unreserve) rejects the others the same way.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kubesched.api.types import PodInfo
from kubesched.contrib.coscheduling.args import CoschedulingArgs
from kubesched.contrib.coscheduling.core import PermitOutcome, PodGroupManager, PreFilterRefusal
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
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, Resource
from kubesched.scheduler.framework.interface import (
    EnqueueExtensions,
    PermitPlugin,
    PostFilterOutcome,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortPlugin,
    ReservePlugin,
)
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.framework.waiting_pods import WaitingPod
from kubesched.scheduler.nodetable.table import NodeBatch

#: The cluster event a PodGroup change is (upstream's GVK form ``podgroups.v1alpha1.scheduling.x-k8s.io``).
POD_GROUP_RESOURCE = Resource.custom(GROUP, VERSION, PLURAL)
#: A group whose unassigned share of ``minMember`` is at most this is not rejected at PostFilter:
#: its next pods may still complete it.
SMALL_GAP = 0.1


class Coscheduling(QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, PermitPlugin, ReservePlugin, EnqueueExtensions):
    """Upstream ``coscheduling.Coscheduling``."""

    name = "Coscheduling"
    Args = CoschedulingArgs
    crds: ClassVar[tuple[str, ...]] = ("crds/scheduling.x-k8s.io_podgroups.yaml",)

    def __init__(self, args: CoschedulingArgs | None = None, handle: Any = None) -> None:
        args = args if args is not None else CoschedulingArgs()
        errors = args.validate()
        if errors:
            raise ValueError("; ".join(str(e) for e in errors))
        super().__init__(args, handle)
        self.args: CoschedulingArgs = args
        self.manager = PodGroupManager(self.framework, float(args.permit_waiting_time_seconds))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A new pod may complete a group; a new or changed PodGroup may admit its pods."""
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Add)),
            ClusterEventWithHint(ClusterEvent(POD_GROUP_RESOURCE, ActionType.Add | ActionType.Update)),
        ]

    # --- QueueSort ---------------------------------------------------------------------------------
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Higher priority first; then the older group (or lone pod); then by ``namespace/name``,
        which keeps a group's pods next to each other."""
        pa, pb = a.pod_info.priority, b.pod_info.priority
        if pa != pb:
            return pa > pb
        ta = self.manager.creation_time(a.pod_info, _first_queued(a))
        tb = self.manager.creation_time(b.pod_info, _first_queued(b))
        if ta == tb:
            return a.pod_info.key < b.pod_info.key
        return ta < tb

    # --- PreFilter ---------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        """UnschedulableAndUnresolvable (preemption cannot help) while the group is incomplete,
        backed off, or larger than the cluster."""
        try:
            self.manager.pre_filter(pod)
        except (PreFilterRefusal, InvalidPodGroup) as e:
            return None, Status(Code.UnschedulableAndUnresolvable, str(e))
        return None, None

    # --- PostFilter --------------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Any) -> PostFilterOutcome:
        """Reject the group's waiting pods: if one pod does not fit, the others most likely will
        not complete the group either."""
        try:
            full_name, group = self.manager.pod_group(pod.pod)
        except InvalidPodGroup as e:
            return PostFilterResult(), Status(Code.Unschedulable, str(e))
        if group is None:
            return PostFilterResult(), Status(Code.Unschedulable, "can not find pod group")
        assigned = self.manager.assigned_count(group.name, group.namespace)
        if assigned >= group.min_member:
            return PostFilterResult(), Status(Code.Unschedulable)
        if group.min_member and (group.min_member - assigned) / group.min_member <= SMALL_GAP:
            return PostFilterResult(), Status(Code.Unschedulable)
        self._reject_waiting(group, "optimistic rejection in PostFilter")
        if self.args.pod_group_backoff_seconds > 0 and self.manager.group_pods.count(group.namespace, group.name) >= group.min_member:
            self.manager.back_off(full_name, float(self.args.pod_group_backoff_seconds))
        self.manager.forget_permitted(full_name)
        return PostFilterResult(), Status(
            Code.Unschedulable, f"PodGroup {full_name} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter")

    # --- Permit ------------------------------------------------------------------------------------
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """Wait until ``minMember`` pods of the group are assigned; the pod that completes the
        group allows all the waiting ones."""
        try:
            outcome = self.manager.permit(pod)
        except InvalidPodGroup as e:
            return Status(Code.UnschedulableAndUnresolvable, str(e)), 0.0
        if outcome is PermitOutcome.POD_GROUP_NOT_SPECIFIED:
            return None, 0.0
        if outcome is PermitOutcome.POD_GROUP_NOT_FOUND:
            return Status(Code.Unschedulable, "PodGroup not found"), 0.0
        if outcome in (PermitOutcome.WAIT, PermitOutcome.FIRST_WAIT):
            _, group = self.manager.pod_group(pod.pod)
            if outcome is PermitOutcome.FIRST_WAIT:
                self.manager.activate_siblings(pod, state)
            return Status(Code.Wait), self.manager.wait_time(group)
        full_name = pod_group_full_name(pod.pod)

        def allow(waiting: WaitingPod) -> None:
            if pod_group_full_name(waiting.pod.pod) == full_name:
                waiting.allow(self.name)

        self.framework.iterate_waiting_pods(allow)
        return None, 0.0

    # --- Reserve -----------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Nothing to reserve: Coscheduling implements Reserve for its Unreserve."""
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """A pod of the group left Permit without binding (timed out, rejected): reject the rest,
        so no part of the group holds room the others will never join."""
        try:
            full_name, group = self.manager.pod_group(pod.pod)
        except InvalidPodGroup:
            return
        if group is None:
            return
        self._reject_waiting(group, "rejection in Unreserve")
        self.manager.forget_permitted(full_name)

    def _reject_waiting(self, group: PodGroup, message: str) -> None:
        def reject(waiting: WaitingPod) -> None:
            if waiting.pod.namespace == group.namespace and pod_group_label(waiting.pod.pod) == group.name:
                waiting.reject(self.name, message)

        self.framework.iterate_waiting_pods(reject)


def _first_queued(info: QueuedPodInfo) -> float:
    """When the pod first entered the queue (its latest queueing when that was not recorded)."""
    return info.initial_attempt_timestamp if info.initial_attempt_timestamp is not None else info.timestamp


__all__ = ["POD_GROUP_RESOURCE", "Coscheduling"]
