"""The scheduler's view of the API: the few verbs it needs, whichever cluster is behind them.

``MemoryClient`` talks to the embedded ``ObjectStore`` directly; ``kubesched.cluster.kube`` talks
HTTP to ``kubesched apiserver`` or a real cluster. Everything above this interface (informers,
cache, queue, scheduler, plugins) is the same for both.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from kubesched.api.events import core_to_v1, v1_to_core
from kubesched.api.kinds import Kind, kind_for
from kubesched.cluster.store import EVENT, POD, ObjectStore, WatchEvent, json_copy, set_condition

EVENTS_V1 = kind_for("events.k8s.io/v1", "Event")
NAMESPACE = cast(Kind, kind_for("v1", "Namespace"))
#: The namespace whose UID identifies a cluster (every cluster has it; recreating the cluster changes it).
IDENTITY_NAMESPACE = "kube-system"


class ClusterClient(abc.ABC):
    """Async API verbs. Objects are plain dicts shaped as the Kubernetes JSON API shapes them."""

    @abc.abstractmethod
    async def list(self, kind: Kind) -> tuple[list[dict], str]:
        """Every object of ``kind`` and the list's resourceVersion."""

    @abc.abstractmethod
    def watch(self, kind: Kind, resource_version: str) -> AsyncIterator[list[WatchEvent]]:
        """Batches of changes after ``resource_version``; raises ``Gone`` when it is too old."""

    @abc.abstractmethod
    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict | None: ...

    @abc.abstractmethod
    async def create(self, kind: Kind, obj: dict) -> dict: ...

    @abc.abstractmethod
    async def update(self, kind: Kind, obj: dict) -> dict: ...

    @abc.abstractmethod
    async def update_status(self, kind: Kind, obj: dict) -> dict: ...

    @abc.abstractmethod
    async def delete(self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None,
                     grace_period: int | None = None) -> None: ...

    @abc.abstractmethod
    async def bind(self, pod: dict, node_name: str) -> None:
        """POST pods/binding; raises Conflict when the pod is already bound, deleted or gated."""

    @abc.abstractmethod
    async def patch_pod_status(self, pod: dict, conditions: list[dict], nominated_node_name: str | None) -> None:
        """Merge ``conditions`` into the pod's status (by type) and set ``nominatedNodeName`` when
        not None, as ``util.PatchPodStatus`` does with a strategic merge patch."""

    async def server_identity(self) -> tuple[str, str]:
        """Who the server is and how far its history goes: the UID of the ``kube-system`` namespace
        (what tools use as a cluster's identity: a server restarted without its data has a new
        one) and the current resourceVersion of a fresh list. Informers probe it after a broken
        connection to decide between watching on and relisting."""
        items, rv = await self.list(NAMESPACE)
        for ns in items:
            meta = ns.get("metadata") or {}
            if meta.get("name") == IDENTITY_NAMESPACE:
                return str(meta.get("uid") or ""), rv
        return "", rv

    async def close(self) -> None:
        return None


class MemoryClient(ClusterClient):
    """The embedded cluster: direct calls into an ``ObjectStore``, no serialisation."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    async def list(self, kind: Kind) -> tuple[list[dict], str]:
        items, rv = self.store.list(kind)
        return items, str(rv)

    async def watch(self, kind: Kind, resource_version: str) -> AsyncIterator[list[WatchEvent]]:  # type: ignore[override]
        w = self.store.watch(kind, since=int(resource_version or 0))
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

    async def patch_pod_status(self, pod: dict, conditions: list[dict], nominated_node_name: str | None) -> None:
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
