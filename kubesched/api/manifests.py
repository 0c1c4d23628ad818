"""Reading Kubernetes manifests: YAML or JSON files, multi-document, ``kind: List``, directories.

Loading is all-or-nothing: every document of every file is parsed and validated before the
caller sees any of them, so a bad object never leaves a cluster half-built. Each object is
decoded strictly against its kind's schema first, as ``kubectl apply``'s default server-side
strict validation would (wrong types, unknown and duplicate fields are errors), then validated.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from kubesched.api.errors import InvalidObject, ManifestError
from kubesched.api.schema_validation import DecodeError, decode, go_quote, pairs_with_duplicates, with_duplicates
from kubesched.api.validation import validate

try:
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _BaseLoader = yaml.SafeLoader

_MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(_BaseLoader):  # type: ignore[misc]  # the loader class is chosen at import (C or Python)
    """The safe loader, with mappings that remember keys given twice (strict decoding reports them)."""


def construct_mapping_with_duplicates(loader: Any, node: yaml.MappingNode) -> dict[Any, Any]:
    """A mapping, remembering the keys given twice among its own (keys that override a ``<<``
    merge are not duplicates). Built whole: a mapping that contains itself is refused."""
    own = {id(key) for key, _ in node.value if key.tag != _MERGE_TAG}
    loader.flatten_mapping(node)
    data: dict[Any, Any] = {}
    seen: set[Hashable] = set()
    duplicates: list[Any] = []
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError("while constructing a mapping", node.start_mark,
                                                    "found unhashable key", key_node.start_mark)
        if id(key_node) in own:
            if key in seen:
                duplicates.append(key)
            seen.add(key)
        data[key] = loader.construct_object(value_node, deep=True)
    return with_duplicates(data, duplicates)


StrictLoader.add_constructor("tag:yaml.org,2002:map", construct_mapping_with_duplicates)

_MAP_TAG, _SEQ_TAG, _STR_TAG = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:str"
#: Scalar tags whose constructors read the scalar alone (no nested nodes, no state).
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("null", "bool", "int", "float", "timestamp", "binary"))


#: Nesting past which a document is left to PyYAML's construction (and its recursion limit).
_FAST_DEPTH = 64


class _Unusual(Exception):
    """A document the direct construction leaves to PyYAML's (merge keys, sets, recursive
    anchors, unhashable keys, other tags, deep nesting): raised before any node was changed."""


class FastStrictLoader(StrictLoader):
    """``StrictLoader`` building each document in one recursive walk over its nodes instead of
    PyYAML's generic machinery (a generator and bookkeeping per node), three times as fast on a
    large manifest. The same objects come out: plain mappings and sequences, scalars through
    PyYAML's own constructors, anchors shared, duplicate keys remembered. Documents with anything
    else go through PyYAML's construction, which also gives its errors.

    The tag of each plain scalar (a regular expression per implicit type, tried in turn) is
    resolved once per distinct value in a file: the keys and most values of a large manifest are
    the same few hundred strings."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._resolved: dict[tuple[Any, Any, Any], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        """PyYAML's tag for a node, remembered by what it depends on when no path resolver is
        registered (with one, it also depends on where the node is)."""
        if self.yaml_path_resolvers:
            return str(super().resolve(kind, value, implicit))
        key = (kind, value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            tag = self._resolved[key] = super().resolve(kind, value, implicit)
        return tag

    def construct_document(self, node: yaml.Node) -> Any:
        try:
            return self._build(node, {}, set(), 0)
        except _Unusual:
            return super().construct_document(node)

    def _build(self, node: yaml.Node, built: dict[int, Any], building: set[int], depth: int) -> Any:
        if type(node) is yaml.ScalarNode:
            return self._scalar(node)  # immutable: an alias of a scalar needs no sharing
        key = id(node)
        if key in built:
            return built[key]
        tag = node.tag
        if key in building or depth > _FAST_DEPTH:
            raise _Unusual
        if type(node) is yaml.SequenceNode and tag == _SEQ_TAG:
            building.add(key)
            value: Any = [self._build(item, built, building, depth + 1) for item in node.value]
            building.discard(key)
        elif type(node) is yaml.MappingNode and tag == _MAP_TAG:
            building.add(key)
            value = self._mapping(node, built, building, depth + 1)
            building.discard(key)
        else:
            raise _Unusual
        built[key] = value
        return value

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        """A plain string as it is, other scalars through PyYAML's constructor of their tag (a
        merge key ``<<`` and other tags are unusual)."""
        tag = node.tag
        if tag == _STR_TAG:
            return node.value
        if tag in _SCALAR_TAGS:
            return self.yaml_constructors[tag](self, node)
        raise _Unusual

    def _mapping(self, node: yaml.MappingNode, built: dict[int, Any], building: set[int], depth: int) -> dict[Any, Any]:
        data: dict[Any, Any] = {}
        duplicates: list[Any] = []
        for key_node, value_node in node.value:
            if type(key_node) is yaml.ScalarNode:
                key = self._scalar(key_node)  # every scalar is hashable
            else:
                key = self._build(key_node, built, building, depth)
                if not isinstance(key, Hashable):
                    raise _Unusual
            if key in data:
                duplicates.append(key)
            data[key] = self._build(value_node, built, building, depth)
        return with_duplicates(data, duplicates)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def manifest_files(paths: Iterable[str | Path], skip: Iterable[str | Path] = ()) -> list[Path]:
    """The files named, with directories expanded (recursively, sorted) to their manifest files;
    ``skip``: files a directory may hold that are not manifests (the scheduler configuration
    kept beside them)."""
    skipped = {Path(p).resolve() for p in skip}
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*")
                            if p.suffix in MANIFEST_SUFFIXES and p.is_file() and p.resolve() not in skipped)
        elif path.is_file():
            files.append(path)
        else:
            raise ManifestError(str(path), "no such file or directory")
    return files


def parse_documents(text: str, source: str) -> list[dict[str, Any]]:
    """The objects in one file's text, ``List`` kinds flattened, empty documents skipped."""
    try:
        if source.endswith(".json") or text.lstrip().startswith(("{", "[")):
            docs = _json_documents(text)
        else:
            docs = list(yaml.load_all(text, Loader=FastStrictLoader))
    except yaml.YAMLError as e:
        raise ManifestError(source, f"cannot parse: {_yaml_problem(e)}") from None
    except json.JSONDecodeError as e:
        raise ManifestError(source, f"cannot parse: {e}") from None
    except RecursionError:
        raise ManifestError(source, "cannot parse: the document is nested too deeply") from None
    objects: list[dict[str, Any]] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        objects += _flatten(doc, f"{source}#{index}")
    return objects


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's error on one line: the problem and where (its own text spans several lines)."""
    problem = getattr(error, "problem", None) or getattr(error, "context", None) or str(error).splitlines()[0]
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _json_documents(text: str) -> list[Any]:
    decoder = json.JSONDecoder(object_pairs_hook=pairs_with_duplicates)
    docs: list[Any] = []
    pos = 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)
    return docs


def _flatten(doc: object, where: str) -> list[dict[str, Any]]:
    if isinstance(doc, list):
        return [obj for i, item in enumerate(doc) for obj in _flatten(item, f"{where}[{i}]")]
    if not isinstance(doc, dict):
        raise ManifestError(where, f"expected a Kubernetes object, got {type(doc).__name__}")
    kind = doc.get("kind")
    if not kind or not isinstance(kind, str):
        raise ManifestError(where, "Object 'Kind' is missing")
    if not doc.get("apiVersion") or not isinstance(doc["apiVersion"], str):
        raise ManifestError(where, "Object 'apiVersion' is missing")
    if kind == "List" or (kind.endswith("List") and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(where, f"items: expected a list of objects, got {type(items).__name__}")
        return [obj for i, item in enumerate(items) for obj in _flatten(item, f"{where}.items[{i}]")]
    return [doc]


def load(paths: Iterable[str | Path], skip: Iterable[str | Path] = ()) -> list[dict[str, Any]]:
    """Every object in ``paths`` (directories' files but ``skip``), decoded and validated; raises on
    the first file or object that is wrong."""
    objects: list[dict[str, Any]] = []
    for path in manifest_files(paths, skip):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ManifestError(str(path), f"cannot read: {e}") from e
        parsed = parse_documents(text, str(path))
        check_all(parsed, str(path))
        objects += parsed
    return objects


def check_all(objects: Iterable[dict[str, Any]], source: str = "") -> None:
    """Decode each object strictly, then validate it; the first problem raises, naming the object."""
    for obj in objects:
        check_object(obj, source)


def check_object(obj: dict[str, Any], source: str = "") -> None:
    """Strict decoding (types, unknown and duplicate fields) and then validation of one object."""
    try:
        problems = decode(obj, obj["apiVersion"], obj["kind"])
    except DecodeError as e:
        raise ManifestError(source, f"{describe(obj)}: {e.path}: {e.detail}") from None
    if problems:
        raise ManifestError(source, f"{describe(obj)}: strict decoding error: {', '.join(problems.messages())}")
    errors = validate(obj)
    if errors:
        raise InvalidObject(obj["kind"], _key(obj), errors, source)


def describe(obj: dict[str, Any]) -> str:
    """``Kind namespace/name`` (or ``Kind name``), as far as the object says, for error messages."""
    return f"{obj.get('kind')} {_key(obj)}"


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = meta.get("namespace")
    return go_quote(f"{namespace}/{name}" if namespace else str(name))[1:-1]


def iter_kind(objects: Iterable[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (o for o in objects if o.get("kind") == kind)
