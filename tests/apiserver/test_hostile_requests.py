"""Hostile requests against ``kubesched apiserver`` in a subprocess, through the kubeconfig it writes:
each gets kube-apiserver's 4xx (never a 500), stores nothing, and the server's memory stays bounded
however much a small body claims to expand to.

Bodies are built by small named functions, not stored in parameters: a parameter's value can end
up in a test id and from there in ``PYTEST_CURRENT_TEST``, where a 3 MiB body breaks every child
process the test starts.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from yarl import URL

from kubesched.apiserver.bounds import MAX_BODY, MAX_DEPTH
from kubesched.client.kube import KubeClient
from tests.apiserver.test_protobuf import _tagged, encode
from tests.apiserver.test_protobuf import body as protobuf_body

PODS = "/api/v1/namespaces/default/pods"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
QUANTITY_RULE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
#: How much the server's resident memory may grow over the whole suite (ten times what it does: it holds a few
#: MiB bodies at a time, never what they claim to expand to).
RSS_GROWTH_LIMIT_KIB = 160 * 1024


# --- bodies ---------------------------------------------------------------------------------------
def pod_with(**container_fields: object) -> Callable[[], bytes]:
    def build() -> bytes:
        container = {"name": "c", "image": "nginx", **container_fields}
        return orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile"}, "spec": {"containers": [container]}})
    return build


def pod_requesting(cpu: object) -> Callable[[], bytes]:
    return pod_with(resources={"requests": {"cpu": cpu}})


def pod_spec(**spec: object) -> Callable[[], bytes]:
    def build() -> bytes:
        body = {"containers": [{"name": "c", "image": "nginx"}], **spec}
        return orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile"}, "spec": body})
    return build


def pod_object(**fields: object) -> Callable[[], bytes]:
    def build() -> bytes:
        return orjson.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile"}, **fields})
    return build


def raw(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def deep_managed_fields(depth: int) -> Callable[[], bytes]:
    """A ConfigMap whose free-form ``fieldsV1`` nests ``depth`` levels (no schema stops it)."""
    def build() -> bytes:
        opened, closed = b'{"f:a":' * depth, b"}" * depth
        return (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep","managedFields":[{"manager":"m",'
                b'"operation":"Update","fieldsType":"FieldsV1","fieldsV1":' + opened + b"{}" + closed + b"}]}}")
    return build


def yaml_flow_nesting(depth: int) -> Callable[[], bytes]:
    return lambda: b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " + b"[" * depth + b"]" * depth + b"\n"


def billion_laughs(name: str = "laughs") -> Callable[[], bytes]:
    """Nine levels of nine aliases each: 342 bytes that describe 9**9 strings."""
    def build() -> bytes:
        lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        for level in range(1, 9):
            refs = ",".join([f"*a{level - 1}"] * 9)
            lines.append(f"a{level}: &a{level} [{refs}]")
        anchors = "\n  ".join(lines)
        return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations: {{}}\n"
                f"data:\n  x: y\nbinaryData: {{}}\nimmutable: false\n# anchors below\nx-laughs:\n  {anchors}\n").encode()
    return build


def aliased_big_scalar() -> bytes:
    """One 1 MiB scalar aliased eight times: few nodes (go-yaml's count lets it pass), 8 MiB of text."""
    values = "\n".join(f"  k{i}: *big" for i in range(8))
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  k: &big {'x' * (1 << 20)}\n"
            f"{values}\n").encode()


def self_alias() -> bytes:
    return b"apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: loop, labels: *m}\n"


def copy_bomb() -> bytes:
    """Sixty JSON patch copies of a map into itself: each doubles what the last described, 2**60 KiB
    in all, from a body of 4 KiB."""
    copies = [{"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/c{i}"} for i in range(60)]
    return orjson.dumps([{"op": "add", "path": "/metadata/annotations", "value": {"a": "x" * 1024}}, *copies])


def json_patch_operations(count: int) -> Callable[[], bytes]:
    return lambda: orjson.dumps([{"op": "test", "path": "/metadata/name", "value": "target"}] * count)


def over_the_body_limit() -> bytes:
    return b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"x":"' + b"x" * MAX_BODY + b'"}}'


def protobuf_pod_requesting(cpu: str) -> Callable[[], bytes]:
    return lambda: protobuf_body({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile"},
                                  "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]}})


def protobuf_truncated() -> bytes:
    return protobuf_pod_requesting("1")()[:-7]


def protobuf_garbage() -> bytes:
    return b"k8s\x00\n\xff\xff\xff\xff\x0f" + b"\x00" * 16


def protobuf_pod_metadata(metadata: bytes) -> Callable[[], bytes]:
    """A protobuf Pod whose ObjectMeta is the raw ``metadata`` bytes, wire types as given."""
    type_meta = encode("k8s.io.apimachinery.pkg.runtime.TypeMeta", {"apiVersion": "v1", "kind": "Pod"})
    return lambda: b"k8s\x00" + _tagged(1, type_meta) + _tagged(2, _tagged(1, metadata))


# --- the table ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    method: str
    path: str
    status: int
    reason: str
    body: Callable[[], bytes] = field(default=lambda: b"")
    content_type: str = JSON
    params: dict[str, str] = field(default_factory=dict)
    message: str | None = None


def cannot_handle(kind: str, detail: str) -> str:
    return f'{kind} in version "v1" cannot be handled as a {kind}: {detail}'


CASES = [
    # quantities, as Quantity.UnmarshalJSON refuses them
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting("abc"), message=cannot_handle("Pod", QUANTITY_RULE)),
                 id="quantity-letters"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting(""), message=cannot_handle("Pod", QUANTITY_RULE)),
                 id="quantity-empty"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting("1.5.5Gi"), message=cannot_handle("Pod", QUANTITY_RULE)),
                 id="quantity-two-decimal-points"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting("1Gi5"),
                      message=cannot_handle("Pod", "unable to parse quantity's suffix")), id="quantity-digits-after-binary-suffix"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting("1e99999999999999999999"),
                      message=cannot_handle("Pod", "unable to parse quantity's suffix")), id="quantity-exponent-past-int64"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting(True), message=cannot_handle("Pod", QUANTITY_RULE)),
                 id="quantity-boolean"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting({"value": 1}), message=cannot_handle("Pod", QUANTITY_RULE)),
                 id="quantity-object"),
    pytest.param(Case("POST", "/api/v1/nodes", 400, "BadRequest",
                      raw(b'{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"capacity":{"cpu":"lots"}}}'),
                      message=cannot_handle("Node", QUANTITY_RULE)), id="quantity-in-node-capacity"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_requesting("abc"), YAML, message=cannot_handle("Pod", QUANTITY_RULE)),
                 id="quantity-in-yaml"),
    # wrong types, as encoding/json's UnmarshalTypeError reads
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_object(spec="x"),
                      message=cannot_handle("Pod", "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec")),
                 id="type-spec-string"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_object(spec={"containers": {"name": "c"}}),
                      message=cannot_handle("Pod", "json: cannot unmarshal object into Go struct field PodSpec.spec.containers "
                                                   "of type []v1.Container")), id="type-containers-object"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_with(name=5),
                      message=cannot_handle("Pod", "json: cannot unmarshal number into Go struct field Container.spec.containers.name "
                                                   "of type string")), id="type-container-name-number"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", raw(b'{"metadata":{"name":"h","labels":{"a":5}},"spec":{}}'),
                      message=cannot_handle("Pod", "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels "
                                                   "of type string")), id="type-label-value-number"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_spec(priority=2**40),
                      message=cannot_handle("Pod", "json: cannot unmarshal number 1099511627776 into Go struct field PodSpec.spec.priority "
                                                   "of type int32")), id="type-int32-overflow"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", pod_spec(terminationGracePeriodSeconds=1.5),
                      message=cannot_handle("Pod", "json: cannot unmarshal number 1.5 into Go struct field "
                                                   "PodSpec.spec.terminationGracePeriodSeconds of type int64")), id="type-fraction-for-int64"),
    pytest.param(Case("POST", DEPLOYMENTS, 400, "BadRequest", raw(b'{"metadata":{"name":"d"},"spec":{"replicas":"3"}}'),
                      message=cannot_handle("Deployment", "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
                                                          "of type int32")), id="type-replicas-string"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", raw(b'{"metadata":5}'),
                      message=cannot_handle("Pod", "json: cannot unmarshal number into Go struct field Pod.metadata of type v1.ObjectMeta")),
                 id="type-metadata-number"),
    pytest.param(Case("POST", PODS, 422, "Invalid", pod_spec(containers=[None]),
                      message='Pod "hostile" is invalid: [spec.containers[0].name: Required value, spec.containers[0].image: Required value]'),
                 id="null-container-is-an-empty-one"),
    pytest.param(Case("POST", PODS, 422, "Invalid", pod_spec(tolerations=[None], affinity={"nodeAffinity": {
                      "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchFields": [None]}}]}})),
                 id="null-list-items-are-empty-structs"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", raw(b"[]")), id="body-array"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", raw(b"{not json")), id="body-malformed-json"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", raw(b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}')),
                 id="body-other-kind"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", raw(b"\xff\xfe:"), YAML), id="yaml-invalid-utf8"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", protobuf_garbage, PROTOBUF), id="protobuf-garbage"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", protobuf_truncated, PROTOBUF), id="protobuf-truncated"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", protobuf_pod_metadata(_tagged(1, 5)), PROTOBUF,
                      message="unable to decode the protobuf body: expected a length-delimited field, got a number"),
                 id="protobuf-name-sent-as-a-number"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", protobuf_pod_metadata(_tagged(7, b"12")), PROTOBUF,
                      message="unable to decode the protobuf body: expected a number, got a length-delimited field"),
                 id="protobuf-generation-sent-as-bytes"),
    pytest.param(Case("POST", PODS, 400, "BadRequest", protobuf_pod_requesting("abc"), PROTOBUF,
                      message=cannot_handle("Pod", QUANTITY_RULE)), id="quantity-in-protobuf"),
    # nesting, alias expansion and sizes, for every body and patch type
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", deep_managed_fields(MAX_DEPTH + 50),
                      message=f"exceeded max depth of {MAX_DEPTH}"), id="json-nesting-past-the-limit"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", deep_managed_fields(5000)), id="json-nesting-past-the-parser"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", yaml_flow_nesting(100_000), YAML,
                      message=f"error converting YAML to JSON: yaml: exceeded max depth of {MAX_DEPTH}"), id="yaml-nesting-100k"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", billion_laughs(), YAML,
                      message="error converting YAML to JSON: yaml: document contains excessive aliasing"), id="yaml-billion-laughs"),
    pytest.param(Case("POST", CONFIGMAPS, 413, "RequestEntityTooLarge", aliased_big_scalar, YAML,
                      message=f"Request entity too large: limit is {MAX_BODY}"), id="yaml-aliased-megabyte-scalar"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", self_alias, YAML,
                      message="error converting YAML to JSON: yaml: anchor 'm' value contains itself"), id="yaml-alias-to-itself"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", raw(b"metadata: {name: *nowhere}\n"), YAML,
                      message="error converting YAML to JSON: yaml: unknown anchor 'nowhere' referenced"), id="yaml-unknown-alias"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", raw(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\ndata: {~: x}\n"),
                      YAML, message="error converting YAML to JSON: unsupported map key of type: null"), id="yaml-null-key"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", raw(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\ndata: {a: .inf}\n"),
                      YAML, message="error converting YAML to JSON: json: unsupported value: +Inf"), id="yaml-infinite-value"),
    pytest.param(Case("POST", CONFIGMAPS, 413, "RequestEntityTooLarge", over_the_body_limit,
                      message=f"Request entity too large: limit is {MAX_BODY}"), id="body-over-the-limit"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/laughs", 400, "BadRequest", billion_laughs(), APPLY, {"fieldManager": "hostile"},
                      message="error converting YAML to JSON: yaml: document contains excessive aliasing"), id="apply-billion-laughs"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 400, "BadRequest", yaml_flow_nesting(5000), APPLY, {"fieldManager": "hostile"}),
                 id="apply-nesting"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 400, "BadRequest", deep_managed_fields(MAX_DEPTH + 50), MERGE),
                 id="merge-patch-nesting"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 400, "BadRequest", deep_managed_fields(MAX_DEPTH + 50), STRATEGIC),
                 id="strategic-merge-patch-nesting"),
    pytest.param(Case("PATCH", f"{PODS}/target", 400, "BadRequest",
                      raw(b'{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"abc"}}}]}}'), STRATEGIC,
                      message=cannot_handle("Pod", QUANTITY_RULE)), id="strategic-merge-patch-bad-quantity"),
    pytest.param(Case("PATCH", f"{PODS}/target", 400, "BadRequest", raw(b'{"spec":{"priority":"high"}}'), MERGE),
                 id="merge-patch-wrong-type"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 413, "RequestEntityTooLarge", json_patch_operations(10_001), JSON_PATCH,
                      message="The allowed maximum operations in a JSON patch is 10000, got 10001"), id="json-patch-too-many-operations"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 422, "Invalid", copy_bomb, JSON_PATCH), id="json-patch-copy-bomb"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 400, "BadRequest", raw(b'{"op":"add"}'), JSON_PATCH), id="json-patch-not-a-list"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 422, "Invalid", raw(b'[{"op":"remove","path":5}]'), JSON_PATCH,
                      message="remove operation failed to decode path: json: cannot unmarshal number into Go value of type string"),
                 id="json-patch-path-number"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 400, "BadRequest", raw(b'[{"op":null,"path":"/data"}]'), JSON_PATCH,
                      message="Unexpected kind: unknown"), id="json-patch-op-null"),
    pytest.param(Case("PATCH", f"{PODS}/target", 400, "BadRequest", raw(b'{"spec":{"$setElementOrder/containers":-1}}'), STRATEGIC,
                      message="invalid patch format of setElementOrder list"), id="strategic-merge-patch-order-not-a-list"),
    pytest.param(Case("PATCH", f"{PODS}/target", 400, "BadRequest", raw(b'{"spec":{"$retainKeys":{"a":1}}}'), STRATEGIC,
                      message="invalid patch format of retainKeys"), id="strategic-merge-patch-retain-keys-not-a-list"),
    pytest.param(Case("PATCH", f"{CONFIGMAPS}/target", 415, "UnsupportedMediaType", raw(b"x"), "text/plain"),
                 id="patch-unknown-content-type"),
    pytest.param(Case("POST", CONFIGMAPS, 415, "UnsupportedMediaType", raw(b"<x/>"), "application/xml"), id="post-unknown-content-type"),
    # bodies of deletions, bindings and evictions
    pytest.param(Case("DELETE", f"{PODS}/target", 400, "BadRequest", raw(b'{"gracePeriodSeconds":"soon"}'),
                      message="json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
                 id="delete-options-grace-period-string"),
    pytest.param(Case("POST", f"{PODS}/target/binding", 400, "BadRequest", raw(b'{"metadata":{"name":"target"},"target":"node"}'),
                      message="json: cannot unmarshal string into Go struct field Binding.target of type v1.ObjectReference"),
                 id="binding-target-string"),
    pytest.param(Case("POST", f"{PODS}/target/eviction", 400, "BadRequest", raw(b'{"deleteOptions":{"preconditions":[]}}'),
                      message="json: cannot unmarshal array into Go struct field DeleteOptions.deleteOptions.preconditions "
                              "of type v1.Preconditions"), id="eviction-preconditions-array"),
    # paths and names
    pytest.param(Case("GET", f"{PODS}/..%2F..%2Fsecrets", 404, "NotFound"), id="path-encoded-dot-dot-slash"),
    pytest.param(Case("GET", f"{PODS}/a%2Fb", 404, "NotFound"), id="path-encoded-slash-in-name"),
    pytest.param(Case("GET", f"{PODS}/{'n' * 5000}", 404, "NotFound"), id="path-name-5000-chars"),
    pytest.param(Case("GET", f"{PODS}/a%00b", 404, "NotFound"), id="path-nul-in-name"),
    pytest.param(Case("POST", "/api/v1/namespaces/Not_A_Namespace/configmaps", 404, "NotFound",
                      raw(b'{"metadata":{"name":"x"}}')), id="path-invalid-namespace"),
    pytest.param(Case("GET", "/api/v1/namespaces/default/pods/x/y/z", 404, "NotFound"), id="path-too-many-segments"),
    pytest.param(Case("GET", "/apis/apps/v9/deployments", 404, "NotFound"), id="path-unknown-version"),
    # query parameters
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"limit": "lots"}), id="query-limit-not-a-number"),
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"limit": "9" * 5000}), id="query-limit-5000-digits"),
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"labelSelector": "a in (b"}), id="query-label-selector-unclosed"),
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"fieldSelector": "spec.nope=x"}), id="query-field-selector-unknown"),
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"continue": "!!!"}), id="query-continue-garbage"),
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"watch": "1", "timeoutSeconds": "9" * 400}),
                 id="query-watch-timeout-400-digits"),
    pytest.param(Case("GET", PODS, 400, "BadRequest", params={"resourceVersion": "1e3"}), id="query-resource-version-not-decimal"),
    pytest.param(Case("DELETE", f"{PODS}/target", 400, "BadRequest", params={"gracePeriodSeconds": "9" * 30}),
                 id="query-grace-period-past-int64"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", raw(b'{"metadata":{"name":"x"}}'), params={"dryRun": "Some"}),
                 id="query-dry-run-unsupported"),
    pytest.param(Case("POST", CONFIGMAPS, 400, "BadRequest", raw(b'{"metadata":{"name":"x"}}'), params={"fieldManager": "m" * 129}),
                 id="query-field-manager-too-long"),
]


# --- the server -----------------------------------------------------------------------------------
@dataclass
class Server:
    process: subprocess.Popen
    kubeconfig: Path

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS in /proc status")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``kubesched apiserver --port 0`` and the kubeconfig it writes; every test talks through it."""
    kubeconfig = tmp_path_factory.mktemp("hostile") / "kubeconfig.yaml"
    process = subprocess.Popen([sys.executable, "-m", "kubesched.cli.main", "apiserver", "--port", "0",
                                "--kubeconfig-out", str(kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while not kubeconfig.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"kubesched apiserver did not start: {process.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    yield Server(process, kubeconfig)
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
    assert re.search(rb"kubesched\.apiserver\.server\] .* failed", stderr) is None, stderr.decode()[-4000:]


class Client:
    """Raw requests with the kubeconfig's server and credentials: paths are sent as written."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def send(self, method: str, path: str, body: bytes = b"", content_type: str = JSON,
                   params: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict]:
        session = await self.kube.session()
        headers = {**await self.kube._headers(), "Content-Type": content_type, "Accept": JSON, **(headers or {})}
        url = URL(self.kube.server + path, encoded=True)
        if params:
            url = url.update_query(params)
        async with session.request(method, url, data=body or None, headers=headers) as resp:
            payload = await resp.read()
            return resp.status, orjson.loads(payload) if payload[:1] == b"{" else {"raw": payload.decode("utf-8", "replace")}

    async def resource_version(self) -> str:
        status, listed = await self.send("GET", "/api/v1/namespaces")
        assert status == 200
        return listed["metadata"]["resourceVersion"]


@pytest.fixture
async def client(server):
    kube = KubeClient(kubeconfig=server.kubeconfig)
    http = Client(kube)
    for path, body in ((CONFIGMAPS, {"metadata": {"name": "target"}, "data": {"a": "b"}}),
                       (PODS, {"metadata": {"name": "target"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})):
        status, _ = await http.send("POST", path, orjson.dumps(body))
        assert status in (201, 409)
    yield http
    await kube.close()


@pytest.fixture(scope="module")
def rss(server):
    """The server's RSS before the suite's requests; afterwards it may have grown only a little."""
    before = server.rss_kib()
    yield before
    grown = server.rss_kib() - before
    assert grown < RSS_GROWTH_LIMIT_KIB, f"the API server's RSS grew by {grown} KiB"


@pytest.mark.parametrize("case", CASES)
async def test_a_hostile_request_gets_kube_apiservers_4xx_and_stores_nothing(client, rss, case: Case):
    before = await client.resource_version()
    status, body = await client.send(case.method, case.path, case.body(), case.content_type, case.params)
    assert (status, body.get("kind"), body.get("reason"), body.get("code")) == (case.status, "Status", case.reason, case.status), body
    if case.message is not None:
        assert body["message"] == case.message
    assert await client.resource_version() == before


def test_the_suite_has_at_least_forty_hostile_requests():
    assert len(CASES) >= 40


@pytest.mark.parametrize("cpu", [pytest.param("1e17", id="1e17"), pytest.param("1e400", id="1e400")])
async def test_huge_quantities_kube_apiserver_accepts_are_stored_as_sent(client, cpu):
    body = {"metadata": {"name": f"huge-{cpu}"}, "spec": {"containers": [{"name": "c", "image": "nginx",
                                                                          "resources": {"requests": {"cpu": cpu}}}]}}
    status, created = await client.send("POST", PODS, orjson.dumps(body))
    assert status == 201 and created["spec"]["containers"][0]["resources"]["requests"]["cpu"] == cpu


async def test_yaml_values_json_lacks_are_stored_as_their_json(client):
    body = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-types\n  labels: {day: 2001-12-14}\n"
            b"data: {2: two, true: yes-key, when: 2001-12-14T21:59:43Z, text: !!binary aGVsbG8=}\n")
    status, created = await client.send("POST", CONFIGMAPS, body, YAML)
    assert status == 201, created
    assert created["metadata"]["labels"] == {"day": "2001-12-14"}
    assert created["data"] == {"2": "two", "true": "yes-key", "when": "2001-12-14T21:59:43Z", "text": "hello"}


@pytest.mark.parametrize("params", [
    pytest.param({"watch": "1", "timeoutSeconds": str(2**63 - 1), "resourceVersion": "1"}, id="watch-timeout-int64-max"),
    pytest.param({"limit": str(2**63 - 1)}, id="list-limit-int64-max"),
    pytest.param({"limit": str(-(2**63))}, id="list-limit-int64-min"),
])
async def test_extreme_query_integers_kube_apiserver_accepts_are_answered(client, params):
    if "watch" in params:
        session = await client.kube.session()
        url = URL(client.kube.server + PODS).update_query(params)
        async with session.get(url, headers=await client.kube._headers()) as resp:
            assert resp.status == 200
            assert b'"type":"ADDED"' in await resp.content.readline()
        return
    status, listed = await client.send("GET", PODS, params=params)
    assert status == 200 and listed["kind"] == "PodList"


@pytest.mark.parametrize("path", [pytest.param(CONFIGMAPS, id="configmap"), pytest.param(PODS, id="pod")])
async def test_a_delete_with_the_longest_grace_period_is_answered(client, path):
    body = {"metadata": {"name": "graceful"}, "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "nginx"}]}}
    status, _ = await client.send("POST", path, orjson.dumps(body if path == PODS else {"metadata": body["metadata"]}))
    assert status == 201
    status, deleted = await client.send("DELETE", f"{path}/graceful", params={"gracePeriodSeconds": str(2**63 - 1)})
    assert status == 200 and deleted["metadata"]["name"] == "graceful"


@pytest.mark.parametrize(("size", "status"), [
    pytest.param(64 << 10, 200, id="64KiB-served"),
    pytest.param((1 << 20) - 1024, 200, id="just-under-1MiB-served"),
    pytest.param(2 << 20, 400, id="2MiB-refused-by-the-http-layer"),
])
async def test_headers_are_served_up_to_gos_1MiB_header_limit(client, rss, size, status):
    """kube-apiserver serves headers up to Go's ``MaxHeaderBytes`` (1 MiB) and its HTTP server
    refuses longer ones (431 there, 400 from aiohttp here) before any handler runs."""
    answered, _ = await client.send("GET", PODS, headers={"X-Padding": "x" * size})
    assert answered == status
    assert (await client.send("GET", PODS))[0] == 200


async def test_concurrent_bombs_leave_the_server_answering(client, rss):
    bombs = [client.send("POST", CONFIGMAPS, billion_laughs(f"laughs{i}")(), YAML) for i in range(8)]
    answers = await asyncio.gather(*bombs)
    assert {status for status, _ in answers} == {400}
    status, _ = await client.send("GET", "/api/v1/namespaces/default/configmaps/target")
    assert status == 200
