#!/usr/bin/env python3
"""Benchmark ``kubesched up`` end to end over HTTP: start it as a subprocess, create N nodes, then
M pods (concurrent POSTs), and measure pods/s from the first pod creation until every pod is
bound (seen through a watch, as any client would see it). Not a test; prints the figure.

    python scripts/bench_up.py --nodes 1000 --pods 10000
    python scripts/bench_up.py --apiserver-only --nodes 0 --pods 5000 --concurrency 200   # creation alone

``--apiserver-only`` runs ``kubesched apiserver`` (no scheduler, kubelet or controllers) and measures
only the creation of the pods: the API server's throughput and latency under concurrent clients.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import math
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson
import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node(i: int) -> dict:
    name = f"node-{i:05d}"
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "status": {"capacity": capacity, "allocatable": capacity, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:06d}", "namespace": "default", "labels": {"app": f"a{i % 50}"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}


async def post_all(session: aiohttp.ClientSession, url: str, objects: list[dict], concurrency: int) -> list[float]:
    """POST every object, ``concurrency`` requests in flight; the latency of each request (seconds)."""
    queue = list(reversed(objects))
    latencies: list[float] = []

    async def worker() -> None:
        while queue:
            body = orjson.dumps(queue.pop())
            started = time.perf_counter()
            async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                if resp.status >= 300:
                    raise RuntimeError(f"POST {url}: {resp.status} {await resp.text()}")
                await resp.read()
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (the value at index ceil(n*p/100)-1 of the sorted values)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * p / 100) - 1)]


async def count_bound(session: aiohttp.ClientSession, server: str, total: int, done: asyncio.Event, progress: dict) -> None:
    bound: set[str] = set()
    async with session.get(f"{server}/api/v1/namespaces/default/pods", params={"watch": "1", "resourceVersion": "0"},
                           timeout=aiohttp.ClientTimeout(total=None)) as resp:
        buffer = b""
        async for chunk in resp.content.iter_any():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line:
                    continue
                event = orjson.loads(line)
                obj = event["object"]
                if (obj.get("spec") or {}).get("nodeName"):
                    bound.add(obj["metadata"]["name"])
            progress["bound"] = len(bound)
            if len(bound) >= total:
                done.set()
                return


def process_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of ``pid`` and of each of its child processes, by command
    (``up``'s scheduler runs in a child process); empty where /proc is not available."""
    tick = os.sysconf("SC_CLK_TCK")

    def seconds(p: int) -> float:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    try:
        found = {"server": seconds(pid)}
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        for child in children:
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            found[command[2].decode().rsplit(".", 1)[-1] if len(command) > 2 else child] = seconds(int(child))
        return found
    except OSError:
        return {}


def cpu_per_pod(before: dict[str, float], after: dict[str, float], pods: int) -> str:
    return ", ".join(f"{name} {(after[name] - before.get(name, 0.0)) * 1000 / pods:.2f} ms" for name in after)


async def wait_for_kubeconfig(path: Path, proc: subprocess.Popen) -> tuple[str, ssl.SSLContext, dict[str, str]]:
    """The server, TLS context (its CA) and Authorization header of the kubeconfig ``kubesched up``
    writes once it serves: the admin credential, as kubectl would use it."""
    for _ in range(300):
        if proc.poll() is not None:
            raise RuntimeError("kubesched up exited early")
        if path.exists():
            conf = yaml.safe_load(path.read_text())
            cluster, user = conf["clusters"][0]["cluster"], conf["users"][0]["user"]
            context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
            return cluster["server"], context, {"Authorization": f"Bearer {user['token']}"}
        await asyncio.sleep(0.1)
    raise RuntimeError("kubesched up did not become ready")


async def bench(args: argparse.Namespace) -> float:
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="kubesched-bench-"))
    profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
    command = "apiserver" if args.apiserver_only else "up"
    cmd = [sys.executable, *profile, "-m", "kubesched.cli.main", command, "--port", str(port), "--kubeconfig-out",
           str(workdir / "kubeconfig")]
    if args.config and not args.apiserver_only:
        cmd += ["--config", args.config]
    log = open(workdir / "up.log", "w")  # noqa: SIM115 - the subprocess writes it until the end
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        server, context, headers = await wait_for_kubeconfig(workdir / "kubeconfig", proc)
        connector = aiohttp.TCPConnector(limit=args.concurrency + 8, ssl=context)
        async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
            t0 = time.perf_counter()
            await post_all(session, f"{server}/api/v1/nodes", [node(i) for i in range(args.nodes)], args.concurrency)
            print(f"{args.nodes} nodes created in {time.perf_counter() - t0:.1f}s")
            if not args.apiserver_only:
                await asyncio.sleep(2.0)  # let the scheduler's informers see every node
            done, progress = asyncio.Event(), {"bound": 0}
            watcher = asyncio.create_task(count_bound(session, server, args.pods, done, progress))
            cpu_before = process_cpu(proc.pid)
            start = time.perf_counter()
            latencies = await post_all(session, f"{server}/api/v1/namespaces/default/pods", [pod(i) for i in range(args.pods)],
                                       args.concurrency)
            created = time.perf_counter() - start
            if args.apiserver_only:
                watcher.cancel()
            print(f"{args.pods} pods created by {args.concurrency} concurrent clients in {created:.1f}s "
                  f"({args.pods / created:.0f} creates/s; create latency p50 {percentile(latencies, 50) * 1000:.0f} ms, "
                  f"p99 {percentile(latencies, 99) * 1000:.0f} ms)")
            if args.apiserver_only:
                print(f"CPU per pod (creation): {cpu_per_pod(cpu_before, process_cpu(proc.pid), args.pods)}")
                return args.pods / created
            while not done.is_set():
                try:
                    await asyncio.wait_for(done.wait(), 5.0)
                except TimeoutError:
                    print(f"  ... {progress['bound']} bound after {time.perf_counter() - start:.0f}s")
                    if time.perf_counter() - start > args.timeout:
                        raise RuntimeError("timed out waiting for bindings") from None
            elapsed = time.perf_counter() - start
            watcher.cancel()
            rate = args.pods / elapsed
            print(f"{args.pods} pods bound on {args.nodes} nodes in {elapsed:.1f}s: {rate:.0f} pods/s (creation to bound, over HTTP)")
            print(f"CPU per pod (creation to bound): {cpu_per_pod(cpu_before, process_cpu(proc.pid), args.pods)}")
            return rate
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent create requests")
    parser.add_argument("--apiserver-only", action="store_true",
                        help="run `kubesched apiserver` alone and measure pod creation only (nothing binds them)")
    parser.add_argument("--config", help="KubeSchedulerConfiguration file passed to kubesched up")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--profile", metavar="FILE", help="run kubesched up under cProfile, writing stats to FILE")
    args = parser.parse_args()
    asyncio.run(bench(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
