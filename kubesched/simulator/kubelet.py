"""A fake kubelet for the embedded cluster, plus the NoExecute taint manager: what happens to a pod
after it is bound, so that what follows scheduling (preemption victim order, ``kubectl get pods``,
pods bound by hand to a node that cannot take them) looks like a real cluster.

* Admission (upstream ``pkg/kubelet/lifecycle/predicate.go``): a pod bound to an existing node is
  checked against the node and the pods it already runs (resources, node affinity/selector, node
  name, host ports, untolerated NoExecute taints, OS). A pod that does not fit goes ``Failed`` with
  the kubelet's reason (``OutOfcpu``, ``NodeAffinity``, ...) and ``Pod was rejected: ...`` message;
  one that fits goes ``Running`` with a start time, an IP (from the node's ``spec.podCIDR`` or the
  cluster range), Ready conditions and container statuses. A pod bound to a node that does not
  exist stays Pending, as no kubelet would pick it up (until PodGC collects it, below).
* Taint eviction (upstream ``pkg/controller/tainteviction``): pods on a node with NoExecute taints
  they do not tolerate are deleted, after the smallest ``tolerationSeconds`` of the tolerations
  used when they tolerate them all for a while; removing the taint in time cancels it.
* Node status and heartbeats (``kubesched.simulator.nodestatus``): each node is registered (Ready
  and the other conditions, kubelet version, addresses) and its Lease in ``kube-node-lease`` renewed.
  The kubelet of a node annotated ``kubesched.io/simulate-failure: "true"`` is down: it reports
  nothing, starts no pod and confirms no deletion (its pods stay Terminating) until the
  annotation goes.
* Deletion: graceful deletion is the store's (the object goes when the grace period ends); pods
  being deleted on a node that does not exist, or whose grace period is already over, are removed
  at once so that ``kubectl delete`` returns. With a ``termination_delay`` (``kubesched up``), a
  running pod's containers "stop" after that many seconds and the pod is removed then, instead of
  lingering for its whole grace period.
* Orphans (upstream PodGC's ``gcOrphaned``): pods bound to a node that has been missing for 40
  seconds are marked Failed with a DisruptionTarget condition (``DeletionByPodGC``) and deleted.
  Upstream checks every 20 seconds, so it takes 40 to 60 seconds there; here exactly 40.

It follows the store through ``store.write_hooks`` (a hook only records the event; a task does
the work), so every write is seen in order, and timers use the event loop (virtual time in
simulations). Admission helpers come from the scheduler plugins so the checks cannot drift.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections import deque
from collections.abc import Iterable, Mapping, Sized
from dataclasses import dataclass
from typing import Protocol

from kubesched.api import resources as res
from kubesched.api.kinds import NODE, POD, Kind
from kubesched.api.meta import set_condition
from kubesched.api.timeutil import parse_time
from kubesched.api.types import HostPortInfo, PodInfo, Taint, Toleration, node_allocatable
from kubesched.api.watch import ADDED, DELETED, MODIFIED, WatchEvent
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.plugins.nodeaffinity.node_affinity import ERR_REASON_POD as NODE_AFFINITY_REASON
from kubesched.scheduler.plugins.nodeaffinity.node_affinity import pod_matches_node_selector_and_affinity
from kubesched.scheduler.plugins.nodename.node_name import ERR_REASON as NODE_NAME_REASON
from kubesched.scheduler.plugins.nodeports.node_ports import ERR_REASON as NODE_PORTS_REASON
from kubesched.scheduler.plugins.noderesources.fit import fits_request, pod_fit_request
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import find_untolerated_taint
from kubesched.simulator.controllers.util import EventWriter
from kubesched.simulator.nodestatus import LEASE_RENEW_INTERVAL, NodeStatusReporter, kubelet_stopped
from kubesched.utils.clock import rfc3339

log = logging.getLogger(__name__)

POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")
OS_LABEL = "kubernetes.io/os"
DEFAULT_OS = "linux"
NO_EXECUTE = "NoExecute"
REJECTED_PREFIX = "Pod was rejected: "
#: Conditions the kubelet owns; others (PodScheduled, DisruptionTarget) are kept as they are.
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")

#: Predicate names (the plugins' names); the reasons are the plugins' own, but for taints, whose
#: message is the kubelet's (``ErrTaintsTolerationsNotMatch``).
NODE_AFFINITY, NODE_NAME, NODE_PORTS, TAINT_TOLERATION = "NodeAffinity", "NodeName", "NodePorts", "TaintToleration"
ERR_TAINTS = "node(s) had taints that the pod didn't tolerate"
#: PodGC's ``quarantineTime``: how long a node must stay missing before its pods are collected.
ORPHAN_QUARANTINE = 40.0


# --- admission -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rejection:
    """Why the kubelet refused a pod: ``status.reason`` and the message without its prefix."""

    reason: str
    message: str


class AdmissionNode(Protocol):
    """What admission reads of a node: a scheduler ``NodeInfo`` (tests) or the kubelet's own
    ``NodeState``, which keeps the same aggregates without the parsed pods."""

    @property
    def name(self) -> str: ...
    @property
    def node(self) -> dict | None: ...
    @property
    def pods(self) -> Sized: ...
    @property
    def allocatable(self) -> Mapping[str, int]: ...
    @property
    def requested(self) -> Mapping[str, int]: ...
    @property
    def used_ports(self) -> HostPortInfo: ...
    @property
    def taints(self) -> list[Taint]: ...


def _insufficient(pod: PodInfo, node_info: AdmissionNode) -> list[Rejection]:
    """``noderesources.Fits`` after ``removeMissingExtendedResources``, as InsufficientResourceErrors."""
    out = []
    for r in fits_request(pod_fit_request(pod), len(node_info.pods), node_info.allocatable, node_info.requested):
        if res.is_extended(r.resource_name) and r.resource_name not in node_info.allocatable:
            continue  # unknown to the node: a cluster-level or DRA-backed resource
        out.append(Rejection(f"OutOf{r.resource_name}",
                             f"Node didn't have enough resource: {r.resource_name}, requested: {r.requested}, "
                             f"used: {r.used}, capacity: {r.capacity}"))
    return out


def _predicate(name: str, desc: str) -> Rejection:
    return Rejection(name, f"Predicate {name} failed: {desc}")


def _is_static(pod: PodInfo) -> bool:
    annotations = pod.pod["metadata"].get("annotations") or {}
    return annotations.get("kubernetes.io/config.source", "api") != "api" or "kubernetes.io/config.mirror" in annotations


def general_filter(pod: PodInfo, node_info: AdmissionNode) -> list[Rejection]:
    """``generalFilter``: ``AdmissionCheck`` with every failure, then untolerated NoExecute taints."""
    node = node_info.node or {}
    reasons = _insufficient(pod, node_info)
    if not pod_matches_node_selector_and_affinity(pod, node):
        reasons.append(_predicate(NODE_AFFINITY, NODE_AFFINITY_REASON))
    if pod.node_name and pod.node_name != node_info.name:
        reasons.append(_predicate(NODE_NAME, NODE_NAME_REASON))
    if any(node_info.used_ports.conflicts(port) for port in pod.host_ports):  # nodeports.Fits
        reasons.append(_predicate(NODE_PORTS, NODE_PORTS_REASON))
    taints = node_info.taints  # most nodes have none: then the pod's tolerations are not even parsed
    if taints and not _is_static(pod) and find_untolerated_taint(taints, pod.tolerations, (NO_EXECUTE,)) is not None:
        reasons.append(_predicate(TAINT_TOLERATION, ERR_TAINTS))
    return reasons


def admission_failure(pod: PodInfo, node_info: AdmissionNode) -> Rejection | None:
    """``predicateAdmitHandler.Admit``: None when the node takes the pod, else the first reason."""
    node = node_info.node or {}
    node_os = ((node.get("metadata") or {}).get("labels") or {}).get(OS_LABEL) or DEFAULT_OS
    if OS_LABEL in pod.labels and pod.labels[OS_LABEL] != node_os:
        return Rejection("PodOSSelectorNodeLabelDoesNotMatch",
                         "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label")
    pod_os = (pod.spec.get("os") or {}).get("name")
    if pod_os and pod_os != node_os:
        return Rejection("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
    if ((pod.spec.get("securityContext") or {}).get("supplementalGroupsPolicy") == "Strict"
            and not ((node.get("status") or {}).get("features") or {}).get("supplementalGroupsPolicy")):
        return Rejection("SupplementalGroupsPolicyNotSupported", "SupplementalGroupsPolicy=Strict is not supported in this node")
    reasons = general_filter(pod, node_info)
    return reasons[0] if reasons else None


# --- taint eviction --------------------------------------------------------------------------------
def no_execute_taints(node: dict | None) -> list[Taint]:
    return [Taint.from_dict(t) for t in ((node or {}).get("spec") or {}).get("taints") or [] if t.get("effect") == NO_EXECUTE]


def matching_tolerations(taints: list[Taint], tolerations: Iterable[Toleration]) -> tuple[bool, list[Toleration]]:
    """``GetMatchingTolerations``: whether every taint is tolerated, and the first toleration used for each."""
    tolerations = list(tolerations)
    if not taints:
        return True, []
    used = []
    for taint in taints:
        match = next((t for t in tolerations if t.tolerates(taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used


def min_toleration_seconds(used: list[Toleration]) -> float:
    """``getMinTolerationTime``: 0 for none or a non-positive one, -1 when all tolerate forever."""
    if not used:
        return 0.0
    bounded = [t.seconds for t in used if t.seconds is not None]
    if any(s <= 0 for s in bounded):
        return 0.0
    return float(min(bounded)) if bounded else -1.0


class NodeState:
    """What admission reads of a node: the node, its allocatable, and the requests, count and host
    ports of the pods its kubelet runs. Quacks like the ``NodeInfo`` attributes the admission
    helpers read (``node``, ``name``, ``pods``, ``allocatable``, ``requested``, ``used_ports``,
    ``taints``), but is fed the request admission already computed instead of re-parsing pods."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.node: dict | None = None
        self.allocatable: dict[str, int] = {}
        self.requested: dict[str, int] = {}
        self.pods: dict[str, tuple[dict[str, int], list]] = {}
        self.used_ports = HostPortInfo()

    def set_node(self, node: dict | None) -> None:
        self.node = node
        self.allocatable = node_allocatable(node) if node is not None else {}

    @property
    def taints(self) -> list[Taint]:
        return [Taint.from_dict(t) for t in ((self.node or {}).get("spec") or {}).get("taints") or []]

    def add(self, uid: str, pod: PodInfo) -> None:
        request, ports = pod_fit_request(pod), list(pod.host_ports)
        self.pods[uid] = (request, ports)
        for name, amount in request.items():
            self.requested[name] = self.requested.get(name, 0) + amount
        for port in ports:
            self.used_ports.add(port)

    def remove(self, uid: str) -> None:
        entry = self.pods.pop(uid, None)
        if entry is None:
            return
        request, ports = entry
        for name, amount in request.items():
            self.requested[name] = self.requested.get(name, 0) - amount
        for port in ports:
            self.used_ports.remove(port)


@dataclass
class _Eviction:
    created: float
    handle: asyncio.TimerHandle | None


class _IPPool:
    """Addresses of one pod network, handed out in order and reused once released."""

    def __init__(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network, first: int) -> None:
        self.network = network
        self.first = first
        self.next = first
        self.free: list[str] = []
        self._size = network.num_addresses
        self._base = int(network.network_address)
        self._v4 = network.version == 4

    def allocate(self) -> str:
        if self.free:
            return self.free.pop()
        if self.next >= self._size - 1:
            self.next = self.first
        ip = self._spelled(self._base + self.next)
        self.next += 1
        return ip

    def _spelled(self, address: int) -> str:
        """``str(ip_address(address))``: an IPv4 address in dotted quads directly (one C call
        instead of building the address object, one per pod started)."""
        if self._v4:
            return socket.inet_ntoa(address.to_bytes(4, "big"))
        return str(ipaddress.IPv6Address(address))

    def release(self, ip: str) -> None:
        self.free.append(ip)


class FakeKubelet:
    """Every node's kubelet and the taint eviction controller; see the module docstring."""

    def __init__(self, store: ObjectStore, *, events: bool = True, termination_delay: float | None = None,
                 lease_renew_interval: float = LEASE_RENEW_INTERVAL, batch_limit: int | None = None) -> None:
        self.store = store
        self.events = events
        #: Seconds a deleted running pod takes to stop; None waits for its grace period.
        self.termination_delay = termination_delay
        #: The most watch events handled before yielding to the event loop (None: all pending ones).
        #: A live cluster sets one so that its API server keeps answering while thousands of pods
        #: start; the virtual clock's runs handle each batch whole.
        self.batch_limit = batch_limit
        self.node_status = NodeStatusReporter(store, renew_interval=lease_renew_interval)
        self._terminating: dict[str, asyncio.TimerHandle] = {}
        self._pending: deque[tuple[Kind, WatchEvent]] = deque()
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._busy = False
        self._nodes: dict[str, dict] = {}
        self._infos: dict[str, NodeState] = {}
        #: uid -> (node, PodInfo, ip, pool) of pods the kubelet runs (admitted and not terminal).
        self._running: dict[str, tuple[str, PodInfo, str | None, _IPPool | None]] = {}
        #: node -> uid -> latest pod object, for every pod bound to the node.
        self._on_node: dict[str, dict[str, dict]] = {}
        #: node -> uids of Pending pods bound to it while it does not exist.
        self._waiting: dict[str, set[str]] = {}
        self._tainted: dict[str, list[Taint]] = {}
        self._evictions: dict[tuple[str, str], _Eviction] = {}
        self._pools: dict[str, _IPPool] = {}
        self._cluster_pool = _IPPool(POD_NETWORK, 1)
        #: Missing nodes with pods bound to them, and the PodGC check waiting for each.
        self._quarantined: dict[str, asyncio.TimerHandle] = {}
        self._writers: dict[str, EventWriter] = {}

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._pending.extend((NODE, WatchEvent(ADDED, n)) for n in self.store.iter_all(NODE))
        self._pending.extend((POD, WatchEvent(ADDED, p)) for p in self.store.iter_all(POD))
        self.store.write_hooks.append(self._on_write)
        self.store.pod_stop_confirmed = self._stop_confirmed
        self.node_status.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fake-kubelet")

    async def stop(self) -> None:
        if self._on_write in self.store.write_hooks:
            self.store.write_hooks.remove(self._on_write)
        if self.store.pod_stop_confirmed == self._stop_confirmed:
            self.store.pod_stop_confirmed = None
        for eviction in self._evictions.values():
            if eviction.handle is not None:
                eviction.handle.cancel()
        self._evictions.clear()
        for handle in (*self._quarantined.values(), *self._terminating.values()):
            handle.cancel()
        self._quarantined.clear()
        self._terminating.clear()
        self.node_status.stop()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def idle(self) -> bool:
        """Nothing to process and no eviction, orphan collection or termination waiting for its
        time (lease renewals go on forever, so they do not count)."""
        return (not self._pending and not self._busy and not self._evictions and not self._quarantined
                and not self._terminating)

    def _on_write(self, _rv: int, kind: Kind, event: WatchEvent) -> None:
        if kind is POD or kind is NODE:
            self._pending.append((kind, event))
            if self._wakeup is not None:
                self._wakeup.set()

    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not self._pending:
                self._wakeup.clear()
                await self._wakeup.wait()
            self._busy = True
            try:
                self._process(self._take())
            except Exception:
                log.exception("fake kubelet failed to process events")
            finally:
                self._busy = False
            await asyncio.sleep(0)

    def _take(self) -> list[tuple[Kind, WatchEvent]]:
        """The next batch: every pending event, or the first ``batch_limit`` of them."""
        if self.batch_limit is None or len(self._pending) <= self.batch_limit:
            batch = list(self._pending)
            self._pending.clear()
            return batch
        return [self._pending.popleft() for _ in range(self.batch_limit)]

    # --- events ------------------------------------------------------------------------------------
    def _process(self, batch: list[tuple[Kind, WatchEvent]]) -> None:
        """Bookkeeping first, then admission in creation order (``HandlePodAdditions``), then the
        taint manager's view of new or changed pods (so a rejected pod shows its reason first)."""
        to_admit: dict[str, dict] = {}
        taint_checks: dict[str, tuple[WatchEvent, dict, str]] = {}
        for kind, event in batch:
            if kind is NODE:  # the write hook takes the constants alone
                self._node_event(event, to_admit)
            else:
                self._pod_event(event, to_admit, taint_checks)
        pods = list(to_admit.values())
        if len(pods) > 1:  # a batch is most often one binding: nothing to order
            pods.sort(key=lambda p: (parse_time(p["metadata"].get("creationTimestamp")), p["metadata"].get("name", "")))
        for pod in pods:
            self._admit(pod)
        for event, pod, node in taint_checks.values():
            self._pod_taints(event, pod, node)

    def _node_event(self, event: WatchEvent, to_admit: dict[str, dict]) -> None:
        node = event.object
        name = node["metadata"]["name"]
        if event.type == DELETED:
            self.node_status.node_gone(name)
            self._nodes.pop(name, None)
            self._tainted.pop(name, None)
            if name in self._infos:
                self._infos[name].set_node(None)
            for pod in list(self._on_node.get(name, {}).values()):
                if pod["metadata"].get("deletionTimestamp"):
                    self._force_delete(pod)
            if self._on_node.get(name):
                self._quarantine(name)
            return
        handle = self._quarantined.pop(name, None)
        if handle is not None:
            handle.cancel()
        self._nodes[name] = node
        self._infos.setdefault(name, NodeState(name)).set_node(node)
        self.node_status.node_seen(node)
        if event.old is not None and kubelet_stopped(event.old) and not kubelet_stopped(node):
            self._report_ready(name)
            for pod in list(self._on_node.get(name, {}).values()):
                if pod["metadata"].get("deletionTimestamp"):
                    self._finish_deletion(pod, name)
        for uid in self._waiting.pop(name, set()) if not kubelet_stopped(node) else ():
            waiting = self._on_node.get(name, {}).get(uid)
            if waiting is not None:
                to_admit[uid] = waiting
        old_taints = no_execute_taints(event.old) if event.type == MODIFIED else None
        taints = no_execute_taints(node)
        if old_taints is None or old_taints != taints:
            self._node_taints_changed(name, taints)

    def _pod_event(self, event: WatchEvent, to_admit: dict[str, dict],
                   taint_checks: dict[str, tuple[WatchEvent, dict, str]]) -> None:
        pod = event.object
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        uid, node = meta.get("uid", ""), spec.get("nodeName") or ""
        if event.type == DELETED:
            self._forget(uid, node)
            handle = self._terminating.pop(uid, None)
            if handle is not None:
                handle.cancel()
            self._cancel_eviction((meta.get("namespace") or "", meta["name"]), event=False)
            to_admit.pop(uid, None)
            taint_checks.pop(uid, None)
            return
        if not node:
            return
        self._on_node.setdefault(node, {})[uid] = pod
        if node not in self._nodes:
            self._quarantine(node)
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            self._stop_running(uid)
        elif meta.get("deletionTimestamp"):
            self._finish_deletion(pod, node)
        elif phase == "Pending" or not phase:
            if uid not in self._running:
                if node in self._nodes:
                    to_admit[uid] = pod
                else:
                    self._waiting.setdefault(node, set()).add(uid)
        elif uid not in self._running:
            self._account(pod, node, None, None)  # already running (loaded from a manifest)
        if uid not in taint_checks:
            taint_checks[uid] = (event, pod, node)

    def _forget(self, uid: str, node: str) -> None:
        self._stop_running(uid)
        if node:
            self._on_node.get(node, {}).pop(uid, None)
            self._waiting.get(node, set()).discard(uid)
            if not self._on_node.get(node) and node in self._quarantined:
                self._quarantined.pop(node).cancel()  # nothing left to collect

    def _stop_running(self, uid: str) -> None:
        entry = self._running.pop(uid, None)
        if entry is None:
            return
        node, _, ip, pool = entry
        info = self._infos.get(node)
        if info is not None:
            info.remove(uid)
        if ip is not None and pool is not None:
            pool.release(ip)

    def _account(self, pod: dict, node: str, ip: str | None, pool: _IPPool | None, info: PodInfo | None = None) -> PodInfo:
        info = info or PodInfo(pod)
        self._infos.setdefault(node, NodeState(node)).add(info.uid, info)
        self._running[info.uid] = (node, info, ip, pool)
        return info

    # --- admission and start -----------------------------------------------------------------------
    def _admit(self, pod: dict) -> None:
        meta = pod["metadata"]
        current = self.store.try_get(POD, meta.get("namespace"), meta["name"])
        if current is None or current["metadata"].get("uid") != meta.get("uid") or current["metadata"].get("deletionTimestamp"):
            return
        if (current.get("status") or {}).get("phase") not in (None, "", "Pending") or meta.get("uid") in self._running:
            return
        node = (current.get("spec") or {}).get("nodeName") or ""
        info = self._infos.get(node)
        if info is None or info.node is None or node not in self._nodes or kubelet_stopped(info.node):
            self._waiting.setdefault(node, set()).add(meta.get("uid", ""))
            return
        pod_info = PodInfo(current)
        rejection = admission_failure(pod_info, info)
        if rejection is not None:
            self._reject(current, node, rejection)
            return
        host_network = bool((current.get("spec") or {}).get("hostNetwork"))
        pool = None if host_network else self._pool_for(node)
        host_ip = _node_ip(info.node) or self.node_status.internal_ip(node)
        ip = host_ip if pool is None else pool.allocate()
        self._account(current, node, ip if pool is not None else None, pool, pod_info)
        try:
            self.store.mutate(POD, meta.get("namespace"), meta["name"], lambda p: self._start(p, host_ip, ip),
                              expect_uid=meta.get("uid"), status_only=True)
        except Exception as e:
            log.debug("kubelet could not start %s: %s", meta["name"], e)

    def _pool_for(self, node: str) -> _IPPool:
        cidr = ((self._nodes.get(node) or {}).get("spec") or {}).get("podCIDR")
        if not cidr:
            return self._cluster_pool
        pool = self._pools.get(cidr)
        if pool is None:
            try:
                network = ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                return self._cluster_pool
            pool = self._pools[cidr] = _IPPool(network, 2 if network.num_addresses > 4 else 0)
        return pool

    def _start(self, pod: dict, host_ip: str | None, ip: str | None) -> None:
        now = self.store.clock.wall()
        stamp = rfc3339(now)
        status = pod.setdefault("status", {})
        status["phase"] = "Running"
        status.setdefault("startTime", stamp)
        if host_ip:
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        if ip:
            status["podIP"] = ip
            status["podIPs"] = [{"ip": ip}]
        conditions = [c for c in status.get("conditions") or [] if c.get("type") in KUBELET_CONDITIONS]
        for kind in KUBELET_CONDITIONS:
            conditions = set_condition(conditions, {"type": kind, "status": "True"}, now)
        others = [c for c in status.get("conditions") or [] if c.get("type") not in KUBELET_CONDITIONS]
        status["conditions"] = conditions + others
        spec = pod.get("spec") or {}
        status["containerStatuses"] = _container_statuses(spec.get("containers") or [], status.get("containerStatuses"), stamp)
        if spec.get("initContainers"):
            status["initContainerStatuses"] = _init_statuses(spec["initContainers"], status.get("initContainerStatuses"), stamp)

    def _reject(self, pod: dict, node: str, rejection: Rejection) -> None:
        """``rejectPod``: Failed with the reason, kubelet conditions dropped, others kept."""
        meta = pod["metadata"]
        stamp = rfc3339(self.store.clock.wall())

        def change(p: dict) -> None:
            old = p.get("status") or {}
            status = {"phase": "Failed", "reason": rejection.reason, "message": REJECTED_PREFIX + rejection.message,
                      "startTime": old.get("startTime") or stamp}
            if old.get("qosClass"):
                status["qosClass"] = old["qosClass"]
            kept = [c for c in old.get("conditions") or [] if c.get("type") not in KUBELET_CONDITIONS]
            if kept:
                status["conditions"] = kept
            p["status"] = status

        try:
            self.store.mutate(POD, meta.get("namespace"), meta["name"], change, expect_uid=meta.get("uid"), status_only=True)
        except Exception as e:
            log.debug("kubelet could not reject %s: %s", meta["name"], e)
            return
        self._record(pod, "Warning", rejection.reason, rejection.message, "kubelet", node)

    def _stop_confirmed(self, pod: dict) -> bool:
        """Whether the pod's kubelet is up to report its containers stopped (see the store)."""
        node = self._nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        return node is None or not kubelet_stopped(node)

    def _report_ready(self, node: str) -> None:
        """A kubelet back from a stop reports its running pods Ready again (the node lifecycle
        controller marked them not ready meanwhile)."""
        now = self.store.clock.wall()

        def change(pod: dict) -> None:
            status = pod.setdefault("status", {})
            for kind in ("ContainersReady", "Ready"):
                status["conditions"] = set_condition(status.get("conditions") or [], {"type": kind, "status": "True"}, now)

        for uid, (pod_node, info, _, _) in list(self._running.items()):
            if pod_node != node:
                continue
            meta = info.pod["metadata"]
            try:
                self.store.mutate(POD, meta.get("namespace"), meta["name"], change, expect_uid=uid, status_only=True)
            except Exception as e:
                log.debug("kubelet could not report %s ready: %s", meta["name"], e)

    # --- deletion ----------------------------------------------------------------------------------
    def _finish_deletion(self, pod: dict, node: str) -> None:
        """Terminating pods with no kubelet to wait for, or past their grace period, go now."""
        if node not in self._nodes:
            self._force_delete(pod)
            return
        if kubelet_stopped(self._nodes[node]):
            return  # nobody to stop the containers: Terminating until the kubelet is back
        due = parse_time(pod["metadata"].get("deletionTimestamp"))
        if due and due + 1 < self.store.clock.wall():  # past by more than the timestamp's resolution
            self._force_delete(pod)
            return
        uid = pod["metadata"].get("uid", "")
        if self.termination_delay is not None and uid not in self._terminating:
            self._terminating[uid] = asyncio.get_running_loop().call_later(self.termination_delay, self._terminated, _key(pod), uid)

    def _terminated(self, key: tuple[str, str], uid: str) -> None:
        """The containers have stopped: remove the pod unless finalizers still hold it."""
        self._terminating.pop(uid, None)
        pod = self.store.try_get(POD, key[0] or None, key[1])
        if pod is not None and pod["metadata"].get("uid") == uid and not pod["metadata"].get("finalizers"):
            self._force_delete(pod)

    def _force_delete(self, pod: dict) -> None:
        meta = pod["metadata"]
        try:
            self.store.delete(POD, meta.get("namespace"), meta["name"], grace_period=0, uid=meta.get("uid"))
        except Exception as e:
            log.debug("kubelet could not remove %s: %s", meta["name"], e)

    # --- orphans (PodGC) --------------------------------------------------------------------------
    def _quarantine(self, node: str) -> None:
        if node not in self._quarantined:
            self._quarantined[node] = asyncio.get_running_loop().call_later(ORPHAN_QUARANTINE, self._collect_orphans, node)

    def _collect_orphans(self, node: str) -> None:
        """``gcOrphaned``: the node is still missing, so its pods go."""
        self._quarantined.pop(node, None)
        if node in self._nodes:
            return
        for pod in list(self._on_node.get(node, {}).values()):
            self._delete_orphan(pod)

    def _delete_orphan(self, pod: dict) -> None:
        """``markFailedAndDeletePodWithCondition``: Failed with DisruptionTarget, then deleted at once."""
        meta = pod["metadata"]
        ns, name, uid = meta.get("namespace"), meta["name"], meta.get("uid")
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                     "message": "PodGC: node no longer exists"}
        now = self.store.clock.wall()

        def change(p: dict) -> None:
            status = p.setdefault("status", {})
            if status.get("phase") not in ("Succeeded", "Failed"):
                status["phase"] = "Failed"
                status["conditions"] = set_condition(status.get("conditions") or [], condition, now)

        try:
            self.store.mutate(POD, ns, name, change, expect_uid=uid, status_only=True)
            self.store.delete(POD, ns, name, grace_period=0, uid=uid)
        except Exception as e:
            log.debug("PodGC could not delete orphan %s/%s: %s", ns, name, e)

    # --- NoExecute taints --------------------------------------------------------------------------
    def _node_taints_changed(self, node: str, taints: list[Taint]) -> None:
        """``handleNodeUpdate``: re-evaluate every pod on the node against its NoExecute taints."""
        if taints:
            self._tainted[node] = taints
        else:
            self._tainted.pop(node, None)
        pods = list(self._on_node.get(node, {}).values())
        if not taints:
            for pod in pods:
                self._cancel_eviction(_key(pod))
            return
        now = asyncio.get_running_loop().time()
        for pod in pods:
            self._process_pod_on_node(pod, taints, now)

    def _pod_taints(self, event: WatchEvent, pod: dict, node: str) -> None:
        """``PodUpdated``: only a new pod, a new node or changed tolerations matter."""
        if event.type == MODIFIED and event.old is not None:
            old_spec = event.old.get("spec") or {}
            if old_spec.get("tolerations") == (pod.get("spec") or {}).get("tolerations") and old_spec.get("nodeName") == node:
                return
        taints = self._tainted.get(node)
        if taints:
            self._process_pod_on_node(pod, taints, asyncio.get_running_loop().time())

    def _process_pod_on_node(self, pod: dict, taints: list[Taint], now: float) -> None:
        key = _key(pod)
        tolerated, used = matching_tolerations(taints, PodInfo(pod).tolerations)
        if not tolerated:
            self._cancel_eviction(key)
            self._evict(key)
            return
        seconds = min_toleration_seconds(used)
        if seconds < 0:
            self._cancel_eviction(key)
            return
        trigger = now + seconds
        start = now
        existing = self._evictions.get(key)
        if existing is not None:
            start = existing.created
            if start + seconds < trigger:
                return
            self._cancel_eviction(key)
        if trigger <= now:
            self._evict(key)
            return
        loop = asyncio.get_running_loop()
        self._evictions[key] = _Eviction(start, loop.call_later(trigger - now, self._fire, key))

    def _fire(self, key: tuple[str, str]) -> None:
        self._evictions.pop(key, None)
        self._evict(key)

    def _cancel_eviction(self, key: tuple[str, str], *, event: bool = True) -> None:
        eviction = self._evictions.pop(key, None)
        if eviction is None:
            return
        if eviction.handle is not None:
            eviction.handle.cancel()
        if event:
            self._record_for(key, "Normal", "TaintManagerEviction", f"Cancelling deletion of Pod {key[0]}/{key[1]}")

    def _evict(self, key: tuple[str, str]) -> None:
        """``addConditionAndDeletePod``: mark DisruptionTarget, then delete (gracefully)."""
        ns, name = key
        pod = self.store.try_get(POD, ns, name)
        if pod is None:
            return
        self._record(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {ns}/{name}", "taint-eviction-controller")
        now = self.store.clock.wall()
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                     "message": "Taint manager: deleting due to NoExecute taint"}

        def change(p: dict) -> None:
            status = p.setdefault("status", {})
            status["conditions"] = set_condition(status.get("conditions") or [], condition, now)

        try:
            self.store.mutate(POD, ns, name, change, expect_uid=pod["metadata"].get("uid"), status_only=True)
            self.store.delete(POD, ns, name, uid=pod["metadata"].get("uid"))
        except Exception as e:
            log.debug("taint eviction of %s/%s failed: %s", ns, name, e)

    # --- events ------------------------------------------------------------------------------------
    def _record_for(self, key: tuple[str, str], event_type: str, reason: str, message: str) -> None:
        pod = self.store.try_get(POD, key[0], key[1])
        if pod is not None:
            self._record(pod, event_type, reason, message, "taint-eviction-controller")

    def _record(self, pod: dict, event_type: str, reason: str, message: str, component: str, host: str = "") -> None:
        """Through one writer per component, which counts repeats and names events apart."""
        writer = self._writers.get(component)
        if writer is None:
            writer = self._writers[component] = EventWriter(self.store, component, self.events)
        writer(pod, event_type, reason, message, host=host or None)


def _key(pod: dict) -> tuple[str, str]:
    return pod["metadata"].get("namespace") or "", pod["metadata"]["name"]


def _node_ip(node: dict | None) -> str | None:
    for address in ((node or {}).get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address"):
            return address["address"]
    return None


def _container_statuses(containers: list[dict], existing: list[dict] | None, stamp: str) -> list[dict]:
    """A running status per container, keeping any status already reported for a container."""
    known = {cs.get("name"): cs for cs in existing or []}
    out = []
    for c in containers:
        name = c.get("name", "")
        out.append(known.get(name) or {
            "name": name, "image": c.get("image", ""), "imageID": "", "containerID": f"containerd://{name}",
            "ready": True, "restartCount": 0, "started": True, "lastState": {},
            "state": {"running": {"startedAt": stamp}},
        })
    return out


def _init_statuses(containers: list[dict], existing: list[dict] | None, stamp: str) -> list[dict]:
    """Init containers have completed; restartable (sidecar) ones are running."""
    known = {cs.get("name"): cs for cs in existing or []}
    out = []
    for c in containers:
        name = c.get("name", "")
        if name in known:
            out.append(known[name])
            continue
        sidecar = c.get("restartPolicy") == "Always"
        state = ({"running": {"startedAt": stamp}} if sidecar else
                 {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp}})
        out.append({"name": name, "image": c.get("image", ""), "imageID": "", "containerID": f"containerd://{name}",
                    "ready": sidecar, "restartCount": 0, "started": sidecar, "lastState": {}, "state": state})
    return out
