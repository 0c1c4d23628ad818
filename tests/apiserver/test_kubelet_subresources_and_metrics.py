"""Pod subresources kube-apiserver hands to a kubelet (the embedded cluster runs no containers, so
they are refused with a message saying so), and the API server's ``/metrics``."""

from __future__ import annotations

import pytest

from tests.apiserver.conftest import node, pod

NO_CONTAINERS = "the kubesched simulated cluster's kubelets run no containers"


@pytest.mark.parametrize("method, subresource, message", [
    pytest.param("GET", "log", 'cannot read the logs of pod "web" in namespace "default" on node "n1"', id="logs"),
    pytest.param("POST", "exec", 'cannot exec into pod "web" in namespace "default" on node "n1"', id="exec over SPDY"),
    pytest.param("GET", "exec", 'cannot exec into pod "web" in namespace "default" on node "n1"', id="exec over websocket"),
    pytest.param("POST", "attach", 'cannot attach to pod "web" in namespace "default" on node "n1"', id="attach"),
    pytest.param("POST", "portforward", 'cannot forward ports to pod "web" in namespace "default" on node "n1"',
                 id="port-forward"),
    pytest.param("GET", "proxy", 'cannot proxy to pod "web" in namespace "default" on node "n1"', id="proxy"),
])
async def test_kubelet_subresources_of_a_pod_are_bad_requests_naming_the_pod(api, method, subresource, message):
    await api.call("POST", "/api/v1/nodes", node("n1"))
    await api.call("POST", "/api/v1/namespaces/default/pods", pod("web", nodeName="n1"))
    status, body, _ = await api.call(method, f"/api/v1/namespaces/default/pods/web/{subresource}")
    assert (status, body["reason"], body["code"]) == (400, "BadRequest", 400)
    assert body["message"].startswith(message) and NO_CONTAINERS in body["message"]


async def test_kubelet_subresource_of_an_unscheduled_pod_says_it_is_on_no_node(api):
    await api.call("POST", "/api/v1/namespaces/default/pods", pod("web"))
    status, body, _ = await api.call("GET", "/api/v1/namespaces/default/pods/web/log")
    assert status == 400 and '"web" in namespace "default" (not scheduled to a node)' in body["message"]


async def test_kubelet_subresource_of_a_missing_pod_is_not_found(api):
    status, body, _ = await api.call("GET", "/api/v1/namespaces/default/pods/ghost/log")
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'pods "ghost" not found')


async def test_discovery_lists_the_kubelet_subresources(api):
    _, body, _ = await api.call("GET", "/api/v1")
    kinds = {r["name"]: (r["kind"], r["verbs"]) for r in body["resources"]}
    assert kinds["pods/log"] == ("Pod", ["get"])
    assert kinds["pods/exec"] == ("PodExecOptions", ["create", "get"])
    assert kinds["pods/portforward"] == ("PodPortForwardOptions", ["create", "get"])


async def test_metrics_count_stored_objects_and_append_registered_sources(api):
    await api.call("POST", "/api/v1/nodes", node("n1"))
    api.server.metrics_sources.append(lambda: b"# TYPE scheduler_pending_pods gauge\nscheduler_pending_pods{queue=\"active\"} 0.0\n")
    status, body, headers = await api.call("GET", "/metrics", accept="text/plain")
    text = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert 'apiserver_storage_objects{resource="nodes"} 1.0' in text
    assert text.index("apiserver_storage_objects") < text.index("scheduler_pending_pods")
