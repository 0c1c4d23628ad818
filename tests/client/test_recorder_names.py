"""Event names: ``<object>.<event time in ns, hex>`` as upstream's events.k8s.io recorder names
them, kept distinct when two events happen at the same instant of a virtual clock: the broadcaster
moves each stamp past the previous one (upstream's real clock never repeats a nanosecond)."""

from __future__ import annotations

from kubesched.client.recorder import Broadcaster
from kubesched.utils.clock import ManualClock
from tests.helpers import make_pod


class ListSink:
    concurrent = False

    def __init__(self) -> None:
        self.created: list[dict] = []

    async def create(self, event: dict) -> None:
        self.created.append(event)

    async def update_series(self, event: dict) -> None:
        return None


def test_two_events_of_one_object_at_the_same_instant_get_distinct_names():
    clock = ManualClock()
    broadcaster = Broadcaster(ListSink(), clock)  # type: ignore[arg-type]
    recorder = broadcaster.recorder("default-scheduler")
    pod, other = make_pod("p"), make_pod("q")
    recorder.eventf(pod, None, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available: 3 Insufficient cpu.")
    recorder.eventf(pod, None, "Normal", "Scheduled", "Binding", "Successfully assigned default/p to n1")
    recorder.eventf(other, None, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available: 3 Insufficient cpu.")
    names = [event["metadata"]["name"] for _, event in broadcaster._pending]
    stamp = int(clock.wall() * 1e9)
    assert names == [f"p.{stamp:x}", f"p.{stamp + 1:x}", f"q.{stamp + 2:x}"]
