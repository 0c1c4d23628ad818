"""What plugins see of the pods that belong to Workloads (upstream ``fwk.WorkloadManager``).

A pod joins a pod group through ``spec.workloadRef`` (the Workload's name, the pod group's name
and, for replicated groups, a replica key). The scheduler's event handlers keep, per pod group,
which pods exist and which of them are unscheduled, assumed (past Reserve) or assigned (bound),
so gang scheduling can count them without listing pods. The state lives in the scheduler's
backend; plugins read and update it through these protocols only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.api.types import PodInfo


@dataclass(frozen=True, slots=True)
class PodGroupKey:
    """One instance of a pod group: the pods sharing a namespace and the whole ``workloadRef``
    (upstream ``podGroupKey``)."""

    namespace: str
    workload: str
    pod_group: str
    replica_key: str = ""


def workload_ref(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``spec.workloadRef``, or None when it belongs to no Workload."""
    ref = (pod.get("spec") or {}).get("workloadRef")
    return ref if isinstance(ref, Mapping) else None


def pod_group_key(namespace: str, ref: Mapping[str, Any]) -> PodGroupKey:
    """The key of the pod group instance ``ref`` names in ``namespace``."""
    return PodGroupKey(namespace, str(ref.get("name") or ""), str(ref.get("podGroup") or ""),
                       str(ref.get("podGroupReplicaKey") or ""))


class PodGroupInfo(Protocol):
    """The runtime state of one pod group (upstream ``fwk.PodGroupInfo``), by pod UID."""

    def all_pods(self) -> set[str]:
        """Every pod of the group the scheduler knows, whatever its state."""
        ...

    def unscheduled_pods(self) -> dict[str, PodInfo]:
        """The pods neither assumed nor assigned, by name (what ``Handle.activate`` takes)."""
        ...

    def assumed_pods(self) -> list[str]:
        """The pods past Reserve in this scheduler, waiting to bind, in the order they got there."""
        ...

    def assigned_pods(self) -> set[str]:
        """The pods bound to a node."""
        ...

    def scheduling_timeout(self) -> float:
        """Seconds left before the group's current attempt to gather at Permit times out; a new
        deadline starts when there is none or the last one passed."""
        ...

    def assume_pod(self, uid: str) -> None:
        """Count the pod as assumed (it passed Reserve)."""
        ...

    def forget_pod(self, uid: str) -> None:
        """Count the pod as unscheduled again (Unreserve)."""
        ...


class WorkloadManager(Protocol):
    """Where plugins find a pod group's state (upstream ``fwk.WorkloadManager``)."""

    def pod_group_info(self, namespace: str, ref: Mapping[str, Any]) -> PodGroupInfo:
        """The state of the pod group ``ref`` names; LookupError when no pod of it is known."""
        ...
