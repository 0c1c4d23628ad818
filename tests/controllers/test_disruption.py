"""The disruption controller: PodDisruptionBudget status as upstream computes it, its failure
modes, disrupted pods that were never deleted, and stale DisruptionTarget conditions."""

from __future__ import annotations

from kubesched.api.kinds import POD
from kubesched.simulator.controllers.disruption import PDB, go_selector_string
from kubesched.simulator.controllers.util import DEPLOYMENT, REPLICA_SET
from kubesched.utils.clock import rfc3339
from tests.controllers.harness import Cluster, run_cluster
from tests.helpers import make_pod


def budget(name: str = "web", app: str = "web", **spec) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


def workload(kind: str, name: str = "web", replicas: int = 3) -> dict:
    obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    return obj


def status_of(c: Cluster, name: str = "web") -> dict:
    return c.store.get(PDB, "default", name).get("status") or {}


def counts(st: dict) -> tuple[int, int, int, int]:
    return st.get("currentHealthy"), st.get("desiredHealthy"), st.get("expectedPods"), st.get("disruptionsAllowed")


def condition(st: dict) -> tuple[str, str, str]:
    (cond,) = [c for c in st.get("conditions") or [] if c["type"] == "DisruptionAllowed"]
    return cond["status"], cond["reason"], cond["message"]


def test_integer_min_available_counts_matching_ready_pods():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(REPLICA_SET, workload("ReplicaSet"))
        c.store.create(PDB, budget(minAvailable=2))
        await c.settle()
        st = status_of(c)
        assert counts(st) == (3, 2, 3, 1)
        assert condition(st) == ("True", "SufficientPods", "")
        assert st["observedGeneration"] == 1

    run_cluster(scenario)


def test_max_unavailable_percentage_scales_with_the_deployment_not_the_replica_set():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(DEPLOYMENT, workload("Deployment", replicas=4))
        c.store.create(PDB, budget(maxUnavailable="25%"))
        await c.settle()
        assert counts(status_of(c)) == (4, 3, 4, 1)
        c.store.mutate(DEPLOYMENT, "default", "web", lambda d: d["spec"].__setitem__("replicas", 2))
        await c.settle()
        assert counts(status_of(c)) == (2, 1, 2, 1)

    run_cluster(scenario)


def test_pod_events_keep_the_status_current():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        for name in ("a", "b", "c"):
            c.store.create(POD, make_pod(name, node="n1", labels={"app": "web"}))
        c.store.create(PDB, budget(minAvailable=2))
        await c.settle()
        assert counts(status_of(c)) == (3, 2, 3, 1)
        c.store.delete(POD, "default", "a", grace_period=0)
        await c.settle()
        assert counts(status_of(c)) == (2, 2, 2, 0)
        assert condition(status_of(c)) == ("False", "InsufficientPods", "")

    run_cluster(scenario)


def test_unmanaged_pods_are_reported_and_left_out_of_a_percentage():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("loose", node="n1", labels={"app": "web"}))
        c.store.create(PDB, budget(minAvailable="50%"))
        await c.settle()
        assert counts(status_of(c)) == (1, 0, 0, 0)
        (event,) = c.events("UnmanagedPods")
        assert event["type"] == "Warning"
        assert event["message"].startswith("Pods selected by this PodDisruptionBudget (selector: "
                                           "&LabelSelector{MatchLabels:map[string]string{app: web,},"
                                           "MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged.")

    run_cluster(scenario)


def test_a_controller_without_a_scale_fails_safe_with_the_reason():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        pod = make_pod("ds-pod", node="n1", labels={"app": "web"})
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u1",
                                               "controller": True}]
        c.store.create(POD, pod)
        c.store.create(PDB, budget(maxUnavailable=1))
        await c.settle()
        st = status_of(c)
        assert st["disruptionsAllowed"] == 0
        assert condition(st) == ("False", "SyncFailed", "daemonsets.apps does not implement the scale subresource")
        (event,) = c.events("CalculateExpectedPodCountFailed")
        assert event["message"] == ("Failed to calculate the number of expected pods: "
                                    "daemonsets.apps does not implement the scale subresource")

    run_cluster(scenario, collect_dangling=False)


def test_a_budget_without_pods_says_so_and_allows_nothing():
    async def scenario(c: Cluster) -> None:
        c.store.create(PDB, budget(app="nothing", minAvailable=0))
        await c.settle()
        assert counts(status_of(c)) == (0, 0, 0, 0)
        assert [e["message"] for e in c.events("NoPods")] == ["No matching pods found"]

    run_cluster(scenario)


def test_a_disrupted_pod_not_deleted_within_two_minutes_counts_again():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(REPLICA_SET, workload("ReplicaSet", replicas=3))
        c.store.create(PDB, budget(minAvailable=1))
        await c.settle()
        victim = c.pods()[0]["metadata"]["name"]

        def disrupt(pdb: dict) -> None:
            pdb["status"]["disruptedPods"] = {victim: rfc3339(c.store.clock.wall())}
            pdb["status"]["disruptionsAllowed"] = 1

        c.store.mutate(PDB, "default", "web", disrupt)
        await c.settle(timers=False)
        assert counts(status_of(c)) == (2, 1, 3, 1)
        assert victim in status_of(c)["disruptedPods"]
        await c.advance(125)
        assert counts(status_of(c)) == (3, 1, 3, 2)
        assert "disruptedPods" not in status_of(c)
        assert [e["involvedObject"]["name"] for e in c.events("NotDeleted")] == [victim]

    run_cluster(scenario)


def test_a_stale_disruption_target_condition_is_set_to_false_after_two_minutes():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        pod = make_pod("marked", node="n1")
        c.store.create(POD, pod)
        await c.settle()

        def mark(p: dict) -> None:
            p["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                              "lastTransitionTime": rfc3339(c.store.clock.wall())})

        c.store.mutate(POD, "default", "marked", mark)
        await c.advance(60)
        target = lambda: next(x for x in c.store.get(POD, "default", "marked")["status"]["conditions"]  # noqa: E731
                              if x["type"] == "DisruptionTarget")
        assert target()["status"] == "True"
        await c.advance(65)
        assert (target()["status"], target().get("reason")) == ("False", None)

    run_cluster(scenario)


def test_selectors_print_like_gos_generated_string_method():
    raw = {"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "y"]}]}
    assert go_selector_string(raw) == ("&LabelSelector{MatchLabels:map[string]string{a: 1,b: 2,},MatchExpressions:"
                                       "[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[x y],},},}")
    assert go_selector_string(None) == "nil"
