"""The health, metrics, configz and debug endpoints: upstream's paths, check names and texts."""

from __future__ import annotations

import logging

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from kubesched.scheduler.serving.endpoints import Check, Endpoints
from kubesched.utils.certs import server_context


class Flag:
    def __init__(self, error: str | None = None) -> None:
        self.error = error

    def __call__(self) -> str | None:
        return self.error


@pytest.fixture
def synced():
    return Flag("handlers are not fully synchronized")


@pytest.fixture
async def served(synced):
    registry = CollectorRegistry()
    Counter("schedule_attempts", "attempts", ["result"], namespace="scheduler", registry=registry).labels("scheduled").inc()
    endpoints = Endpoints(healthz=[Check("leaderElection", Flag())], livez=[],
                          readyz=[Check("leaderElection", Flag()), Check("shutdown", Flag()), Check("sched-handler-sync", synced)],
                          metrics=lambda: generate_latest(registry), configz=lambda: {"kind": "KubeSchedulerConfiguration"},
                          debug=lambda: {"comparer": {}})
    await endpoints.start("127.0.0.1", secure_port=-1, insecure_port=-1, ssl_context=server_context(None, None, None))
    async with aiohttp.ClientSession() as session:
        yield endpoints, session
    await endpoints.stop()


async def get(session: aiohttp.ClientSession, endpoints: Endpoints, path: str, secure: bool = False) -> tuple[int, str]:
    url = f"https://127.0.0.1:{endpoints.ports['secure']}{path}" if secure else f"http://127.0.0.1:{endpoints.ports['insecure']}{path}"
    async with session.get(url, ssl=False) as resp:
        return resp.status, await resp.text()


async def test_readyz_fails_until_handlers_sync_listing_every_check(served, synced):
    endpoints, session = served
    assert await get(session, endpoints, "/readyz") == (500, "[+]leaderElection ok\n[+]shutdown ok\n"
                                                        "[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n")
    synced.error = None
    assert await get(session, endpoints, "/readyz") == (200, "ok")
    assert await get(session, endpoints, "/readyz?verbose") == (
        200, "[+]leaderElection ok\n[+]shutdown ok\n[+]sched-handler-sync ok\nreadyz check passed\n")


async def test_checks_can_be_excluded_or_run_alone(served, synced):
    endpoints, session = served
    status, body = await get(session, endpoints, "/readyz?exclude=sched-handler-sync&exclude=nope&verbose")
    assert status == 200 and "[+]sched-handler-sync excluded: ok\n" in body
    assert 'warn: some health checks cannot be excluded: no matches for "nope"\n' in body
    assert await get(session, endpoints, "/readyz/sched-handler-sync") == (500, "internal server error: handlers are not fully synchronized\n")
    assert await get(session, endpoints, "/readyz/shutdown") == (200, "ok")
    assert (await get(session, endpoints, "/readyz/nope"))[0] == 404


async def test_healthz_has_the_leader_election_watchdog_and_livez_pings(served):
    endpoints, session = served
    assert await get(session, endpoints, "/healthz?verbose") == (200, "[+]leaderElection ok\nhealthz check passed\n")
    assert await get(session, endpoints, "/livez?verbose") == (200, "[+]ping ok\nlivez check passed\n")
    assert await get(session, endpoints, "/livez", secure=True) == (200, "ok")  # the same endpoints over TLS


async def test_metrics_configz_slis_and_debug(served):
    endpoints, session = served
    status, body = await get(session, endpoints, "/metrics")
    assert status == 200 and 'scheduler_schedule_attempts_total{result="scheduled"} 1.0' in body
    await get(session, endpoints, "/readyz")
    status, body = await get(session, endpoints, "/metrics/slis")
    assert 'kubernetes_healthcheck{name="sched-handler-sync",type="readyz"} 0.0' in body
    assert 'kubernetes_healthchecks_total{name="shutdown",status="success",type="readyz"} 1.0' in body
    assert await get(session, endpoints, "/configz") == (200, '{"componentconfig": {"kind": "KubeSchedulerConfiguration"}}')
    assert await get(session, endpoints, "/debug/cache") == (200, '{"comparer": {}}')
    root = logging.getLogger()
    level = root.level
    try:
        async with session.put(f"http://127.0.0.1:{endpoints.ports['insecure']}/debug/flags/v", data="4") as resp:
            assert resp.status == 200 and await resp.text() == "successfully set klog.logging.verbosity to 4"
        assert root.level == logging.DEBUG
    finally:
        root.setLevel(level)
