"""``capacity``: copies of a pod placed by the full scheduler until one is rejected. Counted against
an independent count on resource-only clusters, stopped by the FitError ``simulate`` gives the next
copy, and bounded by taints, node affinity, topology spread and anti-affinity."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import pytest

from kubesched.api.kinds import POD
from kubesched.api.quantity import parse_quantity
from kubesched.cli.main import main
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.capacity import LIMIT_REACHED, TemplateError, capacity, without_preemption
from kubesched.simulator.simulate import simulate
from tests.helpers import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"


def independent_count(nodes: list[dict], bound: list[dict], template: dict) -> int:
    """Per node, the copies its free room holds (the tightest of cpu, memory and pod slots), summed."""
    wanted = {k: parse_quantity(v) for k, v in template["spec"]["containers"][0].get("resources", {}).get("requests", {}).items()}
    total = 0
    for node in nodes:
        name, allocatable = node["metadata"]["name"], node["status"]["allocatable"]
        on_node = [p for p in bound if p["spec"].get("nodeName") == name]
        fits = int(allocatable["pods"]) - len(on_node)
        for resource, amount in wanted.items():
            used = sum((parse_quantity(p["spec"]["containers"][0]["resources"]["requests"].get(resource, "0"))
                        for p in on_node), Fraction(0))
            fits = min(fits, int((parse_quantity(allocatable[resource]) - used) // amount))
        total += max(fits, 0)
    return total


RESOURCE_ONLY = [
    pytest.param([make_node("n1", cpu="4"), make_node("n2", cpu="2500m")], [], make_pod("p", cpu="500m"),
                 id="cpu runs out first"),
    pytest.param([make_node("n1", memory="3Gi"), make_node("n2", memory="5Gi")], [], make_pod("p", cpu="10m", memory="1Gi"),
                 id="memory runs out first"),
    pytest.param([make_node("n1", pods="3"), make_node("n2", pods="5")], [], make_pod("p", cpu="100m"),
                 id="pod slots run out first"),
    pytest.param([make_node("n1", cpu="4"), make_node("n2", cpu="4")],
                 [make_pod("busy", cpu="3", node="n1"), make_pod("half", cpu="1500m", memory="1Gi", node="n2")],
                 make_pod("p", cpu="700m", memory="100Mi"), id="bound pods take their room"),
    pytest.param([make_node(f"n{i}", cpu=str(i + 1), memory=f"{2 * i + 1}Gi") for i in range(6)], [],
                 make_pod("p", cpu="300m", memory="600Mi"), id="uneven nodes, both resources"),
]


@pytest.mark.parametrize(("nodes", "bound", "template"), RESOURCE_ONLY)
def test_count_agrees_with_free_room_divided_by_the_request(nodes, bound, template):
    result = capacity(copy.deepcopy(nodes + bound), [template], default_configuration())
    (pod,) = result.pods
    assert pod.count == independent_count(nodes, bound, template)
    assert pod.stop_reason == "Unschedulable"
    assert sum(pod.per_node.values()) == pod.count


@pytest.mark.parametrize("preemption", [False, True], ids=["without preemption", "with preemption"])
def test_stops_with_the_message_simulate_gives_the_next_copy(preemption):
    nodes = [make_node("n1", cpu="2"), make_node("n2", cpu="1", taints=[{"key": "k", "effect": "NoSchedule"}]),
             make_node("n3", cpu="3", unschedulable=True)]
    template = make_pod("web", cpu="600m")
    cfg = default_configuration() if preemption else without_preemption(default_configuration())
    (pod,) = capacity(copy.deepcopy(nodes), [template], default_configuration(), preemption=preemption).pods
    copies = [make_pod(f"web-{i}", cpu="600m") for i in range(1, pod.count + 2)]
    result = simulate(copy.deepcopy(nodes) + copies, cfg)
    (pending,) = [p for p in result.pods() if not p["spec"].get("nodeName")]
    condition = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (pod.count, pod.stop_reason, pod.stop_message) == (3, condition["reason"], condition["message"])
    assert ("preemption:" in pod.stop_message) is preemption


def spread(taints: str) -> dict:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                           "nodeTaintsPolicy": taints, "labelSelector": {"matchLabels": {"app": "p"}}}]}


def zone_nodes() -> list[dict]:
    """Zone a: two 2-cpu nodes; zone b: one 1-cpu node, tainted; zone c: one 8-cpu node."""
    return [make_node("a1", cpu="2", labels={ZONE: "a"}), make_node("a2", cpu="2", labels={ZONE: "a"}),
            make_node("b1", cpu="1", labels={ZONE: "b"}, taints=[{"key": "gpu", "effect": "NoSchedule"}]),
            make_node("c1", cpu="8", labels={ZONE: "c"})]


TOLERATE_GPU = {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}
IN_ZONE_A = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}]}}}}
ONE_PER_NODE = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "p"}}}]}}}


@pytest.mark.parametrize(("spec", "count", "per_node", "reason_part"), [
    pytest.param({}, 12, {"c1": 8, "a1": 2, "a2": 2}, "1 node(s) had untolerated taint(s)", id="a taint keeps copies off"),
    pytest.param(TOLERATE_GPU, 13, {"c1": 8, "a1": 2, "a2": 2, "b1": 1}, "4 Insufficient cpu", id="a toleration lets them on"),
    pytest.param(IN_ZONE_A, 4, {"a1": 2, "a2": 2}, "1 node(s) didn't match Pod's node affinity/selector",
                 id="required node affinity confines them"),
    # Zone b's node is tainted but still a domain (with no pods): a and c hold one each.
    pytest.param(spread("Ignore"), 2, {"a2": 1, "c1": 1}, "3 node(s) didn't match pod topology spread constraints",
                 id="zone spread counts a tainted zone as empty"),
    # Honouring taints, zones a and c only: a holds 4, so c may hold at most 4 + 1.
    pytest.param(spread("Honor"), 9, {"c1": 5, "a1": 2, "a2": 2}, "1 node(s) didn't match pod topology spread constraints",
                 id="zone spread stops at the skew between the zones it may use"),
    pytest.param(ONE_PER_NODE, 3, {"a1": 1, "a2": 1, "c1": 1}, "didn't match pod anti-affinity rules",
                 id="anti-affinity allows one per node"),
])
def test_constraints_bound_the_count(spec, count, per_node, reason_part):
    template = make_pod("p", cpu="1", labels={"app": "p"}, **spec)
    (pod,) = capacity(zone_nodes(), [template], default_configuration()).pods
    assert (pod.count, pod.per_node) == (count, per_node)
    assert reason_part in pod.stop_message


def test_max_stops_early_with_limit_reached():
    (pod,) = capacity([make_node("n1")], [make_pod("p", cpu="100m")], default_configuration(), max_copies=5).pods
    assert (pod.count, pod.stop_reason, pod.per_node) == (5, LIMIT_REACHED, {"n1": 5})


def test_templates_take_turns_on_the_cluster_the_previous_one_left():
    big, small = make_pod("big", cpu="3"), make_pod("small", cpu="1")
    result = capacity([make_node("n1", cpu="4"), make_node("n2", cpu="4")], [big, small], default_configuration())
    assert [(p.name, p.count) for p in result.pods] == [("big", 2), ("small", 2)]


def test_copies_skip_names_in_use_and_unplaced_copies_are_removed():
    nodes = [make_node("n1", cpu="2")]
    result = capacity([*nodes, make_pod("p-1", cpu="1", node="n1")], [make_pod("p", cpu="1")], default_configuration())
    names = sorted(p["metadata"]["name"] for p in result.store.iter_all(POD))
    assert result.pods[0].count == 1 and names == ["p-1", "p-2"]


@pytest.mark.parametrize(("template", "message"), [
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}, 'Deployment "d": kind: must be Pod'),
    (make_pod("p", node="n1"), 'Pod "p": spec.nodeName: must be empty'),
    (make_pod("p", schedulerName="other"), 'Pod "p": spec.schedulerName: "other" has no profile'),
])
def test_templates_that_cannot_be_copied_are_refused_by_name_and_field(template, message):
    with pytest.raises(TemplateError, match=message):
        capacity([make_node("n1")], [template], default_configuration())


def test_cli_prints_the_count_reason_and_distribution_and_json(tmp_path, capsys):
    (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": [make_node("n1", cpu="2"), make_node("n2", cpu="1")]}))
    (tmp_path / "pod.json").write_text(json.dumps(make_pod("web", cpu="1")))
    argv = ["capacity", "-f", str(tmp_path / "nodes.json"), "--pod", str(tmp_path / "pod.json")]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == [
        "The cluster can schedule 3 instance(s) of the pod web.",
        "Termination reason: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu.",
        "", "Pod distribution among nodes:", "  n1: 2 instance(s)", "  n2: 1 instance(s)"]
    assert main([*argv, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"pods": [{
        "name": "web", "namespace": "default", "count": 3, "perNode": {"n1": 2, "n2": 1},
        "stopReason": {"reason": "Unschedulable", "message": "0/2 nodes are available: 2 Insufficient cpu."}}]}


def test_cli_refuses_a_negative_max(tmp_path, capsys):
    (tmp_path / "n.json").write_text(json.dumps(make_node("n1")))
    (tmp_path / "p.json").write_text(json.dumps(make_pod("p")))
    assert main(["capacity", "-f", str(tmp_path / "n.json"), "--pod", str(tmp_path / "p.json"), "--max", "-1"]) == 1
    assert "--max: must be 0 or more, not -1" in capsys.readouterr().err


def test_copies_claiming_devices_from_a_template_count_the_devices():
    """Each copy gets its own claim from the template (the ResourceClaim controller creates it),
    so the nodes' devices bound the count."""
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    claim_template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                      "metadata": {"name": "one-gpu", "namespace": "default"},
                      "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}
    slices = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
               "spec": {"driver": "gpu.example.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": f"gpu-{i}"} for i in range(gpus)]}} for node, gpus in (("n1", 3), ("n2", 1))]
    template = make_pod("trainer", cpu="100m", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    objects = [make_node("n1"), make_node("n2"), device_class, claim_template, *slices]
    (pod,) = capacity(objects, [template], default_configuration()).pods
    assert (pod.count, pod.per_node) == (4, {"n1": 3, "n2": 1})
    assert "cannot allocate all claims" in pod.stop_message
