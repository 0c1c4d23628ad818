"""The API dispatcher of asynchronous API calls (upstream ``api_dispatcher`` and ``api_calls``):
how a call is reconciled with one queued for the same pod, the order calls reach the server, the
bound on calls in flight, and what the binder and the scheduler see."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.api.apierrors import Conflict
from kubesched.scheduler.backend.apidispatcher import (
    APICall,
    APIDispatcher,
    CallOverwritten,
    CallSkipped,
    DispatcherClosed,
    DispatchingClient,
    PodBindingCall,
    PodStatusPatchCall,
)
from kubesched.scheduler.features import FeatureGates
from kubesched.simulator.simulate import simulate
from tests.helpers import make_node, make_pod
from tests.scheduler.conftest import core_config


def pod(name: str, conditions: list[dict] | None = None, nominated: str = "") -> dict:
    status: dict[str, Any] = {"conditions": conditions or []}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "status": status}


UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
UNSCHEDULABLE_LATER = {**UNSCHEDULABLE, "message": "0/4 nodes"}
READY = {"type": "Ready", "status": "False", "reason": "Waiting", "message": ""}


class RecordingClient:
    """Records what reaches the server; a call for a pod in ``hold`` waits until its event is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []
        #: Pod names in the order their calls began.
        self.begun: list[str] = []
        self.hold: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.fail: Exception | None = None

    async def _call(self, name: str, record: tuple[Any, ...]) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.begun.append(name)
        self.started.setdefault(name, asyncio.Event()).set()
        try:
            if name in self.hold:
                await self.hold[name].wait()
            if self.fail is not None:
                raise self.fail
            self.sent.append(record)
        finally:
            self.in_flight -= 1

    async def bind(self, pod: dict, node_name: str) -> None:
        await self._call(pod["metadata"]["name"], ("bind", pod["metadata"]["name"], node_name))

    async def patch_pod_status(self, pod: dict, conditions: list[dict], nominated_node_name: str | None) -> None:
        name = pod["metadata"]["name"]
        await self._call(name, ("patch", name, [c["message"] for c in conditions], nominated_node_name))


def patch(p: dict, *conditions: dict, nominated: str | None = None) -> APICall:
    return PodStatusPatchCall(p, list(conditions), nominated)


@pytest.mark.parametrize("calls, sent, outcomes", [
    pytest.param([lambda: patch(pod("a"), UNSCHEDULABLE)], [("patch", "a", ["0/3 nodes"], None)], [None],
                 id="a call for a pod with nothing queued is sent"),
    pytest.param([lambda: patch(pod("a"), UNSCHEDULABLE), lambda: patch(pod("a"), nominated="n1")],
                 [("patch", "a", ["0/3 nodes"], "n1")], [CallOverwritten, None],
                 id="a status patch merges with the status patch queued for the pod"),
    pytest.param([lambda: patch(pod("a"), UNSCHEDULABLE, nominated="n1"), lambda: patch(pod("a"), UNSCHEDULABLE_LATER)],
                 [("patch", "a", ["0/4 nodes"], "n1")], [CallOverwritten, None],
                 id="the newer condition of a type wins and the older nominated node is kept"),
    pytest.param([lambda: patch(pod("a"), READY), lambda: patch(pod("a"), UNSCHEDULABLE)],
                 [("patch", "a", ["0/3 nodes", ""], None)], [CallOverwritten, None],
                 id="conditions of other types are carried over"),
    pytest.param([lambda: patch(pod("a"), UNSCHEDULABLE), lambda: PodBindingCall(pod("a"), "n1")],
                 [("bind", "a", "n1")], [CallOverwritten, None],
                 id="a binding overwrites the status patch queued for the pod"),
    pytest.param([lambda: PodBindingCall(pod("a"), "n1"), lambda: patch(pod("a"), UNSCHEDULABLE)],
                 [("bind", "a", "n1")], [None, CallSkipped],
                 id="a status patch is skipped while a binding is queued for the pod"),
    pytest.param([lambda: patch(pod("a", [UNSCHEDULABLE]), UNSCHEDULABLE)], [], [CallSkipped],
                 id="a status patch that changes nothing is skipped"),
    pytest.param([lambda: patch(pod("a", nominated="n1"), nominated="n1")], [], [CallSkipped],
                 id="setting the nominated node the pod already has is skipped"),
    pytest.param([lambda: patch(pod("a"), UNSCHEDULABLE), lambda: patch(pod("b"), UNSCHEDULABLE),
                  lambda: patch(pod("a"), UNSCHEDULABLE_LATER)],
                 [("patch", "a", ["0/4 nodes"], None), ("patch", "b", ["0/3 nodes"], None)], [CallOverwritten, None, None],
                 id="a merged call keeps its pod's place in the queue"),
])
async def test_add_reconciles_a_call_with_the_one_queued_for_the_same_pod(
        calls: list[Callable[[], APICall]], sent: list[tuple[Any, ...]], outcomes: list[type[Exception] | None]) -> None:
    client = RecordingClient()
    dispatcher = APIDispatcher(client, parallelism=1)  # type: ignore[arg-type]
    seen: list[BaseException | None] = [None] * len(calls)
    for i, make in enumerate(calls):
        dispatcher.add(make(), lambda error, i=i: seen.__setitem__(i, error))  # type: ignore[misc]
    dispatcher.start()
    await dispatcher.close(timeout=5)
    assert client.sent == sent
    assert [None if e is None else type(e) for e in seen] == outcomes
    assert dispatcher.executed == len(sent)


async def test_a_call_for_a_pod_whose_call_is_in_flight_waits_for_it() -> None:
    client = RecordingClient()
    client.hold["a"] = asyncio.Event()
    dispatcher = APIDispatcher(client, parallelism=4)  # type: ignore[arg-type]
    dispatcher.start()
    dispatcher.add(patch(pod("a"), UNSCHEDULABLE))
    await client.started.setdefault("a", asyncio.Event()).wait()
    dispatcher.add(patch(pod("a"), UNSCHEDULABLE_LATER))
    dispatcher.add(patch(pod("b"), UNSCHEDULABLE))
    await client.started.setdefault("b", asyncio.Event()).wait()
    await asyncio.sleep(0)
    assert client.sent == [("patch", "b", ["0/3 nodes"], None)]  # a's second call did not overtake its first
    client.hold["a"].set()
    await dispatcher.close(timeout=5)
    assert client.sent == [("patch", "b", ["0/3 nodes"], None), ("patch", "a", ["0/3 nodes"], None),
                           ("patch", "a", ["0/4 nodes"], None)]
    assert client.max_in_flight == 2


async def test_parallelism_bounds_the_calls_in_flight() -> None:
    client = RecordingClient()
    release = asyncio.Event()
    for name in "abcde":
        client.hold[name] = release
    dispatcher = APIDispatcher(client, parallelism=2)  # type: ignore[arg-type]
    dispatcher.start()
    for name in "abcde":
        dispatcher.add(PodBindingCall(pod(name), "n1"))
    await client.started.setdefault("b", asyncio.Event()).wait()
    for _ in range(5):
        await asyncio.sleep(0)
    assert client.in_flight == 2 and dispatcher.pending() == 3
    release.set()
    await dispatcher.close(timeout=5)
    assert client.begun == list("abcde")  # first come first served
    assert client.max_in_flight == 2


async def test_sync_object_drops_a_patch_the_pod_already_reflects() -> None:
    client = RecordingClient()
    dispatcher = APIDispatcher(client)  # type: ignore[arg-type]
    seen: list[BaseException | None] = []
    dispatcher.add(patch(pod("a"), UNSCHEDULABLE), seen.append)
    synced = dispatcher.sync_object(pod("a", [UNSCHEDULABLE]))
    assert synced["status"]["conditions"] == [UNSCHEDULABLE]
    assert [type(e) for e in seen] == [CallSkipped] and dispatcher.idle()


async def test_sync_object_shows_the_pod_with_its_queued_patch_applied() -> None:
    dispatcher = APIDispatcher(RecordingClient())  # type: ignore[arg-type]
    dispatcher.add(patch(pod("a", [READY]), UNSCHEDULABLE, nominated="n1"))
    synced = dispatcher.sync_object(pod("a", [READY]))
    assert synced["status"] == {"conditions": [READY, UNSCHEDULABLE], "nominatedNodeName": "n1"}
    assert not dispatcher.idle()


async def test_close_reports_calls_it_could_not_send() -> None:
    dispatcher = APIDispatcher(RecordingClient())  # type: ignore[arg-type]
    seen: list[BaseException | None] = []
    dispatcher.add(PodBindingCall(pod("a"), "n1"), seen.append)
    await dispatcher.close(timeout=0)
    dispatcher.add(PodBindingCall(pod("b"), "n1"), seen.append)
    assert [type(e) for e in seen] == [DispatcherClosed, DispatcherClosed]


@pytest.mark.parametrize("fail, raised", [
    pytest.param(None, None, id="a binding that was sent returns"),
    pytest.param(Conflict("pod a is already assigned to node n2"), Conflict, id="a refused binding raises the API error"),
])
async def test_binder_waits_for_the_outcome_of_its_binding(fail: Exception | None, raised: type[Exception] | None) -> None:
    client = RecordingClient()
    client.fail = fail
    dispatcher = APIDispatcher(client)  # type: ignore[arg-type]
    dispatcher.start()
    binder = DispatchingClient(client, dispatcher)  # type: ignore[arg-type]
    try:
        if raised is None:
            await binder.bind(pod("a"), "n1")
            assert client.sent == [("bind", "a", "n1")]
        else:
            with pytest.raises(raised):
                await binder.bind(pod("a"), "n1")
    finally:
        await dispatcher.close(timeout=5)


def test_scheduling_with_asynchronous_api_calls_places_pods_and_writes_conditions_as_without() -> None:
    def objects() -> list[dict]:
        return [make_node("n1", cpu="2"), make_node("n2", cpu="2"), *(make_pod(f"p{i}", cpu="500m") for i in range(6)),
                make_pod("huge", cpu="3")]

    def outcome(gates: FeatureGates) -> dict[str, Any]:
        result = simulate(objects(), core_config(), seed=3, feature_gates=gates)
        return {p["metadata"]["name"]: (p["spec"].get("nodeName"),
                                        [(c["type"], c["status"], c.get("reason"), c.get("message"))
                                         for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"])
                for p in result.pods()}

    on = outcome(FeatureGates({"SchedulerAsyncAPICalls": True}))
    assert on == outcome(FeatureGates({"SchedulerAsyncAPICalls": False}))
    assert on["huge"] == (None, [("PodScheduled", "False", "Unschedulable", "0/2 nodes are available: 2 Insufficient cpu.")])
