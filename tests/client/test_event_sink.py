"""The recorder's events through the embedded client's ``create_event`` are stored exactly as a
plain create of the same ``events.k8s.io/v1`` event stores them (without a second type check, a
deep copy or the conversion back), and storing one leaves the recorder's own event untouched."""

from __future__ import annotations

import asyncio

from kubesched.api.kinds import EVENT
from kubesched.api.meta import json_copy
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.client.interface import EVENTS_V1
from kubesched.client.recorder import Broadcaster, EventSink
from kubesched.utils.clock import ManualClock
from tests.helpers import make_pod


def recorded_events() -> list[dict]:
    broadcaster = Broadcaster(EventSink(None), ManualClock())
    recorder = broadcaster.recorder("default-scheduler")
    recorder.eventf(make_pod("p"), None, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n1")
    recorder.eventf(make_pod("q"), make_pod("r"), "Normal", "Preempted", "Preempting", "Preempted by pod default/r")
    return [event for _, event in broadcaster._pending]


def stored(create: str) -> tuple[list[dict], list[dict]]:
    events = recorded_events()
    before = json_copy(events)
    store = ObjectStore(ManualClock(), seed=1)
    client = MemoryClient(store)

    async def write() -> None:
        for event in events:
            if create == "create_event":
                await client.create_event(event)
            else:
                await client.create(EVENTS_V1, event)

    asyncio.run(write())
    assert events == before
    return list(store.iter_all(EVENT)), events


def test_create_event_stores_what_a_create_stores():
    by_event, _ = stored("create_event")
    by_create, _ = stored("create")
    assert by_event == by_create
    assert [e["reason"] for e in by_event] == ["Scheduled", "Preempted"]
    assert by_event[1]["related"]["name"] == "r"
