"""Reading Kubernetes manifests: YAML or JSON files, multi-document, ``kind: List``, directories.

Loading is all-or-nothing: every document of every file is parsed and validated before the
caller sees any of them, so a bad object never leaves a cluster half-built.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

from kubesched.api.errors import InvalidObject, ManifestError
from kubesched.api.validation import validate

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader

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


def parse_documents(text: str, source: str) -> list[dict]:
    """The objects in one file's text, ``List`` kinds flattened, empty documents skipped."""
    try:
        if source.endswith(".json") or text.lstrip().startswith(("{", "[")):
            docs = _json_documents(text)
        else:
            docs = list(yaml.load_all(text, Loader=_Loader))
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise ManifestError(source, f"cannot parse: {e}") from e
    objects: list[dict] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        objects += _flatten(doc, f"{source}#{index}")
    return objects


def _json_documents(text: str) -> list:
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        doc, pos = decoder.raw_decode(text, pos)
        docs.append(doc)
    return docs


def _flatten(doc: object, where: str) -> list[dict]:
    if isinstance(doc, list):
        return [obj for i, item in enumerate(doc) for obj in _flatten(item, f"{where}[{i}]")]
    if not isinstance(doc, dict):
        raise ManifestError(where, f"expected a Kubernetes object, got {type(doc).__name__}")
    kind = doc.get("kind")
    if not kind or not isinstance(kind, str):
        raise ManifestError(where, "Object 'Kind' is missing")
    if not doc.get("apiVersion"):
        raise ManifestError(where, "Object 'apiVersion' is missing")
    if kind == "List" or (kind.endswith("List") and "items" in doc):
        return [obj for i, item in enumerate(doc.get("items") or []) for obj in _flatten(item, f"{where}.items[{i}]")]
    return [doc]


def load(paths: Iterable[str | Path], skip: Iterable[str | Path] = ()) -> list[dict]:
    """Every object in ``paths`` (directories' files but ``skip``), validated; raises on the first
    file or object that is wrong."""
    objects: list[dict] = []
    for path in manifest_files(paths, skip):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise ManifestError(str(path), f"cannot read: {e}") from e
        objects += parse_documents(text, str(path))
    check_all(objects)
    return objects


def check_all(objects: Iterable[dict], source: str = "") -> None:
    for obj in objects:
        errors = validate(obj)
        if errors:
            meta = obj.get("metadata") or {}
            raise InvalidObject(obj["kind"], meta.get("name") or meta.get("generateName", ""), errors, source)


def iter_kind(objects: Iterable[dict], kind: str) -> Iterator[dict]:
    return (o for o in objects if o.get("kind") == kind)
