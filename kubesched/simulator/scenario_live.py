"""Scenarios on the live cluster of ``kubesched up``, started from its web UI.

``POST /ui/api/scenarios`` takes a scenario file (the format of ``simulate --scenario``,
docs/scenarios.md), checks all of it, and runs it as a task on ``up``'s event loop: the steps are
the operations of ``scenario_runner`` (the same code the virtual clock runs), sent through the API
server over HTTPS with the caller's own bearer token, so RBAC, admission and validation judge each
write as they judge kubectl's, and every change reaches the watches. ``up`` runs in real time: a
run has a speed factor (``at: 90s`` at 10x fires 9 s after the start) and can skip the wait for
its next step. The run's status lists each step's state and what happened since it fired (the
timeline of ``simulate --scenario``, on the run's clock).

One run at a time: starting another while one runs is a 409. The last ``KEPT_RUNS`` runs stay
readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
from aiohttp import web

from kubesched.api.apierrors import APIError, BadRequest, Conflict, NotFound
from kubesched.api.kinds import NODE, POD, Kind
from kubesched.apiserver import APIServer
from kubesched.apiserver.authn import UserInfo
from kubesched.apiserver.handlers import NotFoundPath, method_not_allowed
from kubesched.apiserver.store import ObjectStore
from kubesched.apiserver.webui import UI_API_PREFIX
from kubesched.client.kube import api_error, resource_path
from kubesched.simulator.scenario import Scenario, ScenarioError, describe_seconds, parse_scenario
from kubesched.simulator.scenario_runner import ScenarioRunner
from kubesched.simulator.timeline import Timeline
from kubesched.utils.clock import Clock, rfc3339

#: The fastest a run may go (a factor of scenario time over wall time).
MAX_SPEED = 1000.0
#: Wall seconds the timeline keeps recording the cluster's reaction after the last step is done.
LINGER = 30.0
#: The latest timeline entries a status carries (the per-step counts cover all of them).
TIMELINE_SHOWN = 500
#: Finished runs kept for reading.
KEPT_RUNS = 10
#: Writes retried when the object changed between the read and the write.
MUTATE_ATTEMPTS = 5
USER_AGENT = "kubesched-ui-scenario"
_BODY_HELP = 'the body must be a JSON object {"scenario": "<the scenario file>", "speed": 1, "name": "<file name>"}'


class ApiAccess:
    """The cluster through the API server, as the holder of the session's bearer token."""

    def __init__(self, session: aiohttp.ClientSession, url: str, clock: Clock) -> None:
        self.session = session
        self.url = url
        self.clock = clock

    def timestamp(self) -> str:
        return rfc3339(self.clock.wall())

    async def _call(self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None) -> dict:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT, "Content-Type": "application/json"}
        data = orjson.dumps(body) if body is not None else None
        try:
            async with self.session.request(method, self.url + path, data=data, params=params, headers=headers) as resp:
                payload = await resp.read()
                status = resp.status
        except aiohttp.ClientError as e:
            raise APIError(f"{method} {path}: {e or type(e).__name__}") from e
        if status >= 400:
            raise api_error(status, payload)
        return orjson.loads(payload) if payload else {}

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        try:
            return await self._call("GET", resource_path(kind, namespace, name))
        except NotFound:
            return None

    async def nodes(self) -> list[dict]:
        return list((await self._call("GET", resource_path(NODE))).get("items") or [])

    async def pods_on(self, node: str) -> list[dict]:
        found = await self._call("GET", resource_path(POD), params={"fieldSelector": f"spec.nodeName={node}"})
        return list(found.get("items") or [])

    async def create(self, kind: Kind, obj: dict) -> None:
        namespace = (obj["metadata"].get("namespace") or "default") if kind.namespaced else None
        await self._call("POST", resource_path(kind, namespace), obj)

    async def replace(self, kind: Kind, obj: dict) -> None:
        meta = obj["metadata"]
        namespace = (meta.get("namespace") or "default") if kind.namespaced else None
        await self._call("PUT", resource_path(kind, namespace, meta["name"]), obj)

    async def delete(self, kind: Kind, namespace: str | None, name: str) -> None:
        await self._call("DELETE", resource_path(kind, namespace, name))

    async def mutate(self, kind: Kind, namespace: str | None, name: str, change: Callable[[dict], None]) -> None:
        for attempt in range(MUTATE_ATTEMPTS):
            obj = await self._call("GET", resource_path(kind, namespace, name))
            change(obj)
            try:
                await self._call("PUT", resource_path(kind, namespace, name), obj)
                return
            except Conflict:
                if attempt == MUTATE_ATTEMPTS - 1:
                    raise

    async def evict(self, namespace: str, name: str, grace: int | None, uid: str | None) -> None:
        options: dict[str, Any] = {}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid:
            options["preconditions"] = {"uid": uid}
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if options:
            body["deleteOptions"] = options
        await self._call("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction", body)


class RunClock:
    """Scenario seconds since the run began: wall time times the speed, plus the waits skipped."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._loop = asyncio.get_running_loop()
        self._mark = self._loop.time()
        self._base = 0.0
        self._frozen = False

    def now(self) -> float:
        if self._frozen:
            return self._base
        return self._base + (self._loop.time() - self._mark) * self.speed

    def freeze(self) -> None:
        """Stop the clock where it is (the run is over)."""
        self._base, self._frozen = self.now(), True

    def jump(self, to: float) -> None:
        """Move the clock forward to ``to`` (the time of the step run at once)."""
        if to > self.now():
            self._base, self._mark = to, self._loop.time()


class RunTimeline(Timeline):
    """The timeline of ``simulate --scenario``, timed by the run's clock."""

    def __init__(self, store: ObjectStore, clock: RunClock) -> None:
        super().__init__(store)
        self.clock = clock

    def now(self) -> float:
        return self.clock.now()


@dataclass
class StepState:
    """Where a step is: ``pending``, ``running``, ``done``, ``failed`` (with ``error``) or ``cancelled``."""

    state: str = "pending"
    error: str = ""
    #: Where the step's entries begin on the timeline (None until it fired).
    mark: int | None = None
    fired_at: float | None = None


@dataclass
class ScenarioRun:
    """One run: its steps' states, its timeline and the task that drives it."""

    id: str
    name: str
    scenario: Scenario
    clock: RunClock
    timeline: RunTimeline
    user: str
    state: str = "running"
    #: Why the run stopped short (``failed``), beyond its steps' own errors.
    error: str = ""
    steps: list[StepState] = field(default_factory=list)
    #: The step whose time the run waits for (None when it waits for none).
    waiting: int | None = None
    skip: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None

    def status(self) -> dict:
        """The document ``GET /ui/api/scenarios/{id}`` answers (docs/web-ui.md describes it)."""
        entries = self.timeline.entries
        marks = [s.mark for s in self.steps]
        owner = _step_of_entries(marks, len(entries))
        counts: list[Counter[str]] = [Counter() for _ in self.steps]
        for index, entry in zip(owner, entries, strict=True):
            if index is not None and entry.event not in ("step", "error"):
                counts[index][entry.event] += 1
        shown = range(max(0, len(entries) - TIMELINE_SHOWN), len(entries))
        return {
            "id": self.id, "name": self.name, "state": self.state, "user": self.user, "speed": self.clock.speed,
            "now": _moment(self.clock.now()), "seconds": round(self.clock.now(), 3), "waiting": self.waiting,
            "steps": [self._step(i, s, counts[i]) for i, s in enumerate(self.steps)],
            "timeline": [{**entries[i].to_json(), "at": _moment(entries[i].seconds), "step": owner[i]} for i in shown],
            "timelineTotal": len(entries), **({"error": self.error} if self.error else {}),
        }

    def _step(self, index: int, state: StepState, counts: Counter[str]) -> dict:
        step = self.scenario.steps[index]
        out: dict[str, Any] = {"index": index, "at": step.at, "seconds": step.seconds, "operation": step.operation,
                               "description": step.describe(), "state": state.state, "happened": dict(counts)}
        if step.name:
            out["name"] = step.name
        if state.error:
            out["error"] = state.error
        if state.fired_at is not None:
            out["firedAt"] = _moment(state.fired_at)
        return out


def _moment(seconds: float) -> str:
    """Seconds of a run's clock, to the tenth (a real clock's readings carry noise below that)."""
    return describe_seconds(round(seconds, 1))


def _step_of_entries(marks: list[int | None], total: int) -> list[int | None]:
    """For each timeline entry, the last step fired before it (None before the first)."""
    owner: list[int | None] = [None] * total
    for index, mark in enumerate(marks):
        if mark is None:
            continue
        end = next((m for m in marks[index + 1:] if m is not None), total)
        owner[mark:end] = [index] * (end - mark)
    return owner


class LiveRunner(ScenarioRunner):
    """The runner of ``simulate --scenario`` on the run's clock, reporting each step's state."""

    end_reason = "the scenario was cancelled"

    def __init__(self, run: ScenarioRun, store: ObjectStore, access: ApiAccess) -> None:
        super().__init__(run.scenario, store, run.timeline, access)
        self.run_state = run

    async def wait_until(self, at: float) -> None:
        run = self.run_state
        run.waiting = len([s for s in run.steps if s.mark is not None])
        try:
            while (remaining := at - run.clock.now()) > 0:
                run.skip.clear()
                try:
                    await asyncio.wait_for(run.skip.wait(), remaining / run.clock.speed)
                except TimeoutError:
                    continue
                run.clock.jump(at)
        finally:
            run.waiting = None

    def scaled(self, seconds: float) -> float:
        return seconds / self.run_state.clock.speed

    def on_step(self, index: int, state: str, message: str = "") -> None:
        step = self.run_state.steps[index]
        if state == "running":
            step.mark, step.fired_at = len(self.timeline.entries) - 1, self.timeline.now()
        step.state, step.error = state, message


class ScenarioService:
    """``/ui/api/scenarios``: start, read, hurry and cancel runs on ``server``'s cluster."""

    def __init__(self, server: APIServer) -> None:
        self.server = server
        self.runs: dict[str, ScenarioRun] = {}
        self._ids = itertools.count(1)

    def current(self) -> ScenarioRun | None:
        return next((r for r in self.runs.values() if r.state == "running"), None)

    async def handle(self, request: web.Request, user: UserInfo | None) -> web.StreamResponse:
        """Dispatch one request under ``/ui/api/`` (authenticated and authorized already)."""
        parts = [p for p in request.path[len(UI_API_PREFIX):].split("/") if p]
        if not parts or parts[0] != "scenarios" or len(parts) > 3:
            raise NotFoundPath()
        method = request.method
        if len(parts) == 1:
            if method == "GET":
                return _json(200, {"items": [r.status() for r in self.runs.values()]})
            if method == "POST":
                return _json(201, (await self.start(request, user)).status())
            raise method_not_allowed()
        run = self.runs.get(parts[1])
        if run is None:
            raise NotFound(f'scenario run "{parts[1]}" not found')
        if len(parts) == 3:
            if parts[2] != "next":
                raise NotFoundPath()
            if method != "POST":
                raise method_not_allowed()
            return _json(200, self.next_step(run).status())
        if method == "GET":
            return _json(200, run.status())
        if method == "DELETE":
            await self.cancel(run)
            return _json(200, run.status())
        raise method_not_allowed()

    async def start(self, request: web.Request, user: UserInfo | None) -> ScenarioRun:
        token = self._caller_token(request)
        name, scenario, speed = _read_body(await request.read())
        running = self.current()
        if running is not None:
            raise Conflict(f'scenario run "{running.id}" ({running.name}) is still running: wait for it to finish or cancel it '
                           f"(DELETE {UI_API_PREFIX}scenarios/{running.id})")
        clock = RunClock(speed)
        title = str(scenario.metadata.get("name") or name)
        run = ScenarioRun(str(next(self._ids)), title, scenario, clock, RunTimeline(self.server.store, clock),
                          user.name if user is not None else "system:anonymous", steps=[StepState() for _ in scenario.steps])
        self.runs[run.id] = run
        for old in list(self.runs)[:-KEPT_RUNS]:
            del self.runs[old]
        run.task = asyncio.get_running_loop().create_task(self._drive(run, token), name=f"scenario run {run.id}")
        return run

    def _caller_token(self, request: web.Request) -> str:
        """The bearer token the steps are sent with: the caller's own (a server without
        authentication needs none)."""
        if not self.server.security.enabled:
            return ""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip() or "Impersonate-User" in request.headers:
            raise BadRequest("a scenario runs with its caller's credential: send the request with a bearer token "
                             "(Authorization: Bearer TOKEN), without impersonation")
        return token.strip()

    async def _drive(self, run: ScenarioRun, token: str) -> None:
        """Run every step, wait for the drains, then record the cluster's reaction a little longer."""
        session = self.server.client_session(token) if token else aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.server.security.client_ssl_context()))
        runner = LiveRunner(run, self.server.store, ApiAccess(session, self.server.url, self.server.store.clock))
        run.timeline.start()
        try:
            await runner.run()
            await runner.drains_done()
            run.state = "finished"
            await asyncio.sleep(LINGER)
        except asyncio.CancelledError:
            await runner.stop()
            if run.state == "running":  # not a finished run whose recording was stopped
                run.state = "cancelled"
                for step in run.steps:
                    if step.state == "pending":
                        step.state = "cancelled"
            raise
        except Exception as e:  # a run must end in a state the page can show, whatever broke it
            run.state, run.error = "failed", f"{type(e).__name__}: {e}"
            await runner.stop()
        finally:
            run.timeline.stop()
            run.clock.freeze()
            await session.close()

    def next_step(self, run: ScenarioRun) -> ScenarioRun:
        """Fire the step the run waits for now, instead of at its time."""
        if run.state != "running" or run.waiting is None:
            raise Conflict(f'scenario run "{run.id}" is waiting for no step')
        run.skip.set()
        return run

    async def cancel(self, run: ScenarioRun) -> None:
        """Stop a run: steps not yet fired are not, drains still evicting stop where they are."""
        if run.state != "running" or run.task is None:
            if run.task is not None and not run.task.done():
                run.task.cancel()  # finished, but still recording: stop that
                await asyncio.gather(run.task, return_exceptions=True)
            return
        run.task.cancel()
        await asyncio.gather(run.task, return_exceptions=True)

    async def close(self) -> None:
        for run in self.runs.values():
            if run.task is not None and not run.task.done():
                run.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(run.task, return_exceptions=True)


def _read_body(body: bytes) -> tuple[str, Scenario, float]:
    """The scenario's name, the checked scenario and the speed; a 400 naming what is wrong."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise BadRequest(f"scenario: {_BODY_HELP}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("scenario"), str):
        raise BadRequest(f"scenario: {_BODY_HELP}")
    unknown = sorted(set(doc) - {"scenario", "speed", "name"})
    if unknown:
        raise BadRequest(f"scenario: unknown field(s) {', '.join(unknown)}: {_BODY_HELP}")
    name = doc.get("name", "scenario")
    if not isinstance(name, str) or not 0 < len(name) <= 253:
        raise BadRequest("scenario: name must be a string of 1 to 253 characters")
    speed = doc.get("speed", 1)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0 < speed <= MAX_SPEED:
        raise BadRequest(f"scenario: speed must be a number above 0 and at most {MAX_SPEED:g}, got {speed!r}")
    try:
        scenario = parse_scenario(doc["scenario"], name, None)
    except ScenarioError as e:
        raise BadRequest(str(e)) from None
    return name, scenario, float(speed)


def _json(status: int, body: dict) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(body),
                        headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"})
