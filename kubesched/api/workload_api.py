"""The Workload API (``scheduling.k8s.io/v1alpha1``) and the pod field that joins it, ``spec.workloadRef``.

Both are alpha in Kubernetes 1.35, behind the GenericWorkload feature gate: kube-apiserver serves
Workloads only with the gate on, and with it off drops ``workloadRef`` from new pods (keeping it
on a pod that already has one, so updates do not lose it). Validation follows upstream's
``ValidateWorkload`` / ``ValidateWorkloadUpdate`` and the pod spec's workload reference checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.errors import FieldError, invalid, required
from kubesched.api.names import dns1123_label_errors, dns1123_subdomain_errors

GATE = "GenericWorkload"
#: ``scheduling.WorkloadMaxPodGroups``.
MAX_POD_GROUPS = 8
_POLICIES = ("basic", "gang")


def gate_on(gates: Mapping[str, bool] | None) -> bool:
    """Whether GenericWorkload is on; alpha, so off when no gates are given."""
    return bool(gates and gates.get(GATE))


def drop_disabled_workload_ref(pod: dict[str, Any], old: Mapping[str, Any] | None, gates: Mapping[str, bool] | None) -> None:
    """The pod strategy's ``dropDisabledFields`` for ``workloadRef``: with the gate off a new value
    is dropped, unless the pod being updated already had one."""
    spec = pod.get("spec")
    if gate_on(gates) or not isinstance(spec, dict) or "workloadRef" not in spec:
        return
    if old is not None and (old.get("spec") or {}).get("workloadRef") is not None:
        return
    del spec["workloadRef"]


def drop_disabled_template_workload_ref(obj: dict[str, Any], old: Mapping[str, Any] | None,
                                        gates: Mapping[str, bool] | None) -> None:
    """``DropDisabledTemplateFields`` for a controller's ``spec.template`` (Deployment, ReplicaSet,
    StatefulSet, DaemonSet, ReplicationController): as for a pod."""
    template = (obj.get("spec") or {}).get("template")
    if isinstance(template, dict):
        old_template = ((old or {}).get("spec") or {}).get("template") if old is not None else None
        drop_disabled_workload_ref(template, old_template if isinstance(old_template, Mapping) else None, gates)


def validate_workload_ref(ref: Mapping[str, Any], path: str) -> list[FieldError]:
    """``spec.workloadRef``: the Workload's name is a DNS subdomain, the pod group and the replica
    key (when set) DNS labels."""
    errors: list[FieldError] = []
    for field, check in (("name", dns1123_subdomain_errors), ("podGroup", dns1123_label_errors)):
        value = ref.get(field)
        if not value:
            errors.append(required(f"{path}.{field}"))
        else:
            errors += [invalid(f"{path}.{field}", value, msg) for msg in check(str(value))]
    key = ref.get("podGroupReplicaKey")
    if key:
        errors += [invalid(f"{path}.podGroupReplicaKey", key, msg) for msg in dns1123_label_errors(str(key))]
    return errors


def validate_workload(workload: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateWorkload``'s spec part (metadata is checked with every kind's)."""
    spec = workload.get("spec") or {}
    errors: list[FieldError] = []
    if spec.get("controllerRef") is not None:
        errors += _controller_ref_errors(spec["controllerRef"], "spec.controllerRef")
    groups = spec.get("podGroups") or []
    if not groups:
        return [*errors, required("spec.podGroups", "must have at least one item")]
    if len(groups) > MAX_POD_GROUPS:
        return [*errors, FieldError("spec.podGroups", "Too many", f"must have at most {MAX_POD_GROUPS} items", len(groups))]
    seen: set[str] = set()
    for i, group in enumerate(groups):
        errors += _pod_group_errors(group, f"spec.podGroups[{i}]", seen)
    return errors


def validate_workload_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """``validateWorkloadSpecUpdate``: the pod groups never change, the controller reference not
    once set (upstream names these paths without ``spec.``)."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors = []
    if old_spec.get("controllerRef") is not None and new_spec.get("controllerRef") != old_spec["controllerRef"]:
        errors.append(invalid("controllerRef", new_spec.get("controllerRef"), "field is immutable"))
    if new_spec.get("podGroups") != old_spec.get("podGroups"):
        errors.append(invalid("podGroups", new_spec.get("podGroups"), "field is immutable"))
    return errors


def _controller_ref_errors(ref: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    group = ref.get("apiGroup")
    if group:
        errors += [invalid(f"{path}.apiGroup", group, msg) for msg in dns1123_subdomain_errors(str(group))]
    for field in ("kind", "name"):
        value = ref.get(field)
        if not value:
            errors.append(required(f"{path}.{field}"))
        else:
            errors += [invalid(f"{path}.{field}", value, msg) for msg in _path_segment_errors(str(value))]
    return errors


def _path_segment_errors(name: str) -> list[str]:
    """``path.IsValidPathSegmentName``."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _pod_group_errors(group: Mapping[str, Any], path: str, seen: set[str]) -> list[FieldError]:
    name = str(group.get("name") or "")
    errors = [invalid(f"{path}.name", name, msg) for msg in dns1123_label_errors(name)]
    if name in seen:
        errors.append(FieldError(f"{path}.name", "Duplicate value", "", name))
    seen.add(name)
    return errors + _policy_errors(group.get("policy") or {}, f"{path}.policy")


def _policy_errors(policy: Mapping[str, Any], path: str) -> list[FieldError]:
    """Exactly one of ``basic`` and ``gang``; a gang's minCount is positive."""
    set_fields = [f"`{f}`" for f in _POLICIES if policy.get(f) is not None]
    if not set_fields:
        return [required(path, "exactly one of `basic`, `gang` is required")]
    if len(set_fields) > 1:
        return [invalid(path, "{" + ", ".join(set_fields) + "}", "exactly one of `basic`, `gang` is required, but multiple fields are set")]
    gang = policy.get("gang")
    if gang is None:
        return []
    min_count = gang.get("minCount") or 0
    if min_count <= 0:
        return [invalid(f"{path}.gang.minCount", min_count, "must be greater than zero")]
    return []

