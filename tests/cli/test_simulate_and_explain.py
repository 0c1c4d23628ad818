"""``kubesched simulate`` and ``kubesched explain`` on the bundled example: outputs as data, and
clear errors for pods that cannot be explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubesched.cli.main import main
from kubesched.cli.simulate import pending_reason, pod_status

CLUSTER = str(Path(__file__).resolve().parents[2] / "examples" / "cluster")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_simulate_as_yaml_and_json_lists_the_same_pods(capsys):
    _, as_yaml, _ = run(capsys, "simulate", "-f", CLUSTER, "-o", "yaml")
    _, as_json, _ = run(capsys, "simulate", "-f", CLUSTER, "-o", "json")
    from_yaml, from_json = yaml.safe_load(as_yaml), json.loads(as_json)
    pods = lambda doc: {(i["metadata"]["name"], i["spec"].get("nodeName")) for i in doc["items"] if i["kind"] == "Pod"}  # noqa: E731
    assert pods(from_yaml) == pods(from_json)
    assert ("web-1", "node-b1") in pods(from_json) and ("analytics", None) in pods(from_json)


def test_explain_json_has_each_attempt_with_filters_and_scores(capsys):
    code, out, _ = run(capsys, "explain", "-f", CLUSTER, "web-1", "-n", "shop", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    (attempt,) = doc["attempts"]
    assert doc["pod"] == "shop/web-1" and attempt["chosen"] == "node-b1"
    assert json.dumps(attempt).count("untolerated taint") >= 1


def test_explaining_an_unknown_pod_names_it(capsys):
    code, _, err = run(capsys, "explain", "-f", CLUSTER, "nope", "-n", "shop")
    assert code == 1
    assert 'pod "shop/nope" is not in the manifests' in err


def test_a_missing_manifest_path_is_an_error_naming_it(capsys):
    code, _, err = run(capsys, "simulate", "-f", "/does/not/exist")
    assert code == 1
    assert "/does/not/exist" in err


GATED = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
         "message": "Scheduling is blocked due to non-empty scheduling gates"}


@pytest.mark.parametrize("spec, conditions, status, reason", [
    ({"schedulingGates": [{"name": "g"}]}, [GATED], "SchedulingGated", "waiting for scheduling gates: [g]"),
    ({"schedulingGates": [{"name": "g"}]}, [], "Pending", "waiting for scheduling gates: [g]"),
    ({}, [{**GATED, "reason": "Unschedulable", "message": "0/3 nodes are available"}], "Pending", "0/3 nodes are available"),
])
def test_simulated_gated_pods_read_as_kubectl_shows_them(spec, conditions, status, reason):
    pod = {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": "Pending", "conditions": conditions}}
    assert (pod_status(pod), pending_reason(pod, {"default-scheduler"})) == (status, reason)


GANG = str(Path(__file__).resolve().parents[2] / "examples" / "gang-scheduling" / "cluster")


@pytest.mark.parametrize(("pod", "line"), [
    pytest.param("worker-0", "Not bound: the cycle chose node-b, then 0/1 nodes are available: 1 rejected due to timeout "
                 "after waiting 5m0s at plugin GangScheduling.", id="a gang pod rejected at Permit says so after its cycle"),
    pytest.param("server-0", None, id="a bound pod has no such line"),
])
def test_explain_says_when_the_chosen_node_was_not_bound(capsys, pod, line):
    code, out, _ = run(capsys, "explain", "-f", GANG, "--feature-gates", "GenericWorkload=true,GangScheduling=true", pod)
    assert code == 0
    unbound = [text for text in out.splitlines() if text.startswith("Not bound:")]
    assert unbound == ([line] if line else [])
