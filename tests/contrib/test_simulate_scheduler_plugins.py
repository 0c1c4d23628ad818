"""The bundled scheduler-plugins end to end: ``kubesched simulate`` with the examples' configs,
no ``--plugin`` flag, the CRDs installed by the command, the scenarios on the virtual clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.cli.exitcodes import OK
from kubesched.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(capsys: pytest.CaptureFixture[str], example: str, scenario: bool = False, config: Path | None = None) -> dict:
    return simulate_with_warnings(capsys, example, scenario, config)[0]


def simulate_with_warnings(capsys: pytest.CaptureFixture[str], example: str, scenario: bool = False,
                           config: Path | None = None) -> tuple[dict, str]:
    """The JSON document ``simulate -o json`` prints, and what it warned of on stderr."""
    config = config or EXAMPLES / example / "config.yaml"
    argv = ["simulate", "-f", str(EXAMPLES / example / "cluster.yaml"), "--config", str(config), "-o", "json"]
    if scenario:
        argv += ["--scenario", str(EXAMPLES / example / "scenario.yaml")]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == OK
    return json.loads(captured.out), captured.err


def placements(doc: dict) -> dict[str, str]:
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"].get("nodeName", "")
            for p in doc["items"] if p["kind"] == "Pod"}


def test_a_pod_group_that_cannot_run_whole_binds_none(capsys: pytest.CaptureFixture[str]) -> None:
    """minMember 4 on three nodes with room for one pod each: none of the four binds, and each
    pod says why."""
    doc = simulate(capsys, "coscheduling")
    assert set(placements(doc).values()) == {""}
    reasons = json.dumps(doc["events"])
    assert "Insufficient cpu" in reasons
    assert "PodGroup default/trainer gets rejected due to Pod trainer-3 is unschedulable even after PostFilter" in reasons
    assert any(item["kind"] == "CustomResourceDefinition" for item in doc["items"])
    [pod_group] = [item for item in doc["items"] if item["kind"] == "PodGroup"]
    assert pod_group["status"]["phase"] == "Scheduling"


def test_the_group_binds_together_once_a_node_is_added(capsys: pytest.CaptureFixture[str]) -> None:
    doc = simulate(capsys, "coscheduling", scenario=True)
    bound = [e for e in doc["timeline"] if e["event"] == "bound"]
    assert sorted(e["object"] for e in bound) == [f"Pod default/trainer-{i}" for i in range(4)]
    assert len({e["seconds"] for e in bound}) == 1 and bound[0]["seconds"] >= 120
    assert "node-extra-1" in placements(doc).values()
    [pod_group] = [item for item in doc["items"] if item["kind"] == "PodGroup"]
    assert pod_group["status"] == {"phase": "Running", "running": 4, "succeeded": 0, "failed": 0}


def test_with_the_default_args_a_group_that_cannot_fit_does_not_hang_the_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a group backoff, the pod rejected by a sibling's PostFilter is popped again at once
    (SchedulerPopFromBackoffQ) and the group is retried in a loop: the run still ends, and says so."""
    doc, warnings = simulate_with_warnings(capsys, "coscheduling", config=EXAMPLES / "coscheduling" / "config-defaults.yaml")
    assert set(placements(doc).values()) == {""}
    assert "warning: spinning: default/trainer-0, default/trainer-1, default/trainer-2, default/trainer-3: attempted " in warnings


def test_with_the_default_args_the_group_binds_when_the_node_joins(capsys: pytest.CaptureFixture[str]) -> None:
    doc = simulate(capsys, "coscheduling", scenario=True, config=EXAMPLES / "coscheduling" / "config-defaults.yaml")
    bound = [e for e in doc["timeline"] if e["event"] == "bound"]
    assert sorted(e["object"] for e in bound) == [f"Pod default/trainer-{i}" for i in range(4)]
    assert {e["seconds"] for e in bound} == {120}
    [spin] = doc["spinning"]
    assert (spin["pods"], spin["fromSeconds"], spin["toSeconds"]) == ([f"default/trainer-{i}" for i in range(4)], 0, 120)


def test_qossort_places_guaranteed_and_burstable_pods_first(capsys: pytest.CaptureFixture[str]) -> None:
    """The pods are created BestEffort first; QOSSort still schedules it last, so it is the one
    left without room."""
    assert placements(simulate(capsys, "qossort")) == {
        "default/best-effort": "", "default/burstable": "node-1", "default/guaranteed": "node-1"}


def test_elastic_quotas_refuse_over_max_lend_unused_min_and_take_it_back(capsys: pytest.CaptureFixture[str]) -> None:
    doc = simulate(capsys, "capacityscheduling", scenario=True)
    timeline = doc["timeline"]
    over_max = [e for e in timeline if e["event"] == "pending" and e["object"] == "Pod team-b/b-5"]
    assert "Pod team-b/b-5 is rejected in PreFilter because ElasticQuota team-b is more than Max" in over_max[0]["message"]
    borrowed = [e["object"] for e in timeline if e["event"] == "bound" and e["seconds"] == 0]
    assert borrowed == [f"Pod team-b/b-{i}" for i in range(1, 5)]
    preempted = {e["object"] for e in timeline if e["event"] == "preempted"}
    assert preempted == {"Pod team-b/b-1", "Pod team-b/b-2"}
    used = {item["metadata"]["namespace"]: item["status"]["used"] for item in doc["items"] if item["kind"] == "ElasticQuota"}
    assert used == {"team-a": {"cpu": "2", "memory": "2Gi"}, "team-b": {"cpu": "2", "memory": "2Gi"}}
    assert placements(doc) == {"team-a/a-1": "node-1", "team-a/a-2": "node-1", "team-b/b-3": "node-1",
                               "team-b/b-4": "node-1", "team-b/b-5": ""}
