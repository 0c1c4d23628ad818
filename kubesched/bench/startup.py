"""RunStartup: ``kubesched run`` from process start to its first binding.

This tree's API server (``kubesched.bench.apiserver``, in its own process, plain HTTP without
authentication so that any revision's client can talk to it) holds ``nodes`` nodes. For each of
``runs`` starts: ``pods`` pending pods are created in a namespace of their own, a watch on that
namespace is opened, and the subject's ``kubesched run --config C --kubeconfig K --secure-port P``
is spawned; the time from the spawn to the first pod the watch sees bound is the figure, with the
CPU the process used until then (/proc). The process is then stopped (SIGTERM) before the next
start. The configuration turns leader election off: a stopped kube-scheduler does not release its
Lease, so the next start would wait for it to expire; everything else is the default profile.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from kubesched.api.kinds import POD
from kubesched.bench import templates as t
from kubesched.bench.targets import HttpTarget
from kubesched.bench.wholeprocess import RowOptions, cpu_seconds_of, free_port, spawn, stop, while_alive
from kubesched.client.kube import KubeClient

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
"""


def measure(opts: RowOptions) -> dict[str, Any]:
    return asyncio.run(_measure(opts))


async def _measure(opts: RowOptions) -> dict[str, Any]:
    server = HttpTarget(opts.seed, insecure=True)
    await server.start()
    try:
        await server.create_many([t.named_node(i) for i in range(opts.nodes)])
        with tempfile.TemporaryDirectory(prefix="kubesched-bench-run-") as workdir:
            config = Path(workdir) / "config.yaml"
            config.write_text(CONFIG)
            starts = [await _one_start(server, opts, i, config, Path(workdir) / f"run-{i}.log") for i in range(opts.runs)]
    finally:
        await server.stop()
    seconds = [s[0] for s in starts]
    cpu = [s[1] for s in starts if s[1] is not None]
    rss = [s[2] for s in starts if s[2]]
    return {"first_binding_seconds": _stats(seconds), "first_binding_cpu_seconds": _stats(cpu),
            "peak_rss_bytes": statistics.median(rss) if rss else None,
            "details": {"s to first binding, each start": ", ".join(f"{s:.3f}" for s in seconds)}}


def _stats(values: list[float]) -> dict[str, float] | None:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None


async def _one_start(server: HttpTarget, opts: RowOptions, index: int, config: Path,
                     log_path: Path) -> tuple[float, float | None, int | None]:
    """One start: (seconds to the first binding, CPU seconds until then, peak RSS)."""
    assert server.client is not None
    namespace = f"startup-{index}"
    await server.ensure_namespace(namespace)
    await server.create_many([t.named_pod(i, namespace) for i in range(opts.pods)])
    _, rv = await server.client.list(POD)
    bound = asyncio.create_task(_first_bound(server.client, namespace, rv))
    await asyncio.sleep(0.1)  # the watch is open before the process starts
    args = ["run", "--config", str(config), "--kubeconfig", server.kubeconfig, "--secure-port", str(free_port())]
    with open(log_path, "w") as log:
        started = time.perf_counter()
        proc = spawn(args, log)
        try:
            await while_alive(bound.done, proc, log_path, opts.timeout, "a pod was bound")
            seen = bound.result()
            cpu = cpu_seconds_of(proc.pid)
        finally:
            bound.cancel()
            rss = await asyncio.get_running_loop().run_in_executor(None, stop, proc)
    return seen - started, cpu, rss


async def _first_bound(client: KubeClient, namespace: str, rv: str) -> float:
    """When the watch first delivers a pod of ``namespace`` with a node."""
    async for batch in client.watch(POD, rv, namespace=namespace):
        if any((event.object.get("spec") or {}).get("nodeName") for event in batch):
            return time.perf_counter()
    raise RuntimeError("the watch ended before a pod was bound")
