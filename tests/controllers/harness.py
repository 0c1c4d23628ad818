"""An embedded cluster for controller and kubelet tests: store, fake kubelet, controllers and a
trivial binder standing in for the scheduler, all on virtual time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kubesched.api.kinds import EVENT, NODE, POD
from kubesched.api.selectors import selector_from_set
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.controllers import Controllers, build
from kubesched.simulator.kubelet import FakeKubelet
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock
from tests.helpers import make_node


class Cluster:
    """``settle()`` runs everything until nothing is pending; the binder puts each unbound pod on
    the first node whose labels satisfy its nodeSelector (or leaves it Pending)."""

    def __init__(self, *, controllers: bool = True, kubelet: bool = True, binder: bool = True,
                 collect_dangling: bool = True) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self.store = ObjectStore(LoopClock(loop, VIRTUAL_EPOCH), seed=7)
        self.controllers: Controllers | None = build(self.store, collect_dangling=collect_dangling) if controllers else None
        self.kubelet = FakeKubelet(self.store) if kubelet else None
        self.binder = binder

    def start(self) -> Cluster:
        if self.controllers is not None:
            self.controllers.manager.start()
        if self.kubelet is not None:
            self.kubelet.start()
        return self

    async def stop(self) -> None:
        if self.controllers is not None:
            await self.controllers.stop()
        if self.kubelet is not None:
            await self.kubelet.stop()

    def now(self) -> float:
        return self.loop.time()

    def add_node(self, name: str, **kwargs: Any) -> dict:
        return self.store.create(NODE, make_node(name, **kwargs))

    def quiet(self) -> bool:
        return ((self.controllers is None or self.controllers.idle())
                and (self.kubelet is None or self.kubelet.idle())
                and not self._bindable())

    def _bindable(self) -> list[tuple[dict, str]]:
        if not self.binder:
            return []
        nodes = list(self.store.iter_all(NODE))
        out = []
        for pod in self.store.iter_all(POD):
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            wanted = selector_from_set(spec.get("nodeSelector") or {})
            node = next((n for n in nodes if wanted.matches(n["metadata"].get("labels") or {})), None)
            if node is not None:
                out.append((pod, node["metadata"]["name"]))
        return out

    async def settle(self, *, timers: bool = True, limit: float = 3600.0) -> None:
        """Until quiet (and, with ``timers``, until graceful deletions are over)."""
        deadline = self.now() + limit
        while self.now() < deadline:
            await asyncio.sleep(0.01)
            for pod, node in self._bindable():
                self.store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], node)
            if self.quiet():
                if not timers or not self.store.pending_timers:
                    await asyncio.sleep(0.01)
                    if self.quiet():
                        return
                else:
                    await asyncio.sleep(1.0)
        raise AssertionError("the cluster did not settle")

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass with everything running."""
        end = self.now() + seconds
        while self.now() < end:
            for pod, node in self._bindable():
                self.store.bind(pod["metadata"]["namespace"], pod["metadata"]["name"], node)
            await asyncio.sleep(min(0.5, max(0.0, end - self.now())))

    def pods(self, namespace: str = "default") -> list[dict]:
        return sorted((p for p in self.store.iter_all(POD) if p["metadata"].get("namespace") == namespace),
                      key=lambda p: p["metadata"]["name"])

    def events(self, reason: str | None = None) -> list[dict]:
        return [e for e in self.store.iter_all(EVENT) if reason is None or e.get("reason") == reason]


def run_cluster(test: Callable[[Cluster], Awaitable[None]], **kwargs: Any) -> None:
    """Run ``test`` against a started cluster on a virtual-time loop."""

    async def main() -> None:
        cluster = Cluster(**kwargs).start()
        try:
            await test(cluster)
        finally:
            await cluster.stop()

    run_virtual(main())
