"""PluginHarness behaves exactly as documented (docs/writing-a-plugin.md)."""

import pytest

from kubesched.api.apierrors import Invalid
from kubesched.api.errors import ConfigError
from kubesched.api.kinds import POD
from kubesched.scheduler.framework.interface import FilterPlugin, ScorePlugin
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.framework.status import Status as FwStatus
from kubesched.testing import PluginHarness, Status
from tests.helpers import make_node, make_pod


def nodes():
    return [make_node("a", labels={"zone": "z1"}), make_node("b", labels={"zone": "z2"}),
            make_node("c", labels={"zone": "z1"}, taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])]


def test_node_affinity_filter_scores_and_prefilter_node_names():
    pod = make_pod("p", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["c"]}]}}],
    }})
    r = PluginHarness("NodeAffinity", nodes=nodes()).run(pod)
    assert r.pre_filter == Status("Success", [])
    assert r.pre_filter.node_names is None
    assert r.filter == {"a": Status("Success", []), "b": Status("UnschedulableAndUnresolvable", ["node(s) didn't match Pod's node affinity/selector"]),
                        "c": Status("Success", [])}
    assert r.raw_scores == {"a": 0, "b": 0, "c": 10}
    assert r.scores == {"a": 0, "b": 0, "c": 100}


def test_prefilter_node_names_from_match_fields():
    pod = make_pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}})
    r = PluginHarness("NodeAffinity", nodes=nodes()).run(pod)
    assert r.pre_filter.node_names == {"b"}


def test_skip_at_prefilter_means_success_everywhere():
    r = PluginHarness("NodeAffinity", nodes=nodes()).run(make_pod("plain"))
    assert r.pre_filter.code == "Skip"
    assert all(s == Status("Success", []) for s in r.filter.values())


def test_args_are_defaulted_and_validated_like_a_config_file():
    added = {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]}}}
    r = PluginHarness("NodeAffinity", args=added, nodes=nodes()).run(make_pod("p"))
    assert r.filter["a"] == Status("UnschedulableAndUnresolvable", ["node(s) didn't match scheduler-enforced node affinity"])
    with pytest.raises(ConfigError, match="hardPodAffinityWeight"):
        PluginHarness("InterPodAffinity", args={"hardPodAffinityWeight": 101}, nodes=nodes())


def test_candidates_limit_scoring_and_resources_fit_reports_reasons():
    h = PluginHarness("NodeResourcesFit", nodes=[make_node("small", cpu="1"), make_node("big", cpu="8")],
                      pods=[make_pod("busy", cpu="500m", node="small")])
    r = h.run(make_pod("p", cpu="1"), candidates=["big"])
    assert r.filter["small"] == Status("Unschedulable", ["Insufficient cpu"])
    assert r.filter["big"].is_success
    assert set(r.raw_scores) == {"big"}
    assert r.scores == r.raw_scores  # LeastAllocated has no normalisation


def test_taint_toleration_reverse_normalisation():
    prefer = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    h = PluginHarness("TaintToleration", nodes=[make_node("tainted", taints=prefer), make_node("clean")])
    r = h.run(make_pod("p"))
    assert r.raw_scores == {"tainted": 1, "clean": 0}
    assert r.scores == {"tainted": 0, "clean": 100}


def test_pre_enqueue_and_less():
    gates = PluginHarness("SchedulingGates")
    assert gates.pre_enqueue(make_pod("g", schedulingGates=[{"name": "a"}, {"name": "b"}])) == \
        Status("UnschedulableAndUnresolvable", ["waiting for scheduling gates: [a b]"])
    assert gates.pre_enqueue(make_pod("free")).is_success
    sort = PluginHarness("PrioritySort", objects=[{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                                    "metadata": {"name": "high"}, "value": 100}])
    high = make_pod("h", priorityClassName="high")
    low = make_pod("l")
    assert sort.less(high, low) and not sort.less(low, high)
    assert sort.less(make_pod("early"), make_pod("late"), queued_at1=1.0, queued_at2=2.0)
    with pytest.raises(TypeError):
        sort.pre_enqueue(low)


class EvenNodes(FilterPlugin, ScorePlugin):
    name = "EvenNodes"

    def filter(self, state, pod, node_info):
        return None if node_info.name.endswith(("0", "2", "4")) else FwStatus(Code.Unschedulable, "odd node")

    def score(self, state, pod, node_name):
        return int(node_name[-1]) * 10


def test_works_for_out_of_tree_classic_plugins():
    h = PluginHarness(EvenNodes, nodes=[make_node(f"n{i}") for i in range(4)])
    r = h.run(make_pod("p"))
    assert r.filter["n1"] == Status("Unschedulable", ["odd node"]) and r.filter["n2"].is_success
    assert r.raw_scores == r.scores == {"n0": 0, "n1": 10, "n2": 20, "n3": 30}
    assert r.pre_score.is_success


def test_bad_manifests_are_rejected_with_the_field():
    with pytest.raises(Invalid, match=r"spec.containers\[0\].image: Required value"):
        PluginHarness("NodeName", pods=[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                                         "spec": {"containers": [{"name": "c"}]}}])


@pytest.mark.parametrize(("admission", "mode"), [
    pytest.param(True, "Immediate", id="admission defaults the class as the API server does"),
    pytest.param(False, None, id="without admission the class stays as written"),
])
def test_admission_switch_decides_whether_inputs_are_defaulted(admission, mode):
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "plain"}, "provisioner": "p"}
    h = PluginHarness("VolumeZone", objects=[sc], admission=admission)
    assert h.plugin.handle.objects("StorageClass")["plain"].get("volumeBindingMode") == mode


def test_inputs_without_admission_are_still_validated():
    with pytest.raises(Invalid, match=r"spec.containers\[0\].image: Required value"):
        PluginHarness("NodeName", admission=False, pods=[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                                                          "spec": {"containers": [{"name": "c"}]}}])


def test_given_uid_and_bare_priority_reach_the_plugin():
    pod = make_pod("p", uid="given-uid")
    pod["spec"]["priority"] = 7
    h = PluginHarness("NodeName", pods=[dict(pod, spec=dict(pod["spec"], nodeName="a"))], nodes=[make_node("a")])
    stored = next(iter(h.store.iter_all(POD)))
    assert (stored["metadata"]["uid"], stored["spec"]["priority"]) == ("given-uid", 7)
