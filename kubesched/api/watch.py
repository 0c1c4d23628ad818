"""Watch events (upstream ``apimachinery/pkg/watch``): what a watch stream carries, whether it
comes from the embedded store or from an API server over HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str
    object: dict[str, Any]
    old: dict[str, Any] | None = None
