"""Processes for the ``kubesched run`` end-to-end tests: ``kubesched apiserver`` and ``kubesched run``
as subprocesses on free ports, the real kubectl, and plain-HTTP probes of the scheduler's endpoints."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
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

from kubesched.utils.certs import generate

KUBECTL = shutil.which("kubectl")

#: Short leader election settings: takeover within seconds instead of 15s.
FAST_LEASE = {"leaseDuration": "3s", "renewDeadline": "2s", "retryPeriod": "500ms"}
NODE = """
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status:
  capacity: {{cpu: "{cpu}", memory: 8Gi, pods: "110"}}
  allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "110"}}
  conditions: [{{type: Ready, status: "True"}}]
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: {scheduler}
  containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(check: Callable[[], Any], timeout: float, message: str | Callable[[], str], interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``message`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(interval)


def scheduler_config(path: Path, *, leader_elect: bool = False, lease_name: str = "kubesched", scheduler_name: str = "kubesched",
                     extra: str = "") -> Path:
    """A KubeSchedulerConfiguration with one profile named ``scheduler_name`` (the default plugins)."""
    plugins = ""
    lease = "".join(f"\n  {k}: {v}" for k, v in FAST_LEASE.items())
    path.write_text(textwrap.dedent(f"""\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        leaderElection:
          leaderElect: {str(leader_elect).lower()}
          resourceName: {lease_name}
          resourceNamespace: kube-system""") + lease + f"""
profiles:
- schedulerName: {scheduler_name}{plugins}
{extra}""")
    return path


class Process:
    """A subprocess with its output in a log file (kept for failure messages)."""

    def __init__(self, workdir: Path, name: str) -> None:
        self.workdir = workdir
        self.name = name
        self.log = workdir / f"{name}.log"
        self.proc: subprocess.Popen | None = None

    def spawn(self, args: list[str]) -> None:
        out = open(self.log, "a")  # noqa: SIM115 - the child owns it
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KUBECONFIG", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "kubesched.cli.main", *args], stdout=out, stderr=subprocess.STDOUT,
                                     env=env, cwd=self.workdir)
        out.close()

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class APIServer(Process):
    """``kubesched apiserver`` on a free port, durable in ``state.sqlite`` so it can be restarted.
    It serves the harness's own certificate and admin token (``--tls-cert-file``,
    ``--token-auth-file``), so a kubeconfig written before it starts is valid."""

    TOKEN = "harness-admin-token"
    #: Tokens of the other users the token file names (name -> token).
    USERS = {"system:kube-scheduler": "harness-scheduler-token", "prometheus": "harness-prometheus-token",
             "nobody": "harness-nobody-token"}

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, "apiserver")
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = workdir / "kubeconfig.yaml"
        self.data = workdir / "state.sqlite"
        self.cert, self.key, self.tokens = workdir / "apiserver.crt", workdir / "apiserver.key", workdir / "tokens.csv"
        cert_pem, key_pem = generate("localhost")
        self.cert.write_bytes(cert_pem)
        self.key.write_bytes(key_pem)
        self.tokens.write_text(f'{self.TOKEN},harness-admin,1,"system:masters"\n'
                               f'{self.USERS["system:kube-scheduler"]},system:kube-scheduler,2\n'
                               f'{self.USERS["prometheus"]},prometheus,3,"system:monitoring"\n'
                               f'{self.USERS["nobody"]},nobody,4\n')
        self.tls = ssl.create_default_context(cadata=cert_pem.decode())

    def write_kubeconfig(self, user: str = "", path: Path | None = None) -> Path:
        """The kubeconfig the server would write (the admin's, or ``user``'s from ``USERS``),
        written before it starts (for clients started first)."""
        ca = base64.b64encode(self.cert.read_bytes()).decode()
        token = self.USERS[user] if user else self.TOKEN
        target = path or self.kubeconfig
        target.write_text(textwrap.dedent(f"""\
            apiVersion: v1
            kind: Config
            clusters: [{{name: c, cluster: {{server: "{self.url}", certificate-authority-data: "{ca}"}}}}]
            users: [{{name: u, user: {{token: {token}}}}}]
            contexts: [{{name: c, context: {{cluster: c, user: u, namespace: default}}}}]
            current-context: c
            """))
        return target

    def start(self) -> None:
        self.spawn(["apiserver", "--port", str(self.port), "--data", str(self.data), "--kubeconfig-out", str(self.kubeconfig),
                    "--tls-cert-file", str(self.cert), "--tls-private-key-file", str(self.key),
                    "--token-auth-file", str(self.tokens)])
        until(self.ready, 30, lambda: f"kubesched apiserver did not become ready:\n{self.output()}")

    def ready(self) -> bool:
        if not self.alive():
            raise AssertionError(f"kubesched apiserver exited:\n{self.output()}")
        return http_status(self.url + "/readyz", self.tls) == 200

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
        assert KUBECTL is not None
        result = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], capture_output=True, text=True,
                                timeout=30, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, text: str) -> None:
        self.kubectl("apply", "-f", "-", stdin=textwrap.dedent(text))

    def nodes_of_pods(self) -> dict[str, str]:
        """pod name -> node name ("" when unbound), default namespace."""
        return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName", "") for p in self.get("pods")["items"]}

    def lease(self, name: str) -> dict:
        result = self.kubectl("get", "lease", "-n", "kube-system", name, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else {}


class PodWatch:
    """``kubectl get pods --watch --output-watch-events -o json`` in the background: every version of
    every pod in ``default``, to check bindings (each pod goes from no node to a node exactly once)."""

    def __init__(self, api: APIServer) -> None:
        assert KUBECTL is not None
        self.out = api.workdir / "pod-watch.json"
        self._file = open(self.out, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([KUBECTL, "--kubeconfig", str(api.kubeconfig), "get", "pods", "-n", "default", "--watch",
                                      "--output-watch-events", "-o", "json"], stdout=self._file, stderr=subprocess.DEVNULL)

    def stop(self) -> list[dict]:
        """Stop watching; the events seen, in order."""
        self.proc.terminate()
        self.proc.wait(5)
        self._file.close()
        text, events, decoder, i = self.out.read_text(), [], json.JSONDecoder(), 0
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                return events
            event, i = decoder.raw_decode(text, i)
            events.append(event)

    @staticmethod
    def bindings(events: list[dict]) -> dict[str, list[str]]:
        """pod name -> the node names it was seen moving to (a correct history has one entry)."""
        seen: dict[str, str] = {}
        moves: dict[str, list[str]] = {}
        for event in events:
            pod = event["object"]
            name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName", "")
            if node and seen.get(name, "") != node:
                moves.setdefault(name, []).append(node)
            seen[name] = node
        return moves


class Scheduler(Process):
    """``kubesched run`` serving its endpoints over plain HTTP on a free ``--port`` (HTTPS off unless
    ``secure`` asks for a free secure port)."""

    def __init__(self, workdir: Path, name: str, config: Path, kubeconfig: Path, *, secure: bool = False,
                 extra: list[str] | None = None) -> None:
        super().__init__(workdir, name)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.secure_port = free_port() if secure else 0
        self.args = ["run", "--config", str(config), "--kubeconfig", str(kubeconfig), "--bind-address", "127.0.0.1",
                     "--port", str(self.port), "--secure-port", str(self.secure_port), "--cert-dir", str(workdir / f"{name}-certs"),
                     *(extra or [])]

    def start(self, wait_ready: bool = True) -> None:
        self.spawn(self.args)
        until(self.live, 30, lambda: f"{self.name} did not serve /livez:\n{self.output()}")
        if wait_ready:
            until(lambda: self.status("/readyz") == 200, 30, lambda: f"{self.name} did not become ready:\n{self.output()}")

    def live(self) -> bool:
        if not self.alive():
            raise AssertionError(f"{self.name} exited:\n{self.output()}")
        return self.status("/livez") == 200

    def status(self, path: str) -> int:
        return http_status(self.url + path)

    def text(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:
            return resp.read().decode()

    def json(self, path: str) -> Any:
        return json.loads(self.text(path))

    def metric(self, metric: str, **labels: str) -> float:
        """The value of one sample of ``/metrics`` (0 when absent)."""
        return metric_value(self.text("/metrics"), metric, labels)

    def leading(self) -> bool:
        return self.alive() and self.metric("leader_election_master_status", name="kube-scheduler") == 1


def http_status(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def metric_value(text: str, name: str, labels: dict[str, str]) -> float:
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return 0.0


def insecure_tls() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
