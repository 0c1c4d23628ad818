"""Every kubectl minor the machines have (1.27, 1.29, 1.32, called explicitly) against ``kubesched up``
with default validation: the bundled examples, every served kind as a single object, a
multi-document file, a ``kind: List`` and a directory, and the everyday verbs (create, replace,
apply, diff, apply --prune, get, describe, explain, edit, wait, rollout, events).

One ``kubesched up`` per client: pytest groups the module's tests by the client parameter."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kubesched.api.kinds import KINDS

from .test_kubectl import Up, until

ROOT = Path(__file__).resolve().parents[2]
EVERY_KIND = Path(__file__).with_name("every_kind.yaml")
_DISPATCHER = shutil.which("kubectl")
CLIENT_DIR = Path(_DISPATCHER).resolve().parent if _DISPATCHER else None
CLIENTS = ("1.27", "1.29", "1.32")

pytestmark = pytest.mark.skipif(CLIENT_DIR is None, reason="kubectl is not installed")


class Kubectl:
    """One kubectl minor bound to the kubeconfig ``kubesched up`` wrote."""

    def __init__(self, binary: Path, up: Up, workdir: Path) -> None:
        self.binary = binary
        self.up = up
        self.workdir = workdir
        self.examples_applied = False

    def __call__(self, *args: str, check: bool = True, stdin: str | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run([str(self.binary), "--kubeconfig", str(self.up.kubeconfig), *args], capture_output=True,
                                text=True, timeout=60, input=stdin, env={**os.environ, **(env or {})})
        if check and result.returncode != 0:
            raise AssertionError(f"{self.binary.name} {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "-o", "json").stdout)

    def apply_examples(self) -> None:
        """``kubectl apply -f examples/cluster/`` once per server (later calls find it done)."""
        if not self.examples_applied:
            self("apply", "-f", str(ROOT / "examples" / "cluster") + "/")
            self.examples_applied = True


@pytest.fixture(scope="module", params=CLIENTS, ids=[f"kubectl-{v}" for v in CLIENTS])
def kubectl(request, tmp_path_factory) -> Iterator[Kubectl]:
    assert CLIENT_DIR is not None
    binary = CLIENT_DIR / f"kubectl.{request.param}"
    assert binary.exists(), f"{binary} is missing: the e2e tests drive each kubectl minor explicitly"
    workdir = tmp_path_factory.mktemp(f"kubectl-{request.param}")
    up = Up(workdir, ["--feature-gates", "GenericWorkload=true"])  # every_kind.yaml holds an alpha Workload
    up.start()
    yield Kubectl(binary, up, workdir)
    up.stop()


def every_kind() -> list[dict]:
    return yaml.safe_load(EVERY_KIND.read_text())["items"]


def resource_ref(obj: dict) -> str:
    """``configmaps.v1./name``-free spelling kubectl prints: ``configmap/name``, ``deployment.apps/name``."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}{'.' + group if group else ''}/{obj['metadata']['name']}"


def test_the_every_kind_manifest_covers_every_served_kind():
    stored = {(k.api_version, k.kind) for k in KINDS if k.verbs != ("create",)}  # reviews are never stored
    assert {(o["apiVersion"], o["kind"]) for o in every_kind()} == stored


def manifest_refs(directory: Path) -> list[str]:
    """What ``kubectl apply -f <directory>`` names, in its order: files by name, ``List`` items in place."""
    refs = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            refs += [resource_ref(item) for item in (doc["items"] if doc["kind"] == "List" else [doc])]
    return refs


@pytest.mark.parametrize("example", ["cluster", "preemption"])
def test_apply_the_bundled_examples_directories(kubectl, example):
    directory = ROOT / "examples" / example
    first = kubectl("apply", "-f", f"{directory}/")
    assert first.stderr == ""
    assert first.stdout.splitlines() == [f"{ref} created" for ref in manifest_refs(directory)]
    # A second apply succeeds too (it creates again any pod that preemption evicted meanwhile).
    assert kubectl("apply", "-f", f"{directory}/").stderr == ""
    kubectl.examples_applied |= example == "cluster"


def test_create_replace_apply_diff_get_delete_every_kind_as_list_multi_document_and_directory(kubectl):
    objects = every_kind()
    refs = [resource_ref(o) for o in objects]
    created = kubectl("create", "--save-config", "-f", str(EVERY_KIND)).stdout
    assert created.splitlines() == [f"{ref} created" for ref in refs]
    replaced = kubectl("replace", "--save-config", "-f", str(EVERY_KIND)).stdout
    assert replaced.splitlines() == [f"{ref} replaced" for ref in refs]
    directory = kubectl.workdir / "every-kind"
    directory.mkdir()
    (directory / "0-namespace.yaml").write_text(yaml.safe_dump(objects[0]))
    (directory / "1-the-rest.yaml").write_text(yaml.safe_dump_all(objects[1:]))
    applied = kubectl("apply", "-f", str(directory))
    assert applied.stderr == "" and len(applied.stdout.splitlines()) == len(objects)
    assert kubectl("diff", "-f", str(directory)).stdout == ""
    listed = kubectl.json("get", "-f", str(EVERY_KIND))
    assert [(o["kind"], o["metadata"]["name"]) for o in listed["items"]] == [(o["kind"], o["metadata"]["name"]) for o in objects]
    kubectl("delete", "--ignore-not-found", "--wait=false", "-f", str(EVERY_KIND))
    gone = kubectl("get", "--ignore-not-found", "-f", str(EVERY_KIND))
    assert gone.stdout == ""


def test_diff_shows_a_change_and_exits_1(kubectl):
    manifest = textwrap.dedent("""
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: diffed, namespace: default}
        data: {colour: blue}
        """)
    kubectl("apply", "-f", "-", stdin=manifest)
    changed = kubectl("diff", "-f", "-", stdin=manifest.replace("blue", "green"), check=False)
    assert changed.returncode == 1
    assert re.search(r"^-\s+colour: blue$", changed.stdout, re.M) and re.search(r"^\+\s+colour: green$", changed.stdout, re.M)


def test_apply_prune_deletes_what_left_the_manifests(kubectl):
    both = textwrap.dedent("""
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: kept, namespace: default, labels: {set: pruned}}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: dropped, namespace: default, labels: {set: pruned}}
        """)
    prune = ("apply", "--prune", "-l", "set=pruned", "--prune-allowlist=core/v1/ConfigMap", "-f", "-")
    kubectl(*prune, stdin=both)
    out = kubectl(*prune, stdin=both.split("---")[0]).stdout
    assert "configmap/dropped pruned" in out
    assert [cm["metadata"]["name"] for cm in kubectl.json("get", "configmaps", "-l", "set=pruned")["items"]] == ["kept"]


def test_default_validation_refuses_a_misspelt_field_through_the_server(kubectl):
    """kubectl's default validation finds ``fieldValidation`` on the kind's PATCH in the OpenAPI
    documents and hands a misspelt field to the server with ``fieldValidation=Strict``, which
    refuses it with kube-apiserver's strict-decoding message; nothing is stored."""
    misspelt = textwrap.dedent("""
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: misspelt, namespace: default}
        dataa: {colour: blue}
        """)
    result = kubectl("apply", "-v=6", "-f", "-", stdin=misspelt, check=False)
    requests = [line for line in result.stderr.splitlines() if "/namespaces/default/configmaps" in line and "POST" in line]
    assert requests and all("fieldValidation=Strict" in line for line in requests)
    assert "could not find the requested resource" not in result.stderr
    assert result.returncode != 0
    assert 'strict decoding error: unknown field "dataa"' in result.stderr
    assert kubectl("get", "configmap", "misspelt", "-n", "default", check=False).returncode != 0


def test_get_and_describe(kubectl):
    kubectl.apply_examples()
    header = kubectl("get", "pods", "-n", "shop", "-o", "wide").stdout.splitlines()[0].split()
    assert header[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert "node-a1" in kubectl("get", "nodes").stdout

    def described() -> str | None:
        text = kubectl("describe", "pod", "analytics", "-n", "shop").stdout
        return text if "FailedScheduling" in text else None

    text = until(described, 20, "describe never showed analytics' FailedScheduling event")
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+0/\d+ nodes are available:", text)
    assert re.search(r"^Namespace:\s+shop$", text, re.M)


@pytest.mark.parametrize(("args", "expected"), [
    (("pod.spec.containers",), [r"^KIND:\s+Pod$", r"^FIELD:\s+containers <\[\]Container>$", r"^\s+resources\s+<ResourceRequirements>$"]),
    (("deployment.spec.strategy.rollingUpdate",), [r"^GROUP:\s+apps$", r"^\s+maxSurge\s+<IntOrString>$"]),
    (("nodes",), [r"^KIND:\s+Node$", r"^\s+spec\s+<NodeSpec>$", r"^\s+status\s+<NodeStatus>$"]),
    (("pod.spec.containers", "--output=plaintext-openapiv2"), [r"^KIND:\s+Pod$", r"^RESOURCE:\s+containers <\[\]Object>$",
                                                               r"^\s+resources\s+<Object>$"]),
], ids=["v3-nested-field", "v3-group-and-int-or-string", "v3-kind", "v2-from-the-protobuf-document"])
def test_explain_reads_the_real_schemas(kubectl, args, expected):
    text = kubectl("explain", *args).stdout
    for pattern in expected:
        assert re.search(pattern, text, re.M), f"{pattern!r} not in:\n{text}"


def test_edit_with_a_non_interactive_editor(kubectl):
    kubectl("create", "configmap", "edited", "--from-literal=colour=blue")
    editor = kubectl.workdir / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/colour: blue/colour: green/' \"$1\"\n")
    editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
    out = kubectl("edit", "configmap", "edited", env={"KUBE_EDITOR": str(editor), "EDITOR": str(editor)}).stdout
    assert "configmap/edited edited" in out
    assert kubectl.json("get", "configmap", "edited")["data"] == {"colour": "green"}


def test_wait_and_rollout_of_a_deployment(kubectl):
    kubectl("create", "deployment", "rolled", "--image=nginx:1", "--replicas=2")
    assert "successfully rolled out" in kubectl("rollout", "status", "deployment/rolled", "--timeout=30s").stdout
    assert "condition met" in kubectl("wait", "--for=condition=Available", "deployment/rolled", "--timeout=30s").stdout
    kubectl("wait", "--for=condition=Ready", "pod", "-l", "app=rolled", "--timeout=30s")
    kubectl("set", "image", "deployment/rolled", "nginx=nginx:2")
    kubectl("rollout", "status", "deployment/rolled", "--timeout=30s")
    history = kubectl("rollout", "history", "deployment/rolled").stdout
    assert re.search(r"^1\s+<none>$", history, re.M) and re.search(r"^2\s+<none>$", history, re.M)
    assert "rolled back" in kubectl("rollout", "undo", "deployment/rolled").stdout
    kubectl("rollout", "status", "deployment/rolled", "--timeout=30s")
    image = lambda: kubectl.json("get", "deployment", "rolled")["spec"]["template"]["spec"]["containers"][0]["image"]  # noqa: E731
    assert image() == "nginx:1"
    assert "restarted" in kubectl("rollout", "restart", "deployment/rolled").stdout
    kubectl("rollout", "status", "deployment/rolled", "--timeout=30s")
    annotations = kubectl.json("get", "deployment", "rolled")["spec"]["template"]["metadata"]["annotations"]
    assert "kubectl.kubernetes.io/restartedAt" in annotations


def test_events_for_a_pending_pod(kubectl):
    kubectl.apply_examples()

    def failed() -> str | None:
        text = kubectl("events", "-n", "shop", "--for", "pod/analytics").stdout
        return text if "FailedScheduling" in text else None

    text = until(failed, 20, "kubectl events never showed analytics' FailedScheduling")
    assert text.splitlines()[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert re.search(r"Warning\s+FailedScheduling\s+Pod/analytics\s+0/\d+ nodes are available", text)


def test_a_crd_then_its_objects_with_apply_get_explain_patch_and_delete(kubectl):
    from tests.apiserver.test_crd import PODGROUP_CRD, podgroup

    crd, good, bad = (kubectl.workdir / name for name in ("crd.yaml", "pg.yaml", "bad-pg.yaml"))
    crd.write_text(yaml.safe_dump(PODGROUP_CRD))
    good.write_text(yaml.safe_dump(podgroup("pg1")))
    bad.write_text(yaml.safe_dump(podgroup("pg2", minMember=0, colour="blue")))
    assert kubectl("apply", "-f", str(crd)).stdout == "customresourcedefinition.apiextensions.k8s.io/podgroups.scheduling.x-k8s.io created\n"
    kubectl("wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=20s")
    assert kubectl("apply", "-f", str(good)).stdout == "podgroup.scheduling.x-k8s.io/pg1 created\n"
    assert kubectl("apply", "-f", str(good)).stdout == "podgroup.scheduling.x-k8s.io/pg1 unchanged\n"
    good.write_text(yaml.safe_dump(podgroup("pg1", minMember=4)))
    assert kubectl("diff", "-f", str(good), check=False).returncode == 1  # a JSON merge patch, dry-run
    assert kubectl("apply", "-f", str(good)).stdout == "podgroup.scheduling.x-k8s.io/pg1 configured\n"
    table = kubectl("get", "pg").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "MINMEMBER", "AGE"]
    start = {column: table[0].index(column) for column in table[0].split()}
    assert (table[1][:start["PHASE"]].strip(), table[1][start["MINMEMBER"]:start["AGE"]].strip()) == ("pg1", "4")
    assert "minMember\t<integer>" in kubectl("explain", "podgroup.spec").stdout
    refused = kubectl("apply", "-f", str(bad), check=False)
    assert refused.returncode == 1 and 'unknown field "spec.colour"' in refused.stderr
    refused = kubectl("apply", "--validate=false", "-f", str(bad), check=False)
    assert "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1" in refused.stderr
    kubectl("patch", "pg", "pg1", "--type=merge", "-p", '{"spec":{"minMember":3}}')
    assert kubectl.json("get", "podgroup", "pg1")["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 60}
    kubectl("delete", "crd", "podgroups.scheduling.x-k8s.io")
    assert kubectl("get", "podgroups.scheduling.x-k8s.io", check=False).returncode == 1


def test_kubectl_scale_of_a_crd_with_the_scale_subresource(kubectl):
    from tests.apiserver.test_crd import GROUP, scaled_crd

    crd, pool = kubectl.workdir / "scaled-crd.yaml", kubectl.workdir / "pool.yaml"
    crd.write_text(yaml.safe_dump(scaled_crd()))
    pool.write_text(yaml.safe_dump({"apiVersion": f"{GROUP}/v1alpha1", "kind": "WorkerPool", "metadata": {"name": "gpu"},
                                    "spec": {"replicas": 1}}))
    kubectl("apply", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", f"crd/workerpools.{GROUP}", "--timeout=20s")
    kubectl("apply", "-f", str(pool))
    assert kubectl("scale", "wp", "gpu", "--replicas=3").stdout == f"workerpool.{GROUP}/gpu scaled\n"
    assert kubectl.json("get", "workerpool", "gpu")["spec"]["replicas"] == 3
    kubectl("delete", "crd", f"workerpools.{GROUP}")
