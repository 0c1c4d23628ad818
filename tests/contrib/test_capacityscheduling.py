"""CapacityScheduling (scheduler-plugins ``pkg/capacityscheduling/capacity_scheduling_test.go``):
PreFilter against ``max`` and the quotas' total ``min``, and victim selection by the quota rules."""

from __future__ import annotations

import pytest

from kubesched.api.types import PodInfo
from kubesched.contrib.capacityscheduling import CapacityScheduling
from kubesched.contrib.capacityscheduling.capacity_scheduling import _may_evict
from kubesched.contrib.capacityscheduling.elasticquota import ElasticQuotaInfo, ElasticQuotaInfos
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.testing import PluginHarness
from tests.contrib.conftest import ELASTIC_QUOTA_CRD


def quota(namespace: str, minimum: dict, maximum: dict) -> dict:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": namespace}, "spec": {"min": minimum, "max": maximum}}


def pod(name: str, namespace: str, cpu: str, node: str = "", priority: int = 0) -> dict:
    spec: dict = {"priority": priority,
                  "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": f"{namespace}-{name}"},
            "spec": spec}


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "10", "memory": "100Gi", "pods": "110"},
                   "capacity": {"cpu": "10", "memory": "100Gi", "pods": "110"}}}
QUOTAS = [quota("ns1", {"cpu": "3", "memory": "10Gi"}, {"cpu": "5", "memory": "20Gi"}),
          quota("ns2", {"cpu": "3", "memory": "10Gi"}, {"cpu": "5", "memory": "20Gi"})]


def harness(pods: list[dict], quotas: list[dict] = QUOTAS) -> PluginHarness:
    return PluginHarness(CapacityScheduling, nodes=[NODE], pods=pods, objects=[ELASTIC_QUOTA_CRD, *quotas],
                         namespaces=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("ns1", "ns2", "ns3")])


PRE_FILTER = [
    ("pod subjects to ElasticQuota", [pod("t1-p1", "ns1", "1", "n1")], pod("t1-p2", "ns1", "1"), "Success", ""),
    ("the sum of used and pod request exceeds max", [pod("t1-p1", "ns1", "4", "n1")], pod("t1-p2", "ns1", "2"),
     "Unschedulable", "Pod ns1/t1-p2 is rejected in PreFilter because ElasticQuota ns1 is more than Max"),
    ("borrowing within the min of other quotas", [pod("t1-p1", "ns1", "4", "n1")], pod("t1-p2", "ns1", "1"), "Success", ""),
    ("the sum of all quotas' used and pod request exceeds the total min",
     [pod("t1-p1", "ns1", "4", "n1"), pod("t2-p1", "ns2", "2", "n1")], pod("t1-p2", "ns1", "1"),
     "Unschedulable", "Pod ns1/t1-p2 is rejected in PreFilter because total ElasticQuota used is more than min"),
    ("a pod of a namespace without ElasticQuota is not limited", [pod("t1-p1", "ns1", "6", "n1")], pod("t3-p1", "ns3", "9"),
     "Success", ""),
    ("finished pods do not use quota", [{**pod("t1-p1", "ns1", "5", "n1"), "status": {"phase": "Succeeded"}}],
     pod("t1-p2", "ns1", "5"), "Success", ""),
]


@pytest.mark.parametrize("name,pods,incoming,code,message", PRE_FILTER, ids=[c[0] for c in PRE_FILTER])
def test_pre_filter(name, pods, incoming, code, message):
    result = harness(pods).run(incoming)
    assert (result.pre_filter.code, " ".join(result.pre_filter.reasons)) == (code, message)


def eq(namespace: str, used_cpu: int, min_cpu: int = 3000) -> ElasticQuotaInfo:
    return ElasticQuotaInfo(namespace, {"cpu": min_cpu, "memory": 0}, {"cpu": 5000, "memory": 0}, {"cpu": used_cpu})


# ns1 uses 1 CPU of its min 3; ns2 uses 4 CPUs of its min 3 (borrowing) or 1 (within its min).
MAY_EVICT = [
    ("preemptor within its min takes back from a borrowing quota", "ns1", "ns2", 4000, 0, 10, False, True),
    ("preemptor within its min leaves a quota within its min alone", "ns1", "ns2", 1000, 0, 10, False, False),
    ("preemptor within its min does not evict its own quota's pods", "ns1", "ns1", 4000, 10, 0, False, False),
    ("preemptor beyond its min only evicts lower priority pods of its own quota", "ns1", "ns1", 1000, 10, 0, True, True),
    ("preemptor beyond its min never evicts another quota's pods", "ns1", "ns2", 4000, 10, 0, True, False),
    ("preemptor beyond its min keeps equal priority pods of its own quota", "ns1", "ns1", 1000, 0, 0, True, False),
    ("preemptor without quota evicts lower priority pods without quota", "ns3", "ns4", 1000, 10, 0, False, True),
    ("preemptor without quota never evicts quota'd pods", "ns3", "ns1", 1000, 10, 0, False, False),
]


@pytest.mark.parametrize("name,preemptor_ns,victim_ns,used_ns2,preemptor_priority,victim_priority,over_min,want", MAY_EVICT,
                         ids=[c[0] for c in MAY_EVICT])
def test_potential_victims(name, preemptor_ns, victim_ns, used_ns2, preemptor_priority, victim_priority, over_min, want):
    infos = ElasticQuotaInfos({"ns1": eq("ns1", 1000), "ns2": eq("ns2", used_ns2)})
    preemptor = PodInfo(pod("p", preemptor_ns, "1", priority=preemptor_priority))
    victim = PodInfo(pod("v", victim_ns, "1", "n1", priority=victim_priority))
    assert _may_evict(preemptor, victim, infos, over_min) is want


def test_select_victims_reclaims_only_what_was_borrowed():
    """ns2 borrows 3 CPUs beyond its min; ns1, within its min, takes back what its pod needs:
    victims are the least important ns2 pods, as few as keep the quotas' total within their min."""
    bound = [pod(f"b{i}", "ns2", "1", "n1", priority=i) for i in range(6)]
    h = harness(bound)
    preemptor = PodInfo(pod("a", "ns1", "1"))
    state = CycleState()
    h.plugin.pre_filter(state, preemptor, h.table.all_rows())
    victims, violations, status = h.plugin.select_victims_on_node(state, preemptor, h.table.get("n1").clone(), [])
    assert status is None and violations == 0
    assert [v.name for v in victims] == ["b0"]
