"""The fake kubelet: pods start Running, pods that do not fit are rejected with upstream kubelet's
reasons, NoExecute taints evict, deletions complete."""

import asyncio
import ipaddress

import pytest

from kubesched.api.kinds import NODE, POD
from kubesched.api.meta import json_copy
from kubesched.api.schema_validation import decode_field
from kubesched.api.types import NodeInfo, PodInfo, Taint, Toleration
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.kubelet import (
    ORPHAN_QUARANTINE,
    FakeKubelet,
    Rejection,
    admission_failure,
    matching_tolerations,
    min_toleration_seconds,
)
from tests.controllers.harness import Cluster, run_cluster
from tests.helpers import make_node, make_pod


def status(cluster: Cluster, name: str) -> dict:
    return cluster.store.get(POD, "default", name).get("status") or {}


# --- Running ---------------------------------------------------------------------------------------
def test_bound_pod_starts_running_with_ip_from_node_cidr_and_ready_conditions():
    async def scenario(c: Cluster) -> None:
        node = make_node("n1")
        node["spec"]["podCIDR"] = "10.244.3.0/24"
        node["status"]["addresses"] = [{"type": "InternalIP", "address": "172.18.0.3"}]
        c.store.create(NODE, node)
        c.store.create(POD, make_pod("web", cpu="100m"))
        await c.settle()
        st = status(c, "web")
        assert st["phase"] == "Running"
        assert st["startTime"] == "2025-01-01T00:00:00Z"
        assert ipaddress.ip_address(st["podIP"]) in ipaddress.ip_network("10.244.3.0/24")
        assert st["podIPs"] == [{"ip": st["podIP"]}]
        assert st["hostIP"] == "172.18.0.3"
        conditions = {c["type"]: c["status"] for c in st["conditions"]}
        assert conditions == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                              "ContainersReady": "True", "PodScheduled": "True"}
        [container] = st["containerStatuses"]
        assert container["ready"] and container["state"]["running"]

    run_cluster(scenario, controllers=False)


def test_pods_without_node_cidr_get_distinct_cluster_ips_and_host_network_pods_the_node_ip():
    async def scenario(c: Cluster) -> None:
        node = make_node("n1")
        node["status"]["addresses"] = [{"type": "InternalIP", "address": "172.18.0.9"}]
        c.store.create(NODE, node)
        for i in range(3):
            c.store.create(POD, make_pod(f"p{i}"))
        c.store.create(POD, make_pod("host", hostNetwork=True))
        await c.settle()
        ips = [status(c, f"p{i}")["podIP"] for i in range(3)]
        assert len(set(ips)) == 3
        assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.244.0.0/16") for ip in ips)
        assert status(c, "host")["podIP"] == "172.18.0.9"

    run_cluster(scenario, controllers=False)


def test_pod_bound_to_a_missing_node_stays_pending_until_the_node_appears():
    async def scenario(c: Cluster) -> None:
        c.store.create(POD, make_pod("p", node="kube01"))
        await c.advance(30)
        assert status(c, "p")["phase"] == "Pending"
        c.add_node("kube01")
        await c.settle()
        assert status(c, "p")["phase"] == "Running"
        await c.advance(60)  # the node came back within PodGC's quarantine: the pod stays
        assert status(c, "p")["phase"] == "Running"

    run_cluster(scenario, controllers=False, binder=False)


@pytest.mark.parametrize("bound_first", [True, False], ids=["node deleted under a running pod", "pod bound to a missing node"])
def test_pod_gc_deletes_pods_of_a_missing_node_after_the_quarantine(bound_first):
    async def scenario(c: Cluster) -> None:
        if bound_first:
            c.add_node("n1")
        c.store.create(POD, make_pod("p", node="n1"))
        await c.advance(1)
        if bound_first:
            assert status(c, "p")["phase"] == "Running"
            c.store.delete(NODE, None, "n1")
        last_status: list[dict] = []
        c.store.write_hooks.append(lambda _rv, kind, event: last_status.append(event.object.get("status") or {})
                                   if kind == POD and event.type != "DELETED" else None)
        await c.advance(ORPHAN_QUARANTINE - 2)
        assert c.store.try_get(POD, "default", "p") is not None
        assert not c.kubelet.idle()  # the collection is pending
        await c.advance(3)
        assert c.store.try_get(POD, "default", "p") is None
        assert last_status[-1]["phase"] == "Failed"
        [target] = [x for x in last_status[-1]["conditions"] if x["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == ("True", "DeletionByPodGC", "PodGC: node no longer exists")
        assert c.kubelet.idle()

    run_cluster(scenario, controllers=False, binder=False)


def test_init_containers_completed_and_sidecars_running():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p", initContainers=[
            {"name": "setup", "image": "busybox"}, {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]))
        await c.settle()
        init = {s["name"]: s for s in status(c, "p")["initContainerStatuses"]}
        assert init["setup"]["state"]["terminated"]["reason"] == "Completed"
        assert "running" in init["proxy"]["state"]

    run_cluster(scenario, controllers=False)


# --- admission -------------------------------------------------------------------------------------
ADMISSION_CASES = [
    pytest.param(
        dict(cpu="4"), [make_pod("old", cpu="3500m", node="kube01")], make_pod("p", cpu="2", node="kube01"),
        Rejection("OutOfcpu", "Node didn't have enough resource: cpu, requested: 2000, used: 3500, capacity: 4000"),
        id="insufficient cpu"),
    pytest.param(
        dict(memory="1Gi"), [], make_pod("p", memory="2Gi", node="kube01"),
        Rejection("OutOfmemory", "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"),
        id="insufficient memory"),
    pytest.param(
        dict(pods="1"), [make_pod("old", node="kube01")], make_pod("p", node="kube01"),
        Rejection("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1"),
        id="too many pods"),
    pytest.param(
        dict(extra={"example.com/gpu": "1"}), [],
        make_pod("p", node="kube01", containers=[{"name": "c", "image": "i", "resources": {"requests": {"example.com/gpu": "2"}}}]),
        Rejection("OutOfexample.com/gpu", "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"),
        id="insufficient extended resource"),
    pytest.param(
        dict(), [], make_pod("p", node="kube01",
                             containers=[{"name": "c", "image": "i", "resources": {"requests": {"example.com/gpu": "2"}}}]),
        None, id="extended resource unknown to the node is ignored"),
    pytest.param(
        dict(), [], make_pod("p", node="kube01", nodeSelector={"disk": "ssd"}),
        Rejection("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"),
        id="node selector"),
    pytest.param(
        dict(), [], make_pod("p", node="kube01", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
        Rejection("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"),
        id="required node affinity"),
    pytest.param(
        dict(), [make_pod("old", node="kube01", containers=[{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}])],
        make_pod("p", node="kube01", containers=[{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}]),
        Rejection("NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"),
        id="host port in use"),
    pytest.param(
        dict(taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}]), [], make_pod("p", node="kube01"),
        Rejection("TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"),
        id="untolerated NoExecute taint"),
    pytest.param(
        dict(taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]), [], make_pod("p", node="kube01"),
        None, id="NoSchedule taints do not matter to the kubelet"),
    pytest.param(
        dict(), [], make_pod("p", node="kube01", labels={"kubernetes.io/os": "windows"}),
        Rejection("PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"),
        id="os label"),
    pytest.param(
        dict(), [], make_pod("p", node="kube01", os={"name": "windows"}),
        Rejection("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"),
        id="os field"),
    pytest.param(
        dict(cpu="4", memory="1Gi"), [make_pod("old", cpu="3", node="kube01")], make_pod("p", cpu="2", memory="2Gi", node="kube01"),
        Rejection("OutOfcpu", "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"),
        id="first insufficient resource wins"),
]


@pytest.mark.parametrize(("node_kwargs", "running", "pod", "expected"), ADMISSION_CASES)
def test_admission(node_kwargs, running, pod, expected):
    info = NodeInfo(make_node("kube01", **node_kwargs))
    for other in running:
        info.add_pod(PodInfo(other))
    assert admission_failure(PodInfo(pod), info) == expected


def test_rejected_pod_fails_with_reason_message_and_event():
    async def scenario(c: Cluster) -> None:
        c.add_node("kube01", cpu="4")
        c.store.create(POD, make_pod("old", cpu="3500m", node="kube01"))
        await c.settle()
        c.store.create(POD, make_pod("p", cpu="2", node="kube01"))
        c.store.create(POD, make_pod("sel", node="kube01", nodeSelector={"disk": "ssd"}))
        await c.settle()
        st = status(c, "p")
        assert (st["phase"], st["reason"]) == ("Failed", "OutOfcpu")
        assert st["message"] == "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 3500, capacity: 4000"
        assert st["qosClass"] == "Burstable"
        sel = status(c, "sel")
        assert (sel["phase"], sel["reason"]) == ("Failed", "NodeAffinity")
        assert sel["message"] == "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
        [event] = c.events("OutOfcpu")
        assert event["type"] == "Warning" and event["source"] == {"component": "kubelet", "host": "kube01"}
        assert event["involvedObject"]["name"] == "p"
        assert status(c, "old")["phase"] == "Running"

    run_cluster(scenario, controllers=False, binder=False)


def test_admission_follows_creation_order_and_skips_failed_pods():
    async def scenario(c: Cluster) -> None:
        c.add_node("kube01", cpu="4")
        c.store.create(POD, make_pod("a", cpu="3", node="kube01"))
        c.store.create(POD, make_pod("b", cpu="3", node="kube01"))  # same batch: the older one wins
        await c.settle()
        assert (status(c, "a")["phase"], status(c, "b")["phase"]) == ("Running", "Failed")
        c.store.delete(POD, "default", "a", grace_period=0)
        c.store.create(POD, make_pod("c", cpu="3", node="kube01"))  # b (Failed) holds nothing
        await c.settle()
        assert status(c, "c")["phase"] == "Running"

    run_cluster(scenario, controllers=False, binder=False)


@pytest.mark.parametrize(("batch_limit", "running_after_first_pass"), [
    pytest.param(None, 5, id="every pending event at once"),
    pytest.param(2, 1, id="at most two events, then the loop's other tasks"),
])
async def test_batch_limit_yields_to_the_event_loop_between_batches(batch_limit, running_after_first_pass):
    store = ObjectStore()
    store.create(NODE, make_node("kube01"))
    for i in range(5):
        store.create(POD, make_pod(f"p{i}", node="kube01"))
    kubelet = FakeKubelet(store, batch_limit=batch_limit)
    kubelet.start()
    try:
        await asyncio.sleep(0)
        running = [sum(1 for p in store.iter_all(POD) if (p.get("status") or {}).get("phase") == "Running")]
        while running[-1] < 5:
            await asyncio.sleep(0)
            running.append(sum(1 for p in store.iter_all(POD) if (p.get("status") or {}).get("phase") == "Running"))
    finally:
        await kubelet.stop()
    assert running[0] == running_after_first_pass
    assert running == sorted(running)


def test_pods_already_running_in_manifests_count_for_admission():
    async def scenario(c: Cluster) -> None:
        c.add_node("kube01", cpu="4")
        running = make_pod("loaded", cpu="3", node="kube01")
        running["status"] = {"phase": "Running"}
        c.store.create(POD, running)
        c.store.create(POD, make_pod("p", cpu="2", node="kube01"))
        await c.settle()
        assert status(c, "p")["reason"] == "OutOfcpu"

    run_cluster(scenario, controllers=False, binder=False)


# --- NoExecute taints ------------------------------------------------------------------------------
NO_EXECUTE = {"key": "maintenance", "value": "true", "effect": "NoExecute"}


def taint_node(c: Cluster, name: str, taints: list[dict]) -> None:
    c.store.mutate(NODE, None, name, lambda n: n["spec"].__setitem__("taints", taints))


@pytest.mark.parametrize(("tolerations", "expected"), [
    pytest.param([], (False, None), id="no toleration"),
    pytest.param([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}], (True, -1.0), id="forever"),
    pytest.param([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
                  {"operator": "Exists", "tolerationSeconds": 30}], (True, 60.0), id="first matching toleration is used"),
    pytest.param([{"operator": "Exists", "tolerationSeconds": 0}], (True, 0.0), id="zero seconds evicts now"),
    pytest.param([{"operator": "Exists", "tolerationSeconds": -5}], (True, 0.0), id="negative seconds evicts now"),
])
def test_toleration_time(tolerations, expected):
    taints = [Taint.from_dict(NO_EXECUTE)]
    tolerated, used = matching_tolerations(taints, [Toleration.from_dict(t) for t in tolerations])
    assert (tolerated, min_toleration_seconds(used) if tolerated else None) == expected


def test_untolerated_no_execute_taint_evicts_at_once_with_disruption_target():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p"))
        await c.settle()
        taint_node(c, "n1", [NO_EXECUTE])
        await c.settle(timers=False)
        pod = c.store.get(POD, "default", "p")
        assert pod["metadata"]["deletionTimestamp"]
        [target] = [x for x in pod["status"]["conditions"] if x["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == (
            "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
        assert c.events("TaintManagerEviction")[0]["message"] == "Marking for deletion Pod default/p"
        await c.settle()
        assert c.store.try_get(POD, "default", "p") is None

    run_cluster(scenario, controllers=False)


def test_toleration_seconds_delay_the_eviction():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p", tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
                                                        "tolerationSeconds": 60}]))
        await c.settle()
        taint_node(c, "n1", [NO_EXECUTE])
        await c.advance(59)
        assert not c.store.get(POD, "default", "p")["metadata"].get("deletionTimestamp")
        await c.advance(2)
        assert c.store.get(POD, "default", "p")["metadata"].get("deletionTimestamp")

    run_cluster(scenario, controllers=False)


def test_removing_the_taint_cancels_the_eviction():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p", tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
                                                        "tolerationSeconds": 60}]))
        await c.settle()
        taint_node(c, "n1", [NO_EXECUTE])
        await c.advance(30)
        assert not c.kubelet.idle()  # an eviction is scheduled
        taint_node(c, "n1", [])
        await c.settle()
        await c.advance(120)
        assert status(c, "p")["phase"] == "Running"
        assert not c.store.get(POD, "default", "p")["metadata"].get("deletionTimestamp")
        assert [e["message"] for e in c.events("TaintManagerEviction")] == ["Cancelling deletion of Pod default/p"]

    run_cluster(scenario, controllers=False)


def test_pods_tolerating_forever_stay_and_new_pods_on_a_tainted_node_are_evaluated():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1", taints=[NO_EXECUTE])
        c.store.create(POD, make_pod("forever", tolerations=[{"key": "maintenance", "operator": "Exists"}]))
        c.store.create(POD, make_pod("brief", tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
                                                           "tolerationSeconds": 10}]))
        await c.settle(timers=False)  # returns once the 10s eviction has happened
        assert 10 <= c.now() < 11
        assert not c.store.get(POD, "default", "forever")["metadata"].get("deletionTimestamp")
        assert c.store.get(POD, "default", "brief")["metadata"].get("deletionTimestamp")

    run_cluster(scenario, controllers=False)


# --- deletion --------------------------------------------------------------------------------------
def test_terminating_pod_on_a_missing_node_is_removed_at_once():
    async def scenario(c: Cluster) -> None:
        c.store.create(POD, make_pod("p", node="gone"))
        await c.advance(1)
        c.store.delete(POD, "default", "p")
        await c.settle(timers=False)
        assert c.store.try_get(POD, "default", "p") is None

    run_cluster(scenario, controllers=False, binder=False)


def test_graceful_deletion_on_a_live_node_takes_the_grace_period():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p", terminationGracePeriodSeconds=20))
        await c.settle()
        c.store.delete(POD, "default", "p")
        await c.advance(19)
        assert c.store.try_get(POD, "default", "p") is not None
        await c.advance(2)
        assert c.store.try_get(POD, "default", "p") is None
        c.store.create(POD, make_pod("q"))
        await c.settle()
        c.store.delete(POD, "default", "q", grace_period=0)
        assert c.store.try_get(POD, "default", "q") is None

    run_cluster(scenario, controllers=False)


def test_kubelet_is_idle_once_everything_is_processed():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p"))
        assert not c.kubelet.idle()
        await c.settle()
        assert c.kubelet.idle()

    run_cluster(scenario, controllers=False)



def test_kubelet_events_at_one_instant_are_all_kept():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1", taints=[NO_EXECUTE])
        c.store.create(POD, make_pod("p", node="n1"))
        await c.advance(1)
        # the kubelet's rejection and the taint manager's eviction, written at the same virtual instant
        assert sorted(e["reason"] for e in c.events()) == ["TaintManagerEviction", "TaintToleration"]

    run_cluster(scenario, controllers=False, binder=False)


def test_a_repeated_kubelet_event_is_counted_on_the_first():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("p", tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute",
                                                        "tolerationSeconds": 60}]))
        await c.settle()
        for _ in range(2):
            taint_node(c, "n1", [NO_EXECUTE])
            await c.advance(5)
            taint_node(c, "n1", [])
            await c.advance(5)
        [cancelled] = [e for e in c.events("TaintManagerEviction") if e["message"].startswith("Cancelling")]
        assert cancelled["count"] == 2

    run_cluster(scenario, controllers=False)


def test_the_statuses_the_kubelet_writes_are_what_the_apis_decoding_keeps():
    """The kubelet's status writes skip the store's type check (``mutate(status_only=True)``): each
    status it writes (running, with init containers and sidecars, rejected, evicted, and the node's
    own) must pass that check unchanged."""
    async def scenario(c: Cluster) -> None:
        c.add_node("n1", cpu="4")
        c.store.create(POD, make_pod("run", cpu="3500m", initContainers=[
            {"name": "setup", "image": "busybox"}, {"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]))
        await c.settle()
        c.store.create(POD, make_pod("rejected", cpu="2", node="n1"))
        await c.settle()
        pods = [c.store.get(POD, "default", name) for name in ("run", "rejected")]
        taint_node(c, "n1", [NO_EXECUTE])
        await c.settle(timers=False)
        pods.append(c.store.get(POD, "default", "run"))
        assert [p["status"]["phase"] for p in pods] == ["Running", "Failed", "Running"]
        assert pods[0]["status"]["initContainerStatuses"]
        assert any(x["type"] == "DisruptionTarget" for x in pods[2]["status"]["conditions"])
        for kind, obj in [("Pod", pod) for pod in pods] + [("Node", c.store.get(NODE, None, "n1"))]:
            written = json_copy(obj)
            decode_field(written, "v1", kind, "status")
            assert written == obj

    run_cluster(scenario, controllers=False)
