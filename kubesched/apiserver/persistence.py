"""Durable storage for the object store in one SQLite file, the way kine keeps Kubernetes in SQL:
one table of revisions, the row id *is* the resourceVersion, a delete is a tombstone row.

Every committed write is inserted (autocommit, WAL, ``synchronous=NORMAL``: durable across a
crash of the process) before the API call that made it returns. On open, the newest revision of
each key is loaded back with its resourceVersion, the store's counter resumes from the highest
id, and older revisions are compacted away; the store's watch history starts empty, so a watcher
resuming from before the restart gets 410 Gone and relists, as after an etcd compaction.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import orjson

from kubesched.api.kinds import Kind, custom_resource_kind, kind_for_resource
from kubesched.api.watch import DELETED, WatchEvent
from kubesched.apiserver.store import ObjectStore

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kine (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    created INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0,
    value BLOB
);
CREATE INDEX IF NOT EXISTS kine_name ON kine (name, id);
"""


def key_of(kind: Kind, obj: dict) -> str:
    """``/registry/<group>/<resource>/<namespace>/<name>`` (``core`` for the legacy group)."""
    meta = obj["metadata"]
    ns = meta.get("namespace") or ""
    return f"/registry/{kind.group or 'core'}/{kind.resource}/{ns}/{meta['name']}"


def _kind_of_key(key: str, obj: dict) -> Kind | None:
    """The kind stored under ``key``: a built-in one, or else a custom resource of the object's
    group (the store serves it again once the restored CRDs are indexed)."""
    parts = key.split("/")
    if len(parts) < 6:
        return None
    group = "" if parts[2] == "core" else parts[2]
    builtin = kind_for_resource(group, parts[3])
    if builtin is not None or "." not in group:
        return builtin
    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    return custom_resource_kind(group, version, parts[3])


class SQLitePersistence:
    """Attach to an ``ObjectStore`` with ``attach``; ``close`` when the server stops."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        self.writes = 0

    def attach(self, store: ObjectStore) -> int:
        """Restore ``store`` from the file (or seed the file from a fresh store); returns the number of
        objects loaded. From now on every write of the store lands in the file."""
        newest = self.db.execute("SELECT MAX(id) FROM kine").fetchone()[0]
        if newest is None:
            self._seed(store)
            loaded = 0
        else:
            loaded = self._restore(store, newest)
            self.compact()
        store.write_hooks.append(self.record)
        return loaded

    def _seed(self, store: ObjectStore) -> None:
        rows = []
        for kind in list(store.kinds()):
            for obj in store.iter_all(kind):
                rows.append((int(obj["metadata"]["resourceVersion"]), key_of(kind, obj), 0, orjson.dumps(obj)))
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO kine (id, name, deleted, value) VALUES (?, ?, ?, ?)", rows)
        self.db.execute("COMMIT")

    def _restore(self, store: ObjectStore, newest: int) -> int:
        query = ("SELECT k.name, k.value FROM kine k JOIN (SELECT name, MAX(id) AS id FROM kine GROUP BY name) m "
                 "ON k.id = m.id WHERE k.deleted = 0")
        objects: list[tuple[Kind, dict]] = []
        for name, value in self.db.execute(query):
            obj = orjson.loads(value)
            kind = _kind_of_key(name, obj)
            if kind is None:
                log.warning("skipping stored key of a kind this server does not serve: %s", name)
                continue
            objects.append((kind, obj))
        store.restore(objects, newest)
        return len(objects)

    def record(self, rv: int, kind: Kind, event: WatchEvent) -> None:
        deleted = 1 if event.type == DELETED else 0
        value = None if deleted else orjson.dumps(event.object)
        self.db.execute("INSERT INTO kine (id, name, deleted, value) VALUES (?, ?, ?, ?)",
                        (rv, key_of(kind, event.object), deleted, value))
        self.writes += 1

    def compact(self) -> None:
        """Drop every revision but the newest of each key, and tombstones but the newest row overall
        (which keeps the resourceVersion counter)."""
        newest = self.db.execute("SELECT MAX(id) FROM kine").fetchone()[0]
        if newest is None:
            return
        self.db.execute("BEGIN")
        self.db.execute("DELETE FROM kine WHERE id NOT IN (SELECT MAX(id) FROM kine GROUP BY name)")
        self.db.execute("DELETE FROM kine WHERE deleted = 1 AND id <> ?", (newest,))
        self.db.execute("COMMIT")

    def close(self) -> None:
        try:
            self.db.close()
        except sqlite3.Error:
            log.exception("closing %s", self.path)
