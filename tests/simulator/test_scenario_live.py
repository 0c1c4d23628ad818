"""Scenarios on ``kubesched up``'s live cluster (``/ui/api/scenarios``): the steps go through the API
server as the caller, on the run's clock (speed factor, the next step at once), with each step's
state and what happened; bad input is a 4xx naming the step and the field."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
import yaml

from kubesched.api.kinds import NODE, POD
from kubesched.simulator.up import Cluster, UpOptions

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = "/ui/api/scenarios"


def drain_example() -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / "examples/scenarios/drain/cluster.yaml").read_text()) if d]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    options = UpOptions(port=0, kubeconfig_out=None, objects=drain_example(), termination_delay=0.05)
    async with Cluster(options) as running:
        for _ in range(200):
            pods = list(running.store.iter_all(POD))
            if len(pods) == 5 and all(p["spec"].get("nodeName") for p in pods):
                break
            await asyncio.sleep(0.05)
        yield running


async def call(cluster: Cluster, method: str, path: str, body: object = None, token: str | None = None) -> tuple[int, dict]:
    async with cluster.server.client_session(token) as session:
        data = orjson.dumps(body) if body is not None else None
        async with session.request(method, cluster.server.url + path, data=data) as resp:
            return resp.status, orjson.loads(await resp.read())


async def finished(cluster: Cluster, run: str, timeout: float = 20.0) -> dict:
    for _ in range(int(timeout / 0.1)):
        status, body = await call(cluster, "GET", f"{SCENARIOS}/{run}")
        assert status == 200, body
        if all(s["state"] in ("done", "failed") for s in body["steps"]):
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"scenario run {run} did not finish: {body}")


DRAIN_AND_ADD = """apiVersion: kubesched.io/v1alpha1
kind: Scenario
steps:
- at: 0s
  name: no disruption allowed
  apply:
    objects:
    - apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata: {name: web, namespace: default}
      spec: {minAvailable: 4, selector: {matchLabels: {app: web}}}
- at: 30s
  drain: {selector: kubernetes.io/hostname, timeout: 30s}
- at: 90s
  addNodes:
    count: 1
    prefix: extra-
    template:
      metadata: {labels: {pool: extra}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}, capacity: {cpu: "4", memory: 8Gi, pods: "110"}}
- at: 90s
  cordon: {nodes: [no-such-node]}
"""


async def test_drain_blocked_by_a_budget_and_add_nodes_run_through_the_api_and_report_each_step(cluster: Cluster) -> None:
    status, run = await call(cluster, "POST", SCENARIOS, {"scenario": DRAIN_AND_ADD, "speed": 30, "name": "drain.yaml"})
    assert status == 201, run
    assert run["user"] == "kubesched-admin"
    assert [s["state"] for s in run["steps"]] == ["pending"] * 4
    body = await finished(cluster, run["id"])
    assert [s["state"] for s in body["steps"]] == ["done", "failed", "done", "failed"]
    assert body["steps"][1]["error"] == "drain incomplete: timed out after 30s"
    assert body["steps"][3]["error"] == 'node "no-such-node" not found'
    happened = body["steps"][1]["happened"]
    assert happened["cordoned"] == 3 and happened["eviction blocked"] >= 1 and happened["drain incomplete"] >= 1
    assert cluster.store.get(NODE, None, "extra-1")["metadata"]["labels"]["pool"] == "extra"
    web = [p for p in cluster.store.iter_all(POD) if p["metadata"].get("labels", {}).get("app") == "web"]
    assert len(web) == 4 and all(p["spec"].get("nodeName") for p in web)
    events = {(e["event"], e["step"]) for e in body["timeline"]}
    assert ("step", 0) in events and ("node added", 2) in events and ("error", 3) in events
    for _ in range(100):
        if (await call(cluster, "GET", f"{SCENARIOS}/{run['id']}"))[1]["state"] == "finished":
            break
        await asyncio.sleep(0.02)
    status, body = await call(cluster, "DELETE", f"{SCENARIOS}/{run['id']}")
    assert status == 200 and body["state"] == "finished"  # cancelling a finished run only stops its recording


async def test_next_step_now_fires_the_waiting_step_and_cancel_stops_the_rest(cluster: Cluster) -> None:
    slow = ("apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n- at: 1h\n  cordon: {nodes: [node-b]}\n"
            "- at: 2h\n  cordon: {nodes: [node-c]}\n")
    status, run = await call(cluster, "POST", SCENARIOS, {"scenario": slow})
    assert status == 201, run
    status, refused = await call(cluster, "POST", SCENARIOS, {"scenario": slow})
    assert status == 409 and refused["message"].startswith(f'scenario run "{run["id"]}" (scenario) is still running')
    for _ in range(50):
        if (await call(cluster, "GET", f"{SCENARIOS}/{run['id']}"))[1]["waiting"] == 0:
            break
        await asyncio.sleep(0.02)
    status, body = await call(cluster, "POST", f"{SCENARIOS}/{run['id']}/next")
    assert status == 200, body
    for _ in range(50):
        body = (await call(cluster, "GET", f"{SCENARIOS}/{run['id']}"))[1]
        if body["steps"][0]["state"] == "done":
            break
        await asyncio.sleep(0.02)
    assert body["steps"][0]["firedAt"] == "1h0m0s"
    assert cluster.store.get(NODE, None, "node-b")["spec"]["unschedulable"] is True
    status, body = await call(cluster, "DELETE", f"{SCENARIOS}/{run['id']}")
    assert status == 200 and body["state"] == "cancelled"
    assert [s["state"] for s in body["steps"]] == ["done", "cancelled"]
    assert not cluster.store.get(NODE, None, "node-c").get("spec", {}).get("unschedulable")


@pytest.mark.parametrize(("body", "message"), [
    pytest.param(b"not json", 'scenario: the body must be a JSON object {"scenario"', id="body not JSON"),
    pytest.param({"scenario": "x", "sped": 2}, "scenario: unknown field(s) sped", id="unknown body field"),
    pytest.param({"scenario": "steps: []", "speed": 0}, "scenario: speed must be a number above 0 and at most 1000, got 0",
                 id="speed not positive"),
    pytest.param({"scenario": "apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n- at: 1m\n  drain: {nodes: [a], timeout: soon}\n",
                  "name": "s.yaml"},
                 's.yaml: invalid scenario: steps[0] (at 1m): drain.timeout: time: invalid duration "soon"', id="bad step field"),
    pytest.param({"scenario": "apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n- at: 0s\n  apply: {files: [x.yaml]}\n"},
                 "scenario: invalid scenario: steps[0] (at 0s): apply.files: an uploaded scenario cannot name files",
                 id="files in an uploaded scenario"),
    pytest.param({"scenario": "- a\n- b\n"}, "scenario: invalid scenario: the file must hold one mapping", id="not a mapping"),
])
async def test_bad_scenarios_are_400s_naming_the_step_and_field(cluster: Cluster, body: object, message: str) -> None:
    async with cluster.server.client_session() as session:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with session.post(cluster.server.url + SCENARIOS, data=data) as resp:
            status, answer = resp.status, orjson.loads(await resp.read())
    assert status == 400 and answer["kind"] == "Status"
    assert answer["message"].startswith(message), answer["message"]


async def test_rbac_judges_the_endpoint_and_each_step_as_the_caller(cluster: Cluster) -> None:
    rest = cluster.server.rest
    rest.create_object({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "scenarios"},
                        "rules": [{"nonResourceURLs": [SCENARIOS, f"{SCENARIOS}/*"], "verbs": ["get", "post", "delete"]},
                                  {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]})
    rest.create_object({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "scenarios"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "scenarios"},
                        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]})
    alice, bob = cluster.server.mint_token("alice"), cluster.server.mint_token("bob")
    cordon = "apiVersion: kubesched.io/v1alpha1\nkind: Scenario\nsteps:\n- at: 0s\n  cordon: {nodes: [node-a]}\n"
    status, body = await call(cluster, "POST", SCENARIOS, {"scenario": cordon}, token=bob)
    assert status == 403 and body["message"] == 'forbidden: User "bob" cannot post path "/ui/api/scenarios"'
    status, run = await call(cluster, "POST", SCENARIOS, {"scenario": cordon}, token=alice)
    assert status == 201 and run["user"] == "alice"
    body = await finished(cluster, run["id"])
    assert body["steps"][0]["state"] == "failed"
    assert body["steps"][0]["error"].startswith('nodes "node-a" is forbidden: User "alice" cannot update resource "nodes"')
    assert not cluster.store.get(NODE, None, "node-a").get("spec", {}).get("unschedulable")
