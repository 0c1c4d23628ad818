"""What the fake kubelets report about their nodes (status, Leases) and what the node lifecycle
controller does when a kubelet goes silent: Unknown conditions, unreachable taints, evictions."""

from __future__ import annotations

import pytest

from kubesched.api.kinds import EVENT, POD
from kubesched.api.timeutil import parse_time
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.nodelifecycle import (
    NODE_MONITOR_GRACE_PERIOD,
    NODE_MONITOR_PERIOD,
    STOPPED_MESSAGE,
    UNREACHABLE_TAINT_KEY,
    NodeLifecycleController,
    unknown_conditions,
    with_unreachable_taints,
)
from kubesched.simulator.nodestatus import (
    FAILURE_ANNOTATION,
    KUBELET_VERSION,
    LEASE,
    LEASE_DURATION,
    LEASE_RENEW_INTERVAL,
    NODE,
    NODE_LEASE_NAMESPACE,
    kubelet_conditions,
    node_addresses,
    node_info,
)
from kubesched.simulator.simulate import simulate
from tests.controllers.harness import Cluster, run_cluster
from tests.helpers import make_node, make_pod

T0 = 1_735_689_600.0  # 2025-01-01T00:00:00Z, the virtual clock's start


def conditions_by_type(node: dict) -> dict[str, dict]:
    return {c["type"]: c for c in node["status"]["conditions"]}


# --- pure helpers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("existing, expected_ready, expected_memory", [
    pytest.param([], ("True", "KubeletReady"), ("False", "KubeletHasSufficientMemory"), id="a new node gets the healthy four"),
    pytest.param([{"type": "Ready", "status": "True"}], ("True", "KubeletReady"), ("False", "KubeletHasSufficientMemory"),
                 id="a bare manifest condition is completed"),
    pytest.param([{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}], ("False", "KubeletNotReady"),
                 ("False", "KubeletHasSufficientMemory"), id="a manifest's NotReady is kept as modelled"),
    pytest.param([{"type": "MemoryPressure", "status": "True", "reason": "KubeletHasInsufficientMemory"}],
                 ("True", "KubeletReady"), ("True", "KubeletHasInsufficientMemory"), id="a manifest's memory pressure is kept"),
    pytest.param([{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}], ("True", "KubeletReady"),
                 ("False", "KubeletHasSufficientMemory"), id="a kubelet back after Unknown posts Ready again"),
])
def test_kubelet_conditions(existing, expected_ready, expected_memory):
    conditions = {c["type"]: c for c in kubelet_conditions(existing, T0)}
    assert list(conditions)[:4] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"]) == expected_ready
    assert (conditions["MemoryPressure"]["status"], conditions["MemoryPressure"]["reason"]) == expected_memory
    assert all(c["lastHeartbeatTime"] == "2025-01-01T00:00:00Z" for c in conditions.values())


def test_kubelet_conditions_keep_the_transition_time_of_an_unchanged_condition_and_others_conditions():
    first = kubelet_conditions([{"type": "NetworkUnavailable", "status": "False", "reason": "RouteCreated"}], T0)
    later = {c["type"]: c for c in kubelet_conditions(first, T0 + 300)}
    assert later["Ready"]["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    assert later["Ready"]["lastHeartbeatTime"] == "2025-01-01T00:05:00Z"
    assert later["Ready"]["message"] == "kubelet is posting ready status"
    assert later["NetworkUnavailable"]["reason"] == "RouteCreated"


@pytest.mark.parametrize("status, expected", [
    pytest.param({}, {"kubeletVersion": KUBELET_VERSION, "operatingSystem": "linux", "architecture": "amd64"},
                 id="defaults"),
    pytest.param({"nodeInfo": {"kubeletVersion": "v1.34.2", "architecture": ""}},
                 {"kubeletVersion": "v1.34.2", "operatingSystem": "linux", "architecture": "amd64"},
                 id="given values win, empty ones do not"),
])
def test_node_info(status, expected):
    node = {"metadata": {"name": "n1", "uid": "abc"}, "status": status}
    info = node_info(node)
    assert {k: info[k] for k in expected} == expected
    assert info["machineID"] == node_info(node)["machineID"] != node_info({"metadata": {"uid": "other"}})["machineID"]


@pytest.mark.parametrize("status, labels, expected", [
    pytest.param({}, {}, [{"type": "InternalIP", "address": "172.18.0.2"}, {"type": "Hostname", "address": "n1"}],
                 id="allocated address and the node name"),
    pytest.param({}, {"kubernetes.io/hostname": "host-1"},
                 [{"type": "InternalIP", "address": "172.18.0.2"}, {"type": "Hostname", "address": "host-1"}],
                 id="hostname label"),
    pytest.param({"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]}, {},
                 [{"type": "InternalIP", "address": "10.0.0.7"}], id="manifest addresses are kept"),
])
def test_node_addresses(status, labels, expected):
    node = {"metadata": {"name": "n1", "labels": labels}, "status": status}
    assert node_addresses(node, "172.18.0.2") == expected


@pytest.mark.parametrize("conditions, expected", [
    pytest.param([], {"Ready": ("Unknown", "NodeStatusNeverUpdated"), "PIDPressure": ("Unknown", "NodeStatusNeverUpdated")},
                 id="never posted"),
    pytest.param(kubelet_conditions([], T0), {"Ready": ("Unknown", "NodeStatusUnknown"),
                                              "DiskPressure": ("Unknown", "NodeStatusUnknown")}, id="stopped posting"),
])
def test_unknown_conditions(conditions, expected):
    out = {c["type"]: c for c in unknown_conditions(conditions, T0 + 60)}
    assert {k: (out[k]["status"], out[k]["reason"]) for k in expected} == expected
    assert all(c["lastTransitionTime"] == "2025-01-01T00:01:00Z" for c in out.values())


@pytest.mark.parametrize("taints, unreachable, expected", [
    pytest.param([], True, [(UNREACHABLE_TAINT_KEY, "NoSchedule"), (UNREACHABLE_TAINT_KEY, "NoExecute")], id="added"),
    pytest.param([{"key": "gpu", "effect": "NoSchedule"}, {"key": UNREACHABLE_TAINT_KEY, "effect": "NoSchedule"}], True,
                 [("gpu", "NoSchedule"), (UNREACHABLE_TAINT_KEY, "NoSchedule"), (UNREACHABLE_TAINT_KEY, "NoExecute")],
                 id="not doubled, others kept"),
    pytest.param([{"key": "gpu", "effect": "NoSchedule"}, {"key": UNREACHABLE_TAINT_KEY, "effect": "NoExecute"}], False,
                 [("gpu", "NoSchedule")], id="lifted"),
])
def test_with_unreachable_taints(taints, unreachable, expected):
    assert [(t["key"], t["effect"]) for t in with_unreachable_taints(taints, unreachable, T0)] == expected


# --- the kubelet's reports over time ---------------------------------------------------------------
def test_kubelet_registers_each_node_ready_and_renews_its_lease():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(NODE, {**make_node("n2"), "spec": {"unschedulable": True}})
        await c.settle()
        for name in ("n1", "n2"):
            node = c.store.get(NODE, None, name)
            ready = conditions_by_type(node)["Ready"]
            assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")
            assert node["status"]["nodeInfo"]["kubeletVersion"] == KUBELET_VERSION
            assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
            lease = c.store.get(LEASE, NODE_LEASE_NAMESPACE, name)
            assert lease["spec"]["holderIdentity"] == name and lease["spec"]["leaseDurationSeconds"] == LEASE_DURATION
            assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        first = parse_time(c.store.get(LEASE, NODE_LEASE_NAMESPACE, "n1")["spec"]["renewTime"])
        await c.advance(3 * LEASE_RENEW_INTERVAL)
        renewed = parse_time(c.store.get(LEASE, NODE_LEASE_NAMESPACE, "n1")["spec"]["renewTime"])
        assert renewed - first >= 2 * LEASE_RENEW_INTERVAL

    run_cluster(scenario, controllers=False)


def test_pods_get_the_registered_nodes_address_as_host_ip():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("web"))
        await c.settle()
        node_ip = c.store.get(NODE, None, "n1")["status"]["addresses"][0]["address"]
        assert c.store.get(POD, "default", "web")["status"]["hostIP"] == node_ip

    run_cluster(scenario, controllers=False)


def test_deleted_running_pod_is_removed_after_the_termination_delay():
    async def scenario(c: Cluster) -> None:
        assert c.kubelet is not None
        c.kubelet.termination_delay = 2.0
        c.add_node("n1")
        c.store.create(POD, make_pod("web"))
        await c.settle()
        c.store.delete(POD, "default", "web")
        await c.advance(1.0)
        assert c.store.try_get(POD, "default", "web") is not None
        await c.advance(2.0)
        assert c.store.try_get(POD, "default", "web") is None

    run_cluster(scenario, controllers=False)


# --- node failure ------------------------------------------------------------------------------------
def pod_ready(c: Cluster, name: str) -> str:
    return next(x["status"] for x in c.store.get(POD, "default", name)["status"]["conditions"] if x["type"] == "Ready")


def test_a_node_whose_kubelet_stops_turns_unknown_gets_unreachable_taints_and_recovers():
    async def scenario(c: Cluster) -> None:
        lifecycle = NodeLifecycleController(c.store)
        lifecycle.start()
        try:
            c.add_node("n1")
            c.store.create(POD, make_pod("web"))
            await c.settle()
            assert pod_ready(c, "web") == "True"
            c.store.mutate(NODE, None, "n1", lambda n: n["metadata"].setdefault("annotations", {}).update({FAILURE_ANNOTATION: "true"}))
            assert not lifecycle.idle()
            await c.advance(NODE_MONITOR_GRACE_PERIOD - LEASE_RENEW_INTERVAL)
            assert conditions_by_type(c.store.get(NODE, None, "n1"))["Ready"]["status"] == "True"
            await c.advance(LEASE_RENEW_INTERVAL + 2 * NODE_MONITOR_PERIOD)
            node = c.store.get(NODE, None, "n1")
            ready = conditions_by_type(node)["Ready"]
            assert (ready["status"], ready["reason"], ready["message"]) == ("Unknown", "NodeStatusUnknown", STOPPED_MESSAGE)
            assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} == {
                (UNREACHABLE_TAINT_KEY, "NoSchedule"), (UNREACHABLE_TAINT_KEY, "NoExecute")}
            assert lifecycle.idle()
            assert pod_ready(c, "web") == "False"
            assert {(e["involvedObject"]["kind"], e["reason"], e["message"]) for e in c.events("NodeNotReady")} == {
                ("Node", "NodeNotReady", "Node n1 status is now: NodeNotReady"), ("Pod", "NodeNotReady", "Node is not ready")}
            c.store.mutate(NODE, None, "n1", lambda n: n["metadata"]["annotations"].pop(FAILURE_ANNOTATION))
            await c.advance(2 * NODE_MONITOR_PERIOD)
            node = c.store.get(NODE, None, "n1")
            assert conditions_by_type(node)["Ready"]["status"] == "True"
            assert not node["spec"].get("taints")
            assert pod_ready(c, "web") == "True"
        finally:
            await lifecycle.stop()

    run_cluster(scenario, controllers=False)


FAILURE_MANIFESTS = [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "healthy"},
     "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "failing", "annotations": {FAILURE_ANNOTATION: "true"}},
     "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound", "namespace": "default"},
     "spec": {"nodeName": "failing", "containers": [{"name": "c", "image": "nginx"}]}},
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}}},
]


def test_simulate_a_failed_node_evicts_its_pods_after_the_default_toleration_and_replaces_them_elsewhere():
    result = simulate(FAILURE_MANIFESTS, default_configuration())
    pods = {p["metadata"]["name"]: p for p in result.pods()}
    # evicted after its 300 s default toleration of the unreachable taint, and Terminating for good:
    # no kubelet confirms that its containers stopped
    assert pods["bound"]["metadata"]["deletionTimestamp"]
    web = [p for name, p in pods.items() if name.startswith("web-") and not p["metadata"].get("deletionTimestamp")]
    assert len(web) == 2 and {p["spec"]["nodeName"] for p in web} == {"healthy"}
    assert all(p["status"]["phase"] == "Running" for p in web)
    failing = result.store.get(NODE, None, "failing")
    assert conditions_by_type(failing)["Ready"]["status"] == "Unknown"
    assert result.virtual_seconds > 300
    evictions = [e for e in result.store.iter_all(EVENT) if e.get("reason") == "TaintManagerEviction"]
    assert {e["involvedObject"]["name"] for e in evictions} >= {"bound"}


def test_a_pod_deleted_on_a_stopped_node_stays_terminating_until_its_kubelet_is_back():
    async def scenario(c: Cluster) -> None:
        c.add_node("n1")
        c.store.create(POD, make_pod("web"))
        await c.settle()
        c.store.mutate(NODE, None, "n1", lambda n: n["metadata"].setdefault("annotations", {}).update({FAILURE_ANNOTATION: "true"}))
        c.store.delete(POD, "default", "web")
        await c.advance(60.0)  # twice the 30 s grace period
        assert c.store.get(POD, "default", "web")["metadata"]["deletionTimestamp"]
        c.store.mutate(NODE, None, "n1", lambda n: n["metadata"]["annotations"].pop(FAILURE_ANNOTATION))
        await c.advance(1.0)
        assert c.store.try_get(POD, "default", "web") is None

    run_cluster(scenario, controllers=False)


@pytest.mark.parametrize("annotations, conditions, after, expected_ready, tainted", [
    pytest.param({}, [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}], 300.0,
                 ("False", "KubeletNotReady"), False, id="a modelled NotReady node with a live kubelet is left alone"),
    pytest.param({FAILURE_ANNOTATION: "true"}, [], 55.0, None, False,
                 id="a node that never posted waits out the startup grace period"),
    pytest.param({FAILURE_ANNOTATION: "true"}, [], 70.0, ("Unknown", "NodeStatusNeverUpdated"), True,
                 id="a node that never posted is unknown after the startup grace period"),
    pytest.param({FAILURE_ANNOTATION: "True"}, [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}], 70.0,
                 ("Unknown", "NodeStatusUnknown"), True, id="a NotReady node whose kubelet stops turns unknown"),
])
def test_node_lifecycle_decisions(annotations, conditions, after, expected_ready, tainted):
    async def scenario(c: Cluster) -> None:
        lifecycle = NodeLifecycleController(c.store)
        lifecycle.start()
        try:
            node = make_node("n1")
            node["metadata"]["annotations"] = annotations
            node["status"]["conditions"] = conditions
            c.store.create(NODE, node)
            await c.advance(after)
            node = c.store.get(NODE, None, "n1")
            ready = conditions_by_type(node).get("Ready") if node["status"].get("conditions") else None
            assert (None if ready is None else (ready["status"], ready["reason"])) == expected_ready
            assert any(t["key"] == UNREACHABLE_TAINT_KEY for t in node["spec"].get("taints") or []) is tainted
        finally:
            await lifecycle.stop()

    run_cluster(scenario, controllers=False)
