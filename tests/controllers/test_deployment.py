"""The Deployment controller: ReplicaSets named by template hash, pods with owners and labels,
scaling, rolling and recreate rollouts, proportional scaling, status and conditions."""

import re

import pytest

from kubesched.api.kinds import POD
from kubesched.simulator.controllers.deployment import MAX_REPLICAS, REVISION, get_proportion
from kubesched.simulator.controllers.util import ALPHANUMS, DEPLOYMENT, REPLICA_SET, compute_hash
from tests.controllers.harness import Cluster, run_cluster


def deployment(name: str = "nginx", replicas: int = 3, image: str = "nginx", **spec) -> dict:
    """What ``kubectl create deployment nginx --image=nginx --replicas=3`` sends (the store defaults it)."""
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": name, "image": image}]}}, **spec}}
    return obj


def replica_sets(c: Cluster) -> list[dict]:
    return sorted(c.store.iter_all(REPLICA_SET), key=lambda rs: rs["metadata"]["creationTimestamp"])


def active_pods(c: Cluster) -> list[dict]:
    return [p for p in c.pods() if not p["metadata"].get("deletionTimestamp")]


def set_image(c: Cluster, image: str, name: str = "nginx") -> None:
    c.store.mutate(DEPLOYMENT, "default", name,
                   lambda d: d["spec"]["template"]["spec"]["containers"][0].__setitem__("image", image))


def scale(c: Cluster, replicas: int, name: str = "nginx") -> None:
    c.store.mutate(DEPLOYMENT, "default", name, lambda d: d["spec"].__setitem__("replicas", replicas))


def test_deployment_creates_replica_set_and_pods_with_names_labels_and_owners():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        d = c.store.create(DEPLOYMENT, deployment())
        await c.settle()
        [rs] = replica_sets(c)
        pod_hash = compute_hash(d["spec"]["template"])
        assert re.fullmatch(f"[{ALPHANUMS}]+", pod_hash)
        assert rs["metadata"]["name"] == f"nginx-{pod_hash}"
        assert rs["metadata"]["labels"] == {"app": "nginx", "pod-template-hash": pod_hash}
        assert rs["spec"]["selector"] == {"matchLabels": {"app": "nginx", "pod-template-hash": pod_hash}}
        assert rs["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx",
                                                      "uid": d["metadata"]["uid"], "controller": True,
                                                      "blockOwnerDeletion": True}]
        assert rs["metadata"]["annotations"] == {REVISION: "1", "deployment.kubernetes.io/desired-replicas": "3",
                                                 "deployment.kubernetes.io/max-replicas": "4"}
        pods = c.pods()
        assert len(pods) == 3
        for pod in pods:
            assert re.fullmatch(f"nginx-{pod_hash}-[{ALPHANUMS}]{{5}}", pod["metadata"]["name"])
            assert pod["metadata"]["labels"] == {"app": "nginx", "pod-template-hash": pod_hash}
            [ref] = pod["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
                "ReplicaSet", rs["metadata"]["name"], rs["metadata"]["uid"], True, True)
            assert pod["status"]["phase"] == "Running"

    run_cluster(scenario)


def test_status_and_conditions_are_what_rollout_status_reads():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment())
        await c.settle()
        d = c.store.get(DEPLOYMENT, "default", "nginx")
        st = d["status"]
        assert d["metadata"]["annotations"][REVISION] == "1"
        assert (st["observedGeneration"], st["replicas"], st["updatedReplicas"], st["readyReplicas"],
                st["availableReplicas"]) == (d["metadata"]["generation"], 3, 3, 3, 3)
        assert "unavailableReplicas" not in st
        conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in st["conditions"]}
        rs_name = replica_sets(c)[0]["metadata"]["name"]
        assert conditions == {
            "Available": ("True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
            "Progressing": ("True", "NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.'),
        }
        [event] = c.events("ScalingReplicaSet")
        assert event["message"] == f"Scaled up replica set {rs_name} to 3"
        assert len(c.events("SuccessfulCreate")) == 3

    run_cluster(scenario)


def test_scale_up_and_down_like_kubectl_scale():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2))
        await c.settle()
        scale(c, 5)
        await c.settle()
        assert len(active_pods(c)) == 5
        [rs] = replica_sets(c)
        assert rs["spec"]["replicas"] == 5
        assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "5"
        scale(c, 1)
        await c.settle()
        assert len(c.pods()) == 1
        assert c.store.get(DEPLOYMENT, "default", "nginx")["status"]["replicas"] == 1
        assert [e["message"] for e in c.events("ScalingReplicaSet")][-2:] == [
            f"Scaled up replica set {rs['metadata']['name']} to 5 from 2",
            f"Scaled down replica set {rs['metadata']['name']} to 1 from 5"]

    run_cluster(scenario)


def test_rolling_update_respects_max_surge_and_max_unavailable():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=4, strategy={
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}))
        await c.settle()
        old_rs = replica_sets(c)[0]["metadata"]["name"]
        seen: list[tuple[int, int]] = []

        def watch(_rv, kind, _event) -> None:
            if kind == REPLICA_SET:
                rss = list(c.store.iter_all(REPLICA_SET))
                seen.append((sum(rs["spec"]["replicas"] for rs in rss),
                             sum(rs.get("status", {}).get("availableReplicas", 0) for rs in rss)))

        c.store.write_hooks.append(watch)
        set_image(c, "nginx:1.27")
        await c.settle()
        c.store.write_hooks.remove(watch)
        assert max(total for total, _ in seen) <= 5  # replicas + maxSurge
        assert min(available for _, available in seen) >= 3  # replicas - maxUnavailable
        old, new = replica_sets(c)
        assert old["metadata"]["name"] == old_rs and old["spec"]["replicas"] == 0
        assert new["spec"]["replicas"] == 4 and new["metadata"]["annotations"][REVISION] == "2"
        assert {p["spec"]["containers"][0]["image"] for p in c.pods()} == {"nginx:1.27"}
        d = c.store.get(DEPLOYMENT, "default", "nginx")
        assert d["metadata"]["annotations"][REVISION] == "2"
        assert (d["status"]["updatedReplicas"], d["status"]["replicas"], d["status"]["availableReplicas"]) == (4, 4, 4)

    run_cluster(scenario)


def test_rolling_back_to_an_old_template_reuses_its_replica_set_and_records_history():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2))
        await c.settle()
        first = replica_sets(c)[0]["metadata"]["name"]
        set_image(c, "nginx:2")
        await c.settle()
        set_image(c, "nginx")
        await c.settle()
        rss = {rs["metadata"]["name"]: rs for rs in replica_sets(c)}
        assert len(rss) == 2
        assert rss[first]["spec"]["replicas"] == 2
        assert rss[first]["metadata"]["annotations"][REVISION] == "3"
        assert rss[first]["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"

    run_cluster(scenario)


def test_recreate_removes_every_old_pod_before_creating_new_ones():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=3, strategy={"type": "Recreate"}))
        await c.settle()
        overlap: list[int] = []

        def watch(_rv, kind, event) -> None:
            if kind == POD:
                images = {p["spec"]["containers"][0]["image"] for p in c.store.iter_all(POD)}
                overlap.append(len(images))

        c.store.write_hooks.append(watch)
        set_image(c, "nginx:2")
        await c.settle()
        c.store.write_hooks.remove(watch)
        assert max(overlap) == 1
        assert [p["spec"]["containers"][0]["image"] for p in c.pods()] == ["nginx:2"] * 3

    run_cluster(scenario)


def test_scaling_during_a_stuck_rollout_is_proportional():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=10, strategy={
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}))
        await c.settle()
        # the new pods can never be placed, so the rollout stops at old=8 new=5
        c.store.mutate(DEPLOYMENT, "default", "nginx",
                       lambda d: d["spec"]["template"]["spec"].__setitem__("nodeSelector", {"pool": "missing"}))
        await c.settle()
        old, new = replica_sets(c)
        assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (8, 5)
        scale(c, 20)
        await c.settle()
        old, new = replica_sets(c)
        # 23 allowed (20 + maxSurge) - 13 = 10 more, split 8:5 -> +6 (14.2) and +4 (8.8)
        assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (14, 9)

    run_cluster(scenario)


def test_stuck_rollout_times_out_after_the_progress_deadline():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2, progressDeadlineSeconds=60))
        await c.settle()
        c.store.mutate(DEPLOYMENT, "default", "nginx",
                       lambda d: d["spec"]["template"]["spec"].__setitem__("nodeSelector", {"pool": "missing"}))
        await c.settle()
        progressing = next(x for x in c.store.get(DEPLOYMENT, "default", "nginx")["status"]["conditions"]
                           if x["type"] == "Progressing")
        assert progressing["reason"] == "ReplicaSetUpdated"
        await c.advance(70)
        await c.settle()
        progressing = next(x for x in c.store.get(DEPLOYMENT, "default", "nginx")["status"]["conditions"]
                           if x["type"] == "Progressing")
        new_rs = replica_sets(c)[-1]["metadata"]["name"]
        assert (progressing["status"], progressing["reason"], progressing["message"]) == (
            "False", "ProgressDeadlineExceeded", f'ReplicaSet "{new_rs}" has timed out progressing.')

    run_cluster(scenario)


def test_paused_deployment_scales_but_does_not_roll_out():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=2))
        await c.settle()
        c.store.mutate(DEPLOYMENT, "default", "nginx", lambda d: d["spec"].__setitem__("paused", True))
        set_image(c, "nginx:2")
        scale(c, 3)
        await c.settle()
        assert len(replica_sets(c)) == 1
        assert [p["spec"]["containers"][0]["image"] for p in c.pods()] == ["nginx"] * 3
        progressing = next(x for x in c.store.get(DEPLOYMENT, "default", "nginx")["status"]["conditions"]
                           if x["type"] == "Progressing")
        assert (progressing["status"], progressing["reason"]) == ("Unknown", "DeploymentPaused")
        c.store.mutate(DEPLOYMENT, "default", "nginx", lambda d: d["spec"].__setitem__("paused", False))
        await c.settle()
        assert [p["spec"]["containers"][0]["image"] for p in c.pods()] == ["nginx:2"] * 3

    run_cluster(scenario)


def test_old_replica_sets_beyond_revision_history_limit_are_deleted():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, deployment(replicas=1, revisionHistoryLimit=1))
        await c.settle()
        for tag in ("2", "3", "4"):
            set_image(c, f"nginx:{tag}")
            await c.settle()
        images = sorted(rs["spec"]["template"]["spec"]["containers"][0]["image"] for rs in replica_sets(c))
        assert images == ["nginx:3", "nginx:4"]

    run_cluster(scenario)


def test_deployment_adopts_a_matching_orphan_replica_set():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        d = deployment(replicas=2)
        template = d["spec"]["template"]
        pod_hash = compute_hash(template)
        orphan = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": f"nginx-{pod_hash}", "labels": {"app": "nginx", "pod-template-hash": pod_hash}},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx", "pod-template-hash": pod_hash}},
                           "template": {**template, "metadata": {"labels": {"app": "nginx", "pod-template-hash": pod_hash}}}}}
        c.store.create(REPLICA_SET, orphan)
        created = c.store.create(DEPLOYMENT, d)
        await c.settle()
        [rs] = replica_sets(c)
        assert rs["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
        assert len(c.pods()) == 2

    run_cluster(scenario)


@pytest.mark.parametrize(("annotation", "expected"), [
    pytest.param("13", 0, id="the annotated size: already in proportion"),
    pytest.param(None, 5, id="missing: the deployment's current size"),
    pytest.param("0", 5, id="zero: the deployment's current size"),
    pytest.param("x", 5, id="unreadable: the deployment's current size"),
])
def test_proportion_of_a_replica_set_falls_back_to_the_deployment_size(annotation, expected):
    """A ReplicaSet of 5 under a Deployment scaled to 10 (+3 surge) that had 5 replicas: its share
    of 5 more is its size over the max-replicas annotation, or over the deployment's status size."""
    d = {"spec": {"replicas": 10, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}},
         "status": {"replicas": 5}}
    rs = {"metadata": {"annotations": {} if annotation is None else {MAX_REPLICAS: annotation}}, "spec": {"replicas": 5}}
    assert get_proportion(rs, d, 5, 0) == expected
