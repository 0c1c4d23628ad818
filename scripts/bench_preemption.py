#!/usr/bin/env python3
"""Benchmark (not a test): a PreemptionBasic-like workload on the embedded cluster, default profile.

500 nodes (4 CPU) are filled with low-priority 900m pods (4 per node, not measured), then 500
high-priority 3000m pods are created; each has to preempt. The figure is high-priority pods bound
per second of wall time, from their creation until the last is bound. Victims terminate after
their grace period on the virtual clock, so waiting for them costs no wall time.

    python scripts/bench_preemption.py [--nodes 500] [--high 500] [--grace 30] [--profile out.prof]

The profile (``--profile``) covers the high-priority pods only, from their creation until the last
is bound: filling the cluster is ordinary scheduling and would hide the preemption work.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import resource
import sys
import time

from kubesched.api.kinds import NODE, POD, PRIORITY_CLASS
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config import default_configuration
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def node(i: int) -> dict:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
            "status": {"capacity": capacity, "allocatable": dict(capacity)}}


def pod(name: str, cpu: str, priority_class_name: str, grace: int) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"priorityClassName": priority_class_name, "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}]}}


def bound(store: ObjectStore, prefix: str) -> int:
    return sum(1 for p in store.iter_all(POD) if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName"))


async def wait_bound(store: ObjectStore, prefix: str, count: int) -> None:
    while bound(store, prefix) < count:
        await asyncio.sleep(0.5)


async def run(nodes: int, low_per_node: int, high: int, grace: int, profiler: cProfile.Profile | None) -> dict:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=1, history_limit=10_000)
    store.create(PRIORITY_CLASS, priority_class("low", 10))
    store.create(PRIORITY_CLASS, priority_class("high", 1000))
    for i in range(nodes):
        store.create(NODE, node(i))
    sched = Scheduler(MemoryClient(store), default_configuration(), clock=clock, seed=1)
    await sched.start()
    runner = loop.create_task(sched.run())
    low = nodes * low_per_node
    for i in range(low):
        store.create(POD, pod(f"low-{i}", "900m", "low", grace))
    await wait_bound(store, "low-", low)
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    for i in range(high):
        store.create(POD, pod(f"high-{i}", "3000m", "high", grace))
    await wait_bound(store, "high-", high)
    elapsed = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
    post_filter = sum(s.value for m in sched.metrics.framework_extension_point_duration.collect()
                      for s in m.samples if s.name.endswith("_sum") and s.labels.get("extension_point") == "PostFilter")
    await sched.stop()
    runner.cancel()
    return {"seconds": elapsed, "pods_per_second": high / elapsed, "post_filter_seconds": post_filter,
            "victims": low - bound(store, "low-")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--low-per-node", type=int, default=4)
    parser.add_argument("--high", type=int, default=500)
    parser.add_argument("--grace", type=int, default=30, help="victims' terminationGracePeriodSeconds (virtual)")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run to FILE")
    args = parser.parse_args()
    profiler = cProfile.Profile() if args.profile else None
    result = run_virtual(run(args.nodes, args.low_per_node, args.high, args.grace, profiler))
    if profiler is not None:
        profiler.dump_stats(args.profile)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.high} high-priority pods preempting on {args.nodes} nodes ({args.nodes * args.low_per_node} low-priority pods): "
          f"{result['seconds']:.2f}s, {result['pods_per_second']:.0f} pods/s, PostFilter {result['post_filter_seconds']:.2f}s, "
          f"{result['victims']} victims, peak RSS {rss_mib:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
