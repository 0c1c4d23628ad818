"""``kubesched up`` runs its scheduler in a process of its own: the API server still serves that
scheduler's explanations and metrics, and the process never outlives ``up`` (stopped in order, or
``up`` killed outright)."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson

from kubesched.api.kinds import POD
from kubesched.simulator.up import Cluster, UpOptions

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, cpu: str = "1") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def get(cluster: Cluster, path: str) -> tuple[int, bytes]:
    async with cluster.server.client_session() as session, session.get(cluster.server.url + path) as resp:
        return resp.status, await resp.read()


async def test_the_server_serves_its_scheduler_process_explanations_and_metrics_and_stops_it():
    options = UpOptions(port=0, kubeconfig_out=None, objects=[NODE, pod("fits"), pod("too-big", cpu="64")], controllers=False)
    async with Cluster(options) as cluster:
        assert cluster.scheduler is not None and cluster.scheduler.pid != os.getpid()
        pid = cluster.scheduler.pid
        assert pid is not None and alive(pid)
        for _ in range(200):
            if cluster.store.get(POD, "default", "fits")["spec"].get("nodeName"):
                break
            await asyncio.sleep(0.05)
        base = "/apis/kubesched.io/v1alpha1/namespaces/default/explanations"
        status, body = await get(cluster, f"{base}/too-big")
        assert status == 200, body
        explanation = orjson.loads(body)
        assert explanation["kind"] == "SchedulingExplanation" and explanation["attemptCount"] >= 1
        assert (await get(cluster, f"{base}/never-created"))[0] == 404
        status, text = await get(cluster, "/metrics")
        assert status == 200
        assert b"apiserver_storage_objects" in text and b'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in text
    assert not alive(pid)


def test_the_scheduler_process_ends_when_up_is_killed(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    up = subprocess.Popen([sys.executable, "-m", "kubesched.cli.main", "up", "--port", "0", "--kubeconfig-out", str(kubeconfig)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not kubeconfig.exists():
            assert up.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        children = [int(c) for c in Path(f"/proc/{up.pid}/task/{up.pid}/children").read_text().split()]
        assert len(children) == 1 and alive(children[0])
        up.send_signal(signal.SIGKILL)
        up.wait(10)
        deadline = time.monotonic() + 30
        while alive(children[0]):
            assert time.monotonic() < deadline, "the scheduler process outlived up"
            time.sleep(0.1)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(5)


async def test_the_scheduler_process_talks_to_the_server_over_a_private_unix_socket_with_its_token():
    options = UpOptions(port=0, kubeconfig_out=None, objects=[NODE, pod("fits")], controllers=False)
    async with Cluster(options) as cluster:
        assert cluster.scheduler is not None
        socket_path = Path(cluster.scheduler.spec.unix_socket)
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
        for _ in range(200):
            if cluster.store.get(POD, "default", "fits")["spec"].get("nodeName"):
                break
            await asyncio.sleep(0.05)
        assert cluster.store.get(POD, "default", "fits")["spec"]["nodeName"] == "n1"
        path = "/api/v1/namespaces/default/pods"
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(socket_path))) as session:
            async with session.get(f"http://localhost{path}") as resp:
                assert resp.status == 401  # no credential: the socket is not a way around authentication
            headers = {"Authorization": f"Bearer {cluster.server.scheduler_token}"}
            async with session.get(f"http://localhost{path}", headers=headers) as resp:
                assert resp.status == 200
                assert [p["metadata"]["name"] for p in (await resp.json())["items"]] == ["fits"]
            async with session.get("http://localhost/api/v1/namespaces/default/secrets", headers=headers) as resp:
                assert resp.status == 403  # and it is the scheduler's role, not an administrator's
    assert not socket_path.exists() and not socket_path.parent.exists()
