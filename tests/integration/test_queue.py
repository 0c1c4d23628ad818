"""Upstream's test/integration/scheduler/queueing/queue_test.go, end to end on the embedded
cluster: TestSchedulingGates, TestRequeueByBindFailure, TestRequeueByPermitRejection,
TestPopFromBackoffQWhenActiveQEmpty and TestCoreResourceEnqueue's cases (queueing/queue.go) for
the in-tree plugins kubesched runs.

As upstream's, TestCoreResourceEnqueue lets each pod fail one scheduling cycle, then stops
scheduling (upstream never starts the loop and calls ``ScheduleOne`` by hand), fires the trigger
and reads which pods its events moved to activeQ or backoffQ. Upstream enables only the plugins a
case names; these run the default profile, which gives the same verdicts for these pods."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import BindPlugin, EnqueueExtensions, FilterPlugin, PermitPlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.framework.waiting_pods import WaitingPod
from kubesched.scheduler.plugins.defaultbinder.default_binder import DefaultBinder
from kubesched.scheduler.plugins.registry import in_tree_registry
from tests.integration.embedded import FOREVER, Cluster, configuration, embedded, run
from tests.integration.wrappers import (
    bound_claim,
    claim_volume,
    node,
    persistent_volume,
    pod,
    pod_group,
    spread,
    workload,
    workload_ref,
)

NOT_READY = "node.kubernetes.io/not-ready"
#: Time for the trigger's events to reach the queue (virtual seconds; far below the 5-minute flush).
REQUEUE_WINDOW = 2.0


# --- TestSchedulingGates ----------------------------------------------------------------------------
def gated(name: str, *gates: str) -> dict[str, Any]:
    return pod(name, schedulingGates=[{"name": g} for g in gates]) if gates else pod(name)


@pytest.mark.parametrize(("pods", "schedule", "delete", "remove_gates"), [
    pytest.param([gated("p1"), gated("p2")], ["p1", "p2"], [], [], id="regular pods"),
    pytest.param([gated("p1", "foo"), gated("p2")], ["p2"], [], [], id="one pod carrying scheduling gates"),
    pytest.param([gated("p1", "foo"), gated("p2", "bar"), gated("p3")], ["p3"], [], ["p2"],
                 id="two pod carrying scheduling gates, and remove gates of one pod"),
    pytest.param([gated("p1", "foo"), gated("p2")], ["p2"], ["p2"], ["p1"],
                 id="gated pod schedulable after deleting the scheduled pod and removing gate"),
])
def test_scheduling_gates(pods: list[dict[str, Any]], schedule: list[str], delete: list[str], remove_gates: list[str]) -> None:
    async def scenario() -> None:
        async with embedded(None, [node("node")]) as cluster:
            cluster.create(*pods)
            for name in schedule:
                await cluster.scheduled(name)
            for name in delete:
                cluster.delete("Pod", name, "default")
            held = [p["metadata"]["name"] for p in pods if p["spec"].get("schedulingGates")]
            for name in held:
                await cluster.stays_pending(name, seconds=1)
                assert cluster.condition(name).get("reason") == "SchedulingGated"
            assert cluster.scheduler.queue.counts()["active"] == 0
            for name in remove_gates:
                cluster.mutate("Pod", name, lambda p: p["spec"].pop("schedulingGates", None), "default")
            for name in remove_gates:
                await cluster.scheduled(name)
            for name in set(held) - set(remove_gates):
                assert not cluster.node_of(name)

    run(scenario)


# --- TestCoreResourceEnqueue --------------------------------------------------------------------------
async def _requeued(cluster: Cluster, pods: list[str], trigger: Callable[[Cluster], None]) -> set[str]:
    """Upstream's ``RunTestCoreResourceEnqueue``: once every pod was found unschedulable, stop
    scheduling, fire ``trigger`` and report the pods its events moved to activeQ or backoffQ."""
    for name in pods:
        await cluster.unschedulable(name)
    await asyncio.sleep(1)
    await cluster.stop_scheduling()
    assert cluster.requeued() == set(), "a pod left the unschedulable pool before the trigger"
    trigger(cluster)
    await asyncio.sleep(REQUEUE_WINDOW)
    return cluster.requeued() & set(pods)


def _set_node(name: str, **fields: Any) -> Callable[[Cluster], None]:
    """Replace the node's labels, capacity or taints, as upstream's Update/UpdateStatus with a
    freshly built node does."""

    def trigger(cluster: Cluster) -> None:
        def change(n: dict[str, Any]) -> None:
            if "labels" in fields:
                n["metadata"]["labels"] = dict(fields["labels"])
            if "capacity" in fields:
                n["status"]["capacity"] = n["status"]["allocatable"] = {"pods": "32", **fields["capacity"]}
            if "taints" in fields:
                n["spec"]["taints"] = fields["taints"]

        cluster.mutate("Node", name, change)

    return trigger


def _add_node(obj: dict[str, Any], then_untaint: bool = False) -> Callable[[Cluster], None]:
    def trigger(cluster: Cluster) -> None:
        cluster.create(obj)
        if then_untaint:
            cluster.mutate("Node", obj["metadata"]["name"], lambda n: n["spec"].pop("taints", None))

    return trigger


def _add_toleration(pod_name: str, key: str) -> Callable[[Cluster], None]:
    def trigger(cluster: Cluster) -> None:
        cluster.mutate("Pod", pod_name, lambda p: p["spec"].setdefault("tolerations", []).append(
            {"key": key, "operator": "Exists"}), "default")

    return trigger


def _affinity_in(key: str, value: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}


def _anti_exists(key: str, topology: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}, "topologyKey": topology}]}}


def _affinity_exists(key: str, topology: str) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}, "topologyKey": topology}]}}


def _relabel_pod(name: str, labels: dict[str, str]) -> Callable[[Cluster], None]:
    """Upstream's Update of the pod with a freshly built one: its labels become ``labels``."""
    return lambda c: c.mutate("Pod", name, lambda p: p["metadata"].update(labels=dict(labels)), "default")


def _delete_pod(name: str) -> Callable[[Cluster], None]:
    return lambda c: c.delete("Pod", name, "default")


def _host_port(name: str, port: int, node_name: str = "") -> dict[str, Any]:
    p = pod(name, node_name=node_name)
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": port}]
    return p


def _spread_pod(name: str, label: str, key: str, min_domains: int | None, node_name: str = "", **spec: Any) -> dict[str, Any]:
    """A pod labelled ``label: val`` spreading (maxSkew 1, DoNotSchedule) over ``key`` the pods with ``label``."""
    return pod(name, labels={label: "val"}, node_name=node_name, topologySpreadConstraints=[spread(
        1, key, "DoNotSchedule", {"matchExpressions": [{"key": label, "operator": "Exists"}]}, min_domains=min_domains)],
        **spec)


def _volume(name: str, modes: list[str], labels: dict[str, str] | None = None,
            node_affinity: tuple[str, list[str]] | None = None) -> dict[str, Any]:
    """``st.MakePersistentVolume()`` with a host path source, 1Mi, optional labels and affinity."""
    pv = persistent_volume(name, modes, node_affinity=node_affinity)
    pv["metadata"]["labels"] = dict(labels or {})
    return pv


def _claim_pod(name: str, claim: str, node_name: str = "") -> dict[str, Any]:
    return pod(name, node_name=node_name, volumes=claim_volume(claim))


def _extended(name: str, resources: dict[str, str], **spec: Any) -> dict[str, Any]:
    """``st.MakePod().Res(...)``: requests and limits alike (extended resources need both)."""
    p = pod(name, **spec)
    p["spec"]["containers"][0]["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    return p


def _replace_pv(obj: dict[str, Any]) -> Callable[[Cluster], None]:
    def trigger(cluster: Cluster) -> None:
        cluster.delete("PersistentVolume", obj["metadata"]["name"])
        cluster.create(obj)

    return trigger


ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
RWX = ["ReadWriteMany"]
RWOP = ["ReadWriteOncePod"]


def _pv(name: str, modes: list[str], *, labels: dict[str, str] | None = None,
        node_affinity: tuple[str, list[str]] | None = None, sc: str = "", csi: str = "") -> dict[str, Any]:
    """``st.MakePersistentVolume()``: host path (or a CSI volume of driver ``csi``), 1Mi."""
    pv = _volume(name, modes, labels, node_affinity)
    if sc:
        pv["spec"]["storageClassName"] = sc
    if csi:
        del pv["spec"]["hostPath"]
        pv["spec"]["csi"] = {"driver": csi, "volumeHandle": f"handle-{name}"}
    return pv


def _pvc(name: str, modes: list[str], sc: str = "", volume: str = "") -> dict[str, Any]:
    """``st.MakePersistentVolumeClaim()``: 1Mi, unbound unless ``volume`` (then bind-completed)."""
    if volume:
        claim = bound_claim(name, volume, modes)
    else:
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
                 "spec": {"accessModes": list(modes), "resources": {"requests": {"storage": "1Mi"}}}}
    if sc:
        claim["spec"]["storageClassName"] = sc
    return claim


def _storage_class(name: str, mode: str = "WaitForFirstConsumer", zones: list[str] | None = None,
                   labels: dict[str, str] | None = None) -> dict[str, Any]:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                          "metadata": {"name": name, "labels": dict(labels or {})}, "provisioner": "p",
                          "volumeBindingMode": mode}
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return sc


def _csi_node(name: str, driver: str = "", count: int | None = None) -> dict[str, Any]:
    drivers = [{"name": driver, "nodeID": name, **({"allocatable": {"count": count}} if count is not None else {})}] if driver else []
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": drivers}}


CSI_DRIVER = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csidriver"},
              "spec": {"storageCapacity": True}}


def _replace(kind: str, obj: dict[str, Any], namespace: str | None = None) -> Callable[[Cluster], None]:
    """Upstream's Update with a freshly built object: spec, labels and annotations become ``obj``'s."""

    def change(current: dict[str, Any]) -> None:
        for field in ("spec", "provisioner", "volumeBindingMode", "allowedTopologies"):
            if field in obj:
                current[field] = obj[field]
        current["metadata"]["labels"] = dict(obj["metadata"].get("labels") or {})
        current["metadata"]["annotations"] = dict(obj["metadata"].get("annotations") or {})

    return lambda c: c.mutate(kind, obj["metadata"]["name"], change, namespace)


def _recreate(kind: str, obj: dict[str, Any], namespace: str | None = None) -> Callable[[Cluster], None]:
    def trigger(cluster: Cluster) -> None:
        cluster.delete(kind, obj["metadata"]["name"], namespace)
        cluster.create(obj)

    return trigger


def _volume_attachment(name: str, attacher: str, pv: str) -> dict[str, Any]:
    """``st.MakeVolumeAttachment()``: ``pv`` attached to fake-node by ``attacher``."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": "fake-node", "source": {"persistentVolumeName": pv}},
            "status": {"attached": True}}


def _inline_pod(name: str, source: str, volume: dict[str, Any]) -> dict[str, Any]:
    return pod(name, volumes=[{"name": f"vol-{name}", source: volume}])


def _csi_driver(storage_capacity: bool) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csidriver"},
            "spec": {"storageCapacity": storage_capacity}}


def _capacity(size: str) -> dict[str, Any]:
    """``st.MakeCSIStorageCapacity().Name("csc").StorageClassName("sc1").Capacity(size)``."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {"name": "csc", "namespace": "default"}, "storageClassName": "sc1", "capacity": size}


def _set_capacity(size: str) -> Callable[[Cluster], None]:
    return lambda c: c.mutate("CSIStorageCapacity", "csc", lambda o: o.update(capacity=size), "default")


def _set_storage_capacity(enabled: bool) -> Callable[[Cluster], None]:
    return lambda c: c.mutate("CSIDriver", "csidriver", lambda o: o["spec"].update(storageCapacity=enabled))


def _csi_claim_pod(name: str, claim: str) -> dict[str, Any]:
    p = _claim_pod(name, claim)
    p["spec"]["volumes"].append({"name": "csi-volume", "csi": {"driver": "csidriver"}})
    return p


NOT_READY_TAINT = [{"key": NOT_READY, "effect": "NoSchedule"}]
CPU4 = {"cpu": "4"}
TOLERATE_KEY = {"key": "taint-key", "operator": "Exists"}

ENQUEUE_CASES = [
    pytest.param([node("fake-node", capacity={"cpu": "2"}, taints=NOT_READY_TAINT)], [],
                 [pod("pod1", requests=CPU4),
                  pod("pod2", requests=CPU4, tolerations=[{"key": NOT_READY, "operator": "Exists"}])],
                 _set_node("fake-node", capacity=CPU4, taints=NOT_READY_TAINT), {"pod2"},
                 id="Pod without a required toleration to a node isn't requeued to activeQ"),
    pytest.param([node("fake-node", {"node": "fake-node"}, capacity={"cpu": "2"})],
                 [pod("pod1", labels={"anti": "anti"}, node_name="fake-node", affinity=_anti_exists("anti", "node"))],
                 [pod("pod2", labels={"anti": "anti"}, affinity=_anti_exists("anti", "node"))],
                 _add_node(node("fake-node2", {"node": "fake-node2"}, capacity={"cpu": "2"}, taints=NOT_READY_TAINT),
                           then_untaint=True), {"pod2"},
                 id="Pod rejected by the PodAffinity plugin is requeued when a new Node is created and turned to ready"),
    pytest.param([node("fake-node1", {"group": "a"})], [],
                 [pod("pod1", affinity=_affinity_in("group", "b")), pod("pod2", affinity=_affinity_in("group", "c"))],
                 _set_node("fake-node1", labels={"group": "b"}), {"pod1"},
                 id="Pod rejected by the NodeAffinity plugin is requeued when a Node's label is updated"),
    pytest.param([node("node1", {"group": "a"}, capacity={"cpu": "2"}), node("node2", {"group": "b"})], [],
                 [pod("pod1", requests=CPU4, affinity=_affinity_in("group", "a"))],
                 _set_node("node1", labels={"group": "a", "node": "fake-node"}), set(),
                 id="Pod rejected by the NodeAffinity plugin is not requeued when an updated Node haven't changed the 'match' verdict"),
    pytest.param([node("fake-node1", {"group": "a"})], [],
                 [pod("pod1", affinity=_affinity_in("group", "b")), pod("pod2", affinity=_affinity_in("group", "c"))],
                 _add_node(node("fake-node2", {"group": "b"})), {"pod1"},
                 id="Pod rejected by the NodeAffinity plugin is requeued when a Node is added"),
    pytest.param([node("fake-node", taints=[{"key": "taint-key", "effect": "NoSchedule"}])], [],
                 [pod("pod1"), pod("pod2")], _add_toleration("pod1", "taint-key"), {"pod1"},
                 id="Pod updated with toleration requeued to activeQ"),
    pytest.param([node("fake-node", taints=NOT_READY_TAINT)], [],
                 [pod("pod1", tolerations=[TOLERATE_KEY]), pod("pod2", tolerations=[{"key": "taint-key2", "operator": "Exists"}]),
                  pod("pod3")],
                 _set_node("fake-node", taints=[{"key": "taint-key", "effect": "NoSchedule"}]), {"pod1"},
                 id="Pod rejected by the TaintToleration plugin is requeued when the Node's taint is updated"),
    pytest.param([node("fake-node1", taints=NOT_READY_TAINT)], [], [pod("pod1", tolerations=[TOLERATE_KEY]), pod("pod2")],
                 _add_node(node("fake-node2", taints=[{"key": "taint-key", "effect": "NoSchedule"}])), {"pod1"},
                 id="Pod rejected by the TaintToleration plugin is requeued when a Node that has the correspoding taint is added"),
    pytest.param([node("fake-node", capacity={"cpu": "2"})], [pod("pod1", requests={"cpu": "2"}, node_name="fake-node")],
                 [pod("pod2", requests={"cpu": "2"})], lambda c: c.delete("Pod", "pod1", "default"), {"pod2"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Pod is deleted"),
    pytest.param([node("fake-node1", capacity={"cpu": "2"})], [], [pod("pod1", requests=CPU4), pod("pod2", requests={"cpu": "5"})],
                 _add_node(node("fake-node2", capacity=CPU4)), {"pod1"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is created"),
    pytest.param([node("fake-node", capacity={"cpu": "2"})], [], [pod("pod1", requests=CPU4), pod("pod2", requests={"cpu": "5"})],
                 _set_node("fake-node", capacity=CPU4), {"pod1"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is updated"),
    pytest.param([node("fake-node1", capacity=CPU4), node("fake-node2", {"group": "b"}, capacity={"cpu": "2"})], [],
                 [pod("pod1", requests=CPU4, affinity=_affinity_in("group", "b"))],
                 _set_node("fake-node1", capacity={"cpu": "4", "memory": "4000"}), set(),
                 id="Pod rejected by the NodeResourcesFit plugin isn't requeued when a Node is updated without increase in "
                    "the requested resources"),
    pytest.param([node("fake-node1", capacity=CPU4), node("fake-node2", {"group": "b"}, capacity={"cpu": "2"})], [],
                 [pod("pod1", requests=CPU4, affinity=_affinity_in("group", "b"))],
                 _set_node("fake-node1", capacity={"cpu": "5"}), {"pod1"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is updated with increase in the "
                    "requested resources"),
    pytest.param([node("fake-node1", capacity={"pods": "2"}), node("fake-node2", {"group": "b"}, capacity={"pods": "1"})],
                 [pod("pod1", node_name="fake-node2", affinity=_affinity_in("group", "b"))],
                 [pod("pod2", affinity=_affinity_in("group", "b"))], _set_node("fake-node1", capacity={"pods": "3"}), {"pod2"},
                 id="Pod rejected by the NodeResourcesFit plugin is requeued when a Node is updated with increase in the "
                    "allowed pods number"),
    pytest.param([node("fake-node", taints=NOT_READY_TAINT)], [], [pod("pod1")],
                 lambda c: c.mutate("Pod", "pod1", lambda p: p["metadata"].update(labels={"key": "val"}), "default"), set(),
                 id="Updating pod label doesn't retry scheduling if the Pod was rejected by TaintToleration"),
    pytest.param([node("fake-node1", capacity={"cpu": "4", "example.com/gpu": "1"})], [],
                 [_extended("pod1", {"cpu": "5", "example.com/gpu": "1"})],
                 _set_node("fake-node1", capacity={"cpu": "4", "memory": "4000"}), set(),
                 id="Pod rejected by the NodeResourcesFit plugin isn't requeued when a Node has the extended resource, "
                    "and DRAExtendedResource is disabled"),
    pytest.param([node("fake-node1", capacity={"cpu": "4"})], [], [_extended("pod1", {"example.com/gpu": "1"})],
                 _set_node("fake-node1", capacity={"cpu": "4", "memory": "4000"}), set(),
                 id="Pod rejected by the NodeResourcesFit plugin isn't requeued when a Node does not have the extended "
                    "resource, and DRAExtendedResource is disabled"),
    pytest.param([node("fake-node", {"node": "fake-node"}, capacity={"cpu": "2"}),
                  node("fake-node2", {"node": "fake-node2", "zone": "zone1"}, capacity={"cpu": "2"})], [],
                 [pod("pod1", labels={"unscheduled": "plugins"}, requests=CPU4, affinity={"nodeAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": ["fake-node"]}]}]}}})],
                 _set_node("fake-node", labels={"metadata.name": "fake-node"}, capacity=CPU4), {"pod1"},
                 id="Pod rejected by the PreFilter of NodeAffinity plugin and Filter of NodeResourcesFit is requeued "
                    "based on both plugins"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [pod("pod1", labels={"anti1": "anti1", "anti2": "anti2"}, node_name="fake-node")],
                 [pod("pod2", labels={"anti1": "anti1"}, affinity=_anti_exists("anti1", "node")),
                  pod("pod3", labels={"anti2": "anti2"}, affinity=_anti_exists("anti2", "node"))],
                 _relabel_pod("pod1", {"anti2": "anti2"}), {"pod2"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when deleting the existed pod's label that "
                    "matches the podAntiAffinity"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [pod("pod1", labels={"anti1": "anti1"}, node_name="fake-node"),
                  pod("pod2", labels={"anti2": "anti2"}, node_name="fake-node")],
                 [pod("pod3", labels={"anti1": "anti1"}, affinity=_anti_exists("anti1", "node")),
                  pod("pod4", labels={"anti2": "anti2"}, affinity=_anti_exists("anti2", "node"))],
                 _delete_pod("pod1"), {"pod3"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when deleting the existing pod that matches "
                    "the target podAntiAffinity"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [pod("pod1", node_name="fake-node", affinity=_anti_exists("anti1", "node")),
                  pod("pod2", node_name="fake-node", affinity=_anti_exists("anti2", "node"))],
                 [pod("pod3", labels={"anti1": "anti1"}), pod("pod4", labels={"anti2": "anti2"})],
                 _delete_pod("pod1"), {"pod3"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when deleting the existing pod with "
                    "podAntiAffinity that matches the target pod"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [pod("pod1", node_name="fake-node")],
                 [pod("pod2", affinity=_affinity_exists("aaa", "node")), pod("pod3", affinity=_affinity_exists("bbb", "node"))],
                 _relabel_pod("pod1", {"aaa": "bbb"}), {"pod2"},
                 id="Pod rejected by the PodAffinity plugin is requeued when updating the existed pod's label to make it "
                    "match the pod's podAffinity"),
    pytest.param([node("fake-node1", {"aaa": "fake-node"})], [],
                 [pod("pod1", affinity=_affinity_exists("bbb", "zone")), pod("pod2", affinity=_affinity_exists("ccc", "region"))],
                 _add_node(node("fake-node2", {"zone": "zone1"})), {"pod1"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when creating the node with the topologyKey "
                    "label of the pod affinity"),
    pytest.param([node("fake-node", {"region": "region-1"}), node("fake-node2", {"region": "region-2", "group": "b"})],
                 [pod("pod1", labels={"affinity1": "affinity1"}, node_name="fake-node")],
                 [pod("pod2", labels={"affinity1": "affinity1"}, affinity=_affinity_exists("affinity1", "node")),
                  pod("pod3", labels={"affinity1": "affinity1"}, affinity=_affinity_exists("affinity1", "other")),
                  pod("pod4", affinity={**_affinity_exists("affinity1", "region"), **_affinity_in("group", "b")})],
                 _set_node("fake-node", labels={"node": "fake-node", "region": "region-2"}), {"pod2", "pod4"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when updating the node with the topologyKey "
                    "label of the pod affinity"),
    pytest.param([node("fake-node", {"node": "fake-node", "service": "service-a", "other": "fake-node"})],
                 [pod("pod1", labels={"anti1": "anti1"}, node_name="fake-node")],
                 [pod("pod2", labels={"anti1": "anti1"}, affinity=_anti_exists("anti1", "node")),
                  pod("pod3", labels={"anti1": "anti1"}, affinity=_anti_exists("anti1", "service")),
                  pod("pod4", labels={"anti1": "anti1"}, affinity=_anti_exists("anti1", "other"))],
                 _set_node("fake-node", labels={"service": "service-b", "region": "fake-node", "other": "fake-node"}),
                 {"pod2", "pod3"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when updating the node with the topologyKey "
                    "label of the pod anti affinity"),
    pytest.param([node("fake-node1", {"zone": "fake-node", "node": "fake-node"})],
                 [pod("pod1", labels={"anti1": "anti1"}, node_name="fake-node1")],
                 [pod("pod2", affinity=_anti_exists("anti1", "zone")), pod("pod3", affinity=_anti_exists("anti1", "node"))],
                 _add_node(node("fake-node2", {"zone": "fake-node"})), {"pod2", "pod3"},
                 id="Pod rejected by the InterPodAffinity plugin is requeued when creating the node with the topologyKey "
                    "label of the pod anti affinity"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_host_port("pod1", 8080, "fake-node"), _host_port("pod2", 8081, "fake-node")],
                 [_host_port("pod3", 8080), _host_port("pod4", 8081)], _delete_pod("pod1"), {"pod3"},
                 id="Pod rejected with hostport by the NodePorts plugin is requeued when pod with common hostport is deleted"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_host_port("pod1", 8080, "fake-node")], [_host_port("pod2", 8080)],
                 _add_node(node("fake-node2", {"node": "fake-node2"})), {"pod2"},
                 id="Pod rejected with hostport by the NodePorts plugin is requeued when new node is created"),
    pytest.param([node("fake-node", unschedulable=True)], [], [pod("pod1")],
                 lambda c: c.mutate("Node", "fake-node", lambda n: n["spec"].update(unschedulable=False)), {"pod1"},
                 id="Pod rejected by the NodeUnschedulable plugin is requeued when the node is turned to ready"),
    pytest.param([node("fake-node1", unschedulable=True)], [], [pod("pod1")], _add_node(node("fake-node2")), {"pod1"},
                 id="Pod rejected by the NodeUnschedulable plugin is requeued when a new node is created"),
    pytest.param([node("fake-node1", unschedulable=True)], [], [pod("pod1")],
                 _add_node(node("fake-node2", unschedulable=True)), set(),
                 id="Pod rejected by the NodeUnschedulable plugin isn't requeued when another unschedulable node is created"),
    pytest.param([node("fake-node", {"node": "fake-node"}, capacity={"cpu": "2"})],
                 [pod("pod1", labels={"key1": "val"}, node_name="fake-node"), pod("pod2", labels={"key2": "val"}, node_name="fake-node")],
                 [_spread_pod("pod3", "key1", "node", 3), _spread_pod("pod4", "key2", "node", 3)],
                 lambda c: c.create(pod("pod5", labels={"key1": "val"}, node_name="fake-node")), {"pod3"},
                 id="Pods with PodTopologySpread should be requeued when a Pod with matching label is scheduled"),
    pytest.param([node("fake-node", {"node": "fake-node"}, capacity={"cpu": "2"})],
                 [pod("pod1", labels={"key1": "val"}, node_name="fake-node"), pod("pod2", labels={"key2": "val"}, node_name="fake-node")],
                 [_spread_pod("pod3", "key1", "node", 3), _spread_pod("pod4", "key2", "node", 3)],
                 _relabel_pod("pod1", {"key3": "val"}), {"pod3"},
                 id="Pods with PodTopologySpread should be requeued when a scheduled Pod label is updated to match the selector"),
    pytest.param([node("fake-node", {"node": "fake-node"}, capacity={"cpu": "2"})],
                 [pod("pod1", labels={"key1": "val"}, node_name="fake-node"), pod("pod2", labels={"key2": "val"}, node_name="fake-node")],
                 [_spread_pod("pod3", "key1", "node", 2), _spread_pod("pod4", "key2", "node", 3)],
                 _delete_pod("pod1"), {"pod3"},
                 id="Pods with PodTopologySpread should be requeued when a scheduled Pod with matching label is deleted"),
    pytest.param([node("fake-node1", {"node": "fake-node"}), node("fake-node2", {"zone": "fake-zone"})],
                 [pod("pod1", labels={"key1": "val"}, node_name="fake-node1"),
                  pod("pod2", labels={"key1": "val"}, node_name="fake-node2")],
                 [_spread_pod("pod3", "key1", "node", 2), _spread_pod("pod4", "key1", "zone", 2)],
                 _add_node(node("fake-node3", {"node": "fake-node"})), {"pod3"},
                 id="Pods with PodTopologySpread should be requeued when a Node with topology label is created"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west1-a"})],
                 [_volume("pv1", ["ReadOnlyMany"], {ZONE: "us-west1-a"}), bound_claim("pvc1", "pv1", RWOP),
                  bound_claim("pvc2", "pv2", RWOP), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2")],
                 lambda c: c.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "sc1"},
                                     "provisioner": "p", "volumeBindingMode": "WaitForFirstConsumer"}), {"pod2"},
                 id="Pod rejected with node by the VolumeZone plugin is requeued when the Storage class is added"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west1-a"})],
                 [_volume("pv1", ["ReadOnlyMany"], {ZONE: "us-west1-a"}), _volume("pv2", ["ReadOnlyMany"], {ZONE: "us-east1"}),
                  bound_claim("pvc1", "pv1", RWOP), bound_claim("pvc2", "pv2", RWOP), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2")],
                 lambda c: c.mutate("PersistentVolume", "pv2", lambda v: v["metadata"].update(
                     labels={ZONE: "us-east1", "unrelated": "unrelated"})), set(),
                 id="Pod rejected with node by the VolumeZone plugin is not requeued when the PV is updated but the "
                    "topology is same"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_volume("pv1", ["ReadWriteOnce"])],
                 [_claim_pod("pod1", "pvc1"), _claim_pod("pod2", "pvc2")],
                 lambda c: c.create(bound_claim("pvc1", "pv1", RWOP)), {"pod1"},
                 id="Pod rejected by the VolumeRestriction plugin is requeued when the PVC bound to the pod is added"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_volume("pv1", ["ReadWriteOnce"]), bound_claim("pvc1", "pv1", RWOP), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc1"), _claim_pod("pod3", "pvc2")], _delete_pod("pod1"), {"pod2"},
                 id="Pod rejected by the VolumeRestriction plugin is requeued when the pod is deleted"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-east-1b"})],
                 [_volume("pv1", ["ReadOnlyMany"], node_affinity=(ZONE, ["us-east-1a"])),
                  bound_claim("pvc1", "pv1", ["ReadOnlyMany"])],
                 [_claim_pod("pod1", "pvc1")], _add_node(node("fake-node2", {ZONE: "us-east-1a"})), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the Node is created"),
    pytest.param([node("fake-node", {"node": "fake-node", "aaa": "bbb"})],
                 [_volume("pv1", ["ReadWriteMany"], node_affinity=("aaa", ["ccc"])), bound_claim("pvc1", "pv1", ["ReadWriteMany"])],
                 [_claim_pod("pod1", "pvc1")], _set_node("fake-node", labels={"node": "fake-node", "aaa": "ccc"}), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the Node is updated"),
    pytest.param([node("fake-node", {"node": "fake-node", "aaa": "bbb"})],
                 [_volume("pv1", ["ReadWriteMany"], node_affinity=("aaa", ["ccc"])), bound_claim("pvc1", "pv1", ["ReadWriteMany"])],
                 [_claim_pod("pod1", "pvc1")], _replace_pv(_volume("pv1", ["ReadWriteMany"], node_affinity=("aaa", ["bbb"]))),
                 {"pod1"}, id="Pod rejected with node by the VolumeBinding plugin is requeued when the PV is created"),
    pytest.param([node("fake-node1", {"node": "fake-node", "region": "fake-node", "service": "service-a"}),
                  node("fake-node2", {"node": "fake-node", "region": "fake-node", "service": "service-a"})],
                 [_spread_pod("pod1", "key1", "node", None, "fake-node1"), _spread_pod("pod2", "key1", "zone", None, "fake-node2"),
                  _spread_pod("pod3", "key1", "region", None, "fake-node2"), _spread_pod("pod4", "key1", "service", None, "fake-node2")],
                 [_spread_pod(f"pod{i}", "key1", key, 3) for i, key in zip(range(5, 10), ["node", "zone", "region", "other", "service"])],
                 _set_node("fake-node2", labels={"zone": "fake-node", "region": "fake-node", "service": "service-b"}),
                 {"pod5", "pod6", "pod9"},
                 id="Pods with PodTopologySpread should be requeued when a Node is updated to have the topology label"),
    pytest.param([node("fake-node1", {"node": "fake-node"}), node("fake-node2", {"zone": "fake-node"})],
                 [_spread_pod("pod1", "key1", "node", None, "fake-node1"), _spread_pod("pod2", "key1", "zone", None, "fake-node2")],
                 [_spread_pod("pod3", "key1", "node", 3), _spread_pod("pod4", "key1", "zone", 3)],
                 lambda c: c.delete("Node", "fake-node2"), {"pod4"},
                 id="Pods with PodTopologySpread should be requeued when a Node with a topology label is deleted"),
    pytest.param([node("fake-node1", {"node": "fake-node"}), node("fake-node2", {"zone": "fake-node"}),
                  node("fake-node3", {"zone": "fake-node"}, taints=NOT_READY_TAINT)],
                 [_spread_pod("pod1", "key1", "node", None, "fake-node1"), _spread_pod("pod2", "key1", "node", None, "fake-node2")],
                 [_spread_pod("pod3", "key1", "node", 3),
                  _spread_pod("pod4", "key1", "zone", 3, tolerations=[{"key": "aaa", "operator": "Exists"}])],
                 _set_node("fake-node3", taints=[{"key": "aaa", "value": "bbb", "effect": "NoSchedule"}]), {"pod4"},
                 id="Pods with PodTopologySpread should be requeued when a NodeTaint of a Node with a topology label has "
                    "been updated"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west1-a"})],
                 [_pv("pv1", ["ReadOnlyMany"], labels={ZONE: "us-west1-a"}), _pvc("pvc1", RWOP, volume="pv1"),
                  _pvc("pvc2", RWOP, volume="pv2"), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2")], lambda c: c.create(_pv("pv2", ["ReadOnlyMany"], labels={ZONE: "us-west1-a"})),
                 {"pod2"}, id="Pod rejected with node by the VolumeZone plugin is requeued when the PV is added"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west1-a"})],
                 [_pv("pv1", ["ReadOnlyMany"], labels={ZONE: "us-west1-a"}), _pv("pv2", ["ReadOnlyMany"], labels={ZONE: "us-east1"}),
                  _pvc("pvc1", RWOP, volume="pv1"), _pvc("pvc2", RWOP, volume="pv2"), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2")],
                 _replace("PersistentVolume", _pv("pv2", ["ReadOnlyMany"], labels={ZONE: "us-west1-a"})), {"pod2"},
                 id="Pod rejected with node by the VolumeZone plugin is requeued when the PV is updated"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west1-a"})],
                 [_pv("pv1", ["ReadOnlyMany"], labels={ZONE: "us-west1-a"}), _pv("pv2", ["ReadOnlyMany"], labels={ZONE: "us-east1"}),
                  _pvc("pvc1", RWOP, volume="pv1"), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2"), _claim_pod("pod3", "pvc3")],
                 lambda c: c.create(_pvc("pvc2", RWOP, volume="pv2")), {"pod2"},
                 id="Pod rejected with node by the VolumeZone plugin is requeued when the PVC bound to the pod is added"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west1-a"})],
                 [_pv("pv1", ["ReadOnlyMany"], labels={ZONE: "us-west1-a"}), _pv("pv2", ["ReadOnlyMany"], labels={ZONE: "us-east1"}),
                  _pvc("pvc1", RWOP, volume="pv1"), _pvc("pvc2", RWOP), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2"), _claim_pod("pod3", "pvc3")],
                 _replace("PersistentVolumeClaim", _pvc("pvc2", RWOP, volume="pv2"), "default"), {"pod2"},
                 id="Pod rejected with node by the VolumeZone plugin is requeued when the PVC bound to the pod is updated"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-east-1a"})],
                 [_pv("pv1", RWX, node_affinity=(BETA_ZONE, ["us-east-1a"])), _pvc("pvc1", RWX, volume="pv1")],
                 [_claim_pod("pod1", "pvc1")],
                 _replace("PersistentVolume", _pv("pv1", RWX, node_affinity=(ZONE, ["us-east-1a"]))), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the PV is updated"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", ["ReadOnlyMany"]), _pvc("pvc1", ["ReadOnlyMany"]), _pvc("pvc2", ["ReadOnlyMany"])],
                 [_claim_pod("pod1", "pvc1"), _claim_pod("pod2", "pvc2")],
                 _recreate("PersistentVolumeClaim", _pvc("pvc1", ["ReadOnlyMany"], volume="pv1"), "default"), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the PVC is created"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_pv("pv1", RWX), _pvc("pvc1", RWX), _pvc("pvc2", RWX)],
                 [_claim_pod("pod1", "pvc1"), _claim_pod("pod2", "pvc2")],
                 _replace("PersistentVolumeClaim", _pvc("pvc1", RWX, volume="pv1"), "default"), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the PVC is updated"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_pv("pv1", RWX, sc="sc1"), _pvc("pvc1", RWX, sc="sc1")],
                 [_claim_pod("pod1", "pvc1")], lambda c: c.create(_storage_class("sc1")), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the StorageClass is created"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west-1a"})],
                 [_pv("pv1", RWX, sc="sc1"), _pvc("pvc1", RWX, sc="sc1"), _storage_class("sc1", zones=["us-west-1c"])],
                 [_claim_pod("pod1", "pvc1")], _replace("StorageClass", _storage_class("sc1", zones=["us-west-1a"])), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the StorageClass's AllowedTopologies "
                    "is updated"),
    pytest.param([node("fake-node", {"node": "fake-node", ZONE: "us-west-1c"})],
                 [_pv("pv1", RWX, sc="sc1"), _pvc("pvc1", RWX, sc="sc1"),
                  _storage_class("sc1", zones=["us-west-1a"], labels={"key": "value"})],
                 [_claim_pod("pod1", "pvc1")],
                 _replace("StorageClass", _storage_class("sc1", zones=["us-west-1a"], labels={"key": "updated"})), set(),
                 id="Pod rejected with node by the VolumeBinding plugin is not requeued when the StorageClass is updated but "
                    "the AllowedTopologies is same"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_pv("pv1", RWX), _pvc("pvc1", RWX)],
                 [_claim_pod("pod1", "pvc1")], lambda c: c.create(_csi_node("fake-node")), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the CSINode is created"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, sc="sc1"), _pvc("pvc1", RWX, sc="sc1"), _csi_node("fake-node")],
                 [_claim_pod("pod1", "pvc1")],
                 lambda c: c.mutate("CSINode", "fake-node", lambda n: n["metadata"].setdefault("annotations", {}).update(
                     {"storage.alpha.kubernetes.io/migrated-plugins": "value"})), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the CSINode's "
                    "MigratedPluginsAnnotation is updated"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, csi="csidriver"), _pvc("pvc1", RWX, volume="pv1"), CSI_DRIVER,
                  _csi_node("fake-node", "csidriver", 0)],
                 [_claim_pod("pod1", "pvc1")], lambda c: c.create(_csi_node("csinode")), {"pod1"},
                 id="Pod rejected the CSI NodeVolumeLimits plugin is requeued when the CSINode is added"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, csi="csidriver"), _pv("pv2", RWX, csi="csidriver"), _pvc("pvc1", RWOP, volume="pv1"),
                  _pvc("pvc2", RWOP, volume="pv2"), CSI_DRIVER, _csi_node("fake-node", "csidriver", 1),
                  _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2")], _delete_pod("pod1"), {"pod2"},
                 id="Pod rejected with PVC by the CSI NodeVolumeLimits plugin is requeued when the pod having related PVC "
                    "is deleted"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, csi="csidriver"), _pv("pv2", RWX, csi="csidriver"), _pvc("pvc1", RWOP, volume="pv1"),
                  CSI_DRIVER, _csi_node("fake-node", "csidriver", 1), _claim_pod("pod1", "pvc1", "fake-node")],
                 [_claim_pod("pod2", "pvc2")], lambda c: c.create(_pvc("pvc2", RWOP, volume="pv2")), {"pod2"},
                 id="Pod rejected with PVC by the CSI NodeVolumeLimits plugin is requeued when the related PVC is added"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, csi="csidriver"), _pvc("pvc1", RWX, volume="pv1"),
                  _volume_attachment("volumeattachment1", "test.storage.gke.io", "pv1"), CSI_DRIVER,
                  _csi_node("fake-node", "csidriver", 0)],
                 [_claim_pod("pod1", "pvc1")], lambda c: c.delete("VolumeAttachment", "volumeattachment1"), {"pod1"},
                 id="Pod with PVC rejected the CSI NodeVolumeLimits plugin is requeued when the VolumeAttachment is deleted"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, csi="ebs.csi.aws.com"), _pv("pv2", RWX, csi="pd.csi.storage.gke.io"),
                  _pvc("pvc1", RWX, volume="pv1"), _pvc("pvc2", RWX, volume="pv2"),
                  _volume_attachment("volumeattachment1", "ebs.csi.aws.com", "pv1"),
                  _volume_attachment("volumeattachment2", "pd.csi.storage.gke.io", "pv2"),
                  {**_csi_node("fake-node"), "spec": {"drivers": [
                      {"name": d, "nodeID": "fake-node", "allocatable": {"count": 0}}
                      for d in ("ebs.csi.aws.com", "pd.csi.storage.gke.io")]}}],
                 [_inline_pod("pod1", "awsElasticBlockStore", {"volumeID": "pv1"}),
                  _inline_pod("pod2", "gcePersistentDisk", {"pdName": "pv2"})],
                 lambda c: c.delete("VolumeAttachment", "volumeattachment1"), {"pod1"},
                 id="Pod with Inline Migratable volume (AWSEBSDriver and GCEPDDriver) rejected the CSI NodeVolumeLimits "
                    "plugin is requeued (only AWSEBSDriver) when the VolumeAttachment is deleted"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_pv("pv1", RWX), _pvc("pvc1", RWX), _csi_driver(True)],
                 [_csi_claim_pod("pod1", "pvc1")], _set_storage_capacity(False), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the CSIDriver's StorageCapacity gets "
                    "disabled"),
    pytest.param([node("fake-node", {"node": "fake-node"})], [_pv("pv1", RWX), _pvc("pvc1", RWX), _csi_driver(False)],
                 [_csi_claim_pod("pod1", "pvc1")], _set_storage_capacity(True), set(),
                 id="Pod rejected with node by the VolumeBinding plugin is not requeued when the CSIDriver is updated but the "
                    "storage capacity is originally enabled"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, sc="sc1"), _pvc("pvc1", RWX, sc="sc1"), _storage_class("sc1", "Immediate")],
                 [_claim_pod("pod1", "pvc1")], lambda c: c.create(_capacity("10")), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the CSIStorageCapacity is created"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX, sc="sc1"), _pvc("pvc1", RWX, sc="sc1"), _capacity("10"), _storage_class("sc1", "Immediate")],
                 [_claim_pod("pod1", "pvc1")], _set_capacity("20"), {"pod1"},
                 id="Pod rejected with node by the VolumeBinding plugin is requeued when the CSIStorageCapacity is increased"),
    pytest.param([node("fake-node", {"node": "fake-node"})],
                 [_pv("pv1", RWX), _pvc("pvc1", RWX), _capacity("10"), _storage_class("sc1", "Immediate")],
                 [_claim_pod("pod1", "pvc1")], _set_capacity("5"), set(),
                 id="Pod rejected with node by the VolumeBinding plugin is not requeued when the CSIStorageCapacity is updated "
                    "but the volumelimit is not increased"),
]


@pytest.mark.parametrize(("nodes", "bound", "pods", "trigger", "want"), ENQUEUE_CASES)
def test_core_resource_enqueue(nodes: list[dict[str, Any]], bound: list[dict[str, Any]], pods: list[dict[str, Any]],
                               trigger: Callable[[Cluster], None], want: set[str]) -> None:
    """SchedulerQueueingHints is on in 1.35 (upstream runs most cases with it on and off; the
    cases here give the same answer either way, or run with hints only, as upstream's do)."""

    async def scenario() -> set[str]:
        async with embedded(None, [*nodes, *bound], controllers=False) as cluster:
            cluster.create(*pods)
            return await _requeued(cluster, [p["metadata"]["name"] for p in pods], trigger)

    assert run(scenario) == want


# --- TestRequeueByBindFailure ------------------------------------------------------------------------
class FirstFailBind(BindPlugin):
    """Upstream's ``firstFailBindPlugin``: the first Bind fails with an Error, later ones bind as
    DefaultBinder does."""

    name = "firstFailBindPlugin"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.counter = 0
        self.default_binder = DefaultBinder(None, handle)

    async def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        if self.counter == 0:
            self.counter += 1
            return Status(Code.Error, "firstFailBindPlugin rejects the Pod")
        return await self.default_binder.bind(state, pod_info, node_name)


def test_requeue_by_bind_failure() -> None:
    """A pod whose binding fails goes back to the queue without any cluster event and is bound on
    the second try."""
    plugins: list[FirstFailBind] = []

    def factory(args: Any, handle: Any) -> FirstFailBind:
        plugins.append(FirstFailBind(args, handle))
        return plugins[-1]

    registry = merge(in_tree_registry(), {FirstFailBind.name: factory})
    config = configuration({"schedulerName": "default-scheduler", "plugins": {"multiPoint": {
        "enabled": [{"name": FirstFailBind.name}], "disabled": [{"name": "DefaultBinder"}]}}}, registry=registry)

    async def scenario() -> str:
        async with embedded(config, [node("fake-node")], registry=registry) as cluster:
            cluster.create(pod("pod-1"))
            return await cluster.scheduled("pod-1")

    assert run(scenario) == "fake-node"
    assert [p.counter for p in plugins] == [1]


# --- TestRequeueByPermitRejection --------------------------------------------------------------------
class FakePermit(PermitPlugin, EnqueueExtensions):
    """Upstream's ``fakePermitPlugin``: every pod waits (30 s) at Permit; node label updates
    requeue pods it rejected, counting the hint's calls."""

    name = "fakePermitPlugin"

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.hint_calls = 0

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.Wait), FOREVER

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.UpdateNodeLabel), self._hint)]

    def _hint(self, pod_obj: dict, old: Any, new: Any) -> QueueingHint:
        self.hint_calls += 1
        return QueueingHint.Queue

    def waiting(self, name: str) -> WaitingPod | None:
        found: list[WaitingPod] = []
        self.framework.iterate_waiting_pods(lambda wp: found.append(wp) if wp.pod.name == name else None)
        return found[0] if found else None


def test_requeue_by_permit_rejection() -> None:
    """pod-1 waits at Permit while a node label update arrives; rejected afterwards, it is
    requeued by that event (the hint runs once) and, allowed the second time, scheduled; pod-2,
    allowed, is scheduled meanwhile."""
    plugins: list[FakePermit] = []

    def factory(args: Any, handle: Any) -> FakePermit:
        plugins.append(FakePermit(args, handle))
        return plugins[-1]

    registry = merge(in_tree_registry(), {FakePermit.name: factory})
    config = configuration({"schedulerName": "default-scheduler", "plugins": {"multiPoint": {
        "enabled": [{"name": FakePermit.name}]}}}, registry=registry)

    async def scenario() -> tuple[str, str, int]:
        async with embedded(config, [node("fake-node")], registry=registry) as cluster:
            permit = plugins[-1]
            cluster.create(pod("pod-1"))
            await cluster.wait_for("pod-1 to wait at Permit", lambda: permit.waiting("pod-1") is not None)
            cluster.mutate("Node", "fake-node", lambda n: n["metadata"].update(labels={"updated": ""}))
            cluster.create(pod("pod-2"))
            await cluster.wait_for("pod-2 to wait at Permit", lambda: permit.waiting("pod-2") is not None)
            first = permit.waiting("pod-1")
            assert first is not None
            first.reject(FakePermit.name, "fakePermitPlugin rejects the Pod")
            second = permit.waiting("pod-2")
            assert second is not None
            second.allow(FakePermit.name)
            where = await cluster.scheduled("pod-2")
            await cluster.wait_for("pod-1 to wait at Permit again", lambda: permit.waiting("pod-1") is not None)
            again = permit.waiting("pod-1")
            assert again is not None
            again.allow(FakePermit.name)
            return where, await cluster.scheduled("pod-1"), permit.hint_calls

    assert run(scenario) == ("fake-node", "fake-node", 1)


# --- TestPopFromBackoffQWhenActiveQEmpty -------------------------------------------------------------
def test_pop_from_backoff_q_when_active_q_empty() -> None:
    """With a 1000 s backoff, a pod made schedulable by a new node is popped from backoffQ
    because activeQ is empty (SchedulerPopFromBackoffQ, on in 1.35), long before its backoff ends."""
    config = configuration(podInitialBackoffSeconds=1000, podMaxBackoffSeconds=1000)
    waiting = pod("pod", affinity=_affinity_in("foo", "bar"))

    async def scenario() -> tuple[str, float]:
        async with embedded(config, [node("node")]) as cluster:
            cluster.create(waiting)
            await cluster.unschedulable("pod")
            loop = asyncio.get_running_loop()
            start = loop.time()
            cluster.create(node("node-schedulable", {"foo": "bar"}))
            where = await cluster.scheduled("pod")
            return where, loop.time() - start

    where, waited = run(scenario)
    assert where == "node-schedulable"
    assert waited < FOREVER


# --- TestCustomResourceEnqueue -----------------------------------------------------------------------
FOO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "foos.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "foos", "singular": "foo", "kind": "Foo"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"field": {"type": "string"}}}}}]},
}


class FakeCR(FilterPlugin, EnqueueExtensions):
    """Upstream's ``fakeCRPlugin``: every node fails its Filter; any change of a ``foos.v1.example.com``
    custom resource may help (registered without a hint: always Queue)."""

    name = "fakeCRPlugin"

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: NodeInfo) -> Status | None:
        return Status(Code.Unschedulable, "always fail")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.custom("example.com", "v1", "foos"), ActionType.All))]


def test_custom_resource_enqueue() -> None:
    """A pod the plugin rejected waits in unschedulablePods until a Foo is created: the scheduler
    watches the custom resource because a plugin registered it, and the event moves the pod out,
    to be attempted a second time."""
    registry = merge(in_tree_registry(), {FakeCR.name: FakeCR})
    config = configuration({"schedulerName": "default-scheduler", "plugins": {"filter": {"enabled": [{"name": FakeCR.name}]}}},
                           registry=registry)

    async def scenario() -> tuple[set[str], set[str], int]:
        async with embedded(config, [FOO_CRD, node("fake-node")], registry=registry, controllers=False) as cluster:
            cluster.create(pod("fake-pod"))
            await cluster.unschedulable("fake-pod")
            await cluster.stop_scheduling()
            before = cluster.requeued()
            cluster.create({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "foo1", "namespace": "default"}})
            await asyncio.sleep(REQUEUE_WINDOW)
            after = cluster.requeued()
            popped = cluster.scheduler.queue.pop_nowait()
            assert popped is not None
            return before, after, popped.attempts

    assert run(scenario) == (set(), {"fake-pod"}, 2)


# --- TestCoreResourceEnqueue: the GangScheduling cases ------------------------------------------------
GANG_GATES = {"GenericWorkload": True, "GangScheduling": True}


def _gang_pod(name: str, workload_name: str, group: str) -> dict[str, Any]:
    return pod(name, **workload_ref(workload_name, group))


@pytest.mark.parametrize(("workloads", "pods", "trigger", "want"), [
    pytest.param([workload("w", pod_group("pg1", min_count=2))],
                 [_gang_pod("pod1", "w", "pg1"), _gang_pod("pod2", "w", "pg2")],
                 lambda c: c.create(_gang_pod("pod3", "w", "pg1")), {"pod1", "pod3"},
                 id="Pod rejected by the GangScheduling plugin is requeued when a new pod with matching scheduling group "
                    "is created"),
    pytest.param([],
                 [_gang_pod("pod1", "w1", "pg1"), _gang_pod("pod2", "w2", "pg2")],
                 lambda c: c.create(workload("w1", pod_group("pg1", min_count=1))), {"pod1"},
                 id="Pod rejected by the GangScheduling plugin is requeued when a matching workload is created"),
])
def test_core_resource_enqueue_gang_scheduling(workloads: list[dict[str, Any]], pods: list[dict[str, Any]],
                                               trigger: Callable[[Cluster], None], want: set[str]) -> None:
    """Upstream's cases with ``ExpectedInitialRejectingPhase: PreEnqueue``: the pods never get a
    scheduling cycle, GangScheduling's PreEnqueue holds them in unschedulablePods (the gang is
    incomplete, or its Workload does not exist); the trigger's event moves the ones it helps, and a
    new pod that completes a gang goes straight to activeQ. Upstream's file is written against the
    Workload API after 1.35 (PodGroup objects, ``podGroupName``); these use 1.35's shape of the same
    cases (pod groups inside the Workload, ``spec.workloadRef``)."""
    config = configuration({"schedulerName": "default-scheduler", "plugins": {"multiPoint": {
        "enabled": [{"name": "GangScheduling"}]}}}, gates=GANG_GATES)

    async def scenario() -> set[str]:
        async with embedded(config, [node("fake-node1"), *workloads], gates=GANG_GATES, controllers=False) as cluster:
            cluster.create(*pods)
            names = [p["metadata"]["name"] for p in pods]
            await cluster.wait_for("the pods to wait in PreEnqueue",
                                   lambda: set(names) <= {p.name for p in cluster.scheduler.queue.unschedulable_pods()})
            await cluster.stop_scheduling()
            assert cluster.requeued() == set(), "a pod left the unschedulable pool before the trigger"
            trigger(cluster)
            await asyncio.sleep(REQUEUE_WINDOW)
            return cluster.requeued()

    assert run(scenario) == want
