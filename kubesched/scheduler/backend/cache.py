"""The scheduler cache: nodes and the pods on them, including pods assumed but not yet bound
(upstream ``backend/cache``).

Pods are keyed by UID. A pod is *assumed* when the scheduling cycle picks its node; binding then
happens asynchronously and the informer's add event confirms it. ``update_snapshot`` brings the
columnar node table up to date before each cycle by replaying only what changed since the last
one (node changes rewrite their row; pod changes adjust it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kubesched.api.resources import status_sizes
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.utils.clock import Clock

log = logging.getLogger(__name__)


class CacheError(Exception):
    pass


@dataclass(slots=True)  # one per pod in the cluster
class _PodState:
    pod: PodInfo
    deadline: float | None = None
    binding_finished: bool = False


class Cache:
    def __init__(self, clock: Clock, ttl: float = 0.0, table: NodeTable | None = None) -> None:
        """``ttl``: seconds after binding finished before an unconfirmed assumed pod expires
        (0, upstream's default, keeps it until the informer confirms or removes it)."""
        self.clock = clock
        self.ttl = ttl
        self.table = table or NodeTable()
        self.nodes: dict[str, NodeInfo] = {}
        self.pod_states: dict[str, _PodState] = {}
        self.assumed: set[str] = set()
        self._node_changes: dict[str, bool] = {}  # node name -> present (True) or removed (False)
        self._pod_deltas: list[tuple[bool, str, PodInfo]] = []  # (added?, node name, pod)
        #: Nodes a pod of which started (``status.startTime`` set) with nothing else the node's
        #: totals read changed.
        self._started_on: set[str] = set()

    # --- pods ----------------------------------------------------------------------------------
    def assume_pod(self, pod: PodInfo) -> None:
        if pod.uid in self.pod_states:
            raise CacheError(f"pod {pod.uid}({pod.key}) is in the cache, so can't be assumed")
        self._add_pod(pod)
        self.pod_states[pod.uid] = _PodState(pod)
        self.assumed.add(pod.uid)

    def finish_binding(self, pod: PodInfo) -> None:
        state = self.pod_states.get(pod.uid)
        if state is not None and pod.uid in self.assumed:
            state.binding_finished = True
            state.deadline = self.clock.now() + self.ttl

    def forget_pod(self, pod: PodInfo) -> None:
        state = self.pod_states.get(pod.uid)
        if state is not None and state.pod.node_name != pod.node_name:
            raise CacheError(f"pod {pod.uid}({pod.key}) was assumed on {pod.node_name} but assigned to {state.pod.node_name}")
        if state is None or pod.uid not in self.assumed:
            raise CacheError(f"pod {pod.uid}({pod.key}) wasn't assumed so cannot be forgotten")
        self._remove_pod(state.pod)
        del self.pod_states[pod.uid]
        self.assumed.discard(pod.uid)

    def add_pod(self, pod: PodInfo) -> None:
        """An assigned pod seen by the informer: confirms an assumed pod, or adds a new one."""
        state = self.pod_states.get(pod.uid)
        if state is not None and pod.uid in self.assumed:
            if state.pod.node_name != pod.node_name:
                log.info("Pod %s was added to a different node than it was assumed (%s, %s)", pod.key, state.pod.node_name, pod.node_name)
            self._replace_pod(state.pod, pod)
            state.pod = pod
            self.assumed.discard(pod.uid)
            state.deadline = None
            return
        if state is None:
            self._add_pod(pod)
            self.pod_states[pod.uid] = _PodState(pod)
            return
        raise CacheError(f"pod {pod.uid}({pod.key}) was already in added state")

    def update_pod(self, old: PodInfo, new: PodInfo) -> None:
        state = self.pod_states.get(old.uid)
        if state is None or old.uid in self.assumed:
            raise CacheError(f"pod {old.uid}({old.key}) is not added to scheduler cache, so cannot be updated")
        self._replace_pod(state.pod, new)
        state.pod = new

    def remove_pod(self, pod: PodInfo) -> None:
        state = self.pod_states.get(pod.uid)
        if state is None:
            raise CacheError(f"pod {pod.uid}({pod.key}) is not found in scheduler cache, so cannot be removed from it")
        if state.pod.node_name != pod.node_name:
            log.error("Pod %s was assumed to be on %s but got %s", pod.key, state.pod.node_name, pod.node_name)
        self._remove_pod(state.pod)
        del self.pod_states[pod.uid]
        self.assumed.discard(pod.uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self.assumed

    def get_pod(self, uid: str) -> PodInfo | None:
        state = self.pod_states.get(uid)
        return None if state is None else state.pod

    def cleanup_assumed_pods(self) -> list[PodInfo]:
        """Expire assumed pods whose binding finished ``ttl`` ago without confirmation."""
        if self.ttl <= 0:
            return []
        now = self.clock.now()
        expired = []
        for uid in list(self.assumed):
            state = self.pod_states[uid]
            if state.binding_finished and state.deadline is not None and now > state.deadline:
                log.warning("Pod %s expired", state.pod.key)
                self._remove_pod(state.pod)
                del self.pod_states[uid]
                self.assumed.discard(uid)
                expired.append(state.pod)
        return expired

    # --- nodes ---------------------------------------------------------------------------------
    def add_node(self, node: dict[str, Any]) -> NodeInfo:
        name = node["metadata"]["name"]
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo(node)
        else:
            info.set_node(node)
        info.generation += 1
        self._node_changes[name] = True
        return info

    def update_node(self, _old: dict[str, Any] | None, new: dict[str, Any]) -> NodeInfo:
        return self.add_node(new)

    def remove_node(self, node: dict[str, Any]) -> None:
        """Forget the node; its NodeInfo stays while pods still reference it, as upstream."""
        name = node["metadata"]["name"]
        info = self.nodes.get(name)
        if info is None:
            raise CacheError(f"node {name} is not found")
        info.node = None
        if not info.pods:
            del self.nodes[name]
        self._node_changes[name] = False

    def node_count(self) -> int:
        return sum(1 for info in self.nodes.values() if info.node is not None)

    # --- snapshot --------------------------------------------------------------------------------
    def update_snapshot(self) -> NodeTable:
        """Apply changes since the last call to the node table (only the nodes that changed)."""
        table = self.table
        changes: dict[str, bool] = {}
        if self._node_changes:
            changes, self._node_changes = self._node_changes, {}
            for name, present in changes.items():
                info = self.nodes.get(name)
                if present and info is not None and info.node is not None:
                    table.set_node(info)
                else:
                    table.remove_node(name)
            deltas = [d for d in self._pod_deltas if d[1] not in changes]
        else:
            deltas = self._pod_deltas
        self._pod_deltas = []
        for added, node_name, pod in deltas:
            info = self.nodes.get(node_name)
            if info is None:
                continue
            if added:
                table.pod_added(info, pod)
            else:
                table.pod_removed(info, pod)
        if self._started_on:
            for name in self._started_on.difference(changes):  # a node written whole moved already
                table.pod_started(name)
            self._started_on = set()
        table.snapshot_taken()
        return table

    # --- internals -------------------------------------------------------------------------------
    def _node_info(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo(name=name)
        return info

    def _add_pod(self, pod: PodInfo) -> None:
        info = self._node_info(pod.node_name)
        info.add_pod(pod)
        self._pod_deltas.append((True, info.name, pod))

    def _remove_pod(self, pod: PodInfo) -> None:
        info = self.nodes.get(pod.node_name)
        if info is None:
            return
        removed = info.remove_pod(pod.uid)
        if removed is not None:
            self._pod_deltas.append((False, info.name, removed))
        if info.node is None and not info.pods:
            del self.nodes[info.name]

    def _replace_pod(self, old: PodInfo, new: PodInfo) -> None:
        if old is new:
            return
        if old.node_name == new.node_name and _same_scheduling_facts(old, new):
            info = self.nodes.get(old.node_name)
            if info is not None and old.uid in info.pods:
                info.pods[old.uid] = new
                if old.uid in info.pods_with_affinity:
                    info.pods_with_affinity[old.uid] = new
                if old.uid in info.pods_with_required_anti_affinity:
                    info.pods_with_required_anti_affinity[old.uid] = new
                if old.status.get("startTime") != new.status.get("startTime"):
                    self._started_on.add(info.name)
                return
        self._remove_pod(old)
        self._add_pod(new)


def _same_scheduling_facts(a: PodInfo, b: PodInfo) -> bool:
    """Whether swapping ``a`` for ``b`` changes nothing the node's totals and the table's
    extensions read (labels, spec, sizing status). A kubelet's status write (phase, container
    states, start time) changes none of them: the container statuses count only while they carry
    resources (``resources.status_sizes``). The start time, which preemption reads, is told to
    the table apart (``NodeTable.pod_started``)."""
    if a.labels != b.labels or a.deletion_timestamp != b.deletion_timestamp:
        return False
    if a.spec is not b.spec and a.spec != b.spec:
        return False
    sa, sb = a.status, b.status
    if not status_sizes(sa) and not status_sizes(sb):
        return True
    return sa.get("containerStatuses") == sb.get("containerStatuses") and \
        sa.get("initContainerStatuses") == sb.get("initContainerStatuses") and sa.get("resize") == sb.get("resize") and \
        sa.get("conditions") == sb.get("conditions")
