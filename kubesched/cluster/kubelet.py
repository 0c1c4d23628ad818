"""A fake kubelet for the embedded cluster: pods bound to a node start Running with a start time
and an IP, so what follows scheduling (preemption victim order, ``kubectl get pods``) looks like a
real cluster. It works on the object store directly and reacts to its watch stream.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging

from kubesched.clock import rfc3339
from kubesched.cluster.store import NODE, POD, ObjectStore, Watch, set_condition

log = logging.getLogger(__name__)

POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")


class FakeKubelet:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._next_ip = 1
        self._watch: Watch | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._watch = self.store.watch(POD)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fake-kubelet")

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def idle(self) -> bool:
        return self._watch is None or not self._watch.pending

    async def _run(self) -> None:
        assert self._watch is not None
        while True:
            batch = await self._watch.next_batch()
            if not batch and self._watch.stopped:
                return
            for event in batch:
                if event.type != "DELETED":
                    self._sync(event.object)

    def _sync(self, pod: dict) -> None:
        spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod["metadata"]
        node_name = spec.get("nodeName")
        if not node_name or status.get("phase") != "Pending" or meta.get("deletionTimestamp"):
            return
        if self.store.try_get(NODE, None, node_name) is None:
            return
        try:
            self.store.mutate(POD, meta.get("namespace"), meta["name"], self._start, expect_uid=meta.get("uid"))
        except Exception as e:
            log.debug("kubelet could not start %s: %s", meta["name"], e)

    def _start(self, pod: dict) -> None:
        now = self.store.clock.wall()
        status = pod.setdefault("status", {})
        status["phase"] = "Running"
        status["startTime"] = rfc3339(now)
        status["podIP"] = self._allocate_ip()
        status["podIPs"] = [{"ip": status["podIP"]}]
        conditions = status.get("conditions") or []
        for kind in ("Initialized", "Ready", "ContainersReady"):
            conditions = set_condition(conditions, {"type": kind, "status": "True"}, now)
        status["conditions"] = conditions
        status["containerStatuses"] = [
            {"name": c.get("name", ""), "image": c.get("image", ""), "ready": True, "restartCount": 0, "started": True,
             "state": {"running": {"startedAt": rfc3339(now)}}}
            for c in (pod.get("spec") or {}).get("containers") or []
        ]

    def _allocate_ip(self) -> str:
        ip = POD_NETWORK[self._next_ip]
        self._next_ip = self._next_ip + 1 if self._next_ip + 1 < POD_NETWORK.num_addresses - 1 else 1
        return str(ip)
