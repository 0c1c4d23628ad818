"""Namespace lifecycle as kube-apiserver's NamespaceLifecycle admission and namespace deletion give it:
a namespace is usable by the very next request, a terminating one refuses new objects with
upstream's message and cause, and deleting a namespace deletes what it holds."""

from __future__ import annotations

import pytest

from kubesched.api.kinds import POD

from .conftest import pod

NS = "/api/v1/namespaces"


def namespace(name: str, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **meta}}


async def test_a_namespace_is_usable_by_the_next_request(api):
    for i in range(5):
        status, _, _ = await api.call("POST", NS, namespace(f"team-{i}"))
        assert status == 201
        status, created, _ = await api.call("POST", f"{NS}/team-{i}/pods", pod("p"))
        assert (status, created["metadata"]["namespace"]) == (201, f"team-{i}")


async def test_a_missing_namespace_is_not_found(api):
    status, body, _ = await api.call("POST", f"{NS}/nowhere/pods", pod("p"))
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'namespaces "nowhere" not found')


@pytest.mark.parametrize(("path", "obj", "message"), [
    (f"{NS}/closing/pods", pod("late"), 'pods "late" is forbidden'),
    (f"{NS}/closing/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
     'configmaps "cm" is forbidden'),
    ("/apis/apps/v1/namespaces/closing/deployments",
     {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
      "spec": {"selector": {"matchLabels": {"a": "b"}},
               "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
     'deployments.apps "d" is forbidden'),
    (f"{NS}/closing/pods", {**pod(""), "metadata": {"generateName": "web-"}}, "pods is forbidden"),
], ids=["pod", "configmap", "deployment-names-its-group", "generate-name-has-no-name-yet"])
async def test_a_terminating_namespace_refuses_new_objects(api, path, obj, message):
    # A finalizer keeps the namespace in Terminating, as the namespace controller's does upstream.
    await api.call("POST", NS, namespace("closing", finalizers=["example.com/hold"]))
    status, deleted, _ = await api.call("DELETE", f"{NS}/closing")
    assert status == 200 and deleted["status"]["phase"] == "Terminating"
    status, body, _ = await api.call("POST", path, obj)
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == f"{message}: unable to create new content in namespace closing because it is being terminated"
    assert body["details"]["causes"] == [{"reason": "NamespaceTerminating", "message": "namespace closing is being terminated",
                                          "field": "metadata.namespace"}]


async def test_deleting_a_namespace_deletes_its_contents(api):
    await api.call("POST", NS, namespace("team", finalizers=["example.com/hold"]))
    await api.call("POST", f"{NS}/team/pods", pod("p"))
    await api.call("POST", f"{NS}/team/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    await api.call("DELETE", f"{NS}/team")
    assert api.server.store.try_get(POD, "team", "p") is None
    status, configmaps, _ = await api.call("GET", f"{NS}/team/configmaps")
    assert (status, configmaps["items"]) == (200, [])
    status, kept, _ = await api.call("GET", f"{NS}/team")
    assert status == 200 and kept["status"]["phase"] == "Terminating"
