"""``kubesched simulate --scenario``: the timeline in the table and in ``-o json``, a step that
cannot be carried out (exit 1 after the report), and an invalid scenario file (a clear error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubesched.cli.exitcodes import ERROR, OK
from kubesched.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
SCALE_UP = ["-f", str(EXAMPLES / "scale-up" / "cluster.yaml"), "--scenario", str(EXAMPLES / "scale-up" / "scenario.yaml")]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_table_starts_with_the_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", *SCALE_UP)
    assert code == OK
    lines = out.splitlines()
    assert lines[0] == "Timeline (virtual time since scheduling began):"
    assert any("step" in line and "scale Deployment default/worker to 6 replicas" in line for line in lines)
    assert lines.index("") < lines.index(next(line for line in lines if line.startswith("NAMESPACE")))
    assert "6/6 pods scheduled." in lines


def test_json_carries_the_timeline_with_the_pods(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", *SCALE_UP, "-o", "json")
    assert code == OK
    doc = json.loads(out)
    steps = [e for e in doc["timeline"] if e["event"] == "step"]
    assert [(e["at"], e["seconds"]) for e in steps] == [("1m0s", 60.0), ("3m0s", 180.0)]
    pending = [e for e in doc["timeline"] if e["event"] == "pending"]
    assert len(pending) == 2 and all("Insufficient cpu" in e["message"] for e in pending)
    assert {e["node"] for e in doc["timeline"] if e["event"] == "bound" and e["seconds"] >= 180} == {"big-1", "big-2"}


def test_without_a_scenario_there_is_no_timeline(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "simulate", "-f", str(EXAMPLES / "scale-up" / "cluster.yaml"), "-o", "json")
    assert "timeline" not in json.loads(out)


def test_a_step_that_fails_exits_1_after_the_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n- at: 5s\n  drain: {nodes: [node-9]}\n")
    code, out, err = run(capsys, "simulate", "-f", str(EXAMPLES / "scale-up" / "cluster.yaml"), "--scenario", str(scenario))
    assert code == ERROR
    assert 'error  steps[0]: drain: node "node-9" not found' in out
    assert err == ('error: 1 scenario step(s) could not be carried out: steps[0] (at 5s): drain: node "node-9" not found\n')


def test_an_invalid_scenario_is_an_error_before_anything_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n- at: soon\n  cordon: {nodes: [a]}\n")
    code, out, err = run(capsys, "simulate", "-f", str(EXAMPLES / "scale-up" / "cluster.yaml"), "--scenario", str(scenario))
    assert code == ERROR and out == ""
    assert err == f'error: {scenario}: invalid scenario: steps[0] (at soon): at: time: invalid duration "soon"\n'
