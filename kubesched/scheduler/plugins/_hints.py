"""Readers of the raw API objects queueing hints receive (``old`` / ``new`` are plain dicts)."""

from __future__ import annotations

from collections.abc import Mapping


def uid(obj: Mapping) -> str:
    return (obj.get("metadata") or {}).get("uid") or ""


def labels(obj: Mapping) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def is_same_pod(pod: Mapping, other: Mapping | None) -> bool:
    """Whether ``other`` is the rejected ``pod`` itself: several hints queue only on its own update."""
    return other is not None and uid(other) == uid(pod)
