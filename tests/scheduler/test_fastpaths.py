"""Optimisations never change a placement: seeded workloads land identically with fast paths off."""

from __future__ import annotations

import random

import pytest

from kubesched import fastpaths
from kubesched.config import default_configuration
from kubesched.simulation import simulate
from tests.helpers import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"


def workload(seed: int) -> list[dict]:
    rng = random.Random(seed)
    nodes = []
    for i in range(40):
        labels = {ZONE: f"z{i % 3}", "disk": rng.choice(["ssd", "hdd"])}
        taints = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}] if i % 7 == 0 else None
        images = [{"names": ["registry.k8s.io/app:1"], "sizeBytes": 300_000_000}] if i % 5 == 0 else None
        nodes.append(make_node(f"n{i}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["8Gi", "16Gi"]),
                               labels=labels, taints=taints, images=images))
    pods = []
    for i in range(220):
        kind = i % 6
        spec: dict = {}
        labels = {"app": f"a{i % 4}"}
        if kind == 1:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
        elif kind == 2:
            spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                   "labelSelector": {"matchLabels": {"app": labels["app"]}}}}]}}
        elif kind == 3:
            spec["topologySpreadConstraints"] = [{"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                                  "labelSelector": {"matchLabels": {"app": labels["app"]}}}]
        elif kind == 4:
            spec["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        pod = make_pod(f"p{i}", cpu=rng.choice(["100m", "250m", "500m", "1"]), memory=rng.choice(["128Mi", "512Mi", "1Gi"]),
                       labels=labels, **spec)
        if kind == 5:
            pod["spec"]["containers"][0]["image"] = "registry.k8s.io/app:1"
        pod["metadata"].pop("uid")
        pods.append(pod)
    return nodes + pods


def placements(objects: list[dict], seed: int, percentage: int | None) -> dict[str, str | None]:
    cfg = default_configuration()
    for profile in cfg.profiles:
        profile.percentage_of_nodes_to_score = percentage
    result = simulate(objects, cfg, seed=seed)
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in result.pods()}


@pytest.mark.parametrize(("seed", "percentage"), [(1, 100), (2, 100), (3, None)])
def test_placements_are_identical_with_and_without_fast_paths(seed, percentage):
    fast = placements(workload(seed), seed, percentage)
    with fastpaths.disabled():
        plain = placements(workload(seed), seed, percentage)
    assert fast == plain
    assert sum(1 for node in fast.values() if node) > 150
