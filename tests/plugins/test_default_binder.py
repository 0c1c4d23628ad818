"""DefaultBinder: binds through the client; a failing call becomes an Error status."""

from __future__ import annotations

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.plugins.defaultbinder.default_binder import DefaultBinder
from tests.helpers import make_pod


class _Client:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.error = error

    async def bind(self, pod: dict, node_name: str) -> None:
        self.calls.append((pod["metadata"]["name"], node_name))
        if self.error is not None:
            raise self.error


class _Handle:
    def __init__(self, client: _Client) -> None:
        self.client = client


async def test_binds_the_pod_to_the_node():
    client = _Client()
    assert await DefaultBinder(None, _Handle(client)).bind(CycleState(), PodInfo(make_pod("p")), "n1") is None
    assert client.calls == [("p", "n1")]


async def test_a_failed_binding_is_an_error():
    client = _Client(RuntimeError('pods "p" not found'))
    status = await DefaultBinder(None, _Handle(client)).bind(CycleState(), PodInfo(make_pod("p")), "n1")
    assert status.code == Code.Error and status.reasons == ['pods "p" not found']
