"""Event objects in their two API shapes: ``events.k8s.io/v1`` (what the scheduler writes) and
``core/v1`` (what ``kubectl describe`` and ``kubectl get events`` read). One stored object serves
both, converted as apiserver's conversion functions do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A ``v1.ObjectReference`` to ``obj`` (kind, apiVersion, name; namespace, uid and
    resourceVersion when set), as events and owner checks name an object."""
    meta = obj.get("metadata") or {}
    ref = {"kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", ""), "name": meta.get("name", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


def v1_to_core(event: dict[str, Any]) -> dict[str, Any]:
    """``events.k8s.io/v1`` Event -> ``core/v1`` Event."""
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": dict(event.get("metadata") or {}),
        "involvedObject": event.get("regarding") or {},
        "reason": event.get("reason", ""),
        "message": event.get("note", ""),
        "type": event.get("type", ""),
        "eventTime": event.get("eventTime"),
        "action": event.get("action", ""),
        "reportingComponent": event.get("reportingController", ""),
        "reportingInstance": event.get("reportingInstance", ""),
        "source": dict(event.get("deprecatedSource") or {}),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount", 0) or 0,
    }
    if event.get("related"):
        core["related"] = event["related"]
    if event.get("series"):
        core["series"] = {"count": event["series"].get("count", 0), "lastObservedTime": event["series"].get("lastObservedTime")}
    return core


def core_to_v1(core: dict[str, Any]) -> dict[str, Any]:
    """``core/v1`` Event -> ``events.k8s.io/v1`` Event."""
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": dict(core.get("metadata") or {}),
        "eventTime": core.get("eventTime"),
        "reportingController": core.get("reportingComponent") or (core.get("source") or {}).get("component", ""),
        "reportingInstance": core.get("reportingInstance", ""),
        "action": core.get("action", ""),
        "reason": core.get("reason", ""),
        "regarding": core.get("involvedObject") or {},
        "note": core.get("message", ""),
        "type": core.get("type", ""),
        "deprecatedSource": core.get("source") or {},
        "deprecatedFirstTimestamp": core.get("firstTimestamp"),
        "deprecatedLastTimestamp": core.get("lastTimestamp"),
        "deprecatedCount": core.get("count", 0) or 0,
    }
    if core.get("related"):
        event["related"] = core["related"]
    if core.get("series"):
        event["series"] = dict(core["series"])
    return event
