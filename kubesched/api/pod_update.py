"""``ValidatePodUpdate``: what an update of a pod (not of its status) may change in its spec.

A pod's spec is immutable but for container images, ``activeDeadlineSeconds`` (set, or lowered),
added tolerations (existing ones may only change their ``tolerationSeconds``), a negative
``terminationGracePeriodSeconds`` raised to 1, and removed scheduling gates; while a pod is
gated, its nodeSelector and required node affinity may also be narrowed. In particular
``spec.nodeName`` only changes through the binding subresource.

Specs are compared as apimachinery's ``Semantic.DeepEqual`` compares them: an absent field, a
null and an empty list, map or string are the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubesched.api.errors import FieldError, forbidden, go_map, invalid, required

UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)
MAX_INT32 = 2**31 - 1
_AFFINITY_TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def normalized(value: Any) -> Any:
    """``value`` without null or empty members, the form two semantically equal specs share."""
    if isinstance(value, Mapping):
        out = {k: normalized(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def validate_pod_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """Every reason to refuse replacing ``old``'s spec with ``new``'s (both defaulted)."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors: list[FieldError] = []
    for field in ("containers", "initContainers"):
        new_containers, old_containers = new_spec.get(field) or [], old_spec.get(field) or []
        if len(new_containers) != len(old_containers):
            return [*errors, forbidden(f"spec.{field}", "pod updates may not add or remove containers")]
        errors += _image_errors(new_containers, f"spec.{field}")
    deadline = _active_deadline_errors(new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds"))
    if deadline is not None:
        return [*errors, deadline]
    if old_spec.get("activeDeadlineSeconds") is not None and new_spec.get("activeDeadlineSeconds") is None:
        errors.append(invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"))
    errors += _toleration_errors(new_spec.get("tolerations") or [], old_spec.get("tolerations") or [])
    errors += _gate_errors(new_spec.get("schedulingGates") or [], old_spec.get("schedulingGates") or [])
    if normalized(new_spec) == normalized(old_spec):
        return errors
    munged = _munged(new_spec, old_spec)
    if old_spec.get("schedulingGates"):
        errors += _relax_gated(munged, old_spec)
    if normalized(munged) != normalized(old_spec):
        errors.append(forbidden("spec", "pod updates may not change fields other than "
                                + ",".join(UPDATABLE_POD_SPEC_FIELDS) + "\n" + spec_diff(old_spec, munged)))
    return errors


def _image_errors(containers: list[Mapping[str, Any]], path: str) -> list[FieldError]:
    errors = []
    for i, container in enumerate(containers):
        image = container.get("image") or ""
        if not image:
            errors.append(required(f"{path}[{i}].image"))
        elif image.strip() != image:
            errors.append(invalid(f"{path}[{i}].image", image, "must not have leading or trailing whitespace"))
    return errors


def _active_deadline_errors(new: int | None, old: int | None) -> FieldError | None:
    """The two changes that stop validation at once: out of range, or raised."""
    if new is None:
        return None
    if new < 0 or new > MAX_INT32:
        return invalid("spec.activeDeadlineSeconds", new, f"must be between 0 and {MAX_INT32}, inclusive")
    if old is not None and old < new:
        return invalid("spec.activeDeadlineSeconds", new, "must be less than or equal to previous value")
    return None


def _toleration_errors(new: list[Mapping[str, Any]], old: list[Mapping[str, Any]]) -> list[FieldError]:
    """``validateOnlyAddedTolerations``: every old toleration is still there, its seconds aside."""
    candidates = [normalized(t) for t in new]
    for toleration in old:
        if not any(normalized({**toleration, "tolerationSeconds": c.get("tolerationSeconds")}) == c for c in candidates):
            return [forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")]
    return []


def _gate_errors(new: list[Mapping[str, Any]], old: list[Mapping[str, Any]]) -> list[FieldError]:
    """``validateOnlyDeletedSchedulingGates``."""
    known = {g.get("name") for g in old}
    return [forbidden(f"spec.schedulingGates[{i}].name", f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'")
            for i, g in enumerate(new) if g.get("name") not in known]


def _munged(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` with the fields that may change set back to ``old``'s."""
    munged = dict(new)
    for field in ("containers", "initContainers"):
        if field in munged:
            munged[field] = [{**c, "image": o.get("image")} for c, o in zip(munged[field] or [], old.get(field) or [])]
    for field in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        _take(munged, old, field)
    grace, old_grace = munged.get("terminationGracePeriodSeconds"), old.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    return munged


def _take(into: dict[str, Any], source: Mapping[str, Any], field: str) -> None:
    if field in source:
        into[field] = source[field]
    else:
        into.pop(field, None)


def _relax_gated(munged: dict[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """A gated pod's nodeSelector may gain entries and its required node affinity terms may gain
    requirements (``validateNodeSelectorMutation``, ``validateNodeAffinityMutation``)."""
    errors: list[FieldError] = []
    selector, old_selector = munged.get("nodeSelector") or {}, old.get("nodeSelector") or {}
    if selector != old_selector:
        if any(selector.get(k) != v for k, v in old_selector.items()):
            errors.append(invalid("spec.nodeSelector", go_map(selector),
                                  "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
        _take(munged, old, "nodeSelector")
    affinity, old_affinity = dict(munged.get("affinity") or {}), old.get("affinity") or {}
    node_affinity, old_node_affinity = affinity.get("nodeAffinity"), old_affinity.get("nodeAffinity")
    if normalized(node_affinity) != normalized(old_node_affinity):
        errors += _node_affinity_errors(node_affinity or {}, old_node_affinity or {})
        _take(affinity, old_affinity, "nodeAffinity")
        munged["affinity"] = affinity
    return errors


def _node_affinity_errors(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    old_terms = (old.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    new_terms = (new.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    if not old_terms:
        return []
    if len(old_terms) != len(new_terms):
        return [invalid(_AFFINITY_TERMS, _json(new_terms), "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]
    return [invalid(f"{_AFFINITY_TERMS}[{i}]", _json(term), "only additions are allowed (no mutations or deletions)")
            for i, (term, old_term) in enumerate(zip(new_terms, old_terms)) if not _only_additions(term, old_term)]


def _only_additions(term: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Every requirement of the old term is still in the new one."""
    for field in ("matchExpressions", "matchFields"):
        new_reqs = [normalized(r) for r in term.get(field) or []]
        if any(normalized(r) not in new_reqs for r in old.get(field) or []):
            return False
    return True


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def spec_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The fields that differ, one ``-``/``+`` pair each (upstream prints a ``cmp.Diff`` of the Go
    structs; the fields it names are the same)."""
    before, after = normalized(old), normalized(new)
    lines = []
    for field in sorted(set(before) | set(after)):
        if before.get(field) != after.get(field):
            lines += [f"- {field}: {_json(before.get(field))}", f"+ {field}: {_json(after.get(field))}"]
    return "\n".join(lines)
