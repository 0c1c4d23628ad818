"""Values computed from a section of an object, kept by the section's canonical JSON.

Replicas of one template carry equal sections (resources, a whole pod spec), and some answers
depend on a section alone: whether it is valid, a pod's QoS class. Encoding a section with orjson
costs far less than the exact checks and quantity arithmetic it saves. The memo is bounded: it
forgets everything once it holds ``size`` sections, so an unending stream of distinct ones costs
one encoding each and a bounded amount of memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import orjson

V = TypeVar("V")


def _always(value: object) -> bool:
    return True


class JSONMemo(Generic[V]):
    """``compute()`` per distinct section; ``keep`` says which values are worth remembering."""

    def __init__(self, size: int = 1024, keep: Callable[[V], bool] = _always) -> None:
        self._values: dict[bytes, V] = {}
        self._size = size
        self._keep = keep

    def get(self, section: object, compute: Callable[[], V]) -> V:
        """The value for ``section`` (computed by ``compute`` unless an equal section's was kept).
        A section orjson cannot encode is computed every time."""
        try:
            key = orjson.dumps(section, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            return compute()
        if key in self._values:
            return self._values[key]
        value = compute()
        if self._keep(value):
            if len(self._values) >= self._size:
                self._values.clear()
            self._values[key] = value
        return value
