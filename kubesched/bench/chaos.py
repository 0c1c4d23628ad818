"""The fault-injection run behind ``kubesched chaos``. ``kubesched apiserver`` and
``kubesched run`` replicas as processes on loopback, each replica behind a fault-injecting proxy
(``faultproxy``); pods are created while faults are injected, then, once the cluster is quiet,
the run checks what must hold and prints the figures.

Injected, in a cycle, one every ``--fault-interval`` seconds while pods are created: dropped and
stalled watches, bursts of ``410 Gone`` and "Too large resource version" answers, an API server
``kill -9`` and restart with its ``--data``, a leader ``kill -9``, a leader SIGSTOP past its lease
and SIGCONT, a flood of invalid objects; all along, bindings answered ``409`` or ``500``, held past
the client's timeout after being applied, or slowed down. Before that, an API server without
``--data`` is killed and restarted, which starts another cluster under the same address.

Checked after quiescence: every schedulable pod created is bound, exactly once (the server
accepted one binding for it), to a node of the current cluster; no node holds more than its
allocatable; no binding accepted from a replica after another replica acquired the Lease; the
leader's cache equals the API server's state; every pod left unbound has a FailedScheduling event;
and the failover after each leader kill: from the ``kill -9`` to the first binding the API server
accepted from the replica that took over (and, within it, to that replica's acquisition of the
Lease). Exit status 0 when every check holds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from kubesched.api.kinds import Kind, kind_for, kind_named
from kubesched.api.quantity import milli_value
from kubesched.bench.faultproxy import FaultProxy, Faults, Ledger, Write
from kubesched.bench.wholeprocess import free_port
from kubesched.client.kube import KubeClient, load_config, wait_ready
from kubesched.utils import certs

log = logging.getLogger(__name__)

POD = cast(Kind, kind_named("Pod"))
NODE = cast(Kind, kind_named("Node"))
EVENTS_V1 = cast(Kind, kind_for("events.k8s.io/v1", "Event"))
NAMESPACE = "default"
SCHEDULER_NAME = "kubesched"
LEASE_NAME = "kubesched-chaos"
#: Pods per node the run plans for (nodes allow 110).
PODS_PER_NODE = 80
NODE_CPU, NODE_MEMORY = "32", "64Gi"
LEADER_KILL = "leader kill -9"


@dataclass(frozen=True)
class Failover:
    """One leader ``kill -9`` and the takeover after it, on the proxies' monotonic clock."""

    killed: float
    #: When the new holder's acquisition of the Lease was answered (None: no takeover seen).
    acquired: float | None
    #: When the first binding from the new holder was answered (None: none seen).
    first_binding: float | None

    def seconds(self, until: float | None) -> float | None:
        return None if until is None else round(until - self.killed, 2)


@dataclass
class ChaosOptions:
    pods: int = 10_000
    replicas: int = 2
    workdir: Path = field(default_factory=lambda: Path("chaos-run"))
    seed: int = 1
    lease_duration: float = 3.0
    renew_deadline: float = 2.0
    retry_period: float = 0.5
    fault_interval: float = 5.0
    #: Times the whole fault cycle is run while pods are created.
    rounds: int = 1
    #: Every this many pods, one asks for more CPU than any node has.
    unschedulable_every: int = 100
    invalid_objects: int = 200
    creation_concurrency: int = 32
    quiesce_timeout: float = 600.0


# --- processes ------------------------------------------------------------------------------------------
class Proc:
    """A ``kubesched`` subprocess with its output appended to ``<workdir>/<name>.log``."""

    def __init__(self, workdir: Path, name: str, args: list[str]) -> None:
        self.log = workdir / f"{name}.log"
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        with open(self.log, "a") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            env.pop("KUBECONFIG", None)
            self.proc = subprocess.Popen([sys.executable, "-m", "kubesched.cli.main", *self.args], stdout=out,
                                         stderr=subprocess.STDOUT, env=env)
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.proc is not None and self.alive():
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or not self.alive():
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


def scheduler_config(opts: ChaosOptions) -> str:
    return textwrap.dedent(f"""\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        enableProfiling: true
        clientConnection: {{qps: 1000, burst: 2000}}
        leaderElection:
          leaderElect: true
          resourceName: {LEASE_NAME}
          resourceNamespace: kube-system
          leaseDuration: {opts.lease_duration}s
          renewDeadline: {opts.renew_deadline}s
          retryPeriod: {int(opts.retry_period * 1000)}ms
        profiles:
        - schedulerName: {SCHEDULER_NAME}
        """)


class Replica:
    """One ``kubesched run`` slot: its proxy, kubeconfig and process (restarted like a Deployment would)."""

    def __init__(self, name: str, proxy: FaultProxy, workdir: Path, config: Path, kubeconfig: Path) -> None:
        self.name = name
        self.proxy = proxy
        self.port = free_port()
        self.proc = Proc(workdir, name, ["run", "--config", str(config), "--kubeconfig", str(kubeconfig),
                                         "--bind-address", "127.0.0.1", "--port", str(self.port), "--secure-port", "0"])
        #: Set while the run holds the process down on purpose (killed or stopped).
        self.held = False
        self.exit_codes: list[int] = []

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as resp:
            return json.loads(resp.read())


#: The run's admin token: the API server reads it from a token file at every start, so the
#: replicas' credentials survive a restart without ``--data``, as with kube-apiserver's flags.
ADMIN_TOKEN = "chaos-admin-token"


def server_credentials(workdir: Path) -> list[str]:
    """The API server's serving pair and token file (made once per run), as its flags."""
    cert, key, tokens = workdir / "apiserver.crt", workdir / "apiserver.key", workdir / "tokens.csv"
    if not cert.exists():
        cert_pem, key_pem = certs.generate("localhost")
        cert.write_bytes(cert_pem)
        key.write_bytes(key_pem)
        tokens.write_text(f'{ADMIN_TOKEN},chaos-admin,chaos-admin,"system:masters"\n')
    return ["--tls-cert-file", str(cert), "--tls-private-key-file", str(key), "--token-auth-file", str(tokens)]


def with_admin_token(kubeconfig: Path) -> None:
    """The kubeconfig the API server wrote, authenticating with the run's own admin token."""
    doc = yaml.safe_load(kubeconfig.read_text())
    for user in doc.get("users") or []:
        user.setdefault("user", {})["token"] = ADMIN_TOKEN
    kubeconfig.write_text(yaml.safe_dump(doc))


def proxied_kubeconfig(source: Path, target: Path, server: str) -> Path:
    """The API server's kubeconfig with its server replaced by a proxy (credentials kept)."""
    doc = yaml.safe_load(source.read_text())
    for cluster in doc.get("clusters") or []:
        entry = cluster.setdefault("cluster", {})
        entry["server"] = server
        for key in ("certificate-authority", "certificate-authority-data"):
            entry.pop(key, None)
    target.write_text(yaml.safe_dump(doc))
    return target


def clear_workdir(workdir: Path) -> None:
    """The working directory without what an earlier run left: its database (a durable API server
    would start from the earlier run's pods, all bound already, and the checks would prove
    nothing), the database's credentials, kubeconfigs and logs. Other files are left alone."""
    workdir.mkdir(parents=True, exist_ok=True)
    for pattern in ("state.sqlite*", "*.log", "*.kubeconfig", "kubeconfig.yaml"):
        for path in workdir.glob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


# --- objects --------------------------------------------------------------------------------------------
def node(name: str) -> dict:
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": dict(capacity), "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulerName": SCHEDULER_NAME, "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}}


def invalid_objects(count: int) -> list[dict]:
    """Objects the API server must refuse (bad names, a missing image, negative requests)."""
    shapes: list[Callable[[int], dict]] = [
        lambda i: {**pod(f"Bad_Name_{i}", "100m")},
        lambda i: {**pod(f"no-image-{i}", "100m"), "spec": {"schedulerName": SCHEDULER_NAME, "containers": [{"name": "c"}]}},
        lambda i: pod(f"negative-{i}", "-1"),
        lambda i: {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"bad node {i}"}},
    ]
    return [shapes[i % len(shapes)](i) for i in range(count)]


# --- the run --------------------------------------------------------------------------------------------
class ChaosRun:
    def __init__(self, opts: ChaosOptions) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.faults = Faults()
        self.ledger = Ledger()
        clear_workdir(opts.workdir)
        self.api_port = free_port()
        self.kubeconfig = opts.workdir / "kubeconfig.yaml"
        self.data = opts.workdir / "state.sqlite"
        self.api = Proc(opts.workdir, "apiserver", [])
        self.client: KubeClient | None = None
        self.replicas: list[Replica] = []
        self.created: list[str] = []
        self.unschedulable: set[str] = set()
        self.rejected = 0
        self.injected: Counter[str] = Counter()
        self.failovers: list[Failover] = []
        #: Pods of the current wave kept back for the leader kill, created right after it so
        #: that pods wait for the new leader whatever the size of the wave.
        self.held_back: list[str] = []
        self.lost_cluster_nodes: set[str] = set()
        self.started = time.monotonic()

    # --- API server -------------------------------------------------------------------------------
    async def start_api(self, durable: bool) -> None:
        self.kubeconfig.unlink(missing_ok=True)
        args = ["apiserver", "--port", str(self.api_port), "--kubeconfig-out", str(self.kubeconfig),
                *server_credentials(self.opts.workdir)]
        if durable:
            args += ["--data", str(self.data)]
        self.api.args = args
        self.api.start()
        deadline = time.monotonic() + 60
        while not self.kubeconfig.exists():
            if time.monotonic() > deadline or not self.api.alive():
                raise RuntimeError(f"kubesched apiserver did not start; see {self.api.log}")
            await asyncio.sleep(0.1)
        with_admin_token(self.kubeconfig)
        if self.client is None:
            self.client = KubeClient(load_config(self.kubeconfig), timeout=60)
        await wait_ready(self.client, 60)

    async def restart_api(self, durable: bool, fresh: bool = False) -> None:
        """Kill -9 the API server and start it again; ``fresh``: on a new database, where
        resourceVersions start over, so Lease writes from then on belong to a new epoch (begun
        once the old server is dead: a write it still answers was sent in the old one)."""
        self.api.kill()
        if fresh:
            self.ledger.epoch += 1
        await asyncio.sleep(0.5)
        await self.start_api(durable)

    # --- replicas -----------------------------------------------------------------------------------
    async def start_replicas(self) -> None:
        config = self.opts.workdir / "scheduler.yaml"
        config.write_text(scheduler_config(self.opts))
        upstream = str(load_config(self.kubeconfig).cluster.server)
        for i in range(self.opts.replicas):
            name = f"replica-{i}"
            proxy = FaultProxy(name, upstream, self.faults, self.ledger, random.Random(self.opts.seed + i))
            url = await proxy.start()
            kubeconfig = proxied_kubeconfig(self.kubeconfig, self.opts.workdir / f"{name}.kubeconfig", url)
            replica = Replica(name, proxy, self.opts.workdir, config, kubeconfig)
            replica.proc.start()
            self.replicas.append(replica)

    async def supervise(self) -> None:
        """Restart replicas that exited (a lost Lease exits with 1), unless held down on purpose."""
        while True:
            for replica in self.replicas:
                proc = replica.proc.proc
                if not replica.held and proc is not None and proc.poll() is not None:
                    replica.exit_codes.append(proc.returncode)
                    replica.proc.start()
            await asyncio.sleep(0.5)

    def leader(self) -> Replica | None:
        for write in reversed(self.ledger.lease_writes):
            if write.subject:
                return next(r for r in self.replicas if r.name == write.replica)
        return None

    async def current_leader(self) -> Replica | None:
        """The replica leading now: its process is alive and renewed the Lease within the renew
        deadline. After a fault that cost the leader its Lease (an API server restart on a loaded
        machine) there may be none for a while: wait for the next one, a few leases at most."""
        deadline = time.monotonic() + self.opts.lease_duration * 4
        while time.monotonic() < deadline:
            latest = next((w for w in reversed(self.ledger.lease_writes) if w.subject), None)
            if latest is not None and time.monotonic() - latest.answered < self.opts.renew_deadline:
                replica = next(r for r in self.replicas if r.name == latest.replica)
                if replica.proc.alive():
                    return replica
            await asyncio.sleep(0.1)
        return None

    # --- faults -------------------------------------------------------------------------------------
    def fault_cycle(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        return [
            ("watches dropped", self._drop_watches), ("watches stalled", self._stall_watches),
            ("410 burst", lambda: self._burst("watch_gone")), (LEADER_KILL, self._kill_leader),
            ("too large resource version burst", lambda: self._burst("watch_too_large")),
            ("API server kill -9 and restart with --data", lambda: self.restart_api(durable=True)),
            ("leader SIGSTOP past its lease, SIGCONT", self._pause_leader), ("invalid objects", self._invalid_flood),
        ]

    async def inject(self, name: str, action: Callable[[], Awaitable[None]]) -> None:
        log.info("injecting: %s", name)
        self.injected[name] += 1
        await action()

    async def _drop_watches(self) -> None:
        for replica in self.replicas:
            replica.proxy.drop_watches()

    async def _stall_watches(self) -> None:
        self.faults.stall_watches_until = time.monotonic() + 3.0

    async def _burst(self, attribute: str) -> None:
        """Answer half of the watch requests with the error for a while; watches are dropped first
        so that informers ask again during the burst."""
        setattr(self.faults, attribute, 0.5)
        await self._drop_watches()
        await asyncio.sleep(3.0)
        setattr(self.faults, attribute, 0.0)

    async def _kill_leader(self) -> None:
        """``kill -9`` of the leader, then the takeover: the first acquisition of the Lease by
        another replica and its first accepted binding (of the pods held back for it, created
        right after the kill, if the wave's own pods were all bound already)."""
        leader = await self.current_leader()
        if leader is None:
            log.warning("no replica leads: no leader to kill")
            return
        leader.held = True
        leader.proc.kill()
        killed = time.monotonic()
        held_back, self.held_back = self.held_back, []
        creating = asyncio.get_running_loop().create_task(self.create_pods(held_back))
        deadline = killed + self.opts.lease_duration * 5 + 30
        acquired = first_binding = None
        while time.monotonic() < deadline and first_binding is None:
            taken = [w for w in self._acquisitions() if w.answered > killed and w.replica != leader.name]
            if taken:
                acquired = taken[0].answered
                first_binding = min((b.answered for b in self.ledger.bindings
                                     if b.replica == taken[0].replica and b.answered > acquired), default=None)
            await asyncio.sleep(0.05)
        self.failovers.append(Failover(killed, acquired, first_binding))
        leader.held = False
        await creating

    async def _pause_leader(self) -> None:
        leader = await self.current_leader()
        if leader is None:
            log.warning("no replica leads: no leader to pause")
            return
        leader.held = True
        leader.proc.send(signal.SIGSTOP)
        await asyncio.sleep(self.opts.lease_duration * 2 + 1)
        leader.proc.send(signal.SIGCONT)
        leader.held = False

    async def _invalid_flood(self) -> None:
        assert self.client is not None
        for obj in invalid_objects(self.opts.invalid_objects):
            try:
                await self.client.create(cast(Kind, kind_named(obj["kind"])), obj)
            except Exception:
                self.rejected += 1

    # --- pods ---------------------------------------------------------------------------------------
    async def create_pods(self, names: list[str]) -> None:
        assert self.client is not None
        queue: asyncio.Queue[str] = asyncio.Queue()
        for name in names:
            queue.put_nowait(name)

        async def worker() -> None:
            while not queue.empty():
                name = queue.get_nowait()
                cpu = NODE_CPU + "0" if name in self.unschedulable else "100m"
                await self._create_with_retry(pod(name, cpu))
                self.created.append(name)

        await asyncio.gather(*(worker() for _ in range(self.opts.creation_concurrency)))

    async def _create_with_retry(self, obj: dict) -> None:
        """Create until acknowledged (the API server may be restarting); an AlreadyExists after a
        lost answer means an earlier attempt was applied."""
        from kubesched.api.apierrors import AlreadyExists

        assert self.client is not None
        while True:
            try:
                await self.client.create(cast(Kind, kind_named(obj["kind"])), obj)
                return
            except AlreadyExists:
                return
            except Exception as e:
                log.info("creating %s %s failed, retrying: %s", obj["kind"], obj["metadata"]["name"], e)
                await asyncio.sleep(0.5)

    # --- phases -------------------------------------------------------------------------------------
    async def lost_cluster_phase(self) -> None:
        """Pods on an API server without --data, which is then killed and restarted: another cluster."""
        assert self.client is not None
        names = [f"lost-node-{i}" for i in range(2)]
        for name in names:
            await self._create_with_retry(node(name))
        for i in range(50):
            await self._create_with_retry(pod(f"lost-{i}", "100m"))
        await self.until(lambda: self._bound_count("lost-", 50), 60)
        self.lost_cluster_nodes = set(names)
        self.injected["API server kill -9 and restart without --data"] += 1
        await self.restart_api(durable=True, fresh=True)  # a fresh database file: nothing of the old cluster

    async def _bound_count(self, prefix: str, want: int) -> bool:
        assert self.client is not None
        items, _ = await self.client.list(POD)
        return sum(1 for p in items if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")) >= want

    async def until(self, check: Callable[[], Awaitable[bool]], timeout: float, every: float = 1.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if await check():
                    return True
            except Exception as e:
                log.debug("check failed: %s", e)
            await asyncio.sleep(every)
        return False

    async def main_phase(self) -> None:
        """Pods in waves, one wave per fault: each fault is injected while its wave is created."""
        for i in range(math.ceil(self.opts.pods / PODS_PER_NODE) + 1):
            await self._create_with_retry(node(f"node-{i}"))
        names = [f"pod-{i}" for i in range(self.opts.pods)]
        every = self.opts.unschedulable_every
        self.unschedulable = {n for i, n in enumerate(names) if i % every == every - 1}
        self._bind_faults(on=True)
        faults = self.fault_cycle() * self.opts.rounds
        size = math.ceil(len(names) / len(faults))
        for k, (name, action) in enumerate(faults):
            wave_names = names[k * size:(k + 1) * size]
            if name == LEADER_KILL:
                keep = max(1, len(wave_names) // 10)
                wave_names, self.held_back = wave_names[:-keep], wave_names[-keep:]
            wave = asyncio.get_running_loop().create_task(self.create_pods(wave_names))
            await asyncio.sleep(self.opts.fault_interval / 2)
            await self.inject(name, action)
            await wave
            if self.held_back:  # no leader to kill: the pods kept for it are created all the same
                await self.create_pods(self.held_back)
                self.held_back = []
            await asyncio.sleep(self.opts.fault_interval / 2)
        self._bind_faults(on=False)
        for replica in self.replicas:
            replica.held = False
            replica.proc.send(signal.SIGCONT)

    def _bind_faults(self, on: bool) -> None:
        rate = 0.01 if on else 0.0
        self.faults.bind_conflict = self.faults.bind_error = self.faults.bind_slow = rate
        self.faults.bind_timeout = rate / 10

    async def quiesce(self) -> None:
        """Until every schedulable pod is bound, then until a leader's cache agrees with the API."""
        want = len(self.created) - len(self.unschedulable)
        await self.until(lambda: self._bound_count("pod-", want), self.opts.quiesce_timeout, every=5.0)
        await asyncio.sleep(self.opts.retry_period * 4)  # events and status patches still on their way
        await self.until(self._leader_settled, self.opts.lease_duration * 4 + 60, every=5.0)

    async def _leader_settled(self) -> bool:
        leader = self.leader()
        if leader is None or not leader.proc.alive():
            return False
        dump = await asyncio.get_running_loop().run_in_executor(None, leader.get, "/debug/cache")
        return not any(dump["comparer"].values()) and not dump["queue"]["inFlight"]

    # --- checks -------------------------------------------------------------------------------------
    def _acquisitions(self) -> list[Write]:
        holder, out = "", []
        for write in sorted(self.ledger.lease_writes, key=lambda w: (w.order, w.answered)):
            if write.subject and write.subject != holder:
                out.append(write)
            holder = write.subject or holder
        return out

    def binds_without_lease(self) -> tuple[list[Write], int]:
        """Bindings accepted from a replica after another replica had acquired the Lease (that
        acquisition answered before the binding was sent), and how many bindings were in flight
        at a takeover."""
        acquisitions = self._acquisitions()
        definite: list[Write] = []
        overlapping = 0
        for bind in self.ledger.bindings:
            before = [a for a in acquisitions if a.answered < bind.sent]
            if before and before[-1].replica != bind.replica:
                definite.append(bind)
            elif any(a.replica != bind.replica and bind.sent <= a.answered <= bind.answered for a in acquisitions):
                overlapping += 1
        return definite, overlapping

    def write_ledger(self) -> None:
        """Every accepted binding and Lease write, with the replica that sent it and its times
        (seconds since the start of the run), to ``<workdir>/ledger.json``: what the checks of
        bindings and takeovers were computed from."""
        def rows(writes: list[Write]) -> list[dict]:
            return [{"replica": w.replica, "subject": w.subject, "sent": round(w.sent - self.started, 3),
                     "answered": round(w.answered - self.started, 3), "order": list(w.order)} for w in writes]

        doc = {"bindings": rows(self.ledger.bindings), "lease writes": rows(self.ledger.lease_writes),
               "leader kills": [round(f.killed - self.started, 3) for f in self.failovers]}
        (self.opts.workdir / "ledger.json").write_text(json.dumps(doc, indent=1))

    async def check(self) -> dict[str, Any]:
        assert self.client is not None
        pods, _ = await self.client.list(POD)
        nodes, _ = await self.client.list(NODE)
        events, _ = await self.client.list(EVENTS_V1)
        by_name = {p["metadata"]["name"]: p for p in pods if p["metadata"]["name"].startswith("pod-")}
        node_names = {n["metadata"]["name"] for n in nodes}
        bound = {name: p["spec"].get("nodeName", "") for name, p in by_name.items()}
        binds = Counter(w.subject.split("/", 1)[-1] for w in self.ledger.bindings)
        failed = {(e.get("regarding") or {}).get("name") for e in events if e.get("reason") == "FailedScheduling"}
        unbound = [n for n, node_name in bound.items() if not node_name]
        definite, overlapping = self.binds_without_lease()
        self.write_ledger()
        return {
            "pods created": len(self.created), "unschedulable by design": len(self.unschedulable),
            "lost (acknowledged, missing)": sum(1 for n in self.created if n not in by_name),
            "schedulable but not bound": sum(1 for n in unbound if n not in self.unschedulable),
            "bound twice": sum(1 for n, count in binds.items() if count > 1 and n.startswith("pod-")),
            "bound to a node that does not exist": sum(1 for n in bound.values() if n and n not in node_names),
            "nodes over capacity": over_capacity(nodes, pods),
            "binds by a replica without the Lease": len(definite),
            "binds in flight at a takeover": overlapping,
            "unbound without FailedScheduling": sum(1 for n in unbound if n not in failed),
            "cache == API": self.cache_matches(nodes, pods),
            "failover after leader kill -9 (s)": [f.seconds(f.first_binding) for f in self.failovers],
            "Lease taken after leader kill -9 (s)": [f.seconds(f.acquired) for f in self.failovers],
            "failover target (s)": self.opts.lease_duration + self.opts.retry_period,
            "failovers within the target": self.failovers_within_target(),
            "invalid objects rejected": self.rejected,
            "faults injected": dict(self.injected) | dict(self.faults.counts),
            **({"binds without the Lease (first 5; all in ledger.json)": [
                f"{w.replica} {w.subject} sent {w.sent - self.started:.3f}s" for w in definite[:5]]} if definite else {}),
            "replica exits": {r.name: r.exit_codes for r in self.replicas},
        }

    def failovers_within_target(self) -> str:
        """How many leader kills were followed by a binding of the new leader within
        ``leaseDuration + retryPeriod`` ("n of m")."""
        target = self.opts.lease_duration + self.opts.retry_period
        met = sum(1 for f in self.failovers if f.first_binding is not None and f.first_binding - f.killed <= target)
        return f"{met} of {len(self.failovers)}"

    def cache_matches(self, nodes: list[dict], pods: list[dict]) -> bool:
        leader = self.leader()
        if leader is None:
            return False
        try:
            dump = leader.get("/debug/cache")
        except OSError:
            return False
        present = {name for name, info in dump["nodes"].items() if info["present"]}
        cached = {f"{p['namespace']}/{p['name']}": p["nodeName"] for info in dump["nodes"].values() for p in info["pods"]}
        actual = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["nodeName"]
                  for p in pods if p["spec"].get("nodeName")}
        return present == {n["metadata"]["name"] for n in nodes} and cached == actual and not any(dump["comparer"].values())

    # --- all of it ------------------------------------------------------------------------------------
    async def run(self) -> dict[str, Any]:
        started = self.started = time.monotonic()
        await self.start_api(durable=False)
        await self.start_replicas()
        supervisor = asyncio.get_running_loop().create_task(self.supervise())
        try:
            log.info("a cluster on an API server without --data, then lost")
            await self.lost_cluster_phase()
            log.info("creating %d pods while injecting faults", self.opts.pods)
            await self.main_phase()
            log.info("faults off; waiting for the cluster to settle")
            await self.quiesce()
            report = await self.check()
        finally:
            supervisor.cancel()
            await self.shutdown()
        report["duration (s)"] = round(time.monotonic() - started, 1)
        return report

    async def shutdown(self) -> None:
        for replica in self.replicas:
            replica.proc.stop()
            await replica.proxy.stop()
        self.api.stop()
        if self.client is not None:
            await self.client.close()


def over_capacity(nodes: list[dict], pods: list[dict]) -> int:
    """Nodes whose bound pods request more CPU, memory or pods than they have allocatable."""
    used: dict[str, list[int]] = {}
    for p in pods:
        name = p["spec"].get("nodeName")
        if not name:
            continue
        totals = used.setdefault(name, [0, 0, 0])
        for container in p["spec"].get("containers") or []:
            requests = (container.get("resources") or {}).get("requests") or {}
            totals[0] += milli_value(requests.get("cpu", "0"))
            totals[1] += milli_value(requests.get("memory", "0"))
        totals[2] += 1000
    count = 0
    for n in nodes:
        allocatable = n.get("status", {}).get("allocatable") or {}
        limits = [milli_value(allocatable.get(k, "0")) for k in ("cpu", "memory", "pods")]
        if any(u > limit for u, limit in zip(used.get(n["metadata"]["name"], [0, 0, 0]), limits, strict=True)):
            count += 1
    return count


#: The checks that must come out as these values.
EXPECTED = {"lost (acknowledged, missing)": 0, "schedulable but not bound": 0, "bound twice": 0,
            "bound to a node that does not exist": 0, "nodes over capacity": 0, "binds by a replica without the Lease": 0,
            "unbound without FailedScheduling": 0, "cache == API": True}


def failures(report: dict[str, Any]) -> list[str]:
    return [f"{key}: {report[key]} (expected {want})" for key, want in EXPECTED.items() if report.get(key) != want]


def run(opts: ChaosOptions) -> dict[str, Any]:
    """The whole run (blocking): its report, whose ``failures`` say which checks did not hold."""
    return asyncio.run(ChaosRun(opts).run())
