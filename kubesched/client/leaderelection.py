"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics
(``tools/leaderelection`` and ``resourcelock.LeaseLock``), so kubesched replicas and tools that read
the Lease (kubectl, monitoring) see what they would see for kube-scheduler.

* A candidate tries every ``retry_period`` (jittered by up to 1.2x) to take the Lease: it creates it
  when missing, and otherwise takes it only when its holder is empty (released) or when the record
  has not changed for the holder's ``leaseDurationSeconds`` as measured on the candidate's own clock
  since it last *observed a change* (never by comparing timestamps written by another machine).
* Every write carries the resourceVersion last read, so two candidates can never both win
  (optimistic concurrency: the loser gets a 409 and tries again later).
* The leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it stops
  leading (``on_stopped_leading``; kube-scheduler then exits with status 1).
* Fencing, stricter than client-go: ``fence()`` says whether this replica can still prove it holds
  the Lease, i.e. whether its last successful renewal *started* less than ``renew_deadline`` ago
  on its own monotonic clock (which keeps running while the process is stopped). A standby takes
  over at the earliest ``lease_duration`` after it observed that renewal, so a replica that writes
  only while ``fence()`` is None never writes after a standby acquired, with ``lease_duration -
  renew_deadline`` to spare for a write already on its way. The renew loop gives up at the same
  point (``renew_deadline`` after the last renewal, not after the current attempt started) and at
  once when it reads the Lease held by another replica.
* ``stop()`` (SIGTERM) ends the loop and, with ``release_on_cancel``, writes an empty holder with a
  1-second duration so a standby takes over at its next retry instead of a whole lease later.
* Prompt takeover, beyond client-go: with client-go's polling a standby observes a renewal only at
  its next jittered retry (up to ``2.2 * retry_period`` late) and, once the lease has run out,
  takes it only at its next jittered retry again, so a failover can take ``lease_duration + 4.4 *
  retry_period``. Here a candidate (a) with ``watch_lease``, also watches its Lease, so a renewal
  is observed when the API server applies it, and (b) makes its next attempt no later than the
  moment the lease it observed runs out on its clock. The rule that decides a takeover is
  unchanged (``lease_duration`` on the candidate's clock since it observed the last change, and
  that observation is never earlier than the renewal started), so the fencing margin stays
  ``lease_duration - renew_deadline``; a lost or stalled watch only falls back to polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from kubesched.api.apierrors import APIError, Forbidden
from kubesched.api.kinds import kind_for
from kubesched.api.watch import ADDED, MODIFIED
from kubesched.utils.clock import rfc3339_micro

log = logging.getLogger(__name__)

LEASE = kind_for("coordination.k8s.io/v1", "Lease")
JITTER_FACTOR = 1.2
#: The name kube-scheduler gives its elector (metrics label, health check message).
ELECTION_NAME = "kube-scheduler"
#: How long past the lease a leader may go without renewing before ``check`` reports it unhealthy.
WATCHDOG_TOLERANCE = 20.0
#: Seconds an attempt timed for the expiry of a lease waits past it, so the lease has surely run out
#: on the candidate's clock when the attempt checks (asyncio may wake a timer a clock tick early).
EXPIRY_MARGIN = 0.01


class LeaderElectionConfigError(ValueError):
    """Durations ``NewLeaderElector`` rejects."""


def new_identity() -> str:
    """hostname + "_" + a UUID, as kube-scheduler builds its holder identity, so two processes on one
    host never share it."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionRecord:
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict | None) -> LeaderElectionRecord:
        spec = spec or {}
        return cls(spec.get("holderIdentity") or "", int(spec.get("leaseDurationSeconds") or 0),
                   spec.get("acquireTime") or "", spec.get("renewTime") or "", int(spec.get("leaseTransitions") or 0))

    def to_spec(self) -> dict:
        return {"holderIdentity": self.holder_identity, "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time, "leaseTransitions": self.leader_transitions}


class LeaseLock:
    """``resourcelock.LeaseLock``: the Lease last read or written is kept, so updates carry its
    resourceVersion. ``recorder(lease, message)`` records the "became leader" / "stopped leading"
    events when given."""

    def __init__(self, client: Any, namespace: str, name: str, identity: str,
                 recorder: Callable[[dict, str], None] | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.recorder = recorder
        self.lease: dict | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> LeaderElectionRecord | None:
        """The current record, or None when the Lease does not exist."""
        lease = await self.client.get(LEASE, self.namespace, self.name)
        if lease is None:
            return None
        self.lease = lease
        return LeaderElectionRecord.from_spec(lease.get("spec"))

    async def create(self, record: LeaderElectionRecord) -> None:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.to_spec()}
        self.lease = await self.client.create(LEASE, lease)

    async def update(self, record: LeaderElectionRecord) -> None:
        if self.lease is None:
            raise APIError("lease not initialized, call get or create first")
        lease = {**self.lease, "spec": record.to_spec()}
        self.lease = await self.client.update(LEASE, lease)

    async def watch(self) -> AsyncIterator[dict]:
        """The Lease each time the API server changes it (a watch on this one object, from its
        current version); ends when the stream ends, raises what the watch raises. Nothing when the
        Lease does not exist yet (the candidate's next attempt creates it). ``self.lease``, which
        updates are made from, is left alone: only what an attempt read is ever written back."""
        current = await self.client.get(LEASE, self.namespace, self.name)
        if current is None:
            return
        version = str((current.get("metadata") or {}).get("resourceVersion") or "")
        async for batch in self.client.watch(LEASE, version, namespace=self.namespace,
                                             field_selector=f"metadata.name={self.name}"):
            for event in batch:
                if event.type in (ADDED, MODIFIED):
                    yield event.object

    def record_event(self, message: str) -> None:
        if self.recorder is None or self.lease is None:
            return
        try:
            self.recorder(self.lease, f"{self.identity} {message}")
        except Exception as e:  # events are best effort
            log.debug("could not record leader election event: %s", e)


class LeaderElector:
    """See the module docstring. Callbacks are plain functions, called on the event loop:
    ``on_started_leading()`` once the Lease is held, ``on_stopped_leading()`` when ``run`` ends
    (whether leadership was lost or ``stop()`` asked for it), ``on_new_leader(identity)`` whenever a
    different holder is observed."""

    def __init__(self, lock: LeaseLock, *, lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, on_started_leading: Callable[[], None],
                 on_stopped_leading: Callable[[], None], on_new_leader: Callable[[str], None] | None = None,
                 release_on_cancel: bool = True, name: str = ELECTION_NAME, registry: Any = None,
                 watch_lease: bool = False, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, rng: random.Random | None = None) -> None:
        """``watch_lease``: a candidate also watches the Lease (its client's ``watch`` must take
        ``namespace`` and ``field_selector``); ``clock``, ``wall`` and ``rng`` (the retry jitter)
        are for tests."""
        validate_durations(lease_duration, renew_deadline, retry_period)
        if not lock.identity:
            raise LeaderElectionConfigError("Lock identity is empty")
        self.lock = lock
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self.name = name
        self.watch_lease = watch_lease
        self.clock = clock
        self.wall = wall
        self.rng = rng or random.Random()
        self.observed_record = LeaderElectionRecord()
        self.observed_raw: LeaderElectionRecord | None = None
        self.observed_time = 0.0
        self.reported_leader = ""
        #: Monotonic time at which the last successful acquire or renewal of this replica started.
        self.renewed_at: float | None = None
        self.stop_requested = False
        self._stop = asyncio.Event()
        self._metrics = _LeaderMetrics(registry, name)

    # --- public ---------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        return self.lock.identity

    def is_leader(self) -> bool:
        return self.observed_record.holder_identity == self.identity

    def get_leader(self) -> str:
        return self.observed_record.holder_identity

    def stop(self) -> None:
        """End ``run`` at its next step, releasing the Lease if held (the context cancel of client-go)."""
        self.stop_requested = True
        self._stop.set()

    def fence(self) -> str | None:
        """Why this replica must not write as the leader now, or None while its last renewal is
        younger than ``renew_deadline``."""
        if self.renewed_at is None or not self.is_leader():
            return f"not holding the lease {self.lock.describe()}"
        age = self.clock() - self.renewed_at
        if age >= self.renew_deadline:
            return (f"lease {self.lock.describe()} last renewed {age:.1f}s ago, not within the renew deadline "
                    f"({self.renew_deadline:g}s): another replica may be leading")
        return None

    def check(self, max_tolerable_expired: float = WATCHDOG_TOLERANCE) -> str | None:
        """The ``leaderElection`` health check: an error once a leader has not renewed for its lease
        duration plus ``max_tolerable_expired`` (it should have exited by then)."""
        if not self.is_leader():
            return None
        if self.clock() - self.observed_time > self.lease_duration + max_tolerable_expired:
            return f"failed election to renew leadership on lease {self.name}"
        return None

    async def run(self) -> None:
        """Acquire, call ``on_started_leading``, renew until lost or stopped; ``on_stopped_leading``
        always runs at the end."""
        try:
            if not await self._acquire():
                return
            _call(self.on_started_leading)
            await self._renew()
        finally:
            _call(self.on_stopped_leading)

    # --- loops ------------------------------------------------------------------------------------
    async def _acquire(self) -> bool:
        log.info("attempting to acquire leader lease %s...", self.lock.describe())
        watcher = asyncio.get_running_loop().create_task(self._watch(), name="lease-watch") if self.watch_lease else None
        try:
            return await self._acquire_loop()
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)

    async def _acquire_loop(self) -> bool:
        while not self._stop.is_set():
            succeeded = await self._bounded_try(self.renew_deadline)
            self._report_transition()
            if succeeded:
                self.lock.record_event("became leader")
                self._metrics.leader(True)
                log.info("successfully acquired lease %s", self.lock.describe())
                return True
            log.debug("failed to acquire lease %s", self.lock.describe())
            if await self._sleep(self.next_attempt_in()):
                break
        return False

    def next_attempt_in(self) -> float:
        """Seconds until a candidate's next attempt: client-go's jittered retry period
        (``wait.Jitter(retryPeriod, 1.2)``), cut short so the attempt comes right after the lease
        this candidate observed runs out."""
        jittered = self.retry_period * (1 + self.rng.random() * JITTER_FACTOR)
        if not self.observed_record.holder_identity or self.is_leader():
            return jittered
        expires_in = self.observed_time + self.observed_record.lease_duration_seconds - self.clock()
        return max(0.0, min(jittered, expires_in + EXPIRY_MARGIN))

    async def _watch(self) -> None:
        """While a candidate: observe every change of the Lease as it happens. A failure (a dropped
        watch, a 410) waits one retry period and watches again; a forbidden watch (kube-scheduler's
        own RBAC role grants only get and update on its Lease) is not tried again. Either way the
        attempts' own reads go on, as with client-go."""
        while not self._stop.is_set():
            try:
                async for lease in self.lock.watch():
                    self.observe(LeaderElectionRecord.from_spec(lease.get("spec")))
            except Forbidden as e:
                log.info("cannot watch lease %s (%s): observing it at each attempt only, as client-go does; grant "
                         "watch on it for a prompt takeover", self.lock.describe(), e)
                return
            except Exception as e:
                log.debug("watch of lease %s ended: %s", self.lock.describe(), e or type(e).__name__)
            if await self._sleep(self.retry_period):
                return

    def observe(self, record: LeaderElectionRecord) -> None:
        """A record seen outside an attempt (the watch): a change restarts the lease on this
        candidate's clock, exactly as when an attempt reads it."""
        if record == self.observed_raw:
            return
        self._set_observed(record)
        self.observed_raw = record
        self._report_transition()

    async def _renew(self) -> None:
        try:
            while not self._stop.is_set():
                renewed = await self._renew_within_deadline()
                self._report_transition()
                if not renewed:
                    self.renewed_at = None
                    self._metrics.leader(False)
                    log.info("failed to renew lease %s: timed out waiting for the condition", self.lock.describe())
                    break
                log.debug("successfully renewed lease %s", self.lock.describe())
                if await self._sleep(self.retry_period):
                    break
        finally:
            self.lock.record_event("stopped leading")
        if self.release_on_cancel:
            await self._release()

    async def _renew_within_deadline(self) -> bool:
        """PollImmediateUntil(retryPeriod) until ``renew_deadline`` after the last renewal; False on
        timeout, on stop, or as soon as another replica is seen holding the Lease."""
        last = self.renewed_at if self.renewed_at is not None else self.clock()
        deadline = last + self.renew_deadline
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            if await self._bounded_try(remaining):
                return True
            if self.observed_record.holder_identity not in ("", self.identity):
                log.info("lease %s is held by %s", self.lock.describe(), self.observed_record.holder_identity)
                return False
            remaining = deadline - self.clock()
            if remaining <= 0 or await self._sleep(min(self.retry_period, remaining)):
                return False

    async def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` unless stopped first; True when stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)
        return self._stop.is_set()

    async def _bounded_try(self, seconds: float) -> bool:
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), seconds)
        except TimeoutError:
            log.error("error retrieving resource lock %s: context deadline exceeded", self.lock.describe())
            return False

    # --- one attempt --------------------------------------------------------------------------------
    async def try_acquire_or_renew(self) -> bool:
        """client-go's ``tryAcquireOrRenew``: True when this candidate holds the Lease afterwards
        (``renewed_at`` is then the moment the attempt started)."""
        started = self.clock()
        held = await self._try_acquire_or_renew()
        if held:
            self.renewed_at = started
        return held

    async def _try_acquire_or_renew(self) -> bool:
        now = self.wall()
        stamp = rfc3339_micro(now)
        record = LeaderElectionRecord(self.identity, int(self.lease_duration), stamp, stamp, 0)
        if self.is_leader() and self._lease_valid():
            old = self.observed_record
            fast = LeaderElectionRecord(record.holder_identity, record.lease_duration_seconds, old.acquire_time,
                                        stamp, old.leader_transitions)
            try:
                await self.lock.update(fast)
                self._set_observed(fast)
                return True
            except Exception as e:
                log.error("Failed to update lock optimistically: %s, falling back to slow path", e)
        try:
            old_record = await self.lock.get()
        except Exception as e:
            log.error("error retrieving resource lock %s: %s", self.lock.describe(), e)
            return False
        if old_record is None:
            try:
                await self.lock.create(record)
            except Exception as e:
                log.error("error initially creating leader election record: %s", e)
                return False
            self._set_observed(record)
            return True
        if self.observed_raw != old_record:
            self._set_observed(old_record)
            self.observed_raw = old_record
        if old_record.holder_identity and self._lease_valid() and not self.is_leader():
            log.debug("lock is held by %s and has not yet expired", old_record.holder_identity)
            return False
        if self.is_leader():
            record = LeaderElectionRecord(record.holder_identity, record.lease_duration_seconds, old_record.acquire_time,
                                          stamp, old_record.leader_transitions)
            self._metrics.slow_path()
        else:
            record = LeaderElectionRecord(record.holder_identity, record.lease_duration_seconds, stamp, stamp,
                                          old_record.leader_transitions + 1)
        try:
            await self.lock.update(record)
        except Exception as e:
            log.error("Failed to update lock: %s", e)
            return False
        self._set_observed(record)
        return True

    async def _release(self) -> bool:
        """Give the Lease up: empty holder, 1-second duration, transitions kept."""
        if not self.is_leader():
            return True
        stamp = rfc3339_micro(self.wall())
        record = LeaderElectionRecord("", 1, stamp, stamp, self.observed_record.leader_transitions)
        try:
            await asyncio.wait_for(self.lock.update(record), self.renew_deadline)
        except Exception as e:
            log.error("Failed to release lock: %s", e or type(e).__name__)
            return False
        self._set_observed(record)
        return True

    # --- bookkeeping -------------------------------------------------------------------------------
    def _lease_valid(self) -> bool:
        return self.observed_time + self.observed_record.lease_duration_seconds > self.clock()

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self.observed_record = record
        self.observed_time = self.clock()

    def _report_transition(self) -> None:
        holder = self.observed_record.holder_identity
        if holder == self.reported_leader:
            return
        self.reported_leader = holder
        if self.on_new_leader is not None:
            _call(self.on_new_leader, holder)


def validate_durations(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """``NewLeaderElector``'s checks, in its order and words."""
    if lease_duration <= renew_deadline:
        raise LeaderElectionConfigError("leaseDuration must be greater than renewDeadline")
    if renew_deadline <= JITTER_FACTOR * retry_period:
        raise LeaderElectionConfigError("renewDeadline must be greater than retryPeriod*JitterFactor")
    if lease_duration <= 0:
        raise LeaderElectionConfigError("leaseDuration must be greater than zero")
    if renew_deadline <= 0:
        raise LeaderElectionConfigError("renewDeadline must be greater than zero")
    if retry_period <= 0:
        raise LeaderElectionConfigError("retryPeriod must be greater than zero")


class _LeaderMetrics:
    """client-go's leader election metrics: ``leader_election_master_status{name}`` and
    ``leader_election_slowpath_total{name}``."""

    def __init__(self, registry: Any, name: str) -> None:
        self.name = name
        self.status = self.slowpath = None
        if registry is None:
            return
        from prometheus_client import Counter, Gauge

        self.status = Gauge("leader_election_master_status", "Gauge of if the reporting system is master of the relevant "
                            "lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. "
                            "Please make sure to group by name.", ["name"], registry=registry)
        self.slowpath = Counter("leader_election_slowpath", "Total number of slow path exercised in renewing leader leases. "
                                "'name' is the string used to identify the lease. Please make sure to group by name.",
                                ["name"], registry=registry)
        self.status.labels(name).set(0)

    def leader(self, on: bool) -> None:
        if self.status is not None:
            self.status.labels(self.name).set(1 if on else 0)

    def slow_path(self) -> None:
        if self.slowpath is not None:
            self.slowpath.labels(self.name).inc()


def _call(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("leader election callback %s failed", getattr(fn, "__qualname__", fn))


def legacy_event(lease: dict, message: str, component: str, wall: float) -> dict:
    """The core/v1 Event the legacy recorder writes for a leader election transition (reason
    ``LeaderElection`` on the Lease, source component = the first profile's scheduler name)."""
    meta = lease.get("metadata") or {}
    stamp = rfc3339_micro(wall)
    seconds = stamp[:19] + "Z"
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name')}.{int(wall * 1e9):x}", "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"kind": "Lease", "namespace": meta.get("namespace"), "name": meta.get("name"), "uid": meta.get("uid"),
                           "apiVersion": "coordination.k8s.io/v1", "resourceVersion": meta.get("resourceVersion")},
        "reason": "LeaderElection", "message": message, "type": "Normal", "count": 1,
        "firstTimestamp": seconds, "lastTimestamp": seconds,
        "source": {"component": component}, "reportingComponent": component, "reportingInstance": "",
    }
