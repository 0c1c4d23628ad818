"""The API server's web UI files, its one-time login, and the scheduling explanations endpoint."""

from __future__ import annotations

import aiohttp
import pytest
from yarl import URL

from kubesched.apiserver import APIServer


async def anonymous(server: APIServer, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, dict]:
    """A request with no credential (trusting the server's CA); ``path`` is sent as written."""
    connector = aiohttp.TCPConnector(ssl=server.security.client_ssl_context())
    async with aiohttp.ClientSession(connector=connector) as session, \
            session.request(method, URL(server.url + path, encoded=True), data=body, allow_redirects=False) as resp:
        return resp.status, await resp.read(), dict(resp.headers)


@pytest.mark.parametrize(("path", "content_type"), [
    ("/ui/", "text/html; charset=utf-8"),
    ("/ui/index.html", "text/html; charset=utf-8"),
    ("/ui/app.js", "text/javascript; charset=utf-8"),
    ("/ui/app.css", "text/css; charset=utf-8"),
    ("/ui/js-yaml.min.js", "text/javascript; charset=utf-8"),
])
async def test_ui_files_are_served_without_a_credential(api, path, content_type):
    status, body, headers = await anonymous(api.server, "GET", path)
    assert (status, headers["Content-Type"]) == (200, content_type)
    assert body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


async def test_ui_without_trailing_slash_redirects(api):
    status, _, headers = await anonymous(api.server, "GET", "/ui")
    assert (status, headers["Location"]) == (301, "/ui/")


@pytest.mark.parametrize("path", ["/ui/missing.js", "/ui/..%2F__init__.py", "/ui/%2E%2E", "/ui/.hidden", "/ui/static/app.js"])
async def test_ui_serves_only_its_own_files(api, path):
    status, body, _ = await anonymous(api.server, "GET", path)
    assert status == 404, body


async def test_ui_files_refuse_writes(api):
    status, _, _ = await anonymous(api.server, "POST", "/ui/app.js", b"x")
    assert status == 405


async def test_login_code_gives_the_admin_token_once(api):
    code = api.server.webui.login_code()
    status, body, _ = await anonymous(api.server, "POST", "/ui/login", f'{{"code": "{code}"}}'.encode())
    assert status == 200
    assert body == f'{{"token":"{api.server.admin_token}"}}'.encode()
    status, body, _ = await anonymous(api.server, "POST", "/ui/login", f'{{"code": "{code}"}}'.encode())
    assert status == 401
    assert b"already used or is not valid" in body


@pytest.mark.parametrize("body", [b"", b"not json", b"[1]", b'{"code": 3}', b'{"code": ""}'])
async def test_login_rejects_malformed_bodies_naming_the_field(api, body):
    status, reply, _ = await anonymous(api.server, "POST", "/ui/login", body)
    assert status == 400
    assert b'a string field \\"code\\"' in reply


async def test_login_is_post_only(api):
    status, _, _ = await anonymous(api.server, "GET", "/ui/login")
    assert status == 405


async def test_login_code_is_empty_without_authentication():
    from kubesched.apiserver.security import SecurityOptions

    server = APIServer(port=0, security=SecurityOptions(allow_anonymous=True))
    assert server.webui.login_code() == ""


EXPLANATION = {"apiVersion": "kubesched.io/v1alpha1", "kind": "SchedulingExplanation",
               "metadata": {"namespace": "default", "name": "web"}, "attemptCount": 1, "attempts": []}
EXPLANATIONS = "/apis/kubesched.io/v1alpha1/namespaces/default/explanations"


def recorded(namespace: str, name: str) -> dict | None:
    return EXPLANATION if (namespace, name) == ("default", "web") else None


async def test_explanation_of_an_attempted_pod_is_served(api):
    api.server.explanations = recorded
    status, body, _ = await api.call("GET", f"{EXPLANATIONS}/web")
    assert (status, body) == (200, EXPLANATION)


@pytest.mark.parametrize("explanations", [recorded, None], ids=["not-attempted", "no-scheduler"])
async def test_explanation_of_a_pod_not_attempted_is_not_found(api, explanations):
    api.server.explanations = explanations
    status, body, _ = await api.call("GET", f"{EXPLANATIONS}/other")
    assert status == 404
    assert body["message"] == 'explanations.kubesched.io "other" not found'


@pytest.mark.parametrize("path", [EXPLANATIONS, "/apis/kubesched.io/v1alpha1/explanations/web",
                                  "/apis/kubesched.io/v1alpha1/namespaces/default/pods/web"])
async def test_explanation_paths_other_than_one_pod_are_not_found(api, path):
    api.server.explanations = recorded
    status, body, _ = await api.call("GET", path)
    assert (status, body["reason"]) == (404, "NotFound")


async def test_explanations_are_read_only(api):
    api.server.explanations = recorded
    status, body, _ = await api.call("DELETE", f"{EXPLANATIONS}/web")
    assert (status, body["reason"]) == (405, "MethodNotAllowed")


async def test_explanations_are_authorized_like_other_reads(api):
    api.server.explanations = recorded
    token = api.server.mint_token("alice")
    async with api.server.client_session(token=token) as session, session.get(api.server.url + f"{EXPLANATIONS}/web") as resp:
        body = await resp.json()
    assert resp.status == 403
    assert body["message"] == ('explanations.kubesched.io "web" is forbidden: User "alice" cannot get resource "explanations" '
                               'in API group "kubesched.io" in the namespace "default"')


FULL_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
                 "annotations": {"note": "dropped", "kubernetes.io/config.mirror": "abc"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1", "controller": True}]},
    "spec": {"nodeName": "node-a", "overhead": {"cpu": "10m"},
             "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always",
                                 "resources": {"requests": {"cpu": "50m"}}}],
             "containers": [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "dropped"}],
                             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1"}}}]},
}


async def test_ui_pod_list_keeps_only_what_the_cluster_view_reads(api):
    status, created, _ = await api.call("POST", "/api/v1/namespaces/default/pods", FULL_POD)
    assert status == 201, created
    status, listed, _ = await api.call("GET", "/ui/api/pods")
    assert status == 200 and listed["kind"] == "PodList" and int(listed["metadata"]["resourceVersion"]) >= 1
    [pod] = listed["items"]
    meta = created["metadata"]
    assert pod["metadata"] == {"namespace": "default", "name": "web-1", "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
                               "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "controller": True}],
                               "annotations": {"kubernetes.io/config.mirror": "abc"}}
    assert pod["spec"] == {"nodeName": "node-a", "overhead": {"cpu": "10m"},
                           "initContainers": [{"resources": {"requests": {"cpu": "50m"}}, "restartPolicy": "Always"}],
                           "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    assert pod["status"] == {"phase": "Pending"}


async def test_ui_pod_list_is_authorized_as_a_list_of_pods(api):
    token = api.server.mint_token("alice")
    async with api.server.client_session(token=token) as session, session.get(api.server.url + "/ui/api/pods") as resp:
        body = await resp.json()
    assert resp.status == 403
    assert body["message"] == 'pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the cluster scope'


async def test_ui_api_without_scenario_runs_is_not_found(api):
    status, body, _ = await api.call("GET", "/ui/api/scenarios")
    assert (status, body["reason"]) == (404, "NotFound")
