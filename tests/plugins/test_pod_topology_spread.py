"""PodTopologySpread: upstream's PreFilter / Filter / Score / hint cases (minDomains, node inclusion
policies, matchLabelKeys, default constraints from Services and controllers, List defaulting), and
the vectorised, incremental implementation checked against a per-node reference on random
clusters, on scratch tables after AddPod / RemovePod, and after incremental table updates."""

from __future__ import annotations

import copy
import math
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.client.informers import InformerFactory
from kubesched.scheduler.config.args import LIST_DEFAULTING, SYSTEM_DEFAULTING, PodTopologySpreadArgs
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins._topology import DomainCounts
from kubesched.scheduler.plugins.podtopologyspread.pod_topology_spread import (
    DO_NOT_SCHEDULE,
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    LABEL_HOSTNAME,
    PRE_FILTER_KEY,
    PRE_SCORE_KEY,
    SCHEDULE_ANYWAY,
    Constraint,
    PodTopologySpread,
    ServiceIndex,
    _scores_by_domain,
    _scores_by_node,
    _verdict_by_domain,
    _verdict_by_node,
    default_selector,
)
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import DO_NOT_SCHEDULE_EFFECTS, find_untolerated_taint
from tests.plugins.test_inter_pod_affinity import (
    SKIP,
    FakeHandle,
    add_pod,
    cluster,
    expr,
    filter_all,
    node,
    place_replicas,
    pod,
    replica,
    selector,
)

FOO = selector(expr("foo", "Exists"))
BAR = selector(expr("bar", "Exists"))
UNSCHEDULABLE_TAINT = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]
MISMATCH = (int(Code.Unschedulable), ERR_REASON_CONSTRAINTS_NOT_MATCH)
MISSING = (int(Code.UnschedulableAndUnresolvable), ERR_REASON_NODE_LABEL_NOT_MATCH)


def spread(max_skew: int, key: str, when: str = DO_NOT_SCHEDULE, sel: dict | None = None, min_domains: int | None = None,
           affinity_policy: str | None = None, taints_policy: str | None = None, match_label_keys: list | None = None) -> dict:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if sel is not None:
        c["labelSelector"] = copy.deepcopy(sel)  # admission merges matchLabelKeys into it in place
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity_policy is not None:
        c["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        c["nodeTaintsPolicy"] = taints_policy
    if match_label_keys is not None:
        c["matchLabelKeys"] = match_label_keys
    return c


def spod(name: str, *constraints: dict, labels: dict | None = None, **kw: Any) -> dict:
    extra: dict[str, Any] = {}
    if constraints:
        extra["topologySpreadConstraints"] = list(constraints)
    return pod(name, labels={"foo": ""} if labels is None else labels, **extra, **kw)


def zn(name: str, zone: str | None, **more: str) -> dict:
    labels = {"node": name, **more}
    if zone is not None:
        labels["zone"] = zone
    return node(name, labels)


def on(name: str, node_name: str, labels: dict | None = None, **kw: Any) -> dict:
    return pod(name, node=node_name, labels={"foo": ""} if labels is None else labels, **kw)


def plugin(args: PodTopologySpreadArgs | None = None, objects: dict | None = None, gates: dict | None = None) -> PodTopologySpread:
    if args is None:
        args = PodTopologySpreadArgs(defaulting_type=LIST_DEFAULTING)
    return PodTopologySpread(args, FakeHandle(objects or {}, FeatureGates(gates) if gates else None))


FOUR_NODES = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]


def run_filter(p: dict, nodes: list[dict], pods: list[dict], **kw: Any) -> Any:
    table, _ = cluster(nodes, pods)
    pl = plugin(**kw)
    state = CycleState()
    target = PodInfo(p)
    _, status = pl.pre_filter(state, target, table.all_rows())
    if status is not None:
        return SKIP if status.code == Code.Skip else (int(status.code), status.message())
    return dict(zip(table.names[: table.n], filter_all(pl, state, target, table.all_rows())))


def pre_filter_state(p: dict, nodes: list[dict], pods: list[dict], **kw: Any) -> Any:
    table, _ = cluster(nodes, pods)
    pl = plugin(**kw)
    state = CycleState()
    _, status = pl.pre_filter(state, PodInfo(p), table.all_rows())
    if status is not None:
        return SKIP if status.code == Code.Skip else status
    return state.read(PRE_FILTER_KEY)


def summary(s: Any) -> list[tuple[str, dict[str, int], int]]:
    """(topology key, domain -> matching pods, global minimum) per constraint."""
    return [(c.topology_key, s.domains[i].as_dict(), s.minimums[i]) for i, c in enumerate(s.constraints)]


# ================================================================================================
# PreFilter state (upstream TestPreFilterState)
# ================================================================================================

PRE_FILTER_CASES = [
    ("clean cluster with one spreadConstraint",
     spod("p", spread(5, "zone", sel=selector(foo="bar"))), FOUR_NODES, [],
     [("zone", {"zone1": 0, "zone2": 0}, 0)]),
    ("normal case with one spreadConstraint",
     spod("p", spread(1, "zone", sel=FOO)), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"), on("p-y2", "node-y")],
     [("zone", {"zone1": 3, "zone2": 2}, 2)]),
    ("a null label selector counts no pod",
     spod("p", spread(1, "zone")), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y")],
     [("zone", {"zone1": 0, "zone2": 0}, 0)]),
    ("an empty label selector counts no pod either",
     spod("p", spread(1, "zone", sel={})), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y")],
     [("zone", {"zone1": 0, "zone2": 0}, 0)]),
    ("one spreadConstraint on a 3-zone cluster, the empty zone is the minimum",
     spod("p", spread(1, "zone", sel=FOO)), [*FOUR_NODES, zn("node-o", "zone3"), zn("node-p", "zone3")],
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"), on("p-y2", "node-y")],
     [("zone", {"zone1": 3, "zone2": 2, "zone3": 0}, 0)]),
    ("pods of other namespaces don't count",
     spod("p", spread(1, "zone", sel=FOO)), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-a2", "node-a", ns="ns1"), on("p-b1", "node-b"), on("p-y1", "node-y", ns="ns2"),
      on("p-y2", "node-y")],
     [("zone", {"zone1": 2, "zone2": 1}, 1)]),
    ("two spreadConstraints",
     spod("p", spread(1, "zone", sel=FOO), spread(1, "node", sel=FOO)), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"), on("p-y2", "node-y"),
      on("p-y3", "node-y"), on("p-y4", "node-y")],
     [("zone", {"zone1": 3, "zone2": 4}, 3), ("node", {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}, 0)]),
    ("soft spreadConstraints are bypassed",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, "zone", sel=FOO),
          spread(1, "node", SCHEDULE_ANYWAY, FOO), spread(1, "node", sel=FOO)),
     [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"), on("p-y2", "node-y"),
      on("p-y3", "node-y"), on("p-y4", "node-y")],
     [("zone", {"zone1": 3, "zone2": 4}, 3), ("node", {"node-a": 2, "node-b": 1, "node-y": 4}, 1)]),
    ("different labelSelectors per constraint",
     spod("p", spread(1, "zone", sel=FOO), spread(1, "node", sel=BAR), labels={"foo": "", "bar": ""}),
     [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
     [on("p-a", "node-a"), on("p-b", "node-b", {"foo": "", "bar": ""}), on("p-y1", "node-y"), on("p-y2", "node-y", {"bar": ""})],
     [("zone", {"zone1": 2, "zone2": 1}, 1), ("node", {"node-a": 0, "node-b": 1, "node-y": 1}, 0)]),
    ("nodes missing a constraint's topology key are not domains of any constraint",
     spod("p", spread(1, "zone", sel=FOO), spread(1, "node", sel=FOO)),
     [zn("node-a", "zone1"), zn("node-b", None), zn("node-y", "zone2")],
     [on("p-a", "node-a"), on("p-b", "node-b"), on("p-y", "node-y")],
     [("zone", {"zone1": 1, "zone2": 1}, 1), ("node", {"node-a": 1, "node-y": 1}, 1)]),
    ("terminating pods don't count",
     spod("p", spread(1, "node", sel=FOO)), [zn("node-a", "zone1"), zn("node-b", "zone1")],
     [on("p-a", "node-a", terminating=True), on("p-b", "node-b")],
     [("node", {"node-a": 0, "node-b": 1}, 0)]),
    ("NodeAffinityPolicy Honor: nodes the pod's nodeSelector rejects are not domains",
     spod("p", spread(1, "node", sel=FOO), nodeSelector={"foo": ""}),
     [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""), zn("node-y", None)],
     [on("p-a", "node-a"), on("p-b", "node-b"), on("p-y", "node-y")],
     [("node", {"node-a": 1, "node-b": 1, "node-x": 0}, 0)]),
    ("NodeAffinityPolicy Ignore: every node is a domain",
     spod("p", spread(1, "node", sel=FOO, affinity_policy="Ignore"), nodeSelector={"foo": ""}),
     [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""), zn("node-y", None)],
     [on("p-a", "node-a"), on("p-b", "node-b"), on("p-y", "node-y")],
     [("node", {"node-a": 1, "node-b": 1, "node-x": 0, "node-y": 1}, 0)]),
    ("NodeTaintsPolicy Honor: tainted nodes the pod doesn't tolerate are not domains",
     spod("p", spread(1, "node", sel=FOO, taints_policy="Honor")),
     [zn("node-a", None), zn("node-b", None), node("node-y", {"node": "node-y"}, UNSCHEDULABLE_TAINT)],
     [on("p-a", "node-a"), on("p-y", "node-y")],
     [("node", {"node-a": 1, "node-b": 0}, 0)]),
    ("NodeTaintsPolicy Honor: tolerated taints keep the node a domain",
     spod("p", spread(1, "node", sel=FOO, taints_policy="Honor"),
          tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
     [zn("node-a", None), node("node-y", {"node": "node-y"}, UNSCHEDULABLE_TAINT)],
     [on("p-a", "node-a"), on("p-y", "node-y")],
     [("node", {"node-a": 1, "node-y": 1}, 1)]),
    ("matchLabelKeys narrow the selector to the pod's value of the key",
     spod("p", spread(1, "zone", sel=FOO, match_label_keys=["rev"]), labels={"foo": "", "rev": "2"}),
     FOUR_NODES, [on("p-a", "node-a", {"foo": "", "rev": "1"}), on("p-x", "node-x", {"foo": "", "rev": "2"})],
     [("zone", {"zone1": 0, "zone2": 1}, 0)]),
    ("matchLabelKeys the pod lacks leave the selector as it is",
     spod("p", spread(1, "zone", sel=FOO, match_label_keys=["rev"])),
     FOUR_NODES, [on("p-a", "node-a", {"foo": "", "rev": "1"}), on("p-x", "node-x", {"foo": "", "rev": "2"})],
     [("zone", {"zone1": 1, "zone2": 1}, 1)]),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "pods", "want"), PRE_FILTER_CASES, ids=[c[0] for c in PRE_FILTER_CASES])
def test_pre_filter_state(name: str, incoming: dict, nodes: list[dict], pods: list[dict], want: list) -> None:
    assert summary(pre_filter_state(incoming, nodes, pods)) == want


def test_match_label_keys_are_ignored_when_the_gate_is_off() -> None:
    incoming = spod("p", spread(1, "zone", sel=FOO, match_label_keys=["rev"]), labels={"foo": "", "rev": "2"})
    pods = [on("p-a", "node-a", {"foo": "", "rev": "1"}), on("p-x", "node-x", {"foo": "", "rev": "2"})]
    got = pre_filter_state(incoming, FOUR_NODES, pods, gates={"MatchLabelKeysInPodTopologySpread": False})
    assert summary(got) == [("zone", {"zone1": 1, "zone2": 1}, 1)]


def test_pod_without_hard_constraints_skips_pre_filter() -> None:
    assert pre_filter_state(spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO)), FOUR_NODES, []) == SKIP
    assert pre_filter_state(spod("p"), FOUR_NODES, []) == SKIP


def test_invalid_label_selector_is_an_error() -> None:
    incoming = spod("p", spread(1, "zone", sel=selector(expr("foo", "In", "{{bad}}"))))
    status = pre_filter_state(incoming, FOUR_NODES, [])
    assert status.code == Code.Error
    assert status.message().startswith("get constraints from pod: obtaining pod's hard topology spread constraints: "
                                       'values[0][foo]: Invalid value: "{{bad}}"')


# ================================================================================================
# Filter (upstream TestSingleConstraint / TestMultipleConstraints)
# ================================================================================================

OK = None
SINGLE_CASES = [
    ("no existing pods", spod("p", spread(1, "zone", sel=FOO)), FOUR_NODES, [],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("no existing pods, incoming pod doesn't match itself", spod("p", spread(1, "zone", sel=BAR)), FOUR_NODES, [],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("existing pods in a different namespace do not count", spod("p", spread(1, "zone", sel=FOO)), FOUR_NODES,
     [on("p-a1", "node-a", ns="ns1"), on("p-b1", "node-a", ns="ns2"), on("p-x1", "node-x"), on("p-y1", "node-y")],
     {"node-a": OK, "node-b": OK, "node-x": MISMATCH, "node-y": MISMATCH}),
    ("existing pods do not match a null selector", spod("p", spread(1, "zone")), FOUR_NODES,
     [on("p-x1", "node-x"), on("p-y1", "node-y")], {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("pods spread across zones as 3/3, all nodes fit", spod("p", spread(1, "zone", sel=FOO)), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"), on("p-y2", "node-y"),
      on("p-y3", "node-y")], {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("pods spread across zones as 1/2 due to absence of label 'zone' on node-b", spod("p", spread(1, "zone", sel=FOO)),
     [zn("node-a", "zone1"), node("node-b", {"zon": "zone1", "node": "node-b"}), zn("node-x", "zone2"), zn("node-y", "zone2")],
     [on("p-a1", "node-a"), on("p-b1", "node-b"), on("p-x1", "node-x"), on("p-y1", "node-y")],
     {"node-a": OK, "node-b": MISSING, "node-x": MISMATCH, "node-y": MISMATCH}),
    ("pod cannot be scheduled as all nodes don't have label 'rack'", spod("p", spread(1, "rack", sel=FOO)),
     [zn("node-a", "zone1"), zn("node-x", "zone2")], [], {"node-a": MISSING, "node-x": MISSING}),
    ("pods spread across nodes as 2/1/0/3, only node-x fits", spod("p", spread(1, "node", sel=FOO)), FOUR_NODES,
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"), on("p-y2", "node-y"),
      on("p-y3", "node-y")], {"node-a": MISMATCH, "node-b": MISMATCH, "node-x": OK, "node-y": MISMATCH}),
    ("pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit", spod("p", spread(2, "node", sel=FOO)),
     FOUR_NODES, [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"),
                  on("p-y2", "node-y"), on("p-y3", "node-y")],
     {"node-a": MISMATCH, "node-b": OK, "node-x": OK, "node-y": MISMATCH}),
    ("pods spread across nodes as 2/1/0/3, but pod doesn't match itself", spod("p", spread(1, "node", sel=FOO), labels={"bar": ""}),
     FOUR_NODES, [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"),
                  on("p-y2", "node-y"), on("p-y3", "node-y")],
     {"node-a": MISMATCH, "node-b": OK, "node-x": OK, "node-y": MISMATCH}),
    ("incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
     spod("p", spread(1, "node", sel=FOO), affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
         "nodeSelectorTerms": [{"matchExpressions": [expr("node", "In", "node-a", "node-y")]}]}}}),
     FOUR_NODES, [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-y1", "node-y"),
                  on("p-y2", "node-y"), on("p-y3", "node-y")],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": MISMATCH}),
    ("terminating Pods should be excluded", spod("p", spread(1, "node", sel=FOO)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
     [on("p-a", "node-a", terminating=True), on("p-b", "node-b")], {"node-a": OK, "node-b": MISMATCH}),
    ("incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
     spod("p", spread(1, "zone", sel=FOO), affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
         "nodeSelectorTerms": [{"matchExpressions": [expr("node", "NotIn", "node-b")]}]}}}),
     FOUR_NODES, [on("p-b1", "node-b"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": OK, "node-b": OK, "node-x": MISMATCH, "node-y": MISMATCH}),
    ("minDomains: 2/2/1 with maxSkew 2 and fewer domains than minDomains, only the third node fits",
     spod("p", spread(2, "node", sel=FOO, min_domains=4)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"})],
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-b2", "node-b"), on("p-c1", "node-c")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-c": OK}),
    ("minDomains: 2/2/1 with maxSkew 2 and more domains than minDomains, all nodes fit",
     spod("p", spread(2, "node", sel=FOO, min_domains=2)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"})],
     [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-b2", "node-b"), on("p-c1", "node-c")],
     {"node-a": OK, "node-b": OK, "node-c": OK}),
    ("minDomains: zones as 2/1, maxSkew 2, fewer domains than minDomains, the zone2 nodes fit",
     spod("p", spread(2, "zone", sel=FOO, min_domains=3)), FOUR_NODES,
     [on("p-b1", "node-a"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-x": OK, "node-y": OK}),
    ("minDomains: zones as 2/1, maxSkew 2, more domains than minDomains, all nodes fit",
     spod("p", spread(2, "zone", sel=FOO, min_domains=1)), FOUR_NODES,
     [on("p-b1", "node-a"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}),
    ("NodeAffinityPolicy honored with labelSelectors", spod("p", spread(1, "node", sel=FOO), nodeSelector={"foo": ""}),
     [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""), zn("node-y", None)],
     [on("p-b1", "node-a"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-x": OK, "node-y": OK}),
    ("NodeAffinityPolicy ignored with labelSelectors",
     spod("p", spread(1, "node", sel=FOO, affinity_policy="Ignore"), nodeSelector={"foo": ""}),
     [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""), zn("node-y", None)],
     [on("p-b1", "node-a"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-x": OK, "node-y": MISMATCH}),
    ("NodeTaintsPolicy honored", spod("p", spread(1, "node", sel=FOO, taints_policy="Honor")),
     [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""),
      node("node-y", {"node": "node-y"}, UNSCHEDULABLE_TAINT)],
     [on("p-b1", "node-a"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-x": OK, "node-y": OK}),
    ("NodeTaintsPolicy ignored", spod("p", spread(1, "node", sel=FOO)),
     [zn("node-a", None, foo=""), zn("node-b", None, foo=""), zn("node-x", None, foo=""),
      node("node-y", {"node": "node-y"}, UNSCHEDULABLE_TAINT)],
     [on("p-b1", "node-a"), on("p-b2", "node-b"), on("p-y1", "node-y")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-x": OK, "node-y": MISMATCH}),
    ("two constraints: a node must satisfy both, missing labels are reported per constraint order",
     spod("p", spread(1, "zone", sel=FOO), spread(1, "node", sel=FOO)),
     [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), node("node-y", {"zone": "zone1"})],
     [on("p-a1", "node-a"), on("p-x1", "node-x"), on("p-x2", "node-x")],
     {"node-a": MISMATCH, "node-b": OK, "node-x": MISMATCH, "node-y": MISSING}),
    ("two constraints: the first failing constraint decides the status",
     spod("p", spread(1, "zone", sel=FOO), spread(1, "rack", sel=FOO)),
     [node("node-a", {"zone": "zone1", "rack": "r1"}), node("node-b", {"zone": "zone1"}), node("node-c", {"zone": "zone2", "rack": "r2"})],
     [on("p-a1", "node-a"), on("p-a2", "node-a")],
     {"node-a": MISMATCH, "node-b": MISMATCH, "node-c": OK}),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "pods", "want"), SINGLE_CASES, ids=[c[0] for c in SINGLE_CASES])
def test_filter(name: str, incoming: dict, nodes: list[dict], pods: list[dict], want: dict) -> None:
    assert run_filter(incoming, nodes, pods) == want


def test_filter_without_pre_filter_state_is_an_error() -> None:
    table, _ = cluster(FOUR_NODES, [])
    verdict = plugin().filter_nodes(CycleState(), PodInfo(spod("p")), table.all_rows())
    assert verdict.status_at(0).code == Code.Error
    assert verdict.status_at(0).message() == 'reading "PreFilterPodTopologySpread" from cycleState: not found'


# ================================================================================================
# AddPod / RemovePod (upstream TestPreFilterStateAddPod / RemovePod)
# ================================================================================================

def _add_remove(incoming: dict, nodes: list[dict], pods: list[dict], node_name: str, other: dict, delta: int) -> Any:
    table, infos = cluster(nodes, pods)
    pl = plugin()
    state = CycleState()
    pl.pre_filter(state, PodInfo(incoming), table.all_rows())
    ext = pl.pre_filter_extensions()
    info = infos[node_name]
    if delta > 0:
        ext.add_pod(state, PodInfo(incoming), PodInfo(other), info)
    else:
        ext.remove_pod(state, PodInfo(incoming), PodInfo(other), info)
    return summary(state.read(PRE_FILTER_KEY))


def test_add_pod_updates_counts_and_minimum() -> None:
    got = _add_remove(spod("p", spread(1, "node", sel=FOO)), [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
                      [on("p-a1", "node-a")], "node-b", on("p-b1", "node-b"), 1)
    assert got == [("node", {"node-a": 1, "node-b": 1}, 1)]


def test_add_pod_of_another_namespace_changes_nothing() -> None:
    got = _add_remove(spod("p", spread(1, "node", sel=FOO)), [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
                      [on("p-a1", "node-a")], "node-b", on("p-b1", "node-b", ns="ns1"), 1)
    assert got == [("node", {"node-a": 1, "node-b": 0}, 0)]


def test_add_pod_to_a_node_missing_a_topology_key_changes_nothing() -> None:
    got = _add_remove(spod("p", spread(1, "zone", sel=FOO), spread(1, "node", sel=FOO)),
                      [zn("node-a", "zone1"), zn("node-b", None)], [], "node-b", on("p-b1", "node-b"), 1)
    assert got == [("zone", {"zone1": 0}, 0), ("node", {"node-a": 0}, 0)]


def test_add_pod_with_node_affinity_policy_honor_skips_nodes_the_pod_cannot_use() -> None:
    incoming = spod("p", spread(1, "zone", sel=FOO), nodeSelector={"foo": ""})
    nodes = [zn("node-a", "zone1", foo="bar"), zn("node-b", "zone2", foo="")]
    assert _add_remove(incoming, nodes, [], "node-a", on("p-a1", "node-a"), 1) == [("zone", {"zone2": 0}, 0)]
    assert _add_remove(incoming, nodes, [], "node-b", on("p-b1", "node-b"), 1) == [("zone", {"zone2": 1}, 1)]


def test_remove_pod_updates_counts_and_the_exact_minimum() -> None:
    nodes = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone3")]
    pods = [on("p-a1", "node-a"), on("p-a2", "node-a"), on("p-x1", "node-x"), on("p-x2", "node-x"), on("p-y1", "node-y"),
            on("p-y2", "node-y")]
    got = _add_remove(spod("p", spread(1, "zone", sel=FOO)), nodes, pods, "node-a", pods[0], -1)
    assert got == [("zone", {"zone1": 1, "zone2": 2, "zone3": 2}, 1)]


def test_repeated_adds_keep_the_exact_minimum() -> None:
    """Upstream's two-entry critical paths can miss a third domain at the minimum; we don't."""
    nodes = [zn("node-a", "zone1"), zn("node-b", "zone2"), zn("node-c", "zone3")]
    pods = [on("p-a", "node-a"), on("p-b", "node-b"), on("p-c", "node-c")]
    table, infos = cluster(nodes, pods)
    pl = plugin()
    state = CycleState()
    incoming = PodInfo(spod("p", spread(1, "zone", sel=FOO)))
    pl.pre_filter(state, incoming, table.all_rows())
    ext = pl.pre_filter_extensions()
    for name in ("node-a", "node-b"):
        ext.add_pod(state, incoming, PodInfo(on(f"n-{name}", name)), infos[name])
    assert summary(state.read(PRE_FILTER_KEY)) == [("zone", {"zone1": 2, "zone2": 2, "zone3": 1}, 1)]


# ================================================================================================
# Score (upstream TestPodTopologySpreadScore)
# ================================================================================================

def hn(name: str, **more: str) -> dict:
    return node(name, {LABEL_HOSTNAME: name, **more})


def hz(name: str, zone: str) -> dict:
    return node(name, {LABEL_HOSTNAME: name, "zone": zone})


def run_score(incoming: dict, nodes: list[dict], failed: list[dict], pods: list[dict], objects: dict | None = None,
              args: PodTopologySpreadArgs | None = None, gates: dict | None = None) -> Any:
    table, _ = cluster([*nodes, *failed], pods)
    pl = plugin(args or PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), objects, gates)
    batch = table.batch(np.array([table.row_of[n["metadata"]["name"]] for n in nodes], dtype=np.int64))
    state = CycleState()
    target = PodInfo(incoming)
    status = pl.pre_score(state, target, batch)
    if status is not None:
        return SKIP if status.code == Code.Skip else (int(status.code), status.message())
    raw = pl.score_nodes(state, target, batch)
    out = pl.normalize_scores(state, target, batch, raw.copy())
    return dict(zip(batch.names(), (int(x) for x in (raw if out is None else out))))


def many(node_name: str, count: int, prefix: str = "p", labels: dict | None = None) -> list[dict]:
    return [on(f"{prefix}-{node_name}-{i}", node_name, labels) for i in range(count)]


HOST = LABEL_HOSTNAME
SCORE_CASES = [
    ("one constraint on node, no existing pods", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b")], [], [], {}, {"node-a": 100, "node-b": 100}),
    ("one constraint on node, only one node is candidate", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a")], [hn("node-b")], [*many("node-a", 2), *many("node-b", 1)], {}, {"node-a": 100}),
    ("one constraint on node, all nodes have the same number of matching pods", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b")], [], [*many("node-a", 1), *many("node-b", 1)], {}, {"node-a": 100, "node-b": 100}),
    ("one constraint on node, all 4 nodes are candidates", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")], [],
     [*many("node-a", 2), *many("node-b", 1), *many("node-d", 3)], {},
     {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
    ("one constraint on node, null selector", spod("p", spread(1, HOST, SCHEDULE_ANYWAY)),
     [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")], [],
     [*many("node-a", 2), *many("node-b", 1), *many("node-d", 3)], {},
     {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=2", spod("p", spread(2, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")], [],
     [*many("node-a", 2), *many("node-b", 1), *many("node-d", 3)], {},
     {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
    ("one constraint on node, all 4 nodes are candidates, maxSkew=3", spod("p", spread(3, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")], [],
     [*many("node-a", 4), *many("node-b", 3), *many("node-c", 2), *many("node-d", 1)], {},
     {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ("system defaulting, nodes don't have zone, pods match service", spod("p"),
     [hn("node-a"), hn("node-b"), hn("node-c"), hn("node-d")], [],
     [*many("node-a", 4), *many("node-b", 3), *many("node-c", 2), *many("node-d", 1)],
     {"Service": {"default/svc": {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"selector": {"foo": ""}}}}},
     {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b"), hn("node-x")], [hn("node-y")],
     [*many("node-a", 4), *many("node-b", 2), *many("node-x", 1), *many("node-y", 3)], {},
     {"node-a": 33, "node-b": 83, "node-x": 100}),
    ("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
     spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), node("node-b", {"n": "node-b"}), hn("node-x")], [hn("node-y")],
     [*many("node-a", 4), *many("node-b", 2), *many("node-x", 1), *many("node-y", 3)], {},
     {"node-a": 16, "node-b": 0, "node-x": 100}),
    ("one constraint on zone, 3 out of 4 nodes are candidates", spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO)),
     [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")], [hz("node-y", "zone2")],
     [*many("node-a", 4), *many("node-b", 2), *many("node-x", 1), *many("node-y", 3)], {},
     {"node-a": 75, "node-b": 75, "node-x": 100}),
    ("two Constraints on zone and node, 2 out of 4 nodes are candidates",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hz("node-a", "zone1"), hz("node-x", "zone2")], [hz("node-b", "zone1"), hz("node-y", "zone2")],
     [*many("node-a", 2), *many("node-b", 1), *many("node-x", 2), *many("node-y", 4)], {},
     {"node-a": 100, "node-x": 63}),
    ("two Constraints on zone and node, with different labelSelectors",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, HOST, SCHEDULE_ANYWAY, BAR), labels={"foo": "", "bar": ""}),
     [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2"), hz("node-y", "zone2")], [],
     [on("p-a1", "node-a"), on("p-b1", "node-b", {"foo": "", "bar": ""}), on("p-y1", "node-y"), on("p-y2", "node-y", {"bar": ""})], {},
     {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}),
    ("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, HOST, SCHEDULE_ANYWAY, BAR), labels={"foo": "", "bar": ""}),
     [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2"), hz("node-y", "zone2")], [],
     [on("p-b1", "node-b", {"bar": ""}), on("p-x1", "node-x"), on("p-y1", "node-y", {"foo": "", "bar": ""})], {},
     {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}),
    ("two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, HOST, SCHEDULE_ANYWAY, BAR), labels={"foo": "", "bar": ""}),
     [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")], [hz("node-y", "zone2")],
     [on("p-a1", "node-a"), on("p-b1", "node-b", {"foo": "", "bar": ""}), on("p-y1", "node-y"), on("p-y2", "node-y", {"bar": ""})], {},
     {"node-a": 50, "node-b": 25, "node-x": 100}),
    ("existing pods in a different namespace do not count", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b")], [],
     [on("p-a1", "node-a", ns="ns1"), on("p-a2", "node-a"), on("p-b1", "node-b"), on("p-b2", "node-b")], {},
     {"node-a": 100, "node-b": 33}),
    ("terminating Pods should be excluded", spod("p", spread(1, HOST, SCHEDULE_ANYWAY, FOO)),
     [hn("node-a"), hn("node-b")], [], [on("p-a", "node-a", terminating=True), on("p-b", "node-b")], {},
     {"node-a": 100, "node-b": 0}),
    ("minDomains has no effect when ScheduleAnyway", spod("p", spread(2, "node", SCHEDULE_ANYWAY, FOO, min_domains=10)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"})], [],
     [*many("node-a", 2), *many("node-b", 2), *many("node-c", 1)], {}, {"node-a": 75, "node-b": 75, "node-c": 100}),
    ("NodeAffinityPolicy honored with labelSelectors", spod("p", spread(1, "node", SCHEDULE_ANYWAY, FOO), nodeSelector={"foo": ""}),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}), node("node-c", {"node": "node-c"})],
     [], [*many("node-a", 2), *many("node-b", 1), *many("node-c", 1)], {}, {"node-a": 0, "node-b": 33, "node-c": 100}),
    ("NodeAffinityPolicy ignored with labelSelectors",
     spod("p", spread(1, "node", SCHEDULE_ANYWAY, FOO, affinity_policy="Ignore"), nodeSelector={"foo": ""}),
     [node("node-a", {"node": "node-a", "foo": ""}), node("node-b", {"node": "node-b", "foo": ""}), node("node-c", {"node": "node-c"})],
     [], [*many("node-a", 2), *many("node-b", 1), *many("node-c", 1)], {}, {"node-a": 66, "node-b": 100, "node-c": 100}),
    ("NodeTaintsPolicy honored", spod("p", spread(1, "node", SCHEDULE_ANYWAY, FOO, taints_policy="Honor")),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"}, UNSCHEDULABLE_TAINT)],
     [], [*many("node-a", 2), *many("node-b", 1), *many("node-c", 1)], {}, {"node-a": 0, "node-b": 33, "node-c": 100}),
    ("NodeTaintsPolicy ignored", spod("p", spread(1, "node", SCHEDULE_ANYWAY, FOO)),
     [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"}), node("node-c", {"node": "node-c"}, UNSCHEDULABLE_TAINT)],
     [], [*many("node-a", 2), *many("node-b", 1), *many("node-c", 1)], {}, {"node-a": 66, "node-b": 100, "node-c": 100}),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, {}, match_label_keys=["foo"]),
          spread(1, HOST, SCHEDULE_ANYWAY, {}, match_label_keys=["bar"]), labels={"foo": "", "bar": ""}),
     [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-c", "zone2"), hz("node-d", "zone2")], [],
     [on("p-a1", "node-a"), on("p-b1", "node-b", {"foo": "", "bar": ""}), on("p-y1", "node-c"), on("p-y2", "node-c", {"bar": ""})], {},
     {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}),
    ("matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
     spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, HOST, SCHEDULE_ANYWAY, BAR, match_label_keys=["baz"]),
          labels={"foo": "", "bar": "", "baz": ""}),
     [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-c", "zone2"), hz("node-d", "zone2")], [],
     [on("p-a1", "node-a"), on("p-b1", "node-b", {"foo": "", "bar": "", "baz": ""}), on("p-c1", "node-c"),
      on("p-c2", "node-c", {"bar": ""}), on("p-d3", "node-c", {"bar": "", "baz": ""})], {},
     {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}),
]


@pytest.mark.parametrize(("name", "incoming", "nodes", "failed", "pods", "objects", "want"), SCORE_CASES,
                         ids=[c[0] for c in SCORE_CASES])
def test_score(name: str, incoming: dict, nodes: list[dict], failed: list[dict], pods: list[dict], objects: dict, want: dict) -> None:
    assert run_score(incoming, nodes, failed, pods, objects) == want


def test_match_label_keys_ignored_in_scoring_when_the_gate_is_off() -> None:
    incoming = spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO, match_label_keys=["baz"]),
                    spread(1, HOST, SCHEDULE_ANYWAY, BAR, match_label_keys=["baz"]), labels={"foo": "", "bar": "", "baz": ""})
    nodes = [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-c", "zone2"), hz("node-d", "zone2")]
    pods = [on("p-a1", "node-a"), on("p-b1", "node-b", {"foo": "", "bar": ""}), on("p-y1", "node-c"), on("p-y2", "node-c", {"bar": ""})]
    got = run_score(incoming, nodes, [], pods, gates={"MatchLabelKeysInPodTopologySpread": False})
    assert got == {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100}


def test_pod_without_soft_constraints_skips_pre_score() -> None:
    assert run_score(spod("p", spread(1, "zone", sel=FOO)), [hz("node-a", "zone1")], [], []) == SKIP
    assert run_score(spod("p"), [hz("node-a", "zone1")], [], []) == SKIP  # system defaults, no Service


def test_score_weights_are_stored_per_constraint() -> None:
    table, _ = cluster([hz("a", "z1"), hz("b", "z2"), hz("c", "z2")], [])
    pl = plugin()
    state = CycleState()
    pl.pre_score(state, PodInfo(spod("p", spread(1, "zone", SCHEDULE_ANYWAY, FOO), spread(1, HOST, SCHEDULE_ANYWAY, FOO))),
                 table.all_rows())
    s = state.read(PRE_SCORE_KEY)
    assert s.weights == [math.log(2 + 2), math.log(3 + 2)]


# ================================================================================================
# default constraints (System from Services / controllers, List)
# ================================================================================================

def owned(name: str, kind: str, owner: str, api_version: str = "apps/v1", **kw: Any) -> dict:
    p = spod(name, **kw)
    p["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner, "controller": True}]
    return p


RS = {"ReplicaSet": {"default/rs": {"metadata": {"name": "rs", "namespace": "default"},
                                    "spec": {"selector": {"matchLabels": {"foo": ""}}}}}}


def test_default_selector_from_a_replica_set_owner() -> None:
    pl = plugin(PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), RS)
    constraints = pl.constraints(PodInfo(owned("p", "ReplicaSet", "rs")), SCHEDULE_ANYWAY)
    assert [(c.topology_key, c.max_skew) for c in constraints] == [(LABEL_HOSTNAME, 3), ("topology.kubernetes.io/zone", 5)]
    assert all(c.selector.matches({"foo": ""}) and not c.selector.matches({}) for c in constraints)
    assert pl.constraints(PodInfo(owned("p", "ReplicaSet", "rs")), DO_NOT_SCHEDULE) == []


def test_default_selector_merges_services_and_controller() -> None:
    objects = {**RS, "Service": {
        "default/a": {"metadata": {"name": "a", "namespace": "default"}, "spec": {"selector": {"foo": ""}}},
        "default/b": {"metadata": {"name": "b", "namespace": "default"}, "spec": {"selector": {"app": "x"}}},
        "other/c": {"metadata": {"name": "c", "namespace": "other"}, "spec": {"selector": {"foo": ""}}},
        "default/nil": {"metadata": {"name": "nil", "namespace": "default"}, "spec": {}}}}
    pl = plugin(PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), objects)
    (c, _) = pl.constraints(PodInfo(owned("p", "ReplicaSet", "rs", labels={"foo": ""})), SCHEDULE_ANYWAY)
    assert sorted(r.key for r in c.selector.requirements) == ["foo", "foo"]


def test_default_selector_from_replication_controller_and_stateful_set() -> None:
    objects = {"ReplicationController": {"default/rc": {"metadata": {"name": "rc"}, "spec": {"selector": {"foo": ""}}}},
               "StatefulSet": {"default/ss": {"metadata": {"name": "ss"}, "spec": {"selector": {"matchExpressions": [expr("foo", "Exists")]}}}}}
    pl = plugin(PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), objects)
    for p in (owned("p", "ReplicationController", "rc", api_version="v1"), owned("p", "StatefulSet", "ss")):
        constraints = pl.constraints(PodInfo(p), SCHEDULE_ANYWAY)
        assert len(constraints) == 2 and constraints[0].selector.matches({"foo": ""})
    # Unknown owners and owners of another API group contribute nothing.
    assert pl.constraints(PodInfo(owned("p", "ReplicaSet", "rs", api_version="extensions/v1beta1")), SCHEDULE_ANYWAY) == []
    assert pl.constraints(PodInfo(owned("p", "Job", "j", api_version="batch/v1")), SCHEDULE_ANYWAY) == []


def test_list_defaulting_uses_the_configured_constraints() -> None:
    args = PodTopologySpreadArgs(defaulting_type=LIST_DEFAULTING, default_constraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DO_NOT_SCHEDULE}])
    incoming = owned("p", "ReplicaSet", "rs")
    nodes = [zn("node-a", "zone1"), zn("node-b", "zone2")]
    table, _ = cluster(nodes, [on("p-a1", "node-a"), on("p-a2", "node-a")])
    pl = plugin(args, RS)
    state = CycleState()
    assert pl.pre_filter(state, PodInfo(incoming), table.all_rows()) == (None, None)
    assert filter_all(pl, state, PodInfo(incoming), table.all_rows()) == [MISMATCH, None]
    # The same pod without a controller has no default constraints.
    assert run_filter(spod("p"), nodes, [], args=args, objects=RS) == SKIP


def test_system_defaulting_tolerates_nodes_without_zone_but_list_defaulting_does_not() -> None:
    nodes = [hn("node-a"), hz("node-b", "zone1")]
    objects = {**RS}
    args = PodTopologySpreadArgs(defaulting_type=LIST_DEFAULTING, default_constraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": SCHEDULE_ANYWAY},
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": SCHEDULE_ANYWAY}])
    pods = [on("p-b1", "node-b")]
    assert run_score(owned("p", "ReplicaSet", "rs"), nodes, [], pods, objects, args) == {"node-a": 0, "node-b": 100}
    # System defaults: node-a (no zone) is scored on hostname spreading alone, not ignored.
    system = run_score(owned("p", "ReplicaSet", "rs"), nodes, [], pods, objects)
    assert system == {"node-a": 100, "node-b": 66}


# ================================================================================================
# queueing hints and events
# ================================================================================================

Q, SKIPQ = QueueingHint.Queue, QueueingHint.QueueSkip
TARGET = spod("p", spread(1, "zone", sel=FOO), uid="target")
TARGET_HONOR = spod("p", spread(1, "zone", sel=FOO, taints_policy="Honor"))

POD_HINTS = [
    ("add a pod matching the selector", TARGET, None, on("x", "n"), Q),
    ("add a pod not matching the selector", TARGET, None, on("x", "n", {"bar": ""}), SKIPQ),
    ("add an unscheduled pod", TARGET, None, pod("x", labels={"foo": ""}), SKIPQ),
    ("add a pod of another namespace", TARGET, None, on("x", "n", ns="other"), SKIPQ),
    ("delete a pod matching the selector", TARGET, on("x", "n"), None, Q),
    ("delete a pod not matching the selector", TARGET, on("x", "n", {"bar": ""}), None, SKIPQ),
    ("label update making a pod match", TARGET, on("x", "n", {"bar": ""}), on("x", "n"), Q),
    ("label update keeping the match", TARGET, on("x", "n", {"foo": "", "a": "1"}), on("x", "n", {"foo": "", "a": "2"}), SKIPQ),
    ("update without label change", TARGET, on("x", "n"), on("x", "n"), SKIPQ),
    ("new toleration of the target pod with a NodeTaintsPolicy Honor constraint", TARGET_HONOR, TARGET_HONOR,
     {**TARGET_HONOR, "spec": {**TARGET_HONOR["spec"], "tolerations": [{"operator": "Exists"}]}}, Q),
    ("new toleration of the target pod without Honor constraints", TARGET, TARGET,
     {**TARGET, "spec": {**TARGET["spec"], "tolerations": [{"operator": "Exists"}]}}, SKIPQ),
]


@pytest.mark.parametrize(("name", "target", "old", "new", "want"), POD_HINTS, ids=[c[0] for c in POD_HINTS])
def test_is_schedulable_after_pod_change(name: str, target: dict, old: Any, new: Any, want: QueueingHint) -> None:
    assert plugin()._after_pod_change(target, old, new) == want


NODE_HINTS = [
    ("add a node with the topology key", None, zn("n", "zone1"), Q),
    ("add a node without the topology key", None, node("n", {"x": "y"}), SKIPQ),
    ("delete a node with the topology key", zn("n", "zone1"), None, Q),
    ("delete a node without the topology key", node("n", {"x": "y"}), None, SKIPQ),
    ("update a node to gain the topology key", node("n", {"x": "y"}), zn("n", "zone1"), Q),
    ("update a node to lose the topology key", zn("n", "zone1"), node("n", {"x": "y"}), Q),
    ("update the topology value", zn("n", "zone1"), zn("n", "zone2"), Q),
    ("update an unrelated label", zn("n", "zone1"), zn("n", "zone1", other="x"), SKIPQ),
    ("update the taints of a matching node", zn("n", "zone1"), node("n", {"zone": "zone1", "node": "n"}, UNSCHEDULABLE_TAINT), Q),
    ("update the taints of a node without the key", node("n", {"x": "y"}), node("n", {"x": "y"}, UNSCHEDULABLE_TAINT), SKIPQ),
]


@pytest.mark.parametrize(("name", "old", "new", "want"), NODE_HINTS, ids=[c[0] for c in NODE_HINTS])
def test_is_schedulable_after_node_change(name: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert plugin()._after_node_change(TARGET, old, new) == want


def test_events_to_register() -> None:
    events = [(e.event.resource, e.event.action) for e in plugin().events_to_register()]
    assert events == [
        (Resource.Pod, ActionType.Add | ActionType.UpdatePodLabel | ActionType.UpdatePodToleration | ActionType.Delete),
        (Resource.Node, ActionType.Add | ActionType.Delete | ActionType.UpdateNodeLabel | ActionType.UpdateNodeTaint),
    ]


def test_match_label_keys_merged_at_creation() -> None:
    from kubesched.apiserver.admission import apply_label_keys_to_selectors

    p = spod("p", spread(1, "zone", sel=FOO, match_label_keys=["rev"]), spread(1, "zone", match_label_keys=["rev"]),
             labels={"foo": "", "rev": "3"})
    apply_label_keys_to_selectors(p)
    c1, c2 = p["spec"]["topologySpreadConstraints"]
    assert c1["labelSelector"]["matchExpressions"][-1] == {"key": "rev", "operator": "In", "values": ["3"]}
    assert "labelSelector" not in c2
    q = spod("q", spread(1, "zone", sel=FOO, match_label_keys=["rev"]), labels={"foo": "", "rev": "3"})
    apply_label_keys_to_selectors(q, {"MatchLabelKeysInPodTopologySpreadSelectorMerge": False})
    assert q["spec"]["topologySpreadConstraints"][0]["labelSelector"] == FOO
    # Merged twice (API server, then scheduler): same counts.
    nodes = FOUR_NODES
    pods = [on("p-a", "node-a", {"foo": "", "rev": "1"}), on("p-x", "node-x", {"foo": "", "rev": "3"})]
    assert summary(pre_filter_state(p, nodes, pods))[0] == ("zone", {"zone1": 0, "zone2": 1}, 0)


# ================================================================================================
# reference implementation (upstream's per-node algorithm) and random clusters
# ================================================================================================

def _count(info: NodeInfo, c: Constraint, ns: str) -> int:
    if c.selector.empty:
        return 0
    return sum(1 for p in info.pods.values()
               if p.deletion_timestamp is None and p.namespace == ns and c.selector.matches(p.labels))


def _included(c: Constraint, p: PodInfo, info: NodeInfo, comparison_operators: bool) -> bool:
    if c.node_affinity_policy == "Honor":
        if p.node_selector and not all(info.labels.get(k) == v for k, v in p.node_selector.items()):
            return False
        if p.required_node_affinity is not None and not p.required_node_affinity.matches(info.labels, info.name):
            return False
    if c.node_taints_policy != "Honor":
        return True
    return find_untolerated_taint(info.taints, p.tolerations, DO_NOT_SCHEDULE_EFFECTS, comparison_operators) is None


class RefPTS:
    def __init__(self, pl: PodTopologySpread, p: PodInfo, infos: list[NodeInfo]) -> None:
        self.pl = pl
        self.pod = p
        self.infos = infos

    # --- filtering ---
    def pre_filter(self) -> bool:
        self.constraints = self.pl.constraints(self.pod, DO_NOT_SCHEDULE)
        if not self.constraints:
            return False
        self.tp: list[dict[str, int]] = [{} for _ in self.constraints]
        for info in self.infos:
            if not all(c.topology_key in info.labels for c in self.constraints):
                continue
            for i, c in enumerate(self.constraints):
                if _included(c, self.pod, info, self.pl.comparison_operators):
                    v = info.labels[c.topology_key]
                    self.tp[i][v] = self.tp[i].get(v, 0) + _count(info, c, self.pod.namespace)
        return True

    def update(self, other: PodInfo, info: NodeInfo, delta: int) -> None:
        if other.namespace != self.pod.namespace or not all(c.topology_key in info.labels for c in self.constraints):
            return
        for i, c in enumerate(self.constraints):
            if c.selector.matches(other.labels) and _included(c, self.pod, info, self.pl.comparison_operators):
                v = info.labels[c.topology_key]
                self.tp[i][v] = self.tp[i].get(v, 0) + delta

    def filter(self, labels: dict) -> tuple[int, str] | None:
        for i, c in enumerate(self.constraints):
            if c.topology_key not in labels:
                return MISSING
            minimum = min(self.tp[i].values()) if self.tp[i] else 2**31 - 1
            if len(self.tp[i]) < c.min_domains:
                minimum = 0
            self_match = 1 if c.selector.matches(self.pod.labels) else 0
            if self.tp[i].get(labels[c.topology_key], 0) + self_match - minimum > c.max_skew:
                return MISMATCH
        return None

    # --- scoring ---
    def scores(self, filtered: list[NodeInfo]) -> Any:
        if not self.infos:
            return SKIP
        constraints = self.pl.constraints(self.pod, SCHEDULE_ANYWAY)
        require_all = bool(self.pod.spec.get("topologySpreadConstraints")) or not self.pl.system_defaulted
        if not constraints:
            return SKIP
        ignored = {i.name for i in filtered if require_all and not all(c.topology_key in i.labels for c in constraints)}
        tp: list[dict[str, int]] = [{} for _ in constraints]
        for info in filtered:
            if info.name in ignored:
                continue
            for i, c in enumerate(constraints):
                if c.topology_key != LABEL_HOSTNAME:
                    tp[i].setdefault(info.labels.get(c.topology_key, ""), 0)
        weights = [math.log((len(filtered) - len(ignored) if c.topology_key == LABEL_HOSTNAME else len(tp[i])) + 2)
                   for i, c in enumerate(constraints)]
        for info in self.infos:
            if require_all and not all(c.topology_key in info.labels for c in constraints):
                continue
            for i, c in enumerate(constraints):
                v = info.labels.get(c.topology_key, "")
                if _included(c, self.pod, info, self.pl.comparison_operators) and v in tp[i]:
                    tp[i][v] += _count(info, c, self.pod.namespace)
        raw = []
        for info in filtered:
            if info.name in ignored:
                raw.append(0)
                continue
            s = 0.0
            for i, c in enumerate(constraints):
                if c.topology_key in info.labels:
                    cnt = _count(info, c, self.pod.namespace) if c.topology_key == LABEL_HOSTNAME else tp[i][info.labels[c.topology_key]]
                    s += cnt * weights[i] + float(c.max_skew - 1)
            raw.append(math.floor(s + 0.5))
        valid = [r for info, r in zip(filtered, raw) if info.name not in ignored]
        low, high = (min(valid) if valid else 2**63 - 1), max([0, *valid])
        norm = []
        for info, r in zip(filtered, raw):
            if info.name in ignored:
                norm.append(0)
            elif high == 0:
                norm.append(100)
            else:
                norm.append(100 * (high + low - r) // high)
        return raw, norm


ZONES = ["z1", "z2", "z3", "z4"]


def random_pts_node(rng: random.Random, i: int) -> dict:
    labels = {LABEL_HOSTNAME: f"n{i}"}
    if rng.random() < 0.85:
        labels["zone"] = rng.choice(ZONES)
    if rng.random() < 0.7:
        labels["rack"] = rng.choice(["r1", "r2", "r3"])
    if rng.random() < 0.6:
        labels["topology.kubernetes.io/zone"] = rng.choice(["", "za", "zb"])
    if rng.random() < 0.3:
        labels["disk"] = "ssd"
    taints = UNSCHEDULABLE_TAINT if rng.random() < 0.15 else None
    return node(f"n{i}", labels, taints)


def random_pts_selector(rng: random.Random) -> dict | None:
    return rng.choice([selector(app="web"), selector(app="db"), selector(expr("app", "In", "web", "db")),
                       selector(expr("tier", "Exists")), {}, None, selector(app="web", tier="fe")])


def random_constraint(rng: random.Random, when: str | None = None) -> dict:
    return spread(rng.randint(1, 3), rng.choice(["zone", "rack", LABEL_HOSTNAME, "zone"]),
                  when or rng.choice([DO_NOT_SCHEDULE, SCHEDULE_ANYWAY]), random_pts_selector(rng),
                  min_domains=rng.choice([None, None, 2, 5]), affinity_policy=rng.choice([None, "Honor", "Ignore"]),
                  taints_policy=rng.choice([None, "Honor", "Ignore"]),
                  match_label_keys=rng.choice([None, None, ["tier"]]))


def random_pts_pod(rng: random.Random, name: str, node_name: str | None, constraints: int = 0) -> dict:
    labels = {}
    if rng.random() < 0.85:
        labels["app"] = rng.choice(["web", "db"])
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(["fe", "be"])
    spec: dict[str, Any] = {}
    if constraints:
        spec["topologySpreadConstraints"] = [random_constraint(rng) for _ in range(constraints)]
        if rng.random() < 0.3:
            spec["nodeSelector"] = {"disk": "ssd"}
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    return pod(name, node=node_name, ns=rng.choice(["default", "default", "other"]), labels=labels,
               terminating=rng.random() < 0.05, **spec)


def random_pts_cluster(rng: random.Random, n_nodes: int = 15, n_pods: int = 60) -> tuple[NodeTable, dict[str, NodeInfo], list[dict]]:
    nodes = [random_pts_node(rng, i) for i in range(n_nodes)]
    pods = [random_pts_pod(rng, f"e{j}", f"n{rng.randrange(n_nodes)}") for j in range(n_pods)]
    table, infos = cluster(nodes, pods)
    return table, infos, pods


def _vectorised(pl: PodTopologySpread, table: NodeTable, target: PodInfo, batch: NodeBatch) -> tuple[Any, Any, CycleState]:
    state = CycleState()
    _, status = pl.pre_filter(state, target, table.all_rows())
    filtered = SKIP if status is not None else filter_all(pl, state, target, table.all_rows())
    score_state = CycleState()
    if pl.pre_score(score_state, target, batch) is not None:
        return filtered, SKIP, state
    raw = pl.score_nodes(score_state, target, batch)
    out = pl.normalize_scores(score_state, target, batch, raw.copy())
    return filtered, ([int(x) for x in raw], [int(x) for x in (raw if out is None else out)]), state


def _reference(pl: PodTopologySpread, table: NodeTable, target: PodInfo, batch: NodeBatch) -> tuple[Any, Any, RefPTS]:
    ordered = [table.infos[r] for r in range(table.n)]
    ref = RefPTS(pl, target, ordered)
    filtered = [ref.filter(i.labels) for i in ordered] if ref.pre_filter() else SKIP
    return filtered, RefPTS(pl, target, ordered).scores(batch.infos()), ref


def _plugins_for(rng: random.Random) -> list[PodTopologySpread]:
    rs = {"ReplicaSet": {"default/rs": {"metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}}}
    return [plugin(PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), rs),
            plugin(PodTopologySpreadArgs(defaulting_type=LIST_DEFAULTING, default_constraints=[
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": DO_NOT_SCHEDULE},
                {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": SCHEDULE_ANYWAY}]), rs)]


def _random_target(rng: random.Random, name: str) -> PodInfo:
    if rng.random() < 0.2:
        p = random_pts_pod(rng, name, None)
        p["metadata"]["namespace"] = "default"
        p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}]
        return PodInfo(p)
    return PodInfo(random_pts_pod(rng, name, None, constraints=rng.randint(1, 3)))


@pytest.mark.parametrize("seed", range(30))
def test_vectorised_matches_reference_on_random_clusters(seed: int) -> None:
    rng = random.Random(seed)
    table, _, _ = random_pts_cluster(rng)
    for pl in _plugins_for(rng):
        for k in range(5):
            target = _random_target(rng, f"in{k}")
            rows = np.array(sorted(rng.sample(range(table.n), rng.randint(1, table.n))), dtype=np.int64)
            batch = table.batch(rows)
            got_f, got_s, state = _vectorised(pl, table, target, batch)
            want_f, want_s, ref = _reference(pl, table, target, batch)
            assert got_f == want_f
            assert got_s == want_s
            if got_f != SKIP:
                s = state.read(PRE_FILTER_KEY)
                assert [d.as_dict() for d in s.domains] == ref.tp


def _statuses_of(verdict: Any) -> Any:
    return None if verdict is None else (verdict.codes.tolist(), [(int(st.code), st.message()) for st in verdict.statuses])


@pytest.mark.parametrize("seed", range(20))
def test_one_constraint_is_decided_per_domain_exactly_as_per_node(seed: int) -> None:
    """A single constraint counted per domain is decided once per domain and read per node: the
    verdict (codes and statuses, in their order) and the scores equal the per-node computation."""
    rng = random.Random(1300 + seed)
    table, _, _ = random_pts_cluster(rng)
    pl = _plugins_for(rng)[0]
    for k in range(6):
        target = PodInfo(random_pts_pod(rng, f"in{k}", None, constraints=1))
        key = target.spec["topologySpreadConstraints"][0]["topologyKey"]
        batch = table.batch(np.array(sorted(rng.sample(range(table.n), rng.randint(1, table.n))), dtype=np.int64))
        state = CycleState()
        if pl.pre_filter(state, target, table.all_rows())[1] is None:
            s = state.read(PRE_FILTER_KEY)
            slots = s.domains[0].slots_of(batch)
            assert slots is not None
            assert _statuses_of(_verdict_by_domain(s, slots)) == _statuses_of(_verdict_by_node(s, target, batch))
        score_state = CycleState()
        if pl.pre_score(score_state, target, batch) is None:
            s = score_state.read(PRE_SCORE_KEY)
            by_domain = _scores_by_domain(s, batch)
            if key == LABEL_HOSTNAME:
                assert by_domain is None  # counted per node, not per domain
            else:
                assert by_domain is not None and by_domain.tolist() == _scores_by_node(s, target, batch).tolist()


def _scored(pl: PodTopologySpread, target: PodInfo, batch: NodeBatch) -> Any:
    state = CycleState()
    if pl.pre_score(state, target, batch) is not None:
        return SKIP
    raw = pl.score_nodes(state, target, batch)
    normalized = pl.normalize_scores(state, target, batch, raw.copy())
    return state.read(PRE_SCORE_KEY).weights, raw.tolist(), None if normalized is None else normalized.tolist()


@pytest.mark.parametrize("seed", range(10))
def test_every_rows_scoring_kept_with_the_layouts_follows_the_nodes(seed: int) -> None:
    """PreScore keeps, for a batch of every row, the ignored nodes and the domains among the
    others with the last layouts: they equal a batch naming every row, also after nodes change."""
    rng = random.Random(1700 + seed)
    table, infos, _ = random_pts_cluster(rng)
    pl = _plugins_for(rng)[0]
    targets = [PodInfo(random_pts_pod(rng, f"in{k}", None, constraints=rng.randint(1, 2))) for k in range(3)]
    for _ in range(6):
        for target in targets * 2:  # the second time from what was kept
            assert _scored(pl, target, table.all_rows()) == _scored(pl, target, table.batch(np.arange(table.n)))
        name = rng.choice(sorted(infos))
        infos[name].set_node(random_pts_node(rng, int(name[1:])))
        table.set_node(infos[name])


def test_filter_moved_rows_covers_every_row_whose_verdict_a_placement_of_the_batch_moves() -> None:
    """Between two replicas of a batch the first lands, moving the counts of its node's domains
    only: every row whose Filter verdict moved is among ``filter_moved_rows``' rows (unless it says
    any row may, as when a global minimum moves), and it narrows the rows down."""
    compared = narrowed = 0
    for seed in range(40):
        rng = random.Random(9000 + seed)
        table, infos, _ = random_pts_cluster(rng)
        shape = random_pts_pod(rng, "shape", None, constraints=rng.randint(1, 2))
        pairs = place_replicas(plugin(), table, infos, shape, rng, f"r{seed}")
        compared, narrowed = compared + pairs[0], narrowed + pairs[1]
    assert compared > 60 and narrowed > compared // 2


def _filter_bases(nodes: list[dict], shape: dict, targets: list[str]) -> tuple[NodeTable, PodTopologySpread, list[Any]]:
    """The PreFilter state (filter basis) of a replica of ``shape`` before each replica lands on its
    target, and the table after all of them."""
    table, infos = cluster(nodes, [])
    pl = plugin()
    bases = []
    for k, target in enumerate(targets):
        state = CycleState()
        pl.pre_filter(state, PodInfo(replica(shape, f"r{k}")), table.all_rows())
        bases.append(pl.filter_basis(state))
        add_pod(table, infos, replica(shape, f"r{k}", target))
    return table, pl, bases


def test_filter_moved_rows_of_a_spread_over_nodes_are_the_nodes_whose_verdict_moved() -> None:
    nodes = [node(f"n{i}", {LABEL_HOSTNAME: f"n{i}"}) for i in range(4)]
    shape = pod("shape", labels={"app": "web"},
                topologySpreadConstraints=[spread(1, LABEL_HOSTNAME, DO_NOT_SCHEDULE, selector(app="web"))])
    table, pl, bases = _filter_bases(nodes, shape, ["n2", "n0", "n1", "n3", "n3"])
    assert pl.filter_moved_rows(bases[0], bases[1], table, 4).tolist() == [2]
    assert pl.filter_moved_rows(bases[1], bases[2], table, 4).tolist() == [0]
    # n3 took the last pod at the minimum: the minimum moved, and every node taken before passes again.
    assert pl.filter_moved_rows(bases[3], bases[4], table, 4).tolist() == [0, 1, 2]
    assert pl.filter_moved_rows(bases[0], bases[2], table, 1) is None  # two rows moved: more than the limit


def test_filter_moved_rows_of_a_spread_over_zones_are_none_while_no_zone_verdict_moves() -> None:
    """A count that moves within the skew moves no verdict, whatever the zone's size; a zone that
    turns infeasible moves all its nodes (beyond the limit here)."""
    nodes = [node(f"n{i}", {LABEL_HOSTNAME: f"n{i}", "zone": f"z{i % 2}"}) for i in range(8)]
    shape = pod("shape", labels={"app": "web"},
                topologySpreadConstraints=[spread(2, "zone", DO_NOT_SCHEDULE, selector(app="web"))])
    table, pl, bases = _filter_bases(nodes, shape, ["n0", "n2", "n1"])
    assert pl.filter_moved_rows(bases[0], bases[1], table, 2).tolist() == []  # z0 holds 1, within the skew
    assert pl.filter_moved_rows(bases[1], bases[2], table, 4).tolist() == [0, 2, 4, 6]  # z0 holds 2: full
    assert pl.filter_moved_rows(bases[1], bases[2], table, 3) is None
    assert pl.filter_moved_rows(bases[2], bases[0], table, 4).tolist() == [0, 2, 4, 6]


@pytest.mark.parametrize("seed", range(15))
def test_scratch_table_after_add_and_remove_pod_matches_reference(seed: int) -> None:
    rng = random.Random(500 + seed)
    table, _, _ = random_pts_cluster(rng)
    pl = _plugins_for(rng)[1]
    ext = pl.pre_filter_extensions()
    for k in range(5):
        target = _random_target(rng, f"in{k}")
        state = CycleState()
        _, status = pl.pre_filter(state, target, table.all_rows())
        ordered = [table.infos[r] for r in range(table.n)]
        ref = RefPTS(pl, target, ordered)
        if not ref.pre_filter():
            assert status is not None and status.code == Code.Skip
            continue
        row = rng.randrange(table.n)
        modified = table.infos[row].clone()
        cloned = state.clone()
        for victim in rng.sample(list(modified.pods.values()), min(len(modified.pods), rng.randint(0, 3))):
            modified.remove_pod(victim.uid)
            assert ext.remove_pod(cloned, target, victim, modified) is None
            ref.update(victim, modified, -1)
        for j in range(rng.randint(0, 3)):
            added = PodInfo(random_pts_pod(rng, f"nom{k}-{j}", modified.name))
            modified.add_pod(added)
            assert ext.add_pod(cloned, target, added, modified) is None
            ref.update(added, modified, 1)
        scratch = NodeTable.from_infos([modified])
        assert filter_all(pl, cloned, target, scratch.all_rows()) == [ref.filter(modified.labels)]
        assert filter_all(pl, cloned, target, table.all_rows()) == [ref.filter(i.labels) for i in ordered]
        assert [d.as_dict() for d in cloned.read(PRE_FILTER_KEY).domains] == ref.tp


@pytest.mark.parametrize("seed", range(6))
def test_incremental_table_updates_match_a_fresh_table(seed: int) -> None:
    rng = random.Random(900 + seed)
    table, infos, pods = random_pts_cluster(rng)
    pl = _plugins_for(rng)[0]
    targets = [_random_target(rng, f"in{k}") for k in range(4)]
    for t in targets:
        _vectorised(pl, table, t, table.all_rows())
    live = {PodInfo(p).uid: p for p in pods}
    for step in range(30):
        action = rng.random()
        if action < 0.4 and live:
            uid = rng.choice(sorted(live))
            pi = PodInfo(live.pop(uid))
            info = infos[pi.node_name]
            table.pod_removed(info, info.remove_pod(uid))
        elif action < 0.75:
            p = random_pts_pod(rng, f"new{seed}-{step}", rng.choice(sorted(infos)))
            live[PodInfo(p).uid] = p
            add_pod(table, infos, p)
        elif action < 0.9:
            name = rng.choice(sorted(infos))
            infos[name].set_node(random_pts_node(rng, int(name[1:])))
            table.set_node(infos[name])
        elif len(infos) > 4:
            name = rng.choice(sorted(infos))
            live = {u: p for u, p in live.items() if p["spec"].get("nodeName") != name}
            table.remove_node(name)
            del infos[name]
    fresh, _ = cluster([i.node for i in infos.values()], list(live.values()))
    for t in targets:
        got = _vectorised(pl, table, t, table.all_rows())[:2]
        want = _vectorised(pl, fresh, t, fresh.all_rows())[:2]
        assert _by_name(table, got) == _by_name(fresh, want)
        assert got == _reference(pl, table, t, table.all_rows())[:2]


def _by_name(table: NodeTable, results: tuple[Any, Any]) -> tuple[Any, Any]:
    filtered, scores = results
    names = table.names[: table.n]
    f = filtered if filtered == SKIP else dict(zip(names, filtered))
    s = scores if scores == SKIP else (dict(zip(names, scores[0])), dict(zip(names, scores[1])))
    return f, s


# ================================================================================================
# nodeTaintsPolicy with the TaintTolerationComparisonOperators gate
# ================================================================================================

GPU_TAINT = [{"key": "gpus", "value": "8", "effect": "NoSchedule"}]
GPU_TOLERATION = [{"key": "gpus", "operator": "Gt", "value": "4", "effect": "NoSchedule"}]
COMPARISON_GATE_ON = {"TaintTolerationComparisonOperators": True}


@pytest.mark.parametrize(("gates", "want_b"), [(COMPARISON_GATE_ON, MISMATCH), (None, None)], ids=["gate on", "gate off"])
def test_taints_policy_honor_tolerates_with_comparison_operators_when_the_gate_is_on(gates: dict | None, want_b: Any) -> None:
    """With the gate on, a Gt toleration admits the tainted zone1 node as a domain (minimum 0)."""
    nodes = [node("node-a", {"zone": "zone1"}, taints=GPU_TAINT), zn("node-b", "zone2")]
    incoming = spod("p", spread(1, "zone", sel=FOO, taints_policy="Honor"), tolerations=GPU_TOLERATION)
    got = run_filter(incoming, nodes, [on("p-b1", "node-b")], gates=gates)
    assert got == {"node-a": None, "node-b": want_b}


@pytest.mark.parametrize(("gates", "want"), [(COMPARISON_GATE_ON, {"zone1": 1, "zone2": 1}), (None, {"zone2": 1})],
                         ids=["gate on", "gate off"])
def test_add_pod_with_taints_policy_honor_follows_the_comparison_gate(gates: dict | None, want: dict) -> None:
    nodes = [node("node-a", {"zone": "zone1"}, taints=GPU_TAINT), zn("node-b", "zone2")]
    incoming = PodInfo(spod("p", spread(1, "zone", sel=FOO, taints_policy="Honor"), tolerations=GPU_TOLERATION))
    table, infos = cluster(nodes, [on("p-b1", "node-b")])
    pl, state = plugin(gates=gates), CycleState()
    pl.pre_filter(state, incoming, table.all_rows())
    pl.pre_filter_extensions().add_pod(state, incoming, PodInfo(on("p-a1", "node-a")), infos["node-a"])
    assert summary(state.read(PRE_FILTER_KEY))[0][1] == want


# ================================================================================================
# Services for the default constraints, kept by informer events
# ================================================================================================

def service(name: str, selector: dict | None, ns: str = "default") -> dict:
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_service_index_follows_informer_events_like_a_scan_of_the_cache() -> None:
    index = ServiceIndex()
    cache: dict[str, dict] = {}
    target = PodInfo(spod("p", labels={"app": "web", "tier": "front"}))

    def apply(kind: str, old: dict | None, new: dict | None) -> None:
        if kind == "add":
            index.on_add(new, False)
        elif kind == "update":
            index.on_update(old, new)
        else:
            index.on_delete(old)
        obj = new if new is not None else old
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        if new is None:
            cache.pop(key)
        else:
            cache[key] = new

    def selectors() -> tuple[Any, Any]:
        scanned = default_selector(target, lambda kind: cache if kind == "Service" else {})
        return default_selector(target, lambda _kind: {}, index), scanned

    a, b = service("a", {"app": "web"}), service("b", {"tier": "front"})
    steps = [("add", None, a), ("add", None, b), ("add", None, service("c", {"app": "web"}, ns="other")),
             ("add", None, service("nil", None)), ("update", b, service("b", {"tier": "back"})),
             ("delete", a, None), ("add", None, a)]
    seen = set()
    for step in steps:
        apply(*step)
        indexed, scanned = selectors()
        assert indexed == scanned, step
        seen.add(tuple(sorted(r.key for r in indexed.requirements)))
    assert seen == {("app",), ("app", "tier"), ()}


def test_the_service_index_subscribes_to_the_schedulers_informer() -> None:
    informers = InformerFactory(None)
    handle = FakeHandle({})
    handle.ctx = SimpleNamespace(informers=informers)
    pl = PodTopologySpread(PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), handle)
    [handler] = informers.informer("Service").handlers
    handler.on_add(service("a", {"foo": ""}), True)
    constraints = pl.constraints(PodInfo(spod("p")), SCHEDULE_ANYWAY)
    assert [c.topology_key for c in constraints] == [LABEL_HOSTNAME, "topology.kubernetes.io/zone"]
    assert PodTopologySpread(PodTopologySpreadArgs(defaulting_type=SYSTEM_DEFAULTING), handle)._services is pl._services
    assert len(informers.informer("Service").handlers) == 1


def test_domain_counts_read_the_same_after_the_label_column_is_compacted() -> None:
    """Compaction swaps in a new column; counts built on the old one translate by value."""
    table, _ = cluster([node(f"n{i}", {"zone": f"z{i}"}) for i in range(130)], [])
    counts = DomainCounts.from_sums(table, "zone", np.arange(130, dtype=np.int64))
    for i in range(129):
        table.remove_node(f"n{i}")
    table.set_node(NodeInfo(node("fresh", {"zone": "z-new"})))
    assert table.label_column("zone") is not counts.column
    has, got = counts.lookup(table.all_rows())
    assert list(has) == [True, True] and list(got) == [129, 0]
