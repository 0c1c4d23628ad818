"""Processes for the fault tests: ``kubesched apiserver`` (durable or in memory) and ``kubesched run``
replicas, from ``tests/run/harness.py``; each test stops what it started."""

from __future__ import annotations

import pytest

from tests.run.harness import KUBECTL, APIServer, Scheduler

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


class InMemoryAPIServer(APIServer):
    """``kubesched apiserver`` without ``--data``: a restart starts an empty cluster."""

    def spawn(self, args: list[str]) -> None:
        if "--data" in args:
            at = args.index("--data")
            args = args[:at] + args[at + 2:]
        super().spawn(args)

    def kill(self) -> None:
        """SIGKILL and reap: nothing is flushed, the port is free again."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def api(tmp_path):
    server = APIServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def memory_api(tmp_path):
    server = InMemoryAPIServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def processes():
    started: list[Scheduler] = []
    yield started
    for proc in started:
        proc.stop()
