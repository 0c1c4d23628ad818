"""What each fake kubelet reports about its node: status and heartbeats.

A real kubelet registers its node and then keeps two signs of life (upstream
``pkg/kubelet/kubelet_node_status.go`` and ``pkg/kubelet/nodestatus/setters.go``):

* the node's status: the MemoryPressure, DiskPressure and PIDPressure conditions (False) and Ready
  (True, ``KubeletReady``), ``nodeInfo`` (kubelet version, OS, architecture), ``addresses`` and
  ``daemonEndpoints``. It is posted at registration and then every ``nodeStatusReportFrequency``
  (5 minutes) with fresh ``lastHeartbeatTime`` values;
* a Lease named after the node in ``kube-node-lease`` (owned by the node), whose ``renewTime`` is
  renewed every quarter of its 40 second duration, which is what the node lifecycle controller
  watches to decide whether the node is alive.

Without these, ``kubectl get nodes`` shows every node ``Unknown`` with no VERSION. The reporter
writes to the object store directly, on the store's clock (virtual in simulations, so renewals
cost no real time there). A node's own status fields given in a manifest are kept: a condition the
manifest set (a node modelled under MemoryPressure, say) keeps its status, and given ``nodeInfo``
or ``addresses`` values win over the reporter's.

A node annotated ``kubesched.io/simulate-failure: "true"`` has a kubelet that stopped: it posts
nothing and renews nothing until the annotation goes, so the node lifecycle controller marks it
unreachable as it would a crashed machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
from collections.abc import Callable

from kubesched.api.apierrors import AlreadyExists, APIError, NotFound
from kubesched.api.kinds import known_kind
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import rfc3339, rfc3339_micro

log = logging.getLogger(__name__)



NODE = known_kind("Node")
LEASE = known_kind("Lease")
KUBELET_VERSION = "v1.35.0"
NODE_LEASE_NAMESPACE = "kube-node-lease"
#: The kubelet's ``nodeLeaseDurationSeconds`` default.
LEASE_DURATION = 40
#: ``renewIntervalFraction`` (0.25) of the lease duration.
LEASE_RENEW_INTERVAL = LEASE_DURATION * 0.25
#: ``nodeStatusReportFrequency``: how often an unchanged status is posted again.
STATUS_REPORT_FREQUENCY = 300.0
KUBELET_PORT = 10250
#: The network the nodes' InternalIP addresses come from when a manifest gives none (kind's).
NODE_NETWORK = ipaddress.ip_network("172.18.0.0/16")
FAILURE_ANNOTATION = "kubesched.io/simulate-failure"
#: The conditions a kubelet sets, with (status, reason, message) of a healthy node.
HEALTHY_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def kubelet_stopped(node: dict) -> bool:
    """Whether the node's kubelet is simulated as down (see the module docstring)."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(FAILURE_ANNOTATION, "")).lower() == "true"


def kubelet_conditions(existing: list[dict], now: float) -> list[dict]:
    """The node's conditions after a heartbeat: the kubelet's four with ``lastHeartbeatTime`` now
    (a condition coming back from ``Unknown`` gets a new ``lastTransitionTime``; one given as
    unhealthy, such as a manifest's ``Ready: "False"``, keeps its status), followed by conditions other components own (NetworkUnavailable, ...)."""
    stamp = rfc3339(now)
    by_type = {c.get("type"): c for c in existing if isinstance(c, dict)}
    out = []
    for kind, status, reason, message in HEALTHY_CONDITIONS:
        old = by_type.get(kind)
        if old is not None and old.get("status") not in (status, "Unknown"):
            out.append({**old, "lastHeartbeatTime": stamp})  # set by the manifest: a modelled condition
            continue
        transition = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
        out.append({"type": kind, "status": status, "lastHeartbeatTime": stamp,
                    "lastTransitionTime": transition or stamp, "reason": reason, "message": message})
    kubelet_owned = {kind for kind, *_ in HEALTHY_CONDITIONS}
    out.extend(c for c in existing if isinstance(c, dict) and c.get("type") not in kubelet_owned)
    return out


def node_info(node: dict) -> dict:
    """``nodeInfo`` as a kubelet reports it; ids are derived from the node's uid so they are stable."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    digest = hashlib.sha256(str((node.get("metadata") or {}).get("uid", "")).encode()).hexdigest()
    machine = digest[:32]

    def as_uuid(hex32: str) -> str:
        return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:32]}"

    info = {"machineID": machine, "systemUUID": as_uuid(machine), "bootID": as_uuid(digest[32:64]),
            "kernelVersion": "", "osImage": "kubesched simulated node", "containerRuntimeVersion": "kubesched://simulated",
            "kubeletVersion": KUBELET_VERSION,
            # Deprecated and left empty by kubelets since 1.31, but a required field that
            # kube-apiserver always serves (clients such as the official Python one insist on it).
            "kubeProxyVersion": "", "operatingSystem": labels.get("kubernetes.io/os") or "linux",
            "architecture": labels.get("kubernetes.io/arch") or "amd64"}
    given = ((node.get("status") or {}).get("nodeInfo")) or {}
    return {**info, **{k: v for k, v in given.items() if v}} if isinstance(given, dict) else info


def node_addresses(node: dict, internal_ip: str) -> list[dict]:
    """InternalIP and Hostname, unless the manifest gave addresses."""
    given = (node.get("status") or {}).get("addresses")
    if isinstance(given, list) and given:
        return given
    labels = (node.get("metadata") or {}).get("labels") or {}
    hostname = labels.get("kubernetes.io/hostname") or node["metadata"]["name"]
    return [{"type": "InternalIP", "address": internal_ip}, {"type": "Hostname", "address": hostname}]


def node_lease(node: dict, now: float) -> dict:
    """The node's Lease in ``kube-node-lease``, owned by the node so that it goes with it."""
    meta = node["metadata"]
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": meta["name"], "namespace": NODE_LEASE_NAMESPACE,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta.get("uid", "")}]},
        "spec": {"holderIdentity": meta["name"], "leaseDurationSeconds": LEASE_DURATION, "renewTime": rfc3339_micro(now)},
    }


class NodeStatusReporter:
    """Every node's status poster and lease renewer (see the module docstring).

    Fed node events by the kubelet (``node_seen``, ``node_gone``); renews all leases on one
    periodic timer rather than one per node, and re-posts statuses every report period."""

    def __init__(self, store: ObjectStore, *, renew_interval: float = LEASE_RENEW_INTERVAL,
                 report_frequency: float = STATUS_REPORT_FREQUENCY) -> None:
        self.store = store
        self.renew_interval = renew_interval
        self.report_frequency = report_frequency
        self._addresses: dict[str, str] = {}
        self._next_address = 2
        self._nodes: dict[str, bool] = {}  # name -> kubelet stopped
        self._registered: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._last_report = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._last_report = loop.time()
        self._timer = loop.call_later(self.renew_interval, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def node_seen(self, node: dict) -> None:
        """A node was added or changed: register it (status and lease) the first time its kubelet runs."""
        name = node["metadata"]["name"]
        stopped = kubelet_stopped(node)
        was_stopped = self._nodes.get(name)
        self._nodes[name] = stopped
        if stopped:
            return
        if name not in self._registered or was_stopped:
            self._registered.add(name)
            self._post_status(name)
            self._renew(name)

    def node_gone(self, name: str) -> None:
        self._nodes.pop(name, None)
        self._registered.discard(name)

    def internal_ip(self, name: str) -> str:
        """A stable address per node, handed out in registration order."""
        ip = self._addresses.get(name)
        if ip is None:
            ip = self._addresses[name] = str(NODE_NETWORK[self._next_address % (NODE_NETWORK.num_addresses - 1)])
            self._next_address += 1
        return ip

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        report = loop.time() - self._last_report >= self.report_frequency
        if report:
            self._last_report = loop.time()
        for name, stopped in list(self._nodes.items()):
            if stopped:
                continue
            if report:
                self._post_status(name)
            self._renew(name)
        self._timer = loop.call_later(self.renew_interval, self._tick)

    def _post_status(self, name: str) -> None:
        now = self.store.clock.wall()

        def change(node: dict) -> None:
            status = node.setdefault("status", {})
            conditions = status.get("conditions")
            status["conditions"] = kubelet_conditions(conditions if isinstance(conditions, list) else [], now)
            status["nodeInfo"] = node_info(node)
            status["addresses"] = node_addresses(node, self.internal_ip(name))
            status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": KUBELET_PORT}}

        self._write(f"post the status of node {name}", lambda: self.store.mutate(NODE, None, name, change, status_only=True))

    def _renew(self, name: str) -> None:
        """Set the lease's ``renewTime`` (creating the lease if it is missing). A shallow copy is
        enough, as only ``spec`` changes, and keeps renewals cheap on large clusters."""
        now = rfc3339_micro(self.store.clock.wall())

        def renew() -> None:
            lease = self.store.try_get(LEASE, NODE_LEASE_NAMESPACE, name)
            if lease is None:
                node = self.store.try_get(NODE, None, name)
                if node is not None:
                    self.store.create(LEASE, node_lease(node, self.store.clock.wall()))
                return
            spec = {**(lease.get("spec") or {}), "renewTime": now, "holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION}
            self.store.update(LEASE, {**lease, "spec": spec})

        self._write(f"renew the lease of node {name}", renew)

    @staticmethod
    def _write(what: str, write: Callable[[], object]) -> None:
        try:
            write()
        except (NotFound, AlreadyExists):
            return  # the node went meanwhile, or a client made the lease first: the next tick catches up
        except APIError as e:
            log.warning("kubelet could not %s: %s", what, e)
