"""NodeAffinity: upstream's PreFilter / Filter / Score cases, addedAffinity, hints, the kubelet
helper, and the vectorised verdicts against a per-node reference (snapshot and scratch tables)."""

from __future__ import annotations

import random

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import NodeAffinityArgs
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, QueueingHint, Resource
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.nodeaffinity.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    NodeAffinity,
    pod_matches_node_selector_and_affinity,
)
from tests.helpers import make_node, make_pod


def node(name: str = "node", labels: dict | None = None) -> dict:
    n = make_node(name)
    n["metadata"]["labels"] = dict(labels or {})
    return n


def table_of(nodes: list[dict]) -> NodeTable:
    table = NodeTable()
    for n in nodes:
        table.set_node(NodeInfo(n))
    return table


def expr(key: str, op: str, *values: str) -> dict:
    out = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def name_field(value: str) -> dict:
    return {"key": "metadata.name", "operator": "In", "values": [value]}


def required(*terms: dict) -> dict:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}}


def term(*expressions: dict, fields: list[dict] | None = None) -> dict:
    out: dict = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = fields
    return out


def pod(**spec) -> PodInfo:
    return PodInfo(make_pod("p", **spec))


ADDED_NODE2 = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [name_field("node2")]}]}}
ADDED_ZONE_BAR = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term(expr("zone", "In", "bar"))]}}

# (name, pod spec, node labels, node name, want filter reason, want prefilter code, want prefilter names, added affinity)
FILTER_CASES = [
    ("missing labels", {"nodeSelector": {"foo": "bar"}}, {}, "node", ERR_REASON_POD, None, None, None),
    ("same labels", {"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, "node", None, None, None, None),
    ("node labels are superset", {"nodeSelector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, "node", None, None, None, None),
    ("node labels are subset", {"nodeSelector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, "node", ERR_REASON_POD, None, None, None),
    ("matchExpressions In matches", required(term(expr("foo", "In", "bar", "value2"))), {"foo": "bar"}, "node",
     None, None, None, None),
    ("matchExpressions Gt matches", required(term(expr("kernel-version", "Gt", "0204"))), {"kernel-version": "0206"}, "node",
     None, None, None, None),
    ("matchExpressions Lt rejects a bigger number", required(term(expr("kernel-version", "Lt", "0204"))),
     {"kernel-version": "0206"}, "node", ERR_REASON_POD, None, None, None),
    ("Gt never matches a non-integer label", required(term(expr("kernel-version", "Gt", "1"))), {"kernel-version": "v2"}, "node",
     ERR_REASON_POD, None, None, None),
    ("Gt with a negative number never matches: NewRequirement rejects -1 as a label value",
     required(term(expr("cpus", "Gt", "-1"))), {"cpus": "5"}, "node", ERR_REASON_POD, None, None, None),
    ("matchExpressions NotIn matches", required(term(expr("mem-type", "NotIn", "DDR", "DDR2"))), {"mem-type": "DDR3"}, "node",
     None, None, None, None),
    ("matchExpressions Exists matches", required(term(expr("GPU", "Exists"))), {"GPU": "NVIDIA-GRID-K1"}, "node",
     None, None, None, None),
    ("affinity that doesn't match the node's labels", required(term(expr("foo", "In", "value1", "value2"))), {"foo": "bar"}, "node",
     ERR_REASON_POD, None, None, None),
    ("an empty term matches no node", required({"matchExpressions": []}), {"foo": "bar"}, "node", ERR_REASON_POD, None, None, None),
    ("no affinity: PreFilter skips", {}, {"foo": "bar"}, "node", None, Code.Skip, None, None),
    ("node affinity without required terms: PreFilter skips", {"affinity": {"nodeAffinity": {}}}, {"foo": "bar"}, "node",
     None, Code.Skip, None, None),
    ("expressions of a term are ANDed (match)", required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
     {"GPU": "NVIDIA-GRID-K1"}, "node", None, None, None, None),
    ("expressions of a term are ANDed (mismatch)", required(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER"))),
     {"GPU": "NVIDIA-GRID-K1"}, "node", ERR_REASON_POD, None, None, None),
    ("terms are ORed", required(term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong", "value2"))),
     {"foo": "bar"}, "node", None, None, None, None),
    ("affinity and nodeSelector both satisfied", {"nodeSelector": {"foo": "bar"}, **required(term(expr("foo", "Exists")))},
     {"foo": "bar"}, "node", None, None, None, None),
    ("affinity matches but nodeSelector doesn't", {"nodeSelector": {"foo": "bar"}, **required(term(expr("foo", "Exists")))},
     {"foo": "barrrrrr"}, "node", ERR_REASON_POD, None, None, None),
    ("an invalid value in a term never matches", required(term(expr("foo", "NotIn", "invalid value: ___@#$%^"))), {"foo": "bar"}, "node",
     ERR_REASON_POD, None, None, None),
    ("matchFields In matches the node", required(term(fields=[name_field("node1")])), {}, "node1", None, None, {"node1"}, None),
    ("matchFields In doesn't match another node", required(term(fields=[name_field("node1")])), {}, "node2",
     ERR_REASON_POD, None, {"node1"}, None),
    ("two terms: matchFields misses but matchExpressions matches",
     required(term(fields=[name_field("node1"), name_field("node2")]), term(expr("foo", "In", "bar"))), {"foo": "bar"}, "node2",
     None, None, None, None),
    ("one term: matchFields misses although matchExpressions matches",
     required(term(expr("foo", "In", "bar"), fields=[name_field("node1")])), {"foo": "bar"}, "node2",
     ERR_REASON_POD, None, {"node1"}, None),
    ("one term: both matchFields and matchExpressions match",
     required(term(expr("foo", "In", "bar"), fields=[name_field("node1")])), {"foo": "bar"}, "node1", None, None, {"node1"}, None),
    ("two terms: neither matches",
     required(term(fields=[name_field("node1")]), term(expr("foo", "In", "not-match-to-bar"))), {"foo": "bar"}, "node2",
     ERR_REASON_POD, None, None, None),
    ("two terms naming nodes: their union", required(term(fields=[name_field("node1")]), term(fields=[name_field("node2")])), {},
     "node2", None, None, {"node1", "node2"}, None),
    ("conflicting matchFields within a term", required(term(fields=[name_field("node1"), name_field("node2")])), {"foo": "bar"}, "node2",
     ERR_REASON_POD, Code.UnschedulableAndUnresolvable, None, None),
    ("matches added affinity and the pod's affinity", required(term(expr("zone", "In", "foo"))), {"zone": "foo"}, "node2",
     None, None, None, ADDED_NODE2),
    ("matches added affinity but not the pod's", required(term(expr("zone", "In", "bar"))), {"zone": "foo"}, "node2",
     ERR_REASON_POD, None, None, ADDED_NODE2),
    ("doesn't match the added affinity", {}, {"zone": "foo"}, "node2", ERR_REASON_ENFORCED, None, None, ADDED_ZONE_BAR),
]


@pytest.mark.parametrize("name,spec,labels,node_name,want_reason,want_pre_code,want_names,added",
                         FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_pre_filter_and_filter(name, spec, labels, node_name, want_reason, want_pre_code, want_names, added):
    pl = NodeAffinity(NodeAffinityArgs(added_affinity=added))
    table = table_of([node(node_name, labels)])
    state, p = CycleState(), pod(**spec)
    result, status = pl.pre_filter(state, p, table.all_rows())
    assert (None if status is None else status.code) == want_pre_code
    if want_pre_code == Code.UnschedulableAndUnresolvable:
        assert status.reasons == [ERR_REASON_CONFLICT]
    assert (None if result is None else result.node_names) == want_names
    verdict = pl.filter_nodes(state, p, table.all_rows())
    got = None if verdict is None else verdict.status_at(0)
    if want_reason is None:
        assert got is None
    else:
        assert got.code == Code.UnschedulableAndUnresolvable and got.reasons == [want_reason]


def test_filter_works_without_pre_filter():
    pl = NodeAffinity()
    table = table_of([node("n", {"GPU": "NVIDIA-GRID-K1"}), node("m", {"GPU": "AMD"})])
    p = pod(**required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))))
    verdict = pl.filter_nodes(CycleState(), p, table.all_rows())
    assert verdict.status_at(0) is None and verdict.status_at(1).reasons == [ERR_REASON_POD]


def preferred(*weighted: tuple[int, dict]) -> dict:
    return {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": t} for w, t in weighted]}}}


LABEL1, LABEL2, LABEL3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
LABEL4, LABEL5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = preferred((2, term(expr("foo", "In", "bar"))))
AFFINITY2 = preferred((2, term(expr("foo", "In", "bar"))), (4, term(expr("key", "In", "value"))),
                      (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))))

SCORE_CASES = [
    ("all nodes score the same without node affinity", {}, [LABEL1, LABEL2, LABEL3], [0, 0, 0], None, Code.Skip),
    ("no node matches the preferred terms", AFFINITY1, [LABEL4, LABEL2, LABEL3], [0, 0, 0], None, None),
    ("only node1 matches", AFFINITY1, [LABEL1, LABEL2, LABEL3], [100, 0, 0], None, None),
    ("all nodes match with different weights", AFFINITY2, [LABEL1, LABEL5, LABEL2], [18, 100, 36], None, None),
    ("added affinity alone", {}, [LABEL1, LABEL2], [100, 0], AFFINITY1["affinity"]["nodeAffinity"], None),
    ("added affinity and the pod's", AFFINITY1, [LABEL1, LABEL2, LABEL5], [40, 60, 100],
     {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "preference": term(expr("key", "In", "value"))}]}, None),
    ("weight 0 and empty terms are ignored", preferred((0, term(expr("foo", "In", "bar"))), (7, {})), [LABEL1, LABEL2], [0, 0], None, None),
]


@pytest.mark.parametrize("name,spec,labels,expected,added,pre_code", SCORE_CASES, ids=[c[0] for c in SCORE_CASES])
def test_score(name, spec, labels, expected, added, pre_code):
    pl = NodeAffinity(NodeAffinityArgs(added_affinity=added))
    table = table_of([node(f"node{i}", lab) for i, lab in enumerate(labels)])
    state, p, nodes = CycleState(), pod(**spec), table.all_rows()
    status = pl.pre_score(state, p, nodes)
    assert (None if status is None else status.code) == pre_code
    raw = pl.score_nodes(state, p, nodes)
    assert list(pl.normalize_scores(state, p, nodes, raw)) == expected


def test_score_without_pre_score_matches():
    pl = NodeAffinity()
    table = table_of([node("node1", LABEL1), node("node5", LABEL5), node("node2", LABEL2)])
    p, nodes = pod(**AFFINITY2), table.all_rows()
    raw = pl.score_nodes(CycleState(), p, nodes)
    assert list(pl.normalize_scores(CycleState(), p, nodes, raw)) == [18, 100, 36]


@pytest.mark.parametrize("value", ["not-a-number", "-1"])
def test_pre_score_reports_unparsable_preferred_terms_as_error(value):
    p = pod(**preferred((1, term(expr("foo", "Gt", value)))))
    status = NodeAffinity().pre_score(CycleState(), p, table_of([node()]).all_rows())
    assert status.code == Code.Error


HINT_CASES = [
    ("queue an added node matching the pod's affinity", required(term(expr("foo", "In", "bar"))), None, {"foo": "bar"},
     None, QueueingHint.Queue),
    ("skip an added node not matching", required(term(expr("foo", "In", "bar"))), None, {}, None, QueueingHint.QueueSkip),
    ("queue an update that starts matching", required(term(expr("foo", "In", "bar"))), {}, {"foo": "bar"}, None, QueueingHint.Queue),
    ("skip an update that already matched", required(term(expr("foo", "In", "bar"))), {"foo": "bar"}, {"foo": "bar", "x": "y"},
     None, QueueingHint.QueueSkip),
    ("skip a node failing the added affinity", {}, None, {"zone": "foo"}, ADDED_ZONE_BAR, QueueingHint.QueueSkip),
    ("queue a node matching the added affinity", {}, None, {"zone": "bar"}, ADDED_ZONE_BAR, QueueingHint.Queue),
    ("nodeSelector counts too", {"nodeSelector": {"foo": "bar"}}, None, {"foo": "baz"}, None, QueueingHint.QueueSkip),
]


@pytest.mark.parametrize("name,spec,old_labels,new_labels,added,expected", HINT_CASES, ids=[c[0] for c in HINT_CASES])
def test_node_change_hint(name, spec, old_labels, new_labels, added, expected):
    pl = NodeAffinity(NodeAffinityArgs(added_affinity=added))
    old = None if old_labels is None else node("n", old_labels)
    assert pl._after_node_change(make_pod("p", **spec), old, node("n", new_labels)) == expected


def test_registers_node_add_and_label_update():
    events = [(e.event.resource, e.event.action) for e in NodeAffinity().events_to_register()]
    assert events == [(Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel)]


def test_kubelet_helper_matches_selector_and_required_terms():
    p = pod(nodeSelector={"a": "1"}, **required(term(expr("b", "In", "2")), term(fields=[name_field("n9")])))
    assert pod_matches_node_selector_and_affinity(p, node("n", {"a": "1", "b": "2"}))
    assert pod_matches_node_selector_and_affinity(p, node("n9", {"a": "1"}))
    assert not pod_matches_node_selector_and_affinity(p, node("n", {"a": "1"}))
    assert not pod_matches_node_selector_and_affinity(p, node("n", {"b": "2"}))


# --- vectorised vs per-node reference ---------------------------------------------------------------
KEYS, VALUES = ["zone", "tier", "gen"], ["1", "2", "3", "a"]


def random_expression(rng: random.Random) -> dict:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Exists", "DoesNotExist"):
        return expr(rng.choice(KEYS), op)
    if op in ("Gt", "Lt"):
        return expr(rng.choice(KEYS), op, rng.choice(["0", "1", "2"]))
    return expr(rng.choice(KEYS), op, *rng.sample(VALUES, rng.randint(1, 2)))


def random_term(rng: random.Random, n_nodes: int) -> dict:
    fields = [name_field(f"n{rng.randrange(n_nodes)}")] if rng.random() < 0.2 else None
    return term(*(random_expression(rng) for _ in range(rng.randint(0, 2))), fields=fields)


def ref_requirement(req: dict, labels: dict) -> bool:
    key, op, values = req["key"], req["operator"], req.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels or not labels[key].lstrip("-").isdigit():
        return False
    return int(labels[key]) > int(values[0]) if op == "Gt" else int(labels[key]) < int(values[0])


def ref_term(t: dict, labels: dict, name: str) -> bool:
    if not t.get("matchExpressions") and not t.get("matchFields"):
        return False
    fields_ok = all((name in f["values"]) == (f["operator"] == "In") for f in t.get("matchFields") or [])
    return fields_ok and all(ref_requirement(r, labels) for r in t.get("matchExpressions") or [])


@pytest.mark.parametrize("seed", range(5))
def test_batch_verdicts_and_scores_match_per_node_reference(seed):
    rng = random.Random(seed)
    nodes = [node(f"n{i}", {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.7}) for i in range(30)]
    table = table_of(nodes)
    added_terms = [random_term(rng, len(nodes)) for _ in range(2)] if seed % 2 else []
    added = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": added_terms}} if added_terms else None
    pl = NodeAffinity(NodeAffinityArgs(added_affinity=added))
    for _ in range(15):
        terms = [random_term(rng, len(nodes)) for _ in range(rng.randint(1, 3))]
        selector = {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.2}
        prefs = [(rng.randint(1, 10), random_term(rng, len(nodes))) for _ in range(rng.randint(0, 3))]
        spec = required(*terms)
        spec["affinity"]["nodeAffinity"].update(preferred(*prefs)["affinity"]["nodeAffinity"])
        if selector:
            spec["nodeSelector"] = selector
        p = pod(**spec)
        state = CycleState()
        pl.pre_filter(state, p, table.all_rows())
        verdict = pl.filter_nodes(state, p, table.all_rows())
        scores = pl.score_nodes(state, p, table.all_rows())
        for row, n in enumerate(nodes):
            labels, name = n["metadata"]["labels"], n["metadata"]["name"]
            enforced = not added_terms or any(ref_term(t, labels, name) for t in added_terms)
            own = all(labels.get(k) == v for k, v in selector.items()) and any(ref_term(t, labels, name) for t in terms)
            want = None if enforced and own else (ERR_REASON_ENFORCED if not enforced else ERR_REASON_POD)
            got = None if verdict is None else verdict.status_at(row)
            assert (None if got is None else got.reasons[0]) == want
            assert pod_matches_node_selector_and_affinity(p, n) == own
            assert scores[row] == sum(w for w, t in prefs if ref_term(t, labels, name))
            scratch = NodeTable.from_infos([table.infos[row]])
            one = pl.filter_nodes(state, p, scratch.all_rows())
            assert (None if one is None or one.status_at(0) is None else one.status_at(0).reasons[0]) == want
