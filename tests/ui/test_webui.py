"""The web UI of ``kubesched up``, in Chromium: the cluster view matches the cluster, a pending pod
shows why, and the actions change the cluster (checked through the kubeconfig ``up`` wrote)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import BrowserContext, Page, expect

from kubesched.api.kinds import Kind, kind_named
from kubesched.client.kube import KubeClient
from tests.ui.conftest import ConsoleLog, UpCluster, start_up, stop_up

WAIT_MS = 15_000


def kind(name: str) -> Kind:
    found = kind_named(name)
    assert found is not None
    return found


POD, NODE = kind("Pod"), kind("Node")


class Reader:
    """Reads through the kubeconfig ``up`` wrote (a client of its own per read): what the tests
    compare the page with."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def _run(self, read: Callable[[KubeClient], Awaitable[Any]]) -> Any:
        async def once() -> Any:
            client = KubeClient(kubeconfig=self.kubeconfig)
            try:
                return await read(client)
            finally:
                await client.close()

        # Playwright's synchronous API keeps an event loop in this thread: the read gets a thread of its own.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, once()).result()

    def pods(self) -> list[dict]:
        return self._run(lambda c: c.list(POD))[0]

    def nodes(self) -> list[dict]:
        return self._run(lambda c: c.list(NODE))[0]

    def node(self, name: str) -> dict:
        return self._run(lambda c: c.get(NODE, None, name))

    def pod(self, namespace: str, name: str) -> dict | None:
        return self._run(lambda c: c.get(POD, namespace, name))

    def explanation(self, namespace: str, name: str) -> dict:
        path = f"/apis/kubesched.io/v1alpha1/namespaces/{namespace}/explanations/{name}"
        status, body = self._run(lambda c: c.request("GET", path))
        assert status == 200, body
        return json.loads(body)


@pytest.fixture(scope="module")
def core(example_cluster: UpCluster) -> Reader:
    return Reader(example_cluster.kubeconfig)


@pytest.fixture(scope="module")
def page(browser: BrowserContext, example_cluster: UpCluster) -> Iterator[tuple[Page, ConsoleLog]]:
    """The UI, logged in through the one-time link ``up`` printed."""
    page = browser.new_page()
    console = ConsoleLog(page)
    page.goto(example_cluster.ui_link)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
    yield page, console
    page.close()


@pytest.fixture
def ui(page: tuple[Page, ConsoleLog]) -> Iterator[Page]:
    """The page; after each test, no console error and no uncaught exception."""
    yield page[0]
    assert page[1].errors == []


def settled(core: Reader) -> list[dict]:
    """The pods once every one was attempted (bound, or marked unschedulable)."""
    deadline = time.monotonic() + 30
    while True:
        pods = core.pods()
        if all(node_of(p) or any(c["type"] == "PodScheduled" for c in p["status"].get("conditions", [])) for p in pods):
            return pods
        assert time.monotonic() < deadline, "the scheduler did not attempt every pod"
        time.sleep(0.2)


def node_of(pod: dict) -> str:
    return pod["spec"].get("nodeName", "")


def key(obj: dict) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_MS / 1000
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_login_link_works_once_then_the_form_takes_the_kubeconfig_token(browser: BrowserContext, example_cluster: UpCluster,
                                                                         ui: Page) -> None:
    other = browser.new_page()
    other.goto(example_cluster.ui_link)
    expect(other.locator("#login")).to_be_visible(timeout=WAIT_MS)
    expect(other.locator("#login-error")).to_contain_text("already used")
    other.locator("#login-token").fill("not-a-token")
    other.locator("#login-form button").click()
    expect(other.locator("#login-error")).to_have_text("The token was refused.", timeout=WAIT_MS)
    kubeconfig = yaml.safe_load(example_cluster.kubeconfig.read_text())
    other.locator("#login-token").fill(kubeconfig["users"][0]["user"]["token"])
    other.locator("#login-form button").click()
    expect(other.locator("#connection")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
    expect(other.locator("#login")).to_be_hidden()
    other.close()


def test_cluster_view_shows_every_node_and_pod_where_it_was_placed(ui: Page, core: Reader, artifacts: Path) -> None:
    pods = settled(core)
    for node in core.nodes():
        zone = node["metadata"]["labels"].get("topology.kubernetes.io/zone", "(no zone)")
        expect(ui.locator(f'.zone[data-zone="{zone}"] [data-node="{node["metadata"]["name"]}"]')).to_have_count(1)
    for pod in pods:
        where = f'[data-node="{node_of(pod)}"] .node-pods' if node_of(pod) else "#pending"
        name = key(pod)
        expect(ui.locator(f'{where} [data-pod="{name}"]')).to_have_count(1, timeout=WAIT_MS)
    expect(ui.locator('[data-node="node-b2"] [data-state="cordoned"]')).to_have_count(1)
    expect(ui.locator('[data-node="gpu-b3"] .taints')).to_contain_text("nvidia.com/gpu=present:NoSchedule")
    ui.screenshot(path=str(artifacts / "cluster.png"), full_page=True)


def test_pending_pod_shows_its_filter_reasons(ui: Page, core: Reader, artifacts: Path) -> None:
    pending = [p for p in settled(core) if not node_of(p)]
    assert pending, "the example cluster has a pod no node fits"
    pod = pending[0]
    name = key(pod)
    message = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    expect(ui.locator(f'#pending [data-pod="{name}"] .reason')).to_contain_text(message)
    ui.locator(f'#pending [data-pod="{name}"]').click()
    explanation = ui.locator("#tab-explanation")
    expect(explanation.locator(".explain-head")).to_contain_text(f"Pod {name}: no node fits")
    expect(explanation.locator(".filter-reason").first).to_be_visible()
    assert "Insufficient cpu" in explanation.inner_text()
    ui.screenshot(path=str(artifacts / "pending-pod.png"), full_page=True)
    ui.locator("#pod-close").click()


def test_bound_pod_explanation_marks_the_node_it_went_to(ui: Page, core: Reader, artifacts: Path) -> None:
    pod = next(p for p in settled(core) if node_of(p) and p["metadata"]["name"].startswith("web-"))
    name = key(pod)
    ui.locator(f'.node-pods [data-pod="{name}"]').click()
    chosen = ui.locator("#tab-explanation table.explain tr.chosen")
    expect(chosen).to_have_attribute("data-node", node_of(pod), timeout=WAIT_MS)
    ui.screenshot(path=str(artifacts / "pod-explanation.png"), full_page=False)
    ui.locator('.tabs button[data-tab="events"]').click()
    expect(ui.locator("#tab-events")).to_contain_text("Scheduled", timeout=WAIT_MS)
    ui.locator('.tabs button[data-tab="yaml"]').click()
    expect(ui.locator("#tab-yaml")).to_contain_text(f"nodeName: {node_of(pod)}", timeout=WAIT_MS)
    ui.locator('.tabs button[data-tab="explanation"]').click()
    ui.locator("#pod-close").click()


NEW_POD = """apiVersion: v1
kind: Pod
metadata:
  name: from-the-ui
  namespace: shop
spec:
  containers:
  - name: app
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {cpu: 100m, memory: 64Mi}
"""


def test_pod_applied_from_the_ui_is_bound(ui: Page, core: Reader) -> None:
    ui.locator("#apply-open").click()
    ui.locator("#apply-text").fill(NEW_POD)
    ui.locator("#apply-submit").click()
    expect(ui.locator("#apply-result")).to_contain_text("pods/from-the-ui applied", timeout=WAIT_MS)
    ui.locator("#apply-close").click()
    eventually(lambda: bool(node_of(core.pod("shop", "from-the-ui") or {"spec": {}})), "the applied pod was not bound")
    node = node_of(core.pod("shop", "from-the-ui") or {"spec": {}})
    expect(ui.locator(f'[data-node="{node}"] [data-pod="shop/from-the-ui"]')).to_have_count(1, timeout=WAIT_MS)


def test_apply_reports_bad_manifests_by_document(ui: Page) -> None:
    ui.locator("#apply-open").click()
    ui.locator("#apply-text").fill("apiVersion: v1\nkind: Pod\nmetadata: {namespace: shop}\n---\napiVersion: v9\nkind: Pod\n"
                                   "metadata: {name: x}\n")
    ui.locator("#apply-submit").click()
    errors = ui.locator("#apply-result .error")
    expect(errors).to_have_count(2, timeout=WAIT_MS)
    expect(errors.nth(0)).to_have_text("document 1 (Pod): metadata.name is required")
    expect(errors.nth(1)).to_have_text('apiVersion "v9" is not served')
    ui.locator("#apply-close").click()


def test_cordon_and_uncordon_a_node(ui: Page, core: Reader) -> None:
    card = ui.locator('[data-node="node-a1"]')
    card.locator('button[data-action="cordon"]').click()
    expect(card.locator('[data-state="cordoned"]')).to_have_count(1, timeout=WAIT_MS)
    assert core.node("node-a1")["spec"].get("unschedulable") is True
    card.locator('button[data-action="uncordon"]').click()
    expect(card.locator('[data-state="cordoned"]')).to_have_count(0, timeout=WAIT_MS)
    assert not core.node("node-a1")["spec"].get("unschedulable")


def test_delete_a_pod_from_its_view(ui: Page, core: Reader) -> None:
    ui.locator('[data-pod="shop/from-the-ui"]').first.click()
    ui.locator("#pod-delete").click()
    expect(ui.locator('[data-pod="shop/from-the-ui"]')).to_have_count(0, timeout=WAIT_MS)
    ui.locator("#pod-close").click()
    eventually(lambda: core.pod("shop", "from-the-ui") is None, "the pod deleted from the UI is still there")


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 100m, memory: 64Mi}}
"""


def api_pods(core: Reader) -> list[dict]:
    return [p for p in core.pods() if p["metadata"].get("labels", {}).get("app") == "api" and not p["metadata"].get("deletionTimestamp")]


def test_scale_a_deployment_applied_from_the_ui(ui: Page, core: Reader) -> None:
    ui.locator("#apply-open").click()
    ui.locator("#apply-text").fill(DEPLOYMENT)
    ui.locator("#apply-submit").click()
    expect(ui.locator("#apply-result")).to_contain_text("deployments/api applied", timeout=WAIT_MS)
    ui.locator("#apply-close").click()
    row = ui.locator('[data-deployment="shop/api"]')
    row.locator("input").fill("3")
    row.locator('button[data-action="scale"]').click()
    expect(row).to_contain_text("3/3 ready", timeout=WAIT_MS)
    eventually(lambda: len([p for p in api_pods(core) if node_of(p)]) == 3, "the Deployment's 3 pods were not all bound")


def test_drain_evicts_the_pods_and_the_deployment_replaces_them_elsewhere(ui: Page, core: Reader) -> None:
    node = node_of(api_pods(core)[0])
    card = ui.locator(f'[data-node="{node}"]')
    card.locator('button[data-action="drain"]').click()
    expect(card.locator('[data-state="cordoned"]')).to_have_count(1, timeout=WAIT_MS)
    expect(card.locator(".node-pods [data-pod]")).to_have_count(0, timeout=WAIT_MS)
    eventually(lambda: len(pods := [p for p in api_pods(core) if node_of(p)]) == 3 and node not in {node_of(p) for p in pods},
               f"the Deployment's pods were not re-placed off {node}")
    card.locator('button[data-action="uncordon"]').click()
    expect(card.locator('[data-state="cordoned"]')).to_have_count(0, timeout=WAIT_MS)


def large_cluster(folder: Path, nodes: int, pods: int) -> Path:
    """``nodes`` nodes in 4 zones and ``pods`` pods already bound round-robin, as one JSON List."""
    items: list[dict] = []
    for i in range(nodes):
        name = f"node-{i:04d}"
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"zone-{i % 4}"}},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}})
    for i in range(pods):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i:05d}", "namespace": "default"},
                      "spec": {"nodeName": f"node-{i % nodes:04d}", "containers": [{"name": "c", "image": "pause", "resources": {
                          "requests": {"cpu": "250m", "memory": "512Mi"}}}]}})
    path = folder / "large.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


#: What the page's performance timeline says of a load: when the cluster view was painted, when the
#: lists of nodes and pods had arrived (what is left is the page's own work: parsing, drawing,
#: layout and paint), how big the pod list was, and how long drawing the view took.
FIRST_RENDER_BREAKDOWN = """() => {
  const lists = performance.getEntriesByType("resource").filter((r) => /\\/(api\\/v1\\/(nodes|pods)|ui\\/api\\/pods)$/.test(r.name));
  const render = performance.getEntriesByType("measure").find((m) => m.name === "render");
  return {painted: Number(document.body.dataset.firstRenderMs), listed: Math.round(Math.max(...lists.map((r) => r.responseEnd))),
          podListBytes: Math.max(...lists.filter((r) => r.name.endsWith("pods")).map((r) => r.encodedBodySize)),
          render: render ? Math.round(render.duration) : null};
}"""


def test_first_render_of_1000_nodes_and_10000_pods(browser: BrowserContext, tmp_path: Path, artifacts: Path) -> None:
    """Renders every node and pod. How long the first render took (from navigation start until the
    cluster view is painted) is written to the artifacts and printed, not asserted (a timing
    depends on the machine): on the first visit, while the kubelets are still starting the 10,000
    pods, and on a reload once the cluster is quiet."""
    cluster = start_up([str(large_cluster(tmp_path, 1000, 10_000))], tmp_path, extra=("--no-scheduler",))
    try:
        page = browser.new_page()
        console = ConsoleLog(page)
        loads = []
        for load in (lambda: page.goto(cluster.ui_link), page.reload):
            load()
            expect(page.locator("#summary")).to_have_text("1000 nodes, 10000 pods (0 pending)", timeout=60_000)
            page.wait_for_function("document.body.dataset.firstRenderMs", timeout=60_000)
            loads.append(page.evaluate(FIRST_RENDER_BREAKDOWN))
            # Quiet: the watch has brought every pod to Running (no chip drawn as waiting).
            expect(page.locator(".node-pods .pod.waiting")).to_have_count(0, timeout=120_000)
        assert page.locator(".node").count() == 1000
        assert page.locator(".node-pods [data-pod]").count() == 10_000
        assert console.errors == []
        page.close()
    finally:
        stop_up(cluster)
    report = "\n".join(
        f"first render of 1000 nodes and 10000 pods, {what}: painted {load['painted']} ms after navigation start; the lists "
        f"had arrived at {load['listed']} ms (pods: {load['podListBytes'] / 1e6:.1f} MB), the page's own work took "
        f"{load['painted'] - load['listed']} ms (drawing the view {load['render']} ms)"
        for what, load in zip(("first visit, right after up started", "reload"), loads, strict=True))
    (artifacts / "first-render.txt").write_text(report + "\n")
    print(report)


def test_without_authentication_the_ui_needs_no_login(browser: BrowserContext, tmp_path: Path) -> None:
    cluster = start_up(["examples/cluster/nodes.yaml"], tmp_path, extra=("--insecure-allow-anonymous",))
    try:
        assert cluster.ui_link.startswith("http://") and cluster.ui_link.endswith("/ui/")
        page = browser.new_page()
        console = ConsoleLog(page)
        page.goto(cluster.ui_link)
        expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
        expect(page.locator(".node")).to_have_count(5)
        assert console.errors == []
        page.close()
    finally:
        stop_up(cluster)


def test_a_preemptor_shows_its_candidates_and_victims(browser: BrowserContext, tmp_path: Path, artifacts: Path) -> None:
    cluster = start_up(["examples/preemption"], tmp_path)
    core = Reader(cluster.kubeconfig)
    try:
        def running_preemptor() -> dict | None:
            running = [p for p in core.pods() if p["metadata"]["name"].startswith("web-") and p["status"].get("phase") == "Running"]
            return next((p for p in running
                         if core.explanation("default", p["metadata"]["name"])["attempts"][0].get("preemption", {}).get("node")), None)

        eventually(lambda: running_preemptor() is not None, "no web pod runs on the node its preemption freed")
        preemptor = running_preemptor()
        assert preemptor is not None
        page = browser.new_page()
        console = ConsoleLog(page)
        page.goto(cluster.ui_link)
        page.locator(f'.node-pods [data-pod="{key(preemptor)}"]').click()
        explanation = page.locator("#tab-explanation")
        expect(explanation.locator(".explain-head").first).to_contain_text(f"scheduled to {node_of(preemptor)}", timeout=WAIT_MS)
        expect(explanation).to_contain_text(f"Preemption: nominated to {node_of(preemptor)}, evicting default/")
        expect(explanation).to_contain_text(f"* {node_of(preemptor)}: victims default/")
        page.screenshot(path=str(artifacts / "preemptor.png"), full_page=True)
        assert console.errors == []
        page.close()
    finally:
        stop_up(cluster)
