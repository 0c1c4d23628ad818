"""Write the input of the ``kubesched simulate`` end-to-end benchmark: a multi-document YAML file of
N nodes (scheduler_perf's ``node-default``: 4 cpu, 32Gi, 110 pods, Ready, spread round-robin over
three zones) and M pods (``pod-default``: pause, requests = limits = 100m / 500Mi).

Run: ``python scripts/simulate_input.py --nodes 500 --pods 10000 > /tmp/cluster.yaml``, then
``kubesched simulate -f /tmp/cluster.yaml`` (docs/performance.md, "kubesched simulate end to end").
"""

from __future__ import annotations

import argparse
import sys

import yaml

ZONES = ("zone-a", "zone-b", "zone-c")


def node(i: int) -> dict:
    """One node named ``node-NNNN``, its hostname and zone labels set as a kubelet would."""
    name = f"node-{i:04d}"
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": ZONES[i % len(ZONES)]}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict:
    """One pause pod named ``pod-NNNNN`` in ``default``, 100m / 500Mi."""
    resources = {"cpu": "100m", "memory": "500Mi"}
    container = {"name": "pause", "image": "registry.k8s.io/pause:3.10.1", "ports": [{"containerPort": 80}],
                 "resources": {"requests": dict(resources), "limits": dict(resources)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:05d}", "namespace": "default"},
            "spec": {"containers": [container]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=10_000)
    args = parser.parse_args()
    docs = [node(i) for i in range(args.nodes)] + [pod(i) for i in range(args.pods)]
    yaml.dump_all(docs, sys.stdout, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
