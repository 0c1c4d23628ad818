"""The garbage collector: dependents of a deleted owner go (background), objects keeping another
owner only lose the dangling reference, orphan and foreground finalizers."""

from kubesched.api.kinds import NODE, POD
from kubesched.simulator.controllers.util import DEPLOYMENT, REPLICA_SET
from tests.controllers.harness import Cluster, run_cluster
from tests.controllers.test_deployment import deployment
from tests.helpers import make_pod


def owned_pod(name: str, *owners: dict) -> dict:
    pod = make_pod(name)
    del pod["metadata"]["uid"]
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}
        for o in owners]
    return pod


def test_deleting_a_deployment_deletes_its_replica_sets_and_pods():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2))
        await c.settle()
        assert c.store.count(REPLICA_SET) == 1 and len(c.pods()) == 2
        c.store.delete(DEPLOYMENT, "default", "nginx")
        await c.settle()
        assert c.store.count(REPLICA_SET) == 0 and c.pods() == []

    run_cluster(scenario)


def test_dependent_with_a_remaining_owner_only_loses_the_dangling_reference():
    async def scenario(c: Cluster) -> None:
        a = c.add_node("a")
        b = c.add_node("b")
        c.store.create(POD, owned_pod("shared", a, b))
        await c.settle()
        c.store.delete(NODE, None, "a")
        await c.settle()
        refs = c.store.get(POD, "default", "shared")["metadata"]["ownerReferences"]
        assert [r["name"] for r in refs] == ["b"]
        c.store.delete(NODE, None, "b")
        await c.settle()
        assert c.store.try_get(POD, "default", "shared") is None

    run_cluster(scenario, controllers=True, kubelet=False, binder=False)


def test_objects_created_with_absent_owners_are_collected_unless_disabled():
    async def scenario(c: Cluster) -> None:
        ghost = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ghost", "uid": "not-there"}}
        crd = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "uid": "crd-uid"}}
        c.store.create(POD, owned_pod("dangling", ghost))
        c.store.create(POD, owned_pod("custom", crd))
        await c.settle()
        assert c.store.try_get(POD, "default", "dangling") is None
        assert c.store.try_get(POD, "default", "custom") is not None  # unknown kinds are never absent

    run_cluster(scenario, kubelet=False, binder=False)

    async def kept(c: Cluster) -> None:
        ghost = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ghost", "uid": "not-there"}}
        c.store.create(POD, owned_pod("dangling", ghost))
        await c.settle()
        assert c.store.try_get(POD, "default", "dangling") is not None

    run_cluster(kept, kubelet=False, binder=False, collect_dangling=False)


def test_orphan_finalizer_keeps_dependents_and_strips_their_reference():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2))
        await c.settle()
        c.store.mutate(DEPLOYMENT, "default", "nginx", lambda d: d["metadata"].__setitem__("finalizers", ["orphan"]))
        c.store.delete(DEPLOYMENT, "default", "nginx")
        await c.settle()
        assert c.store.try_get(DEPLOYMENT, "default", "nginx") is None
        [rs] = c.store.iter_all(REPLICA_SET)
        assert "ownerReferences" not in rs["metadata"]
        assert len(c.pods()) == 2

    run_cluster(scenario)


def test_foreground_deletion_removes_dependents_before_the_owner():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2))
        await c.settle()
        c.store.mutate(DEPLOYMENT, "default", "nginx",
                       lambda d: d["metadata"].__setitem__("finalizers", ["foregroundDeletion"]))
        c.store.delete(DEPLOYMENT, "default", "nginx")
        await c.settle(timers=False)
        assert c.store.try_get(DEPLOYMENT, "default", "nginx") is not None  # its pods are still terminating
        await c.settle()
        assert c.store.try_get(DEPLOYMENT, "default", "nginx") is None
        assert c.store.count(REPLICA_SET) == 0 and c.pods() == []

    run_cluster(scenario)
