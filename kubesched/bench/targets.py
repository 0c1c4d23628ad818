"""Where a benchmark's objects go and where the scheduler reads them from.

* ``EmbeddedTarget``: an ``ObjectStore`` on the real clock, the scheduler on a ``MemoryClient``;
  the benchmark writes straight into the store (no kubelet: scheduler_perf has none).
* ``HttpTarget``: ``kubesched up``'s API server (``kubesched.simulator.up.Cluster`` with the kubelet, the
  controllers and its own scheduler off), in a subprocess by default so that it has its own core
  as kube-apiserver has; the scheduler talks to it with ``KubeClient`` and binds with real
  ``pods/binding`` calls. Setup objects are created over HTTP from this process; the measured pods
  from a separate process (``creator.py``), so creating them costs the scheduler no CPU, as in
  scheduler_perf where the creator runs on other cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.api.apierrors import AlreadyExists
from kubesched.api.kinds import Kind, kind_named
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.bench import creator
from kubesched.client.interface import ClusterClient
from kubesched.client.kube import KubeClient, wait_ready
from kubesched.utils.clock import RealClock

if TYPE_CHECKING:  # imported when a server is started: the in-memory targets never load it
    from kubesched.simulator.up import UpOptions


def kind_of(obj: dict) -> Kind:
    kind = kind_named(obj["kind"])
    if kind is None:
        raise KeyError(f"kind {obj['kind']} is not served")
    return kind


class Target:
    """The few verbs a workload needs, and the client the scheduler uses."""

    #: Peak RSS of a separate API server process, when there is one (bytes).
    server_peak_rss: int | None = None

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def scheduler_client(self) -> ClusterClient:
        raise NotImplementedError

    async def create(self, obj: dict) -> dict:
        raise NotImplementedError

    async def create_many(self, objs: Sequence[dict], *, measured: bool = False) -> None:
        raise NotImplementedError

    async def delete(self, obj: dict) -> None:
        raise NotImplementedError

    async def ensure_namespace(self, name: str) -> None:
        with contextlib.suppress(AlreadyExists):
            await self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


class EmbeddedTarget(Target):
    def __init__(self, seed: int | None) -> None:
        self.store = ObjectStore(RealClock(), seed=seed)

    def scheduler_client(self) -> ClusterClient:
        return MemoryClient(self.store)

    async def create(self, obj: dict) -> dict:
        return self.store.create(kind_of(obj), obj)

    async def create_many(self, objs: Sequence[dict], *, measured: bool = False) -> None:
        """Every object at once: store writes are synchronous and cheap, and the scheduler's
        informers then see them in one batch, as a fast creator's would arrive."""
        for obj in objs:
            self.store.create(kind_of(obj), obj)

    async def delete(self, obj: dict) -> None:
        meta = obj["metadata"]
        self.store.delete(kind_of(obj), meta.get("namespace"), meta["name"])


class HttpTarget(Target):
    """See the module docstring. ``in_process``: serve from this process's event loop instead.
    ``insecure``: plain HTTP without authentication (``--insecure-allow-anonymous``), for clients
    that cannot verify a CA or send a token (an older revision's ``kubesched run``)."""

    def __init__(self, seed: int | None, *, in_process: bool = False, concurrency: int = creator.CONCURRENCY,
                 insecure: bool = False) -> None:
        self.seed = seed
        self.insecure = insecure
        self.in_process = in_process
        self.concurrency = concurrency
        self.url = ""
        #: The kubeconfig the server wrote (admin credential and CA), for every client of the run.
        self.kubeconfig = ""
        self._workdir: tempfile.TemporaryDirectory | None = None
        self.client: KubeClient | None = None
        self._cluster: Any = None
        self._proc: subprocess.Popen | None = None

    async def start(self) -> None:
        self._workdir = tempfile.TemporaryDirectory(prefix="kubesched-bench-")
        self.kubeconfig = str(Path(self._workdir.name) / "kubeconfig")
        if self.in_process:
            from kubesched.simulator.up import Cluster

            self._cluster = Cluster(server_options(self.seed, self.kubeconfig, insecure=self.insecure))
            await self._cluster.start()
            self.url = self._cluster.server.url
        else:
            self.url = await self._spawn_server()
        self.client = self._client("kubesched-bench", connections=self.concurrency)
        await wait_ready(self.client)

    def _client(self, agent: str, **kwargs: Any) -> KubeClient:
        return KubeClient(kubeconfig=self.kubeconfig, user_agent=agent, **kwargs)

    async def _spawn_server(self) -> str:
        args = [sys.executable, "-m", "kubesched.bench.apiserver", self.kubeconfig]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        if self.insecure:
            args.append("--insecure")
        self._proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = await asyncio.get_running_loop().run_in_executor(None, self._proc.stdout.readline)
        if not line.startswith("READY "):
            raise RuntimeError(f"the API server did not start: {line.strip() or 'no output'}")
        return line.split()[1]

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self._cluster is not None:
            await self._cluster.stop()
        if self._proc is not None:
            self.server_peak_rss = peak_rss_of(self._proc.pid)
            assert self._proc.stdin is not None
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # the server exits when its stdin closes
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._proc.wait, 10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def scheduler_client(self) -> ClusterClient:
        return self._client("kubesched")

    async def create(self, obj: dict) -> dict:
        assert self.client is not None
        return await self.client.create(kind_of(obj), obj)

    async def create_many(self, objs: Sequence[dict], *, measured: bool = False) -> None:
        if measured:
            await creator.create_in_subprocess(self.kubeconfig, list(objs), self.concurrency)
            return
        assert self.client is not None
        await creator.create_concurrently(self.client, objs, self.concurrency)

    async def delete(self, obj: dict) -> None:
        assert self.client is not None
        meta = obj["metadata"]
        await self.client.delete(kind_of(obj), meta.get("namespace"), meta["name"])


def server_options(seed: int | None, kubeconfig: str, *, insecure: bool = False) -> UpOptions:
    """``kubesched up`` with only its API server (no kubelet, controllers or scheduler), writing its
    kubeconfig to ``kubeconfig``; ``insecure``: plain HTTP, anonymous requests allowed."""
    from kubesched.apiserver.security import SecurityOptions
    from kubesched.simulator.up import UpOptions

    return UpOptions(port=0, kubeconfig_out=kubeconfig, seed=seed, scheduler=False, kubelet=False, controllers=False,
                     security=SecurityOptions(allow_anonymous=insecure))


def peak_rss_of(pid: int | str = "self") -> int | None:
    """``VmHWM`` (peak resident set) of a process in bytes, from /proc; None where unavailable."""
    return _proc_status_bytes(pid, "VmHWM:")


def rss_of(pid: int | str = "self") -> int | None:
    """``VmRSS`` (current resident set) of a process in bytes, from /proc; None where unavailable."""
    return _proc_status_bytes(pid, "VmRSS:")


def _proc_status_bytes(pid: int | str, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None

