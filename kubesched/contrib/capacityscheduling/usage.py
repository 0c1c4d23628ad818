"""What each namespace's pods on the snapshot use, kept as the node table changes: upstream's
ElasticQuota infos are updated by the Pod informer's event handlers instead of being rebuilt from
every pod each cycle; here a node table extension sees every pod the snapshot adds or removes.

Only pods that have not finished count (the scheduler's cache holds no finished pod anyway). A
pod counts once per ``namespace/name``, as ``ElasticQuotaInfo.add_pod_if_not_present`` does: of
two pods with one name (a pod replaced while the old one is still on its node), the first added.
"""

from __future__ import annotations

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.contrib.capacityscheduling.elasticquota import Resources, add_into, pod_request
from kubesched.scheduler.nodetable.table import NodeTable

#: The key of ``NamespaceUsage`` among the node table's extensions.
NAMESPACE_USAGE = "CapacitySchedulingNamespaceUsage"
_FINISHED = ("Succeeded", "Failed")


class Usage:
    """One namespace's counted pods (``namespace/name`` -> request) and their sum."""

    __slots__ = ("pods", "used")

    def __init__(self) -> None:
        self.used: Resources = {}
        self.pods: dict[str, Resources] = {}


class NamespaceUsage:
    """The extension; see the module docstring."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.namespaces: dict[str, Usage] = {}
        #: ``namespace/name`` -> uids of the table's pods with that key, in the order they came.
        self._uids: dict[str, list[str]] = {}
        #: uid -> (row, pod), for every pod that has not finished.
        self._pods: dict[str, tuple[int, PodInfo]] = {}
        self._row_pods: dict[int, set[str]] = {}

    def usage(self, namespace: str) -> Usage | None:
        return self.namespaces.get(namespace)

    # --- Extension protocol ------------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        return None

    def node_set(self, row: int, info: NodeInfo) -> None:
        self._row_pods.setdefault(row, set())

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for uid in self._row_pods.pop(row, set()):
            self._remove(uid)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        if pod.uid in self._pods:
            self._remove(pod.uid)
        if pod.status.get("phase") in _FINISHED:
            return
        self._pods[pod.uid] = (row, pod)
        self._row_pods.setdefault(row, set()).add(pod.uid)
        uids = self._uids.setdefault(pod.key, [])
        uids.append(pod.uid)
        if len(uids) == 1:
            self._count(pod, 1)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        self._row_pods.get(row, set()).discard(pod.uid)
        self._remove(pod.uid)

    def move_row(self, src: int, dst: int) -> None:
        uids = self._row_pods.pop(src, set())
        self._row_pods[dst] = uids
        for uid in uids:
            self._pods[uid] = (dst, self._pods[uid][1])

    # --- internals ---------------------------------------------------------------------------------
    def _remove(self, uid: str) -> None:
        entry = self._pods.pop(uid, None)
        if entry is None:
            return
        row, pod = entry
        self._row_pods.get(row, set()).discard(uid)
        uids = self._uids[pod.key]
        counted = uids[0] == uid
        uids.remove(uid)
        if counted:
            self._count(pod, -1)
            if uids:
                self._count(self._pods[uids[0]][1], 1)
        if not uids:
            del self._uids[pod.key]

    def _count(self, pod: PodInfo, sign: int) -> None:
        usage = self.namespaces.get(pod.namespace)
        if usage is None:
            usage = self.namespaces[pod.namespace] = Usage()
        request = pod_request(pod)
        add_into(usage.used, request, sign)
        if sign > 0:
            usage.pods[pod.key] = request
            return
        usage.pods.pop(pod.key, None)
        if not usage.pods:
            del self.namespaces[pod.namespace]


def namespace_usage(table: NodeTable) -> NamespaceUsage:
    """The table's ``NamespaceUsage``, built from its current pods on first use."""
    index: NamespaceUsage = table.extension(NAMESPACE_USAGE, NamespaceUsage)
    return index


__all__ = ["NAMESPACE_USAGE", "NamespaceUsage", "Usage", "namespace_usage"]
