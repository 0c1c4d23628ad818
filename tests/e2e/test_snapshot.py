"""``kubesched snapshot`` of a ``kubesched up`` cluster, read back by ``simulate``: every bound pod
stays on its node, objects keep their uids, and no Secret is written."""

from __future__ import annotations

import json

import pytest
import yaml

from kubesched.cli.main import main
from tests.e2e.test_up_cluster import KUBECTL, UpProcess, until

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
BOUND_IN_EXAMPLE = 10


@pytest.fixture(scope="module")
def settled_cluster(tmp_path_factory):
    up = UpProcess(tmp_path_factory.mktemp("snapshot-cluster"))
    try:
        up.kubectl("create", "secret", "generic", "db-password", "-n", "shop", "--from-literal=password=x")

        def bound() -> bool:
            pods = up.json("get", "pods", "-A")["items"]
            return sum(1 for p in pods if p["spec"].get("nodeName") and p["status"].get("phase") == "Running") == BOUND_IN_EXAMPLE

        until(bound, 30, "the example's pods did not all become Running")
        yield up
    finally:
        up.stop()


def test_simulate_reads_the_snapshot_back_with_every_bound_pod_on_its_node(settled_cluster, tmp_path, capsys):
    live = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in settled_cluster.json("get", "pods", "-A")["items"]}
    out = tmp_path / "snapshot"
    assert main(["snapshot", "--kubeconfig", str(settled_cluster.kubeconfig), "-o", str(out)]) == 0
    assert capsys.readouterr().out.startswith("Wrote ")
    written = [yaml.safe_load(f.read_text()) for f in sorted(out.glob("*.yaml"))]
    kinds = {item["kind"] for doc in written for item in doc["items"]}
    assert "Secret" not in kinds and {"Node", "Pod", "PersistentVolume", "PersistentVolumeClaim", "StorageClass"} <= kinds

    assert main(["simulate", "-f", str(out), "-o", "json"]) == 0
    simulated = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                 for p in json.loads(capsys.readouterr().out)["items"] if p["kind"] == "Pod"}
    assert simulated.keys() == live.keys()
    for key, pod in live.items():
        assert simulated[key]["spec"].get("nodeName") == pod["spec"].get("nodeName"), key
        assert simulated[key]["metadata"]["uid"] == pod["metadata"]["uid"], key


def test_snapshot_of_an_unreachable_kubeconfig_is_a_clear_error(tmp_path, capsys):
    assert main(["snapshot", "--kubeconfig", str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith(f"error: --kubeconfig {tmp_path / 'missing.yaml'}: ")
