"""``fieldValidation`` on create, update and patch, wrong types and size limits, as kube-apiserver."""

from __future__ import annotations

import orjson
import pytest

from tests.apiserver.conftest import pod

PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
UNKNOWN = {**pod("web"), "spec": {"containers": [{"name": "c", "image": "nginx", "resource": {}}], "nodeSelecter": {"a": "b"}}}
STRICT_MESSAGE = ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                  'unknown field "spec.containers[0].resource", unknown field "spec.nodeSelecter"')


async def test_strict_rejects_unknown_fields_with_all_of_them_listed(api):
    status, error, _ = await api.call("POST", PODS, UNKNOWN, params={"fieldValidation": "Strict"})
    assert (status, error["reason"], error["message"]) == (400, "BadRequest", STRICT_MESSAGE)
    status, _, _ = await api.call("GET", f"{PODS}/web")
    assert status == 404


@pytest.mark.parametrize("params", [pytest.param({"fieldValidation": "Warn"}, id="warn"), pytest.param(None, id="default is warn")])
async def test_warn_accepts_and_sends_one_warning_per_unknown_field(api, params):
    status, created, headers = await api.call("POST", PODS, UNKNOWN, params=params)
    assert status == 201 and "nodeSelecter" not in created["spec"]
    assert headers.getall("Warning") == ['299 - "unknown field \\"spec.containers[0].resource\\"", '
                                         '299 - "unknown field \\"spec.nodeSelecter\\""']


async def test_ignore_drops_unknown_fields_silently(api):
    status, created, headers = await api.call("POST", PODS, UNKNOWN, params={"fieldValidation": "Ignore"})
    assert status == 201 and "nodeSelecter" not in created["spec"] and "resource" not in created["spec"]["containers"][0]
    assert "Warning" not in headers


async def test_an_unknown_directive_is_invalid(api):
    status, error, _ = await api.call("POST", PODS, pod("web"), params={"fieldValidation": "Loose"})
    assert (status, error["reason"]) == (422, "Invalid")
    assert 'fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn"' in error["message"]


async def test_duplicate_json_keys_are_strict_decoding_errors(api):
    raw = b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"d","name":"d"},"spec":{"containers":[{"name":"c","image":"i"}]}}'
    status, error, _ = await api.call("POST", PODS, raw=raw, params={"fieldValidation": "Strict"})
    assert (status, error["message"]) == (400, 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                               'duplicate field "metadata.name"')
    status, _, headers = await api.call("POST", PODS, raw=raw)
    assert status == 201 and headers["Warning"] == '299 - "duplicate field \\"metadata.name\\""'


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({**pod("web"), "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": "all"}},
                     "json: cannot unmarshal string into Go struct field PodSpec.spec.tolerations of type []v1.Toleration",
                     id="string for a list"),
        pytest.param({**pod("web"), "metadata": "x"},
                     "json: cannot unmarshal string into Go struct field Pod.metadata of type v1.ObjectMeta", id="string for metadata"),
        pytest.param({**pod("web"), "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "lots"}}}]}},
                     "quantities must match the regular expression", id="quantity that does not parse"),
    ],
)
async def test_wrong_types_are_bad_requests_whatever_the_directive(api, body, message):
    for directive in ("Strict", "Warn", "Ignore"):
        status, error, _ = await api.call("POST", PODS, body, params={"fieldValidation": directive})
        assert (status, error["reason"]) == (400, "BadRequest")
        assert error["message"].startswith('Pod in version "v1" cannot be handled as a Pod: ') and message in error["message"]


async def test_update_and_patch_honour_the_directive(api):
    await api.call("POST", PODS, pod("web"))
    _, current, _ = await api.call("GET", f"{PODS}/web")
    current["spec"]["nodeSelecter"] = {"a": "b"}
    status, error, _ = await api.call("PUT", f"{PODS}/web", current, params={"fieldValidation": "Strict"})
    assert (status, error["message"]) == (400, 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                               'unknown field "spec.nodeSelecter"')
    patch = {"metadata": {"labels": {"x": "y"}}, "spec": {"nodeSelecter": {"a": "b"}}}
    status, error, _ = await api.call("PATCH", f"{PODS}/web", patch, content_type="application/merge-patch+json",
                                      params={"fieldValidation": "Strict"})
    assert (status, error["reason"]) == (400, "BadRequest") and 'unknown field "spec.nodeSelecter"' in error["message"]
    status, patched, headers = await api.call("PATCH", f"{PODS}/web", patch, content_type="application/merge-patch+json")
    assert status == 200 and patched["metadata"]["labels"]["x"] == "y" and "nodeSelecter" not in patched["spec"]
    assert headers["Warning"] == '299 - "unknown field \\"spec.nodeSelecter\\""'
    bad = {"spec": {"replicas": "three"}}
    await api.call("POST", DEPLOYMENTS, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
                                                                "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    status, error, _ = await api.call("PATCH", f"{DEPLOYMENTS}/d", bad, content_type="application/merge-patch+json")
    assert (status, error["message"]) == (400, 'Deployment in version "v1" cannot be handled as a Deployment: json: cannot '
                                               'unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32')


async def test_server_side_apply_reports_duplicate_yaml_keys(api):
    applied = b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: i}]\n  nodeName: a\n  nodeName: b\n"
    status, error, _ = await api.call("PATCH", f"{PODS}/web", raw=applied, content_type="application/apply-patch+yaml",
                                      params={"fieldManager": "me", "fieldValidation": "Strict"})
    assert (status, error["message"]) == (400, 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                               'duplicate field "spec.nodeName"')


async def test_annotations_are_limited_to_256_kib_in_total(api):
    body = {**pod("web"), "metadata": {"name": "web", "annotations": {"a": "x" * 200_000, "b": "x" * 70_000}}}
    status, error, _ = await api.call("POST", PODS, raw=orjson.dumps(body))
    assert (status, error["reason"]) == (422, "Invalid")
    assert error["message"] == 'Pod "web" is invalid: metadata.annotations: Too long: must have at most 262144 bytes'
