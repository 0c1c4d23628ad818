"""Optimisations never change a placement: seeded workloads land identically with the
scheduler's ``fast_paths`` option off, and the content-keyed request memo matches the plain sums."""

from __future__ import annotations

import random

import pytest

from kubesched.api import resources as res
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.simulate import simulate
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


def placements(objects: list[dict], seed: int, percentage: int | None, fast_paths: bool = True) -> dict[str, str | None]:
    cfg = default_configuration()
    for profile in cfg.profiles:
        profile.percentage_of_nodes_to_score = percentage
    result = simulate(objects, cfg, seed=seed, fast_paths=fast_paths)
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in result.pods()}


@pytest.mark.parametrize(("seed", "percentage"), [(1, 100), (2, 100), (3, None)])
def test_placements_are_identical_with_and_without_fast_paths(seed, percentage):
    fast = placements(workload(seed), seed, percentage)
    plain = placements(workload(seed), seed, percentage, fast_paths=False)
    assert fast == plain
    assert sum(1 for node in fast.values() if node) > 150


def preemption_workload(seed: int) -> list[dict]:
    """Nodes filled with low-priority pods, then high-priority pods that must preempt (some with
    required anti-affinity, so both the shared-state and the per-node paths run), arriving while
    earlier preemptors are still nominated."""
    rng = random.Random(seed)
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
               for name, value in (("low", 10), ("mid", 500), ("high", 1000))]
    nodes = [make_node(f"n{i}", cpu="4", memory="16Gi", labels={ZONE: f"z{i % 3}"}) for i in range(24)]
    pods = []
    for i in range(90):
        pod = make_pod(f"low{i}", cpu=rng.choice(["500m", "1"]), memory="1Gi", labels={"app": "batch"},
                       node=f"n{i % 24}", priorityClassName=rng.choice(["low", "mid"]))
        pod["metadata"].pop("uid")
        pods.append(pod)
    for i in range(30):
        spec: dict = {"priorityClassName": "high"}
        if i % 3 == 0:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}
        pod = make_pod(f"web{i}", cpu=rng.choice(["1500m", "2", "3"]), memory="2Gi", labels={"app": "web"}, **spec)
        pod["metadata"].pop("uid")
        pods.append(pod)
    return classes + nodes + pods


@pytest.mark.parametrize("seed", [1, 2])
def test_preemption_outcomes_are_identical_with_and_without_fast_paths(seed):
    fast = placements(preemption_workload(seed), seed, 100)
    plain = placements(preemption_workload(seed), seed, 100, fast_paths=False)
    assert fast == plain
    assert sum(1 for name in fast if name.startswith("low")) < 90  # some victims were preempted
    assert sum(1 for name, node in fast.items() if name.startswith("web") and node) > 10


def _resized(pod: dict) -> dict:
    pod["status"] = {"containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}
    return pod


REQUEST_MEMO_CASES = {
    "plain containers": lambda: make_pod("a", cpu="250m", memory="1Gi"),
    "init container floor": lambda: make_pod("b", cpu="100m", initContainers=[
        {"name": "i", "image": "x", "resources": {"requests": {"cpu": "2"}}}]),
    "sidecar added": lambda: make_pod("c", cpu="100m", initContainers=[
        {"name": "s", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]),
    "overhead": lambda: make_pod("d", cpu="1", overhead={"cpu": "250m"}),
    "pod-level requests": lambda: make_pod("e", cpu="1", resources={"requests": {"cpu": "3", "memory": "2Gi"}}),
    "resizing in place": lambda: _resized(make_pod("f", cpu="1")),
}


@pytest.mark.parametrize("case", list(REQUEST_MEMO_CASES), ids=list(REQUEST_MEMO_CASES))
def test_memoised_pod_requests_equal_the_plain_sums(case):
    """The API layer memoises request sums by content for every scheduler; its key must cover
    everything the sums read, so a second pod of the same content gets the same answer."""
    for _ in range(2):  # the second round is served from the memo
        pod = REQUEST_MEMO_CASES[case]()
        for overhead in (True, False):
            assert res.pod_requests(pod, overhead=overhead) == res._pod_requests(pod, overhead=overhead)
        assert res.aggregate_container_requests(pod) == res._aggregate_container_requests(pod)
