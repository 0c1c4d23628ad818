"""Benchmark (not a test): ``capacity`` on a generated cluster, beside ``simulate`` of as many pods.

5000 nodes (4 cpu, 32Gi, 110 pods, three zones) and up to 10,000 copies of a 100m / 500Mi pod, with
the default profile and every component ``simulate`` runs. ``capacity`` builds the cluster once and
feeds copies through the scheduler, so it should take about as long as ``simulate`` of the same
number of pods. Run: ``python scripts/bench_capacity.py [--nodes N] [--copies N] [--simulate]``.
"""

from __future__ import annotations

import argparse
import time

from kubesched.scheduler.config import default_configuration
from kubesched.simulator.capacity import capacity
from kubesched.simulator.simulate import simulate


def node(i: int) -> dict:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}",
                                                         "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "status": {"capacity": capacity, "allocatable": dict(capacity)}}


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--copies", type=int, default=10000)
    parser.add_argument("--simulate", action="store_true", help="also time simulate of as many pods, for reference")
    args = parser.parse_args()
    start = time.perf_counter()
    (result,) = capacity([node(i) for i in range(args.nodes)], [pod("small")], default_configuration(),
                         max_copies=args.copies).pods
    took = time.perf_counter() - start
    print(f"capacity: {args.nodes} nodes, {result.count} copies ({result.stop_reason}) in {took:.1f} s "
          f"({result.count / took:.0f} copies/s, cluster build included)")
    if args.simulate:
        start = time.perf_counter()
        simulate([node(i) for i in range(args.nodes)] + [pod(f"p-{i}") for i in range(args.copies)], default_configuration())
        took = time.perf_counter() - start
        print(f"simulate: {args.nodes} nodes, {args.copies} pods in {took:.1f} s ({args.copies / took:.0f} pods/s)")


if __name__ == "__main__":
    main()
