"""The state of every pod group the scheduler knows (upstream ``backend/workloadmanager``).

The event handlers drive it explicitly, before they touch the cache or the queue, so a gang's
PreEnqueue check already counts the pod being added. ``spec.workloadRef`` is immutable, so a pod
never moves between groups; a group is forgotten with its last pod.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.workloads import PodGroupKey, pod_group_key, workload_ref
from kubesched.utils.clock import Clock

log = logging.getLogger(__name__)

#: How long a gang's pods wait at Permit for the rest of the gang before being rejected
#: (upstream ``DefaultSchedulingTimeoutDuration``).
DEFAULT_SCHEDULING_TIMEOUT = 5 * 60.0
#: Less time than this left counts as a deadline reached. On a virtual clock the pods a timeout
#: rejected are retried at the very instant it fired, where float rounding can leave the old
#: deadline nanoseconds ahead; Go's clock would have moved past it.
DEADLINE_RESOLUTION = 1e-6


class PodGroupState:
    """One pod group's pods, by state (upstream ``podGroupInfo``). The states are insertion-ordered
    (dicts used as sets), so the pods a Permit allows or activates go in a reproducible order."""

    def __init__(self, clock: Clock, timeout: float) -> None:
        self._clock = clock
        self._timeout = timeout
        self._pods: dict[str, PodInfo] = {}
        self._unscheduled: dict[str, None] = {}
        self._assumed: dict[str, None] = {}
        self._assigned: dict[str, None] = {}
        #: When the current attempt to gather the gang at Permit times out (clock seconds), if any.
        self._deadline: float | None = None

    def add_pod(self, pod: PodInfo) -> None:
        self._pods[pod.uid] = pod
        (self._assigned if pod.node_name else self._unscheduled)[pod.uid] = None

    def update_pod(self, old: PodInfo, new: PodInfo) -> None:
        """A binding moves the pod to the assigned ones."""
        self._pods[new.uid] = new
        if not old.node_name and new.node_name:
            self._assigned[new.uid] = None
            self._unscheduled.pop(new.uid, None)
            self._assumed.pop(new.uid, None)

    def delete_pod(self, uid: str) -> bool:
        """Forget the pod; True when the group has no pod left."""
        self._pods.pop(uid, None)
        for pods in (self._unscheduled, self._assumed, self._assigned):
            pods.pop(uid, None)
        return not self._pods

    def all_pods(self) -> set[str]:
        return set(self._pods)

    def unscheduled_pods(self) -> dict[str, PodInfo]:
        return {self._pods[uid].name: self._pods[uid] for uid in self._unscheduled}

    def assumed_pods(self) -> list[str]:
        return list(self._assumed)

    def assigned_pods(self) -> set[str]:
        return set(self._assigned)

    def scheduling_timeout(self) -> float:
        """A new deadline when none is set or the last one passed, so a gang that timed out gets a
        fresh attempt; then the seconds left until it."""
        now = self._clock.now()
        if self._deadline is None or self._deadline - now < DEADLINE_RESOLUTION:
            self._deadline = now + self._timeout
        return self._deadline - now

    def assume_pod(self, uid: str) -> None:
        self._assumed[uid] = None
        self._unscheduled.pop(uid, None)

    def forget_pod(self, uid: str) -> None:
        self._unscheduled[uid] = None
        self._assumed.pop(uid, None)


class WorkloadManager:
    """Every known pod group, keyed by namespace and ``workloadRef`` (upstream ``workloadManager``).

    ``timeout``: how long a gang waits at Permit (upstream's variable, set shorter by tests)."""

    def __init__(self, clock: Clock, timeout: float = DEFAULT_SCHEDULING_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._groups: dict[PodGroupKey, PodGroupState] = {}

    def add_pod(self, pod: PodInfo) -> None:
        """A pod with a ``workloadRef`` joins its group's pods (unscheduled or assigned)."""
        ref = workload_ref(pod.pod)
        if ref is None:
            return
        key = pod_group_key(pod.namespace, ref)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = PodGroupState(self._clock, self._timeout)
        group.add_pod(pod)

    def update_pod(self, old: PodInfo, new: PodInfo) -> None:
        ref = workload_ref(new.pod)
        if ref is None:
            return
        key = pod_group_key(new.namespace, ref)
        group = self._groups.get(key)
        if group is None:  # not expected (the add came first); recover by adding the pod
            log.error("UpdatePod found no pod group for pod %s; created one for it", new.key)
            self._groups[key] = group = PodGroupState(self._clock, self._timeout)
            group.add_pod(new)
            return
        group.update_pod(old, new)

    def delete_pod(self, pod: PodInfo) -> None:
        ref = workload_ref(pod.pod)
        if ref is None:
            return
        key = pod_group_key(pod.namespace, ref)
        group = self._groups.get(key)
        if group is not None and group.delete_pod(pod.uid):
            del self._groups[key]

    def pod_group_info(self, namespace: str, ref: Mapping[str, Any]) -> PodGroupState:
        group = self._groups.get(pod_group_key(namespace, ref))
        if group is None:
            raise LookupError("internal pod group state doesn't exist for a pod's workload")
        return group
