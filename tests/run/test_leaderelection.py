"""Leader election on a Lease against the embedded API server over HTTP, with client-go's rules."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator

import pytest

from kubesched.apiserver import APIServer
from kubesched.apiserver.store import ObjectStore
from kubesched.client.kube import KubeClient
from kubesched.client.leaderelection import (
    LEASE,
    LeaderElectionConfigError,
    LeaderElector,
    LeaseLock,
    legacy_event,
    new_identity,
    validate_durations,
)
from kubesched.utils.clock import RealClock

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 2.0, 1.0, 0.2


@pytest.fixture
async def client():
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    c = server.client()
    yield c
    await c.close()
    await server.stop()


class Candidate:
    """An elector plus a record of its callbacks."""

    def __init__(self, client: KubeClient, identity: str, lease: str = "lock") -> None:
        self.events: list[str] = []
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.leaders: list[str] = []
        lock = LeaseLock(client, "kube-system", lease, identity, recorder=lambda _lease, message: self.events.append(message))
        self.elector = LeaderElector(lock, lease_duration=LEASE_DURATION, renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD,
                                     on_started_leading=self.started.set, on_stopped_leading=self.stopped.set,
                                     on_new_leader=self.leaders.append)
        self.task: asyncio.Task | None = None

    def run(self) -> Candidate:
        self.task = asyncio.get_running_loop().create_task(self.elector.run())
        return self

    async def stop(self) -> None:
        self.elector.stop()
        if self.task is not None:
            await asyncio.wait_for(self.task, 5)


async def lease_spec(client: KubeClient) -> dict:
    lease = await client.get(LEASE, "kube-system", "lock")
    return lease["spec"] if lease else {}


async def test_the_first_candidate_creates_the_lease_and_leads(client):
    a = Candidate(client, "a").run()
    await asyncio.wait_for(a.started.wait(), 5)
    spec = await lease_spec(client)
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 2 and spec["leaseTransitions"] == 0
    assert spec["acquireTime"].endswith("Z") and len(spec["acquireTime"]) == len("2025-01-01T00:00:00.000000Z")
    assert a.elector.is_leader() and a.events == ["a became leader"] and a.leaders == ["a"]
    await asyncio.sleep(RETRY_PERIOD * 2)
    renewed = await lease_spec(client)
    assert renewed["renewTime"] > spec["renewTime"] and renewed["acquireTime"] == spec["acquireTime"]
    await a.stop()


async def test_system_kube_scheduler_may_lead_on_the_kube_scheduler_lease_only():
    """The bootstrap role lets the scheduler create Leases and get/update only ``kube-scheduler``."""
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    scheduler, admin = server.client(token=server.scheduler_token), server.client()
    try:
        ours = Candidate(scheduler, "a", lease="kube-scheduler").run()
        await asyncio.wait_for(ours.started.wait(), 5)
        await asyncio.sleep(RETRY_PERIOD * 2)
        lease = await admin.get(LEASE, "kube-system", "kube-scheduler")
        assert lease is not None and lease["spec"]["holderIdentity"] == "a"
        await ours.stop()
        other = Candidate(scheduler, "b", lease="someone-else").run()
        await asyncio.sleep(RETRY_PERIOD * 3)
        assert not other.started.is_set()  # forbidden to read or renew another Lease
        await other.stop()
    finally:
        await scheduler.close()
        await admin.close()
        await server.stop()


async def test_a_standby_does_not_take_a_lease_its_holder_keeps_renewing(client):
    a = Candidate(client, "a").run()
    await asyncio.wait_for(a.started.wait(), 5)
    b = Candidate(client, "b").run()
    await asyncio.sleep(LEASE_DURATION * 1.5)
    assert not b.started.is_set() and b.elector.get_leader() == "a" and b.leaders == ["a"]
    assert (await lease_spec(client))["holderIdentity"] == "a"
    await a.stop()
    await b.stop()


async def test_stop_releases_the_lease_and_a_standby_takes_it_at_its_next_retry(client):
    a = Candidate(client, "a").run()
    await asyncio.wait_for(a.started.wait(), 5)
    b = Candidate(client, "b").run()
    await asyncio.sleep(RETRY_PERIOD * 3)
    await a.stop()
    assert a.stopped.is_set() and a.elector.stop_requested and "a stopped leading" in a.events
    released = time.monotonic()
    await asyncio.wait_for(b.started.wait(), 5)
    assert time.monotonic() - released < LEASE_DURATION  # no need to wait for the lease to run out
    spec = await lease_spec(client)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    await b.stop()
    released_spec = await lease_spec(client)
    assert released_spec["holderIdentity"] == "" and released_spec["leaseDurationSeconds"] == 1
    assert released_spec["leaseTransitions"] == 1


async def test_a_lease_left_by_a_dead_holder_is_taken_only_after_its_duration_on_the_candidates_clock(client):
    dead = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock", "namespace": "kube-system"},
            "spec": {"holderIdentity": "dead", "leaseDurationSeconds": 1, "leaseTransitions": 4,
                     "acquireTime": "2000-01-01T00:00:00.000000Z", "renewTime": "2000-01-01T00:00:00.000000Z"}}
    await client.create(LEASE, dead)
    started = time.monotonic()
    b = Candidate(client, "b").run()
    await asyncio.wait_for(b.started.wait(), 5)
    # an ancient renewTime does not count: the lease is judged from when the candidate first saw it
    assert time.monotonic() - started >= 1.0
    spec = await lease_spec(client)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 5
    await b.stop()


async def test_a_leader_that_cannot_renew_because_another_holder_took_the_lease_stops_leading(client):
    a = Candidate(client, "a").run()
    await asyncio.wait_for(a.started.wait(), 5)
    lease = await client.get(LEASE, "kube-system", "lock")
    lease["spec"]["holderIdentity"] = "thief"
    lease["spec"]["leaseDurationSeconds"] = 60
    await client.update(LEASE, lease)
    taken = time.monotonic()
    await asyncio.wait_for(a.stopped.wait(), RENEW_DEADLINE + 3)
    assert time.monotonic() - taken <= RENEW_DEADLINE + RETRY_PERIOD * 3
    assert not a.elector.stop_requested and not a.elector.is_leader() and a.leaders == ["a", "thief"]
    assert (await lease_spec(client))["holderIdentity"] == "thief"  # not released: it was not ours any more
    await a.task


async def test_the_lease_watch_of_a_candidate_delivers_each_renewal_of_its_lease_and_no_other_lease(client):
    """What a standby with ``watch_lease`` observes renewals through: a watch of its one Lease."""
    ours, other = Candidate(client, "a").run(), Candidate(client, "b", lease="other").run()
    await asyncio.wait_for(asyncio.gather(ours.started.wait(), other.started.wait()), 5)
    lock = LeaseLock(client, "kube-system", "lock", "watcher")
    watched: list[dict] = []

    async def watch_three() -> None:
        async for lease in lock.watch():
            watched.append(lease)
            if len(watched) == 3:
                return

    await asyncio.wait_for(watch_three(), 5)
    assert {lease["metadata"]["name"] for lease in watched} == {"lock"}
    renewals = [lease["spec"]["renewTime"] for lease in watched]
    assert renewals == sorted(renewals) and len(set(renewals)) == 3
    assert lock.lease is None  # updates are only ever made from what an attempt read
    await ours.stop()
    await other.stop()


async def test_a_standby_whose_lease_watch_is_forbidden_falls_back_to_reading_it_at_each_attempt(caplog):
    """kube-scheduler's bootstrap role grants get and update on its Lease, not watch: the standby
    tries the watch once, then follows client-go's reads and still takes over."""
    server = APIServer(ObjectStore(RealClock()), port=0)
    await server.start()
    scheduler = server.client(token=server.scheduler_token)
    try:
        leader = Candidate(scheduler, "a", lease="kube-scheduler").run()
        await asyncio.wait_for(leader.started.wait(), 5)
        standby = Candidate(scheduler, "b", lease="kube-scheduler")
        standby.elector.watch_lease = True
        watches = 0
        watch = standby.elector.lock.watch

        def counted() -> AsyncIterator[dict]:
            nonlocal watches
            watches += 1
            return watch()

        standby.elector.lock.watch = counted  # type: ignore[method-assign]
        with caplog.at_level(logging.INFO, logger="kubesched.client.leaderelection"):
            standby.run()
            await asyncio.sleep(RETRY_PERIOD * 5)
        assert watches == 1 and not standby.started.is_set() and standby.leaders == ["a"]
        assert "cannot watch lease kube-system/kube-scheduler" in caplog.text and "forbidden" in caplog.text
        await leader.stop()
        await asyncio.wait_for(standby.started.wait(), 5)
        await standby.stop()
    finally:
        await scheduler.close()
        await server.stop()


async def test_the_watchdog_fails_only_for_a_leader_that_has_not_renewed_past_its_lease_and_tolerance(client):
    a = Candidate(client, "a")
    assert a.elector.check() is None  # not leading: nothing to report
    a.run()
    await asyncio.wait_for(a.started.wait(), 5)
    assert a.elector.check() is None
    a.elector.observed_time -= LEASE_DURATION + 21
    assert a.elector.check() == "failed election to renew leadership on lease kube-scheduler"
    await a.stop()


@pytest.mark.parametrize(("lease", "renew", "retry", "message"), [
    (10, 10, 2, "leaseDuration must be greater than renewDeadline"),
    (15, 2.4, 2, "renewDeadline must be greater than retryPeriod*JitterFactor"),
    (15, 10, 0, "retryPeriod must be greater than zero"),
])
def test_durations_are_validated_as_new_leader_elector_does(lease, renew, retry, message):
    with pytest.raises(LeaderElectionConfigError, match=re.escape(message)):
        validate_durations(lease, renew, retry)


def test_identities_are_hostname_underscore_uuid_and_unique():
    a, b = new_identity(), new_identity()
    assert a != b and a.split("_")[0] == b.split("_")[0] and len(a.split("_")[-1]) == 36


def test_the_transition_event_is_a_core_event_on_the_lease():
    lease = {"metadata": {"name": "kubesched", "namespace": "kube-system", "uid": "u1", "resourceVersion": "7"}}
    event = legacy_event(lease, "x_1 became leader", "kubesched", 1_700_000_000.5)
    assert event["reason"] == "LeaderElection" and event["type"] == "Normal" and event["message"] == "x_1 became leader"
    assert event["involvedObject"] == {"kind": "Lease", "namespace": "kube-system", "name": "kubesched", "uid": "u1",
                                       "apiVersion": "coordination.k8s.io/v1", "resourceVersion": "7"}
    assert event["source"] == {"component": "kubesched"} and event["metadata"]["namespace"] == "kube-system"
