"""NodePorts: the host ports a pod asks for must be free on the node (upstream ``nodeports``).

A table extension indexes the host ports in use as (protocol, port) -> host IP -> per-row
presence array, so only pods with host ports pay anything, and their check is a few array
reads whatever the number of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from kubesched.api.types import DEFAULT_BIND_ALL_HOST_IP, HostPort, HostPortInfo, NodeInfo, PodInfo, pod_host_ports
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterPlugin,
    PreFilterResult,
    SignFragment,
    SignPlugin,
)
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names

PRE_FILTER_KEY = "PreFilter" + names.NodePorts
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
EXTENSION_KEY = names.NodePorts

PortKey = tuple[str, int]  # (protocol, port)


def fits_ports(pod: PodInfo, node_info: NodeInfo) -> bool:
    """``nodeports.Fits``: none of the pod's host ports conflicts with the ports used on the node."""
    return not any(node_info.used_ports.conflicts(p) for p in pod.host_ports)


class PortIndex:
    """Host ports in use per row, with upstream ``HostPortInfo``'s set semantics: a (ip, protocol,
    port) is used or not, and removing a pod frees its ports even if another pod listed them."""

    def __init__(self, table: NodeTable) -> None:
        self.capacity = table.capacity
        self.used: dict[PortKey, dict[str, np.ndarray]] = {}
        self.row_ports: dict[int, set[tuple[PortKey, str]]] = {}

    # --- Extension protocol --------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        for by_ip in self.used.values():
            for ip, arr in by_ip.items():
                wider = np.zeros(capacity, dtype=bool)
                wider[: len(arr)] = arr
                by_ip[ip] = wider
        self.capacity = capacity

    def node_set(self, row: int, info: NodeInfo) -> None:
        """Ports come with the pods (``pod_added`` follows for each)."""

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for key, ip in self.row_ports.pop(row, ()):
            self._clear(key, ip, row)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        if not pod.host_ports:
            return
        entries = self.row_ports.setdefault(row, set())
        for port in pod.host_ports:
            key = (port.protocol, port.port)
            by_ip = self.used.setdefault(key, {})
            arr = by_ip.get(port.ip)
            if arr is None:
                arr = by_ip[port.ip] = np.zeros(self.capacity, dtype=bool)
            arr[row] = True
            entries.add((key, port.ip))

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        entries = self.row_ports.get(row)
        if not entries or not pod.host_ports:
            return
        for port in pod.host_ports:
            entry = ((port.protocol, port.port), port.ip)
            if entry in entries:
                entries.discard(entry)
                self._clear(entry[0], entry[1], row)
        if not entries:
            del self.row_ports[row]

    def move_row(self, src: int, dst: int) -> None:
        entries = self.row_ports.pop(src, None)
        if entries is None:
            return
        for key, ip in entries:
            arr = self.used[key][ip]
            arr[dst] = arr[src]
            arr[src] = False
        self.row_ports[dst] = entries

    # --- queries ----------------------------------------------------------------------------------
    def conflicts(self, nodes: NodeBatch, wanted: Iterable[HostPort]) -> np.ndarray:
        """``CheckConflict`` of every wanted port on every node of the batch: 0.0.0.0 clashes with
        any IP on the same protocol and port, a specific IP with itself and 0.0.0.0."""
        out = np.zeros(len(nodes), dtype=bool)
        for port in wanted:
            by_ip = self.used.get((port.protocol, port.port))
            if not by_ip or port.port <= 0:
                continue
            ips = by_ip.keys() if port.ip == DEFAULT_BIND_ALL_HOST_IP else (DEFAULT_BIND_ALL_HOST_IP, port.ip)
            for ip in ips:
                arr = by_ip.get(ip)
                if arr is not None:
                    out |= nodes.col(arr)
        return out

    def _clear(self, key: PortKey, ip: str, row: int) -> None:
        by_ip = self.used.get(key)
        if by_ip is None or ip not in by_ip:
            return
        arr = by_ip[ip]
        arr[row] = False
        if not arr.any():
            del by_ip[ip]
            if not by_ip:
                del self.used[key]


class _WantedPorts(tuple):
    """PreFilter state: the pod's host ports (unaffected by other pods, so clone is identity)."""

    def clone(self) -> _WantedPorts:
        return self


class NodePorts(SignPlugin, PreFilterPlugin, BatchFilterPlugin, EnqueueExtensions):
    name = names.NodePorts

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self._no_free_ports = Status(Code.Unschedulable, ERR_REASON)

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.host_ports(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        ports = pod.host_ports
        if not ports:
            return None, Status(Code.Skip)
        state.write(PRE_FILTER_KEY, _WantedPorts(ports))
        return None, None

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        wanted = state.get(PRE_FILTER_KEY)
        if wanted is None:
            return FilterVerdict.all_fail(len(nodes), Status.from_error(RuntimeError(
                f'reading "{PRE_FILTER_KEY}" from cycleState: not found')))
        index: PortIndex = nodes.table.extension(EXTENSION_KEY, PortIndex)
        return FilterVerdict.fail_where(index.conflicts(nodes, wanted), self._no_free_ports)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete), self._after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add)),
        ]

    @staticmethod
    def _after_pod_deleted(pod: dict, old: Any, _new: Any) -> QueueingHint:
        """Only a deleted pod that held (or was nominated to) a node with a port the pod wants helps."""
        spec, status = old.get("spec") or {}, old.get("status") or {}
        if not spec.get("nodeName") and not status.get("nominatedNodeName"):
            return QueueingHint.QueueSkip
        freed = pod_host_ports(spec)
        if not freed:
            return QueueingHint.QueueSkip
        in_use = HostPortInfo()
        for port in freed:
            in_use.add(port)
        wanted = pod_host_ports(pod.get("spec") or {})
        return QueueingHint.Queue if any(in_use.conflicts(p) for p in wanted) else QueueingHint.QueueSkip
