"""The scheduler's view of the API: the few verbs it needs, whichever cluster is behind them.

``kubesched.apiserver.memory_client.MemoryClient`` talks to the embedded ``ObjectStore``
directly; ``kubesched.client.kube`` talks HTTP to ``kubesched apiserver`` or a real cluster. Everything above this interface (informers,
cache, queue, scheduler, plugins) is the same for both.
"""

from __future__ import annotations

import abc
import builtins  # annotations after the `list` verb name the builtin through it
from collections.abc import AsyncIterator

from kubesched.api.kinds import NAMESPACE, Kind, kind_for
from kubesched.api.watch import WatchEvent

#: The namespace whose UID identifies a cluster (every cluster has it; recreating the cluster changes it).
IDENTITY_NAMESPACE = "kube-system"
EVENTS_V1 = kind_for("events.k8s.io/v1", "Event")


class ClusterClient(abc.ABC):
    """Async API verbs. Objects are plain dicts shaped as the Kubernetes JSON API shapes them."""

    @property
    def in_process(self) -> bool:
        """Whether every call completes without waiting on I/O (the embedded store): then writes
        gain nothing from running concurrently, and a caller may await them one by one."""
        return False

    @abc.abstractmethod
    async def list(self, kind: Kind, *, field_selector: str = "") -> tuple[list[dict], str]:
        """Every object of ``kind`` (those ``field_selector`` selects, when given) and the list's
        resourceVersion."""

    @abc.abstractmethod
    def watch(self, kind: Kind, resource_version: str, *, field_selector: str = "") -> AsyncIterator[builtins.list[WatchEvent]]:
        """Batches of changes after ``resource_version`` (as the API server filters them by
        ``field_selector``, when given: an object that stops matching is DELETED); raises ``Gone``
        when it is too old."""

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
    async def patch_pod_status(self, pod: dict, conditions: builtins.list[dict], nominated_node_name: str | None) -> None:
        """Merge ``conditions`` into the pod's status (by type) and set ``nominatedNodeName`` when
        not None, as ``util.PatchPodStatus`` does with a strategic merge patch."""

    async def create_event(self, event: dict) -> None:
        """Write a new ``events.k8s.io/v1`` event that the event recorder built (client-go's
        ``EventSink.Create``): a create whose answer the recorder does not read."""
        assert EVENTS_V1 is not None  # a built-in kind
        await self.create(EVENTS_V1, event)

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
