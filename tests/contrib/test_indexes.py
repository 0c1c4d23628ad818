"""Coscheduling's and CapacityScheduling's indexes at scale: the counts they keep as pods come and
go (by PodGroup, by namespace) are those a scan of every pod gives, and a simulation of 2,000
pods in 200 PodGroups places every group whole or not at all."""

from __future__ import annotations

from collections import Counter

from kubesched.contrib.capacityscheduling import CapacityScheduling
from kubesched.contrib.capacityscheduling.elasticquota import build_infos
from kubesched.contrib.coscheduling import Coscheduling
from kubesched.contrib.coscheduling.core import cluster_resource_gap
from kubesched.contrib.coscheduling.index import assigned_pods
from kubesched.contrib.registry import contrib_registry
from kubesched.scheduler.config import load_text
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.simulator.simulate import simulate
from kubesched.testing import PluginHarness
from tests.contrib.conftest import ELASTIC_QUOTA_CRD, POD_GROUP_CRD
from tests.helpers import make_node, make_pod

LABEL = "scheduling.x-k8s.io/pod-group"
GROUPS, MEMBERS, NODES = 200, 10, 50


def pod_group(name: str, min_member: int = MEMBERS) -> dict:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


def group_pods(bound_every: int) -> list[dict]:
    """Ten pods per group; every ``bound_every``-th one bound, round robin over the nodes."""
    pods = []
    for i in range(GROUPS * MEMBERS):
        node = f"n{i % NODES:02}" if i % bound_every == 0 else None
        pods.append(make_pod(f"g{i // MEMBERS:03}-{i % MEMBERS}", cpu="100m", labels={LABEL: f"g{i // MEMBERS:03}"}, node=node))
    return pods


def remove_some(table: NodeTable) -> None:
    """Take away every fifth node (rows move) and one pod of every other remaining node."""
    for name in list(table.names[: table.n])[::5]:
        table.remove_node(name)
    for info in table.infos[: table.n : 2]:
        uid = next(iter(info.pods))
        table.pod_removed(info, info.remove_pod(uid))


def scanned_assigned(table: NodeTable) -> Counter[str]:
    return Counter(f"{p.namespace}/{p.labels[LABEL]}" for info in table.infos[: table.n] for p in info.pods.values())


def test_coscheduling_counts_match_a_scan_as_the_table_changes():
    h = PluginHarness(Coscheduling, nodes=[make_node(f"n{i:02}", cpu="64") for i in range(NODES)], pods=group_pods(3),
                      objects=[POD_GROUP_CRD, *(pod_group(f"g{g:03}") for g in range(GROUPS))])
    manager = h.plugin.manager
    for phase in ("as loaded", "after nodes and pods went"):
        want = scanned_assigned(h.table)
        got = {f"default/g{g:03}": manager.assigned_count(f"g{g:03}", "default") for g in range(GROUPS)}
        assert got == {name: want[name] for name in got}, phase
        by_node = assigned_pods(h.table).by_node("default/g007")
        assert cluster_resource_gap(h.table.infos[: h.table.n], {"cpu": 10**6}, "default/g007", by_node) == \
            cluster_resource_gap(h.table.infos[: h.table.n], {"cpu": 10**6}, "default/g007"), phase
        remove_some(h.table)
    assert {len(manager.siblings("default", f"g{g:03}")) for g in range(GROUPS)} == {MEMBERS}
    assert h.run(make_pod("extra", cpu="100m", labels={LABEL: "g000"})).pre_filter.code == "Success"


def test_capacityscheduling_usage_matches_a_scan_as_the_table_changes():
    namespaces = [f"ns{i:02}" for i in range(20)]
    quotas = [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "q", "namespace": ns},
               "spec": {"min": {"cpu": "10", "memory": "10Gi"}, "max": {"cpu": "100", "memory": "100Gi"}}} for ns in namespaces]
    pods = [make_pod(f"p{i}", cpu="100m", memory="64Mi", namespace=namespaces[i % 20], node=f"n{i % NODES:02}")
            for i in range(GROUPS * MEMBERS)]
    h = PluginHarness(CapacityScheduling, nodes=[make_node(f"n{i:02}", cpu="64") for i in range(NODES)], pods=pods,
                      objects=[ELASTIC_QUOTA_CRD, *quotas],
                      namespaces=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces])
    for phase in ("as loaded", "after nodes and pods went"):
        got = h.plugin.snapshot_elastic_quota().infos
        want = build_infos(quotas, (p for info in h.table.infos[: h.table.n] for p in info.pods.values()))
        assert {ns: (info.used, info.pods) for ns, info in got.items()} == \
            {ns: (info.used, info.pods) for ns, info in want.items()}, phase
        remove_some(h.table)


def test_two_thousand_pods_in_two_hundred_groups_bind_whole_or_not_at_all():
    """95 nodes with room for 20 pods each: 190 of the 200 groups fit, each whole."""
    registry = {**in_tree_registry(), **contrib_registry()}
    config = load_text("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint: {enabled: [{name: Coscheduling}]}
    queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
""", registry=registry)
    objects = [POD_GROUP_CRD, *(pod_group(f"g{g:03}") for g in range(GROUPS)),
               *(make_pod(f"g{g:03}-{i}", cpu="1", labels={LABEL: f"g{g:03}"}) for g in range(GROUPS) for i in range(MEMBERS)),
               *(make_node(f"n{n:03}", cpu="20", memory="64Gi") for n in range(95))]
    result = simulate(objects, config, registry=registry)
    bound = Counter(p["metadata"]["labels"][LABEL] for p in result.pods() if p["spec"].get("nodeName"))
    assert (len(bound), set(bound.values())) == (190, {MEMBERS})
    statuses = Counter(o["status"]["phase"] for o in result.store.iter_all(result.store.custom.resolve(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup")))
    assert statuses == {"Running": 190, "Scheduling": 10}
    assert result.spins == []  # the groups that do not fit wait in unschedulablePods: no spinning
