"""``kubesched bench`` from the command line, and ``--mode http`` through the API server."""

from __future__ import annotations

import json

import pytest

from kubesched.bench.report import markdown_row
from kubesched.bench.runner import BenchOptions, run_async
from kubesched.bench.workloads import workload
from kubesched.cli.main import main


def test_json_output_has_every_figure_the_performance_page_needs(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "SchedulingBasic", "--nodes", "5", "--init-pods", "5", "--pods", "10", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["workload"] == "SchedulingBasic" and doc["mode"] == "embedded" and doc["complete"]
    assert doc["params"] == {"initNodes": 5, "initPods": 5, "measurePods": 10}
    assert doc["percentage_of_nodes_to_score"] == 100
    assert doc["variant"] == "custom" and doc["threshold"] is None and doc["target"] is None
    for key in ("throughput", "attempt_latency_ms", "nodes_scored_percent", "peak_rss_bytes", "overall_pods_per_second"):
        assert key in doc
    assert doc["cpu_ms_per_pod"] > 0
    assert doc["machine"]["cpus"] >= 1 and doc["machine"]["python"]
    assert markdown_row(doc).startswith("| SchedulingBasic | custom | 5 / 5 / 10 |")


def test_table_output_at_custom_sizes_claims_no_upstream_floor(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "schedulingnodeaffinity", "--nodes", "5", "--init-pods", "5", "--pods", "10",
                 "--percentage-of-nodes-to-score", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "SchedulingThroughput" in out and "percentageOfNodesToScore 0" in out
    floor = next(line for line in out.splitlines() if "upstream CI floor:" in line)
    assert "none for these sizes" in floor and "220" not in floor


def test_markdown_row_compares_the_average_with_the_target() -> None:
    doc = {"workload": "SchedulingBasic", "variant": "5000Nodes_10000Pods",
           "params": {"initNodes": 5000, "initPods": 1000, "measurePods": 10000}, "complete": True,
           "throughput": {"average": 1500.0, "perc50": 1400.0, "perc90": 1600.0, "perc99": 1700.0},
           "overall_pods_per_second": 1400.0, "attempt_latency_ms": {"perc50": 0.5, "perc99": 1.0},
           "nodes_scored_percent": 100.0, "peak_rss_bytes": 180 * 2**20, "target": 3000, "threshold": 680}
    assert markdown_row(doc) == ("| SchedulingBasic | 5000Nodes_10000Pods | 5000 / 1000 / 10000 | 1,500 | 1,400 / 1,600 / 1,700 "
                                 "| 1,400.0 | 0.50 / 1.00 | 100% | 180 MiB | ≥ 3000 | -50% | 680 |")


def test_list_and_unknown_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "list"]) == 0
    assert "SchedulingWithMixedChurn" in capsys.readouterr().out
    assert main(["bench", "Nope"]) == 2


@pytest.mark.parametrize("apiserver", ["in-process", "subprocess"])
async def test_http_mode_binds_over_the_api(apiserver: str) -> None:
    w = workload("SchedulingBasic")
    result = await run_async(w, BenchOptions(mode="http", apiserver=apiserver, nodes=5, init_pods=5, pods=10, timeout=30))
    assert result.complete and result.scheduled == 10
    assert result.attempts["scheduled"] == 10
    if apiserver == "subprocess":
        assert result.apiserver_peak_rss_bytes


@pytest.mark.parametrize(("name", "sizes"), [
    ("PreemptionBasic", {"nodes": 5, "init_pods": 20, "pods": 5}),
    ("SchedulingWithMixedChurn", {"nodes": 10, "pods": 20}),
])
async def test_http_mode_runs_preemption_and_churn(name: str, sizes: dict) -> None:
    result = await run_async(workload(name), BenchOptions(mode="http", timeout=30, **sizes))
    assert result.complete, result.incomplete_reason


@pytest.mark.parametrize("name", ["SchedulingBasic", "PreemptionBasic"])
async def test_http_mode_with_asynchronous_api_calls_binds_and_preempts(name: str) -> None:
    """Bindings, the preemptors' nominations and the victims' conditions go through the API dispatcher."""
    result = await run_async(workload(name), BenchOptions(mode="http", apiserver="in-process", nodes=5, init_pods=20, pods=5,
                                                          timeout=30, feature_gates="SchedulerAsyncAPICalls=true"))
    assert result.complete, result.incomplete_reason
    assert result.scheduled == 5


async def test_http_mode_preemption_with_the_api_server_in_process() -> None:
    """The informer can deliver the victims' deletion before the evictions start: the preemptor
    must not stay gated (it did once, waiting for the 5-minute flush)."""
    result = await run_async(workload("PreemptionBasic"),
                             BenchOptions(mode="http", apiserver="in-process", nodes=5, init_pods=20, pods=5, timeout=10))
    assert result.complete, result.incomplete_reason


RECORDER = '''
from kubesched.scheduler.framework.interface import ReservePlugin


class Recorder(ReservePlugin):
    name = "Recorder"

    def reserve(self, state, pod, node_name):
        with open({log!r}, "a") as f:
            f.write(pod.name + "\\n")

    def unreserve(self, state, pod, node_name):
        pass


PLUGINS = [Recorder]
'''


def test_out_of_tree_plugins_run_in_the_benchmark(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "reserved.log"
    (tmp_path / "recorder.py").write_text(RECORDER.format(log=str(log)))
    (tmp_path / "config.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins:\n    reserve:\n      enabled: [{name: Recorder}]\n")
    code = main(["bench", "SchedulingBasic", "--nodes", "3", "--init-pods", "2", "--pods", "4", "-o", "json",
                 "--plugin", str(tmp_path / "recorder.py"), "--config", str(tmp_path / "config.yaml")])
    assert code == 0 and json.loads(capsys.readouterr().out)["complete"]
    assert len(log.read_text().split()) == 6
