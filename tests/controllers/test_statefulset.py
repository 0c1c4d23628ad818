"""The StatefulSet controller: ordinal names and labels, ordered or parallel creation, PVCs from
claim templates, scale-down from the highest ordinal, rolling template updates."""

from kubesched.api.kinds import POD
from kubesched.simulator.controllers.statefulset import POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL
from kubesched.simulator.controllers.util import PVC, STATEFUL_SET
from tests.controllers.harness import Cluster, run_cluster


def stateful_set(name: str = "web", replicas: int = 3, **spec) -> dict:
    obj = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
           "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}, **spec}}
    return obj


def pod_names(c: Cluster, active_only: bool = True) -> list[str]:
    return [p["metadata"]["name"] for p in c.pods() if not active_only or not p["metadata"].get("deletionTimestamp")]


def test_pods_get_ordinal_names_identity_labels_and_claims():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        sts = c.store.create(STATEFUL_SET, stateful_set(volumeClaimTemplates=[
            {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]))
        await c.settle()
        assert pod_names(c) == ["web-0", "web-1", "web-2"]
        pod = c.store.get(POD, "default", "web-1")
        labels = pod["metadata"]["labels"]
        assert (labels["app"], labels[POD_NAME_LABEL], labels[POD_INDEX_LABEL]) == ("web", "web-1", "1")
        assert labels[REVISION_LABEL].startswith("web-")
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-1", "web")
        assert pod["spec"]["volumes"][0] == {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}
        assert pod["metadata"]["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]
        claims = sorted(p["metadata"]["name"] for p in c.store.iter_all(PVC))
        assert claims == ["data-web-0", "data-web-1", "data-web-2"]
        claim = c.store.get(PVC, "default", "data-web-0")
        assert claim["metadata"]["labels"] == {"app": "web"} and "ownerReferences" not in claim["metadata"]
        st = c.store.get(STATEFUL_SET, "default", "web")["status"]
        assert (st["replicas"], st["readyReplicas"], st["availableReplicas"], st["updatedReplicas"]) == (3, 3, 3, 3)
        assert st["currentRevision"] == st["updateRevision"] == labels[REVISION_LABEL]

    run_cluster(scenario)


def test_ordered_ready_creates_one_pod_at_a_time():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        order: list[str] = []

        def watch(_rv, kind, event) -> None:
            if kind == POD and event.type == "ADDED":
                running = [p["metadata"]["name"] for p in c.store.iter_all(POD) if (p.get("status") or {}).get("phase") == "Running"]
                order.append(f"{event.object['metadata']['name']} after {','.join(sorted(running)) or '-'}")

        c.store.write_hooks.append(watch)
        c.store.create(STATEFUL_SET, stateful_set())
        await c.settle()
        assert order == ["web-0 after -", "web-1 after web-0", "web-2 after web-0,web-1"]

    run_cluster(scenario)


def test_ordered_ready_waits_for_an_unschedulable_pod():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        sts = stateful_set()
        sts["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "missing"}
        c.store.create(STATEFUL_SET, sts)
        await c.settle()
        assert pod_names(c) == ["web-0"]

    run_cluster(scenario)


def test_parallel_creates_every_pod_at_once():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        sts = stateful_set(podManagementPolicy="Parallel")
        sts["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "missing"}
        c.store.create(STATEFUL_SET, sts)
        await c.settle()
        assert pod_names(c) == ["web-0", "web-1", "web-2"]

    run_cluster(scenario)


def test_scale_down_removes_the_highest_ordinal_first():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(STATEFUL_SET, stateful_set(replicas=4))
        await c.settle()
        c.store.mutate(STATEFUL_SET, "default", "web", lambda s: s["spec"].__setitem__("replicas", 2))
        await c.settle(timers=False)
        assert pod_names(c) == ["web-0", "web-1", "web-2"]  # web-3 terminating, web-2 waits for it
        await c.settle()
        assert pod_names(c, active_only=False) == ["web-0", "web-1"]
        messages = [e["message"] for e in c.events("SuccessfulDelete")]
        assert messages == ["delete Pod web-3 in StatefulSet web successful", "delete Pod web-2 in StatefulSet web successful"]

    run_cluster(scenario)


def test_start_ordinal():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(STATEFUL_SET, stateful_set(replicas=2, ordinals={"start": 5}))
        await c.settle()
        assert pod_names(c) == ["web-5", "web-6"]

    run_cluster(scenario)


def test_template_change_rolls_pods_from_the_highest_ordinal():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(STATEFUL_SET, stateful_set())
        await c.settle()
        c.store.mutate(STATEFUL_SET, "default", "web",
                       lambda s: s["spec"]["template"]["spec"]["containers"][0].__setitem__("image", "nginx:2"))
        await c.settle()
        images = {p["metadata"]["name"]: p["spec"]["containers"][0]["image"] for p in c.pods()}
        assert images == {"web-0": "nginx:2", "web-1": "nginx:2", "web-2": "nginx:2"}
        deleted = [e["message"].split()[2] for e in c.events("SuccessfulDelete")]
        assert deleted == ["web-2", "web-1", "web-0"]
        st = c.store.get(STATEFUL_SET, "default", "web")["status"]
        assert st["currentRevision"] == st["updateRevision"] and st["updatedReplicas"] == 3

    run_cluster(scenario)


def test_claims_follow_the_retention_policy():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        sts = stateful_set(replicas=2, volumeClaimTemplates=[{"metadata": {"name": "data"}, "spec": {}}],
                           persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete", "whenScaled": "Delete"})
        created = c.store.create(STATEFUL_SET, sts)
        await c.settle()
        claim = c.store.get(PVC, "default", "data-web-1")
        assert claim["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
        c.store.mutate(STATEFUL_SET, "default", "web", lambda s: s["spec"].__setitem__("replicas", 1))
        await c.settle()
        assert c.store.try_get(PVC, "default", "data-web-1") is None
        c.store.delete(STATEFUL_SET, "default", "web")
        await c.settle()
        assert list(c.store.iter_all(PVC)) == [] and c.pods() == []

    run_cluster(scenario)


def test_on_delete_replaces_pods_only_when_deleted_and_never_completes_the_rollout():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(STATEFUL_SET, stateful_set(replicas=2, updateStrategy={"type": "OnDelete"}))
        await c.settle()
        c.store.mutate(STATEFUL_SET, "default", "web",
                       lambda s: s["spec"]["template"]["spec"]["containers"][0].__setitem__("image", "nginx:2"))
        await c.settle()
        assert {p["spec"]["containers"][0]["image"] for p in c.pods()} == {"nginx"}
        for name in pod_names(c):
            c.store.delete(POD, "default", name, grace_period=0)
        await c.settle()
        assert {p["spec"]["containers"][0]["image"] for p in c.pods()} == {"nginx:2"}
        st = c.store.get(STATEFUL_SET, "default", "web")["status"]
        assert (st["updatedReplicas"], st["readyReplicas"]) == (2, 2)
        assert st["currentRevision"] != st["updateRevision"]  # completeRollingUpdate is for RollingUpdate only

    run_cluster(scenario)
