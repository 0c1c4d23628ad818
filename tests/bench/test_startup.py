"""``kubesched.bench.startup``: one timed start of ``kubesched run`` against a real API server process."""

from __future__ import annotations

import os
from pathlib import Path

from kubesched.bench import startup
from kubesched.scheduler import config as config_module


def test_the_configuration_is_the_default_one_with_the_servers_kubeconfig() -> None:
    cfg = config_module.load_text(startup.config_text("/tmp/kc"))
    assert cfg.client_connection.kubeconfig == "/tmp/kc"
    assert cfg.leader_election.leader_elect  # upstream's default: a start takes the Lease first


def test_cpu_seconds_reads_a_running_process() -> None:
    assert startup.cpu_seconds(os.getpid()) > 0


async def test_a_start_binds_a_pending_pod_and_reports_its_time() -> None:
    target = await startup.prepared_server(5)
    try:
        assert target.client is not None
        config = Path(target.kubeconfig).with_name("config.yaml")
        config.write_text(startup.config_text(target.kubeconfig))
        first = await startup.first_binding(target.client, target.kubeconfig, str(config))
        # A second start: the first released its Lease on SIGTERM, and a new pending pod is bound.
        second = await startup.time_to_first_binding(target.kubeconfig, str(config))
    finally:
        await target.stop()
    assert first.wall > 0 and first.cpu > 0
    assert second > 0
