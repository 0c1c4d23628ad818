"""InterPodAffinity: upstream's filtering / scoring / hint cases, and the vectorised, incremental
implementation checked against a per-node reference (written the way upstream's Go code is) on
seeded random clusters, on scratch tables after AddPod / RemovePod, and after incremental table
updates.

The builders at the top are shared with ``test_pod_topology_spread``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from kubesched.api.selectors import InvalidSelector
from kubesched.api.types import AffinityTerm, NodeInfo, PodInfo
from kubesched.scheduler.config.args import InterPodAffinityArgs
from kubesched.scheduler.config.types import PluginRef, PluginSet, Profile
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.runtime import Framework, HandleContext
from kubesched.scheduler.framework.status import Code, StatusError
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins._pod_groups import MAX_VIEWS, pod_index
from kubesched.scheduler.plugins.interpodaffinity.inter_pod_affinity import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PRE_FILTER_KEY,
    InterPodAffinity,
)
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.utils.clock import ManualClock
from tests.helpers import make_node, make_pod

# ================================================================================================
# builders (also used by test_pod_topology_spread)
# ================================================================================================


def expr(key: str, op: str, *values: str) -> dict:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values or op in ("In", "NotIn"):
        out["values"] = list(values)
    return out


def selector(*exprs: dict, **match_labels: str) -> dict:
    out: dict[str, Any] = {}
    if match_labels:
        out["matchLabels"] = dict(match_labels)
    if exprs:
        out["matchExpressions"] = list(exprs)
    return out


def term(topology: str, *exprs: dict, namespaces: list[str] | None = None, ns_selector: dict | None = None,
         label_selector: dict | None = None, **extra: Any) -> dict:
    out: dict[str, Any] = {"labelSelector": label_selector if label_selector is not None else selector(*exprs),
                           "topologyKey": topology}
    if namespaces is not None:
        out["namespaces"] = namespaces
    if ns_selector is not None:
        out["namespaceSelector"] = ns_selector
    out.update(extra)
    return out


def weighted(weight: int, t: dict) -> dict:
    return {"weight": weight, "podAffinityTerm": t}


def affinity(required: list | None = None, anti: list | None = None, preferred: list | None = None,
             preferred_anti: list | None = None) -> dict:
    out: dict[str, Any] = {}
    if required or preferred:
        out["podAffinity"] = {}
        if required:
            out["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred:
            out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if anti or preferred_anti:
        out["podAntiAffinity"] = {}
        if anti:
            out["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = anti
        if preferred_anti:
            out["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferred_anti
    return out


_names = [0]


def pod(name: str = "", node: str | None = None, ns: str = "default", labels: dict | None = None,
        aff: dict | None = None, terminating: bool = False, **spec: Any) -> dict:
    """A pod; unnamed pods get a unique name (upstream tests often leave names empty)."""
    if not name:
        _names[0] += 1
        name = f"pod-{_names[0]}"
    if aff:
        spec["affinity"] = aff
    p = make_pod(name, namespace=ns, labels=labels or {}, node=node, **spec)
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return p


def node(name: str, labels: dict[str, str] | None = None, taints: list | None = None) -> dict:
    """A node with exactly ``labels`` (no automatic hostname label, unlike ``make_node``)."""
    n = make_node(name, taints=taints)
    n["metadata"]["labels"] = dict(labels or {})
    return n


def cluster(nodes: list[dict], pods: list[dict]) -> tuple[NodeTable, dict[str, NodeInfo]]:
    """A node table with the pods on their nodes (pods on unknown nodes are dropped)."""
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    table = NodeTable()
    for info in infos.values():
        table.set_node(info)
    for p in pods:
        add_pod(table, infos, p)
    return table, infos


def add_pod(table: NodeTable, infos: dict[str, NodeInfo], p: dict) -> PodInfo | None:
    pi = PodInfo(p)
    info = infos.get(pi.node_name)
    if info is None:
        return None
    info.add_pod(pi)
    table.pod_added(info, pi)
    return pi


class FakeHandle:
    """What the plugins read from their handle: informer caches and feature gates."""

    def __init__(self, objects: dict[str, dict[str, dict]] | None = None, gates: FeatureGates | None = None) -> None:
        self._objects = objects or {}
        self.feature_gates = gates or DEFAULT_GATES

    def objects(self, kind: str) -> dict[str, dict]:
        return self._objects.get(kind, {})


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}


def namespace_objects(*objs: dict) -> dict[str, dict[str, dict]]:
    return {"Namespace": {o["metadata"]["name"]: o for o in objs}}


def filter_all(plugin: Any, state: CycleState, p: PodInfo, batch: NodeBatch) -> list[tuple[int, str] | None]:
    """(code, message) per node of ``batch``; None for nodes that pass."""
    verdict = plugin.filter_nodes(state, p, batch)
    out: list[tuple[int, str] | None] = []
    for i in range(len(batch)):
        s = None if verdict is None else verdict.status_at(i)
        out.append(None if s is None else (int(s.code), s.message()))
    return out


# ================================================================================================
# fixtures of upstream's tests
# ================================================================================================

NAMESPACES = namespace_objects(
    namespace("subteam1.team1", team="team1"), namespace("subteam2.team1", team="team1"),
    namespace("subteam1.team2", team="team2"), namespace("subteam2.team2", team="team2"),
    namespace("NS1"),
)

AFF = (int(Code.UnschedulableAndUnresolvable), ERR_REASON_AFFINITY_RULES_NOT_MATCH)
ANTI = (int(Code.Unschedulable), ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
EXISTING = (int(Code.Unschedulable), ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
SKIP = "skip"


def plugin(args: InterPodAffinityArgs | None = None, objects: dict | None = None) -> InterPodAffinity:
    return InterPodAffinity(args, FakeHandle(NAMESPACES if objects is None else objects))


def run_filter(p: dict, nodes: list[dict], pods: list[dict], objects: dict | None = None) -> Any:
    """PreFilter then Filter on every node: SKIP, a PreFilter (code, message), or per-node results."""
    table, _ = cluster(nodes, pods)
    pl = plugin(objects=objects)
    state = CycleState()
    target = PodInfo(p)
    _, status = pl.pre_filter(state, target, table.all_rows())
    if status is not None:
        return SKIP if status.code == Code.Skip else (int(status.code), status.message())
    return filter_all(pl, state, target, table.all_rows())


def In(key: str, *values: str) -> dict:
    return expr(key, "In", *values)


def NotIn(key: str, *values: str) -> dict:
    return expr(key, "NotIn", *values)


def Exists(key: str) -> dict:
    return expr(key, "Exists")


S1 = {"service": "securityscan"}
S2 = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})


def existing(labels: dict, aff: dict | None = None, ns: str = "default", on: str = "node1") -> dict:
    return pod(node=on, labels=labels, aff=aff, ns=ns)


SINGLE_NODE_CASES = [
    ("a pod without required pod affinity rules skips PreFilter on a node without pods",
     pod(), [], SKIP),
    ("In selector matching the existing pod satisfies pod affinity",
     pod(labels=S2, aff=affinity(required=[term("region", In("service", "securityscan", "value2"))])),
     [existing(S1)], [None]),
    ("NotIn selector not excluding the existing pod satisfies pod affinity",
     pod(labels=S2, aff=affinity(required=[term("region", NotIn("service", "securityscan3", "value3"))])),
     [existing(S1)], [None]),
    ("pod affinity to another namespace does not match a pod of a third namespace",
     pod(labels=S2, aff=affinity(required=[term("", In("service", "securityscan", "value2"), namespaces=["DiffNameSpace"])])),
     [existing(S1, ns="ns")], [AFF]),
    ("a selector matching no existing pod fails pod affinity",
     pod(labels=S1, aff=affinity(required=[term("", In("service", "antivirusscan", "value2"))])),
     [existing(S1)], [AFF]),
    ("several required terms with different operators are all satisfied by the same pod",
     pod(labels=S2, aff=affinity(required=[
         term("region", Exists("service"), expr("wrongkey", "DoesNotExist")),
         term("region", In("service", "securityscan"), NotIn("service", "WrongValue"))])),
     [existing(S1)], [None]),
    ("requirements of a selector are ANDed: one unmatched expression fails pod affinity",
     pod(labels=S2, aff=affinity(required=[
         term("region", Exists("service"), expr("wrongkey", "DoesNotExist")),
         term("region", In("service", "securityscan2"), NotIn("service", "WrongValue"))])),
     [existing(S1)], [AFF]),
    ("pod affinity and anti-affinity both satisfied",
     pod(labels=S2, aff=affinity(required=[term("region", In("service", "securityscan", "value2"))],
                                 anti=[term("node", In("service", "antivirusscan", "value2"))])),
     [existing(S1)], [None]),
    ("anti-affinity symmetry: the existing pod's anti-affinity does not select the incoming pod",
     pod(labels=S2, aff=affinity(required=[term("region", In("service", "securityscan", "value2"))],
                                 anti=[term("node", In("service", "antivirusscan", "value2"))])),
     [existing(S1, affinity(anti=[term("node", In("service", "antivirusscan", "value2"))]))], [None]),
    ("pod affinity satisfied but the incoming pod's anti-affinity matches the existing pod",
     pod(labels=S2, aff=affinity(required=[term("region", In("service", "securityscan", "value2"))],
                                 anti=[term("zone", In("service", "securityscan", "value2"))])),
     [existing(S1)], [ANTI]),
    ("anti-affinity symmetry: the existing pod's anti-affinity selects the incoming pod",
     pod(labels=S1, aff=affinity(required=[term("region", In("service", "securityscan", "value2"))],
                                 anti=[term("node", In("service", "antivirusscan", "value2"))])),
     [existing(S1, affinity(anti=[term("zone", In("service", "securityscan", "value2"))]))], [EXISTING]),
    ("affinity to self when no matching pod exists needs a matching pod somewhere else: NotIn excludes the pod",
     pod(labels=S1, aff=affinity(required=[term("region", NotIn("service", "securityscan", "value2"))])),
     [pod(node="node2", labels=S1)], [AFF]),
    ("existing pod's anti-affinity is respected when the incoming pod has no affinity",
     pod(labels=S1),
     [existing(S1, affinity(anti=[term("zone", In("service", "securityscan", "value2"))]))], [EXISTING]),
    ("existing pod's anti-affinity not selecting the incoming pod skips PreFilter",
     pod(labels=S1),
     [existing(S1, affinity(anti=[term("zone", NotIn("service", "securityscan", "value2"))]))], SKIP),
    ("incoming anti-affinity on any of its terms fails although the existing pod's does not select it",
     pod(labels=S1, aff=affinity(anti=[term("region", Exists("service")), term("region", Exists("security"))])),
     [existing(S2, affinity(anti=[term("zone", Exists("security"))]))], [ANTI]),
    ("symmetry a1: incoming and existing pod partially match each other's anti-affinity terms",
     pod(labels=S1, aff=affinity(anti=[term("zone", Exists("service")), term("zone", Exists("security"))])),
     [existing(S2, affinity(anti=[term("zone", Exists("security"))]))], [ANTI]),
    ("symmetry a2: the existing pod's anti-affinity selects the incoming pod",
     pod(labels=S2, aff=affinity(anti=[term("zone", Exists("security"))])),
     [existing(S1, affinity(anti=[term("zone", Exists("service")), term("zone", Exists("security"))]))], [EXISTING]),
    ("symmetry b1: both match each other, the incoming pod's anti-affinity is reported first",
     pod(labels={"abc": "", "xyz": ""}, aff=affinity(anti=[term("zone", Exists("abc")), term("zone", Exists("def"))])),
     [existing({"def": "", "xyz": ""}, affinity(anti=[term("zone", Exists("abc")), term("zone", Exists("def"))]))], [ANTI]),
    ("symmetry b2: both match each other, the incoming pod's anti-affinity is reported first",
     pod(labels={"def": "", "xyz": ""}, aff=affinity(anti=[term("zone", Exists("abc")), term("zone", Exists("def"))])),
     [existing({"abc": "", "xyz": ""}, affinity(anti=[term("zone", Exists("abc")), term("zone", Exists("def"))]))], [ANTI]),
    ("an invalid affinity label value fails PreFilter with upstream's parse message",
     pod(labels=S1, aff=affinity(required=[term("region", In("service", "{{.bad-value.}}")),
                                           term("node", In("service", "antivirusscan", "value2"))])), [],
     (int(Code.UnschedulableAndUnresolvable),
      "parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: \"{{.bad-value.}}\": a valid label must be an "
      "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
      "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
      "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")),
    ("an invalid anti-affinity label value fails PreFilter with upstream's parse message",
     pod(labels=S1, aff=affinity(anti=[term("node", In("service", "{{.bad-value.}}"))])), [],
     (int(Code.UnschedulableAndUnresolvable),
      "parsing pod: requiredAntiAffinityTerms: values[0][service]: Invalid value: \"{{.bad-value.}}\": a valid label must be an "
      "empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
      "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
      "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")),
    ("an In requirement without values fails PreFilter with a nil slice: LabelSelectorAsSelector copies the values",
     pod(labels=S1, aff=affinity(required=[term("region", In("service"))])), [],
     (int(Code.UnschedulableAndUnresolvable),
      "parsing pod: requiredAffinityTerms: values: Invalid value: []string(nil): for 'in', 'notin' operators, "
      "values set can't be empty")),
    ("an invalid affinity key fails PreFilter with every message of IsQualifiedName",
     pod(labels=S1, aff=affinity(required=[term("region", In("a/", "x"))])), [],
     (int(Code.UnschedulableAndUnresolvable),
      "parsing pod: requiredAffinityTerms: key: Invalid value: \"a/\": name part must be non-empty; name part must "
      "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
      "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")),
    ("namespaceSelector: affinity to pods of namespaces labelled team1",
     pod(labels=S2, aff=affinity(required=[term("region", In("service", "securityscan", "value2"),
                                                ns_selector=selector(In("team", "team1")))])),
     [existing(S1, ns="subteam1.team1")], [None]),
    ("namespaceSelector: a pod of a team2 namespace does not satisfy affinity to team1",
     pod(labels=S2, aff=affinity(required=[term("region", In("service", "securityscan", "value2"),
                                                ns_selector=selector(In("team", "team1")))])),
     [existing(S1, ns="subteam1.team2")], [AFF]),
    ("namespaceSelector: anti-affinity to pods of team1 namespaces",
     pod(ns="subteam1.team1", labels=S2, aff=affinity(anti=[term("zone", In("service", "securityscan", "value2"),
                                                               ns_selector=selector(In("team", "team1")))])),
     [existing(S1, ns="subteam2.team1")], [ANTI]),
    ("namespaceSelector: an empty selector makes anti-affinity match every namespace",
     pod(ns="subteam1.team1", labels=S2, aff=affinity(anti=[term("zone", In("service", "securityscan", "value2"), ns_selector={})])),
     [existing(S1, ns="subteam2.team1")], [ANTI]),
    ("namespaceSelector: anti-affinity to team1 ignores pods of team2 namespaces",
     pod(ns="subteam1.team1", labels=S2, aff=affinity(anti=[term("zone", In("service", "securityscan", "value2"),
                                                               ns_selector=selector(In("team", "team1")))])),
     [existing(S1, ns="subteam1.team2")], [None]),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "want"), SINGLE_NODE_CASES, ids=[c[0] for c in SINGLE_NODE_CASES])
def test_required_affinity_single_node(name: str, incoming: dict, pods: list[dict], want: Any) -> None:
    assert run_filter(incoming, [NODE1], pods) == want


CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def zone_nodes(*zones: str, key: str = "zone") -> list[dict]:
    return [node(f"node{chr(65 + i)}", {"region": "r1", key: z, "hostname": f"node{chr(65 + i)}"}) for i, z in enumerate(zones)]


MULTI_NODE_CASES = [
    ("nodes sharing the topology value of a node with a matching pod all satisfy affinity",
     pod(aff=affinity(required=[term("region", In("foo", "bar"))])),
     [pod(node="nodeA", labels={"foo": "bar"})],
     [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)], [None, None, AFF]),
    ("the first pod of a collection with affinity to itself is not blocked when no pod matches anywhere",
     pod(labels={"foo": "bar", "service": "securityscan"},
         aff=affinity(required=[term("zone", In("foo", "bar")), term("zone", In("service", "securityscan"))])),
     [pod(node="nodeA", labels={"foo": "bar"})],
     [node("nodeA", {"zone": "az1", "hostname": "h1"}), node("nodeB", {"zone": "az2", "hostname": "h2"})], [None, None]),
    ("the first pod of a collection still needs nodes with the requested topology keys",
     pod(labels={"foo": "bar", "service": "securityscan"},
         aff=affinity(required=[term("zone", In("foo", "bar")), term("zone", In("service", "securityscan"))])),
     [pod(node="nodeA", labels={"foo": "bar"})],
     [node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}), node("nodeB", {"zoneLabel": "az2", "hostname": "h2"})], [AFF, AFF]),
    ("anti-affinity rejects every node of the domain hosting a matching pod",
     pod(aff=affinity(anti=[term("region", In("foo", "abc"))])),
     [pod(node="nodeA", labels={"foo": "abc"})], zone_nodes("z1", "z1")[:2], [ANTI, ANTI]),
    ("anti-affinity matches when any term matches",
     pod(aff=affinity(anti=[term("region", In("foo", "abc")), term("zone", In("service", "securityscan"))])),
     [pod(node="nodeA", labels={"foo": "abc", "service": "securityscan"})], zone_nodes("z1", "z2"), [ANTI, ANTI]),
    ("anti-affinity leaves nodes of other domains schedulable",
     pod(aff=affinity(anti=[term("region", In("foo", "abc"))])),
     [pod(node="nodeA", labels={"foo": "abc"})],
     [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)], [ANTI, ANTI, None]),
    ("anti-affinity only counts pods of the term's namespaces",
     pod(ns="NS1", labels={"foo": "123"}, aff=affinity(anti=[term("region", In("foo", "bar"))])),
     [pod(node="nodeA", ns="NS1", labels={"foo": "bar"}),
      pod(node="nodeC", ns="NS2", aff=affinity(anti=[term("region", In("foo", "123"))]))],
     [node("nodeA", CHINA), node("nodeB", CHINA_AZ1), node("nodeC", INDIA)], [ANTI, ANTI, None]),
    ("existing pod's anti-affinity term with a topology key no node has is ignored",
     pod(labels={"foo": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("invalid-node-label", Exists("foo"))]))],
     zone_nodes("z1", "z1"), SKIP),
    ("incoming anti-affinity with a topology key no node has never fails",
     pod(aff=affinity(anti=[term("invalid-node-label", Exists("foo"))])),
     [pod(node="nodeA", labels={"foo": ""})], zone_nodes("z1", "z1"), [None, None]),
    ("the incoming pod violates existing pods' anti-affinity terms on every node",
     pod(labels={"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("zone", Exists("foo"))])),
      pod(node="nodeA", aff=affinity(anti=[term("region", Exists("bar"))]))],
     zone_nodes("z1", "z2"), [EXISTING, EXISTING]),
    ("the incoming pod's anti-affinity terms are violated on every node",
     pod(aff=affinity(anti=[term("zone", Exists("foo")), term("region", Exists("bar"))])),
     [pod(node="nodeA", labels={"foo": ""}), pod(node="nodeB", labels={"bar": ""})],
     zone_nodes("z1", "z2"), [ANTI, ANTI]),
    ("existing anti-affinity counts only terms whose topology key the node has",
     pod(labels={"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("invalid-node-label", Exists("foo")), term("zone", Exists("bar"))]))],
     zone_nodes("z1", "z2"), [EXISTING, None]),
    ("incoming anti-affinity counts only terms whose topology key the node has",
     pod(aff=affinity(anti=[term("invalid-node-label", Exists("foo")), term("zone", Exists("bar"))])),
     [pod(node="nodeA", labels={"foo": "", "bar": ""})], zone_nodes("z1", "z2"), [ANTI, None]),
    ("existing anti-affinity on region and zone rejects both nodes of the region",
     pod(labels={"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("region", Exists("foo")), term("zone", Exists("bar"))]))],
     zone_nodes("z1", "z2"), [EXISTING, EXISTING]),
    ("incoming anti-affinity on region and zone rejects both nodes of the region",
     pod(aff=affinity(anti=[term("region", Exists("foo")), term("zone", Exists("bar"))])),
     [pod(node="nodeA", labels={"foo": "", "bar": ""})], zone_nodes("z1", "z2"), [ANTI, ANTI]),
    ("existing pods on two zones reject the incoming pod, the third zone accepts it",
     pod(labels={"foo": "", "bar": ""}),
     [pod(node="nodeA", aff=affinity(anti=[term("zone", Exists("foo")), term("zone", Exists("labelA"))])),
      pod(node="nodeB", aff=affinity(anti=[term("zone", Exists("bar")), term("zone", Exists("labelB"))]))],
     zone_nodes("z1", "z2", "z3"), [EXISTING, EXISTING, None]),
    ("affinity terms are all matched by one pod, then the topology keys are checked",
     pod(aff=affinity(required=[term("region", Exists("foo")), term("zone", Exists("bar"))])),
     [pod(node="nodeA", labels={"foo": "", "bar": ""})], zone_nodes("z1", "z1"), [None, None]),
    ("affinity terms must be satisfied by the same pod",
     pod(aff=affinity(required=[term("region", Exists("foo")), term("zone", Exists("bar"))])),
     [pod(node="nodeA", labels={"foo": ""}), pod(node="nodeB", labels={"bar": ""})], zone_nodes("z1", "z2"), [AFF, AFF]),
]


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "want"), MULTI_NODE_CASES, ids=[c[0] for c in MULTI_NODE_CASES])
def test_required_affinity_multiple_nodes(name: str, incoming: dict, pods: list[dict], nodes: list[dict], want: Any) -> None:
    assert run_filter(incoming, nodes, pods) == want


def test_filter_without_pre_filter_state_is_an_error() -> None:
    table, _ = cluster([node("n")], [])
    verdict = plugin().filter_nodes(CycleState(), PodInfo(pod()), table.all_rows())
    s = verdict.status_at(0)
    assert s.code == Code.Error
    assert s.message() == 'error reading "PreFilterInterPodAffinity" from cycleState: not found'


def test_matching_terminating_pods_still_count_for_affinity() -> None:
    incoming = pod(aff=affinity(anti=[term("zone", Exists("foo"))]))
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    assert run_filter(incoming, nodes, [pod(node="a", labels={"foo": ""}, terminating=True)]) == [ANTI, None]


# --- preFilterState with AddPod / RemovePod (upstream TestPreFilterStateAddRemovePod) ------------
ANTI_FOO_BAR = affinity(anti=[term("region", In("foo", "bar"))])
ANTI_COMPLEX = affinity(anti=[term("region", In("foo", "bar", "buzz")), term("zone", NotIn("service", "bar", "security", "test"))])
AFF_COMPLEX = [term("region", In("foo", "bar", "buzz")), term("zone", NotIn("service", "bar", "security", "test"))]
ADD_REMOVE_NODES = [node("nodeA", {"region": "r1", "zone": "z11"}), node("nodeB", {"region": "r1", "zone": "z12"}),
                    node("nodeC", {"region": "r2", "zone": "z21"})]

ADD_REMOVE_CASES = [
    ("anti-affinity counts follow an added and removed pod",
     pod("pending", labels={"foo": "bar"}, aff=ANTI_FOO_BAR),
     [pod("p1", node="nodeA", labels={"foo": "bar"}), pod("p2", node="nodeC", aff=ANTI_FOO_BAR)],
     pod("addedPod", node="nodeB", labels={"foo": "bar"}, aff=ANTI_FOO_BAR),
     {("region", "r1"): 2}, {}),
    ("anti-affinity counts of several terms follow an added and removed pod",
     pod("pending", labels={"foo": "bar"}, aff=ANTI_COMPLEX),
     [pod("p1", node="nodeA", labels={"foo": "bar"}), pod("p2", node="nodeC", aff=ANTI_FOO_BAR)],
     pod("addedPod", node="nodeA", labels={"foo": "bar"}, aff=ANTI_COMPLEX),
     {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1}, {}),
    ("affinity counts follow an added and removed pod",
     pod("pending", labels={"foo": "bar"}, aff=affinity(required=AFF_COMPLEX)),
     [pod("p1", node="nodeA", labels={"foo": "bar"}),
      pod("p2", node="nodeC", aff={**ANTI_FOO_BAR, **affinity(required=AFF_COMPLEX)})],
     pod("addedPod", node="nodeA", labels={"foo": "bar"}, aff=ANTI_COMPLEX),
     {}, {("region", "r1"): 2, ("zone", "z11"): 2}),
]


def _pre_filter_state(incoming: dict, pods: list[dict]) -> tuple[InterPodAffinity, CycleState, dict[str, NodeInfo]]:
    table, infos = cluster(ADD_REMOVE_NODES, pods)
    pl = plugin(objects={})
    state = CycleState()
    _, status = pl.pre_filter(state, PodInfo(incoming), table.all_rows())
    assert status is None
    return pl, state, infos


def _pairs(counts: dict) -> dict[tuple[str, str], int]:
    """Non-zero (topology key, value) counts, as upstream's maps hold them."""
    return {(key, value): count for key, dc in counts.items() for value, count in dc.as_dict().items()}


def _all_pairs(state: CycleState) -> tuple[dict, dict, dict]:
    s = state.read(PRE_FILTER_KEY)
    return _pairs(s.existing), _pairs(s.affinity), _pairs(s.anti)


@pytest.mark.parametrize(("name", "pending", "pods", "added", "want_anti", "want_affinity"), ADD_REMOVE_CASES,
                         ids=[c[0] for c in ADD_REMOVE_CASES])
def test_pre_filter_state_add_remove_pod(name: str, pending: dict, pods: list[dict], added: dict,
                                         want_anti: dict, want_affinity: dict) -> None:
    _, all_state, _ = _pre_filter_state(pending, [*pods, added])
    pl, state, infos = _pre_filter_state(pending, pods)
    original = state.clone()
    info = infos[added["spec"]["nodeName"]]
    ext = pl.pre_filter_extensions()
    assert ext.add_pod(state, PodInfo(pending), PodInfo(added), info) is None
    assert _all_pairs(state)[2] == want_anti
    assert _all_pairs(state)[1] == want_affinity
    assert _all_pairs(state) == _all_pairs(all_state)
    assert ext.remove_pod(state, PodInfo(pending), PodInfo(added), info) is None
    assert _all_pairs(state) == _all_pairs(original)


def test_pre_filter_state_clone_is_independent() -> None:
    pl, state, infos = _pre_filter_state(pod("pending", labels={"foo": "bar"}, aff=ANTI_FOO_BAR),
                                         [pod("p1", node="nodeA", labels={"foo": "bar"})])
    copy = state.clone()
    pl.pre_filter_extensions().add_pod(copy, PodInfo(pod("x")), PodInfo(pod("n", node="nodeC", labels={"foo": "bar"})), infos["nodeC"])
    assert _all_pairs(state)[2] == {("region", "r1"): 1}
    assert _all_pairs(copy)[2] == {("region", "r1"): 1, ("region", "r2"): 1}


# --- incoming affinity / anti-affinity counts (upstream TestGetTPMapMatchingIncomingAffinityAntiAffinity)
def _incoming(name: str, *labels: str) -> dict:
    return pod(name, node="nodeA", labels=dict.fromkeys(labels, ""))


INCOMING_CASES = [
    ("no pods, nothing counted", [], pod(aff=affinity(required=[term("hostname", Exists("aaa"))])), {}, {}),
    ("no pod has a label of the incoming pod's terms", [_incoming("b", "bbb")],
     pod(aff=affinity(required=[term("hostname", Exists("aaa"))], anti=[term("hostname", Exists("aaa"))])), {}, {}),
    ("an existing pod matches affinity and anti-affinity (single term)", [_incoming("a", "aaa")],
     pod(aff=affinity(required=[term("hostname", Exists("aaa"))], anti=[term("hostname", Exists("aaa"))])),
     {("hostname", "nodeA"): 1}, {("hostname", "nodeA"): 1}),
    ("an existing pod matching several affinity terms counts once per term", [_incoming("ab", "aaa", "bbb")],
     pod(aff=affinity(required=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))],
                      anti=[term("hostname", Exists("aaa"))])),
     {("hostname", "nodeA"): 2}, {("hostname", "nodeA"): 1}),
    ("an existing pod matching only some affinity terms does not count", [_incoming("a", "aaa")],
     pod(aff=affinity(required=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))],
                      anti=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))])),
     {}, {("hostname", "nodeA"): 1}),
    ("anti-affinity counts each matching term (case 1)", [_incoming("ab", "aaa", "bbb")],
     pod(aff=affinity(required=[term("hostname", Exists("aaa")), term("hostname", Exists("ccc"))],
                      anti=[term("hostname", Exists("aaa")), term("hostname", Exists("ccc"))])),
     {}, {("hostname", "nodeA"): 1}),
    ("anti-affinity counts each matching term (case 2)", [_incoming("b", "bbb")],
     pod(aff=affinity(required=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))],
                      anti=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))])),
     {}, {("hostname", "nodeA"): 1}),
]


@pytest.mark.parametrize(("name", "pods", "incoming", "want_affinity", "want_anti"), INCOMING_CASES, ids=[c[0] for c in INCOMING_CASES])
def test_incoming_affinity_anti_affinity_counts(name: str, pods: list[dict], incoming: dict, want_affinity: dict, want_anti: dict) -> None:
    table, _ = cluster([node("nodeA", {"hostname": "nodeA"})], pods)
    state = CycleState()
    plugin(objects={}).pre_filter(state, PodInfo(incoming), table.all_rows())
    _, got_affinity, got_anti = _all_pairs(state)
    assert got_affinity == want_affinity
    assert got_anti == want_anti


# ================================================================================================
# scoring (upstream TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight)
# ================================================================================================

AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}
SEC_S1, SEC_S2 = {"security": "S1"}, {"security": "S2"}
STAY_WITH_S1_IN_REGION = affinity(preferred=[weighted(5, term("region", In("security", "S1")))])
STAY_WITH_S2_IN_REGION = affinity(preferred=[weighted(6, term("region", In("security", "S2")))])
AFFINITY3 = affinity(preferred=[
    weighted(8, term("region", NotIn("security", "S1"), In("security", "S2"))),
    weighted(2, term("region", Exists("security"), expr("wrongkey", "DoesNotExist")))])
HARD_AFFINITY = affinity(required=[term("region", In("security", "S1", "value2")),
                                   term("region", Exists("security"), expr("wrongkey", "DoesNotExist"))])
AWAY_FROM_S1_IN_AZ = affinity(preferred_anti=[weighted(5, term("az", In("security", "S1")))])
AWAY_FROM_S2_IN_AZ = affinity(preferred_anti=[weighted(5, term("az", In("security", "S2")))])
STAY_S1_AWAY_S2 = affinity(preferred=[weighted(8, term("region", In("security", "S1")))],
                           preferred_anti=[weighted(5, term("az", In("security", "S2")))])
TEAM1 = selector(In("team", "team1"))
AFFINITY_NS_SELECTOR = affinity(preferred=[weighted(5, term("region", In("security", "S1"), namespaces=["subteam2.team2"], ns_selector=TEAM1))])
ANTI_NS_SELECTOR = affinity(preferred_anti=[weighted(5, term("region", In("security", "S1"), namespaces=["subteam2.team2"], ns_selector=TEAM1))])


def n_(name: str, labels: dict) -> dict:
    return node(name, labels)


def on(n: str, labels: dict | None = None, aff: dict | None = None, ns: str = "default") -> dict:
    return pod(node=n, labels=labels, aff=aff, ns=ns)


SCORE_CASES = [
    ("all nodes have the same priority when affinity is nil",
     pod(labels=SEC_S1), [], [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], SKIP),
    ("affinity: the node matching topology key and pods scores highest",
     pod(labels=SEC_S1, aff=STAY_WITH_S1_IN_REGION),
     [on("node1", SEC_S1), on("node2", SEC_S2), on("node3", SEC_S1)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], [100, 0, 0]),
    ("affinity: nodes sharing the topology value of a matching pod get the same score",
     pod(aff=STAY_WITH_S1_IN_REGION), [on("node1", SEC_S1)],
     [n_("node1", CHINA), n_("node2", CHINA_AZ1), n_("node3", INDIA)], [100, 100, 0]),
    ("affinity: the region with more matching pods scores higher",
     pod(labels=SEC_S1, aff=STAY_WITH_S2_IN_REGION),
     [on("node1", SEC_S2), on("node1", SEC_S2), on("node2", SEC_S2), on("node3", SEC_S2), on("node4", SEC_S2), on("node5", SEC_S2)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", CHINA), n_("node4", CHINA), n_("node5", INDIA)], [100, 0, 100, 100, 0]),
    ("affinity: different operators and weights, some terms not matching",
     pod(labels=SEC_S1, aff=AFFINITY3), [on("node1", SEC_S1), on("node2", SEC_S2), on("node3", SEC_S1)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], [20, 100, 0]),
    ("affinity symmetry: existing pods' preferred affinity to the incoming pod",
     pod(labels=SEC_S2), [on("node1", SEC_S1, STAY_WITH_S1_IN_REGION), on("node2", SEC_S2, STAY_WITH_S2_IN_REGION)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], [0, 100, 0]),
    ("affinity symmetry with namespace selector",
     pod(ns="subteam1.team1", labels=SEC_S1),
     [on("node1", SEC_S1, AFFINITY_NS_SELECTOR), on("node2", SEC_S2, STAY_WITH_S2_IN_REGION)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], [100, 0, 0]),
    ("anti-affinity symmetry with namespace selector",
     pod(ns="subteam1.team1", labels=SEC_S1),
     [on("node1", SEC_S1, ANTI_NS_SELECTOR), on("node2", SEC_S2, STAY_WITH_S2_IN_REGION)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], [0, 100, 100]),
    ("affinity symmetry: existing pods' required affinity counts with hardPodAffinityWeight",
     pod(labels=SEC_S1), [on("node1", SEC_S1, HARD_AFFINITY), on("node2", SEC_S2, HARD_AFFINITY)],
     [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)], [100, 100, 0]),
    ("anti-affinity: the node without matching pods scores highest",
     pod(labels=SEC_S1, aff=AWAY_FROM_S1_IN_AZ), [on("node1", SEC_S1), on("node2", SEC_S2)],
     [n_("node1", AZ1), n_("node2", CHINA)], [0, 100]),
    ("anti-affinity: the node without the topology key scores highest",
     pod(labels=SEC_S1, aff=AWAY_FROM_S1_IN_AZ), [on("node1", SEC_S1), on("node2", SEC_S1)],
     [n_("node1", AZ1), n_("node2", CHINA)], [0, 100]),
    ("anti-affinity: the node with more matching pods scores lower",
     pod(labels=SEC_S1, aff=AWAY_FROM_S1_IN_AZ), [on("node1", SEC_S1), on("node1", SEC_S1), on("node2", SEC_S2)],
     [n_("node1", AZ1), n_("node2", INDIA)], [0, 100]),
    ("anti-affinity symmetry: existing pods avoiding the incoming pod lower their node's score",
     pod(labels=SEC_S2), [on("node1", SEC_S1, AWAY_FROM_S2_IN_AZ), on("node2", SEC_S2, AWAY_FROM_S1_IN_AZ)],
     [n_("node1", AZ1), n_("node2", AZ2)], [0, 100]),
    ("affinity and anti-affinity: preferred terms of both kinds",
     pod(labels=SEC_S1, aff=STAY_S1_AWAY_S2), [on("node1", SEC_S1), on("node2", SEC_S1)],
     [n_("node1", CHINA), n_("node2", AZ1)], [100, 0]),
    ("affinity and anti-affinity: pods of the same service together in a region, apart per node",
     pod(labels=SEC_S1, aff=STAY_S1_AWAY_S2),
     [on("node1", SEC_S1), on("node1", SEC_S1), on("node2", SEC_S1), on("node3", SEC_S1), on("node3", SEC_S1),
      on("node4", SEC_S1), on("node5", SEC_S1)],
     [n_("node1", CHINA_AZ1), n_("node2", INDIA), n_("node3", CHINA), n_("node4", CHINA), n_("node5", INDIA)],
     [100, 0, 100, 100, 0]),
    ("affinity, anti-affinity and symmetry together",
     pod(labels=SEC_S1, aff=STAY_S1_AWAY_S2),
     [on("node1", SEC_S1), on("node2", SEC_S2), on("node3", aff=STAY_S1_AWAY_S2), on("node4", aff=AWAY_FROM_S1_IN_AZ)],
     [n_("node1", CHINA), n_("node2", AZ1), n_("node3", INDIA), n_("node4", AZ2)], [100, 0, 100, 0]),
    ("nodes of a topology without pods with affinity score like their topology",
     pod(labels=SEC_S1), [on("node1", SEC_S1), on("node2", aff=STAY_S1_AWAY_S2)],
     [n_("node1", CHINA), n_("node2", CHINA)], [0, 0]),
    ("affinity with pods matching the namespaceSelector",
     pod(ns="subteam1.team1", labels=SEC_S1, aff=AFFINITY_NS_SELECTOR),
     [on("node1", SEC_S1, ns="subteam1.team1"), on("node1", SEC_S1, ns="subteam1.team1"),
      on("node1", SEC_S1, ns="subteam1.team2"), on("node2", SEC_S1, ns="subteam2.team1")],
     [n_("node1", CHINA), n_("node2", INDIA)], [100, 0]),
    ("affinity with pods matching both the namespaceSelector and namespaces",
     pod(ns="subteam1.team1", labels=SEC_S1, aff=AFFINITY_NS_SELECTOR),
     [on("node1", SEC_S1, ns="subteam1.team1"), on("node1", SEC_S1, ns="subteam1.team1"),
      on("node1", SEC_S1, ns="subteam2.team2"), on("node2", SEC_S1, ns="subteam2.team1")],
     [n_("node1", CHINA), n_("node2", INDIA)], [100, 0]),
    ("anti-affinity with pods matching the namespaceSelector",
     pod(ns="subteam1.team1", labels=SEC_S1, aff=ANTI_NS_SELECTOR),
     [on("node1", SEC_S1, ns="subteam1.team1"), on("node1", SEC_S1, ns="subteam1.team1"),
      on("node1", SEC_S1, ns="subteam1.team2"), on("node2", SEC_S1, ns="subteam2.team1")],
     [n_("node1", CHINA), n_("node2", INDIA)], [0, 100]),
    ("anti-affinity with pods matching both the namespaceSelector and namespaces",
     pod(ns="subteam1.team1", labels=SEC_S1, aff=ANTI_NS_SELECTOR),
     [on("node1", SEC_S1, ns="subteam1.team1"), on("node1", SEC_S1, ns="subteam1.team1"),
      on("node1", SEC_S1, ns="subteam2.team2"), on("node2", SEC_S1, ns="subteam2.team1")],
     [n_("node1", CHINA), n_("node2", INDIA)], [0, 100]),
    ("no nodes to score", pod(labels=SEC_S2), [], [], SKIP),
]


def run_score(incoming: dict, pods: list[dict], nodes: list[dict], args: InterPodAffinityArgs | None = None) -> Any:
    table, _ = cluster(nodes, pods)
    pl = plugin(args)
    state = CycleState()
    target = PodInfo(incoming)
    status = pl.pre_score(state, target, table.all_rows())
    if status is not None:
        return SKIP if status.code == Code.Skip else (int(status.code), status.message())
    raw = pl.score_nodes(state, target, table.all_rows())
    out = pl.normalize_scores(state, target, table.all_rows(), raw.copy())
    return list(raw if out is None else out)


@pytest.mark.parametrize(("name", "incoming", "pods", "nodes", "want"), SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_preferred_affinity(name: str, incoming: dict, pods: list[dict], nodes: list[dict], want: Any) -> None:
    assert run_score(incoming, pods, nodes) == want


def test_ignore_preferred_terms_of_existing_pods_skips_pods_without_preferred_terms() -> None:
    pods = [on("node1", SEC_S1, STAY_S1_AWAY_S2), on("node2", SEC_S2, STAY_WITH_S2_IN_REGION)]
    nodes = [n_("node1", CHINA), n_("node2", INDIA)]
    args = InterPodAffinityArgs(ignore_preferred_terms_of_existing_pods=True)
    assert run_score(pod(labels=SEC_S2), pods, nodes, args) == SKIP
    assert run_score(pod(labels=SEC_S2), pods, nodes) == [0, 100]


@pytest.mark.parametrize("kind", ["podAffinity", "podAntiAffinity"])
def test_invalid_preferred_terms_fail_pre_score(kind: str) -> None:
    bad = weighted(8, term("region", In("security", "{{.bad-value.}}")))
    aff = {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [bad]}}
    code, message = run_score(pod(aff=aff), [], [n_("node1", CHINA), n_("node2", CHINA)])
    assert code == int(Code.Error)
    assert 'Invalid value: "{{.bad-value.}}"' in message


HARD_POD_AFFINITY = affinity(required=[term("region", In("service", "S1"), namespaces=["default", "subteam2.team2"], ns_selector=TEAM1)])
HARD_WEIGHT_CASES = [
    ("with default weight", pod(labels={"service": "S1"}), 1, [100, 100, 0]),
    ("with zero weight", pod(labels={"service": "S1"}), 0, SKIP),
    ("with no matching namespace", pod(ns="subteam1.team2", labels={"service": "S1"}), 1, SKIP),
    ("with matching NamespaceSelector", pod(ns="subteam1.team1", labels={"service": "S1"}), 1, [100, 100, 0]),
    ("with matching Namespaces", pod(ns="subteam2.team2", labels={"service": "S1"}), 1, [100, 100, 0]),
]


@pytest.mark.parametrize(("name", "incoming", "weight", "want"), HARD_WEIGHT_CASES, ids=[c[0] for c in HARD_WEIGHT_CASES])
def test_preferred_affinity_with_hard_pod_affinity_symmetric_weight(name: str, incoming: dict, weight: int, want: Any) -> None:
    pods = [on("node1", aff=HARD_POD_AFFINITY), on("node2", aff=HARD_POD_AFFINITY)]
    nodes = [n_("node1", CHINA), n_("node2", INDIA), n_("node3", AZ1)]
    assert run_score(incoming, pods, nodes, InterPodAffinityArgs(hard_pod_affinity_weight=weight)) == want


def test_hard_pod_affinity_weight_scales_the_symmetric_score() -> None:
    pods = [on("node1", aff=affinity(required=[term("region", In("service", "S1"))])),
            on("node2", aff=affinity(preferred=[weighted(10, term("region", In("service", "S1")))]))]
    nodes = [n_("node1", CHINA), n_("node2", INDIA)]
    assert run_score(pod(labels={"service": "S1"}), pods, nodes, InterPodAffinityArgs(hard_pod_affinity_weight=20)) == [100, 0]
    assert run_score(pod(labels={"service": "S1"}), pods, nodes, InterPodAffinityArgs(hard_pod_affinity_weight=5)) == [0, 100]


# ================================================================================================
# matchLabelKeys / mismatchLabelKeys (merged at pod creation by the API server)
# ================================================================================================

def test_match_label_keys_are_merged_into_the_selector_at_creation() -> None:
    from kubesched.apiserver.admission import apply_label_keys_to_selectors

    incoming = pod(labels={"app": "web", "rev": "2"}, aff=affinity(
        required=[term("zone", In("app", "web"), matchLabelKeys=["rev"])],
        anti=[term("kubernetes.io/hostname", In("app", "web"), mismatchLabelKeys=["rev"])]))
    apply_label_keys_to_selectors(incoming)
    req = incoming["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    anti = incoming["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert req["labelSelector"]["matchExpressions"][-1] == {"key": "rev", "operator": "In", "values": ["2"]}
    assert anti["labelSelector"]["matchExpressions"][-1] == {"key": "rev", "operator": "NotIn", "values": ["2"]}
    nodes = [node("a", {"zone": "z1", "kubernetes.io/hostname": "a"}), node("b", {"zone": "z2", "kubernetes.io/hostname": "b"}),
             node("c", {"zone": "z1", "kubernetes.io/hostname": "c"})]
    pods = [pod(node="a", labels={"app": "web", "rev": "1"}), pod(node="b", labels={"app": "web", "rev": "2"})]
    # affinity only to the same revision (zone z2); anti-affinity only to other revisions (node a).
    assert run_filter(incoming, nodes, pods) == [AFF, None, AFF]
    incoming2 = pod(labels={"app": "web", "rev": "2"}, aff=affinity(
        anti=[term("kubernetes.io/hostname", In("app", "web"), mismatchLabelKeys=["rev"])]))
    apply_label_keys_to_selectors(incoming2)
    assert run_filter(incoming2, nodes, pods) == [ANTI, None, None]


def test_label_keys_leave_nil_selectors_and_missing_labels_alone() -> None:
    from kubesched.apiserver.admission import apply_label_keys_to_selectors

    p = pod(labels={"app": "web"}, aff=affinity(required=[
        {"topologyKey": "zone", "matchLabelKeys": ["app"]},
        term("zone", In("app", "web"), matchLabelKeys=["missing"])]))
    apply_label_keys_to_selectors(p)
    terms = p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert "labelSelector" not in terms[0]
    assert terms[1]["labelSelector"]["matchExpressions"] == [In("app", "web")]


# ================================================================================================
# queueing hints (upstream Test_isSchedulableAfterPodChange / NodeChange)
# ================================================================================================

def _affinity_in(key: str, topo: str, *values: str) -> dict:
    return pod("p", aff=affinity(required=[term(topo, In(key, *values))]))


def _anti_in(key: str, topo: str, *values: str) -> dict:
    return pod("p", aff=affinity(anti=[term(topo, In(key, *values))]))


TARGET_AFFINITY = _affinity_in("service", "region", "securityscan", "value2")
TARGET_ANTI = _anti_in("service", "region", "securityscan", "value2")
MULTI_EXISTS = pod("p", aff=affinity(required=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))]))
Q, SKIPQ = QueueingHint.Queue, QueueingHint.QueueSkip

POD_HINT_CASES = [
    ("add a pod which matches the pod affinity", TARGET_AFFINITY, None, pod(node="n", labels=S1), Q),
    ("add an un-scheduled pod", TARGET_AFFINITY, None, pod(labels=S1), SKIPQ),
    ("add a pod which doesn't match the pod affinity", TARGET_AFFINITY, None, pod(node="n", labels={"aaa": "a"}), SKIPQ),
    ("update a pod from non-match to match pod affinity", TARGET_AFFINITY,
     pod(node="n", labels={"aaa": "a"}), pod(node="n", labels=S1), Q),
    ("the updating pod matches target pod's affinity both before and after", TARGET_AFFINITY,
     pod(node="n", labels={"service": "value2"}), pod(node="n", labels=S1), SKIPQ),
    ("update an un-scheduled pod", TARGET_AFFINITY, pod(labels=S1), pod(labels=S1), SKIPQ),
    ("update a pod from match to non-match the pod affinity", TARGET_AFFINITY,
     pod(node="n", labels=S1), pod(node="n", labels={"aaa": "a"}), SKIPQ),
    ("update a pod from match to non-match pod's affinity - multiple terms", MULTI_EXISTS,
     pod(node="n", labels={"aaa": "a"}), pod(node="n", labels=S1), SKIPQ),
    ("update a pod from non-match to match pod's affinity - multiple terms", MULTI_EXISTS,
     pod(node="n", labels={"aaa": "a"}), pod(node="n", labels={"aaa": "", "bbb": ""}), Q),
    ("modify pod label from matching anti-affinity to not matching", TARGET_ANTI,
     pod(node="n", labels=S1), pod(node="n", labels={"service": "aaaa"}), Q),
    ("modify pod label from not matching anti-affinity to matching", TARGET_ANTI,
     pod(node="n", labels={"service": "bbb"}), pod(node="n", labels=S1), SKIPQ),
    ("delete a pod which doesn't match pod's anti-affinity", TARGET_ANTI, pod(node="n", labels={"aaa": "a"}), None, SKIPQ),
    ("delete a pod which matches pod's anti-affinity", TARGET_ANTI, pod(node="n", labels=S1), None, Q),
    # The deleted pod's own anti-affinity may have kept the target pod away (upstream's 1.35 fix of this hint).
    ("delete a pod whose anti-affinity matches the target pod", pod("p", labels=S1),
     pod("q", node="n", aff=affinity(anti=[term("region", In("service", "securityscan"))])), None, Q),
    ("delete a pod whose anti-affinity doesn't match the target pod", pod("p", labels={"aaa": "a"}),
     pod("q", node="n", aff=affinity(anti=[term("region", In("service", "securityscan"))])), None, SKIPQ),
]


@pytest.mark.parametrize(("name", "target", "old", "new", "want"), POD_HINT_CASES, ids=[c[0] for c in POD_HINT_CASES])
def test_is_schedulable_after_pod_change(name: str, target: dict, old: Any, new: Any, want: QueueingHint) -> None:
    assert plugin()._after_pod_change(target, old, new) == want


ZONE_AFFINITY = _affinity_in("service", "zone", "securityscan", "value2")
ZONE_ANTI = pod("p", aff=affinity(anti=[term("zone", label_selector=selector(another="label"))]))
NODE_HINT_CASES = [
    ("add a new node with matched pod affinity topologyKey", ZONE_AFFINITY, None, node("a", {"zone": "zone1"}), Q),
    ("add a new node without matched topologyKey", TARGET_AFFINITY, None, node("a", {"zone": "zone1"}), SKIPQ),
    ("update node label but not topologyKey", ZONE_AFFINITY, node("a", {"aaa": "a"}), node("a", {"aaa": "b"}), SKIPQ),
    ("update node label that isn't related to the pod affinity", ZONE_AFFINITY,
     node("a", {"zone": "zone1"}), node("a", {"zone": "zone1", "unrelated-label": "unrelated"}), SKIPQ),
    ("update node with different affinity topologyKey value", ZONE_AFFINITY,
     node("a", {"zone": "zone1"}), node("a", {"zone": "zone2"}), Q),
    ("update node to have the affinity topology label", ZONE_AFFINITY, node("a", {"aaa": "a"}), node("a", {"zone": "zone1"}), Q),
    ("add a new node with matched pod anti-affinity topologyKey", ZONE_ANTI, None, node("a", {"zone": "zone1"}), Q),
    ("add a new node without matched pod anti-affinity topologyKey", ZONE_ANTI, None, node("a"), Q),
    ("update node label that isn't related to the pod anti-affinity", ZONE_ANTI,
     node("a", {"zone": "zone1"}), node("a", {"zone": "zone1", "unrelated-label": "unrelated"}), SKIPQ),
    ("update node with different anti-affinity topologyKey value", ZONE_ANTI,
     node("a", {"zone": "zone1"}), node("a", {"zone": "zone2"}), Q),
    ("update node to have the anti-affinity topology label", ZONE_ANTI, node("a", {"aaa": "a"}), node("a", {"zone": "zone1"}), SKIPQ),
    ("update node label not to have anti-affinity topology label", ZONE_ANTI,
     node("a", {"zone": "zone1"}), node("a", {"aaa": "a"}), Q),
]


@pytest.mark.parametrize(("name", "target", "old", "new", "want"), NODE_HINT_CASES, ids=[c[0] for c in NODE_HINT_CASES])
def test_is_schedulable_after_node_change(name: str, target: dict, old: Any, new: Any, want: QueueingHint) -> None:
    assert plugin()._after_node_change(target, old, new) == want


def test_events_to_register() -> None:
    events = [(e.event.resource, e.event.action) for e in plugin().events_to_register()]
    assert events == [(Resource.Pod, ActionType.Add | ActionType.UpdatePodLabel | ActionType.Delete),
                      (Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel)]


# ================================================================================================
# reference implementation: upstream's per-node algorithm, written plainly
# ================================================================================================

def _ref_terms(p: PodInfo, attr: str) -> list[AffinityTerm]:
    try:
        return getattr(p, attr)
    except InvalidSelector:
        return []


def _ref_merge(t: AffinityTerm, ns_objects: dict[str, dict]) -> tuple[frozenset | None, Any, str, int]:
    if t.namespace_selector.empty:
        return None, t.selector, t.topology_key, t.weight
    names = set(t.namespaces)
    for obj in ns_objects.values():
        if t.namespace_selector.matches(obj["metadata"].get("labels") or {}):
            names.add(obj["metadata"]["name"])
    return frozenset(names), t.selector, t.topology_key, t.weight


def _ref_match(t: tuple, p: PodInfo) -> bool:
    namespaces, sel, _, _ = t
    return (namespaces is None or p.namespace in namespaces) and sel.matches(p.labels)


class RefIPA:
    """Upstream's PreFilter / Filter / AddPod / RemovePod / PreScore / Score, per node and per pod."""

    def __init__(self, p: PodInfo, infos: list[NodeInfo], ns_objects: dict[str, dict], hard_weight: int = 1,
                 ignore_existing: bool = False) -> None:
        self.pod = p
        self.infos = infos
        self.hard_weight = hard_weight
        self.ignore_existing = ignore_existing
        ns = ns_objects.get(p.namespace)
        self.ns_labels = None if ns is None else (ns["metadata"].get("labels") or {})
        self.req_aff = [_ref_merge(t, ns_objects) for t in _ref_terms(p, "required_affinity_terms")]
        self.req_anti = [_ref_merge(t, ns_objects) for t in _ref_terms(p, "required_anti_affinity_terms")]
        self.pref_aff = [_ref_merge(t, ns_objects) for t in _ref_terms(p, "preferred_affinity_terms")]
        self.pref_anti = [_ref_merge(t, ns_objects) for t in _ref_terms(p, "preferred_anti_affinity_terms")]
        self.existing: Counter = Counter()
        self.affinity: Counter = Counter()
        self.anti: Counter = Counter()

    def pre_filter(self) -> bool:
        for info in self.infos:
            for ep in info.pods.values():
                self.update(ep, info.labels, 1)
        self._prune()
        return bool(self.existing or self.req_aff or self.req_anti)

    def _prune(self) -> None:
        for c in (self.existing, self.affinity, self.anti):
            for k in [k for k, v in c.items() if v == 0]:
                del c[k]

    def update(self, ep: PodInfo, labels: dict, mult: int) -> None:
        for t in _ref_terms(ep, "required_anti_affinity_terms"):
            if t.matches(self.pod, self.ns_labels) and t.topology_key in labels:
                self.existing[(t.topology_key, labels[t.topology_key])] += mult
        if self.req_aff and all(_ref_match(t, ep) for t in self.req_aff):
            for t in self.req_aff:
                if t[2] in labels:
                    self.affinity[(t[2], labels[t[2]])] += mult
        for t in self.req_anti:
            if _ref_match(t, ep) and t[2] in labels:
                self.anti[(t[2], labels[t[2]])] += mult
        self._prune()

    def filter(self, labels: dict) -> tuple[int, str] | None:
        pods_exist = True
        for t in self.req_aff:
            if t[2] not in labels:
                return AFF
            if self.affinity.get((t[2], labels[t[2]]), 0) <= 0:
                pods_exist = False
        if not pods_exist and not (not self.affinity and all(_ref_match(t, self.pod) for t in self.req_aff)):
            return AFF
        for t in self.req_anti:
            if t[2] in labels and self.anti.get((t[2], labels[t[2]]), 0) > 0:
                return ANTI
        for k, v in labels.items():
            if self.existing.get((k, v), 0) > 0:
                return EXISTING
        return None

    def pre_score(self) -> dict | None:
        has_constraints = bool(self.pref_aff or self.pref_anti)
        if self.ignore_existing and not has_constraints:
            return None
        scores: dict[str, Counter] = {}

        def process(match: bool, key: str, weight: int, labels: dict) -> None:
            if match and key in labels:
                scores.setdefault(key, Counter())[labels[key]] += weight

        for info in self.infos:
            labels = info.labels
            for ep in info.pods.values():
                for t in self.pref_aff:
                    process(_ref_match(t, ep), t[2], t[3], labels)
                for t in self.pref_anti:
                    process(_ref_match(t, ep), t[2], -t[3], labels)
                if self.hard_weight > 0:
                    for t in _ref_terms(ep, "required_affinity_terms"):
                        process(t.matches(self.pod, self.ns_labels), t.topology_key, self.hard_weight, labels)
                for t in _ref_terms(ep, "preferred_affinity_terms"):
                    process(t.matches(self.pod, self.ns_labels), t.topology_key, t.weight, labels)
                for t in _ref_terms(ep, "preferred_anti_affinity_terms"):
                    process(t.matches(self.pod, self.ns_labels), t.topology_key, -t.weight, labels)
        return scores or None

    @staticmethod
    def score(scores: dict, labels: dict) -> int:
        return sum(v.get(labels[k], 0) for k, v in scores.items() if k in labels)

    @staticmethod
    def normalize(raw: list[int]) -> list[int]:
        if not raw:
            return []
        low, high = min(raw), max(raw)
        if high == low:
            return [0] * len(raw)
        return [int(100.0 * ((s - low) / (high - low))) for s in raw]


# ================================================================================================
# vectorised vs reference on random clusters
# ================================================================================================

TOPOLOGY_KEYS = ["zone", "region", "kubernetes.io/hostname", "rack"]
NS_NAMES = ["ns1", "ns2", "ns3"]
RANDOM_NAMESPACES = namespace_objects(namespace("ns1", team="a"), namespace("ns2", team="b"), namespace("ns3", team="a"))


def random_node(rng: random.Random, i: int) -> dict:
    labels = {"kubernetes.io/hostname": f"n{i}"}
    if rng.random() < 0.85:
        labels["zone"] = rng.choice(["z1", "z2", "z3"])
    if rng.random() < 0.8:
        labels["region"] = rng.choice(["r1", "r2"])
    return node(f"n{i}", labels)


def random_labels(rng: random.Random) -> dict:
    labels = {}
    if rng.random() < 0.8:
        labels["app"] = rng.choice(["web", "db", "cache"])
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(["fe", "be"])
    return labels


def random_selector(rng: random.Random) -> dict | None:
    choice = rng.randrange(8)
    if choice == 0:
        return selector(app=rng.choice(["web", "db", "cache"]))
    if choice == 1:
        return selector(In("app", *rng.sample(["web", "db", "cache"], 2)))
    if choice == 2:
        return selector(NotIn("app", rng.choice(["web", "db"])))
    if choice == 3:
        return selector(Exists("tier"))
    if choice == 4:
        return selector(expr("tier", "DoesNotExist"), In("app", "web", "db"))
    if choice == 5:
        return selector(tier=rng.choice(["fe", "be"]), app=rng.choice(["web", "db"]))
    if choice == 6:
        return {}
    return None


def random_term(rng: random.Random) -> dict:
    t: dict[str, Any] = {"topologyKey": rng.choice(TOPOLOGY_KEYS)}
    sel = random_selector(rng)
    if sel is not None:
        t["labelSelector"] = sel
    mode = rng.randrange(5)
    if mode == 1:
        t["namespaces"] = rng.sample(NS_NAMES, rng.randint(1, 2))
    elif mode == 2:
        t["namespaceSelector"] = selector(team=rng.choice(["a", "b"]))
    elif mode == 3:
        t["namespaceSelector"] = {}
    elif mode == 4:
        t["namespaces"] = [rng.choice(NS_NAMES)]
        t["namespaceSelector"] = selector(team="b")
    return t


def random_affinity(rng: random.Random, p_each: float = 0.3) -> dict | None:
    def terms(count: int) -> list:
        return [random_term(rng) for _ in range(count)]

    def wterms(count: int) -> list:
        return [weighted(rng.randint(1, 100), random_term(rng)) for _ in range(count)]

    aff = affinity(
        required=terms(rng.randint(1, 2)) if rng.random() < p_each else None,
        anti=terms(rng.randint(1, 2)) if rng.random() < p_each else None,
        preferred=wterms(rng.randint(1, 2)) if rng.random() < p_each else None,
        preferred_anti=wterms(rng.randint(1, 2)) if rng.random() < p_each else None)
    return aff or None


def random_pod(rng: random.Random, name: str, node_name: str | None, p_affinity: float = 0.25) -> dict:
    aff = random_affinity(rng) if rng.random() < p_affinity else None
    return pod(name, node=node_name, ns=rng.choice(NS_NAMES), labels=random_labels(rng), aff=aff,
               terminating=rng.random() < 0.05)


def random_cluster(rng: random.Random, n_nodes: int = 12, n_pods: int = 40) -> tuple[NodeTable, dict[str, NodeInfo], list[dict]]:
    nodes = [random_node(rng, i) for i in range(n_nodes)]
    pods = [random_pod(rng, f"e{j}", f"n{rng.randrange(n_nodes)}") for j in range(n_pods)]
    table, infos = cluster(nodes, pods)
    return table, infos, pods


def _vectorised(table: NodeTable, target: PodInfo, args: InterPodAffinityArgs | None = None,
                batch: NodeBatch | None = None) -> tuple[Any, Any, CycleState]:
    pl = plugin(args, RANDOM_NAMESPACES)
    state = CycleState()
    _, status = pl.pre_filter(state, target, table.all_rows())
    filtered = SKIP if status is not None else filter_all(pl, state, target, table.all_rows())
    batch = batch or table.all_rows()
    score_state = CycleState()
    s = pl.pre_score(score_state, target, batch)
    if s is not None:
        scores: Any = SKIP
    else:
        raw = pl.score_nodes(score_state, target, batch)
        out = pl.normalize_scores(score_state, target, batch, raw.copy())
        scores = (list(raw), list(raw if out is None else out))
    return filtered, scores, state


def _reference(infos: dict[str, NodeInfo], table: NodeTable, target: PodInfo, args: InterPodAffinityArgs | None = None,
               batch: NodeBatch | None = None) -> tuple[Any, Any, RefIPA]:
    args = args or InterPodAffinityArgs()
    ordered = [table.infos[r] for r in range(table.n)]
    ref = RefIPA(target, ordered, RANDOM_NAMESPACES["Namespace"], args.hard_pod_affinity_weight,
                 args.ignore_preferred_terms_of_existing_pods)
    filtered = [ref.filter(info.labels) for info in ordered] if ref.pre_filter() else SKIP
    score_ref = RefIPA(target, ordered, RANDOM_NAMESPACES["Namespace"], args.hard_pod_affinity_weight,
                       args.ignore_preferred_terms_of_existing_pods)
    batch = batch or table.all_rows()
    topo = score_ref.pre_score() if len(batch) else None
    if topo is None:
        scores: Any = SKIP
    else:
        raw = [RefIPA.score(topo, info.labels) for info in batch.infos()]
        scores = (raw, RefIPA.normalize(raw))
    return filtered, scores, ref


@pytest.mark.parametrize("seed", range(25))
def test_vectorised_matches_reference_on_random_clusters(seed: int) -> None:
    rng = random.Random(seed)
    table, infos, _ = random_cluster(rng)
    for k in range(6):
        target = PodInfo(random_pod(rng, f"in{k}", None, p_affinity=0.9))
        args = InterPodAffinityArgs(hard_pod_affinity_weight=rng.choice([0, 1, 7]),
                                    ignore_preferred_terms_of_existing_pods=rng.random() < 0.3)
        rows = np.array(sorted(rng.sample(range(table.n), rng.randint(1, table.n))), dtype=np.int64)
        batch = table.batch(rows)
        got_filter, got_scores, state = _vectorised(table, target, args, batch)
        want_filter, want_scores, ref = _reference(infos, table, target, args, batch)
        assert got_filter == want_filter
        assert got_scores == want_scores
        if got_filter != SKIP:
            existing, aff, anti = _all_pairs(state)
            assert (existing, aff, anti) == (dict(ref.existing), dict(ref.affinity), dict(ref.anti))


def replica(shape: dict, name: str, node_name: str | None = None) -> dict:
    """A pod of ``shape`` (same namespace, labels and spec), named ``name``, on ``node_name``."""
    replica = {**shape, "metadata": {**shape["metadata"], "name": name, "uid": name}, "spec": dict(shape["spec"])}
    if node_name is not None:
        replica["spec"]["nodeName"] = node_name
    return replica


def place_replicas(pl: Any, table: NodeTable, infos: dict[str, NodeInfo], shape: dict, rng: random.Random,
                   prefix: str, count: int = 8) -> tuple[int, int]:
    """Replicas of ``shape`` placed one by one on random nodes, as a batch's pods land; between two
    of them every row whose Filter verdict moved must be among ``filter_moved_rows``' rows (unless
    it answers that any row may). How many pairs were compared, and how many it narrowed down."""
    compared = narrowed = 0
    previous: tuple[Any, list] | None = None
    for k in range(count):
        incoming = PodInfo(replica(shape, f"{prefix}-{k}"))
        state = CycleState()
        _, status = pl.pre_filter(state, incoming, table.all_rows())
        current = None if status is not None else (pl.filter_basis(state), filter_all(pl, state, incoming, table.all_rows()))
        if previous is not None and current is not None:
            compared += 1
            moved = pl.filter_moved_rows(previous[0], current[0], table, table.n)
            if moved is not None:
                narrowed += 1
                changed = {row for row in range(table.n) if previous[1][row] != current[1][row]}
                assert changed <= set(moved.tolist())
        previous = current
        add_pod(table, infos, replica(shape, f"{prefix}-{k}", f"n{rng.randrange(table.n)}"))
    return compared, narrowed


def test_filter_moved_rows_covers_every_row_whose_verdict_a_placement_of_the_batch_moves() -> None:
    """Between two replicas of a batch the first lands, moving the counts of its node's domains
    only: every row whose Filter verdict moved is among ``filter_moved_rows``' rows (unless it says
    any row may, as when the first matching pod lands anywhere), and it narrows the rows down."""
    compared = narrowed = 0
    for seed in range(30):
        rng = random.Random(7000 + seed)
        table, infos, _ = random_cluster(rng)
        shape = random_pod(rng, "shape", None, p_affinity=0.9)
        pairs = place_replicas(plugin(None, RANDOM_NAMESPACES), table, infos, shape, rng, f"r{seed}")
        compared, narrowed = compared + pairs[0], narrowed + pairs[1]
    assert compared > 60 and narrowed > compared // 2


def test_filter_moved_rows_leaves_zones_that_hold_many_nodes_to_a_full_filter() -> None:
    """Narrowing pays where a domain is a node or a few: beyond ``limit`` rows it says any row may.
    (The first replica to land makes its anti-affinity count anywhere: any row may move then.)"""
    nodes = [node(f"n{i}", {"kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 2}"}) for i in range(12)]
    table, infos = cluster(nodes, [])
    shape = pod("shape", labels={"app": "web"}, aff=affinity(anti=[term("zone", label_selector=selector(app="web"))]))
    pl = plugin()
    bases = []
    for k in range(3):
        state = CycleState()
        pl.pre_filter(state, PodInfo(replica(shape, f"r{k}")), table.all_rows())
        bases.append(pl.filter_basis(state))
        add_pod(table, infos, replica(shape, f"r{k}", "n3"))
    assert pl.filter_moved_rows(bases[0], bases[1], table, 12) is None
    assert pl.filter_moved_rows(bases[1], bases[2], table, 4) is None
    assert pl.filter_moved_rows(bases[1], bases[2], table, 12).tolist() == [1, 3, 5, 7, 9, 11]


def test_filter_moved_rows_is_any_row_once_the_first_pod_matching_a_self_satisfied_affinity_lands() -> None:
    """A pod whose required affinity only it matches passes everywhere while no pod matches
    anywhere (one does, on a node without zone: it counts nowhere); once one lands in a zone, only
    that zone passes: rows of the other zone move, whose counts did not."""
    nodes = [node(f"n{i}", {"kubernetes.io/hostname": f"n{i}", "zone": f"z{i % 2}"}) for i in range(6)]
    nodes.append(node("n6", {"kubernetes.io/hostname": "n6"}))
    table, infos = cluster(nodes, [pod("elsewhere", node="n6", labels={"app": "web"})])
    shape = pod("shape", labels={"app": "web"}, aff=affinity(required=[term("zone", label_selector=selector(app="web"))]))
    pl = plugin()
    seen = []
    for k in range(2):
        state = CycleState()
        incoming = PodInfo(replica(shape, f"r{k}"))
        pl.pre_filter(state, incoming, table.all_rows())
        seen.append((pl.filter_basis(state), filter_all(pl, state, incoming, table.all_rows())))
        add_pod(table, infos, replica(shape, f"r{k}", "n1"))
    assert seen[0][1] == [None] * 6 + [AFF] and seen[1][1] == [AFF, None] * 3 + [AFF]
    assert pl.filter_moved_rows(seen[0][0], seen[1][0], table, 7) is None
    counted_nowhere = seen[1][0].clone()  # as counts fall back to zero once matching pods leave
    counted_nowhere.affinity["zone"].counts[:] = 0
    assert pl.filter_moved_rows(counted_nowhere, seen[1][0], table, 7) is None


@pytest.mark.parametrize("seed", range(15))
def test_scratch_table_after_add_and_remove_pod_matches_reference(seed: int) -> None:
    """What preemption does: remove victims / add nominated pods on a cloned NodeInfo with AddPod /
    RemovePod on a cloned state, then filter the node on a one-row scratch table."""
    rng = random.Random(1000 + seed)
    table, _, _ = random_cluster(rng)
    pl = plugin(None, RANDOM_NAMESPACES)
    ext = pl.pre_filter_extensions()
    for k in range(5):
        target = PodInfo(random_pod(rng, f"in{k}", None, p_affinity=0.9))
        state = CycleState()
        _, status = pl.pre_filter(state, target, table.all_rows())
        ordered = [table.infos[r] for r in range(table.n)]
        ref = RefIPA(target, ordered, RANDOM_NAMESPACES["Namespace"])
        if not ref.pre_filter():
            assert status is not None and status.code == Code.Skip
            continue
        assert status is None
        row = rng.randrange(table.n)
        modified = table.infos[row].clone()
        cloned = state.clone()
        victims = rng.sample(list(modified.pods.values()), min(len(modified.pods), rng.randint(0, 3)))
        for victim in victims:
            modified.remove_pod(victim.uid)
            assert ext.remove_pod(cloned, target, victim, modified) is None
            ref.update(victim, modified.labels, -1)
        for j in range(rng.randint(0, 2)):
            added = PodInfo(random_pod(rng, f"nom{k}-{j}", modified.name))
            modified.add_pod(added)
            assert ext.add_pod(cloned, target, added, modified) is None
            ref.update(added, modified.labels, 1)
        scratch = NodeTable.from_infos([modified])
        assert filter_all(pl, cloned, target, scratch.all_rows()) == [ref.filter(modified.labels)]
        assert filter_all(pl, cloned, target, table.all_rows()) == [ref.filter(i.labels) for i in ordered]
        existing, aff, anti = _all_pairs(cloned)
        assert (existing, aff, anti) == (dict(ref.existing), dict(ref.affinity), dict(ref.anti))
        # The original state is untouched by the clone's updates.
        again = RefIPA(target, ordered, RANDOM_NAMESPACES["Namespace"])
        again.pre_filter()
        assert filter_all(pl, state, target, table.all_rows()) == [again.filter(i.labels) for i in ordered]


@pytest.mark.parametrize("seed", range(8))
def test_incremental_table_updates_match_a_fresh_table(seed: int) -> None:
    """Pods added and removed, nodes relabelled and removed (rows moved): the incrementally kept
    index answers like one built from scratch."""
    rng = random.Random(2000 + seed)
    table, infos, pods = random_cluster(rng, n_nodes=14, n_pods=50)
    targets = [PodInfo(random_pod(rng, f"in{k}", None, p_affinity=0.9)) for k in range(4)]
    for t in targets:  # build views and caches before the updates
        _vectorised(table, t)
    live = {PodInfo(p).uid: p for p in pods if PodInfo(p).node_name in infos}
    for step in range(30):
        action = rng.random()
        if action < 0.4 and live:
            uid = rng.choice(sorted(live))
            pi = PodInfo(live.pop(uid))
            info = infos[pi.node_name]
            removed = info.remove_pod(uid)
            table.pod_removed(info, removed)
        elif action < 0.75:
            name = rng.choice(sorted(infos))
            p = random_pod(rng, f"new{seed}-{step}", name)
            live[PodInfo(p).uid] = p
            add_pod(table, infos, p)
        elif action < 0.9:
            name = rng.choice(sorted(infos))
            relabelled = random_node(rng, int(name[1:]))
            infos[name].set_node(relabelled)
            table.set_node(infos[name])
        elif len(infos) > 4:
            name = rng.choice(sorted(infos))
            for uid in [u for u, p in live.items() if p["spec"].get("nodeName") == name]:
                del live[uid]
            table.remove_node(name)
            del infos[name]
    fresh, _ = cluster([i.node for i in infos.values()], list(live.values()))
    for t in targets:
        got = _vectorised(table, t)[:2]
        want_fresh = _vectorised(fresh, t)[:2]
        # Row order differs between the two tables: compare per node name.
        assert _by_name(table, got) == _by_name(fresh, want_fresh)
        assert got == _reference(infos, table, t)[:2]


def _by_name(table: NodeTable, results: tuple[Any, Any]) -> tuple[Any, Any]:
    filtered, scores = results
    names = table.names[: table.n]
    f = filtered if filtered == SKIP else dict(zip(names, filtered))
    s = scores if scores == SKIP else (dict(zip(names, scores[0])), dict(zip(names, scores[1])))
    return f, s


def test_pod_index_evicts_least_recently_used_views_and_rebuilds_them() -> None:
    table, _ = cluster([node("a", {"zone": "z1"})], [pod(node="a", labels={"app": f"v{i % 3}"}) for i in range(9)])
    index = pod_index(table)
    from kubesched.api.selectors import parse_label_selector
    from kubesched.scheduler.plugins._pod_groups import Clause

    first = frozenset([Clause(None, parse_label_selector({"matchLabels": {"app": "v0"}}))])
    assert index.view(first, True).counts[0] == 3
    for i in range(MAX_VIEWS + 5):
        index.view(frozenset([Clause(frozenset([f"ns{i}"]), parse_label_selector({}))]), True)
    assert len(index.views) <= MAX_VIEWS
    assert index.view(first, True).counts[0] == 3


# ================================================================================================
# through the framework: nominated pods and preemption-style checks on scratch tables
# ================================================================================================

class _Informers:
    def __init__(self, objects: dict) -> None:
        self.objects = objects

    def store(self, kind: str) -> dict:
        return self.objects.get(kind, {})


def framework_for(table: NodeTable, objects: dict | None = None) -> Framework:
    profile = Profile()
    for point, names_ in (("queueSort", ["PrioritySort"]), ("bind", ["DefaultBinder"]),
                          ("preFilter", ["InterPodAffinity", "PodTopologySpread"]),
                          ("filter", ["InterPodAffinity", "PodTopologySpread"]),
                          ("preScore", ["InterPodAffinity", "PodTopologySpread"])):
        profile.plugins.points[point] = PluginSet([PluginRef(n) for n in names_])
    profile.plugins.points["score"] = PluginSet([PluginRef("InterPodAffinity", 2), PluginRef("PodTopologySpread", 2)])
    ctx = HandleContext(clock=ManualClock(), snapshot=lambda: table, informers=_Informers(objects or {}))
    return Framework(in_tree_registry(), profile, ctx)


def test_framework_runs_filters_on_a_node_with_victims_removed() -> None:
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    victim = pod("victim", node="a", labels={"app": "db"})
    table, infos = cluster(nodes, [victim, pod("other", node="b", labels={"app": "db"})])
    fw = framework_for(table)
    target = PodInfo(pod("in", aff=affinity(anti=[term("zone", In("app", "db"))])))
    state = CycleState()
    fw.run_pre_filter(state, target)
    status = fw.run_filters_on_node_info(state, target, infos["a"])
    assert status is not None and status.reasons == [ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH]
    assert status.plugin == "InterPodAffinity"
    modified = infos["a"].clone()
    removed = modified.remove_pod(PodInfo(victim).uid)
    cloned = state.clone()
    assert fw.run_pre_filter_extension_remove_pod(cloned, target, removed, modified) is None
    assert fw.run_filters_on_node_info(cloned, target, modified) is None
    # The original cycle state still sees the victim.
    assert fw.run_filters_on_node_info(state, target, infos["a"]) is not None


def test_framework_scores_with_normalisation_and_weight() -> None:
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    table, _ = cluster(nodes, [pod(node="a", labels={"app": "db"})])
    fw = framework_for(table)
    target = PodInfo(pod("in", aff=affinity(preferred=[weighted(3, term("zone", In("app", "db")))])))
    state = CycleState()
    fw.run_pre_filter(state, target)
    assert fw.run_pre_score(state, target, table.all_rows()) is None
    result = fw.run_score(state, target, table.all_rows(), keep_parts=True)
    parts = {name: (list(raw), list(norm)) for name, raw, norm, _ in result.plugins}
    assert parts["InterPodAffinity"] == ([3, 0], [100, 0])
    assert "PodTopologySpread" in state.skip_score_plugins or "PodTopologySpread" not in parts


def test_score_without_pre_score_state_raises() -> None:
    table, _ = cluster([node("a")], [])
    with pytest.raises(StatusError):
        plugin().score_nodes(CycleState(), PodInfo(pod()), table.all_rows())
