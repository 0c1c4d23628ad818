"""The indexes that keep Coscheduling's counts cheap: what upstream gets from the pod lister's
label selection and its own bookkeeping, here kept incrementally instead of scanning every pod.

* ``GroupPods`` files the informer's pods by their PodGroup (namespace and the
  ``scheduling.x-k8s.io/pod-group`` label), finished pods left out: a group's siblings are a
  dictionary read, fed by the Pod informer's add, update and delete.
* ``AssignedPods`` is a node table extension: the pods of each group on the snapshot's nodes
  (assumed or bound), with the row each is on, updated with every pod the table adds or removes.
  Counting a group's assigned pods, or finding its pods on one node, no longer walks the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.client.informers import Handler
from kubesched.contrib.coscheduling.pod_group import POD_GROUP_LABEL, pod_group_full_name
from kubesched.scheduler.nodetable.table import NodeTable

#: The key of ``AssignedPods`` among the node table's extensions.
ASSIGNED_PODS = "CoschedulingAssignedPods"
_FINISHED = ("Succeeded", "Failed")


def _group_key(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, group) of a pod that belongs to a PodGroup and has not finished; else None."""
    meta = pod.get("metadata") or {}
    group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
    if not group or (pod.get("status") or {}).get("phase") in _FINISHED:
        return None
    return str(meta.get("namespace") or "default"), str(group)


class GroupPods:
    """The informer's pods by PodGroup; see the module docstring."""

    def __init__(self) -> None:
        self._by_group: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self._group_of: dict[str, tuple[str, str]] = {}

    @classmethod
    def subscribed(cls, handle: Any) -> GroupPods:
        """An index of the pods ``handle`` knows now, kept current by the Pod informer (a fixed
        cache, as the plugin harness has, needs no updates)."""
        index = cls()
        for pod in handle.objects("Pod").values():
            index.on_add(pod)
        informers = getattr(getattr(handle, "ctx", None), "informers", None)
        if informers is not None and hasattr(informers, "informer"):
            informers.informer("Pod").add_handler(Handler(index.on_add, index.on_update, index.on_delete))
        return index

    def pods(self, namespace: str, group: str) -> list[dict[str, Any]]:
        """The group's pods that have not finished, scheduled or not."""
        return list(self._by_group.get((namespace, group), {}).values())

    def count(self, namespace: str, group: str) -> int:
        return len(self._by_group.get((namespace, group), ()))

    # --- informer events ---------------------------------------------------------------------------
    def on_add(self, pod: dict[str, Any], _initial: bool = False) -> None:
        self._file(pod)

    def on_update(self, _old: dict[str, Any], new: dict[str, Any]) -> None:
        self._file(new)

    def on_delete(self, pod: dict[str, Any]) -> None:
        self._unfile(_pod_key(pod))

    def _file(self, pod: dict[str, Any]) -> None:
        key = _pod_key(pod)
        self._unfile(key)
        group = _group_key(pod)
        if group is not None:
            self._by_group.setdefault(group, {})[key] = pod
            self._group_of[key] = group

    def _unfile(self, key: str) -> None:
        group = self._group_of.pop(key, None)
        if group is None:
            return
        members = self._by_group[group]
        members.pop(key, None)
        if not members:
            del self._by_group[group]


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


class AssignedPods:
    """The pods of each PodGroup on the table's nodes; see the module docstring."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        #: group full name -> pod uid -> (row, pod).
        self.by_group: dict[str, dict[str, tuple[int, PodInfo]]] = {}
        #: row -> pod uid -> group full name, to forget a row.
        self._row_pods: dict[int, dict[str, str]] = {}

    def count(self, full_name: str, besides: str = "") -> int:
        """The group's assigned pods, the pod with uid ``besides`` left out."""
        members = self.by_group.get(full_name, {})
        return len(members) - (1 if besides in members else 0)

    def by_node(self, full_name: str) -> dict[str, list[PodInfo]]:
        """The group's pods by the name of the node they are on."""
        names = self.table.names
        out: dict[str, list[PodInfo]] = {}
        for row, pod in self.by_group.get(full_name, {}).values():
            out.setdefault(names[row], []).append(pod)
        return out

    # --- Extension protocol ------------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        return None

    def node_set(self, row: int, info: NodeInfo) -> None:
        self._row_pods.setdefault(row, {})

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for uid, group in self._row_pods.pop(row, {}).items():
            self._drop(group, uid)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        group = pod_group_full_name(pod.pod)
        if not group:
            return
        entries = self._row_pods.setdefault(row, {})
        old = entries.get(pod.uid)
        if old is not None:
            self._drop(old, pod.uid)
        entries[pod.uid] = group
        self.by_group.setdefault(group, {})[pod.uid] = (row, pod)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        group = self._row_pods.get(row, {}).pop(pod.uid, None)
        if group is not None:
            self._drop(group, pod.uid)

    def move_row(self, src: int, dst: int) -> None:
        entries = self._row_pods.pop(src, {})
        self._row_pods[dst] = entries
        for uid, group in entries.items():
            _, pod = self.by_group[group][uid]
            self.by_group[group][uid] = (dst, pod)

    def _drop(self, group: str, uid: str) -> None:
        members = self.by_group.get(group)
        if members is None:
            return
        members.pop(uid, None)
        if not members:
            del self.by_group[group]


def assigned_pods(table: NodeTable) -> AssignedPods:
    """The table's ``AssignedPods``, built from its current pods on first use."""
    index: AssignedPods = table.extension(ASSIGNED_PODS, AssignedPods)
    return index


__all__ = ["ASSIGNED_PODS", "AssignedPods", "GroupPods", "assigned_pods"]
