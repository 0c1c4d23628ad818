"""TaintToleration: upstream's Filter / Score cases, hints, and the vectorised verdicts against a
per-node reference (on the snapshot and on scratch tables)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo, Taint
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import (
    ERR_REASON_UNTOLERATED,
    TaintToleration,
    find_untolerated_taint,
)
from tests.helpers import make_node, make_pod


class _Handle:
    def __init__(self, comparison_ops: bool) -> None:
        self.feature_gates = FeatureGates({"TaintTolerationComparisonOperators": comparison_ops})


def plugin(comparison_ops: bool = False) -> TaintToleration:
    return TaintToleration(None, _Handle(comparison_ops))


def node_with_taints(name: str, taints: list[dict]) -> dict:
    return make_node(name, taints=taints)


def pod_with_tolerations(tolerations: list[dict], name: str = "pod1") -> PodInfo:
    return PodInfo(make_pod(name, tolerations=tolerations))


def table_of(nodes: list[dict]) -> NodeTable:
    table = NodeTable()
    for node in nodes:
        table.set_node(NodeInfo(node))
    return table


def ns(key: str, value: str, effect: str = "NoSchedule") -> dict:
    return {"key": key, "value": value, "effect": effect}


FILTER_CASES = [
    ("a pod with no tolerations can't land on a node with NoSchedule taints",
     [], [ns("dedicated", "user1")], False, False),
    ("a pod tolerating dedicated=user1:NoSchedule lands on that dedicated node",
     [ns("dedicated", "user1")], [ns("dedicated", "user1")], True, False),
    ("a toleration for user2 doesn't tolerate the user1 taint",
     [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}], [ns("dedicated", "user1")], False, False),
    ("operator Exists tolerates any value of the key",
     [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}], [ns("foo", "bar")], True, False),
    ("every taint tolerated by one of several tolerations",
     [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
      {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
     [ns("dedicated", "user2"), ns("foo", "bar")], True, False),
    ("key and value match but a different non-empty effect doesn't tolerate",
     [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}], [ns("foo", "bar")], False, False),
    ("an empty effect tolerates every effect",
     [{"key": "foo", "operator": "Equal", "value": "bar"}], [ns("foo", "bar")], True, False),
    ("PreferNoSchedule taints don't filter even when untolerated",
     [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
     [ns("dedicated", "user1", "PreferNoSchedule")], True, False),
    ("no tolerations and only a PreferNoSchedule taint",
     [], [ns("dedicated", "user1", "PreferNoSchedule")], True, False),
    ("an untolerated NoExecute taint filters the node",
     [], [ns("k", "v", "NoExecute")], False, False),
    ("an empty key with Exists tolerates every taint",
     [{"operator": "Exists"}], [ns("a", "1"), ns("b", "2", "NoExecute")], True, False),
    ("Gt toleration rejects a taint value below its threshold",
     [{"key": "node.example.com/priority-level", "operator": "Gt", "value": "950", "effect": "NoSchedule"}],
     [ns("node.example.com/priority-level", "800")], False, True),
    ("Gt toleration accepts a taint value above its threshold",
     [{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
     [ns("node.kubernetes.io/sla", "950")], True, True),
    ("Lt toleration rejects a taint value above its threshold",
     [{"key": "node.example.com/priority-level", "operator": "Lt", "value": "800", "effect": "NoSchedule"}],
     [ns("node.example.com/priority-level", "950")], False, True),
    ("Lt toleration accepts a taint value below its threshold",
     [{"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"}],
     [ns("node.kubernetes.io/sla", "800")], True, True),
    ("Gt toleration is ignored when the comparison gate is off",
     [{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
     [ns("node.kubernetes.io/sla", "950")], False, False),
    ("Lt toleration is ignored when the comparison gate is off",
     [{"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "950", "effect": "NoSchedule"}],
     [ns("node.kubernetes.io/sla", "800")], False, False),
    ("mixed Equal and Gt tolerations with the gate off: only Equal is honoured",
     [ns("dedicated", "user1"), {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
     [ns("dedicated", "user1")], True, False),
    ("mixed tolerations with the gate off: the needed Gt toleration doesn't count",
     [ns("dedicated", "user1"), {"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}],
     [ns("dedicated", "user1"), ns("node.kubernetes.io/sla", "950")], False, False),
]


@pytest.mark.parametrize("name,tolerations,taints,fits,comparison_ops", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter(name, tolerations, taints, fits, comparison_ops):
    table = table_of([node_with_taints("nodeA", taints)])
    verdict = plugin(comparison_ops).filter_nodes(CycleState(), pod_with_tolerations(tolerations), table.all_rows())
    status = None if verdict is None else verdict.status_at(0)
    if fits:
        assert status is None
    else:
        assert status is not None
        assert status.code == Code.UnschedulableAndUnresolvable
        assert status.reasons == [ERR_REASON_UNTOLERATED]


PARSE_ERROR_CASES = [
    ("Pod with Gt toleration cannot be scheduled on node with non-numeric taint value",
     [{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"}],
     [ns("node.kubernetes.io/sla", "high")],
     'failed to parse taint value "high" as int64: must be a valid decimal integer in canonical form'),
    ("a toleration value with a leading zero is no canonical integer",
     [{"key": "sla", "operator": "Gt", "value": "0750", "effect": "NoSchedule"}], [ns("sla", "950")],
     'failed to parse toleration value "0750" as int64: must be a valid decimal integer in canonical form'),
    ("a taint value beyond int64 is out of range",
     [{"key": "sla", "operator": "Lt", "value": "5", "effect": "NoSchedule"}], [ns("sla", "99999999999999999999")],
     'failed to parse taint value "99999999999999999999" as int64: '
     'strconv.ParseInt: parsing "99999999999999999999": value out of range'),
    ("a cleanly untolerated taint wins over a parse error on another taint",
     [{"key": "sla", "operator": "Gt", "value": "5", "effect": "NoSchedule"}], [ns("sla", "high"), ns("other", "x")],
     ERR_REASON_UNTOLERATED),
    ("another toleration tolerating the taint makes the parse error moot",
     [{"key": "sla", "operator": "Gt", "value": "5", "effect": "NoSchedule"}, {"key": "sla", "operator": "Exists"}],
     [ns("sla", "high")], None),
]


@pytest.mark.parametrize("name,tolerations,taints,reason", PARSE_ERROR_CASES, ids=[c[0] for c in PARSE_ERROR_CASES])
def test_filter_comparison_parse_errors(name, tolerations, taints, reason):
    """With comparison operators, a value that is no int64 rejects the node with upstream's parse
    message (``FindMatchingUntoleratedTaint``'s error), unless a plain untolerated taint is there."""
    table = table_of([node_with_taints("nodeA", taints)])
    verdict = plugin(True).filter_nodes(CycleState(), pod_with_tolerations(tolerations), table.all_rows())
    status = None if verdict is None else verdict.status_at(0)
    if reason is None:
        assert status is None
    else:
        assert (status.code, status.reasons) == (Code.UnschedulableAndUnresolvable, [reason])


def test_nodes_failing_share_one_status():
    table = table_of([node_with_taints(f"n{i}", [ns("k", str(i % 2))]) for i in range(6)])
    verdict = plugin().filter_nodes(CycleState(), pod_with_tolerations([ns("k", "0")]), table.all_rows())
    assert list(verdict.codes) == [-1, 0, -1, 0, -1, 0]
    assert len(verdict.statuses) == 1


def prefer(key: str, value: str) -> dict:
    return ns(key, value, "PreferNoSchedule")


SCORE_CASES = [
    ("nodes whose taints the pod tolerates score higher than those with intolerable taints",
     [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
     [[prefer("foo", "bar")], [prefer("foo", "blah")]], [100, 0], False),
    ("the number of tolerated taints doesn't matter",
     [{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "PreferNoSchedule"},
      {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "PreferNoSchedule"}],
     [[], [prefer("cpu-type", "arm64")], [prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]], [100, 100, 100], False),
    ("the more intolerable taints, the lower the score",
     [{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
     [[], [prefer("cpu-type", "arm64")], [prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]], [100, 50, 0], False),
    ("only PreferNoSchedule taints and tolerations count",
     [{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
      {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"}],
     [[], [ns("cpu-type", "arm64")], [prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]], [100, 100, 0], False),
    ("no tolerations: the untainted node wins",
     [], [[], [prefer("cpu-type", "arm64")]], [100, 0], False),
    ("Gt toleration prefers nodes above the SLA threshold",
     [{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "PreferNoSchedule"}],
     [[prefer("node.kubernetes.io/sla", "800")], [prefer("node.kubernetes.io/sla", "999")]], [0, 100], True),
    ("Lt toleration prefers nodes below the SLA threshold",
     [{"key": "node.kubernetes.io/sla", "operator": "Lt", "value": "800", "effect": "PreferNoSchedule"}],
     [[prefer("node.kubernetes.io/sla", "950")], [prefer("node.kubernetes.io/sla", "700")]], [0, 100], True),
    ("a non-numeric PreferNoSchedule taint value is simply not tolerated",
     [{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "PreferNoSchedule"}],
     [[], [prefer("node.kubernetes.io/sla", "high")]], [100, 0], True),
]


@pytest.mark.parametrize("name,tolerations,node_taints,expected,comparison_ops", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_score(name, tolerations, node_taints, expected, comparison_ops):
    table = table_of([node_with_taints(f"node{i}", t) for i, t in enumerate(node_taints)])
    pl, state, pod = plugin(comparison_ops), CycleState(), pod_with_tolerations(tolerations)
    nodes = table.all_rows()
    assert pl.pre_score(state, pod, nodes) is None
    raw = pl.score_nodes(state, pod, nodes)
    assert list(pl.normalize_scores(state, pod, nodes, raw)) == expected


def test_find_untolerated_taint_for_the_kubelet_looks_only_at_the_given_effects():
    taints = [ns("a", "1"), ns("b", "2", "NoExecute")]
    assert find_untolerated_taint(taints, [], {"NoExecute"}) == Taint("b", "2", "NoExecute")
    assert find_untolerated_taint(taints, [], None) == Taint("a", "1", "NoSchedule")
    assert find_untolerated_taint(taints, [{"key": "b", "operator": "Exists"}], {"NoExecute"}) is None


NODE_HINT_CASES = [
    ("skip when an added node has an untolerated taint", None, [ns("dedicated", "user1")], QueueingHint.QueueSkip),
    ("queue when an added node's taints are tolerated", None, [ns("dedicated", "user2")], QueueingHint.Queue),
    ("skip an update that keeps a taint untolerated", [ns("dedicated", "user1")],
     [ns("dedicated", "user1"), ns("dedicated", "user3")], QueueingHint.QueueSkip),
    ("queue an update that removes the untolerated taint", [ns("dedicated", "user1")], [ns("dedicated", "user2")], QueueingHint.Queue),
]


@pytest.mark.parametrize("name,old,new,expected", NODE_HINT_CASES, ids=[c[0] for c in NODE_HINT_CASES])
def test_node_change_hint(name, old, new, expected):
    pod = make_pod("pod1", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}])
    old_node = None if old is None else node_with_taints("nodeA", old)
    assert plugin()._after_node_change(pod, old_node, node_with_taints("nodeA", new)) == expected


def test_pod_toleration_hint_queues_only_the_pod_itself():
    pod = make_pod("pod-1", namespace="ns-1")
    updated = make_pod("pod-1", namespace="ns-1", tolerations=[{"key": "foo", "effect": "NoSchedule"}])
    other = make_pod("pod-2", namespace="ns-1", tolerations=[{"key": "foo", "effect": "NoSchedule"}])
    assert plugin()._after_pod_toleration_change(pod, pod, updated) == QueueingHint.Queue
    assert plugin()._after_pod_toleration_change(pod, other, other) == QueueingHint.QueueSkip


def test_registers_node_taint_and_pod_toleration_events():
    events = [(e.event.resource, e.event.action) for e in plugin().events_to_register()]
    assert events == [(Resource.Node, ActionType.Add | ActionType.UpdateNodeTaint), (Resource.Pod, ActionType.UpdatePodToleration)]


# --- vectorised vs per-node reference ---------------------------------------------------------------
KEYS, VALUES, EFFECTS = ["a", "b", "c"], ["1", "2", "10"], ["NoSchedule", "NoExecute", "PreferNoSchedule"]


def random_taints(rng: random.Random) -> list[dict]:
    return [ns(rng.choice(KEYS), rng.choice(VALUES), rng.choice(EFFECTS)) for _ in range(rng.randint(0, 3))]


def random_tolerations(rng: random.Random) -> list[dict]:
    out = []
    for _ in range(rng.randint(0, 3)):
        op = rng.choice(["Equal", "Exists", "Gt", "Lt", ""])
        tol = {"key": rng.choice([*KEYS, ""]), "operator": op, "effect": rng.choice([*EFFECTS, ""])}
        if op != "Exists":
            tol["value"] = rng.choice(VALUES)
        if op == "Exists" and not tol["key"] and rng.random() < 0.7:
            tol["key"] = rng.choice(KEYS)
        out.append(tol)
    return out


def reference_score(taints: list[dict], tolerations: list[dict], comparison_ops: bool) -> int:
    count = 0
    for taint in taints:
        if taint["effect"] != "PreferNoSchedule":
            continue
        tolerated = any(_ref_tolerates(t, taint, comparison_ops) for t in tolerations
                        if not t.get("effect") or t.get("effect") == "PreferNoSchedule")
        count += not tolerated
    return count


def _ref_tolerates(tol: dict, taint: dict, comparison_ops: bool) -> bool:
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        return False
    if tol.get("key") and tol["key"] != taint["key"]:
        return False
    op = tol.get("operator") or "Equal"
    if op == "Equal":
        return tol.get("value", "") == taint["value"]
    if op == "Exists":
        return True
    if not comparison_ops:
        return False
    return int(taint["value"]) < int(tol["value"]) if op == "Lt" else int(taint["value"]) > int(tol["value"])


@pytest.mark.parametrize("seed", range(5))
def test_batch_verdicts_and_scores_match_per_node_reference(seed):
    rng = random.Random(seed)
    comparison_ops = seed % 2 == 0
    nodes = [node_with_taints(f"n{i}", random_taints(rng)) for i in range(40)]
    table = table_of(nodes)
    pl = plugin(comparison_ops)
    for _ in range(10):
        tolerations = random_tolerations(rng)
        pod = pod_with_tolerations(tolerations)
        state = CycleState()
        verdict = pl.filter_nodes(state, pod, table.all_rows())
        pl.pre_score(state, pod, table.all_rows())
        scores = pl.score_nodes(state, pod, table.all_rows())
        for row, node in enumerate(nodes):
            taints = node["spec"].get("taints") or []
            expected_fit = all(any(_ref_tolerates(t, taint, comparison_ops) for t in tolerations)
                               for taint in taints if taint["effect"] != "PreferNoSchedule")
            assert (verdict is None or verdict.status_at(row) is None) == expected_fit
            assert scores[row] == reference_score(taints, tolerations, comparison_ops)
            scratch = NodeTable.from_infos([table.infos[row]])
            one = pl.filter_nodes(state, pod, scratch.all_rows())
            assert (one is None or one.status_at(0) is None) == expected_fit
        subset = table.batch(np.array([3, 1, 7]))
        sub = pl.score_nodes(state, pod, subset)
        assert list(sub) == [scores[3], scores[1], scores[7]]
