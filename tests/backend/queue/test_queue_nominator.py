"""The nominator (upstream TestPriorityQueue_UpdateNominatedPodForNode, TestPriorityQueue_NominatedPodDeleted, nominator cases)."""

from __future__ import annotations

import pytest

from kubesched.scheduler.backend.queue.testing import make_pod, new_test_queue
from kubesched.scheduler.framework.interface import NominatingInfo, NominatingMode
from kubesched.utils.clock import ManualClock


def nominated(q) -> dict[str, list[str]]:
    return {node: [ref.name for ref in refs] for node, refs in q._nominator.nominated_pods.items()}


@pytest.mark.parametrize(("status_node", "info", "want"), [
    pytest.param("node1", None, {"node1": ["p"]}, id="no info: status.nominatedNodeName"),
    pytest.param("node1", NominatingInfo("node2", NominatingMode.Noop), {"node1": ["p"]}, id="Noop: status.nominatedNodeName"),
    pytest.param("node1", NominatingInfo("node2", NominatingMode.Override), {"node2": ["p"]}, id="Override wins"),
    pytest.param("node1", NominatingInfo("", NominatingMode.Override), {}, id="Override with no node clears"),
    pytest.param("", None, {}, id="nothing to nominate"),
])
def test_add_nominated_pod(status_node, info, want):
    q = new_test_queue()
    q.add_nominated_pod(make_pod("p", nominated_node="node0"), NominatingInfo("node0", NominatingMode.Override))
    q.add_nominated_pod(make_pod("p", nominated_node=status_node), info)
    assert nominated(q) == want
    assert q._nominator.nominated_pod_to_node == ({"default-p-uid": next(iter(want))} if want else {})


def test_update_keeps_an_in_memory_nomination_the_update_does_not_mention():
    q = new_test_queue()
    pod = make_pod("p")
    q.add_nominated_pod(pod, NominatingInfo("node1", NominatingMode.Override))
    q.update_nominated_pod(pod, make_pod("p", labels={"a": "b"}))
    assert nominated(q) == {"node1": ["p"]}


@pytest.mark.parametrize(("old_node", "new_node", "want"), [
    pytest.param("", "node2", {"node2": ["p"]}, id="nomination added"),
    pytest.param("node1", "node2", {"node2": ["p"]}, id="nomination changed"),
    pytest.param("node1", "", {}, id="nomination removed"),
])
def test_update_follows_status_changes(old_node, new_node, want):
    q = new_test_queue()
    old = make_pod("p", nominated_node=old_node)
    q.add_nominated_pod(old, NominatingInfo("node1", NominatingMode.Override))
    q.update_nominated_pod(old, make_pod("p", nominated_node=new_node))
    assert nominated(q) == want


def test_delete_and_multiple_pods_per_node():
    q = new_test_queue()
    a, b, c = (make_pod(n, nominated_node="node1") for n in ("a", "b", "c"))
    for pod in (a, b, c):
        q.add_nominated_pod(pod, None)
    q.add_nominated_pod(b, None)  # re-adding never duplicates
    assert nominated(q) == {"node1": ["a", "c", "b"]}
    q.delete_nominated_pod_if_exists(c)
    q.delete_nominated_pod_if_exists(make_pod("unknown"))
    assert nominated(q) == {"node1": ["a", "b"]}
    q.delete_nominated_pod_if_exists(a)
    q.delete_nominated_pod_if_exists(b)
    assert nominated(q) == {} and q.nominated_pods_for_node("node1") == []


def test_nominated_pods_for_node_resolves_to_the_queued_pod():
    clock = ManualClock()
    q = new_test_queue(clock)
    queued = make_pod("queued", nominated_node="node1", priority=5)
    in_flight = make_pod("inflight", nominated_node="node1", priority=10)
    q.add(in_flight)
    q.add(queued)
    assert q.pop_nowait().pod_info is in_flight
    got = q.nominated_pods_for_node("node1")
    assert [p.name for p in got] == ["inflight", "queued"]
    assert got[1] is queued
    # Not in any queue: only its identity is known (upstream podRef.toPod).
    assert got[0] is not in_flight and got[0].uid == in_flight.uid and got[0].priority == 0


def test_update_in_queue_updates_nominator():
    q = new_test_queue()
    old = make_pod("p")
    q.add(old)
    q.update(old, make_pod("p", nominated_node="node1"))
    assert nominated(q) == {"node1": ["p"]}
    q.delete(make_pod("p", nominated_node="node1"))
    assert nominated(q) == {}


@pytest.mark.parametrize(("listed", "want"), [
    pytest.param({"spec": {}}, {"node1": ["p"]}, id="alive and unbound"),
    pytest.param(None, {}, id="deleted"),
    pytest.param({"spec": {"nodeName": "n9"}}, {}, id="already bound"),
])
def test_pod_lister_guards_nominations(listed, want):
    q = new_test_queue(pod_lister=lambda ns, name: listed)
    q.add_nominated_pod(make_pod("p", nominated_node="node1"), None)
    assert nominated(q) == want
