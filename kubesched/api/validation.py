"""Validation of the objects the scheduler reads, with apiserver's field paths and messages.

Only what would make the scheduler misread an object is checked (names, sizes, quantities'
ranges, selectors, taints and tolerations, spread constraints, ports, replica counts); apiserver
checks more, kubesched does not pretend to. ``validate(obj)`` returns every problem found, so a
user fixes them in one go.

Types are not checked here: every object is decoded against its kind's schema first
(:mod:`kubesched.api.schema_validation`), so a map is a map and a count an integer by the time
these checks read them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubesched.api.errors import FieldError, invalid, required, unsupported
from kubesched.api.jsonmemo import JSONMemo
from kubesched.api.kinds import kind_for
from kubesched.api.names import dns1123_label_errors, dns1123_subdomain_errors, label_value_errors, qualified_name_errors
from kubesched.api.quantity import parse_quantity
from kubesched.api.selectors import InvalidSelector, parse_label_selector, parse_node_selector
from kubesched.api.workload_api import validate_workload as validate_workload_api
from kubesched.api.workload_api import validate_workload_ref

TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
TOLERATION_OPERATORS = ["Equal", "Exists"]
#: With the TaintTolerationComparisonOperators gate, Lt and Gt compare integer taint values.
COMPARISON_OPERATORS = ["Lt", "Gt"]
COMPARISON_GATE = "TaintTolerationComparisonOperators"
_CANONICAL_INT = re.compile(r"^(0|-?[1-9][0-9]*)$")
UNSATISFIABLE_ACTIONS = ["DoNotSchedule", "ScheduleAnyway"]
INCLUSION_POLICIES = ["Honor", "Ignore"]
PROTOCOLS = ["TCP", "UDP", "SCTP"]

#: ``apimachineryvalidation.TotalAnnotationSizeLimitB``: annotations' keys and values together.
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def validate(obj: Mapping[str, Any], gates: Any = None) -> list[FieldError]:
    """Every problem with ``obj``; an empty list means the scheduler can read it. ``gates`` (a
    ``FeatureGates``) widens what is accepted as the API server's gates do (Lt/Gt tolerations)."""
    errors = _validate_meta(obj)
    if kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))) is None:
        return errors  # a kind kubesched does not serve (its own checks are not kubesched's to make)
    check = _BY_KIND.get(obj.get("kind", ""))
    if check in (validate_pod, validate_workload):  # pod specs: the gates widen their tolerations
        return errors + check(obj, comparison_operators=_gate_on(gates, COMPARISON_GATE))
    if check is not None:
        errors += check(obj)
    return errors


def _gate_on(gates: Any, name: str) -> bool:
    """A gate's value from a ``FeatureGates`` or a plain mapping (off when not given)."""
    if gates is None:
        return False
    if hasattr(gates, "enabled"):
        return bool(gates.enabled(name))
    return bool(gates.get(name, False))


def _validate_meta(obj: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        errors.append(required("metadata.name", "name or generateName is required"))
    elif name:
        name_check: Callable[[str], list[str]] = dns1123_label_errors if obj.get("kind") == "Namespace" else dns1123_subdomain_errors
        if str(obj.get("apiVersion", "")).startswith("rbac.authorization.k8s.io/"):
            name_check = path_segment_name_errors  # RBAC names may hold ':' ("system:kube-scheduler")
        errors += [invalid("metadata.name", name, msg) for msg in name_check(str(name))]
    ns = meta.get("namespace")
    if ns:
        errors += [invalid("metadata.namespace", ns, msg) for msg in dns1123_label_errors(ns)]
    errors += _validate_labels(meta.get("labels"), "metadata.labels")
    errors += _validate_annotations(meta.get("annotations"), "metadata.annotations")
    return errors


def path_segment_name_errors(name: str) -> list[str]:
    """``path.IsValidPathSegmentName``: any name that is one URL path segment."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _validate_labels(labels: Mapping[str, str] | None, path: str) -> list[FieldError]:
    errors = []
    for key, value in (labels or {}).items():
        errors += [invalid(path, key, msg) for msg in qualified_name_errors(key)]
        errors += [invalid(path, value, msg) for msg in label_value_errors(value)]
    return errors


def _validate_annotations(annotations: Mapping[str, str] | None, path: str) -> list[FieldError]:
    """``ValidateAnnotations``: qualified keys, and all of them at most 256 KiB together."""
    errors = []
    total = 0
    for key, value in (annotations or {}).items():
        errors += [invalid(path, key, msg) for msg in qualified_name_errors(key.lower())]
        total += len(key.encode()) + len(value.encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(FieldError(path, "Too long", f"must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"))
    return errors


def _validate_quantities(raw: Mapping[str, object] | None, path: str) -> list[FieldError]:
    """Quantities parse (decoding made sure of that); resource amounts must not be negative."""
    return [invalid(f"{path}[{name}]", str(quantity), "must be greater than or equal to 0")
            for name, quantity in (raw or {}).items() if parse_quantity(quantity) < 0]  # type: ignore[arg-type]


#: Sections found valid, by their JSON: a check whose errors depend on the section alone (only
#: their paths on where it is) need not run again for an equal one, as replicas of one template
#: bring. Sections with errors are checked every time (the paths differ).
_VALID_RESOURCES: JSONMemo[list[FieldError]] = JSONMemo(keep=lambda errors: not errors)
_VALID_POD_SPECS: JSONMemo[list[FieldError]] = JSONMemo(keep=lambda errors: not errors)


def _validate_resources(resources: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    """Quantities not negative, requests within limits (once per distinct section)."""
    if not resources:
        return []
    return list(_VALID_RESOURCES.get(resources, lambda: _resource_errors(resources, path)))


def _resource_errors(resources: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = _validate_quantities(resources.get("requests"), f"{path}.requests")
    errors += _validate_quantities(resources.get("limits"), f"{path}.limits")
    if errors:
        return errors
    limits = resources.get("limits") or {}
    for name, quantity in (resources.get("requests") or {}).items():
        if name in limits and parse_quantity(quantity) > parse_quantity(limits[name]):
            errors.append(invalid(f"{path}.requests", str(quantity), f"must be less than or equal to {name} limit of {limits[name]}"))
    return errors


def _validate_container(container: Mapping[str, Any], path: str, seen: set[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    name = container.get("name")
    if not name:
        errors.append(required(f"{path}.name"))
    elif name in seen:
        errors.append(FieldError(f"{path}.name", "Duplicate value", "", name))
    else:
        seen.add(name)
        errors += [invalid(f"{path}.name", name, msg) for msg in dns1123_label_errors(name)]
    if not container.get("image"):
        errors.append(required(f"{path}.image"))
    errors += _validate_resources(container.get("resources"), f"{path}.resources")
    for i, port in enumerate(container.get("ports") or []):
        errors += _validate_port(port, f"{path}.ports[{i}]")
    return errors


def _validate_port(port: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = []
    cport = port.get("containerPort", 0)
    if cport == 0:
        errors.append(required(f"{path}.containerPort"))
    elif not 1 <= cport <= 65535:
        errors.append(invalid(f"{path}.containerPort", cport, "must be between 1 and 65535, inclusive"))
    hport = port.get("hostPort", 0)
    if hport != 0 and not 1 <= hport <= 65535:
        errors.append(invalid(f"{path}.hostPort", hport, "must be between 1 and 65535, inclusive"))
    protocol = port.get("protocol", "TCP")
    if protocol not in PROTOCOLS:
        errors.append(unsupported(f"{path}.protocol", protocol, PROTOCOLS))
    return errors


def _validate_toleration(tol: Mapping[str, Any], path: str, comparison_operators: bool = False) -> list[FieldError]:
    errors = []
    key = tol.get("key", "")
    op = tol.get("operator", "Equal") or "Equal"
    if key:
        errors += [invalid(f"{path}.key", key, msg) for msg in qualified_name_errors(key)]
    if not key and op != "Exists":
        errors.append(invalid(f"{path}.operator", op, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
    operators = TOLERATION_OPERATORS + COMPARISON_OPERATORS if comparison_operators else TOLERATION_OPERATORS
    if op not in operators:
        errors.append(unsupported(f"{path}.operator", op, operators))
    elif op in COMPARISON_OPERATORS:
        errors += _comparison_value_errors(str(tol.get("value", "")), f"{path}.value")
    if op == "Exists" and tol.get("value"):
        errors.append(invalid(f"{path}.operator", tol.get("value"), "value must be empty when `operator` is 'Exists'"))
    effect = tol.get("effect", "")
    if effect and effect not in TAINT_EFFECTS:
        errors.append(unsupported(f"{path}.effect", effect, TAINT_EFFECTS))
    if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
        errors.append(invalid(f"{path}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
    return errors


def _selector_errors(spec: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    if spec is None:
        return []
    try:
        parse_label_selector(spec, path)
    except InvalidSelector as e:
        return e.errors
    return []


def _validate_affinity(affinity: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    node = affinity.get("nodeAffinity") or {}
    req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        p = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        if not req.get("nodeSelectorTerms"):
            errors.append(required(f"{p}.nodeSelectorTerms", "must have at least one node selector term"))
        errors += parse_node_selector(req, f"{p}.nodeSelectorTerms").errors
    for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        p = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = pref.get("weight", 0)
        if not 1 <= weight <= 100:
            errors.append(invalid(f"{p}.weight", weight, "must be in the range 1-100"))
        errors += parse_node_selector({"nodeSelectorTerms": [pref.get("preference") or {}]}, f"{p}.preference").errors
    for kind in ("podAffinity", "podAntiAffinity"):
        section = affinity.get(kind) or {}
        for i, term in enumerate(section.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            errors += _validate_pod_affinity_term(term, f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, weighted in enumerate(section.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            p = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            weight = weighted.get("weight", 0)
            if not 1 <= weight <= 100:
                errors.append(invalid(f"{p}.weight", weight, "must be in the range 1-100"))
            errors += _validate_pod_affinity_term(weighted.get("podAffinityTerm") or {}, f"{p}.podAffinityTerm")
    return errors


def _validate_pod_affinity_term(term: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = []
    if not term.get("topologyKey"):
        errors.append(required(f"{path}.topologyKey", "can not be empty"))
    else:
        errors += [invalid(f"{path}.topologyKey", term["topologyKey"], m) for m in qualified_name_errors(term["topologyKey"])]
    errors += _selector_errors(term.get("labelSelector"), f"{path}.labelSelector")
    errors += _selector_errors(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    return errors


def _validate_spread(constraint: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = []
    skew = constraint.get("maxSkew", 0)
    if skew <= 0:
        errors.append(invalid(f"{path}.maxSkew", skew, "must be greater than zero"))
    if not constraint.get("topologyKey"):
        errors.append(required(f"{path}.topologyKey", "can not be empty"))
    action = constraint.get("whenUnsatisfiable")
    if action not in UNSATISFIABLE_ACTIONS:
        errors.append(unsupported(f"{path}.whenUnsatisfiable", action, UNSATISFIABLE_ACTIONS))
    min_domains = constraint.get("minDomains")
    if min_domains is not None:
        if min_domains <= 0:
            errors.append(invalid(f"{path}.minDomains", min_domains, "must be greater than 0"))
        elif action != "DoNotSchedule":
            errors.append(invalid(f"{path}.minDomains", min_domains, "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"))
    for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        if constraint.get(field) is not None and constraint[field] not in INCLUSION_POLICIES:
            errors.append(unsupported(f"{path}.{field}", constraint[field], INCLUSION_POLICIES))
    errors += _selector_errors(constraint.get("labelSelector"), f"{path}.labelSelector")
    return errors


def _comparison_value_errors(value: str, path: str) -> list[FieldError]:
    """An Lt/Gt toleration compares integers: its value must be a canonical decimal int64."""
    if not _CANONICAL_INT.match(value):
        return [invalid(path, value, "must be a valid decimal integer in canonical form")]
    if not -(2**63) <= int(value) < 2**63:
        return [invalid(path, value, "must be a valid 64-bit integer")]
    return []


def validate_pod(pod: Mapping[str, Any], *, comparison_operators: bool = False) -> list[FieldError]:
    spec = pod.get("spec")
    if spec is None:
        return [required("spec")]
    return _validate_pod_spec(spec, "spec", comparison_operators)


def _validate_pod_spec(spec: Mapping[str, Any], path: str, comparison_operators: bool = False) -> list[FieldError]:
    """A pod spec's rules (once per distinct spec: they read nothing else)."""
    return list(_VALID_POD_SPECS.get([comparison_operators, spec], lambda: _pod_spec_errors(spec, path, comparison_operators)))


def _pod_spec_errors(spec: Mapping[str, Any], path: str, comparison_operators: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        errors.append(required(f"{path}.containers"))
    seen: set[str] = set()
    for i, c in enumerate(containers or []):
        errors += _validate_container(c, f"{path}.containers[{i}]", seen)
    for i, c in enumerate(spec.get("initContainers") or []):
        errors += _validate_container(c, f"{path}.initContainers[{i}]", seen)
    errors += _validate_resources(spec.get("resources"), f"{path}.resources")
    errors += _validate_quantities(spec.get("overhead"), f"{path}.overhead")
    errors += _validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    if spec.get("affinity"):
        errors += _validate_affinity(spec["affinity"], f"{path}.affinity")
    for i, tol in enumerate(spec.get("tolerations") or []):
        errors += _validate_toleration(tol, f"{path}.tolerations[{i}]", comparison_operators)
    for i, c in enumerate(spec.get("topologySpreadConstraints") or []):
        errors += _validate_spread(c, f"{path}.topologySpreadConstraints[{i}]")
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        if not gate.get("name"):
            errors.append(required(f"{path}.schedulingGates[{i}].name"))
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        errors.append(unsupported(f"{path}.preemptionPolicy", policy, ["Never", "PreemptLowerPriority"]))
    if spec.get("workloadRef") is not None:
        errors += validate_workload_ref(spec["workloadRef"], f"{path}.workloadRef")
    return errors


def validate_workload(obj: Mapping[str, Any], *, comparison_operators: bool = False) -> list[FieldError]:
    """Deployments, ReplicaSets, StatefulSets, ReplicationControllers and DaemonSets: a replica
    count that is not negative and a pod template that would make valid pods (selectors are
    checked after defaulting, by the store)."""
    spec = obj.get("spec") or {}
    errors: list[FieldError] = []
    replicas = spec.get("replicas")
    if replicas is not None and replicas < 0:
        errors.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    template = spec.get("template")
    if template is None:
        if obj.get("kind") != "ReplicationController":
            errors.append(required("spec.template"))
        return errors
    errors += _validate_labels((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
    errors += _validate_pod_spec(template.get("spec") or {}, "spec.template.spec", comparison_operators)
    return errors


def validate_node(node: Mapping[str, Any]) -> list[FieldError]:
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    errors = _validate_quantities(status.get("capacity"), "status.capacity")
    errors += _validate_quantities(status.get("allocatable"), "status.allocatable")
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(spec.get("taints") or []):
        path = f"spec.taints[{i}]"
        key = taint.get("key", "")
        if not key:
            errors.append(required(f"{path}.key"))
        else:
            errors += [invalid(f"{path}.key", key, m) for m in qualified_name_errors(key)]
        effect = taint.get("effect")
        if effect not in TAINT_EFFECTS:
            errors.append(unsupported(f"{path}.effect", effect, TAINT_EFFECTS))
        if (key, effect) in seen:
            errors.append(FieldError(path, "Duplicate value", "taints must be unique by key and effect pair", f"{key}:{effect}"))
        seen.add((key, effect))
    return errors


def validate_priority_class(pc: Mapping[str, Any]) -> list[FieldError]:
    errors = []
    value = pc.get("value")
    if value is None:
        errors.append(required("value"))
    elif value > 1_000_000_000 and not str(pc.get("metadata", {}).get("name", "")).startswith("system-"):
        errors.append(invalid("value", value, "maximum allowed value of a user defined priority is 1000000000"))
    policy = pc.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        errors.append(unsupported("preemptionPolicy", policy, ["Never", "PreemptLowerPriority"]))
    return errors


_BY_KIND: dict[str, Callable[[Mapping[str, Any]], list[FieldError]]] = {
    "Pod": validate_pod,
    "Node": validate_node,
    "PriorityClass": validate_priority_class,
    "Deployment": validate_workload,
    "ReplicaSet": validate_workload,
    "StatefulSet": validate_workload,
    "DaemonSet": validate_workload,
    "ReplicationController": validate_workload,
    "Workload": validate_workload_api,
}
