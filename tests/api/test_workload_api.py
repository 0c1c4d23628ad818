"""The Workload API (scheduling.k8s.io/v1alpha1) and pods' ``spec.workloadRef``: upstream's
validation (``ValidateWorkload``, ``ValidateWorkloadUpdate``, the pod spec's workload reference)
and the pod strategy dropping the field while GenericWorkload is off."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.validation import validate
from kubesched.api.workload_api import drop_disabled_template_workload_ref, drop_disabled_workload_ref, validate_workload_update
from tests.integration.wrappers import pod, pod_group, workload

ON = {"GenericWorkload": True}


def errors(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e.path, e.kind, e.detail) for e in validate(obj, ON)]


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(workload("w", pod_group("pg", 2), pod_group("basic")), [], id="gang and basic pod groups are valid"),
    pytest.param(workload("w"), [("spec.podGroups", "Required value", "must have at least one item")], id="no pod group"),
    pytest.param(workload("w", *(pod_group(f"g{i}") for i in range(9))),
                 [("spec.podGroups", "Too many", "must have at most 8 items")], id="more than eight pod groups"),
    pytest.param(workload("w", pod_group("pg"), pod_group("pg")), [("spec.podGroups[1].name", "Duplicate value", "")],
                 id="duplicate pod group names"),
    pytest.param(workload("w", pod_group("Not_A_Label")),
                 [("spec.podGroups[0].name", "Invalid value", "a lowercase RFC 1123 label must consist of lower case "
                   "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
                   "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")],
                 id="pod group name is not a DNS label"),
    pytest.param(workload("w", pod_group("pg", 0)), [("spec.podGroups[0].policy.gang.minCount", "Invalid value", "must be greater than zero")],
                 id="gang minCount must be positive"),
    pytest.param(workload("w", {"name": "pg", "policy": {}}),
                 [("spec.podGroups[0].policy", "Required value", "exactly one of `basic`, `gang` is required")], id="no policy"),
    pytest.param(workload("w", {"name": "pg", "policy": {"basic": {}, "gang": {"minCount": 1}}}),
                 [("spec.podGroups[0].policy", "Invalid value",
                   "exactly one of `basic`, `gang` is required, but multiple fields are set")], id="both policies"),
    pytest.param({**workload("w", pod_group("pg")), "spec": {"podGroups": [pod_group("pg")], "controllerRef": {"name": "a/b"}}},
                 [("spec.controllerRef.kind", "Required value", ""), ("spec.controllerRef.name", "Invalid value", "may not contain '/'")],
                 id="controller reference needs a kind and path segment names"),
    pytest.param(pod("p", workloadRef={"name": "w", "podGroup": "pg", "podGroupReplicaKey": "0"}), [], id="pod workload reference is valid"),
    pytest.param(pod("p", workloadRef={"name": "W!", "podGroup": ""}),
                 [("spec.workloadRef.name", "Invalid value", "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                   "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                   "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
                  ("spec.workloadRef.podGroup", "Required value", "")],
                 id="pod workload reference names a DNS subdomain and a pod group"),
])
def test_validation(obj: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    assert errors(obj) == expected


def test_pod_groups_and_set_controller_reference_are_immutable() -> None:
    old = {**workload("w", pod_group("pg", 2)), "spec": {"podGroups": [pod_group("pg", 2)], "controllerRef": {"kind": "Job", "name": "j"}}}
    new = {**old, "spec": {"podGroups": [pod_group("pg", 3)], "controllerRef": {"kind": "Job", "name": "k"}}}
    assert [(e.path, e.detail) for e in validate_workload_update(new, old)] == [
        ("controllerRef", "field is immutable"), ("podGroups", "field is immutable")]
    assert validate_workload_update(old, old) == []


REF = {"name": "w", "podGroup": "pg"}


@pytest.mark.parametrize(("gates", "old", "kept"), [
    pytest.param(ON, None, True, id="kept with the gate on"),
    pytest.param({"GenericWorkload": False}, None, False, id="dropped from a new pod with the gate off"),
    pytest.param(None, None, False, id="dropped when no gates are set (alpha: off by default)"),
    pytest.param({"GenericWorkload": False}, pod("p", workloadRef=REF), True, id="kept on a pod that already has one"),
])
def test_workload_ref_dropped_while_the_gate_is_off(gates: dict | None, old: dict | None, kept: bool) -> None:
    new = pod("p", workloadRef=dict(REF))
    drop_disabled_workload_ref(new, old, gates)
    assert ("workloadRef" in new["spec"]) is kept


@pytest.mark.parametrize(("gates", "kept"), [
    pytest.param(ON, True, id="kept in a template with the gate on"),
    pytest.param({"GenericWorkload": False}, False, id="dropped from a new template with the gate off"),
])
def test_workload_ref_in_a_controller_template(gates: dict, kept: bool) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"template": {"spec": {"workloadRef": dict(REF), "containers": []}}}}
    drop_disabled_template_workload_ref(deployment, None, gates)
    assert ("workloadRef" in deployment["spec"]["template"]["spec"]) is kept
