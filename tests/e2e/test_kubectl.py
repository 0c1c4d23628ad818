"""End to end: ``kubesched up`` as a subprocess, driven by the real kubectl and the official Python
client, the way a user would (no in-process shortcuts)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.apiserver.codec import MAX_BODY

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

MANIFESTS = {
    "nodes.yaml": """
        apiVersion: v1
        kind: Node
        metadata: {name: node-a, labels: {zone: a}}
        status:
          capacity: {cpu: "4", memory: 8Gi, pods: "110"}
          conditions: [{type: Ready, status: "True"}]
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: node-b, labels: {zone: b}}
        status:
          capacity: {cpu: "4", memory: 8Gi, pods: "110"}
          conditions: [{type: Ready, status: "True"}]
        """,
    "pods.yaml": """
        apiVersion: v1
        kind: Pod
        metadata: {name: small-1}
        spec:
          containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m}}}]
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: small-2}
        spec:
          containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m}}}]
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: huge}
        spec:
          containers: [{name: c, image: nginx, resources: {requests: {cpu: "64"}}}]
        """,
}

DRY_RUN = """
    apiVersion: v1
    kind: ServiceAccount
    metadata: {name: kubesched, namespace: kube-system}
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: kubesched}
    rules: [{apiGroups: [""], resources: [pods], verbs: [get, list, watch]}]
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata: {name: kubesched}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kubesched}
    subjects: [{kind: ServiceAccount, name: kubesched, namespace: kube-system}]
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: kubesched-config, namespace: kube-system}
    data: {config.yaml: "apiVersion: kubescheduler.config.k8s.io/v1"}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: kubesched, namespace: kube-system}
    spec:
      replicas: 1
      selector: {matchLabels: {app: kubesched}}
      template:
        metadata: {labels: {app: kubesched}}
        spec:
          serviceAccountName: kubesched
          containers: [{name: kubesched, image: kubesched:dev}]
    """


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Up:
    """A ``kubesched up`` subprocess and a kubectl bound to its kubeconfig."""

    def __init__(self, workdir: Path, extra: list[str] | None = None) -> None:
        self.workdir = workdir
        self.extra = extra or []
        self.port = _free_port()
        self.kubeconfig = workdir / "kubeconfig.yaml"
        self.data = workdir / "state.sqlite"
        self.url = f"https://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def urlopen(self, path: str, *, method: str = "GET", body: bytes | None = None, timeout: float = 10) -> Any:
        """``urllib.request.urlopen`` of a path with the kubeconfig's server, CA and admin token, as
        kubectl would send them."""
        conf = yaml.safe_load(self.kubeconfig.read_text())
        cluster, user = conf["clusters"][0]["cluster"], conf["users"][0]["user"]
        request = urllib.request.Request(cluster["server"] + path, data=body, method=method, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {user['token']}"})
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        return urllib.request.urlopen(request, timeout=timeout, context=ssl.create_default_context(cadata=ca))

    def start(self) -> None:
        cmd = [sys.executable, "-m", "kubesched.cli.main", "up", "--port", str(self.port), "--kubeconfig-out", str(self.kubeconfig),
               "--data", str(self.data), *self.extra]
        log = open(self.workdir / "up.log", "a")  # noqa: SIM115 - the process owns it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        until(lambda: self._ready(), 30, "kubesched up did not become ready")

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError("kubesched up exited:\n" + (self.workdir / "up.log").read_text())
        try:
            if not self.kubeconfig.exists():
                return False
            with self.urlopen("/readyz", timeout=1) as resp:
                return resp.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True, text=True,
                                timeout=30, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def json(self, *args: str) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def raw(self, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
        try:
            with self.urlopen(path, method=method, body=body) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


def until(check: Callable[[], object], timeout: float, message: str) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.1)


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("up")
    manifests = workdir / "manifests"
    manifests.mkdir()
    for name, text in MANIFESTS.items():
        (manifests / name).write_text(textwrap.dedent(text))
    cluster = Up(workdir)
    cluster.start()
    cluster.manifests = manifests  # type: ignore[attr-defined]
    yield cluster
    cluster.stop()


def pod_nodes(up: Up) -> dict[str, str]:
    """NAME -> NODE from ``kubectl get pods -o wide`` (its printed columns, not JSON)."""
    lines = up.kubectl("get", "pods", "-o", "wide").stdout.splitlines()
    header = lines[0]
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    node_at = header.index("NODE ")
    return {line.split()[0]: line[node_at:].split()[0] for line in lines[1:]}


def test_apply_a_directory_and_get_pods_wide_shows_each_pods_node(up):
    out = up.kubectl("apply", "-f", str(up.manifests)).stdout
    assert "node/node-a created" in out and "pod/huge created" in out
    nodes = until(lambda: (lambda n: n if n.get("small-1", "<none>") != "<none>" and n.get("small-2", "<none>") != "<none>" else None)(pod_nodes(up)),
                  20, "pods were not scheduled")
    assert nodes["small-1"] in ("node-a", "node-b") and nodes["small-2"] in ("node-a", "node-b")
    assert nodes["huge"] == "<none>"
    assert "node-a" in up.kubectl("get", "nodes").stdout


def test_describe_an_unschedulable_pod_shows_failed_scheduling(up):
    def described() -> str | None:
        text = up.kubectl("describe", "pod", "huge").stdout
        return text if "FailedScheduling" in text and re.search(r"PodScheduled\s+False", text) else None

    text = until(described, 20, "no FailedScheduling event or PodScheduled=False condition on huge")
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+0/2 nodes are available: 2 Insufficient cpu\.", text)


def test_get_events(up):
    out = up.kubectl("get", "events").stdout
    assert out.splitlines()[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert "Successfully assigned default/small-1 to node-" in out
    assert "pod/huge" in out and "FailedScheduling" in out


def test_get_watch_sees_a_binding(up):
    watcher = subprocess.Popen([KUBECTL, "--kubeconfig", str(up.kubeconfig), "get", "pods", "-w", "-o", "wide", "--field-selector",
                                "metadata.name=watched"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        up.kubectl("run", "watched", "--image=nginx", "--overrides",
                   '{"spec":{"containers":[{"name":"watched","image":"nginx","resources":{"requests":{"cpu":"100m"}}}]}}')
        deadline = time.monotonic() + 20
        assert watcher.stdout is not None
        while time.monotonic() < deadline:
            line = watcher.stdout.readline()
            if line.startswith("watched") and ("node-a" in line or "node-b" in line):
                break
        else:
            raise AssertionError("kubectl get -w never showed the pod on a node")
    finally:
        watcher.terminate()
        watcher.wait(5)


def test_create_deployment_and_scale_produce_and_remove_pods(up):
    up.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")

    def running(n: int) -> Callable[[], bool]:
        def check() -> bool:
            pods = up.json("get", "pods", "-l", "app=web")["items"]
            return len(pods) == n and all(p["status"].get("phase") == "Running" for p in pods)

        return check

    until(running(2), 20, "the deployment did not get 2 running pods")
    up.kubectl("scale", "deployment", "web", "--replicas=4")
    until(running(4), 20, "scaling up to 4 did not happen")
    up.kubectl("scale", "deployment", "web", "--replicas=1")
    until(running(1), 20, "scaling down to 1 did not remove pods")
    assert up.kubectl("get", "deployment", "web").stdout.split()[5:7] == ["web", "1/1"]


def test_delete_returns_once_the_pod_is_gone(up):
    started = time.monotonic()
    out = up.kubectl("delete", "pod", "small-2").stdout
    assert 'pod "small-2" deleted' in out
    assert time.monotonic() - started < 10
    assert up.kubectl("get", "pod", "small-2", check=False).returncode != 0


def test_apply_server_side(up):
    manifest = textwrap.dedent("""
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: settings, labels: {team: a}}
        data: {one: "1", two: "2"}
        """)
    assert "serverside-applied" in up.kubectl("apply", "--server-side", "-f", "-", stdin=manifest).stdout
    up.kubectl("apply", "--server-side", "-f", "-", stdin=manifest.replace('two: "2"', 'three: "3"'))
    cm = up.json("get", "configmap", "settings", "--show-managed-fields")
    assert cm["data"] == {"one": "1", "three": "3"}
    assert [(m["manager"], m["operation"]) for m in cm["metadata"]["managedFields"]] == [("kubectl", "Apply")]
    clash = up.kubectl("apply", "--server-side", "--field-manager", "other", "-f", "-", check=False,
                       stdin=manifest.replace('one: "1"', 'one: "uno"'))
    assert clash.returncode != 0 and 'conflict with "kubectl" using v1: .data.one' in clash.stderr


def test_create_secret_generic_stores_base64_data(up):
    assert "secret/token created" in up.kubectl("create", "secret", "generic", "token", "--from-literal=key=s3cret").stdout
    assert up.json("get", "secret", "token")["data"] == {"key": "czNjcmV0"}


def test_dry_run_server_accepts_deploy_manifests_and_creates_nothing(up):
    out = up.kubectl("apply", "--dry-run=server", "-f", "-", stdin=textwrap.dedent(DRY_RUN)).stdout
    assert "deployment.apps/kubesched created (server dry run)" in out
    assert "clusterrolebinding.rbac.authorization.k8s.io/kubesched created (server dry run)" in out
    assert up.kubectl("get", "deployment", "kubesched", "-n", "kube-system", check=False).returncode != 0


def test_python_client_lists_and_watches(up):
    from kubernetes import client, config, watch

    api = client.CoreV1Api(config.new_client_from_config(str(up.kubeconfig)))
    listed = api.list_namespaced_pod("default")
    names = {p.metadata.name for p in listed.items}
    assert {"small-1", "huge"} <= names
    stream = watch.Watch().stream(api.list_namespaced_pod, "default", resource_version=listed.metadata.resource_version,
                                  timeout_seconds=10)
    up.kubectl("run", "from-python-watch", "--image=nginx")
    for event in stream:
        if event["object"].metadata.name == "from-python-watch":
            break
    else:
        raise AssertionError("the python client's watch never saw the new pod")


# Explicit ids: pytest puts the test id in PYTEST_CURRENT_TEST, and an id holding the 3 MiB body
# makes every kubectl the test starts fail with E2BIG (one environment string may not exceed 128 KiB).
@pytest.mark.parametrize("path, body, code, reason", [
    pytest.param("/api/v1/namespaces/default/pods", b"{not json", 400, "BadRequest", id="malformed-json"),
    pytest.param("/api/v1/namespaces/default/widgets", b"{}", 404, "NotFound", id="unknown-resource"),
    pytest.param("/api/v1/namespaces/default/configmaps", b'{"metadata":{"name":"Not_Valid"}}', 422, "Invalid", id="invalid-name"),
    pytest.param("/api/v1/namespaces/default/configmaps", b'{"metadata":{"name":"big"},"data":{"x":"' + b"x" * MAX_BODY + b'"}}',
                 413, "RequestEntityTooLarge", id="over-the-body-limit"),
])
def test_bad_requests_get_status_errors_and_change_nothing(up, path, body, code, reason):
    before = up.json("get", "configmaps")["metadata"]["resourceVersion"]
    status, error = up.raw("POST", path, body)
    assert (status, error["kind"], error["reason"], error["code"]) == (code, "Status", reason, code)
    assert up.json("get", "configmaps")["metadata"]["resourceVersion"] == before


def test_restart_with_data_keeps_objects_and_versions_and_old_watches_relist(up):
    before = {p["metadata"]["name"]: (p["metadata"]["uid"], p["metadata"]["resourceVersion"]) for p in up.json("get", "pods")["items"]}
    old_rv = min(int(rv) for _, rv in before.values())
    up.stop()
    up.start()
    after = {p["metadata"]["name"]: (p["metadata"]["uid"], p["metadata"]["resourceVersion"]) for p in up.json("get", "pods")["items"]}
    assert after == before
    with up.urlopen(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={old_rv}&timeoutSeconds=2") as resp:
        first = json.loads(resp.readline())
    assert first["type"] == "ERROR" and first["object"]["code"] == 410
    up.kubectl("run", "after-restart", "--image=nginx")
    until(lambda: pod_nodes(up).get("after-restart", "<none>") != "<none>", 20, "the scheduler did not resume after the restart")


@pytest.mark.parametrize(
    ("validate", "returncode", "stream", "message"),
    [
        pytest.param("", 1, "stderr", 'strict decoding error: unknown field "spec.nodeSelecter"', id="strict by default"),
        pytest.param("warn", 0, "stderr", 'Warning: unknown field "spec.nodeSelecter"', id="warn"),
    ],
)
def test_kubectl_apply_validates_fields_on_the_server(up, validate, returncode, stream, message):
    manifest = textwrap.dedent(f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: misspelt-{validate or "default"}}}
        spec:
          containers: [{{name: c, image: nginx}}]
          nodeSelecter: {{zone: a}}
        """)
    flags = [f"--validate={validate}"] if validate else []
    result = up.kubectl("apply", *flags, "-f", "-", stdin=manifest, check=False)
    assert result.returncode == returncode and message in getattr(result, stream), result.stderr


def test_kubectl_apply_refuses_a_value_of_the_wrong_type(up):
    manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: typed}\nspec:\n  containers: [{name: c, image: nginx}]\n  tolerations: all\n"
    result = up.kubectl("apply", "-f", "-", stdin=manifest, check=False)
    assert result.returncode == 1 and "tolerations" in result.stderr, result.stderr
