"""Server-side apply and ``metadata.managedFields``, good enough for ``kubectl apply --server-side``.

Field ownership is kept as upstream writes it (``fieldsV1``: ``f:`` for a map field, ``k:{...}``
for an element of a keyed list, ``v:`` for an element of a set). An apply by manager M:

1. finds the fields M applied last time and no longer applies, and removes those nobody else owns;
2. merges the applied configuration into the live object (maps recursively, keyed lists by their
   key, other lists replaced);
3. refuses, with upstream's 409 message, to change a field another manager owns to a different
   value, unless ``force=true``, which moves the ownership to M.

Writes that are not applies but carry ``fieldManager`` (kubectl create/edit/label/client-side
apply) record an ``Update`` entry for the fields they changed, so conflicts can be seen.
Not modelled: per-version schemas, ``x-kubernetes-list-map-keys`` with several keys (the merge key
alone identifies an element), atomic maps, and the client-side-apply upgrade path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from kubesched.api.apierrors import Conflict
from kubesched.apiserver.patch import Field, fields_of

Path = tuple[str, ...]

_IGNORED_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}
_IGNORED_TOP = {"apiVersion", "kind", "status"}


# --- field sets ----------------------------------------------------------------------------------
def _key_segment(element: Mapping, key: str) -> str:
    return "k:" + orjson.dumps({key: element.get(key)}).decode()


def _value_segment(value: Any) -> str:
    return "v:" + orjson.dumps(value).decode()


def leaf_paths(obj: Mapping, type_name: str, *, include_status: bool = False) -> set[Path]:
    """Every owned leaf of ``obj`` (scalars, atomic lists, list elements' markers)."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in _IGNORED_TOP and not (key == "status" and include_status):
            continue
        if key == "metadata" and isinstance(value, Mapping):
            meta = {k: v for k, v in value.items() if k not in _IGNORED_META}
            _walk(meta, fields_of("ObjectMeta"), ("f:metadata",), out)
            continue
        _walk_value(value, fields_of(type_name).get(key, Field()), ("f:" + key,), out)
    return out


def _walk(obj: Mapping, fields: Mapping[str, Field], prefix: Path, out: set[Path]) -> None:
    for key, value in obj.items():
        _walk_value(value, fields.get(key, Field()), (*prefix, "f:" + key), out)


def _walk_value(value: Any, meta: Field, path: Path, out: set[Path]) -> None:
    if isinstance(value, Mapping) and value:
        out.add((*path, "."))
        _walk(value, fields_of(meta.type), path, out)
    elif isinstance(value, list) and meta.merge:
        if not value:
            out.add(path)
        for element in value:
            if meta.merge_key and isinstance(element, Mapping):
                seg = (*path, _key_segment(element, meta.merge_key))
                out.add((*seg, "."))
                _walk(element, fields_of(meta.type), seg, out)
            else:
                out.add((*path, _value_segment(element)))
    else:
        out.add(path)


def to_fields_v1(paths: Iterable[Path]) -> dict:
    root: dict = {}
    for path in sorted(paths):
        node = root
        for seg in path:
            node = node.setdefault(seg, {})
    return root


def from_fields_v1(tree: Mapping | None, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for seg, child in (tree or {}).items():
        path = (*prefix, seg)
        if child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


# --- reading and editing objects along field paths ---------------------------------------------------
_MISSING = object()


def _step(cur: Any, seg: str) -> Any:
    if seg.startswith("f:"):
        return cur.get(seg[2:], _MISSING) if isinstance(cur, Mapping) else _MISSING
    if seg.startswith("k:") and isinstance(cur, list):
        want = orjson.loads(seg[2:])
        return next((e for e in cur if isinstance(e, Mapping) and all(e.get(k) == v for k, v in want.items())), _MISSING)
    if seg.startswith("v:") and isinstance(cur, list):
        want = orjson.loads(seg[2:])
        return want if want in cur else _MISSING
    return _MISSING


def value_at(obj: Any, path: Path) -> Any:
    cur = obj
    for seg in path:
        if seg == ".":
            return cur
        cur = _step(cur, seg)
        if cur is _MISSING:
            return _MISSING
    return cur


def _remove_path(obj: dict, path: Path) -> None:
    """Remove the leaf at ``path`` (a ``.`` marker removes the container itself)."""
    if path and path[-1] == ".":
        path = path[:-1]
    if not path:
        return
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    seg = path[-1]
    if seg.startswith("f:") and isinstance(parent, dict):
        parent.pop(seg[2:], None)
    elif isinstance(parent, list):
        target = _step(parent, seg)
        if target is not _MISSING:
            parent.remove(target)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _merge(live: Any, applied: Any, meta: Field) -> Any:
    if isinstance(applied, Mapping) and isinstance(live, Mapping):
        fields = fields_of(meta.type)
        out = dict(live)
        for key, value in applied.items():
            out[key] = _merge(live.get(key), value, fields.get(key, Field()))
        return out
    if isinstance(applied, list) and isinstance(live, list) and meta.merge:
        if meta.merge_key is None:
            return list(live) + [v for v in applied if v not in live]
        items = list(live)
        for element in applied:
            if not isinstance(element, Mapping):
                continue
            at = next((i for i, e in enumerate(items) if isinstance(e, Mapping) and e.get(meta.merge_key) == element.get(meta.merge_key)), None)
            if at is None:
                items.append(_deep_copy(element))
            else:
                items[at] = _merge(items[at], element, Field(meta.type))
        return items
    return _deep_copy(applied)


# --- managedFields entries ---------------------------------------------------------------------
def _entries(obj: Mapping) -> list[dict]:
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _entry(manager: str, operation: str, api_version: str, now: str, paths: set[Path], subresource: str = "") -> dict:
    entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
             "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _owned(entry: Mapping) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1"))


def _same_entry(entry: Mapping, manager: str, operation: str, subresource: str) -> bool:
    return (entry.get("manager") == manager and entry.get("operation") == operation
            and (entry.get("subresource") or "") == subresource)


def record_update(old: Mapping | None, new: dict, manager: str, api_version: str, kind_name: str, now: str,
                  subresource: str = "") -> None:
    """Give ``manager`` (operation Update) the fields that changed from ``old`` to ``new``, in place."""
    include_status = subresource == "status"
    new_paths = leaf_paths(new, kind_name, include_status=include_status)
    if old is None:
        changed = new_paths
    else:
        changed = {p for p in new_paths if _changed(old, new, p)}
    entries = []
    mine: set[Path] = set()
    for entry in _entries(old or new):
        if _same_entry(entry, manager, "Update", subresource):
            mine = _owned(entry)
            continue
        remaining = _owned(entry) - changed
        if remaining:
            entries.append({**entry, "fieldsV1": to_fields_v1(remaining)})
    mine = {p for p in mine | changed if value_at(new, p) is not _MISSING}
    if mine:
        entries.append(_entry(manager, "Update", api_version, now, mine, subresource))
    new["metadata"]["managedFields"] = entries


def _changed(old: Mapping, new: Mapping, path: Path) -> bool:
    """A leaf changed if its value did; a container (``.``) only if it is new."""
    if path[-1] == ".":
        return value_at(old, path[:-1]) is _MISSING
    before = value_at(old, path)
    return before is _MISSING or before != value_at(new, path)


def server_side_apply(live: dict | None, applied: dict, manager: str, force: bool, kind_name: str, now: str) -> dict:
    """The object after ``manager`` applies ``applied`` to ``live`` (None: the object is created)."""
    api_version = applied.get("apiVersion", "")
    new_paths = leaf_paths(applied, kind_name)
    if live is None:
        obj = _deep_copy(applied)
        obj.setdefault("metadata", {})["managedFields"] = [_entry(manager, "Apply", api_version, now, new_paths)]
        return obj
    entries = _entries(live)
    mine = next((e for e in entries if _same_entry(e, manager, "Apply", "")), None)
    others = [e for e in entries if e is not mine]
    _check_conflicts(live, applied, new_paths, others, force)
    obj = _deep_copy(live)
    owned_by_others = set().union(*(_owned(e) for e in others)) if others else set()
    for path in sorted((_owned(mine) if mine else set()) - new_paths - owned_by_others, key=len, reverse=True):
        _remove_path(obj, path)
    top_fields = fields_of(kind_name)
    for key, value in applied.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            meta = {k: v for k, v in (value or {}).items() if k not in _IGNORED_META}
            obj["metadata"] = _merge(obj.get("metadata") or {}, meta, Field("ObjectMeta"))
            continue
        obj[key] = _merge(obj.get(key), value, top_fields.get(key, Field()))
    kept = []
    for entry in others:
        remaining = _owned(entry) - new_paths if force else _owned(entry)
        if remaining:
            kept.append({**entry, "fieldsV1": to_fields_v1(remaining)})
    kept.append(_entry(manager, "Apply", api_version, now, new_paths))
    obj["metadata"]["managedFields"] = kept
    return obj


def _check_conflicts(live: Mapping, applied: Mapping, paths: set[Path], others: list[dict], force: bool) -> None:
    if force:
        return
    conflicts: list[tuple[str, str]] = []
    for entry in others:
        for path in sorted(_owned(entry) & paths):
            if path[-1] == ".":
                continue
            if value_at(live, path) != value_at(applied, path):
                conflicts.append((_who(entry), _display(path)))
    if not conflicts:
        return
    raise _conflict_error(conflicts, applied)


def _who(entry: Mapping) -> str:
    """How the structured-merge-diff library names a manager in a conflict."""
    who = f'"{entry.get("manager", "")}"'
    if entry.get("subresource"):
        who += f' with subresource "{entry["subresource"]}"'
    return who + f' using {entry.get("apiVersion", "")}'


def _display(path: Path) -> str:
    parts = []
    for seg in path:
        if seg.startswith("f:"):
            parts.append("." + seg[2:])
        elif seg.startswith("k:"):
            want = orjson.loads(seg[2:])
            parts.append("[" + ",".join(f"{k}={orjson.dumps(v).decode()}" for k, v in want.items()) + "]")
        elif seg.startswith("v:"):
            parts.append("[=" + seg[2:] + "]")
    return "".join(parts)


def _conflict_error(conflicts: list[tuple[str, str]], applied: Mapping) -> Conflict:
    """``Apply failed with N conflict(s): conflict with "m": .spec.x`` as the structured-merge-diff library says."""
    n = len(conflicts)
    managers = sorted({m for m, _ in conflicts})
    if n == 1:
        body = f"conflict with {conflicts[0][0]}: {conflicts[0][1]}"
    elif len(managers) == 1:
        body = f"conflicts with {managers[0]}:\n" + "\n".join(f"- {f}" for _, f in conflicts)
    else:
        body = "\n".join(f"conflict with {m}: {f}" for m, f in conflicts)
    message = f"Apply failed with {n} conflict{'s' if n > 1 else ''}: {body}"
    meta = applied.get("metadata") or {}
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {m}", "field": f} for m, f in conflicts]
    return Conflict(message, name=meta.get("name", ""), causes=causes)
