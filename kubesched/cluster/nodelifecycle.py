"""kube-controller-manager's node lifecycle controller, for nodes whose kubelet stopped
(upstream ``pkg/controller/nodelifecycle/node_lifecycle_controller.go``, ``monitorNodeHealth``).

Every ``nodeMonitorPeriod`` (5 s) each node's last heartbeat is read: the later of its Lease's
``renewTime`` and its Ready condition's ``lastHeartbeatTime``. A node silent for longer than the
``nodeMonitorGracePeriod`` (50 s; ``nodeStartupGracePeriod``, 60 s, for a node that never posted
Ready) gets its kubelet conditions set to ``Unknown`` (``NodeStatusUnknown``, "Kubelet stopped
posting node status."), and the ``node.kubernetes.io/unreachable`` taints, NoSchedule and
NoExecute. The NoExecute taint makes the taint eviction in ``kubesched.cluster.kubelet`` delete
its pods once their ``tolerationSeconds`` pass (300 s, which the DefaultTolerationSeconds
admission adds to every pod). When heartbeats resume and the kubelet posts Ready again, the
taints go.

A node whose Ready condition is ``False`` (modelled in a manifest) is left as it is: the controller
reacts to lost heartbeats only. Simulate a crashed node with the ``kubesched.io/simulate-failure``
annotation (``kubesched.cluster.nodestatus``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubesched.clock import rfc3339
from kubesched.cluster.errors import APIError, NotFound
from kubesched.cluster.nodestatus import HEALTHY_CONDITIONS, LEASE, NODE, NODE_LEASE_NAMESPACE, kubelet_stopped
from kubesched.cluster.store import ObjectStore
from kubesched.framework.types import parse_time

log = logging.getLogger(__name__)

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
    """See the module docstring."""

    def __init__(self, store: ObjectStore, *, monitor_period: float = NODE_MONITOR_PERIOD,
                 grace_period: float = NODE_MONITOR_GRACE_PERIOD, startup_grace_period: float = NODE_STARTUP_GRACE_PERIOD) -> None:
        self.store = store
        self.monitor_period = monitor_period
        self.grace_period = grace_period
        self.startup_grace_period = startup_grace_period
        self._timer: asyncio.TimerHandle | None = None
        #: Nodes whose kubelet is stopped and that are not marked unreachable yet.
        self._failing: set[str] = set()

    def start(self) -> None:
        self._refresh_failing()
        self._timer = asyncio.get_running_loop().call_later(self.monitor_period, self._tick)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def idle(self) -> bool:
        """Busy while a node with a stopped kubelet has not been marked unreachable yet, so that a
        simulation runs on until the failure has played out."""
        return not self._failing

    def _refresh_failing(self) -> None:
        self._failing = {node["metadata"]["name"] for node in self.store.iter_all(NODE)
                         if kubelet_stopped(node) and not _has_unreachable(node)}

    def _tick(self) -> None:
        try:
            self.monitor()
        finally:
            self._timer = asyncio.get_running_loop().call_later(self.monitor_period, self._tick)

    def monitor(self) -> None:
        """One ``monitorNodeHealth`` pass over every node."""
        now = self.store.clock.wall()
        for node in list(self.store.iter_all(NODE)):
            name = node["metadata"]["name"]
            ready = _ready(node)
            status = (ready or {}).get("status")
            if status == "True" and _has_unreachable(node):
                self._write(name, lambda n: self._set_taints(n, False, now))
            if status == "False":
                continue
            last = self._last_heartbeat(node, ready)
            grace = self.grace_period if ready is not None else self.startup_grace_period
            if now - last > grace and (status != "Unknown" or not _has_unreachable(node)):
                self._write(name, lambda n: self._mark_unknown(n, now))
        self._refresh_failing()

    def _last_heartbeat(self, node: dict, ready: dict | None) -> float:
        beats = [parse_time((ready or {}).get("lastHeartbeatTime")) or 0.0,
                 parse_time(node["metadata"].get("creationTimestamp")) or 0.0]
        lease = self.store.try_get(LEASE, NODE_LEASE_NAMESPACE, node["metadata"]["name"])
        if lease is not None:
            beats.append(parse_time((lease.get("spec") or {}).get("renewTime")) or 0.0)
        return max(beats)

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

    def _write(self, name: str, change: Callable[[dict], None]) -> None:
        try:
            self.store.mutate(NODE, None, name, change)
        except NotFound:
            return
        except APIError as e:
            log.warning("node lifecycle controller could not update node %s: %s", name, e)
