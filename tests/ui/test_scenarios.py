"""Scenarios run from the web UI of ``kubesched up``, in Chromium: the steps complete on the live
cluster and the cluster view follows them; a bad scenario shows the server's error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.ui.conftest import ConsoleLog, UpCluster, start_up, stop_up
from tests.ui.test_webui import Reader, eventually, node_of

WAIT_MS = 30_000

DRAIN_WITH_A_BUDGET = """apiVersion: kubesched.io/v1alpha1
kind: Scenario
metadata: {name: drain-node-a}
steps:
- at: 10s
  name: keep node-c out
  cordon: {nodes: [node-c]}
- at: 20s
  drain: {nodes: [node-a]}
- at: 1h
  name: more room
  addNodes:
    count: 1
    prefix: extra-
    template:
      metadata: {labels: {kubernetes.io/hostname: extra}}
      status:
        allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
        capacity: {cpu: "4", memory: 8Gi, pods: "110"}
"""


@pytest.fixture(scope="module")
def drain_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    """The drain example: three nodes, four web replicas whose budget keeps three available."""
    cluster = start_up(["examples/scenarios/drain/cluster.yaml"], tmp_path_factory.mktemp("up"))
    try:
        yield cluster
    finally:
        stop_up(cluster)


@pytest.fixture(scope="module")
def page(browser: BrowserContext, drain_cluster: UpCluster) -> Iterator[tuple[Page, ConsoleLog]]:
    page = browser.new_page()
    console = ConsoleLog(page)
    page.goto(drain_cluster.ui_link)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
    yield page, console
    page.close()


def web_pods(core: Reader) -> list[dict]:
    return [p for p in core.pods() if p["metadata"].get("labels", {}).get("app") == "web" and not p["metadata"].get("deletionTimestamp")]


def test_a_scenario_run_from_the_ui_drains_a_node_and_the_pods_move(page: tuple[Page, ConsoleLog], drain_cluster: UpCluster,
                                                                    artifacts: Path) -> None:
    ui, console = page
    core = Reader(drain_cluster.kubeconfig)
    eventually(lambda: len([p for p in web_pods(core) if node_of(p)]) == 4, "the four web replicas were not bound")
    ui.locator("#scenario-open").click()
    ui.locator("#scenario-text").fill(DRAIN_WITH_A_BUDGET)
    ui.locator("#scenario-speed").fill("10")
    ui.locator("#scenario-start").click()
    steps = ui.locator("#scenario-steps li")
    expect(steps).to_have_count(3, timeout=WAIT_MS)
    expect(steps.nth(0)).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    expect(steps.nth(1)).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    expect(steps.nth(1).locator(".happened")).to_contain_text("evicted", timeout=WAIT_MS)
    ui.screenshot(path=str(artifacts / "scenario-drained.png"), full_page=True)
    expect(steps.nth(2)).to_have_attribute("data-state", "pending")
    ui.locator("#scenario-next").click()
    expect(steps.nth(2)).to_have_attribute("data-state", "done", timeout=WAIT_MS)
    expect(ui.locator("#scenario-state")).to_have_text("finished", timeout=WAIT_MS)
    expect(ui.locator('#scenario-timeline tr[data-event="node added"]')).to_contain_text("Node extra-1")
    ui.locator("#scenario-close").click()
    node_a = ui.locator('[data-node="node-a"]')
    expect(node_a.locator('[data-state="cordoned"]')).to_have_count(1)
    expect(node_a.locator(".node-pods [data-pod]")).to_have_count(0, timeout=WAIT_MS)
    expect(ui.locator('[data-node="extra-1"]')).to_have_count(1, timeout=WAIT_MS)
    eventually(lambda: len(pods := [p for p in web_pods(core) if node_of(p)]) == 4 and "node-a" not in {node_of(p) for p in pods},
               "the web replicas were not re-placed off node-a")
    for pod in web_pods(core):
        expect(ui.locator(f'[data-node="{node_of(pod)}"] [data-pod="default/{pod["metadata"]["name"]}"]')).to_have_count(1, timeout=WAIT_MS)
    ui.screenshot(path=str(artifacts / "scenario-finished.png"), full_page=True)
    assert console.errors == []


def test_a_bad_scenario_shows_the_servers_error_naming_the_step_and_field(page: tuple[Page, ConsoleLog]) -> None:
    ui, console = page
    ui.locator("#scenario-open").click()
    if ui.locator("#scenario-new").is_visible():
        ui.locator("#scenario-new").click()
    ui.locator("#scenario-text").fill("apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n"
                                      "- at: 1m\n  drain: {nodes: [node-a], timeout: soon}\n")
    ui.locator("#scenario-start").click()
    expect(ui.locator("#scenario-error")).to_have_text(
        'scenario: invalid scenario: steps[0] (at 1m): drain.timeout: time: invalid duration "soon"', timeout=WAIT_MS)
    expect(ui.locator("#scenario-progress")).to_be_hidden()
    ui.locator("#scenario-close").click()
    # Chromium logs the 400 as a failed resource load; the page itself logged and threw nothing.
    assert console.errors == ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]
