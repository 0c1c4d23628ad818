"""The HTTP API: verbs, errors, paging, watch semantics, subresources, protobuf, persistence."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.kinds import POD
from kubesched.apiserver import APIServer
from kubesched.apiserver.proto_schema import MESSAGES
from kubesched.apiserver.store import ObjectStore
from tests.apiserver.conftest import node, pod

PODS = "/api/v1/namespaces/default/pods"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def test_version_and_discovery(api):
    status, version, _ = await api.call("GET", "/version")
    assert status == 200 and version["gitVersion"].startswith("v1.35")
    status, body, headers = await api.call("GET", "/apis", accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
    assert headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    assert body["kind"] == "APIGroupDiscoveryList"
    status, body, _ = await api.call("GET", "/apis")
    assert body["kind"] == "APIGroupList"
    status, body, _ = await api.call("GET", "/apis/nope/v1")
    assert status == 404 and body["message"] == "the server could not find the requested resource"


async def test_create_get_and_generate_name(api):
    status, created, _ = await api.call("POST", PODS, pod("web"))
    assert status == 201 and created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    assert created["spec"]["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    status, got, _ = await api.call("GET", f"{PODS}/web")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    status, generated, _ = await api.call("POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "gen-"},
                                                         "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert status == 201 and generated["metadata"]["name"].startswith("gen-") and len(generated["metadata"]["name"]) == 9


@pytest.mark.parametrize("path, body, raw, code, reason, message", [
    (PODS, None, b"{bad", 400, "BadRequest", "couldn't get version/kind; json parse error: invalid character 'b'"),
    ("/api/v1/namespaces/default/foos", {}, None, 404, "NotFound", "the server could not find the requested resource"),
    (PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
     None, 422, "Invalid", 'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"'),
    (PODS, None, b'{"metadata":{"name":"big"},"x":"' + b"x" * (3 * 1024 * 1024) + b'"}', 413, "RequestEntityTooLarge",
     "Request entity too large: limit is 3145728"),
    (PODS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, None, 400, "BadRequest", "cannot be handled as a Pod"),
    ("/api/v1/namespaces/other/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}, None,
     400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request"),
])
async def test_bad_requests_get_status_errors_and_change_nothing(api, path, body, raw, code, reason, message):
    before = api.server.store.rv
    status, error, _ = await api.call("POST", path, body, raw=raw)
    assert (status, error["kind"], error["status"], error["reason"], error["code"]) == (code, "Status", "Failure", reason, code)
    assert message in error["message"]
    assert api.server.store.rv == before


async def test_optimistic_concurrency_conflict(api):
    _, created, _ = await api.call("POST", PODS, pod("p"))
    stale = {**created, "metadata": {**created["metadata"], "labels": {"x": "1"}}}
    status, _, _ = await api.call("PUT", f"{PODS}/p", {**created, "metadata": {**created["metadata"], "labels": {"y": "1"}}})
    assert status == 200
    status, error, _ = await api.call("PUT", f"{PODS}/p", stale)
    assert status == 409 and error["reason"] == "Conflict"
    assert error["message"] == ('Operation cannot be fulfilled on pods "p": the object has been modified; '
                                "please apply your changes to the latest version and try again")


async def test_dry_run_validates_without_storing(api):
    status, created, _ = await api.call("POST", PODS + "?dryRun=All", pod("dry"))
    assert status == 201 and created["metadata"]["name"] == "dry"
    assert api.server.store.try_get(POD, "default", "dry") is None
    status, _, _ = await api.call("POST", PODS + "?dryRun=Some", pod("dry"))
    assert status == 400


async def test_list_paging_with_limit_and_continue(api):
    for i in range(5):
        await api.call("POST", PODS, pod(f"p{i}"))
    names, token, rvs = [], None, set()
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        _, page, _ = await api.call("GET", PODS, params=params)
        names += [p["metadata"]["name"] for p in page["items"]]
        rvs.add(page["metadata"]["resourceVersion"])
        token = page["metadata"].get("continue")
        if not token:
            break
        assert page["metadata"]["remainingItemCount"] == 5 - len(names)
    assert names == [f"p{i}" for i in range(5)] and len(rvs) == 1
    status, error, _ = await api.call("GET", PODS, params={"continue": "garbage"})
    assert status == 400 and "continue key is not valid" in error["message"]


async def test_selectors_on_list(api):
    await api.call("POST", PODS, pod("a1"))
    await api.call("POST", PODS, pod("b1"))
    await api.call("POST", f"{PODS}/b1/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b1"},
                                                  "target": {"kind": "Node", "name": "n1"}})
    _, page, _ = await api.call("GET", "/api/v1/pods", params={"fieldSelector": "spec.nodeName=n1"})
    assert [p["metadata"]["name"] for p in page["items"]] == ["b1"]
    _, page, _ = await api.call("GET", PODS, params={"labelSelector": "app in (a)"})
    assert [p["metadata"]["name"] for p in page["items"]] == ["a1"]


async def test_table_output(api):
    await api.call("POST", PODS, pod("web"))
    _, table, _ = await api.call("GET", PODS, accept=TABLE)
    assert table["kind"] == "Table" and table["columnDefinitions"][0]["name"] == "Name"
    assert table["rows"][0]["cells"][:3] == ["web", "0/1", "Pending"]
    _, single, _ = await api.call("GET", f"{PODS}/web", accept=TABLE)
    assert len(single["rows"]) == 1


async def test_binding_subresource(api):
    await api.call("POST", PODS, pod("p"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
    status, body, _ = await api.call("POST", f"{PODS}/p/binding", binding)
    assert status == 201 and body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    status, body, _ = await api.call("POST", f"{PODS}/p/binding", binding)
    assert status == 409 and body["message"] == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'


async def test_eviction_respects_disruption_budgets(api):
    await api.call("POST", "/api/v1/nodes", node("n1"))
    await api.call("POST", PODS, pod("p"))
    await api.call("POST", f"{PODS}/p/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "n1"}})
    await api.call("PATCH", f"{PODS}/p/status", {"status": {"phase": "Running"}}, content_type="application/merge-patch+json")
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "p"}}}}
    await api.call("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb)
    await api.call("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b/status",
                   {"status": {"disruptionsAllowed": 0, "observedGeneration": 1, "desiredHealthy": 1, "currentHealthy": 1}},
                   content_type="application/merge-patch+json")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}}
    status, body, _ = await api.call("POST", f"{PODS}/p/eviction", eviction)
    assert status == 429 and body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["message"] == "The disruption budget b needs 1 healthy pods and has 1 currently"
    await api.call("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b/status", {"status": {"disruptionsAllowed": 1}},
                   content_type="application/merge-patch+json")
    status, body, _ = await api.call("POST", f"{PODS}/p/eviction", eviction)
    assert status == 201
    _, evicted, _ = await api.call("GET", f"{PODS}/p")
    assert evicted["metadata"]["deletionTimestamp"]
    target = next(c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
    _, budget, _ = await api.call("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/b")
    assert budget["status"]["disruptionsAllowed"] == 0 and "p" in budget["status"]["disruptedPods"]


async def test_scale_subresource(api):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
                                                                                   "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    status, created, _ = await api.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment)
    assert status == 201 and created["spec"]["replicas"] == 1
    _, scale, _ = await api.call("GET", "/apis/apps/v1/namespaces/default/deployments/d/scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "app=d"
    _, scale, _ = await api.call("PATCH", "/apis/apps/v1/namespaces/default/deployments/d/scale", {"spec": {"replicas": 4}},
                                 content_type="application/merge-patch+json")
    assert scale["spec"]["replicas"] == 4
    _, got, _ = await api.call("GET", "/apis/apps/v1/namespaces/default/deployments/d")
    assert got["spec"]["replicas"] == 4 and got["metadata"]["generation"] == 2


async def test_workload_selector_must_match_template(api):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "d"}},
                                                                                   "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    status, error, _ = await api.call("POST", "/apis/apps/v1/namespaces/default/deployments", deployment)
    assert status == 422 and "`selector` does not match template `labels`" in error["message"]


async def test_every_write_verb_defaults_and_validates(api):
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    good = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template}}
    bad = {**good, "spec": {**good["spec"], "selector": {"matchLabels": {"app": "x"}}}}
    status, error, _ = await api.call("PATCH", f"{deployments}/d", bad, content_type="application/apply-patch+yaml",
                                      params={"fieldManager": "test"})
    assert status == 422 and "`selector` does not match template `labels`" in error["message"]
    status, created, _ = await api.call("PATCH", f"{deployments}/d", good, content_type="application/apply-patch+yaml",
                                        params={"fieldManager": "test"})
    assert status == 201 and created["spec"]["replicas"] == 1
    replaced = {**created, "spec": {k: v for k, v in created["spec"].items() if k != "replicas"}}
    status, stored, _ = await api.call("PUT", f"{deployments}/d", replaced)
    assert status == 200 and stored["spec"]["replicas"] == 1


async def test_strategic_merge_patch_of_pod_status(api):
    await api.call("POST", PODS, pod("p"))
    patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}], "nominatedNodeName": "n2"}}
    status, patched, _ = await api.call("PATCH", f"{PODS}/p/status", patch, content_type="application/strategic-merge-patch+json")
    assert status == 200 and patched["status"]["nominatedNodeName"] == "n2"
    assert patched["status"]["conditions"][0]["reason"] == "Unschedulable"
    status, patched, _ = await api.call("PATCH", f"{PODS}/p/status", {"spec": {"nodeName": "sneaky"}},
                                        content_type="application/merge-patch+json")
    assert "nodeName" not in patched["spec"]


async def test_namespace_deletion_is_terminating_then_gone(api):
    await api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await api.call("POST", "/api/v1/namespaces/team/pods", pod("p"))
    status, ns, _ = await api.call("DELETE", "/api/v1/namespaces/team")
    assert status == 200 and ns["status"]["phase"] == "Terminating" and ns["metadata"]["deletionTimestamp"]
    status, _, _ = await api.call("POST", "/api/v1/namespaces/team/pods", pod("q"))
    assert status in (403, 404)
    await asyncio.sleep(0.05)
    status, _, _ = await api.call("GET", "/api/v1/namespaces/team")
    assert status == 404
    assert api.server.store.try_get(POD, "team", "p") is None


async def test_events_v1_are_served_as_core_events(api):
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "default"},
             "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "default-scheduler", "reportingInstance": "s-1",
             "action": "Scheduling", "reason": "FailedScheduling", "type": "Warning", "note": "0/1 nodes are available",
             "regarding": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u1"}}
    status, created, _ = await api.call("POST", "/apis/events.k8s.io/v1/namespaces/default/events", event)
    assert status == 201 and created["note"] == "0/1 nodes are available"
    _, core, _ = await api.call("GET", "/api/v1/namespaces/default/events",
                                params={"fieldSelector": "involvedObject.name=p,involvedObject.namespace=default,involvedObject.uid=u1"})
    assert [e["message"] for e in core["items"]] == ["0/1 nodes are available"]
    assert core["items"][0]["involvedObject"]["kind"] == "Pod"


async def test_watch_from_now_exact_version_and_gone(api):
    _, first, _ = await api.call("POST", PODS, pod("a"))
    rv = first["metadata"]["resourceVersion"]
    await api.call("POST", PODS, pod("b"))
    events = await api.watch_lines(PODS, {"resourceVersion": rv}, count=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]
    events = await api.watch_lines(PODS, {}, count=2)
    assert sorted(e["object"]["metadata"]["name"] for e in events) == ["a", "b"]
    events = await api.watch_lines(PODS, {"resourceVersion": rv, "timeoutSeconds": "1"})
    assert [e["object"]["metadata"]["name"] for e in events] == ["b"]


@pytest.mark.store(history_limit=2)
async def test_watch_of_a_compacted_version_gets_410(api):
    for i in range(4):
        await api.call("POST", PODS, pod(f"p{i}"))
    events = await api.watch_lines(PODS, {"resourceVersion": "1"})
    assert events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    assert events[0]["object"]["message"].startswith("too old resource version: 1 (")


async def test_watch_bookmarks_and_initial_events_end(api):
    await api.call("POST", PODS, pod("a"))
    events = await api.watch_lines(PODS, {"allowWatchBookmarks": "true", "resourceVersion": str(api.server.store.rv)}, count=1)
    assert events[0]["type"] == "BOOKMARK" and events[0]["object"]["metadata"]["resourceVersion"] == str(api.server.store.rv)
    events = await api.watch_lines(PODS, {"allowWatchBookmarks": "true", "sendInitialEvents": "true",
                                          "resourceVersionMatch": "NotOlderThan"}, count=2)
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_watch_as_table_for_kubectl_get_w(api):
    await api.call("POST", PODS, pod("a"))
    async with api.session.get(api.server.url + PODS, params={"watch": "1", "resourceVersion": "0"}, headers={"Accept": TABLE}) as resp:
        line = await resp.content.readline()
    import orjson

    event = orjson.loads(line)
    assert event["type"] == "ADDED" and event["object"]["kind"] == "Table"
    assert event["object"]["rows"][0]["cells"][0] == "a"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(message: str, name: str, value) -> bytes:
    number, ftype = next((n, spec[1]) for n, spec in MESSAGES[message].items() if spec[0] == name)
    if ftype in (5, 3, 8):
        return _varint(number << 3) + _varint(int(value))
    payload = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _labels(message: str, labels: dict) -> bytes:
    entry = f"{message}.LabelsEntry" if "ObjectMeta" in message else f"{message}.MatchLabelsEntry"
    return b"".join(_field(message, "labels" if "ObjectMeta" in message else "matchLabels",
                           _field(entry, "key", k) + _field(entry, "value", v)) for k, v in labels.items())


async def test_protobuf_bodies_from_kubectl_typed_clients(api):
    meta, apps, core = "k8s.io.apimachinery.pkg.apis.meta.v1", "k8s.io.api.apps.v1", "k8s.io.api.core.v1"
    container = _field(f"{core}.Container", "name", "web") + _field(f"{core}.Container", "image", "nginx")
    template = (_field(f"{core}.PodTemplateSpec", "metadata", _labels(f"{meta}.ObjectMeta", {"app": "web"}))
                + _field(f"{core}.PodTemplateSpec", "spec", _field(f"{core}.PodSpec", "containers", container)))
    spec = (_field(f"{apps}.DeploymentSpec", "replicas", 0)
            + _field(f"{apps}.DeploymentSpec", "selector", _labels(f"{meta}.LabelSelector", {"app": "web"}))
            + _field(f"{apps}.DeploymentSpec", "template", template))
    deployment = (_field(f"{apps}.Deployment", "metadata", _field(f"{meta}.ObjectMeta", "name", "web")
                         + _field(f"{meta}.ObjectMeta", "generation", 0))
                  + _field(f"{apps}.Deployment", "spec", spec))
    type_meta = _field("k8s.io.apimachinery.pkg.runtime.TypeMeta", "apiVersion", "apps/v1") + \
        _field("k8s.io.apimachinery.pkg.runtime.TypeMeta", "kind", "Deployment")
    body = b"k8s\x00" + _field("k8s.io.apimachinery.pkg.runtime.Unknown", "typeMeta", type_meta) + \
        _field("k8s.io.apimachinery.pkg.runtime.Unknown", "raw", deployment)
    status, created, _ = await api.call("POST", "/apis/apps/v1/namespaces/default/deployments", raw=body,
                                        content_type="application/vnd.kubernetes.protobuf")
    assert status == 201, created
    assert created["metadata"]["name"] == "web" and created["metadata"]["generation"] == 1
    assert created["spec"]["replicas"] == 0  # an explicit zero on a pointer field survives
    assert created["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    assert created["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"


async def test_sqlite_persistence_survives_a_restart(tmp_path):
    from tests.apiserver.conftest import Http

    data = tmp_path / "state.sqlite"
    first = APIServer(ObjectStore(), port=0, data=data)
    await first.start()
    async with first.client_session() as session:
        http = Http(first, session)
        _, created, _ = await http.call("POST", PODS, pod("keep"))
        await http.call("POST", PODS, pod("gone"))
        await http.call("DELETE", f"{PODS}/gone")
        old_rv = created["metadata"]["resourceVersion"]
        last_rv = first.store.rv
    await first.stop()
    second = APIServer(ObjectStore(), port=0, data=data)
    await second.start()
    try:
        async with second.client_session() as session:
            http = Http(second, session)
            _, kept, _ = await http.call("GET", f"{PODS}/keep")
            assert kept["metadata"]["resourceVersion"] == old_rv and kept["metadata"]["uid"] == created["metadata"]["uid"]
            status, _, _ = await http.call("GET", f"{PODS}/gone")
            assert status == 404
            assert second.store.rv == last_rv
            events = await http.watch_lines(PODS, {"resourceVersion": old_rv})
            assert events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410
            _, made, _ = await http.call("POST", PODS, pod("new"))
            assert int(made["metadata"]["resourceVersion"]) == last_rv + 1
    finally:
        await second.stop()
