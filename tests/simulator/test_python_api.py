"""The Python API: docs/python-api.md's code runs as written, the functions work from inside a
running event loop (as in Jupyter), and bad input is a clear error naming what is wrong."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

import kubesched
from kubesched.api.errors import KubeschedError
from kubesched.utils.dataframes import PandasMissing
from tests.helpers import make_node, make_pod

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python-api.md"
CLUSTER = str(ROOT / "examples" / "cluster")


def doc_blocks() -> list:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return [pytest.param(code, id=f"python-api.md block {i + 1}") for i, code in enumerate(blocks)]


def test_the_page_has_examples():
    assert len(doc_blocks()) >= 4


@pytest.mark.parametrize("code", doc_blocks())
def test_the_documented_code_runs(code, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    exec(compile(code, str(DOC), "exec"), {"__name__": "python_api_doc"})


async def test_simulate_called_inside_a_running_loop_runs_in_a_worker_thread():
    asyncio.get_running_loop()  # as in a Jupyter cell: this thread's loop is running
    result = kubesched.simulate(CLUSTER, explain=False)
    awaited = await kubesched.simulate_async(CLUSTER, explain=False)
    assert result.placements == awaited.placements
    assert result.placements["shop/web-1"] == "node-b1" and "shop/analytics" in result.pending


async def test_capacity_and_compare_called_inside_a_running_loop():
    (pod,) = kubesched.capacity([make_node("n1", cpu="2")], make_pod("p", cpu="1")).pods
    assert pod.count == 2
    diff = kubesched.compare([make_node("n1"), make_pod("p", cpu="1")], None, {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"})
    assert diff.labels == ("default", "config B") and diff.moved == []


@pytest.mark.parametrize(("call", "message"), [
    (lambda: kubesched.simulate([make_node("n1"), 42]), "manifests: expected a path or an object (a dict), not int"),
    (lambda: kubesched.simulate([make_pod("p", cpu="lots")]), 'Pod default/p: spec.containers[0].resources.requests.cpu: quantities must match'),
    (lambda: kubesched.simulate(CLUSTER, config="/nonexistent/config.yaml"), "config /nonexistent/config.yaml: no such file"),
    (lambda: kubesched.simulate(CLUSTER, explain=False).explain("web-1"), "no attempts were recorded"),
    (lambda: kubesched.compare(CLUSTER, None, None, scenario=42),  # type: ignore[arg-type]
     "scenario: expected a path to a scenario file or a Scenario, not int"),
    (lambda: kubesched.simulate(CLUSTER, scenario="/nonexistent/scenario.yaml"), "/nonexistent/scenario.yaml: "),
    (lambda: kubesched.simulate(CLUSTER).explain("shop/nobody"), 'pod "shop/nobody" is not in the manifests'),
    (lambda: kubesched.simulate([make_node("n1"), make_pod("p", namespace="a"), make_pod("p", namespace="b")]).explain("p"),
     'pod name "p" is in several namespaces'),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(KubeschedError, match=re.escape(message)):
        call()


def test_to_html_writes_the_report_simulate_writes_with_its_timeline(tmp_path):
    scenario = ROOT / "examples" / "scenarios" / "drain"
    result = kubesched.simulate(scenario / "cluster.yaml", scenario=scenario / "scenario.yaml")
    page = result.to_html(tmp_path / "report.html")
    assert (tmp_path / "report.html").read_text() == page
    assert page.count('<polyline class="series"') == 4 and page.count('<g class="node"') == 3


def test_to_dataframe_without_pandas_says_how_to_get_it(monkeypatch):
    result = kubesched.simulate([make_node("n1")], explain=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(PandasMissing, match=re.escape("to_dataframe() needs pandas, which is not installed: pip install pandas")):
        result.to_dataframe()


def test_only_the_documented_names_are_public():
    assert sorted(kubesched.__all__) == ["CapacityResult", "Comparison", "Simulation", "capacity", "compare",
                                         "simulate", "simulate_async"]
    assert all(getattr(kubesched, name) is not None for name in kubesched.__all__)
    with pytest.raises(AttributeError, match="no attribute 'SimulationResult'"):
        kubesched.SimulationResult  # noqa: B018  (internal: reached through Simulation)


def test_unknown_feature_gate_is_a_clear_error():
    with pytest.raises(KubeschedError, match="unrecognized feature gate: GangSchedulin"):
        kubesched.simulate([make_node("n1")], feature_gates={"GangSchedulin": True})
