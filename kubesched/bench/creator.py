"""Creating many objects over HTTP in concurrent batches, from this process or from another one.

The measured pods of ``--mode http`` are created by a separate process (``create_in_subprocess``):
the creator's JSON encoding and HTTP handling then run beside the scheduler instead of on its
event loop, as scheduler_perf's pod creator runs on other cores than the scheduler.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

import orjson

from kubesched.api.kinds import kind_named
from kubesched.client.kube import KubeClient

#: Requests in flight at once (scheduler_perf's pod creator uses a pool of workers the same way).
CONCURRENCY = 64


async def create_concurrently(client: KubeClient, objs: Sequence[dict], concurrency: int = CONCURRENCY) -> None:
    """POST every object, ``concurrency`` at a time, in order of submission; raise the first error."""
    queue: asyncio.Queue[dict] = asyncio.Queue()
    for obj in objs:
        queue.put_nowait(obj)

    async def worker() -> None:
        while not queue.empty():
            obj = queue.get_nowait()
            kind = kind_named(obj["kind"])
            assert kind is not None
            await client.create(kind, obj)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(objs))))))


async def create_in_subprocess(kubeconfig: str, objs: list[dict], concurrency: int = CONCURRENCY) -> None:
    """``create_concurrently`` in a child process (``python -m kubesched.bench.creator``), which
    reads the objects as JSON from its standard input; returns once it exited successfully."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "kubesched.bench.creator", kubeconfig, str(concurrency),
                                                stdin=asyncio.subprocess.PIPE)
    await proc.communicate(orjson.dumps(objs))
    if proc.returncode != 0:
        raise RuntimeError(f"the pod creator process failed (exit code {proc.returncode})")


async def _main(kubeconfig: str, concurrency: int) -> None:
    objs = orjson.loads(sys.stdin.buffer.read())
    client = KubeClient(kubeconfig=kubeconfig, connections=concurrency, user_agent="kubesched-bench-creator")
    try:
        await create_concurrently(client, objs, concurrency)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], int(sys.argv[2])))
