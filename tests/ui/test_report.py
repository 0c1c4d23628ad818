"""The ``--report`` pages of ``simulate``, ``capacity`` and ``compare`` in Chromium: each renders
offline (the page is the only request), its plots are there with the marks the run calls for, and
it logs no error."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import BrowserContext, Page, expect

from tests.ui.conftest import ROOT, ConsoleLog

LEAST = "examples/configs/least-allocated.yaml"
MOST = "examples/configs/most-allocated.yaml"


@contextmanager
def report(browser: BrowserContext, tmp_path: Path, argv: list[str]) -> Iterator[Page]:
    """Write the report with ``kubesched ARGV --report`` and open it; on leaving, check that it was
    the only request and that nothing was logged as an error."""
    path = tmp_path / "report.html"
    # A process of its own: Playwright's synchronous API holds an event loop in this thread.
    done = subprocess.run([sys.executable, "-m", "kubesched", *argv, "--report", str(path)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, f"report written to {path}\n")
    page = browser.new_page()
    console = ConsoleLog(page)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    yield page
    assert requests == [path.as_uri()]
    assert console.errors == []
    page.close()


def test_simulate_report_renders_its_plots(browser: BrowserContext, tmp_path: Path, artifacts: Path) -> None:
    with report(browser, tmp_path, ["simulate", "-f", "examples/cluster"]) as page:
        expect(page.locator("svg.allocation g.node")).to_have_count(5)
        for node in ("node-a1", "node-a2", "node-b1", "node-b2", "gpu-b3"):
            expect(page.locator(f'svg.allocation g.node[data-node="{node}"] rect.cpu')).to_have_count(1)
            expect(page.locator(f'svg.allocation g.node[data-node="{node}"] rect.memory')).to_have_count(1)
        assert page.locator("svg.allocation text.zone").all_text_contents() == ["zone-a", "zone-b"]
        reasons = page.locator('svg.reasons[data-pod="shop/analytics"] g.reason')
        assert reasons.locator("text.label").all_text_contents() == [
            "NodeResourcesFit: Insufficient cpu", "NodeResourcesFit: Insufficient memory",
            "NodeUnschedulable: node(s) were unschedulable", "TaintToleration: node(s) had untolerated taint(s)"]
        assert reasons.locator("text.value").all_text_contents() == ["3", "3", "1", "1"]
        assert page.locator("svg.allocation").bounding_box()["height"] > 100  # type: ignore[index]
        expect(page.locator("svg.timeline")).to_have_count(0)  # no scenario, no timeline
        page.screenshot(path=str(artifacts / "simulate-report.png"), full_page=True)


def test_simulate_report_with_a_scenario_plots_its_timeline(browser: BrowserContext, tmp_path: Path,
                                                            artifacts: Path) -> None:
    scenario = "examples/scenarios/drain"
    with report(browser, tmp_path, ["simulate", "-f", f"{scenario}/cluster.yaml", "--scenario",
                                    f"{scenario}/scenario.yaml"]) as page:
        lines = page.locator("svg.timeline polyline.series")
        assert [lines.nth(i).get_attribute("data-series") for i in range(4)] == ["bound", "pending", "evicted", "preempted"]
        expect(lines).to_have_count(4)
        assert page.locator("svg.timeline g.step text").all_text_contents() == ["steps[0]"]
        assert page.locator("svg.timeline g.legend text").all_text_contents() == ["bound", "pending", "evicted", "preempted"]
        box = page.locator('svg.timeline polyline[data-series="evicted"]').bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 10  # the two evictions raise the line
        expect(page.locator("svg.allocation g.node")).to_have_count(3)
        page.screenshot(path=str(artifacts / "simulate-scenario-report.png"), full_page=True)


def test_capacity_report_plots_copies_per_node_and_what_stopped_the_next(browser: BrowserContext, tmp_path: Path,
                                                                         artifacts: Path) -> None:
    with report(browser, tmp_path, ["capacity", "-f", "examples/cluster", "--pod", "examples/capacity/worker.yaml"]) as page:
        copies = page.locator('svg.copies[data-pod="shop/worker"] g.copies')
        assert copies.locator("text.label").all_text_contents() == ["node-b1", "node-a1", "node-a2"]
        assert copies.locator("text.value").all_text_contents() == ["8", "4", "4"]
        reasons = page.locator('svg.reasons[data-pod="shop/worker"] g.reason')
        assert reasons.locator("text.label").all_text_contents() == [
            "NodeResourcesFit: Insufficient cpu", "NodeUnschedulable: node(s) were unschedulable",
            "TaintToleration: node(s) had untolerated taint(s)"]
        assert reasons.locator("text.value").all_text_contents() == ["3", "1", "1"]
        expect(page.locator("p.message")).to_have_text(
            "Termination reason: Unschedulable: 0/5 nodes are available: 1 node(s) had untolerated taint(s), "
            "1 node(s) were unschedulable, 3 Insufficient cpu.")
        expect(page.locator("svg.allocation g.node")).to_have_count(5)
        page.screenshot(path=str(artifacts / "capacity-report.png"), full_page=True)


def test_compare_report_with_a_scenario_shows_both_configurations(browser: BrowserContext, tmp_path: Path,
                                                                  artifacts: Path) -> None:
    scenario = "examples/scenarios/whole-node-job"
    with report(browser, tmp_path, ["compare", "-f", f"{scenario}/cluster.yaml", "--config", LEAST, "--config", MOST,
                                    "--scenario", f"{scenario}/scenario.yaml"]) as page:
        columns = page.locator("div.columns").first.locator("div.column")
        assert [columns.nth(i).get_attribute("data-configuration") for i in range(2)] == [
            "least-allocated.yaml", "most-allocated.yaml"]
        for i in range(2):
            expect(columns.nth(i).locator("svg.allocation g.node")).to_have_count(4)
        boxes = [columns.nth(i).bounding_box() for i in range(2)]
        assert boxes[0] is not None and boxes[1] is not None and boxes[0]["y"] == boxes[1]["y"]  # side by side
        expect(page.locator("table.moved tbody tr")).to_have_count(3)
        charts = page.locator("svg.timeline")
        expect(charts).to_have_count(4)
        for i in range(4):
            expect(charts.nth(i).locator("polyline.series")).to_have_count(2)
            expect(charts.nth(i).locator("polyline.series[stroke-dasharray]")).to_have_count(1)
            expect(charts.nth(i).locator("g.step")).to_have_count(2)
        page.screenshot(path=str(artifacts / "compare-report.png"), full_page=True)
