"""ReplicaSet and ReplicationController controllers: replicas kept, orphans adopted, scale-down in
upstream's deletion order, status."""

import re

import pytest

from kubesched.api.kinds import POD
from kubesched.api.timeutil import parse_time
from kubesched.simulator.controllers.util import ALPHANUMS, REPLICA_SET, REPLICATION_CONTROLLER, rank_pods_for_deletion
from kubesched.utils.clock import rfc3339
from tests.controllers.harness import Cluster, run_cluster
from tests.helpers import make_pod


def replica_set(name: str = "web", replicas: int = 3, **spec) -> dict:
    obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}, **spec}}
    return obj


def scale(c: Cluster, replicas: int, name: str = "web", kind=REPLICA_SET) -> None:
    c.store.mutate(kind, "default", name, lambda o: o["spec"].__setitem__("replicas", replicas))


def names(pods: list[dict]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# --- deletion order --------------------------------------------------------------------------------
NOW = parse_time("2025-01-01T01:00:00Z")


def pod(name: str, node: str = "", phase: str = "Running", ready: bool | None = None, created: str = "2025-01-01T00:00:00Z",
        ready_at: str = "2025-01-01T00:00:00Z", restarts: int = 0, cost: int | None = None) -> dict:
    p = make_pod(name, node=node or None, uid=name)
    p["metadata"]["creationTimestamp"] = created
    if cost is not None:
        p["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    ready = phase == "Running" if ready is None else ready
    p["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                    "lastTransitionTime": ready_at}],
                   "containerStatuses": [{"name": "c", "restartCount": restarts}]}
    return p


@pytest.mark.parametrize(("pods", "first"), [
    pytest.param([pod("a", "n1"), pod("b", "", phase="Pending")], "b", id="unscheduled before scheduled"),
    pytest.param([pod("a", "n1"), pod("b", "n2", phase="Pending")], "b", id="pending before running"),
    pytest.param([pod("a", "n1"), pod("b", "n2", phase="Unknown")], "b", id="unknown before running"),
    pytest.param([pod("a", "n1"), pod("b", "n2", ready=False)], "b", id="not ready before ready"),
    pytest.param([pod("a", "n1", cost=10), pod("b", "n2", cost=-5)], "b", id="lower deletion cost first"),
    pytest.param([pod("a", "n1"), pod("b", "n2"), pod("c", "n2")], "b", id="doubled up before alone"),
    pytest.param([pod("a", "n1", ready_at="2025-01-01T00:00:00Z"), pod("b", "n2", ready_at="2025-01-01T00:50:00Z")], "b",
                 id="recently ready before long ready"),
    pytest.param([pod("a", "n1"), pod("b", "n2", restarts=3)], "b", id="more restarts first"),
    pytest.param([pod("a", "n1", created="2025-01-01T00:00:00Z"), pod("b", "n2", created="2025-01-01T00:45:00Z")], "b",
                 id="younger before older"),
    pytest.param([pod("a", "n1", created="2025-01-01T00:00:00Z"), pod("b", "n2", created="2025-01-01T00:00:10Z")], "a",
                 id="same log2 age ties by uid"),
])
def test_deletion_order(pods, first):
    assert names(rank_pods_for_deletion(pods, pods, NOW))[0] == first


# --- controller ------------------------------------------------------------------------------------
def test_replica_set_creates_pods_from_its_template():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        rs = c.store.create(REPLICA_SET, replica_set())
        await c.settle()
        pods = c.pods()
        assert len(pods) == 3
        for p in pods:
            assert re.fullmatch(f"web-[{ALPHANUMS}]{{5}}", p["metadata"]["name"])
            assert p["metadata"]["labels"] == {"app": "web"}
            assert p["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        st = c.store.get(REPLICA_SET, "default", "web")["status"]
        assert st == {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                      "terminatingReplicas": 0, "observedGeneration": 1}

    run_cluster(scenario)


def test_deleted_pods_are_replaced_and_terminating_ones_do_not_count():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(REPLICA_SET, replica_set(replicas=2))
        await c.settle()
        victim = c.pods()[0]["metadata"]["name"]
        c.store.delete(POD, "default", victim)
        await c.settle(timers=False)
        active = [p for p in c.pods() if not p["metadata"].get("deletionTimestamp")]
        assert len(active) == 2 and victim not in names(active)
        assert c.store.get(REPLICA_SET, "default", "web")["status"]["terminatingReplicas"] == 1

    run_cluster(scenario)


def test_scale_down_deletes_unscheduled_then_pending_then_not_ready_pods():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(REPLICA_SET, replica_set(replicas=4))
        await c.settle()
        a, b, cc, d = names(c.pods())
        for name, status in ((b, {"phase": "Pending"}),
                             (cc, {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}),
                             (d, {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})):
            c.store.bind("default", name, "n1")
            c.store.mutate(POD, "default", name, lambda p, s=status: p.__setitem__("status", s))
        for expected_gone in (a, b, cc):
            scale(c, len([p for p in c.pods() if not p["metadata"].get("deletionTimestamp")]) - 1)
            await c.settle(timers=False)
            left = c.store.try_get(POD, "default", expected_gone)
            assert left is None or left["metadata"].get("deletionTimestamp")
        assert [p["metadata"]["name"] for p in c.pods() if not p["metadata"].get("deletionTimestamp")] == [d]

    run_cluster(scenario, kubelet=False, binder=False)


def test_orphans_matching_the_selector_are_adopted_and_non_matching_pods_released():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("stray", labels={"app": "web"}))
        rs = c.store.create(REPLICA_SET, replica_set(replicas=2))
        await c.settle()
        stray = c.store.get(POD, "default", "stray")
        assert stray["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
        assert len(c.pods()) == 2
        c.store.mutate(POD, "default", "stray", lambda p: p["metadata"].__setitem__("labels", {"app": "other"}))
        await c.settle()
        assert "ownerReferences" not in c.store.get(POD, "default", "stray")["metadata"]
        assert len([p for p in c.pods() if p["metadata"]["labels"] == {"app": "web"}]) == 2

    run_cluster(scenario)


def test_failed_pod_creation_is_reported_and_retried():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        bad = replica_set(replicas=1)
        bad["spec"]["template"]["spec"]["priorityClassName"] = "missing"
        c.store.create(REPLICA_SET, bad)
        await c.settle()
        [cond] = c.store.get(REPLICA_SET, "default", "web")["status"]["conditions"]
        assert (cond["type"], cond["reason"]) == ("ReplicaFailure", "FailedCreate")
        assert "no PriorityClass with name missing was found" in cond["message"]
        assert c.events("FailedCreate")[0]["message"].startswith("Error creating: pods")

    run_cluster(scenario)


def test_replication_controller_defaults_its_selector_and_keeps_replicas():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "legacy"},
              "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "legacy"}},
                                                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
        created = c.store.create(REPLICATION_CONTROLLER, rc)
        assert created["spec"]["selector"] == {"app": "legacy"} and created["metadata"]["labels"] == {"app": "legacy"}
        await c.settle()
        pods = c.pods()
        assert len(pods) == 3
        assert all(re.fullmatch(f"legacy-[{ALPHANUMS}]{{5}}", p["metadata"]["name"]) for p in pods)
        ref = pods[0]["metadata"]["ownerReferences"][0]
        assert (ref["apiVersion"], ref["kind"], ref["uid"]) == ("v1", "ReplicationController", created["metadata"]["uid"])
        scale(c, 1, "legacy", REPLICATION_CONTROLLER)
        await c.settle()
        assert len(c.pods()) == 1
        st = c.store.get(REPLICATION_CONTROLLER, "default", "legacy")["status"]
        assert st["replicas"] == 1 and "terminatingReplicas" not in st

    run_cluster(scenario)


def test_min_ready_seconds_delays_availability():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(REPLICA_SET, replica_set(replicas=1, minReadySeconds=30))
        await c.advance(5)
        st = c.store.get(REPLICA_SET, "default", "web")["status"]
        assert (st["readyReplicas"], st.get("availableReplicas", 0)) == (1, 0)
        assert not c.controllers.idle()  # waiting to recount availability
        await c.advance(30)
        assert c.store.get(REPLICA_SET, "default", "web")["status"]["availableReplicas"] == 1

    run_cluster(scenario)


def test_a_replica_set_without_a_controller_ranks_no_pod_higher_for_sharing_a_node():
    """Upstream ranks by the pods of the ReplicaSets under the same controller, and a ReplicaSet
    with none has no related pods: doubled-up pods are not deleted first, recently ready ones are."""
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.add_node("n2")
        c.store.create(REPLICA_SET, replica_set(replicas=3))
        await c.settle()
        now = c.store.clock.wall()
        placement = dict(zip(names(c.pods()), (("n1", 3000), ("n1", 2000), ("n2", 10)), strict=True))
        for name, (node, ready_ago) in placement.items():
            c.store.bind("default", name, node)
            ready = {"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(now - ready_ago)}
            c.store.mutate(POD, "default", name, lambda p, r=ready: p.__setitem__("status", {"phase": "Running", "conditions": [r]}))
        scale(c, 2)
        await c.settle(timers=False)
        [gone] = [p["metadata"]["name"] for p in c.pods() if p["metadata"].get("deletionTimestamp")]
        assert placement[gone][0] == "n2"

    run_cluster(scenario, kubelet=False, binder=False)
