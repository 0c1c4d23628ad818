"""The alpha Workload API over HTTP: served (and discovered) only with GenericWorkload on, as
kube-apiserver serves alpha APIs; pods' ``spec.workloadRef`` kept or dropped accordingly."""

from __future__ import annotations

import pytest

from tests.apiserver.conftest import pod
from tests.integration.wrappers import pod_group, workload

WORKLOADS = "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads"
REF = {"name": "training", "podGroup": "workers"}


async def _discovered(api) -> tuple[list[str], list[str]]:
    _, groups, _ = await api.call("GET", "/apis/scheduling.k8s.io")
    _, aggregated, _ = await api.call("GET", "/apis", accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    scheduling = next(g for g in aggregated["items"] if g["metadata"]["name"] == "scheduling.k8s.io")
    return [v["version"] for v in groups["versions"]], [v["version"] for v in scheduling["versions"]]


async def test_workloads_are_not_served_with_the_gate_off(api) -> None:
    status, _, _ = await api.call("POST", WORKLOADS, workload("training", pod_group("workers", 4)))
    assert status == 404
    assert await _discovered(api) == (["v1"], ["v1"])
    status, created, _ = await api.call("POST", "/api/v1/namespaces/default/pods", pod("w-0", workloadRef=REF))
    assert status == 201 and "workloadRef" not in created["spec"]


@pytest.mark.store(feature_gates={"GenericWorkload": True})
async def test_workloads_are_served_with_the_gate_on(api) -> None:
    assert await _discovered(api) == (["v1", "v1alpha1"], ["v1", "v1alpha1"])
    status, created, _ = await api.call("POST", WORKLOADS, workload("training", pod_group("workers", 4)))
    assert status == 201 and created["spec"]["podGroups"] == [{"name": "workers", "policy": {"gang": {"minCount": 4}}}]
    status, listed, _ = await api.call("GET", WORKLOADS)
    assert status == 200 and [w["metadata"]["name"] for w in listed["items"]] == ["training"]
    changed = {**created, "spec": {"podGroups": [pod_group("workers", 2)]}}
    status, refused, _ = await api.call("PUT", f"{WORKLOADS}/training", changed)
    assert status == 422 and refused["details"]["causes"][0]["field"] == "podGroups"
    status, created, _ = await api.call("POST", "/api/v1/namespaces/default/pods", pod("w-0", workloadRef=REF))
    assert status == 201 and created["spec"]["workloadRef"] == REF


@pytest.mark.store(feature_gates={"GenericWorkload": True})
async def test_invalid_workload_is_refused_naming_the_field(api) -> None:
    status, refused, _ = await api.call("POST", WORKLOADS, workload("training", pod_group("workers", 0)))
    assert status == 422
    assert refused["message"] == ('Workload.scheduling.k8s.io "training" is invalid: spec.podGroups[0].policy.gang.minCount: '
                                  "Invalid value: 0: must be greater than zero")
