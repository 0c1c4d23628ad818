"""UpThroughput: ``kubesched up`` under concurrent clients.

The subject's ``kubesched up --port P --kubeconfig-out K`` (API server, scheduler, kubelets and
controllers in one process) is spawned; once it has written its kubeconfig, ``nodes`` nodes are
created, and after two seconds (for the scheduler's informers to list them) ``pods`` pods are
created by ``concurrency`` clients at once, each timing its requests. The figures: creates/s and the
create latency (p50, p99), and pods/s from the first creation until a watch has seen every pod
bound. ``apiserver_only`` spawns ``kubesched apiserver`` instead and measures the creation alone
(nothing binds): what the API server takes without the work that shares ``up``'s event loop.
``insecure`` adds ``--insecure-allow-anonymous`` (plain HTTP, no authentication or RBAC), as
2813cd5's servers always ran, to tell the cost of security from the rest.

The clients run in this process, one event loop on its own core as far as the machine allows;
they read the kubeconfig as any client does, so a server with TLS and a token and one without
both work.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from kubesched.api.kinds import POD
from kubesched.bench import creator
from kubesched.bench import templates as t
from kubesched.bench.wholeprocess import RowOptions, failure, free_port, percentile, spawn, stop, while_alive
from kubesched.client.kube import KubeClient, resource_path

#: Seconds for the scheduler's informers to list the nodes before the first pod is created.
SETTLE = 2.0


def measure(opts: RowOptions) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kubesched-bench-up-") as workdir:
        kubeconfig, log_path = Path(workdir) / "kubeconfig", Path(workdir) / "up.log"
        command = "apiserver" if opts.apiserver_only else "up"
        with open(log_path, "w") as log:
            security = ["--insecure-allow-anonymous"] if opts.insecure else []
            proc = spawn([command, "--port", str(free_port()), "--kubeconfig-out", str(kubeconfig), *security], log)
            try:
                doc = asyncio.run(_drive(opts, proc, kubeconfig, log_path))
            finally:
                rss = stop(proc)
    return {**doc, "peak_rss_bytes": rss}


async def _drive(opts: RowOptions, proc: Any, kubeconfig: Path, log_path: Path) -> dict[str, Any]:
    await while_alive(kubeconfig.exists, proc, log_path, opts.timeout, "the server wrote its kubeconfig")
    client = KubeClient(kubeconfig=str(kubeconfig), connections=opts.concurrency + 8, user_agent="kubesched-bench-up")
    try:
        started = time.perf_counter()
        await creator.create_concurrently(client, [t.named_node(i) for i in range(opts.nodes)], opts.concurrency)
        nodes_seconds = time.perf_counter() - started
        if not opts.apiserver_only:
            await asyncio.sleep(SETTLE)
        _, rv = await client.list(POD)
        watcher = None if opts.apiserver_only else asyncio.create_task(_all_bound(client, rv, opts.pods))
        started = time.perf_counter()
        latencies = await _post_all(client, [orjson.dumps(t.named_pod(i)) for i in range(opts.pods)], opts.concurrency)
        created = time.perf_counter() - started
        doc: dict[str, Any] = {"creates_per_second": opts.pods / created, "create_latency_ms": {
            "p50": percentile(latencies, 50) * 1000, "p99": percentile(latencies, 99) * 1000},
            "details": {"nodes created in": f"{nodes_seconds:.1f}s", "pods created in": f"{created:.1f}s"}}
        if watcher is not None:
            bound = await _bound_after(watcher, opts, started, proc, log_path)
            if bound is None:
                return {**doc, "complete": False, "incomplete_reason": f"not every pod was bound within {opts.timeout:g}s"}
            doc["pods_per_second"] = opts.pods / bound
            doc["details"]["pods bound in"] = f"{bound:.1f}s from the first creation"
        return doc
    finally:
        await client.close()


async def _post_all(client: KubeClient, bodies: list[bytes], concurrency: int) -> list[float]:
    """POST every pod, ``concurrency`` requests in flight; each request's latency (seconds)."""
    queue = list(reversed(bodies))
    path = resource_path(POD, "default")
    latencies: list[float] = []

    async def worker() -> None:
        while queue:
            body = queue.pop()
            sent = time.perf_counter()
            status, payload = await client.request("POST", path, body=body)
            if status >= 300:
                raise RuntimeError(f"POST {path}: {status} {payload[:500]!r}")
            latencies.append(time.perf_counter() - sent)

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(bodies))))))
    return latencies


async def _all_bound(client: KubeClient, rv: str, total: int) -> float:
    """When the watch has seen ``total`` distinct pods of ``default`` bound."""
    bound: set[str] = set()
    while True:
        async for batch in client.watch(POD, rv, namespace="default"):
            for event in batch:
                obj = event.object
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if (obj.get("spec") or {}).get("nodeName"):
                    bound.add(obj["metadata"]["name"])
            if len(bound) >= total:
                return time.perf_counter()


async def _bound_after(watcher: asyncio.Task[float], opts: RowOptions, started: float, proc: Any,
                       log_path: Path) -> float | None:
    """Seconds from the first creation to the last binding; None if ``timeout`` passed first."""
    deadline = started + opts.timeout
    while not watcher.done():
        if proc.poll() is not None:
            raise failure(f"`kubesched up` exited with code {proc.returncode}", log_path)
        if time.perf_counter() > deadline:
            watcher.cancel()
            return None
        await asyncio.wait({watcher}, timeout=0.5)
    return watcher.result() - started
