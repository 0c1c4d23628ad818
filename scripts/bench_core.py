"""Benchmark (not a test): schedule a generated cluster on the embedded cluster and print pods/s.

Defaults follow the core issue: 5000 nodes (4 cpu, 32Gi, 110 pods) and 10000 pods (100m / 500Mi),
percentageOfNodesToScore 100. Nodes and pods are created first (as scheduler_perf's API server would
have them); the clock runs from the first scheduling cycle to the last binding. Run: ``python scripts/bench_core.py [--nodes N] [--pods N] [--profile core|default]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time

from kubesched.api.kinds import NODE, POD
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile, SchedulerConfiguration
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock

CORE = ["SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName", "NodeResourcesFit", "DefaultBinder"]


def node(i: int) -> dict:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
            "status": {"capacity": capacity, "allocatable": dict(capacity)}}


def pod(i: int) -> dict:
    return {"metadata": {"name": f"pod-{i}", "namespace": "default"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def configuration(profile: str) -> SchedulerConfiguration:
    if profile == "default":
        from kubesched.scheduler.config import default_configuration

        cfg = default_configuration()
        for p in cfg.profiles:
            p.percentage_of_nodes_to_score = 100
        return cfg
    refs = [PluginRef(n, 1 if n == "NodeResourcesFit" else 0) for n in CORE]
    return SchedulerConfiguration(profiles=[Profile(percentage_of_nodes_to_score=100, plugins=Plugins(multi_point=PluginSet(refs)))])


async def run(nodes: int, pods: int, profile: str) -> dict:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop, VIRTUAL_EPOCH)
    store = ObjectStore(clock, seed=1, history_limit=10_000)
    for i in range(nodes):
        store.create(NODE, node(i))
    for i in range(pods):
        store.create(POD, pod(i))
    sched = Scheduler(MemoryClient(store), configuration(profile), clock=clock, seed=1)
    await sched.start()
    start = time.perf_counter()
    runner = loop.create_task(sched.run())
    while store.progress[1] < pods:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - start
    await sched.stop()
    runner.cancel()
    return {"nodes": nodes, "pods": pods, "seconds": elapsed, "pods_per_second": pods / elapsed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--profile", choices=("core", "default"), default="default")
    args = parser.parse_args()
    result = run_virtual(run(args.nodes, args.pods, args.profile))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{result['pods']} pods on {result['nodes']} nodes ({args.profile} profile, percentageOfNodesToScore=100): "
          f"{result['seconds']:.2f}s, {result['pods_per_second']:.0f} pods/s, peak RSS {rss_mib:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
