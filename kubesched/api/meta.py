"""Helpers over API objects as JSON dicts, shared by the store, the clients and the controllers:
a fast deep copy (upstream ``runtime.DeepCopyJSON``) and the condition update that the pod
utilities and ``meta.SetStatusCondition`` perform."""

from __future__ import annotations

from typing import Any

from kubesched.utils.clock import rfc3339

#: The types ``json_copy`` keeps as they are without a call: JSON's scalars, most of any object.
_SCALARS = frozenset((str, int, float, bool, type(None)))


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars), several times faster than deepcopy.
    Scalars inside are taken over in place, without a call each."""
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _SCALARS else json_copy(v) for v in value]
    return value


def set_condition(conditions: list[dict[str, Any]], condition: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """``podutil.UpdatePodCondition``: replace the condition of that type, moving lastTransitionTime
    only when the status changes."""
    stamp = rfc3339(now)
    out = []
    found = False
    for existing in conditions:
        if existing.get("type") != condition["type"]:
            out.append(existing)
            continue
        found = True
        merged = {"lastProbeTime": None, **condition}
        if existing.get("status") == condition.get("status"):
            merged["lastTransitionTime"] = existing.get("lastTransitionTime", stamp)
        else:
            merged["lastTransitionTime"] = stamp
        out.append(merged)
    if not found:
        out.append({"lastProbeTime": None, "lastTransitionTime": stamp, **condition})
    return out
