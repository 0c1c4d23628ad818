"""Upstream's test/integration/scheduler/filters/filters_test.go, end to end on the embedded
cluster (TestInterPodAffinity, TestInterPodAffinityWithNamespaceSelector,
TestTaintTolerationFilter): each table case is a parametrized id named as upstream names it."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.apierrors import Invalid
from tests.integration.embedded import embedded, run
from tests.integration.wrappers import bound_claim, claim_volume, namespace, node, persistent_volume, pod, spread

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NAMESPACES = [namespace("ns1", {"team": "team1"}), namespace("ns2", {"team": "team1"}), namespace("ns3", {"team": "team2"})]
NODES = [node("testnode-0", {"region": "r1", "zone": "z11", "node": "n1"}, capacity={"memory": "1G"}),
         node("anothernode-0", {"region": "r1", "zone": "z11", "node": "n2"}, capacity={"memory": "1G"})]


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


def term(topology: str, *expressions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchExpressions": list(expressions)}, "topologyKey": topology, **extra}


def affinity(required: list[dict[str, Any]] | None = None, anti: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if anti:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return out


def incoming(labels: dict[str, str] | None, aff: dict[str, Any] | None = None, name: str = "fakename",
             **spec: Any) -> dict[str, Any]:
    if aff:
        spec["affinity"] = aff
    return pod(name, "ns1", labels, **spec)


def existing(name: str = "fakename2", labels: dict[str, str] | None = None, on: str = "testnode-0", ns: str = "ns1",
             aff: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    if aff:
        spec["affinity"] = aff
    return pod(name, ns, labels if labels is not None else POD_LABEL, node_name=on, **spec)


SECURITYSCAN_REGION = term("region", expr("service", "In", "securityscan", "value2"))
ANTIVIRUS_NODE = term("node", expr("service", "In", "antivirusscan", "value2"))
FOO_ZONE = expr("foo", "Exists")
MEM_1G = {"memory": "1G"}

INTER_POD_AFFINITY_CASES = [
    pytest.param(incoming(POD_LABEL2, affinity([term("region", expr("security", "DoesNotExist"))])), [], False,
                 id="validates that a pod with an invalid podAffinity is rejected because of the LabelSelectorRequirement is invalid"),
    pytest.param(incoming(POD_LABEL2, affinity([term("region", expr("security", "In", "securityscan"))])), [], False,
                 id="validates that Inter-pod-Affinity is respected if not matching"),
    pytest.param(incoming(POD_LABEL2, affinity([SECURITYSCAN_REGION])), [existing()], True,
                 id="validates that InterPodAffinity is respected if matching. requiredDuringSchedulingIgnoredDuringExecution "
                    "in PodAffinity using In operator that matches the existing pod"),
    pytest.param(incoming(POD_LABEL2, affinity([term("region", expr("service", "NotIn", "securityscan3", "value3"))])),
                 [existing()], True,
                 id="validates that InterPodAffinity is respected if matching. requiredDuringSchedulingIgnoredDuringExecution "
                    "in PodAffinity using not in operator in labelSelector that matches the existing pod"),
    pytest.param(incoming(POD_LABEL2, affinity([term("region", expr("service", "In", "securityscan", "value2"),
                                                     namespaces=["diff-namespace"])])),
                 [existing(ns="ns2")], False, id="validates that inter-pod-affinity is respected when pods have different Namespaces"),
    pytest.param(incoming(POD_LABEL, affinity([term("region", expr("service", "In", "antivirusscan", "value2"))])),
                 [existing()], False, id="Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod"),
    pytest.param(incoming(POD_LABEL2, affinity([term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                                                term("region", expr("service", "In", "securityscan"),
                                                     expr("service", "NotIn", "WrongValue"))])),
                 [existing()], True,
                 id="validates that InterPodAffinity is respected if matching with multiple affinities in multiple "
                    "RequiredDuringSchedulingIgnoredDuringExecution "),
    pytest.param(incoming(POD_LABEL2, affinity([term("region", expr("service", "Exists"), expr("wrongkey", "DoesNotExist")),
                                                term("region", expr("service", "In", "securityscan2"),
                                                     expr("service", "NotIn", "WrongValue"))])),
                 [existing()], False,
                 id="The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the "
                    "node because one of the matchExpression items doesn't match."),
    pytest.param(incoming(POD_LABEL2, affinity([SECURITYSCAN_REGION], [ANTIVIRUS_NODE])), [existing()], True,
                 id="validates that InterPod Affinity and AntiAffinity is respected if matching"),
    pytest.param(incoming(POD_LABEL2, affinity([SECURITYSCAN_REGION], [ANTIVIRUS_NODE])),
                 [existing(aff=affinity(anti=[ANTIVIRUS_NODE]))], True,
                 id="satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod"),
    pytest.param(incoming(POD_LABEL2, affinity([SECURITYSCAN_REGION], [term("zone", expr("service", "In", "securityscan", "value2"))])),
                 [existing()], False, id="satisfies the PodAffinity but doesn't satisfies the PodAntiAffinity with the existing pod"),
    pytest.param(incoming(POD_LABEL, affinity([SECURITYSCAN_REGION], [ANTIVIRUS_NODE])),
                 [existing(aff=affinity(anti=[term("zone", expr("service", "In", "securityscan", "value3"))]))], False,
                 id="satisfies the PodAffinity and PodAntiAffinity but doesn't satisfies PodAntiAffinity symmetry with the existing pod"),
    pytest.param(incoming(POD_LABEL, affinity([term("region", expr("service", "NotIn", "securityscan", "value2"))])),
                 [existing(on="machine2")], False,
                 id="pod matches its own Label in PodAffinity and that matches the existing pod Labels"),
    pytest.param(incoming(POD_LABEL), [existing(aff=affinity(anti=[term("zone", expr("service", "In", "securityscan", "value2"))]))],
                 False, id="Verify that PodAntiAffinity of an existing pod is respected when PodAntiAffinity symmetry is not "
                           "satisfied with the existing pod"),
    pytest.param(incoming(POD_LABEL, name="fake-name"),
                 [existing("fake-name2", aff=affinity(anti=[term("zone", expr("service", "NotIn", "securityscan", "value2"))]))],
                 True, id="Verify that PodAntiAffinity from existing pod is respected when pod statisfies PodAntiAffinity "
                          "symmetry with the existing pod"),
    pytest.param(incoming(None, affinity(anti=[term("region", expr("foo", "In", "abc"))]), name="fake-name2",
                          nodeSelector={"region": "r1"}),
                 [existing("fakename", {"foo": "abc"})], False,
                 id="nodes[0] and nodes[1] have same topologyKey and label value. nodes[0] has an existing pod that matches "
                    "the inter pod affinity rule. The new pod can not be scheduled onto either of the two nodes."),
    pytest.param(incoming({"foo": "", "bar": "a"}, affinity(anti=[term("zone", FOO_ZONE, matchLabelKeys=["bar"])]), name="incoming"),
                 [existing("pod1", {"foo": "", "bar": "fuga"}), existing("pod2", {"foo": "", "bar": "hoge"})], True,
                 id="anti affinity: matchLabelKeys is merged into LabelSelector with In operator (feature flag: enabled)"),
    pytest.param(incoming({"foo": "", "bar": "a"}, affinity(anti=[term("zone", FOO_ZONE, mismatchLabelKeys=["bar"])]), name="incoming"),
                 [existing("pod1", {"foo": "", "bar": "a"}), existing("pod2", {"foo": "", "bar": "a"})], True,
                 id="anti affinity: mismatchLabelKeys is merged into LabelSelector with NotIn operator (feature flag: enabled)"),
    pytest.param(incoming({"foo": "", "bar": "a"}, affinity([term("node", FOO_ZONE, matchLabelKeys=["bar"])]), name="incoming",
                          containers=[{"name": "container", "image": "pause", "resources": {"requests": MEM_1G}}]),
                 [existing("pod1", {"foo": "", "bar": "a"}, on="anothernode-0",
                           containers=[{"name": "container", "image": "pause", "resources": {"requests": MEM_1G}}]),
                  existing("pod2", {"foo": "", "bar": "hoge"}), existing("pod3", {"foo": "", "bar": "fuga"})], False,
                 id="affinity: matchLabelKeys is merged into LabelSelector with In operator (feature flag: enabled)"),
    pytest.param(incoming({"foo": "", "bar": "a"}, affinity([term("node", FOO_ZONE, mismatchLabelKeys=["bar"])]), name="incoming",
                          containers=[{"name": "container", "image": "pause", "resources": {"requests": MEM_1G}}]),
                 [existing("pod1", {"foo": "", "bar": "fuga"}, on="anothernode-0",
                           containers=[{"name": "container", "image": "pause", "resources": {"requests": MEM_1G}}]),
                  existing("pod2", {"foo": "", "bar": "a"}), existing("pod3", {"foo": "", "bar": "a"})], False,
                 id="affinity: mismatchLabelKeys is merged into LabelSelector with NotIn operator (feature flag: enabled)"),
]


async def _fits(objects: list[dict[str, Any]], pods: list[dict[str, Any]], new: dict[str, Any]) -> bool:
    """Bound pods first (upstream waits for each to have a node), then the new pod: True when it is
    scheduled, False when it is reported unschedulable."""
    async with embedded(None, objects) as cluster:
        for p in pods:
            cluster.create(p)
            await cluster.scheduled(p["metadata"]["name"], p["metadata"]["namespace"])
        cluster.create(new)
        name, ns = new["metadata"]["name"], new["metadata"]["namespace"]
        await cluster.wait_for(f"a verdict on {ns}/{name}",
                               lambda: bool(cluster.node_of(name, ns)) or cluster.condition(name, ns).get("reason") == "Unschedulable")
        return bool(cluster.node_of(name, ns))


@pytest.mark.parametrize(("new", "pods", "fits"), INTER_POD_AFFINITY_CASES)
def test_inter_pod_affinity(new: dict[str, Any], pods: list[dict[str, Any]], fits: bool) -> None:
    """MatchLabelKeysInPodAffinity is GA and locked on in 1.35. The first case's selector
    (DoesNotExist without values) is valid, so the API server accepts the pod, as upstream's does
    (upstream tolerates either), and it is unschedulable."""
    try:
        assert run(lambda: _fits([*NAMESPACES, *NODES], pods, new)) is fits
    except Invalid:
        assert not fits


# --- TestInterPodAffinityWithNamespaceSelector ---------------------------------------------------------
@pytest.mark.parametrize(("existing_ns", "fits"), [
    pytest.param("ns2", True, id="MatchingNamespaces"),
    pytest.param("ns3", False, id="MismatchingNamespaces"),
])
def test_inter_pod_affinity_with_namespace_selector(existing_ns: str, fits: bool) -> None:
    team1 = {"matchExpressions": [expr("team", "In", "team1")]}
    new = pod("pod-ns-selector", "ns1", affinity=affinity([term("region", expr("service", "In", "securityscan"),
                                                                 namespaceSelector=team1)]))
    nodes = [node(f"testnode-{i}", {"region": "r1", "zone": "z11"}) for i in range(2)]
    assert run(lambda: _fits([*NAMESPACES, *nodes], [existing(ns=existing_ns)], new)) is fits


# --- TestTaintTolerationFilter ---------------------------------------------------------------------------
TAINT1 = {"key": "example.com/taint1", "value": "value1", "effect": "NoSchedule"}
TAINT2 = {"key": "example.com/taint2", "value": "value2", "effect": "NoSchedule"}


@pytest.mark.parametrize(("nodes", "tolerations", "fits"), [
    pytest.param([node("node-1", taints=[TAINT1])], [TAINT1], True, id="Pod tolerates node taint"),
    pytest.param([node("node-2", taints=[TAINT1])], [], False, id="Pod does not tolerate node taint"),
    pytest.param([node("node-3", taints=[TAINT1, TAINT2])], [TAINT1], False, id="Pod tolerates some but not all node taints"),
    pytest.param([node("node-4", taints=[TAINT1, TAINT2])], [TAINT1, TAINT2], True, id="Pod tolerates all node taints"),
    pytest.param([node("node-1", taints=[TAINT1])], [TAINT1, TAINT2], True,
                 id="Node has one taint, pod has multiple tolerations and tolerates all node taints"),
    pytest.param([node("node-6")], [TAINT1], True, id="Node has no taint, pod has one toleration"),
])
def test_taint_toleration_filter(nodes: list[dict[str, Any]], tolerations: list[dict[str, Any]], fits: bool) -> None:
    new = pod("pod", tolerations=[dict(t) for t in tolerations])
    assert run(lambda: _fits(nodes, [], new)) is fits


# --- TestPodTopologySpreadFilter -------------------------------------------------------------------------
HARD = "DoNotSchedule"
FOO_SELECTOR = {"matchExpressions": [expr("foo", "Exists")]}
UNSCHEDULABLE_TAINT = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]
PTS_NODES = [node(f"node-{i}", {"node": f"node-{i}", "zone": f"zone-{i // 2}"}) for i in range(4)]


def _inclusion_nodes(tainted: str | None = None) -> list[dict[str, Any]]:
    """node-1..4 over zone-1/zone-2, all but node-3 labelled foo; ``tainted`` gets the
    unschedulable NoSchedule taint."""
    out = []
    for i in range(1, 5):
        labels = {"node": f"node-{i}", "zone": f"zone-{(i + 1) // 2}", **({} if i == 3 else {"foo": ""})}
        out.append(node(f"node-{i}", labels, taints=UNSCHEDULABLE_TAINT if tainted == f"node-{i}" else None))
    return out


def _on(*placements: tuple[str, str], bar: tuple[str, ...] = (), grace_zero: bool = False) -> list[dict[str, Any]]:
    """Existing pods labelled foo (and bar for those named in ``bar``), (name, node) each."""
    extra: dict[str, Any] = {"terminationGracePeriodSeconds": 0} if grace_zero else {}
    return [pod(name, labels={"foo": "", **({"bar": ""} if name in bar else {})}, node_name=where, **extra)
            for name, where in placements]


def _spread_pod(*constraints: dict[str, Any], labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return pod("p", labels=labels or {"foo": ""}, topologySpreadConstraints=list(constraints), **spec)


def _c(skew: int, key: str, **options: Any) -> dict[str, Any]:
    selector = options.pop("selector", FOO_SELECTOR)
    return spread(skew, key, HARD, selector, **options)


NOT_NODE_0 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [expr("node", "NotIn", "node-0")]}]}}}
ZONE_0 = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [expr("zone", "In", "zone-0")]}]}}}
FOO_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [expr("foo", "In", "")]}]}}}
SPREAD_221 = (("p1a", "node-1"), ("p1b", "node-1"), ("p2a", "node-2"), ("p2b", "node-2"), ("p3", "node-3"))
FOUR = (("p1a", "node-1"), ("p2a", "node-2"), ("p3a", "node-3"), ("p4a", "node-4"))

PTS_FILTER_CASES = [
    pytest.param(_spread_pod(_c(1, "node")), _on(("p0", "node-0"), ("p1", "node-1"), ("p3", "node-3")), PTS_NODES,
                 {"node-2"}, None, id="place pod on a 1/1/0/1 cluster with MaxSkew=1, node-2 is the only fit"),
    pytest.param(_spread_pod(_c(2, "node")), _on(("p0a", "node-0"), ("p0b", "node-0"), ("p3", "node-3")), PTS_NODES,
                 {"node-1", "node-2", "node-3"}, None, id="place pod on a 2/0/0/1 cluster with MaxSkew=2, node-{1,2,3} are good fits"),
    pytest.param(_spread_pod(_c(1, "node"), affinity=ZONE_0), _on(("p0", "node-0"), ("p3", "node-3")), PTS_NODES,
                 {"node-1"}, None, id="pod is required to be placed on zone0, so only node-1 fits"),
    pytest.param(_spread_pod(_c(1, "zone"), _c(1, "node")),
                 _on(("p0", "node-0"), ("p1", "node-1"), ("p3a", "node-3"), ("p3b", "node-3")), PTS_NODES,
                 {"node-2"}, None, id="two constraints: pod can only be placed to zone-1/node-2"),
    pytest.param(_spread_pod(_c(1, "zone"), _c(1, "node"), affinity=NOT_NODE_0), _on(*SPREAD_221), PTS_NODES,
                 set(), None, id="pod cannot be placed onto any node"),
    pytest.param(_spread_pod(_c(1, "zone"), _c(1, "node"), affinity=NOT_NODE_0, priorityClassName="p100"),
                 _on(*SPREAD_221, grace_zero=True), PTS_NODES, {"node-1", "node-2", "node-3"}, None,
                 id="high priority pod can preempt others"),
    pytest.param(_spread_pod(_c(2, "node", min_domains=4), affinity=NOT_NODE_0), _on(*SPREAD_221, grace_zero=True), PTS_NODES,
                 {"node-3"}, None,
                 id="pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits"),
    pytest.param(_spread_pod(_c(2, "node", min_domains=2), affinity=NOT_NODE_0), _on(*SPREAD_221, grace_zero=True), PTS_NODES,
                 {"node-1", "node-2", "node-3"}, None,
                 id="pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit"),
    pytest.param(_spread_pod(_c(2, "zone", min_domains=3)), _on(("p1a", "node-0"), ("p2a", "node-1"), ("p3a", "node-2")),
                 PTS_NODES, {"node-2", "node-3"}, None,
                 id="pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit"),
    pytest.param(_spread_pod(_c(2, "zone", min_domains=1)), _on(("p1a", "node-1"), ("p2a", "node-2"), ("p3a", "node-3")),
                 PTS_NODES, {"node-0", "node-1", "node-2", "node-3"}, None,
                 id="pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the all nodes fit"),
    pytest.param(_spread_pod(_c(1, "zone"), nodeSelector={"foo": ""}), _on(*FOUR), _inclusion_nodes(), {"node-4"}, None,
                 id="NodeAffinityPolicy honored with labelSelectors, pods spread across zone as 2/1"),
    pytest.param(_spread_pod(_c(1, "zone", node_affinity_policy="Ignore"), affinity=FOO_AFFINITY),
                 _on(("p1a", "node-1"), ("p3a", "node-3"), ("p4a", "node-4")), _inclusion_nodes(), {"node-1", "node-2"}, None,
                 id="NodeAffinityPolicy ignored with nodeAffinity, pods spread across zone as 1/~2~"),
    pytest.param(_spread_pod(_c(1, "zone", node_taints_policy="Honor")), _on(*FOUR), _inclusion_nodes("node-3"), {"node-4"}, None,
                 id="NodeTaintsPolicy honored, pods spread across zone as 2/1"),
    pytest.param(_spread_pod(_c(1, "zone")), _on(*FOUR), _inclusion_nodes("node-3"), {"node-1", "node-2", "node-4"}, None,
                 id="NodeTaintsPolicy ignored, pods spread across zone as 2/2"),
    pytest.param(_spread_pod(_c(1, "zone"), _c(1, "node"), nodeSelector={"foo": ""}), _on(*FOUR), _inclusion_nodes("node-2"),
                 {"node-4"}, None, id="two node inclusion Constraints, zone: honor/ignore, node: honor/ignore"),
    pytest.param(_spread_pod(_c(1, "zone"), _c(1, "node"), nodeSelector={"foo": ""}), _on(*FOUR), _inclusion_nodes("node-2"),
                 {"node-4"}, None, id="feature gate disabled, two node inclusion Constraints, zone: honor/ignore, node: honor/ignore"),
    pytest.param(_spread_pod(_c(1, "zone", node_affinity_policy="Ignore"), _c(1, "node", node_taints_policy="Honor"),
                             nodeSelector={"foo": ""}), _on(*FOUR), _inclusion_nodes("node-2"), {"node-1", "node-4"}, None,
                 id="two node inclusion Constraints, zone: ignore/ignore, node: honor/honor"),
    pytest.param(_spread_pod(_c(1, "zone", match_label_keys=["bar"]), labels={"foo": "", "bar": ""}),
                 _on(("p1a", "node-0"), ("p2a", "node-1"), ("p3a", "node-2"), bar=("p3a",)), PTS_NODES, {"node-2", "node-3"},
                 {"MatchLabelKeysInPodTopologySpread": False},
                 id="matchLabelKeys ignored when feature gate disabled, pods spread across zone as 2/1"),
    pytest.param(_spread_pod(_c(1, "zone", match_label_keys=["bar"]), labels={"foo": "", "bar": ""}),
                 _on(("p1a", "node-0"), ("p2a", "node-1"), ("p3a", "node-2"), bar=("p3a",)), PTS_NODES, {"node-0", "node-1"},
                 None, id="matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty, pods spread across zone as 0/1"),
    pytest.param(_spread_pod(_c(1, "zone", selector={}, match_label_keys=["foo"])),
                 _on(("p1a", "node-0"), ("p2a", "node-1"), ("p3a", "node-2")), PTS_NODES, {"node-2", "node-3"}, None,
                 id="matchLabelKeys ANDed with LabelSelector when LabelSelector is empty, pods spread across zone as 2/1"),
]


@pytest.mark.parametrize(("incoming", "existing_pods", "nodes", "candidates", "gates"), PTS_FILTER_CASES)
def test_pod_topology_spread_filter(incoming: dict[str, Any], existing_pods: list[dict[str, Any]], nodes: list[dict[str, Any]],
                                    candidates: set[str], gates: dict[str, bool] | None) -> None:
    """An empty ``candidates`` means the pod must be unschedulable. NodeInclusionPolicyInPodTopologySpread
    is GA and locked on in 1.35, so upstream's "feature gate disabled" case runs with it on (both
    expect node-4). Upstream gives the preemptor ``spec.priority: 100`` directly (its test API
    server runs no Priority admission); here a PriorityClass of value 100 does."""
    p100 = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p100"}, "value": 100}

    async def scenario() -> str:
        async with embedded(None, [p100, *nodes], gates=gates) as cluster:
            for p in existing_pods:
                cluster.create(p)
                await cluster.scheduled(p["metadata"]["name"])
            cluster.create(incoming)
            if not candidates:
                await cluster.unschedulable("p")
                return ""
            return await cluster.scheduled("p")

    got = run(scenario)
    assert (got in candidates) if candidates else got == ""


# --- TestUnschedulablePodBecomesSchedulable ----------------------------------------------------------------
RWOP = ["ReadWriteOncePod"]
WITH_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"pod-with-affinity": "true"}}, "topologyKey": "region"}]}}


def _relabel(name: str, labels: dict[str, str]) -> Any:
    return lambda c: c.mutate("Node", name, lambda n: n["metadata"].update(labels=dict(labels)))


BECOMES_SCHEDULABLE_CASES = [
    pytest.param([], pod("pod-1"), lambda c: c.create(node("node-added")), id="node gets added"),
    pytest.param([node("node-tainted", taints=[{"key": "test", "value": "test", "effect": "NoSchedule"}])], pod("pod-1"),
                 lambda c: c.mutate("Node", "node-tainted", lambda n: n["spec"].pop("taints")), id="node gets taint removed"),
    pytest.param([node("node-scheduler-integration-test", capacity={"pods": "1"}), pod("pod-to-be-deleted")], pod("pod-1"),
                 lambda c: c.delete("Pod", "pod-to-be-deleted", "default"), id="other pod gets deleted"),
    pytest.param([node("node-1", {"region": "test"})], pod("pod-1", affinity=WITH_AFFINITY),
                 lambda c: c.create(pod("pod-with-affinity", labels={"pod-with-affinity": "true"})),
                 id="pod with pod-affinity gets added"),
    pytest.param([node("node-1", {"region": "test"}), pod("pod-to-be-updated")], pod("pod-1", affinity=WITH_AFFINITY),
                 lambda c: c.mutate("Pod", "pod-to-be-updated", lambda p: p["metadata"].update(labels={"pod-with-affinity": "true"}),
                                    "default"),
                 id="scheduled pod gets updated to match affinity"),
    pytest.param([node("node"), persistent_volume("pv-with-read-write-once-pod", RWOP),
                  bound_claim("pvc-with-read-write-once-pod", "pv-with-read-write-once-pod", RWOP),
                  pod("pod-to-be-deleted", volumes=claim_volume("pvc-with-read-write-once-pod"))],
                 pod("pod-to-take-over-pvc", volumes=claim_volume("pvc-with-read-write-once-pod")),
                 lambda c: c.delete("Pod", "pod-to-be-deleted", "default"), id="scheduled pod uses read-write-once-pod pvc"),
    pytest.param([persistent_volume("pv-has-non-existent-nodes", RWOP,
                                    node_affinity=("kubernetes.io/hostname", ["node-available", "non-existing"])),
                  bound_claim("pvc-has-non-existent-nodes", "pv-has-non-existent-nodes", RWOP)],
                 pod("pod-with-pvc-has-non-existent-nodes", volumes=claim_volume("pvc-has-non-existent-nodes")),
                 lambda c: c.create(node("node-available", {"kubernetes.io/hostname": "node-available"})),
                 id="pod with pvc has node-affinity to non-existent/illegal nodes"),
    pytest.param([node("node-foo", {"foo": "foo"}), persistent_volume("pv-foo", RWOP, node_affinity=("foo", ["bar"])),
                  bound_claim("pvc-foo", "pv-foo", RWOP)],
                 pod("pod-with-pvc-foo", volumes=claim_volume("pvc-foo")), _relabel("node-foo", {"foo": "bar"}),
                 id="pod with pvc got scheduled after node updated it's label"),
]


@pytest.mark.parametrize(("init", "new", "update"), BECOMES_SCHEDULABLE_CASES)
def test_unschedulable_pod_becomes_schedulable(init: list[dict[str, Any]], new: dict[str, Any], update: Any) -> None:
    """The pod is reported unschedulable, the cluster event makes room, the pod is scheduled and
    nothing is left pending."""

    async def scenario() -> tuple[str, int]:
        async with embedded(None) as cluster:
            for obj in init:
                cluster.create(obj)
                if obj["kind"] == "Pod":
                    await cluster.scheduled(obj["metadata"]["name"])
            cluster.create(new)
            await cluster.unschedulable(new["metadata"]["name"])
            update(cluster)
            where = await cluster.scheduled(new["metadata"]["name"])
            pending, _ = cluster.scheduler.queue.pending_pods()
            return where, len(pending)

    where, pending = run(scenario)
    assert where and pending == 0
