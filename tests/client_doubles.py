"""A scripted ``ClusterClient`` for informer tests: lists, watches and identity probes follow a
script, and every call is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from kubesched.api.apierrors import Forbidden


class ScriptedClient:
    """Lists come from ``lists`` (then an empty list), watch streams from ``watches`` (a list of
    batches, an exception to raise, or None for a stream that stays quiet), identity probes from
    ``identities`` (the last one repeats). Without identities the probe is refused, as for a client
    that may not list namespaces: informers then watch on as they would without the probe."""

    def __init__(self, lists: list[tuple[list[dict], str]] | None = None, watches: list[object] | None = None,
                 identities: list[tuple[str, str]] | None = None) -> None:
        self.lists = lists or []
        self.watches = watches or []
        self.identities = identities or []
        self.list_calls = 0
        self.watch_calls: list[str] = []

    async def list(self, kind: object, *, field_selector: str = "") -> tuple[list[dict], str]:
        self.list_calls += 1
        return self.lists.pop(0) if self.lists else ([], "0")

    async def watch(self, kind: object, resource_version: str, *, field_selector: str = "") -> AsyncIterator[object]:
        self.watch_calls.append(resource_version)
        step = self.watches.pop(0) if self.watches else None
        if step is None:
            await asyncio.Event().wait()  # a quiet stream
        if isinstance(step, BaseException):
            raise step
        for batch in step:  # type: ignore[attr-defined]
            yield batch

    async def server_identity(self) -> tuple[str, str]:
        if not self.identities:
            raise Forbidden.of("namespaces", "", "the scripted client may not list namespaces")
        return self.identities.pop(0) if len(self.identities) > 1 else self.identities[0]


async def settle(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait (on the loop's clock) until ``check()`` holds; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)
