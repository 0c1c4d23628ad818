"""Failover after a leader is killed, on virtual time: a leader and a standby elect on one Lease
held by an in-memory API with request latency; the leader is killed (no release) at many phases
of its renewal cycle and the standby's takeover is measured on the loop's clock.

With client-go's polling alone, a standby observes the last renewal at its next jittered retry and
takes the Lease at its next jittered retry after the lease ran out: up to ``leaseDuration + 2 x 2.2
x retryPeriod`` after that renewal. kubesched's standby watches the Lease and times its attempt for
the moment the lease runs out, so the takeover follows the kill within ``leaseDuration +
retryPeriod``; and never sooner than ``leaseDuration`` after the leader's last renewal started
(the margin its fencing relies on)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kubesched.api.apierrors import Conflict
from kubesched.api.watch import ADDED, MODIFIED, WatchEvent
from kubesched.client.leaderelection import JITTER_FACTOR, LeaderElectionRecord, LeaderElector, LeaseLock
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0
#: One request's round trip on the in-memory API (the write is applied halfway).
LATENCY = 0.02
KILL_PHASES = [round(0.1 * i, 1) for i in range(30)]


class LeaseAPI:
    """Get, create, update (a 409 on a stale resourceVersion) and watch of one Lease, each taking
    ``LATENCY`` of loop time."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.version = 0
        self.changed = asyncio.Condition()
        #: (loop time applied, holder) of every write.
        self.writes: list[tuple[float, str]] = []

    async def _half_trip(self) -> None:
        await asyncio.sleep(LATENCY / 2)

    async def get(self, kind: object, namespace: str | None, name: str) -> dict | None:
        await self._half_trip()
        lease = None if self.lease is None else {**self.lease, "metadata": dict(self.lease["metadata"])}
        await self._half_trip()
        return lease

    async def create(self, kind: object, obj: dict) -> dict:
        await self._half_trip()
        if self.lease is not None:
            raise Conflict("leases.coordination.k8s.io already exists")
        stored = await self._store(obj)
        await self._half_trip()
        return stored

    async def update(self, kind: object, obj: dict) -> dict:
        await self._half_trip()
        assert self.lease is not None
        if obj["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified; please apply your changes to the latest version and try again")
        stored = await self._store(obj)
        await self._half_trip()
        return stored

    async def _store(self, obj: dict) -> dict:
        self.version += 1
        self.lease = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        self.writes.append((asyncio.get_running_loop().time(), obj["spec"]["holderIdentity"]))
        async with self.changed:
            self.changed.notify_all()
        return self.lease

    async def watch(self, kind: object, resource_version: str, *, namespace: str | None = None,
                    field_selector: str = "") -> AsyncIterator[list[WatchEvent]]:
        assert field_selector.startswith("metadata.name=") and namespace
        seen = int(resource_version)
        while True:
            await self._changed_after(seen)
            await self._half_trip()
            assert self.lease is not None
            seen = self.version
            yield [WatchEvent(MODIFIED if seen > 1 else ADDED, self.lease)]

    async def _changed_after(self, version: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.version > version)


@dataclass
class Takeover:
    killed: float
    #: Loop time at which the killed leader's last successful renewal started.
    last_renewal: float
    #: Loop time at which the standby's acquisition was applied by the API.
    acquired: float

    @property
    def failover(self) -> float:
        return self.acquired - self.killed


def elector(api: LeaseAPI, identity: str, started: asyncio.Event, *, watch_lease: bool, seed: int) -> LeaderElector:
    loop = asyncio.get_running_loop()
    return LeaderElector(LeaseLock(api, "kube-system", "kube-scheduler", identity), lease_duration=LEASE_DURATION,
                         renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD, on_started_leading=started.set,
                         on_stopped_leading=lambda: None, release_on_cancel=False, watch_lease=watch_lease,
                         clock=loop.time, wall=lambda: VIRTUAL_EPOCH + loop.time(), rng=random.Random(seed))


def kill_leader(kill_after: float, *, watch_lease: bool, seed: int) -> Takeover:
    """The leader leads, the standby has been waiting ``kill_after`` seconds past a warm-up when the
    leader is killed (its task cancelled: nothing released); then the standby takes over."""

    async def scenario() -> Takeover:
        api = LeaseAPI()
        leading, standing_by = asyncio.Event(), asyncio.Event()
        leader = elector(api, "leader", leading, watch_lease=watch_lease, seed=seed)
        leader_task = asyncio.get_running_loop().create_task(leader.run())
        await leading.wait()
        standby = elector(api, "standby", standing_by, watch_lease=watch_lease, seed=seed + 1000)
        standby_task = asyncio.get_running_loop().create_task(standby.run())
        await asyncio.sleep(20.0 + kill_after)
        leader_task.cancel()
        killed = asyncio.get_running_loop().time()
        await asyncio.gather(leader_task, return_exceptions=True)
        assert leader.renewed_at is not None and not standing_by.is_set()
        await asyncio.wait_for(standing_by.wait(), LEASE_DURATION * 3)
        standby.stop()
        await standby_task
        acquired = next(at for at, holder in api.writes if holder == "standby")
        return Takeover(killed, leader.renewed_at, acquired)

    return run_virtual(scenario())


@pytest.mark.parametrize("kill_after", KILL_PHASES)
def test_a_standby_watching_the_lease_takes_over_within_lease_duration_plus_retry_period_of_the_kill(kill_after):
    takeover = kill_leader(kill_after, watch_lease=True, seed=int(kill_after * 10))
    assert takeover.failover <= LEASE_DURATION + RETRY_PERIOD, takeover


@pytest.mark.parametrize("watch_lease", [True, False], ids=["watching", "polling"])
@pytest.mark.parametrize("kill_after", KILL_PHASES[::3])
def test_a_standby_takes_the_lease_no_sooner_than_lease_duration_after_the_last_renewal_started(kill_after, watch_lease):
    """What fencing relies on: the leader stops writing ``renewDeadline`` after its last renewal
    started, the standby writes ``leaseDuration`` after it at the earliest."""
    takeover = kill_leader(kill_after, watch_lease=watch_lease, seed=int(kill_after * 10))
    assert takeover.acquired - takeover.last_renewal >= LEASE_DURATION, takeover


@pytest.mark.parametrize("kill_after", KILL_PHASES[::3])
def test_a_polling_standby_takes_over_within_lease_duration_plus_one_jittered_retry_of_the_last_renewal(kill_after):
    """Without the watch, the renewal is observed up to one jittered retry late; the attempt timed
    for the expiry of the lease removes client-go's second jittered retry."""
    takeover = kill_leader(kill_after, watch_lease=False, seed=int(kill_after * 10))
    bound = LEASE_DURATION + RETRY_PERIOD * (1 + JITTER_FACTOR) + 4 * LATENCY
    assert takeover.acquired - takeover.last_renewal <= bound, takeover


@pytest.mark.parametrize(("holder", "observed_ago", "jitter", "want"), [
    ("", 0.0, 0.5, RETRY_PERIOD * (1 + 0.5 * JITTER_FACTOR)),  # no holder: client-go's jittered retry
    ("leader", 1.0, 0.5, RETRY_PERIOD * (1 + 0.5 * JITTER_FACTOR)),  # the lease runs long after the retry
    ("leader", 14.0, 0.5, 1.0 + 0.01),  # the lease runs out before the retry: right after it
    ("leader", 12.5, 0.0, RETRY_PERIOD),  # the unjittered retry comes first
    ("leader", 20.0, 0.9, 0.0),  # already run out: at once
    ("standby", 14.0, 0.5, RETRY_PERIOD * (1 + 0.5 * JITTER_FACTOR)),  # this candidate holds it
])
def test_the_next_attempt_comes_at_the_jittered_retry_or_right_after_the_observed_lease_runs_out(holder, observed_ago, jitter, want):
    class FixedRandom(random.Random):
        def random(self) -> float:
            return jitter

    now = 100.0
    candidate = LeaderElector(LeaseLock(LeaseAPI(), "kube-system", "kube-scheduler", "standby"), lease_duration=LEASE_DURATION,
                              renew_deadline=RENEW_DEADLINE, retry_period=RETRY_PERIOD, on_started_leading=lambda: None,
                              on_stopped_leading=lambda: None, clock=lambda: now, rng=FixedRandom())
    candidate.observed_record = LeaderElectionRecord(holder, int(LEASE_DURATION) if holder else 0)
    candidate.observed_time = now - observed_ago
    assert candidate.next_attempt_in() == pytest.approx(want)
