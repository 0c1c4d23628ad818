"""Upstream's test/integration/scheduler/scoring/priorities_test.go, end to end on the embedded
cluster: each upstream test function is a test here, each table case a parametrized id named as
upstream names it."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.scheduler.config.types import SchedulerConfiguration
from tests.integration.embedded import configuration, embedded, run, scoring_configuration
from tests.integration.wrappers import label_selector, namespace, node, pod, spread

GPU = "example.com/gpu"
SOFT, HARD = "ScheduleAnyway", "DoNotSchedule"
TOPOLOGY_KEY = "node-topologykey"


async def _place(config: SchedulerConfiguration, objects: list[dict[str, Any]], existing: list[dict[str, Any]],
                 incoming: dict[str, Any]) -> str:
    """Nodes and other objects first, then each existing pod (scheduled, or bound when it names its
    node), then the incoming pod; returns where the incoming pod went."""
    async with embedded(config, objects) as cluster:
        for p in existing:
            cluster.create(p)
            await cluster.scheduled(p["metadata"]["name"], p["metadata"]["namespace"])
        cluster.create(incoming)
        return await cluster.scheduled(incoming["metadata"]["name"], incoming["metadata"]["namespace"])


# --- TestNodeResourcesScoring -------------------------------------------------------------------------
def _resources_config(strategy: str) -> SchedulerConfiguration:
    """Upstream's ``initTestSchedulerForNodeResourcesTest``: cpu and memory weight 1, the GPU 2."""
    args = {"scoringStrategy": {"type": strategy, "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 2}]}}
    return configuration({"schedulerName": "default-scheduler", "pluginConfig": [{"name": "NodeResourcesFit", "args": args}]})


@pytest.mark.parametrize(("strategy", "expected"), [
    pytest.param("LeastAllocated", "node-2", id="with least allocated strategy, take existing sidecars into consideration"),
    pytest.param("MostAllocated", "node-1", id="with most allocated strategy, take existing sidecars into consideration"),
])
def test_node_resources_scoring(strategy: str, expected: str) -> None:
    request = {"cpu": "2", "memory": "4G", GPU: "1"}
    capacity = {"cpu": "8", "memory": "16G", GPU: "4"}
    existing = [pod("existing-pod-1", node_name="node-1", requests=request, sidecar_requests={"cpu": "2", "memory": "2G"}),
                pod("existing-pod-2", node_name="node-2", requests=request)]
    nodes = [node("node-1", capacity=capacity), node("node-2", capacity=capacity)]
    assert run(lambda: _place(_resources_config(strategy), nodes, existing, pod("pod", requests=request))) == expected


# --- TestNodeAffinityScoring ----------------------------------------------------------------------------
def test_node_affinity_scoring() -> None:
    key, value = "kubernetes.io/node-topologyKey", "topologyvalue"
    nodes = [*(node(f"testnode-{i}") for i in range(4)), node("testnode-4", labels={key: value})]
    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 20, "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}}]}}
    incoming = pod("pod-with-node-affinity", affinity=preferred)
    assert run(lambda: _place(scoring_configuration("NodeAffinity", "NodeAffinity"), nodes, [], incoming)) == "testnode-4"


# --- TestPodAffinityScoring -----------------------------------------------------------------------------
def _topology_nodes(count: int, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [*(node(f"node{i + 1}", labels={TOPOLOGY_KEY: f"topologyvalue{i % 5 if count > 6 else i % 3}"})
              for i in range(count)), *(node(name) for name in extra)]


def _weighted(weight: int, selector: dict[str, Any], **term: Any) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": {"topologyKey": TOPOLOGY_KEY, "labelSelector": selector, **term}}


S1_OR_S3 = label_selector(in_=("service", ["S1", "S3"]))
FOO = label_selector(exists=["foo"])
BAR_HOGE = label_selector(in_=("bar", ["hoge"]))
NS = [namespace("ns1", {"team": "team1"}), namespace("ns2", {"team": "team1"})]


def _incoming(ns: str, affinity: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod("incoming" if labels else "pod1", namespace=ns, labels=labels, affinity=affinity)


POD_AFFINITY_CASES = [
    pytest.param(_incoming("ns1", {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [_weighted(50, S1_OR_S3)]}}),
                 [pod("attractor-pod", "ns1", {"service": "S1"}, node_name="node1")],
                 _topology_nodes(10, ("other-node1", "other-node2")), {"node1", "node6"}, id="pod affinity"),
    pytest.param(_incoming("ns2", {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     _weighted(50, S1_OR_S3, namespaceSelector={})]}}),
                 [pod("attractor-pod", "ns1", {"service": "S1"}, node_name="node1")],
                 _topology_nodes(10, ("other-node1", "other-node2")), {"node1", "node6"}, id="pod affinity with namespace selector"),
    pytest.param(_incoming("ns1", {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     _weighted(50, FOO, matchLabelKeys=["bar"])]}}, {"foo": "", "bar": "a"}),
                 [pod("pod1", "ns1", {"foo": "", "bar": "fuga"}, node_name="node1"),
                  pod("pod2", "ns1", {"foo": "", "bar": "a"}, node_name="node2")],
                 _topology_nodes(2), {"node1"},
                 id="anti affinity: matchLabelKeys is merged into LabelSelector with In operator (feature flag: enabled)"),
    pytest.param(_incoming("ns1", {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     _weighted(50, FOO, mismatchLabelKeys=["bar"])]}}, {"foo": "", "bar": "a"}),
                 [pod("pod1", "ns1", {"foo": "", "bar": "fuga"}, node_name="node1"),
                  pod("pod2", "ns1", {"foo": "", "bar": "a"}, node_name="node2")],
                 _topology_nodes(2), {"node2"},
                 id="anti affinity: mismatchLabelKeys is merged into LabelSelector with NotIn operator  (feature flag: enabled)"),
    pytest.param(_incoming("ns1", {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     _weighted(50, FOO, matchLabelKeys=["bar"]), _weighted(10, BAR_HOGE)]}}, {"foo": "", "bar": "a"}),
                 [pod("pod1", "ns1", {"foo": "", "bar": "hoge"}, node_name="node1"),
                  pod("pod2", "ns1", {"foo": "", "bar": "hoge"}, node_name="node2"),
                  pod("pod3", "ns1", {"foo": "", "bar": "a"}, node_name="node3")],
                 _topology_nodes(6), {"node3", "node6"},
                 id="affinity: matchLabelKeys is merged into LabelSelector with In operator (feature flag: enabled)"),
    pytest.param(_incoming("ns1", {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                     _weighted(50, FOO, mismatchLabelKeys=["bar"]), _weighted(10, BAR_HOGE)]}}, {"foo": "", "bar": "a"}),
                 [pod("pod1", "ns1", {"foo": "", "bar": "a"}, node_name="node1"),
                  pod("pod2", "ns1", {"foo": "", "bar": "a"}, node_name="node2"),
                  pod("pod3", "ns1", {"foo": "", "bar": "hoge"}, node_name="node3")],
                 _topology_nodes(6), {"node3", "node6"},
                 id="affinity: mismatchLabelKeys is merged into LabelSelector with NotIn operator (feature flag: enabled)"),
]


@pytest.mark.parametrize(("incoming", "existing", "nodes", "expected"), POD_AFFINITY_CASES)
def test_pod_affinity_scoring(incoming: dict[str, Any], existing: list[dict[str, Any]], nodes: list[dict[str, Any]],
                              expected: set[str]) -> None:
    """MatchLabelKeysInPodAffinity is GA and locked on in 1.35, so upstream's "feature flag:
    enabled" cases are the only ones."""
    config = scoring_configuration("InterPodAffinity", "InterPodAffinity")
    assert run(lambda: _place(config, [*NS, *nodes], existing, incoming)) in expected


# --- TestTaintTolerationScoring --------------------------------------------------------------------------
PREFER = [{"key": "example-key", "value": "example-value", "effect": "PreferNoSchedule"}]


@pytest.mark.parametrize(("tolerations", "nodes", "expected"), [
    pytest.param([], [node("node-1"), node("node-2")], {"node-1", "node-2"}, id="no taints or tolerations"),
    pytest.param([{"key": "example-key", "operator": "Equal", "value": "example-value", "effect": "PreferNoSchedule"}],
                 [node("node-1", taints=PREFER), node("node-2")], {"node-1", "node-2"}, id="pod with toleration for node's taint"),
    pytest.param([{"key": "other-key", "operator": "Equal", "value": "other-value", "effect": "PreferNoSchedule"}],
                 [node("node-1", taints=PREFER), node("node-2")], {"node-2"}, id="pod without toleration for node's taint"),
])
def test_taint_toleration_scoring(tolerations: list[dict[str, Any]], nodes: list[dict[str, Any]], expected: set[str]) -> None:
    config = scoring_configuration("TaintToleration", "TaintToleration")
    assert run(lambda: _place(config, nodes, [], pod("test-pod", tolerations=tolerations))) in expected


# --- TestImageLocalityScoring ---------------------------------------------------------------------------
def test_image_locality_scoring() -> None:
    image = "fake-large-image:v1"
    nodes = [node("testnode-large-image", images={image: 3000 * 1024 * 1024}), *(node(f"testnode-{i}") for i in range(10))]
    incoming = pod("pod-using-large-image", image=image)
    assert run(lambda: _place(scoring_configuration("ImageLocality"), nodes, [], incoming)) == "testnode-large-image"


# --- TestPodTopologySpreadScoring -------------------------------------------------------------------------
TAINT_K1 = [{"key": "k1", "value": "v1", "effect": "NoSchedule"}]
DEFAULT_NODES = [node("node-0", {"node": "node-0", "zone": "zone-0"}, taints=TAINT_K1),
                 node("node-1", {"node": "node-1", "zone": "zone-0"}),
                 node("node-2", {"node": "node-2", "zone": "zone-1"}),
                 node("node-3", {"node": "node-3", "zone": "zone-1"})]
UNSCHEDULABLE_PREFER = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "PreferNoSchedule"}]
INCLUSION_NODES = [node("node-1", {"node": "node-1", "zone": "zone-1", "foo": ""}),
                   node("node-2", {"node": "node-2", "zone": "zone-1", "foo": ""}, taints=UNSCHEDULABLE_PREFER),
                   node("node-3", {"node": "node-3", "zone": "zone-2", "foo": ""}),
                   node("node-4", {"node": "node-4", "zone": "zone-2"})]


def _foo_pods(*placements: str, bar_on: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Existing pods labelled foo, named p<node index><letter>; those in ``bar_on`` also get bar."""
    out = []
    for name in placements:
        labels = {"foo": "", **({"bar": ""} if name in bar_on else {})}
        out.append(pod(name, labels=labels, node_name=f"node-{name[1]}"))
    return out


def _spread_pod(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return pod("p", labels=labels or {"foo": ""}, topologySpreadConstraints=list(constraints), **spec)


@pytest.mark.parametrize(("incoming", "existing", "nodes", "expected", "gates"), [
    pytest.param(_spread_pod(spread(1, "node", SOFT, FOO)), _foo_pods("p1", "p2a", "p2b", "p3a", "p3b", "p3c"),
                 DEFAULT_NODES, {"node-1"}, None, id="place pod on a ~0~/1/2/3 cluster with MaxSkew=1, node-1 is the preferred fit"),
    pytest.param(_spread_pod(spread(1, "node", SOFT, FOO), spread(1, "zone", HARD, FOO)),
                 _foo_pods("p0a", "p0b", "p0c", "p0d", "p2", "p3a", "p3b"), DEFAULT_NODES, {"node-2"}, None,
                 id="combined with hardSpread constraint on a ~4~/0/1/2 cluster"),
    pytest.param(_spread_pod(spread(1, "zone", SOFT, FOO), spread(1, "node", SOFT, FOO), nodeSelector={"foo": ""}),
                 _foo_pods("p1a", "p2a", "p2b", "p4a"), INCLUSION_NODES, {"node-3"}, None,
                 id="soft constraint with two node inclusion Constraints, zone: honor/ignore, node: honor/ignore"),
    pytest.param(_spread_pod(spread(1, "zone", SOFT, FOO, node_affinity_policy="Ignore"),
                             spread(1, "node", SOFT, FOO, node_taints_policy="Honor"), nodeSelector={"foo": ""}),
                 _foo_pods("p1a", "p2a", "p2b", "p4a"), INCLUSION_NODES, {"node-3"}, None,
                 id="soft constraint with two node inclusion Constraints, zone: ignore/ignore, node: honor/honor"),
    pytest.param(_spread_pod(spread(1, "node", SOFT, FOO, match_label_keys=["bar"]), labels={"foo": "", "bar": ""}),
                 _foo_pods("p1", "p2a", "p2b", "p3a", "p3b", "p3c", bar_on=("p1", "p3a", "p3b")), DEFAULT_NODES, {"node-1"},
                 {"MatchLabelKeysInPodTopologySpread": False},
                 id="matchLabelKeys ignored when feature gate disabled, node-1 is the preferred fit"),
    pytest.param(_spread_pod(spread(1, "node", SOFT, FOO, match_label_keys=["bar"]), labels={"foo": "", "bar": ""}),
                 _foo_pods("p1", "p2a", "p2b", "p3a", "p3b", "p3c", bar_on=("p1", "p3a", "p3b")), DEFAULT_NODES, {"node-2"},
                 None, id="matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty, node-2 is the preferred fit"),
    pytest.param(_spread_pod(spread(1, "node", SOFT, {}, match_label_keys=["foo"])),
                 _foo_pods("p1", "p2a", "p2b", "p3a", "p3b", "p3c"), DEFAULT_NODES, {"node-1"}, None,
                 id="matchLabelKeys ANDed with LabelSelector when LabelSelector is empty, node-1 is the preferred fit"),
])
def test_pod_topology_spread_scoring(incoming: dict[str, Any], existing: list[dict[str, Any]], nodes: list[dict[str, Any]],
                                     expected: set[str], gates: dict[str, bool] | None) -> None:
    """Upstream toggles NodeInclusionPolicyInPodTopologySpread per case; it is GA and locked on in
    1.35, so every case runs with it on (the cases expecting it on are all there are)."""

    async def scenario() -> str:
        config = scoring_configuration("PodTopologySpread", "PodTopologySpread")
        async with embedded(config, nodes, gates=gates) as cluster:
            for p in existing:
                cluster.create(p)
                await cluster.scheduled(p["metadata"]["name"])
            cluster.create(incoming)
            return await cluster.scheduled("p")

    assert run(scenario) in expected


# --- TestDefaultPodTopologySpreadScoring ----------------------------------------------------------------
def test_default_pod_topology_spread_scoring() -> None:
    """300 nodes over 3 zones and a Service: the system default spreading keeps the zones even
    after 3, 12 and 27 pods (upstream's subtests "3-pods", "12-pods", "27-pods")."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "test-service", "namespace": "default"},
               "spec": {"selector": {"service": "test-service"}, "ports": [{"port": 80, "targetPort": 80}]}}
    nodes = [node(f"node-{i}", {"kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"zone-{i % 3}"})
             for i in range(300)]

    async def scenario() -> list[int]:
        skews = []
        async with embedded(scoring_configuration("PodTopologySpread", "PodTopologySpread"), [*nodes, service]) as cluster:
            total = 0
            for batch in (3, 9, 15):
                names = [f"p-{total + i}" for i in range(batch)]
                total += batch
                for name in names:
                    cluster.create(pod(name, labels={"service": "test-service"}))
                for name in names:
                    await cluster.scheduled(name)
                zones: dict[str, int] = {}
                for i in range(total):
                    zone = f"zone-{int(cluster.node_of(f'p-{i}').split('-')[1]) % 3}"
                    zones[zone] = zones.get(zone, 0) + 1
                skews.append(max(zones.values()) - min(zones.values()))
        return skews

    assert run(scenario) == [0, 0, 0]
