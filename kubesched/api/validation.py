"""Validation of the objects the scheduler reads, with apiserver's field paths and messages.

Only what would make the scheduler misread an object is checked (names, quantities, selectors,
taints and tolerations, spread constraints, ports); apiserver checks more, kubesched does not
pretend to. ``validate(obj)`` returns every problem found, so a user fixes them in one go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.api.errors import FieldError, InvalidQuantity, invalid, required, unsupported
from kubesched.api.names import dns1123_label_errors, dns1123_subdomain_errors, label_value_errors, qualified_name_errors
from kubesched.api.quantity import parse_quantity
from kubesched.api.selectors import InvalidSelector, parse_label_selector, parse_node_selector

TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
TOLERATION_OPERATORS = ["Equal", "Exists"]
UNSATISFIABLE_ACTIONS = ["DoNotSchedule", "ScheduleAnyway"]
INCLUSION_POLICIES = ["Honor", "Ignore"]
PROTOCOLS = ["TCP", "UDP", "SCTP"]


def validate(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every problem with ``obj``; an empty list means the scheduler can read it."""
    errors = _validate_meta(obj)
    check = _BY_KIND.get(obj.get("kind", ""))
    if check is not None:
        errors += check(obj)
    return errors


def _validate_meta(obj: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return [required("metadata")]
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        errors.append(required("metadata.name", "name or generateName is required"))
    elif name:
        name_check = dns1123_label_errors if obj.get("kind") == "Namespace" else dns1123_subdomain_errors
        errors += [invalid("metadata.name", name, msg) for msg in name_check(str(name))]
    ns = meta.get("namespace")
    if ns:
        errors += [invalid("metadata.namespace", ns, msg) for msg in dns1123_label_errors(str(ns))]
    errors += _validate_labels(meta.get("labels"), "metadata.labels")
    return errors


def _validate_labels(labels: object, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [invalid(path, str(labels), "must be a map of strings")]
    errors = []
    for key, value in labels.items():
        errors += [invalid(path, key, msg) for msg in qualified_name_errors(str(key))]
        if not isinstance(value, str):
            errors.append(invalid(f"{path}[{key}]", value, "label values must be strings"))
            continue
        errors += [invalid(path, value, msg) for msg in label_value_errors(value)]
    return errors


def _validate_quantities(raw: object, path: str) -> list[FieldError]:
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        return [invalid(path, str(raw), "must be a map of resource names to quantities")]
    errors = []
    for name, quantity in raw.items():
        try:
            amount = parse_quantity(quantity)
        except InvalidQuantity as e:
            errors.append(invalid(f"{path}[{name}]", str(quantity), e.detail))
            continue
        if amount < 0:
            errors.append(invalid(f"{path}[{name}]", str(quantity), "must be greater than or equal to 0"))
    return errors


def _validate_resources(resources: object, path: str) -> list[FieldError]:
    if not resources:
        return []
    if not isinstance(resources, Mapping):
        return [invalid(path, str(resources), "must be an object")]
    errors = _validate_quantities(resources.get("requests"), f"{path}.requests")
    errors += _validate_quantities(resources.get("limits"), f"{path}.limits")
    if errors:
        return errors
    limits = resources.get("limits") or {}
    for name, quantity in (resources.get("requests") or {}).items():
        if name in limits and parse_quantity(quantity) > parse_quantity(limits[name]):
            errors.append(invalid(f"{path}.requests", str(quantity), f"must be less than or equal to {name} limit of {limits[name]}"))
    return errors


def _validate_container(container: object, path: str, seen: set[str]) -> list[FieldError]:
    if not isinstance(container, Mapping):
        return [invalid(path, str(container), "must be an object")]
    errors: list[FieldError] = []
    name = container.get("name")
    if not name:
        errors.append(required(f"{path}.name"))
    elif name in seen:
        errors.append(FieldError(f"{path}.name", "Duplicate value", "", name))
    else:
        seen.add(name)
        errors += [invalid(f"{path}.name", name, msg) for msg in dns1123_label_errors(str(name))]
    if not container.get("image"):
        errors.append(required(f"{path}.image"))
    errors += _validate_resources(container.get("resources"), f"{path}.resources")
    for i, port in enumerate(container.get("ports") or []):
        errors += _validate_port(port, f"{path}.ports[{i}]")
    return errors


def _validate_port(port: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = []
    cport = port.get("containerPort")
    if not isinstance(cport, int) or not 1 <= cport <= 65535:
        errors.append(invalid(f"{path}.containerPort", cport, "must be between 1 and 65535, inclusive"))
    hport = port.get("hostPort", 0)
    if not isinstance(hport, int) or not 0 <= hport <= 65535:
        errors.append(invalid(f"{path}.hostPort", hport, "must be between 1 and 65535, inclusive"))
    protocol = port.get("protocol", "TCP")
    if protocol not in PROTOCOLS:
        errors.append(unsupported(f"{path}.protocol", protocol, PROTOCOLS))
    return errors


def _validate_toleration(tol: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = []
    key = tol.get("key", "")
    op = tol.get("operator", "Equal") or "Equal"
    if key:
        errors += [invalid(f"{path}.key", key, msg) for msg in qualified_name_errors(key)]
    if not key and op != "Exists":
        errors.append(invalid(f"{path}.operator", op, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
    if op not in TOLERATION_OPERATORS:
        errors.append(unsupported(f"{path}.operator", op, TOLERATION_OPERATORS))
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
        weight = pref.get("weight")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            errors.append(invalid(f"{p}.weight", weight, "must be in the range 1-100"))
        errors += parse_node_selector({"nodeSelectorTerms": [pref.get("preference") or {}]}, f"{p}.preference").errors
    for kind in ("podAffinity", "podAntiAffinity"):
        section = affinity.get(kind) or {}
        for i, term in enumerate(section.get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            errors += _validate_pod_affinity_term(term, f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, weighted in enumerate(section.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            p = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            weight = weighted.get("weight")
            if not isinstance(weight, int) or not 1 <= weight <= 100:
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
    skew = constraint.get("maxSkew")
    if not isinstance(skew, int) or skew <= 0:
        errors.append(invalid(f"{path}.maxSkew", skew, "must be greater than zero"))
    if not constraint.get("topologyKey"):
        errors.append(required(f"{path}.topologyKey", "can not be empty"))
    action = constraint.get("whenUnsatisfiable")
    if action not in UNSATISFIABLE_ACTIONS:
        errors.append(unsupported(f"{path}.whenUnsatisfiable", action, UNSATISFIABLE_ACTIONS))
    min_domains = constraint.get("minDomains")
    if min_domains is not None:
        if not isinstance(min_domains, int) or min_domains <= 0:
            errors.append(invalid(f"{path}.minDomains", min_domains, "must be greater than 0"))
        elif action != "DoNotSchedule":
            errors.append(invalid(f"{path}.minDomains", min_domains, "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"))
    for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        if constraint.get(field) is not None and constraint[field] not in INCLUSION_POLICIES:
            errors.append(unsupported(f"{path}.{field}", constraint[field], INCLUSION_POLICIES))
    errors += _selector_errors(constraint.get("labelSelector"), f"{path}.labelSelector")
    return errors


def validate_pod(pod: Mapping[str, Any]) -> list[FieldError]:
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    errors: list[FieldError] = []
    containers = spec.get("containers")
    if not containers:
        errors.append(required("spec.containers"))
    seen: set[str] = set()
    for i, c in enumerate(containers or []):
        errors += _validate_container(c, f"spec.containers[{i}]", seen)
    for i, c in enumerate(spec.get("initContainers") or []):
        errors += _validate_container(c, f"spec.initContainers[{i}]", seen)
    errors += _validate_resources(spec.get("resources"), "spec.resources")
    errors += _validate_quantities(spec.get("overhead"), "spec.overhead")
    node_selector = spec.get("nodeSelector")
    if node_selector is not None:
        errors += _validate_labels(node_selector, "spec.nodeSelector")
    if spec.get("affinity"):
        errors += _validate_affinity(spec["affinity"], "spec.affinity")
    for i, tol in enumerate(spec.get("tolerations") or []):
        errors += _validate_toleration(tol, f"spec.tolerations[{i}]")
    for i, c in enumerate(spec.get("topologySpreadConstraints") or []):
        errors += _validate_spread(c, f"spec.topologySpreadConstraints[{i}]")
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        if not gate.get("name"):
            errors.append(required(f"spec.schedulingGates[{i}].name"))
    if spec.get("priority") is not None and not isinstance(spec["priority"], int):
        errors.append(invalid("spec.priority", spec["priority"], "must be an integer"))
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        errors.append(unsupported("spec.preemptionPolicy", policy, ["Never", "PreemptLowerPriority"]))
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
    if not isinstance(value, int):
        errors.append(required("value") if value is None else invalid("value", value, "must be an integer"))
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
}
