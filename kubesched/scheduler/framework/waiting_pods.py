"""Pods parked by Permit plugins that answered Wait (upstream ``waiting_pods_map.go``).

A waiting pod is allowed once every plugin that asked it to wait allows it; any plugin may reject
it; each plugin's wait ends with a rejection when its timeout (read on the event loop's clock,
so virtual in simulations) expires.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.status import Code, Status


class WaitingPod:
    def __init__(self, pod: PodInfo, plugin_timeouts: dict[str, float]) -> None:
        self.pod = pod
        loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Status | None] = loop.create_future()
        #: Plugins still to allow the pod, each with the timer that rejects it when its wait is over.
        self._pending: dict[str, asyncio.TimerHandle] = {}
        for plugin, timeout in plugin_timeouts.items():
            msg = f"rejected due to timeout after waiting {_go_duration(timeout)} at plugin {plugin}"
            self._pending[plugin] = loop.call_later(timeout, self.reject, plugin, msg)

    def pending_plugins(self) -> list[str]:
        return list(self._pending)

    def allow(self, plugin: str) -> None:
        """A plugin that allowed the pod has no say any more: its timer stops too."""
        timer = self._pending.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if not self._pending:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.Unschedulable, message, plugin=plugin))

    def _finish(self, status: Status | None) -> None:
        if self._future.done():
            return
        for timer in self._pending.values():
            timer.cancel()
        self._future.set_result(status)

    async def wait(self) -> Status | None:
        return await self._future


class WaitingPods:
    """Shared by every profile's framework, as upstream's map is."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, pod: WaitingPod) -> None:
        self._pods[pod.pod.uid] = pod

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def get(self, uid: str) -> WaitingPod | None:
        return self._pods.get(uid)

    def iterate(self, callback: Callable[[WaitingPod], None]) -> None:
        for pod in list(self._pods.values()):
            callback(pod)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)


def _go_duration(seconds: float) -> str:
    """Render seconds as Go's ``time.Duration.String()`` does for whole and fractional values."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms"
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    out = ""
    if hours:
        out += f"{int(hours)}h"
    if hours or minutes:
        out += f"{int(minutes)}m"
    out += f"{secs:g}s"
    return out
