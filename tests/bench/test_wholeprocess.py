"""kubesched's whole-process rows of ``kubesched bench`` (RunStartup, UpThroughput,
SimulateEndToEnd) at tiny sizes: each runs its subject's process and reports its figures. No
figure is checked against a bound: benchmarks print figures, tests check behaviour."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.bench import compare_revisions as cr
from kubesched.bench import subject, wholeprocess
from kubesched.bench.simulate_e2e import write_input
from kubesched.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def bench_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["bench", *args, "--timeout", "60", "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    assert doc["kind"] == "whole-process" and doc["complete"] and doc["subject"] == str(REPO)
    assert doc["machine"]["cpus"] >= 1
    return doc


def test_run_startup_times_each_start_to_its_first_binding(capsys: pytest.CaptureFixture[str]) -> None:
    doc = bench_json(capsys, "RunStartup", "--nodes", "5", "--pods", "1", "--runs", "2")
    assert doc["params"]["nodes"] == 5 and doc["params"]["runs"] == 2  # two starts, one API server
    seconds = doc["first_binding_seconds"]
    assert 0 < seconds["min"] <= seconds["median"] <= seconds["max"]
    assert doc["first_binding_cpu_seconds"]["median"] > 0 and doc["peak_rss_bytes"] > 0
    assert len(doc["details"]["s to first binding, each start"].split(", ")) == 2


def test_up_throughput_reports_binding_rate_and_create_latency(capsys: pytest.CaptureFixture[str]) -> None:
    doc = bench_json(capsys, "UpThroughput", "--nodes", "3", "--pods", "12", "--concurrency", "4", "--insecure")
    assert doc["params"]["insecure"]
    assert doc["pods_per_second"] > 0 and doc["creates_per_second"] > 0
    assert 0 < doc["create_latency_ms"]["p50"] <= doc["create_latency_ms"]["p99"]
    assert doc["peak_rss_bytes"] > 0


def test_simulate_end_to_end_reports_its_rate_and_bench_at_the_same_size(capsys: pytest.CaptureFixture[str]) -> None:
    doc = bench_json(capsys, "SimulateEndToEnd", "--nodes", "3", "--pods", "10")
    assert doc["pods_per_second"] > 0 and doc["cpu_seconds"] > 0 and doc["wall_seconds"] > 0
    assert doc["bench"]["overall"] > 0  # too few pods for bench's per-second samples: no average, no ratio
    assert doc["percent_of_bench"] is None or doc["percent_of_bench"] > 0


def test_up_against_the_api_server_alone_measures_creation_only_in_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "upthroughput", "--apiserver-only", "--nodes", "0", "--pods", "5", "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert "creates/s:" in out and "create p99 ms:" in out and "subject:" in out
    assert "pods/s created to bound:          -" in out  # nothing binds


def test_the_list_shows_the_rows_apart_from_upstreams_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "list"]) == 0
    upstream, own = capsys.readouterr().out.split("kubesched's whole-process rows:")
    assert "SchedulingBasic" in upstream and "RunStartup" not in upstream
    assert [line.split()[0] for line in own.strip().splitlines()] == ["RunStartup", "UpThroughput", "SimulateEndToEnd"]


def test_simulate_input_is_named_nodes_and_pods() -> None:
    out = io.StringIO()
    write_input(out, 4, 7)
    docs = list(yaml.safe_load_all(out.getvalue()))
    assert [d["kind"] for d in docs] == ["Node"] * 4 + ["Pod"] * 7
    assert docs[3]["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-a"
    assert docs[-1]["metadata"] == {"name": "pod-000006", "namespace": "default"}


def test_the_subject_tree_runs_even_from_another_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m kubesched`` would import the working directory's package first; the subject's
    command must not, or a comparison would time the same tree twice."""
    (tmp_path / "kubesched").mkdir()
    (tmp_path / "kubesched" / "__init__.py").write_text("")
    (tmp_path / "kubesched" / "__main__.py").write_text("import sys\nprint('subject', *sys.argv[1:])\n")
    monkeypatch.setenv(subject.SUBJECT_ENV, str(tmp_path))
    out = subprocess.run(subject.command("run", "--x"), env=subject.env(), cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout == "subject run --x\n"


def test_compare_revisions_compares_each_rows_own_figures() -> None:
    ref = [{"first_binding_seconds": {"median": 2.0}, "first_binding_cpu_seconds": {"median": 1.0}, "peak_rss_bytes": 100 * 2**20}]
    work = [{"first_binding_seconds": {"median": 0.5}, "first_binding_cpu_seconds": {"median": 0.8}, "peak_rss_bytes": 50 * 2**20}]
    result = cr.CaseResult("RunStartup --nodes 10", cr.Side("ref", REPO, ref), cr.Side("work", REPO, work))
    rows = {r["figure"]: (r["reference"], r["working"], r["speedup"]) for r in cr.summary([result])}
    assert rows == {"s to first binding": (2.0, 0.5, 4.0), "CPU s to first binding": (1.0, 0.8, 1.25),
                    "peak RSS MiB": (100, 50, 2.0)}
    assert cr.figures_of("SimulateEndToEnd --pods 5") == wholeprocess.ROWS["SimulateEndToEnd"].figures
    assert cr.figures_of("SchedulingBasic") == cr.FIGURES


def test_a_whole_process_row_runs_the_harness_and_times_the_sides_tree(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[tuple[list[str], str, dict[str, str]]] = []

    def fake_run(args: list[str], cwd: Path, env: dict[str, str], **_: Any) -> subprocess.CompletedProcess:
        calls.append((args, str(cwd), env))
        return subprocess.CompletedProcess(args, 0, stdout="{}", stderr="")

    monkeypatch.setattr(cr.subprocess, "run", fake_run)
    side = cr.Side("ref", tmp_path)
    cr.run_bench(side, ["RunStartup"], 10, harness=REPO)
    cr.run_bench(side, ["SchedulingBasic"], 10, harness=REPO)
    (row_args, row_cwd, row_env), (_, up_cwd, up_env) = calls
    assert row_args == [sys.executable, "-m", "kubesched", "bench", "RunStartup", "-o", "json"]
    assert row_cwd == str(REPO) and row_env[subject.SUBJECT_ENV] == str(tmp_path)
    assert row_env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
    assert up_cwd == str(tmp_path) and up_env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
