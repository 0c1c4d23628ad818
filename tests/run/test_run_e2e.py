"""``kubesched run`` against ``kubesched apiserver`` over HTTP, both as separate processes, driven with
kubectl: binding, unschedulable pods, node-add requeue, health endpoints, metrics, leader election
with failover, lost leases, API server restarts, and the deploy manifests."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.run.harness import (
    FAST_LEASE,
    KUBECTL,
    NODE,
    POD,
    APIServer,
    PodWatch,
    Scheduler,
    http_status,
    insecure_tls,
    scheduler_config,
    until,
)
from tests.scheduler.loopback_extender import LoopbackExtender, keep, serving

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

REPO = Path(__file__).resolve().parents[2]
LEASE_SECONDS = 3.0
RETRY_SECONDS = 0.5
#: Upstream kube-scheduler metrics kubesched exposes under the same names, as Prometheus shows them.
UPSTREAM_METRICS = (
    "scheduler_schedule_attempts_total", "scheduler_scheduling_attempt_duration_seconds", "scheduler_pending_pods",
    "scheduler_preemption_attempts_total", "scheduler_preemption_victims", "scheduler_framework_extension_point_duration_seconds",
    "scheduler_plugin_execution_duration_seconds", "scheduler_queue_incoming_pods_total",
    "scheduler_pod_scheduling_sli_duration_seconds", "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_pod_scheduling_attempts", "scheduler_cache_size", "leader_election_master_status",
)


def node(name: str, cpu: str) -> str:
    return NODE.format(name=name, cpu=cpu)


def pods(*names: str, cpu: str = "100m", scheduler: str = "kubesched") -> str:
    return "---".join(POD.format(name=n, cpu=cpu, scheduler=scheduler) for n in names)


def bound(api: APIServer, *names: str) -> dict[str, str] | None:
    placed = api.nodes_of_pods()
    return placed if all(placed.get(n) for n in names) else None


def events_for(api: APIServer, pod: str, reason: str) -> list[dict]:
    items = api.get("events.events.k8s.io", "-n", "default")["items"]
    return [e for e in items if (e.get("regarding") or {}).get("name") == pod and e.get("reason") == reason]


@pytest.fixture
def api(tmp_path):
    server = APIServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def processes():
    started: list[Scheduler] = []
    yield started
    for proc in started:
        proc.stop()


def test_a_scheduler_binds_kubectl_pods_reports_unschedulable_ones_and_retries_them_when_a_node_is_added(api, processes, tmp_path):
    """As ``system:kube-scheduler`` (only the bootstrap role's rights), with the secure port's
    authentication and authorization delegated to the API server with the same credential."""
    api.write_kubeconfig()
    own = api.write_kubeconfig("system:kube-scheduler", tmp_path / "scheduler.kubeconfig")
    sched = Scheduler(tmp_path, "sched", scheduler_config(tmp_path / "sched.yaml"), own, secure=True,
                      extra=["--authentication-kubeconfig", str(own), "--authorization-kubeconfig", str(own)])
    processes.append(sched)
    sched.start(wait_ready=False)  # before the API server exists: alive, not ready
    assert sched.status("/livez") == 200 and sched.status("/healthz") == 200
    assert sched.status("/readyz") == 500
    assert "[-]sched-handler-sync failed: reason withheld" in _error_body(sched, "/readyz?verbose")

    api.start()
    until(lambda: sched.status("/readyz") == 200, 20, lambda: f"/readyz never flipped after sync:\n{sched.output()}")
    assert sched.text("/readyz?verbose").endswith("[+]sched-handler-sync ok\nreadyz check passed\n")

    api.apply(node("node-a", "2"))
    api.apply(pods("small-1", "small-2", cpu="500m") + "---" + pods("huge", cpu="8") + "---"
              + pods("not-ours", scheduler="default-scheduler"))
    placed = until(lambda: bound(api, "small-1", "small-2"), 20, lambda: f"pods were not bound:\n{sched.output()}")
    assert placed["small-1"] == placed["small-2"] == "node-a"
    assert placed["huge"] == "" and placed["not-ours"] == ""

    def unschedulable() -> dict | None:
        conditions = api.get("pod", "huge").get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)

    condition = until(unschedulable, 20, "huge never got PodScheduled=False")
    assert condition["reason"] == "Unschedulable" and condition["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    failed = until(lambda: events_for(api, "huge", "FailedScheduling"), 10, "no FailedScheduling event for huge")
    assert failed[0]["type"] == "Warning" and failed[0]["reportingController"] == "kubesched"
    assert failed[0]["note"] == condition["message"]
    scheduled = until(lambda: events_for(api, "small-1", "Scheduled"), 10, "no Scheduled event for small-1")
    assert scheduled[0]["note"] == "Successfully assigned default/small-1 to node-a"

    api.apply(node("node-big", "16"))
    placed = until(lambda: bound(api, "huge"), 15, "huge was not retried on the new node")  # the flush is 5 minutes away
    assert placed["huge"] == "node-big" and placed["not-ours"] == ""

    metrics = sched.text("/metrics")
    missing = [name for name in UPSTREAM_METRICS if f"# TYPE {name} " not in metrics and name != "leader_election_master_status"]
    assert not missing, f"/metrics lacks {missing}"
    assert sched.metric("scheduler_schedule_attempts_total", result="scheduled", profile="kubesched") == 3
    assert sched.metric("scheduler_schedule_attempts_total", result="unschedulable", profile="kubesched") >= 1
    assert sched.metric("scheduler_pending_pods", queue="unschedulable") == 0
    assert sched.metric("scheduler_cache_size", type="nodes") == 2
    assert "leader_election_master_status" not in metrics  # no leader election configured
    config = sched.json("/configz")["componentconfig"]
    assert config["profiles"][0]["schedulerName"] == "kubesched" and config["leaderElection"]["leaderElect"] is False
    assert http_status(f"https://127.0.0.1:{sched.secure_port}/healthz", insecure_tls()) == 200
    assert secure_statuses(sched, api) == {"anonymous": 403, "wrong-token": 401, "nobody": 403, "prometheus": 200, "admin": 200}

    sched.signal(signal.SIGTERM)
    assert sched.wait(15) == 0


def test_two_replicas_elect_one_leader_and_the_other_takes_over_within_the_lease_after_sigkill(api, processes, tmp_path):
    api.start()
    config = scheduler_config(tmp_path / "sched.yaml", leader_elect=True)
    replicas = [Scheduler(tmp_path, name, config, api.kubeconfig) for name in ("a", "b")]
    processes.extend(replicas)
    for replica in replicas:
        replica.start()
    leader = until(lambda: _single_leader(replicas), 15, "no single leader was elected")
    standby = next(r for r in replicas if r is not leader)
    holder = api.lease("kubesched")["spec"]["holderIdentity"]
    assert holder and standby.status("/readyz") == 200  # a standby is ready too: its caches are synced
    watch = PodWatch(api)

    first = [f"p{i}" for i in range(6)]
    api.apply(node("node-a", "64"))
    api.apply(pods(*first))
    until(lambda: bound(api, *first), 20, lambda: f"pods were not bound:\n{leader.output()}")
    assert leader.metric("scheduler_schedule_attempts_total", result="scheduled", profile="kubesched") == 6
    assert standby.metric("scheduler_schedule_attempts_total", result="scheduled", profile="kubesched") == 0

    second = [f"q{i}" for i in range(6)]
    api.apply(pods(*second))
    assert leader.proc is not None
    leader.proc.kill()  # SIGKILL: no release, the standby must wait for the lease to run out
    killed = time.monotonic()
    until(standby.leading, LEASE_SECONDS + 5, "the standby never took over")
    took = time.monotonic() - killed
    # the standby measures the lease from the last renewal it observed, then retries every 0.5-1.1s
    assert took <= LEASE_SECONDS + RETRY_SECONDS * 2.2 + 1.0, f"takeover took {took:.1f}s"
    assert api.lease("kubesched")["spec"]["holderIdentity"] not in ("", holder)
    until(lambda: bound(api, *first, *second), 20, lambda: f"pods were not bound after failover:\n{standby.output()}")

    time.sleep(0.5)  # let the watch catch up
    moves = PodWatch.bindings(watch.stop())
    assert sorted(moves) == sorted(first + second)
    assert all(len(nodes) == 1 for nodes in moves.values()), moves  # bound once, never moved
    for name in first + second:  # at most one Scheduled event (the killed leader may not have sent its last ones)
        assert len(events_for(api, name, "Scheduled")) <= 1, name
        assert not [e for e in events_for(api, name, "FailedScheduling") if "already assigned" in e.get("note", "")], name
    transitions = [e for e in api.get("events", "-n", "kube-system")["items"] if e.get("reason") == "LeaderElection"]
    assert sum("became leader" in e["message"] for e in transitions) == 2

    standby.signal(signal.SIGTERM)  # graceful: the lease is released for an immediate successor
    assert standby.wait(15) == 0
    released = api.lease("kubesched")["spec"]
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1 and released["leaseTransitions"] == 1


def test_a_leader_whose_lease_is_taken_exits_with_status_1(api, processes, tmp_path):
    api.start()
    sched = Scheduler(tmp_path, "sched", scheduler_config(tmp_path / "sched.yaml", leader_elect=True), api.kubeconfig)
    processes.append(sched)
    sched.start()
    until(sched.leading, 10, "the only replica never led")
    api.kubectl("patch", "lease", "kubesched", "-n", "kube-system", "--type", "merge", "-p",
                '{"spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 60}}')
    assert sched.wait(float(FAST_LEASE["renewDeadline"].rstrip("s")) + 8) == 1
    assert "Leaderelection lost" in sched.output()


def test_run_calls_the_configurations_extenders_over_http(api, processes, tmp_path):
    """The extender keeps node-b only, with a reason for node-a: the pod lands on node-b and a pod
    it keeps nowhere reports the extender's reason."""
    extender = LoopbackExtender({"filter": keep("node-b", failed={"node-a": "node(s) are reserved for batch"})})
    with serving(extender) as ext:
        api.start()
        extra = f"extenders:\n- urlPrefix: {ext.url}\n  filterVerb: filter\n  nodeCacheCapable: true\n"
        sched = Scheduler(tmp_path, "sched", scheduler_config(tmp_path / "sched.yaml", extra=extra), api.kubeconfig)
        processes.append(sched)
        sched.start()
        api.apply(node("node-a", "4") + "---" + node("node-b", "1"))
        api.apply(pods("web", cpu="500m") + "---" + pods("big", cpu="2"))
        placed = until(lambda: bound(api, "web"), 20, lambda: f"web was not bound:\n{sched.output()}")
        assert placed["web"] == "node-b"
        failed = until(lambda: events_for(api, "big", "FailedScheduling"), 20, "no FailedScheduling event for big")
        assert failed[0]["note"].startswith("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) are reserved for batch.")
        # Node names only (nodeCacheCapable), and only the nodes the Filter plugins passed: big never fit node-b.
        asked = {args["Pod"]["metadata"]["name"]: sorted(args["NodeNames"]) for args in ext.args("filter")}
        assert asked == {"web": ["node-a", "node-b"], "big": ["node-a"]}


def test_the_scheduler_relists_after_an_api_server_restart_and_its_cache_matches_the_server(api, processes, tmp_path):
    api.start()
    sched = Scheduler(tmp_path, "sched", scheduler_config(tmp_path / "sched.yaml"), api.kubeconfig)
    processes.append(sched)
    sched.start()
    api.apply(node("node-a", "4"))
    api.apply(pods("a1", "a2", "a3"))
    until(lambda: bound(api, "a1", "a2", "a3"), 20, lambda: f"pods were not bound:\n{sched.output()}")

    api.stop()  # SIGTERM; the data file keeps every object and the resourceVersion counter
    assert sched.status("/livez") == 200
    api.start()
    api.kubectl("delete", "pod", "a1", "--wait=false")
    api.apply(node("node-b", "4"))
    api.apply(pods("b1", "b2", "b3", cpu="1500m"))
    placed = until(lambda: bound(api, "b1", "b2", "b3"), 40, lambda: f"pods were not bound after the restart:\n{sched.output()}")

    def consistent() -> dict | None:
        dump = sched.json("/debug/cache")
        server_pods = {f"default/{name}": node_name for name, node_name in api.nodes_of_pods().items()}
        cached = {f"{p['namespace']}/{p['name']}": p["nodeName"] for info in dump["nodes"].values() for p in info["pods"]}
        cached_nodes = sorted(name for name, info in dump["nodes"].items() if info["present"])
        matches = (cached == {k: v for k, v in server_pods.items() if v} and cached_nodes == ["node-a", "node-b"]
                   and not any(dump["comparer"].values()) and not dump["assumedPods"] and not dump["queue"]["pending"])
        return dump if matches else None

    dump = until(consistent, 20, lambda: f"the scheduler's cache never matched the API server:\n{sched.json('/debug/cache')}")
    assert "default/a1" not in str(dump["nodes"]) and placed["b1"]
    assert sum(info["relists"] for info in dump["informers"].values()) >= 1


def test_deploy_manifests_pass_a_server_side_dry_run_and_carry_a_valid_configuration(api):
    from kubesched.scheduler.config import load_text

    api.start()
    out = api.kubectl("apply", "--dry-run=server", "-f", str(REPO / "deploy")).stdout
    for kind in ("serviceaccount", "clusterrole.rbac.authorization.k8s.io", "clusterrolebinding.rbac.authorization.k8s.io",
                 "configmap", "deployment.apps"):
        assert f"{kind}/kubesched" in out and "(server dry run)" in out, out
    assert api.kubectl("get", "deployments", "-A").stdout.strip() in ("", "No resources found")
    import yaml

    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "kubesched.yaml").read_text()) if d]
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    cfg = load_text(configmap["data"]["config.yaml"])
    assert cfg.profiles[0].scheduler_name == "kubesched"
    assert cfg.leader_election.leader_elect and cfg.leader_election.resource_name == "kubesched"
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 2


def _single_leader(replicas: list[Scheduler]) -> Scheduler | None:
    leaders = [r for r in replicas if r.leading()]
    return leaders[0] if len(leaders) == 1 else None


def secure_statuses(sched: Scheduler, api: APIServer) -> dict[str, int]:
    """``GET /metrics`` on the secure port as each identity: its status (delegated authentication
    and authorization; ``prometheus`` is in ``system:monitoring``, the admin in ``system:masters``)."""
    tokens = {"anonymous": "", "wrong-token": "not-a-token", "nobody": api.USERS["nobody"],
              "prometheus": api.USERS["prometheus"], "admin": api.TOKEN}
    out = {}
    for who, token in tokens.items():
        request = urllib.request.Request(f"https://127.0.0.1:{sched.secure_port}/metrics",
                                         headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(request, timeout=5, context=insecure_tls()) as resp:
                out[who] = resp.status
        except urllib.error.HTTPError as e:
            out[who] = e.code
    return out


def _error_body(sched: Scheduler, path: str) -> str:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(sched.url + path, timeout=2)
    except urllib.error.HTTPError as e:
        return e.read().decode()
    return ""


def test_sigterm_stops_run_while_an_informer_it_may_not_list_keeps_it_from_syncing(api, processes, tmp_path):
    """As ``system:kube-scheduler``, whose bootstrap role grants nothing on PodGroups (no CRD
    serves them either), Coscheduling's informer never syncs; SIGTERM still ends the process."""
    api.start()
    kubeconfig = api.write_kubeconfig("system:kube-scheduler", tmp_path / "scheduler.kubeconfig")
    sched = Scheduler(tmp_path, "stuck", REPO / "examples" / "coscheduling" / "config.yaml", kubeconfig)
    processes.append(sched)
    sched.start(wait_ready=False)
    until(lambda: "list of podgroups failed" in sched.output(), 30, lambda: f"no failed list of podgroups:\n{sched.output()}")
    assert sched.status("/readyz") != 200
    sched.signal(signal.SIGTERM)
    assert sched.wait(15) == 0
