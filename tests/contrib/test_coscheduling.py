"""Coscheduling (scheduler-plugins ``pkg/coscheduling``: ``coscheduling_test.go`` and
``core/core_test.go``): queue order, PreFilter, Permit and PostFilter of PodGroup members."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.errors import KubeschedError
from kubesched.api.types import PodInfo
from kubesched.contrib.coscheduling import Coscheduling
from kubesched.contrib.coscheduling.core import cluster_resource_gap, format_gap
from kubesched.contrib.coscheduling.pod_group import InvalidPodGroup, PodGroup
from kubesched.scheduler import config as config_module
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.framework.waiting_pods import WaitingPod
from kubesched.testing import PluginHarness
from tests.contrib.conftest import POD_GROUP_CRD

LABEL = "scheduling.x-k8s.io/pod-group"


def pod_group(name: str, min_member: int, min_resources: dict | None = None, created: str = "2025-01-01T00:00:00Z",
              timeout: int | None = None, namespace: str = "default") -> dict:
    spec: dict = {"minMember": min_member}
    if min_resources is not None:
        spec["minResources"] = min_resources
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created}, "spec": spec}


def pod(name: str, group: str = "", cpu: str = "1", node: str = "", priority: int = 0, namespace: str = "default") -> dict:
    meta: dict = {"name": name, "namespace": namespace, "uid": name}
    if group:
        meta["labels"] = {LABEL: group}
    spec: dict = {"priority": priority, "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def node(name: str, cpu: str = "4", pods: str = "110") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": pods}, "capacity": {"cpu": cpu, "memory": "8Gi", "pods": pods}}}


def harness(groups: list[dict], pods: list[dict], nodes: list[dict] | None = None, args: dict | None = None) -> PluginHarness:
    return PluginHarness(Coscheduling, args, nodes=nodes if nodes is not None else [node("n1")], pods=pods,
                         objects=[POD_GROUP_CRD, *groups])


# The pod being scheduled is not among the stored pods (the harness schedules it without storing
# it): the sibling counts below are of the other pods of the group.
PRE_FILTER = [
    ("pod does not belong to any podGroup", [pod_group("pg", 3)], [], pod("p1"), "Success", ""),
    ("pod belongs to a non-existing podGroup", [], [], pod("p1", "missing"), "Success", ""),
    ("pod count less than minMember", [pod_group("pg", 3)], [pod("p2", "pg"), pod("p3", "pg")], pod("p1", "pg"),
     "UnschedulableAndUnresolvable",
     "pre-filter pod p1 cannot find enough sibling pods, current pods number: 2, minMember of group: 3"),
    ("pod count equal minMember", [pod_group("pg", 2)], [pod("p2", "pg"), pod("p3", "pg")], pod("p1", "pg"), "Success", ""),
    ("siblings of another namespace do not count", [pod_group("pg", 2)], [pod("p2", "pg"), pod("p3", "pg", namespace="other")],
     pod("p1", "pg"), "UnschedulableAndUnresolvable",
     "pre-filter pod p1 cannot find enough sibling pods, current pods number: 1, minMember of group: 2"),
    ("cluster resource enough, min Resource", [pod_group("pg", 2, {"cpu": "3"})], [pod("p2", "pg"), pod("p3", "pg")],
     pod("p1", "pg"), "Success", ""),
    ("cluster resource not enough", [pod_group("pg", 2, {"cpu": "6"})], [pod("p2", "pg"), pod("p3", "pg")],
     pod("p1", "pg"), "UnschedulableAndUnresolvable", "resource gap: map[cpu:2]"),
    ("room taken by other pods is not free", [pod_group("pg", 2, {"cpu": "3"})],
     [pod("p2", "pg"), pod("p3", "pg"), pod("other", cpu="2", node="n1")], pod("p1", "pg"),
     "UnschedulableAndUnresolvable", "resource gap: map[cpu:1]"),
    ("the group's own bound pods do not count against its minResources", [pod_group("pg", 2, {"cpu": "4"})],
     [pod("p2", "pg"), pod("p3", "pg", cpu="2", node="n1")], pod("p1", "pg"), "Success", ""),
    ("pod slots count as minMember pods", [pod_group("pg", 3, {"cpu": "1"})], [pod(f"p{i}", "pg") for i in range(2, 5)],
     pod("p1", "pg"), "UnschedulableAndUnresolvable", "resource gap: map[pods:1]"),
]


@pytest.mark.parametrize("name,groups,pods,incoming,code,message", PRE_FILTER, ids=[c[0] for c in PRE_FILTER])
def test_pre_filter(name, groups, pods, incoming, code, message):
    nodes = [node("n1", pods="2")] if name == "pod slots count as minMember pods" else None
    result = harness(groups, pods, nodes).run(incoming)
    assert (result.pre_filter.code, " ".join(result.pre_filter.reasons)) == (code, message)


def test_pre_filter_refuses_a_backed_off_group():
    """After PostFilter rejected a complete group, PreFilter refuses it for podGroupBackoffSeconds."""
    h = harness([pod_group("pg", 4)], [pod(f"p{i}", "pg") for i in range(2, 6)], args={"podGroupBackoffSeconds": 30})
    _, status = h.plugin.post_filter(CycleState(), PodInfo(pod("p2", "pg")), None)
    assert status.code == Code.Unschedulable
    result = h.run(pod("p1", "pg"))
    assert (result.pre_filter.code, result.pre_filter.reasons) == ("UnschedulableAndUnresolvable", ["podGroup default/pg failed recently"])
    h.framework.clock.step(30)
    assert h.run(pod("p1", "pg")).pre_filter.code == "Success"


LESS = [
    ("p1's priority greater than p2", pod("p1", priority=100), 1.0, pod("p2", priority=50), 2.0, [], True),
    ("p1's priority less than p2", pod("p1", priority=50), 1.0, pod("p2", priority=80), 2.0, [], False),
    ("equal priority. p1 is added to schedulingQ earlier than p2", pod("p1"), 1.0, pod("p2"), 2.0, [], True),
    ("equal priority. p2 is added to schedulingQ earlier than p1", pod("p1"), 2.0, pod("p2"), 1.0, [], False),
    ("p1 and p2 belong to the same podGroup: ordered by name", pod("p2", "pg1"), 1.0, pod("p1", "pg1"), 2.0,
     [pod_group("pg1", 2)], False),
    ("the older podGroup goes first", pod("p1", "pg2"), 1.0, pod("p2", "pg1"), 2.0,
     [pod_group("pg1", 2, created="2025-01-01T00:00:00Z"), pod_group("pg2", 2, created="2025-01-01T00:00:05Z")], False),
]


@pytest.mark.parametrize("name,pod1,queued1,pod2,queued2,groups,want", LESS, ids=[c[0] for c in LESS])
def test_less(name, pod1, queued1, pod2, queued2, groups, want):
    assert harness(groups, []).less(pod1, pod2, queued1, queued2) is want


def waiting_harness(min_member: int, assigned: int, args: dict | None = None) -> PluginHarness:
    bound = [pod(f"bound-{i}", "pg", node="n1") for i in range(assigned)]
    return harness([pod_group("pg", min_member)], [*bound, pod("p", "pg")], args=args)


PERMIT = [
    ("pod does not belong to any podGroup", pod("x"), 3, 0, "Success", 0.0),
    ("pod belongs to a non-existing podGroup", pod("x", "missing"), 3, 0, "Unschedulable", 0.0),
    ("pod belongs to a podGroup that is not yet complete: wait", pod("p", "pg"), 3, 1, "Wait", 60.0),
    ("the pod completing the podGroup is allowed", pod("p", "pg"), 3, 2, "Success", 0.0),
]


@pytest.mark.parametrize("name,incoming,min_member,assigned,code,timeout", PERMIT, ids=[c[0] for c in PERMIT])
def test_permit(name, incoming, min_member, assigned, code, timeout):
    h = waiting_harness(min_member, assigned)
    status, wait = h.plugin.permit(CycleState(), PodInfo(incoming), "n1")
    assert ((status.code.name if status is not None else "Success"), wait) == (code, timeout)


ACTIVATE = [
    ("the group's first assigned pod activates its unassigned siblings", 0, ["default/p"]),
    ("a later pod of the group does not activate them again", 1, []),
]


@pytest.mark.parametrize("name,assigned,activated", ACTIVATE, ids=[c[0] for c in ACTIVATE])
def test_permit_activates_siblings_only_from_the_first_pod(name, assigned, activated):
    """Upstream's ``PermitState.Activate``: were every waiting pod to activate its siblings, the
    pods a failed sibling's PostFilter rejected would go straight back to the active queue."""
    h = waiting_harness(4, assigned)
    state = CycleState()
    status, _ = h.plugin.permit(state, PodInfo(pod("q", "pg")), "n1")
    assert status is not None and status.code == Code.Wait
    assert sorted(state.pods_to_activate) == activated


def test_permit_waits_for_the_podgroups_own_timeout():
    """``scheduleTimeoutSeconds`` of the PodGroup overrides ``permitWaitingTimeSeconds``."""
    h = harness([pod_group("pg", 3, timeout=7)], [pod("p", "pg")], args={"permitWaitingTimeSeconds": 20})
    status, wait = h.plugin.permit(CycleState(), PodInfo(pod("p", "pg")), "n1")
    assert (status.code, wait) == (Code.Wait, 7.0)


async def test_permit_allows_every_waiting_sibling():
    """The pod completing the group allows the waiting ones; a pod of another group keeps waiting."""
    h = waiting_harness(3, 2)
    waiting = {name: WaitingPod(PodInfo(pod(name, group)), {"Coscheduling": 60.0})
               for name, group in (("w1", "pg"), ("other", "pg-other"))}
    for w in waiting.values():
        h.framework.ctx.waiting_pods.add(w)
    status, _ = h.plugin.permit(CycleState(), PodInfo(pod("p", "pg")), "n1")
    assert status is None
    assert await asyncio.wait_for(waiting["w1"].wait(), 1) is None
    assert not waiting["other"]._future.done()
    waiting["other"].reject("test", "done")


POST_FILTER = [
    ("pod does not belong to any podGroup", 4, 0, pod("x"), "can not find pod group", False),
    ("enough pods assigned, do not reject all", 4, 4, pod("p", "pg"), "", False),
    ("pod failed at filter phase, reject all pods", 4, 1, pod("p", "pg"),
     "PodGroup default/pg gets rejected due to Pod p is unschedulable even after PostFilter", True),
    ("at most 10% of the group missing: do not reject", 10, 9, pod("p", "pg"), "", False),
]


@pytest.mark.parametrize("name,min_member,assigned,incoming,message,rejected", POST_FILTER, ids=[c[0] for c in POST_FILTER])
async def test_post_filter(name, min_member, assigned, incoming, message, rejected):
    h = waiting_harness(min_member, assigned)
    waiting = WaitingPod(PodInfo(pod("w", "pg")), {"Coscheduling": 60.0})
    h.framework.ctx.waiting_pods.add(waiting)
    _, status = h.plugin.post_filter(CycleState(), PodInfo(incoming), None)
    assert (status.code, status.message()) == (Code.Unschedulable, message)
    if rejected:
        outcome = await asyncio.wait_for(waiting.wait(), 1)
        assert outcome is not None and outcome.message() == "optimistic rejection in PostFilter"
    else:
        assert not waiting._future.done()
        waiting.allow("Coscheduling")


async def test_unreserve_rejects_the_waiting_group():
    h = waiting_harness(4, 0)
    waiting = WaitingPod(PodInfo(pod("w", "pg")), {"Coscheduling": 60.0})
    h.framework.ctx.waiting_pods.add(waiting)
    h.plugin.unreserve(CycleState(), PodInfo(pod("p", "pg")), "n1")
    outcome = await asyncio.wait_for(waiting.wait(), 1)
    assert outcome is not None and (outcome.code, outcome.message()) == (Code.Unschedulable, "rejection in Unreserve")


def test_cluster_resource_gap():
    """Upstream ``CheckClusterResource``: free room of every node adds up against the request."""
    h = harness([], [pod("busy", cpu="3", node="n1")], nodes=[node("n1"), node("n2")])
    infos = h.table.infos[: h.table.n]
    assert cluster_resource_gap(infos, {"cpu": 5}, "default/pg") == {}
    assert cluster_resource_gap(infos, {"cpu": 6}, "default/pg") == {"cpu": 1000}
    assert format_gap({"cpu": 1500, "memory": 2**30}) == "map[cpu:1500m memory:1Gi]"


@pytest.mark.parametrize("name,spec,message", [
    ("minMember is not an integer", {"minMember": "four"}, "spec.minMember: must be an integer, got 'four'"),
    ("minResources holds a bad quantity", {"minMember": 1, "minResources": {"cpu": "x"}}, "spec.minResources[cpu]: "),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_invalid_pod_group_is_named(name, spec, message):
    with pytest.raises(InvalidPodGroup, match='^PodGroup "default/pg": ' + message.replace("[", r"\[").replace("]", r"\]")):
        PodGroup.parse({"metadata": {"name": "pg", "namespace": "default"}, "spec": spec})


@pytest.mark.parametrize("name,args,error", [
    ("defaults", None, ""),
    ("negative permitWaitingTimeSeconds", {"permitWaitingTimeSeconds": -1},
     "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds: Invalid value: -1: must be greater than 0"),
    ("negative podGroupBackoffSeconds", {"podGroupBackoffSeconds": -5},
     "profiles[0].pluginConfig[0].args.podGroupBackoffSeconds: Invalid value: -5: must be greater than 0"),
    ("unknown field", {"permitWaitingTime": 3}, 'unknown field "permitWaitingTime"'),
], ids=lambda v: v if (isinstance(v, str) and " " in v) or v == "defaults" else "")
def test_args(name, args, error):
    """CoschedulingArgs decode strictly and validate as upstream's ``ValidateCoschedulingArgs``."""
    profile: dict = {"schedulerName": "default-scheduler", "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}
    if args is not None:
        profile["pluginConfig"] = [{"name": "Coscheduling", "args": args}]
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration", "profiles": [profile]}
    registry = {"Coscheduling": Coscheduling}
    if not error:
        config_module.load_dict(doc, registry=registry)
        return
    with pytest.raises(KubeschedError, match=error.replace("[", r"\[").replace("]", r"\]")):
        config_module.load_dict(doc, registry=registry)
