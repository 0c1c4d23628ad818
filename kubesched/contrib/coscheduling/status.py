"""A PodGroup's status from its pods: what scheduler-plugins' PodGroup controller writes
(``pkg/controllers/podgroup_controller.go``, ``Reconcile``).

One reconcile moves the phase one step: a new group becomes Pending; a Pending group with
``minMember`` pods becomes Scheduling (and records the workload that owns them in
``occupiedBy``); after that the running, succeeded and failed counts follow the pods, and the phase
is Running once ``minMember`` of them run or succeeded, Failed when one failed with the rest
accounted for, Finished once ``minMember`` succeeded. Finished and Failed are final.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.contrib.coscheduling.pod_group import FAILED, FINISHED, PENDING, RUNNING, SCHEDULING


def next_status(pod_group: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The status one reconcile gives ``pod_group`` whose labelled pods are ``pods``."""
    status = dict(pod_group.get("status") or {})
    min_member = int((pod_group.get("spec") or {}).get("minMember") or 0)
    phase = status.get("phase") or ""
    if phase in (FINISHED, FAILED):
        return status
    if phase == "":
        status["phase"] = PENDING
        return status
    if phase == PENDING:
        if len(pods) >= min_member:
            status["phase"] = SCHEDULING
            occupied = occupied_by(pods[0]) if pods else ""
            if occupied:
                status["occupiedBy"] = occupied
        return status
    running, succeeded, failed = pod_counts(pods)
    status.update(running=running, succeeded=succeeded, failed=failed)
    if len(pods) < min_member:
        status["phase"] = PENDING
        return status
    status["phase"] = RUNNING if succeeded + running >= min_member else SCHEDULING
    if failed and failed + running + succeeded >= min_member:
        status["phase"] = FAILED
    if succeeded >= min_member:
        status["phase"] = FINISHED
    return status


def pod_counts(pods: Sequence[Mapping[str, Any]]) -> tuple[int, int, int]:
    """How many pods run, succeeded and failed."""
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    return phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")


def occupied_by(pod: Mapping[str, Any]) -> str:
    """``namespace/owner`` of each owner of the pod, sorted and comma-joined ("" for none)."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    return ",".join(sorted(f"{namespace}/{ref.get('name', '')}" for ref in meta.get("ownerReferences") or []))


__all__ = ["next_status", "occupied_by", "pod_counts"]
