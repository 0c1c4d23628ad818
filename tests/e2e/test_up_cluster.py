"""End to end: ``kubesched up -f examples/cluster`` as a process, seen through the real kubectl
with the kubeconfig it writes, is a complete cluster: Ready nodes with a version and Leases,
every pod ``simulate`` places Running on the same node, kubelet-only requests refused with a
clear message, and the scheduler's metrics on ``/metrics``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kubesched.api.manifests import load
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.simulate import simulate

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cluster"
NO_CONTAINERS = "the kubesched simulated cluster's kubelets run no containers"


def explicit_kubectl(version: str) -> str:
    assert KUBECTL is not None
    return str(Path(os.path.realpath(KUBECTL)).parent / f"kubectl.{version}")


def until(check: Callable[[], object], timeout: float, message: str) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(0.2)


class UpProcess:
    """``kubesched up`` on a free port (``--port 0``), reached only through its kubeconfig."""

    def __init__(self, workdir: Path, inputs: tuple[Path, ...] = (EXAMPLE,), flags: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig.yaml"
        self.log = workdir / "up.log"
        files = [arg for path in inputs for arg in ("-f", str(path))]
        cmd = [sys.executable, "-m", "kubesched.cli.main", "up", *files, "--seed", "0", "--port", "0",
               "--kubeconfig-out", str(self.kubeconfig), *flags]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        until(self._ready, 60, "kubesched up did not become ready")

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError("kubesched up exited:\n" + self.log.read_text())
        if not self.kubeconfig.exists():
            return False
        return self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def kubectl(self, *args: str, check: bool = True, binary: str | None = None) -> subprocess.CompletedProcess:
        assert KUBECTL is not None
        result = subprocess.run([binary or KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True,
                                text=True, timeout=30)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def json(self, *args: str) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    up = UpProcess(tmp_path_factory.mktemp("up-cluster"))
    yield up
    up.stop()


@pytest.fixture(scope="module")
def simulated() -> dict[tuple[str, str], str | None]:
    """(namespace, name) -> node, as ``kubesched simulate -f examples/cluster`` places them."""
    result = simulate(load([str(EXAMPLE)]), default_configuration(), seed=0)
    return {(p["metadata"]["namespace"], p["metadata"]["name"]): (p.get("spec") or {}).get("nodeName") for p in result.pods()}


def table(text: str) -> list[dict[str, str]]:
    """kubectl's printed table as rows keyed by column header (headers are two spaces apart; the
    cells printed here hold no spaces)."""
    lines = text.splitlines()
    names = re.split(r"\s{2,}", lines[0].strip())
    return [dict(zip(names, line.split(), strict=True)) for line in lines[1:]]


def test_get_nodes_shows_every_node_ready_with_its_version_and_the_cordoned_one_scheduling_disabled(cluster):
    rows = {r["NAME"]: r for r in table(cluster.kubectl("get", "nodes").stdout)}
    assert {name: r["STATUS"] for name, r in rows.items()} == {
        "gpu-b3": "Ready", "node-a1": "Ready", "node-a2": "Ready", "node-b1": "Ready", "node-b2": "Ready,SchedulingDisabled"}
    assert {r["VERSION"] for r in rows.values()} == {"v1.35.0"}


def test_get_pods_shows_every_pod_simulate_places_running_on_the_same_node(cluster, simulated):
    def settled() -> list[dict[str, str]] | None:
        rows = table(cluster.kubectl("get", "pods", "-A", "-o", "wide").stdout)
        placed = [r for r in rows if r["NODE"] != "<none>"]
        return rows if len(placed) == sum(1 for node in simulated.values() if node) and \
            all(r["STATUS"] == "Running" for r in placed) else None

    rows = until(settled, 30, "the pods simulate places did not all become Running")
    assert isinstance(rows, list)
    assert {(r["NAMESPACE"], r["NAME"]): None if r["NODE"] == "<none>" else r["NODE"] for r in rows} == simulated
    postgres = next(r for r in rows if r["NAME"] == "postgres-0")
    assert (postgres["READY"], postgres["STATUS"], postgres["RESTARTS"]) == ("1/1", "Running", "0")
    assert postgres["IP"] != "<none>"
    pending = [r["NAME"] for r in rows if r["NODE"] == "<none>"]
    assert pending == ["analytics"] and all(r["STATUS"] == "Pending" for r in rows if r["NAME"] in pending)


def test_postgres_claim_is_bound_to_the_local_volume(cluster):
    claim = cluster.json("get", "pvc", "postgres-data", "-n", "shop")
    assert (claim["status"]["phase"], claim["spec"]["volumeName"]) == ("Bound", "local-pv-b1")


def test_every_node_has_a_lease_that_is_renewed(cluster):
    nodes = {n["metadata"]["name"] for n in cluster.json("get", "nodes")["items"]}
    leases = {item["metadata"]["name"]: item for item in cluster.json("get", "leases", "-n", "kube-node-lease")["items"]}
    assert set(leases) == nodes
    assert {lease["spec"]["holderIdentity"] for lease in leases.values()} == nodes
    first = leases["node-a1"]["spec"]["renewTime"]
    until(lambda: cluster.json("get", "lease", "node-a1", "-n", "kube-node-lease")["spec"]["renewTime"] != first,
          30, "the node lease was not renewed")


@pytest.mark.parametrize("binary", [None, "1.27", "1.32"], ids=["dispatcher", "kubectl-1.27", "kubectl-1.32"])
@pytest.mark.parametrize("args, action", [
    pytest.param(("logs", "-n", "shop", "web-1"), "read the logs of", id="logs"),
    pytest.param(("exec", "-n", "shop", "web-1", "--", "true"), "exec into", id="exec"),
])
def test_kubelet_requests_get_a_bad_request_saying_no_containers_run(cluster, binary, args, action):
    result = cluster.kubectl(*args, check=False, binary=explicit_kubectl(binary) if binary else None)
    assert result.returncode != 0
    assert "BadRequest" in result.stderr or "Bad Request" in result.stderr or NO_CONTAINERS in result.stderr
    assert f'cannot {action} pod "web-1" in namespace "shop"' in result.stderr and NO_CONTAINERS in result.stderr


def test_logs_of_a_missing_pod_is_not_found(cluster):
    result = cluster.kubectl("logs", "-n", "shop", "no-such-pod", check=False)
    assert result.returncode != 0 and 'pods "no-such-pod" not found' in result.stderr


def test_get_raw_metrics_has_the_schedulers_and_the_api_servers_series(cluster):
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert {"scheduler_schedule_attempts_total", "scheduler_pending_pods", "apiserver_storage_objects"} <= families
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"}' in text


def test_sigterm_stops_up_while_the_scheduler_waits_for_an_informer_that_never_syncs(tmp_path):
    """Coscheduling's PodGroup informer lists ``v1alpha1``; the input's CRD of the same name serves
    another version only, so that list fails forever and the scheduler never syncs."""
    import yaml

    crd = yaml.safe_load((ROOT / "kubesched/contrib/coscheduling/crds/scheduling.x-k8s.io_podgroups.yaml").read_text())
    for version in crd["spec"]["versions"]:
        version["name"] = "v1beta9"
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    log = tmp_path / "up.log"
    cmd = [sys.executable, "-m", "kubesched.cli.main", "up", "-f", str(tmp_path / "crd.yaml"), "--port", "0",
           "--config", str(ROOT / "examples/coscheduling/config.yaml"), "--kubeconfig-out", str(tmp_path / "kubeconfig.yaml")]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        until(lambda: "list of podgroups failed" in log.read_text() or proc.poll() is not None, 60, "the informer never listed")
        assert proc.poll() is None, log.read_text()
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


NODES = """
apiVersion: v1
kind: Node
metadata: {name: NAME, labels: {kubernetes.io/hostname: NAME}}
status:
  allocatable: {cpu: "2", memory: 4Gi, pods: "110"}
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
"""


def gang(name: str, min_member: int, pods: int) -> str:
    """A PodGroup and ``pods`` pods of 1.5 CPU joining it by the pod-group label."""
    group = f"apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {name}}}\nspec: {{minMember: {min_member}}}\n"
    members = [f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}-{i}, labels: {{scheduling.x-k8s.io/pod-group: {name}}}}}\n"
               "spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]}\n"
               for i in range(pods)]
    return "---\n".join([group, *members])


def test_kubectl_applies_podgroups_to_up_and_coscheduling_binds_a_whole_group_or_none_of_it(tmp_path):
    """``up`` with scheduler-plugins' Coscheduling installs the PodGroup CRD; kubectl applies groups
    like any other object: a group that fits binds whole, a group that cannot reach minMember binds
    no pod and says why."""
    (tmp_path / "nodes.yaml").write_text("---\n".join(NODES.replace("NAME", f"node-{i}") for i in range(3)))
    up = UpProcess(tmp_path, inputs=(tmp_path / "nodes.yaml",),
                   flags=("--config", str(ROOT / "examples/coscheduling/config.yaml")))
    try:
        (tmp_path / "fits.yaml").write_text(gang("fits", 3, 3))
        up.kubectl("apply", "-f", str(tmp_path / "fits.yaml"))
        placed = until(lambda: _nodes_of(up, "fits") if all(_nodes_of(up, "fits").values()) else None, 60,
                       "the group that fits was not bound")
        assert sorted(placed.values()) == ["node-0", "node-1", "node-2"]  # type: ignore[union-attr]
        assert up.kubectl("get", "podgroups", "fits", "-o", "name").stdout.strip() == "podgroup.scheduling.x-k8s.io/fits"

        (tmp_path / "too-big.yaml").write_text(gang("too-big", 2, 2))
        up.kubectl("apply", "-f", str(tmp_path / "too-big.yaml"))
        reasons = until(lambda: _failed_scheduling(up, "too-big-0"), 60, "no FailedScheduling event for too-big-0")
        assert "PodGroup default/too-big gets rejected" in reasons, reasons  # type: ignore[operator]
        assert not any(_nodes_of(up, "too-big").values())
    finally:
        up.stop()


def _nodes_of(up: UpProcess, group: str) -> dict[str, str | None]:
    pods = up.json("get", "pods", "-l", f"scheduling.x-k8s.io/pod-group={group}")["items"]
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}


def _failed_scheduling(up: UpProcess, pod: str) -> str:
    events = up.json("get", "events", "--field-selector", f"involvedObject.name={pod},reason=FailedScheduling")["items"]
    return " ".join(e.get("message") or e.get("note") or "" for e in events)
