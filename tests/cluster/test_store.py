"""The embedded object store behaves like kube-apiserver for what the scheduler observes."""

import asyncio

import pytest

from kubesched.clock import ManualClock, run_virtual
from kubesched.cluster.errors import AlreadyExists, Conflict, Forbidden, Gone, Invalid, NotFound
from kubesched.cluster.store import NAMESPACE, NODE, POD, PRIORITY_CLASS, ObjectStore


def new_pod(name="p", **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


@pytest.fixture
def store():
    return ObjectStore(ManualClock(), seed=1)


def test_create_assigns_identity_and_increasing_resource_versions(store):
    a = store.create(POD, new_pod("a"))
    b = store.create(POD, new_pod("b"))
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"]
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    with pytest.raises(AlreadyExists, match='pods "a" already exists'):
        store.create(POD, new_pod("a"))


def test_pod_defaulting_and_admission(store):
    pod = store.create(POD, new_pod(containers=[{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}]))
    spec = pod["spec"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["priority"] == 0
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert {t["key"] for t in spec["tolerations"]} == {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    assert pod["status"]["phase"] == "Pending"


def test_priority_class_resolution(store):
    store.create(PRIORITY_CLASS, {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"})
    store.create(PRIORITY_CLASS, {"metadata": {"name": "default"}, "value": 10, "globalDefault": True})
    high = store.create(POD, new_pod("h", priorityClassName="high"))
    assert (high["spec"]["priority"], high["spec"]["preemptionPolicy"]) == (1000, "Never")
    plain = store.create(POD, new_pod("d"))
    assert (plain["spec"]["priority"], plain["spec"]["priorityClassName"]) == (10, "default")
    critical = store.create(POD, new_pod("c", priorityClassName="system-node-critical"))
    assert critical["spec"]["priority"] == 2000001000
    with pytest.raises(Forbidden, match="no PriorityClass with name missing was found"):
        store.create(POD, new_pod("x", priorityClassName="missing"))


def test_namespaces_must_exist_unless_auto_created(store):
    with pytest.raises(NotFound, match='namespaces "team" not found'):
        store.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "team"}})
    auto = ObjectStore(ManualClock(), auto_create_namespaces=True)
    auto.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "team"}})
    assert auto.try_get(NAMESPACE, None, "team") is not None


def test_optimistic_concurrency(store):
    node = store.create(NODE, {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "1"}}})
    stale = dict(node, metadata=dict(node["metadata"]))
    store.update(NODE, dict(node, metadata=dict(node["metadata"]), spec={"unschedulable": True}))
    with pytest.raises(Conflict, match="the object has been modified"):
        store.update(NODE, stale)


def test_binding_rules(store):
    store.create(POD, new_pod("p"))
    store.create(POD, new_pod("gated", schedulingGates=[{"name": "g"}]))
    bound = store.bind("default", "p", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    with pytest.raises(Conflict, match='pod p is already assigned to node "n1"'):
        store.bind("default", "p", "n2")
    with pytest.raises(Conflict, match=r"non-empty \.spec\.schedulingGates"):
        store.bind("default", "gated", "n1")


def test_validation_rejects_bad_objects(store):
    with pytest.raises(Invalid, match=r"spec.containers\[0\].image: Required value"):
        store.create(POD, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})


def test_watch_replays_from_a_resource_version_and_expires_old_ones():
    store = ObjectStore(ManualClock(), history_limit=3)
    for i in range(5):
        store.create(POD, new_pod(f"p{i}"))
    rv = store.rv
    with pytest.raises(Gone, match="too old resource version"):
        store.watch(POD, since=1)
    w = store.watch(POD, since=rv - 1)
    assert [e.object["metadata"]["name"] for e in w.drain()] == ["p4"]
    w.stop()


def test_watch_with_predicate_turns_selector_changes_into_added_and_deleted(store):
    store.create(POD, new_pod("p"))
    w = store.watch(POD, since=store.rv, predicate=lambda o: bool(o["spec"].get("nodeName")))
    store.bind("default", "p", "n1")
    store.delete(POD, "default", "p", grace_period=0)
    assert [e.type for e in w.drain()] == ["ADDED", "DELETED"]


def test_bound_pods_are_deleted_gracefully_on_the_clock():
    async def scenario():
        from kubesched.clock import LoopClock

        store = ObjectStore(LoopClock(asyncio.get_running_loop()))
        store.create(POD, new_pod("p", terminationGracePeriodSeconds=30))
        store.bind("default", "p", "n1")
        store.delete(POD, "default", "p")
        terminating = store.get(POD, "default", "p")
        assert terminating["metadata"]["deletionTimestamp"]
        await asyncio.sleep(29)
        assert store.try_get(POD, "default", "p") is not None
        await asyncio.sleep(2)
        return store.try_get(POD, "default", "p")

    assert run_virtual(scenario()) is None


def test_namespace_deletion_cascades(store):
    store.create(NAMESPACE, {"metadata": {"name": "team"}})
    store.create(POD, {**new_pod(), "metadata": {"name": "p", "namespace": "team"}})
    store.delete(NAMESPACE, None, "team")
    assert store.try_get(POD, "team", "p") is None
    assert store.try_get(NAMESPACE, None, "team") is None
