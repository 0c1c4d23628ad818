"""The scheduler's client for the embedded cluster: ``ClusterClient``'s verbs as direct calls into
the API server's ``ObjectStore``, without HTTP or serialisation. It lives with the store (the
client layer defines only the interface, and never imports the API server)."""

from __future__ import annotations

import builtins  # annotations after the `list` verb name the builtin through it
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubesched.api.events import core_to_v1, v1_to_core
from kubesched.api.kinds import EVENT, POD, Kind
from kubesched.api.meta import json_copy, set_condition
from kubesched.api.watch import WatchEvent
from kubesched.apiserver.selectors import field_predicate
from kubesched.apiserver.store import ObjectStore
from kubesched.client.interface import EVENTS_V1, ClusterClient


class MemoryClient(ClusterClient):
    """The embedded cluster: direct calls into an ``ObjectStore``, no serialisation."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    @property
    def in_process(self) -> bool:
        return True

    async def list(self, kind: Kind, *, field_selector: str = "") -> tuple[list[dict], str]:
        items, rv = self.store.list(kind, None, field_predicate(kind, field_selector))
        return items, str(rv)

    async def watch(self, kind: Kind, resource_version: str, *, field_selector: str = "") -> AsyncIterator[builtins.list[WatchEvent]]:
        w = self.store.watch(kind, since=int(resource_version or 0), predicate=field_predicate(kind, field_selector))
        try:
            while True:
                batch = await w.next_batch()
                if not batch and w.stopped:
                    return
                yield batch
        finally:
            w.stop()

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        if kind == EVENTS_V1:
            core = self.store.try_get(EVENT, namespace, name)
            return None if core is None else core_to_v1(core)
        return self.store.try_get(kind, namespace, name)

    async def create(self, kind: Kind, obj: dict) -> dict:
        if kind == EVENTS_V1:
            return core_to_v1(self.store.create(EVENT, v1_to_core(json_copy(obj))))
        return self.store.create(kind, json_copy(obj))

    async def create_event(self, event: dict) -> None:
        """The recorder's event is built in-process of the API's types (as ``bind`` builds its
        condition), so the store does not type-check it again; the conversion to ``core/v1``
        copies what the store may change (the event's own dict and metadata; the references are
        copied here), and the stored event is not converted back for a caller that drops it."""
        core = v1_to_core(event)
        core["involvedObject"] = dict(core["involvedObject"])
        if "related" in core:
            core["related"] = dict(core["related"])
        self.store.create(EVENT, core, decoded=True)

    async def update(self, kind: Kind, obj: dict) -> dict:
        if kind == EVENTS_V1:
            return core_to_v1(self.store.update(EVENT, v1_to_core(json_copy(obj))))
        return self.store.update(kind, json_copy(obj))

    async def update_status(self, kind: Kind, obj: dict) -> dict:
        return self.store.update(kind, json_copy(obj), status_only=True)

    async def delete(self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None,
                     grace_period: int | None = None) -> None:
        self.store.delete(kind, namespace, name, uid=uid, grace_period=grace_period)

    async def bind(self, pod: dict, node_name: str) -> None:
        meta = pod["metadata"]
        self.store.bind(meta.get("namespace", "default"), meta["name"], node_name, uid=meta.get("uid"))

    async def patch_pod_status(self, pod: dict, conditions: builtins.list[dict], nominated_node_name: str | None) -> None:
        meta = pod["metadata"]
        self.store.mutate(POD, meta.get("namespace"), meta["name"], _status_patch(self.store, conditions, nominated_node_name),
                          expect_uid=meta.get("uid"))


def _status_patch(store: ObjectStore, conditions: list[dict], nominated: str | None) -> Callable[[dict], Any]:
    def apply(pod: dict) -> None:
        status = pod.setdefault("status", {})
        current = status.get("conditions") or []
        for condition in conditions:
            current = set_condition(current, condition, store.clock.wall())
        if conditions:
            status["conditions"] = current
        if nominated is not None:
            if nominated:
                status["nominatedNodeName"] = nominated
            else:
                status.pop("nominatedNodeName", None)

    return apply
