"""kube-controller-manager's node lifecycle controller, for nodes whose kubelet stopped
(upstream ``pkg/controller/nodelifecycle/node_lifecycle_controller.go``, ``monitorNodeHealth``).

Every ``nodeMonitorPeriod`` (5 s) each node's last heartbeat is checked: when its Lease's
``renewTime`` or its Ready condition's ``lastHeartbeatTime`` last changed. A node silent for longer than the
``nodeMonitorGracePeriod`` (50 s; ``nodeStartupGracePeriod``, 60 s, for a node that never posted
Ready) gets its kubelet conditions set to ``Unknown`` (``NodeStatusUnknown``, "Kubelet stopped
posting node status."), and the ``node.kubernetes.io/unreachable`` taints, NoSchedule and
NoExecute; the node gets a ``NodeNotReady`` event, and each of its pods the Ready condition
``False`` and a ``NodeNotReady`` warning (``MarkPodsNotReady``). The NoExecute taint makes the taint eviction in ``kubesched.simulator.kubelet`` delete
its pods once their ``tolerationSeconds`` pass (300 s, which the DefaultTolerationSeconds
admission adds to every pod). When heartbeats resume and the kubelet posts Ready again, the
taints go.

The controller reacts to lost heartbeats only: a node whose kubelet posts Ready ``False`` (modelled
in a manifest) gets no ``not-ready`` taints. Simulate a crashed node with the ``kubesched.io/simulate-failure``
annotation (``kubesched.simulator.nodestatus``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubesched.api.apierrors import APIError, NotFound
from kubesched.api.kinds import Kind, known_kind
from kubesched.api.watch import DELETED, WatchEvent
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.controllers.util import EventWriter
from kubesched.simulator.nodestatus import HEALTHY_CONDITIONS, LEASE, NODE, NODE_LEASE_NAMESPACE, kubelet_stopped
from kubesched.utils.clock import rfc3339

log = logging.getLogger(__name__)

POD = known_kind("Pod")

NODE_MONITOR_PERIOD = 5.0
#: kube-controller-manager's ``--node-monitor-grace-period`` default (50 s since 1.32).
NODE_MONITOR_GRACE_PERIOD = 50.0
NODE_STARTUP_GRACE_PERIOD = 60.0
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
STOPPED_MESSAGE = "Kubelet stopped posting node status."
NEVER_MESSAGE = "Kubelet never posted node status."


def _ready(node: dict) -> dict | None:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition
    return None


def unknown_conditions(conditions: list[dict], now: float) -> list[dict]:
    """The kubelet's conditions set to Unknown (missing ones added as never updated); others kept."""
    stamp = rfc3339(now)
    by_type = {c.get("type"): c for c in conditions if isinstance(c, dict)}
    out = []
    for kind, *_ in HEALTHY_CONDITIONS:
        old = by_type.get(kind)
        if old is None:
            out.append({"type": kind, "status": "Unknown", "lastHeartbeatTime": stamp, "lastTransitionTime": stamp,
                        "reason": "NodeStatusNeverUpdated", "message": NEVER_MESSAGE})
        elif old.get("status") == "Unknown":
            out.append(old)
        else:
            out.append({**old, "status": "Unknown", "lastTransitionTime": stamp, "reason": "NodeStatusUnknown",
                        "message": STOPPED_MESSAGE})
    kubelet_owned = {kind for kind, *_ in HEALTHY_CONDITIONS}
    out.extend(c for c in conditions if isinstance(c, dict) and c.get("type") not in kubelet_owned)
    return out


def with_unreachable_taints(taints: list[dict], unreachable: bool, now: float) -> list[dict]:
    """``taints`` with the unreachable NoSchedule and NoExecute taints added or removed."""
    kept = [t for t in taints if not (isinstance(t, dict) and t.get("key") == UNREACHABLE_TAINT_KEY)]
    if not unreachable:
        return kept
    return [*kept, {"key": UNREACHABLE_TAINT_KEY, "effect": "NoSchedule"},
            {"key": UNREACHABLE_TAINT_KEY, "effect": "NoExecute", "timeAdded": rfc3339(now)}]


def _has_unreachable(node: dict) -> bool:
    return any(isinstance(t, dict) and t.get("key") == UNREACHABLE_TAINT_KEY
               for t in (node.get("spec") or {}).get("taints") or [])


class NodeLifecycleController:
    """See the module docstring. As upstream, a heartbeat counts when it is observed: the
    controller follows node and Lease writes and notes, on its own clock, when a Lease's
    ``renewTime`` or the Ready condition's ``lastHeartbeatTime`` last changed (the probe
    timestamp), so each pass only compares numbers."""

    def __init__(self, store: ObjectStore, *, monitor_period: float = NODE_MONITOR_PERIOD,
                 grace_period: float = NODE_MONITOR_GRACE_PERIOD, startup_grace_period: float = NODE_STARTUP_GRACE_PERIOD) -> None:
        self.store = store
        self.events = EventWriter(store, "node-controller")
        self.monitor_period = monitor_period
        self.grace_period = grace_period
        self.startup_grace_period = startup_grace_period
        self._timer: asyncio.TimerHandle | None = None
        #: node -> loop time its last heartbeat was observed.
        self._probe: dict[str, float] = {}
        #: Nodes that carry the unreachable taints (to lift them once the kubelet is back).
        self._tainted: set[str] = set()
        #: Nodes whose kubelet is stopped and that are not marked unreachable yet.
        self._failing: set[str] = set()

    def start(self) -> None:
        now = asyncio.get_running_loop().time()
        for node in self.store.iter_all(NODE):
            self._observe_node(node, None, now)
        self.store.write_hooks.append(self._on_write)
        self._timer = asyncio.get_running_loop().call_later(self.monitor_period, self._tick)

    async def stop(self) -> None:
        if self._on_write in self.store.write_hooks:
            self.store.write_hooks.remove(self._on_write)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def idle(self) -> bool:
        """Busy while a node with a stopped kubelet has not been marked unreachable yet, or a node
        marked unreachable is Ready again and keeps its taints until the next pass, so that a
        simulation runs on until the failure (or the recovery) has played out."""
        return not self._failing and not any(self._recovered(name) for name in self._tainted)

    def _recovered(self, name: str) -> bool:
        node = self.store.try_get(NODE, None, name)
        return node is not None and (_ready(node) or {}).get("status") == "True"

    # --- observing heartbeats --------------------------------------------------------------------
    def _on_write(self, _rv: int, kind: Kind, event: WatchEvent) -> None:
        if kind is NODE:
            if event.type == DELETED:
                name = event.object["metadata"]["name"]
                self._probe.pop(name, None)
                self._tainted.discard(name)
                self._failing.discard(name)
            else:
                self._observe_node(event.object, event.old, asyncio.get_running_loop().time())
        elif kind is LEASE and event.type != DELETED and event.object["metadata"].get("namespace") == NODE_LEASE_NAMESPACE:
            renewed = (event.object.get("spec") or {}).get("renewTime")
            if event.old is None or renewed != (event.old.get("spec") or {}).get("renewTime"):
                name = event.object["metadata"]["name"]
                if name in self._probe:
                    self._probe[name] = asyncio.get_running_loop().time()

    def _observe_node(self, node: dict, old: dict | None, now: float) -> None:
        name = node["metadata"]["name"]
        beat = (_ready(node) or {}).get("lastHeartbeatTime")
        if name not in self._probe or old is None or beat != (_ready(old) or {}).get("lastHeartbeatTime"):
            self._probe[name] = now
        unreachable = _has_unreachable(node)
        (self._tainted.add if unreachable else self._tainted.discard)(name)
        (self._failing.add if kubelet_stopped(node) and not unreachable else self._failing.discard)(name)

    # --- monitoring ----------------------------------------------------------------------------------
    def _tick(self) -> None:
        try:
            self.monitor()
        finally:
            self._timer = asyncio.get_running_loop().call_later(self.monitor_period, self._tick)

    def monitor(self) -> None:
        """One ``monitorNodeHealth`` pass: mark the nodes silent for too long, and lift the taints
        of tainted nodes that are Ready again."""
        now = asyncio.get_running_loop().time()
        wall = self.store.clock.wall()
        overdue = [name for name, probe in self._probe.items() if now - probe > self.grace_period]
        for name in sorted({*overdue, *self._tainted}):
            node = self.store.try_get(NODE, None, name)
            if node is None:
                continue
            ready = _ready(node)
            status = (ready or {}).get("status")
            if status == "True" and name in self._tainted and name not in overdue:
                self._write(name, lambda n: self._set_taints(n, False, wall))
                continue
            grace = self.grace_period if ready is not None else self.startup_grace_period
            if now - self._probe.get(name, now) <= grace:
                continue
            if status == "Unknown" and name in self._tainted:
                continue  # already marked
            if self._write(name, lambda n: self._mark_unknown(n, wall)) and status == "True":
                self.events(node, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")
                self._mark_pods_not_ready(name, wall)

    def _mark_pods_not_ready(self, node: str, now: float) -> None:
        """``MarkPodsNotReady``: the Ready condition of every pod on the node turns False."""
        def change(pod: dict) -> None:
            status = pod.setdefault("status", {})
            for condition in status.get("conditions") or []:
                if condition.get("type") == "Ready" and condition.get("status") != "False":
                    condition["status"] = "False"
                    condition["lastTransitionTime"] = rfc3339(now)

        for pod in [p for p in self.store.iter_all(POD) if (p.get("spec") or {}).get("nodeName") == node]:
            meta = pod["metadata"]
            ready = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
            if ready is None or ready.get("status") == "False":
                continue
            try:
                self.store.mutate(POD, meta.get("namespace"), meta["name"], change, expect_uid=meta.get("uid"))
            except APIError as e:
                log.debug("could not mark pod %s/%s not ready: %s", meta.get("namespace"), meta["name"], e)
                continue
            self.events(pod, "Warning", "NodeNotReady", "Node is not ready")

    def _mark_unknown(self, node: dict, now: float) -> None:
        status = node.setdefault("status", {})
        status["conditions"] = unknown_conditions(status.get("conditions") or [], now)
        self._set_taints(node, True, now)

    @staticmethod
    def _set_taints(node: dict, unreachable: bool, now: float) -> None:
        spec = node.setdefault("spec", {})
        taints = with_unreachable_taints(spec.get("taints") or [], unreachable, now)
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)

    def _write(self, name: str, change: Callable[[dict], None]) -> bool:
        try:
            self.store.mutate(NODE, None, name, change)
        except NotFound:
            return False
        except APIError as e:
            log.warning("node lifecycle controller could not update node %s: %s", name, e)
            return False
        return True
