"""PodGroup and ElasticQuota status as scheduler-plugins' controllers reconcile them
(``pkg/controllers/podgroup_controller_test.go``, ``elasticquota_controller.go``): one phase step
per reconcile, counts from the pods' phases; a quota's use from its namespace's running pods."""

from __future__ import annotations

import pytest

from kubesched.contrib.capacityscheduling.status import elastic_quota_used
from kubesched.contrib.coscheduling.status import next_status


def group(phase: str = "", min_member: int = 2) -> dict:
    pg: dict = {"metadata": {"name": "pg", "namespace": "default"}, "spec": {"minMember": min_member}}
    if phase:
        pg["status"] = {"phase": phase}
    return pg


def pods(*phases: str, owner: str = "") -> list[dict]:
    out = []
    for i, phase in enumerate(phases):
        meta: dict = {"name": f"p{i}", "namespace": "default"}
        if owner:
            meta["ownerReferences"] = [{"name": owner, "kind": "Job", "apiVersion": "batch/v1", "uid": "u"}]
        out.append({"metadata": meta, "status": {"phase": phase}})
    return out


CASES = [
    ("Group new: pending", group(), pods("Pending"), {"phase": "Pending"}),
    ("Group pending, not enough pods", group("Pending"), pods("Pending"), {"phase": "Pending"}),
    ("Group pending, enough pods: scheduling, occupied by the owner", group("Pending"), pods("Pending", "Pending", owner="job"),
     {"phase": "Scheduling", "occupiedBy": "default/job"}),
    ("Group scheduling, pods running", group("Scheduling"), pods("Running", "Running"),
     {"phase": "Running", "running": 2, "succeeded": 0, "failed": 0}),
    ("Group scheduling, one pod running", group("Scheduling"), pods("Running", "Pending"),
     {"phase": "Scheduling", "running": 1, "succeeded": 0, "failed": 0}),
    ("Group running, one pod failed", group("Running"), pods("Running", "Failed"),
     {"phase": "Failed", "running": 1, "succeeded": 0, "failed": 1}),
    ("Group running, all pods succeeded", group("Running"), pods("Succeeded", "Succeeded"),
     {"phase": "Finished", "running": 0, "succeeded": 2, "failed": 0}),
    ("Group running, pods gone below minMember: pending", group("Running"), pods("Running"),
     {"phase": "Pending", "running": 1, "succeeded": 0, "failed": 0}),
    ("Group finished stays finished", group("Finished"), pods(), {"phase": "Finished"}),
]


@pytest.mark.parametrize("name,pod_group,members,want", CASES, ids=[c[0] for c in CASES])
def test_next_status(name, pod_group, members, want):
    assert next_status(pod_group, members) == want


def running(name: str, cpu: str, memory: str, phase: str = "Running") -> dict:
    return {"metadata": {"name": name, "namespace": "ns1"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": phase}}


@pytest.mark.parametrize("name,spec,pods,want", [
    ("no pods: zero for every resource min or max names", {"min": {"cpu": "1"}, "max": {"memory": "1Gi"}}, [],
     {"cpu": "0", "memory": "0"}),
    ("running pods count, others not", {"min": {"cpu": "4"}},
     [running("a", "1500m", "1Gi"), running("b", "1", "1Gi"), running("c", "2", "1Gi", phase="Pending")],
     {"cpu": "2500m", "memory": "2Gi"}),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_elastic_quota_used(name, spec, pods, want):
    """The ElasticQuota controller's ``status.used`` (``computeElasticQuotaUsed``)."""
    assert elastic_quota_used({"spec": spec}, pods) == want
