"""``simulate --report``'s HTML page in Chromium: it renders offline, its plots are there, and it
logs no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from tests.ui.conftest import ROOT, ConsoleLog


def test_simulate_report_renders_its_plots(browser: BrowserContext, tmp_path: Path, artifacts: Path) -> None:
    report = tmp_path / "report.html"
    # A process of its own: Playwright's synchronous API holds an event loop in this thread.
    done = subprocess.run([sys.executable, "-m", "kubesched", "simulate", "-f", "examples/cluster", "--report", str(report)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, f"report written to {report}\n")
    page = browser.new_page()
    console = ConsoleLog(page)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(report.as_uri())
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
    page.screenshot(path=str(artifacts / "simulate-report.png"), full_page=True)
    assert requests == [report.as_uri()]
    assert console.errors == []
    page.close()
