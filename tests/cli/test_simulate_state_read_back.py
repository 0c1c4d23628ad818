"""``simulate -o yaml|json`` prints a state that ``simulate -f`` reads back as the same cluster:
bound pods stay on their nodes, objects keep their uids (so claimRefs and owner references still
match), and controllers do not create their pods twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kubesched.api.kinds import POD
from kubesched.apiserver.store import ObjectStore
from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"},
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "api"}},
             "template": {"metadata": {"labels": {"app": "api"}},
                          "spec": {"containers": [{"name": "api", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}]}}},
}


def run_to_doc(capsys, fmt: str, *files: str) -> dict:
    assert main(["simulate", *[a for f in files for a in ("-f", f)], "-o", fmt]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if fmt == "json" else yaml.safe_load(out)


def by_key(doc: dict, kind: str) -> dict[str, dict]:
    return {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in doc["items"] if o["kind"] == kind}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_the_printed_state_reads_back_as_the_same_cluster(fmt, tmp_path, capsys):
    extra = tmp_path / "deployment.yaml"
    extra.write_text(yaml.safe_dump(DEPLOYMENT))
    first = run_to_doc(capsys, fmt, str(ROOT / "examples" / "cluster"), str(extra))
    state = tmp_path / f"state.{fmt}"
    state.write_text(json.dumps(first) if fmt == "json" else yaml.safe_dump(first))
    second = run_to_doc(capsys, fmt, str(state))
    pods_before, pods_after = by_key(first, "Pod"), by_key(second, "Pod")
    assert pods_after.keys() == pods_before.keys() and len(pods_before) == 14  # 11 pods and the Deployment's 3
    for key, pod in pods_before.items():
        assert pods_after[key]["spec"].get("nodeName") == pod["spec"].get("nodeName"), key
        assert pods_after[key]["metadata"]["uid"] == pod["metadata"]["uid"], key
    pv, pvc = by_key(second, "PersistentVolume")["/local-pv-b1"], by_key(second, "PersistentVolumeClaim")["shop/postgres-data"]
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"] and pvc["status"]["phase"] == "Bound"
    assert {e["kind"] for e in first["events"]} == {"Event"} and "Event" not in {o["kind"] for o in first["items"]}


@pytest.mark.parametrize(("keep_uids", "kept"), [(True, True), (False, False)],
                         ids=["a simulation keeps a given uid", "the API server assigns its own, as kube-apiserver"])
def test_a_given_uid_is_kept_only_when_asked(keep_uids, kept):
    store = ObjectStore(seed=0, keep_uids=keep_uids)
    created = store.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", "uid": "given"},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    assert (created["metadata"]["uid"] == "given") is kept


GANG_GATES = ["--feature-gates", "GenericWorkload=true,GangScheduling=true"]


@pytest.mark.parametrize(("gates", "workload_refs"), [
    pytest.param(GANG_GATES, 6, id="with the gates on, Workloads are state and pods keep their workloadRef"),
    pytest.param([], 0, id="with the gates off, Workloads are kept aside and pods lost their workloadRef"),
])
def test_the_printed_state_keeps_workloads(gates, workload_refs, tmp_path, capsys):
    cluster = str(ROOT / "examples" / "gang-scheduling" / "cluster")
    assert main(["simulate", "-f", cluster, "-o", "yaml", *gates]) == 0
    state = yaml.safe_load(capsys.readouterr().out)
    assert sorted(by_key(state, "Workload")) == ["default/inference", "default/training"]
    assert sum("workloadRef" in pod["spec"] for pod in by_key(state, "Pod").values()) == workload_refs
    saved = tmp_path / "state.yaml"
    saved.write_text(yaml.safe_dump(state))
    assert main(["simulate", "-f", str(saved), "-o", "yaml", *gates]) == 0
    again = yaml.safe_load(capsys.readouterr().out)
    assert by_key(again, "Workload").keys() == by_key(state, "Workload").keys()
    assert {k: p["spec"].get("nodeName") for k, p in by_key(again, "Pod").items()} == \
        {k: p["spec"].get("nodeName") for k, p in by_key(state, "Pod").items()}
