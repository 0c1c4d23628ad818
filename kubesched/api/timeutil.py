"""Time as the API spells it: RFC 3339 timestamps in object fields (``metav1.Time``)."""

from __future__ import annotations

import datetime as dt


def parse_time(raw: str | None) -> float:
    """An RFC 3339 timestamp as seconds since the epoch (0.0 when absent)."""
    if not raw:
        return 0.0
    try:
        return dt.datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
