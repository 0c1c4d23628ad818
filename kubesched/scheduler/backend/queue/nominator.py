"""The nominator (upstream ``nominator.go``): which pods are nominated to which nodes.

Preemption nominates the preemptor to a node before the API server has the nomination, so the
scheduler keeps its own record, by pod UID, and that record wins over ``status.nominatedNodeName``
on pod updates that do not mention a nomination. Only references are kept; the queue resolves
them to its current PodInfo when asked.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.interface import NominatingInfo, NominatingMode

log = logging.getLogger(__name__)

#: Looks a pod up by (namespace, name) in the informer's view; None when it does not exist.
PodLister = Callable[[str, str], Mapping[str, Any] | None]


class PodRef(NamedTuple):
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_pod_info(self) -> PodInfo:
        """A pod with only its identity, as upstream ``podRef.toPod`` builds."""
        return PodInfo({"metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid}})


class NominationJournal:
    """Names of the nodes whose nominated pods may have changed since the holder last drained it
    (what lets ``framework.nominated.NominatedOverlay`` rewrite only those)."""

    __slots__ = ("__weakref__", "nodes")

    def __init__(self) -> None:
        self.nodes: set[str] = set()

    def drain(self) -> set[str]:
        nodes, self.nodes = self.nodes, set()
        return nodes


class Nominator:
    def __init__(self, pod_lister: PodLister | None = None) -> None:
        self._pod_lister = pod_lister
        #: node name -> pods nominated to it, in nomination order.
        self.nominated_pods: dict[str, list[PodRef]] = {}
        #: pod uid -> node name.
        self.nominated_pod_to_node: dict[str, str] = {}
        self._journals: weakref.WeakSet[NominationJournal] = weakref.WeakSet()

    def journal(self) -> NominationJournal:
        """A new journal, told of every change from now on."""
        journal = NominationJournal()
        self._journals.add(journal)
        return journal

    def touch(self, uid: str) -> None:
        """The pod with ``uid`` left the queue or came back to it: if it is nominated, how it is
        seen on its node (in full, or by its identity only while in flight) changed."""
        node_name = self.nominated_pod_to_node.get(uid)
        if node_name is not None:
            self._changed(node_name)

    def _changed(self, node_name: str) -> None:
        for journal in self._journals:
            journal.nodes.add(node_name)

    def add(self, pod: PodInfo, nominating_info: NominatingInfo | None) -> None:
        """Nominate ``pod``: to the given node (Override) or to its status' node (Noop/None)."""
        self.delete(pod)
        mode = NominatingMode.Noop if nominating_info is None else nominating_info.mode
        if mode == NominatingMode.Override:
            node_name = nominating_info.nominated_node_name if nominating_info else ""
        else:
            node_name = pod.nominated_node_name
        if not node_name or not self._alive_and_unbound(pod):
            return
        self.nominated_pod_to_node[pod.uid] = node_name
        refs = self.nominated_pods.setdefault(node_name, [])
        if all(ref.uid != pod.uid for ref in refs):
            refs.append(PodRef(pod.namespace, pod.name, pod.uid))
        self._changed(node_name)

    def _alive_and_unbound(self, pod: PodInfo) -> bool:
        """Upstream checks the pod lister: a deleted or already bound pod must not be nominated."""
        if self._pod_lister is None:
            return True
        current = self._pod_lister(pod.namespace, pod.name)
        if current is None:
            log.debug("pod %s doesn't exist in podLister, aborted adding it to the nominator", pod.key)
            return False
        if (current.get("spec") or {}).get("nodeName"):
            log.debug("pod %s is already scheduled to a node, aborted adding it to the nominator", pod.key)
            return False
        return True

    def update(self, old: PodInfo, new: PodInfo) -> None:
        """Re-record the pod, keeping an in-memory nomination an update did not mention."""
        nominating_info = None
        if not old.nominated_node_name and not new.nominated_node_name:
            node_name = self.nominated_pod_to_node.get(old.uid)
            if node_name is not None:
                nominating_info = NominatingInfo(node_name, NominatingMode.Override)
        self.delete(old)
        self.add(new, nominating_info)

    def delete(self, pod: PodInfo) -> None:
        node_name = self.nominated_pod_to_node.pop(pod.uid, None)
        if node_name is None:
            return
        self._changed(node_name)
        refs = self.nominated_pods.get(node_name, [])
        for i, ref in enumerate(refs):
            if ref.uid == pod.uid:
                del refs[i]
                break
        if not refs:
            self.nominated_pods.pop(node_name, None)

    def for_node(self, node_name: str) -> list[PodRef]:
        return list(self.nominated_pods.get(node_name, ()))
