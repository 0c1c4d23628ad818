"""``kubesched up``'s security as real clients see it: the kubeconfig it writes works unchanged,
``kubectl auth can-i``/``whoami`` answer with each kubectl minor, a user limited by a Role gets
kube-apiserver's Forbidden, a client without credentials is Unauthorized, and the embedded
scheduler binds pods as ``system:kube-scheduler``."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_kubectl import KUBECTL, Up, until

CLIENTS = ("kubectl.1.27", "kubectl.1.29", "kubectl.1.32")
CLIENT_DIR = Path(os.path.realpath(KUBECTL)).parent if KUBECTL else Path()
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """``kubesched up`` with a token file naming ``alice``, who may only get pods in ``default``."""
    workdir = tmp_path_factory.mktemp("secured")
    tokens = workdir / "tokens.csv"
    tokens.write_text("alice-token,alice,1001\n")
    cluster = Up(workdir, ["--token-auth-file", str(tokens)])
    cluster.start()
    cluster.kubectl("create", "role", "pod-reader", "--verb=get", "--resource=pods")
    cluster.kubectl("create", "rolebinding", "alice-reads-pods", "--role=pod-reader", "--user=alice")
    yield cluster
    cluster.stop()


def kubeconfig_as(up: Up, name: str, token: str | None) -> Path:
    """A copy of the kubeconfig ``up`` wrote, with ``token`` (None: no credentials) instead of the admin's."""
    conf = yaml.safe_load(up.kubeconfig.read_text())
    conf["users"][0]["user"] = {"token": token} if token else {}
    path = up.workdir / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(conf))
    return path


def without_credentials(up: Up, path: str) -> tuple[int, str]:
    """Status and Status reason of a request with the kubeconfig's CA but no credentials (kubectl
    would prompt for a password on the 401)."""
    cluster = yaml.safe_load(up.kubeconfig.read_text())["clusters"][0]["cluster"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    try:
        with urllib.request.urlopen(cluster["server"] + path, timeout=10, context=context) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["reason"]


def kubectl(client: str, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLIENT_DIR / client), "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize("client", CLIENTS)
def test_auth_can_i_answers_for_the_admin_and_a_limited_user(secured, client):
    alice = kubeconfig_as(secured, "alice", "alice-token")
    asked = {
        ("admin", "create", "pods"): kubectl(client, secured.kubeconfig, "auth", "can-i", "create", "pods"),
        ("admin", "delete", "nodes"): kubectl(client, secured.kubeconfig, "auth", "can-i", "delete", "nodes"),
        ("alice", "get", "pods"): kubectl(client, alice, "auth", "can-i", "get", "pods"),
        ("alice", "list", "pods"): kubectl(client, alice, "auth", "can-i", "list", "pods"),
        ("alice", "get", "secrets"): kubectl(client, alice, "auth", "can-i", "get", "secrets"),
    }
    answers = {key: (result.stdout.strip(), result.returncode) for key, result in asked.items()}
    assert answers == {("admin", "create", "pods"): ("yes", 0), ("admin", "delete", "nodes"): ("yes", 0),
                       ("alice", "get", "pods"): ("yes", 0), ("alice", "list", "pods"): ("no", 1),
                       ("alice", "get", "secrets"): ("no", 1)}


def test_can_i_list_shows_a_limited_users_rules(secured):
    out = kubectl("kubectl.1.29", kubeconfig_as(secured, "alice", "alice-token"), "auth", "can-i", "--list")
    assert out.returncode == 0, out.stderr
    rows = {(line.split()[0], line.split()[-1]) for line in out.stdout.splitlines()[1:]}
    assert ("pods", "[get]") in rows and ("selfsubjectaccessreviews.authorization.k8s.io", "[create]") in rows
    assert not any(resource.startswith("secrets") for resource, _ in rows)


def test_whoami_names_the_user_and_its_groups(secured):
    out = kubectl("kubectl.1.32", kubeconfig_as(secured, "alice", "alice-token"), "auth", "whoami", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["status"]["userInfo"] == {"username": "alice", "uid": "1001", "groups": ["system:authenticated"]}


def test_a_limited_user_is_forbidden_and_a_client_without_credentials_unauthorized(secured):
    alice = kubeconfig_as(secured, "alice", "alice-token")
    listed = kubectl("kubectl.1.32", alice, "get", "pods")
    assert listed.returncode == 1
    assert ('Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
            'in the namespace "default"') in listed.stderr
    created = kubectl("kubectl.1.32", alice, "create", "configmap", "x")
    assert 'cannot create resource "configmaps" in API group "" in the namespace "default"' in created.stderr
    assert without_credentials(secured, "/api/v1/namespaces/default/pods") == (401, "Unauthorized")
    assert without_credentials(secured, "/readyz") == (200, "")
    wrong = kubectl("kubectl.1.32", kubeconfig_as(secured, "wrong", "not-a-token"), "get", "secrets")
    assert wrong.returncode == 1 and "Unauthorized" in wrong.stderr


def test_the_embedded_scheduler_binds_pods_as_system_kube_scheduler(secured):
    secured.kubectl("apply", "-f", "-", stdin="""
apiVersion: v1
kind: Node
metadata: {name: node-1}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
""")
    secured.kubectl("run", "bound-by-the-scheduler", "--image=nginx")
    until(lambda: secured.json("get", "pod", "bound-by-the-scheduler")["spec"].get("nodeName") == "node-1", 20,
          "the scheduler did not bind the pod")
    events = secured.json("get", "events", "--field-selector", "involvedObject.name=bound-by-the-scheduler")["items"]
    assert any(e["reason"] == "Scheduled" for e in events)
    as_scheduler = ("--as", "system:kube-scheduler")
    asked = ("create pods --subresource=binding", "get secrets", "update leases/kube-scheduler", "update leases/other")
    rights = {question: kubectl("kubectl.1.32", secured.kubeconfig, "auth", "can-i", *question.split(), *as_scheduler).stdout.strip()
              for question in asked}
    assert rights == {"create pods --subresource=binding": "yes", "get secrets": "no", "update leases/kube-scheduler": "yes",
                      "update leases/other": "no"}
