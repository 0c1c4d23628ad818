"""Upstream's test/integration/scheduler/filters/filters_test.go, end to end on the embedded
cluster (TestInterPodAffinity, TestInterPodAffinityWithNamespaceSelector,
TestTaintTolerationFilter): each table case is a parametrized id named as upstream names it."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.cluster.errors import Invalid
from tests.integration.embedded import embedded, run
from tests.integration.wrappers import namespace, node, pod

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
