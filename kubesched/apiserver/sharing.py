"""Read-only parts that the store shares between the objects it holds.

Pods made from one template (a ReplicaSet's, a Job's, a benchmark's) carry equal containers,
tolerations, affinity and volumes, and the embedded cluster keeps each pod once in the store, with
the informers and the scheduler holding that same object. The store therefore keeps one copy of
each distinct part of the pods, nodes and events it commits (see ``PartSharer``), as
kube-apiserver's own decoding cannot but a single process can: the containers of sibling pods,
their labels and owner references, the conditions of pods bound in the same second, the whole
spec of sibling pods bound to one node. A shared part is a ``FrozenDict`` or ``FrozenList``: equal to,
and encoded like, a plain dict or list, but refusing every change, so that a writer that changes
a stored object in place (against the store's contract) fails loudly instead of changing every
pod that shares the part. Writers take a private copy (``json_copy``, ``dict(...)``) first, which
is plain again.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NoReturn

import orjson
import yaml

_READ_ONLY = "a part the store shares between objects is read-only: copy it (json_copy) before changing it"


_SECTIONS = frozenset(("metadata", "spec", "status"))


def _refuse(*_: object, **__: object) -> NoReturn:
    raise TypeError(_READ_ONLY)


class FrozenDict(dict):
    """A dict that refuses changes; a write of the value a key already holds is allowed (defaulting
    and decoding code set what is already set)."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        if key not in self or self[key] != value:
            _refuse()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            _refuse()
        return self[key]

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            _refuse()
        if default:
            return default[0]
        raise KeyError(key)

    def update(self, *other: Any, **more: Any) -> None:
        for key, value in dict(*other, **more).items():
            self[key] = value

    def __ior__(self, other: Any) -> FrozenDict:  # type: ignore[misc]  # dict.__or__ returns a plain dict
        self.update(other)
        return self

    __delitem__ = clear = popitem = _refuse

    def __copy__(self) -> dict:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[type, tuple[dict]]:
        return dict, (dict(self),)


class FrozenList(list):
    """A list that refuses changes."""

    __slots__ = ()

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse

    def __copy__(self) -> list:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[type, tuple[list]]:
        return list, (list(self),)


#: The types of the values sharing passes over as they are: JSON scalars (the bulk of an object's
#: fields) and parts shared already. One set lookup by type decides most values; anything else
#: (a dict or list of another type) is looked at with ``isinstance``.
_KEPT_TYPES = frozenset((str, int, float, bool, type(None), FrozenDict, FrozenList))


_NO_FIELDS: frozenset[str] = frozenset()
_NONE_UNIQUE: Mapping[str, frozenset[str] | None] = {}


def _shareable(value: Any) -> bool:
    """Whether ``value`` is a dict or list that is not shared yet."""
    return type(value) not in _KEPT_TYPES and isinstance(value, (dict, list)) and not isinstance(value, (FrozenDict, FrozenList))


yaml.SafeDumper.add_representer(FrozenDict, yaml.SafeDumper.represent_dict)
yaml.SafeDumper.add_representer(FrozenList, yaml.SafeDumper.represent_list)


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it replaced by a read-only equal one (scalars and
    shared parts inside are taken over without a call each)."""
    kept = _KEPT_TYPES
    if isinstance(value, dict):
        if isinstance(value, FrozenDict):
            return value
        return FrozenDict({k: v if type(v) in kept else freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        if isinstance(value, FrozenList):
            return value
        return FrozenList([v if type(v) in kept else freeze(v) for v in value])
    return value


class PartSharer:
    """One read-only copy of each distinct part recently stored.

    Parts are found by the hash of their canonical JSON and confirmed by comparing that JSON (the
    part's encoded again: keeping the encoding beside each part would cost megabytes for a cluster
    of thousands of nodes), so a collision never shares unequal parts (nor ``1`` with ``true``,
    which Python calls equal). The table remembers the ``capacity`` parts used last: pods from one
    template are created together, a part only one pod has costs nothing beyond its lookup, and
    the table's own memory is bounded. A part the table forgot stays shared by the objects that
    have it."""

    def __init__(self, capacity: int = 4096) -> None:
        self._parts: OrderedDict[int, Any] = OrderedDict()
        self.capacity = capacity

    def share(self, value: Any) -> Any:
        """The shared read-only part equal to ``value`` (``value`` itself, frozen, when new)."""
        return self._share(value) if _shareable(value) else value

    def _share(self, value: dict | list) -> Any:
        """``share`` of a dict or list not shared yet."""
        part, digest = self._find(value)
        if part is not None:
            return part
        return value if digest is None else self._keep(digest, value)

    def _find(self, value: dict | list) -> tuple[Any, int | None]:
        """The shared part equal to ``value`` (None when there is none yet) and the digest to keep
        ``value`` under (None when ``value`` is not JSON: a test's stand-in object, never shared)."""
        try:
            encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            return None, None
        digest = hash(encoded)
        part = self._parts.get(digest)
        if part is not None and orjson.dumps(part, option=orjson.OPT_SORT_KEYS) == encoded:
            self._parts.move_to_end(digest)
            return part, digest
        return None, digest

    def _keep(self, digest: int, value: dict | list) -> Any:
        """``value`` frozen, kept as the part used last under ``digest``."""
        parts = self._parts
        frozen = parts[digest] = freeze(value)
        parts.move_to_end(digest)
        if len(parts) > self.capacity:
            parts.popitem(last=False)
        return frozen

    def share_values(self, mapping: dict, unique: frozenset[str] = _NO_FIELDS) -> None:
        """Replace each dict or list value of ``mapping`` (an object the store now owns) by its
        shared part, but those of the ``unique`` fields."""
        for key, value in mapping.items():
            if type(value) not in _KEPT_TYPES and _shareable(value) and key not in unique:
                mapping[key] = self._share(value)

    def share_parts(self, obj: dict, unique: Mapping[str, frozenset[str] | None] = _NONE_UNIQUE) -> None:
        """Share the parts of ``obj`` (an object the store now owns): every top-level field but the
        metadata, which names one object, is shared whole (the spec of pods waiting from one
        template, the status of pods bound in the same second), and inside the metadata, spec and
        status each field (labels, containers, conditions) is shared on its own, for the objects
        whose spec or status as a whole differs (a bound pod's nodeName). A spec or status found
        whole is taken as it is: its fields are the shared ones already, so they are not looked up
        one by one (which replicas' specs and the statuses of pods bound in one second would cost).

        ``unique`` names the fields that name one object, as metadata does, which no other object
        shares, so looking them up would only cost the lookup and push parts that are shared out of
        the table: a top-level field mapped to None (an Event's reference to what it is about), or
        fields of a section (a running pod's IPs in its status), which make that section unique
        as a whole too."""
        for key, value in obj.items():
            if type(value) in _KEPT_TYPES or not _shareable(value):
                continue
            inner = unique.get(key, _NO_FIELDS)
            if inner is None:
                continue
            if key == "metadata":
                if isinstance(value, dict):
                    self.share_values(value)
            elif key in _SECTIONS and isinstance(value, dict):
                obj[key] = self._share_section(value, inner)
            else:
                obj[key] = self._share(value)

    def _share_section(self, section: dict, unique: frozenset[str]) -> Any:
        """``_share`` of a spec or status, whose fields are shared first when it is new; a section
        with one of its ``unique`` fields is not looked up whole."""
        if unique and not unique.isdisjoint(section):
            self.share_values(section, unique)
            return section
        part, digest = self._find(section)
        if part is not None:
            return part
        self.share_values(section)
        return section if digest is None else self._keep(digest, section)

    def __len__(self) -> int:
        return len(self._parts)
