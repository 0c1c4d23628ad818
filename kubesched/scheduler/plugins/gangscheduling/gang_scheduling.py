"""GangScheduling: all-or-nothing scheduling of the pods of a Workload's gang pod group.

A pod joins a pod group through ``spec.workloadRef``; the Workload (``scheduling.k8s.io/v1alpha1``)
gives the group a policy, ``basic`` (ordinary scheduling) or ``gang`` with a ``minCount``. For a
gang:

* **PreEnqueue** keeps the pod out of activeQ until its Workload exists and ``minCount`` pods of
  the group do, so no node is held for a gang that cannot form yet;
* **Reserve** counts the pod as assumed, **Unreserve** takes it back;
* **Permit** parks the pod until ``minCount`` pods of the group are assumed or bound, then allows
  every waiting one at once; while short of the quorum it activates the group's unscheduled pods
  so they are tried next. The wait shares one deadline per group (five minutes): when it passes,
  the waiting pods are rejected and their nodes freed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import EnqueueExtensions, PermitPlugin, PreEnqueuePlugin, ReservePlugin
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.framework.workloads import PodGroupInfo, workload_ref
from kubesched.scheduler.plugins import names

WORKLOAD_KIND = "Workload"


class GangScheduling(PreEnqueuePlugin, ReservePlugin, PermitPlugin, EnqueueExtensions):
    name = names.GangScheduling

    # --- events ----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A new pod of the gang may complete its minCount; a new Workload may be the one its pods
        wait for. ``workloadRef`` and a Workload's pod groups are immutable, so updates never help."""
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Add), self.is_schedulable_after_pod_added),
            ClusterEventWithHint(ClusterEvent(Resource.Workload, ActionType.Add), self.is_schedulable_after_workload_added),
        ]

    @staticmethod
    def is_schedulable_after_pod_added(pod: dict, _old: Any, new: Any) -> QueueingHint:
        """Queue only when the added pod has the same namespace and the same whole ``workloadRef``
        (Workload, pod group and replica key)."""
        return QueueingHint.Queue if _same_pod_group(pod, new) else QueueingHint.QueueSkip

    @staticmethod
    def is_schedulable_after_workload_added(pod: dict, _old: Any, new: Any) -> QueueingHint:
        """Queue only when the added Workload is the one the pod's ``workloadRef`` names."""
        ref = workload_ref(pod)
        meta = (new or {}).get("metadata") or {}
        if ref is None or _namespace(pod) != (meta.get("namespace") or "default") or ref.get("name") != meta.get("name"):
            return QueueingHint.QueueSkip
        return QueueingHint.Queue

    # --- PreEnqueue ------------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        ref = workload_ref(pod.pod)
        if ref is None:
            return None
        workload = self._workload(pod.namespace, ref)
        if workload is None:
            return Status(Code.UnschedulableAndUnresolvable,
                          f'waiting for pods\'s workload "{ref.get("name")}" to appear in scheduling queue')
        policy = pod_group_policy(workload, ref.get("podGroup"))
        if policy is None:
            return Status(Code.UnschedulableAndUnresolvable, _no_pod_group(ref, workload))
        min_count = gang_min_count(policy)
        if min_count is None:
            return None
        group, error = self._group(pod, ref)
        if group is None:
            return error
        if len(group.all_pods()) < min_count:
            return Status(Code.UnschedulableAndUnresolvable, "waiting for minCount pods from a gang to appear in scheduling queue")
        return None

    # --- Reserve ---------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Count the pod among its group's assumed pods, which Permit's quorum counts."""
        ref = workload_ref(pod.pod)
        if ref is None:
            return None
        group, error = self._group(pod, ref)
        if group is None:
            return error
        group.assume_pod(pod.uid)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        ref = workload_ref(pod.pod)
        if ref is None:
            return
        group, _ = self._group(pod, ref)
        if group is not None:
            group.forget_pod(pod.uid)

    # --- Permit ----------------------------------------------------------------------------------
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        ref = workload_ref(pod.pod)
        if ref is None:
            return None, 0
        workload = self._workload(pod.namespace, ref)
        if workload is None:  # deleted meanwhile: an error retries the pod once it is back
            name = ref.get("name")
            return Status.from_error(LookupError(
                f'failed to get workload {pod.namespace}/{name}: workload.scheduling.k8s.io "{name}" not found')), 0
        policy = pod_group_policy(workload, ref.get("podGroup"))
        if policy is None:
            return Status.from_error(LookupError(_no_pod_group(ref, workload))), 0
        min_count = gang_min_count(policy)
        if min_count is None:
            return None, 0
        group, error = self._group(pod, ref)
        if group is None:
            return error, 0
        assumed = group.assumed_pods()
        if len(group.assigned_pods().union(assumed)) < min_count:
            # Pods of the gang that wait for this one to be scheduled are tried next.
            self.framework.activate(group.unscheduled_pods())
            return Status(Code.Wait, "waiting for minCount pods from a gang to be waiting on permit"), group.scheduling_timeout()
        for uid in assumed:
            waiting = self.framework.get_waiting_pod(uid)
            if waiting is not None:
                waiting.allow(self.name)
        return None, 0

    # --- helpers ---------------------------------------------------------------------------------
    def _workload(self, namespace: str, ref: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self.framework.objects(WORKLOAD_KIND).get(f"{namespace}/{ref.get('name')}")

    def _group(self, pod: PodInfo, ref: Mapping[str, Any]) -> tuple[PodGroupInfo | None, Status | None]:
        """The pod's group state, or the Error status saying the scheduler does not track it (no
        pod of the group known, or no workload manager at all: GenericWorkload is off)."""
        try:
            return self.framework.workload_manager.pod_group_info(pod.namespace, ref), None
        except (LookupError, RuntimeError) as e:
            return None, Status.from_error(e)


def pod_group_policy(workload: Mapping[str, Any], pod_group: object) -> Mapping[str, Any] | None:
    """The policy of the Workload's pod group named ``pod_group``, or None when it has none of that name."""
    for group in (workload.get("spec") or {}).get("podGroups") or []:
        if group.get("name") == pod_group:
            policy = group.get("policy")
            return policy if isinstance(policy, Mapping) else {}
    return None


def gang_min_count(policy: Mapping[str, Any]) -> int | None:
    """A gang policy's ``minCount``; None for any other policy (basic), which this plugin ignores."""
    gang = policy.get("gang")
    if not isinstance(gang, Mapping):
        return None
    return int(gang.get("minCount") or 0)


def _no_pod_group(ref: Mapping[str, Any], workload: Mapping[str, Any]) -> str:
    return f'pod group "{ref.get("podGroup")}" doesn\'t exist for a workload "{(workload.get("metadata") or {}).get("name")}"'


def _namespace(obj: Mapping[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("namespace") or "default"


def _same_pod_group(pod: Mapping[str, Any], other: Mapping[str, Any] | None) -> bool:
    """Both pods name the same Workload, pod group and replica key in the same namespace."""
    if other is None:
        return False
    ref, other_ref = workload_ref(pod), workload_ref(other)
    if ref is None or other_ref is None or _namespace(pod) != _namespace(other):
        return False
    fields = ("name", "podGroup", "podGroupReplicaKey")
    return all((ref.get(f) or "") == (other_ref.get(f) or "") for f in fields)
