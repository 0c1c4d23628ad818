"""PreBind: plugins whose PreBindPreFlight answered Skip are not run (upstream SkipPreBindPlugins)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import PreBindPlugin
from kubesched.scheduler.framework.status import Code, Status
from tests.framework.conftest import build_framework
from tests.helpers import make_pod

POD = PodInfo(make_pod("p"))


def pre_bind_plugin(name: str, pre_flight: Code, calls: list[str]) -> type[PreBindPlugin]:
    class Recording(PreBindPlugin):
        def pre_bind_pre_flight(self, state, pod, node_name):
            return None if pre_flight == Code.Success else Status(pre_flight)

        def pre_bind(self, state, pod, node_name):
            calls.append(self.name)

    Recording.name = name
    return Recording


@pytest.mark.parametrize(("pre_flights", "want_status", "want_calls"), [
    pytest.param({"A": Code.Skip, "B": Code.Success}, None, ["B"], id="the skipping plugin is not run"),
    pytest.param({"A": Code.Success, "B": Code.Success}, None, ["A", "B"], id="all run"),
    pytest.param({"A": Code.Skip, "B": Code.Skip}, Code.Skip, [], id="all skip"),
])
def test_pre_bind_runs_only_plugins_that_did_not_skip(pre_flights, want_status, want_calls):
    calls: list[str] = []
    fw, _ = build_framework(*(pre_bind_plugin(name, code, calls) for name, code in pre_flights.items()))
    state = CycleState()
    status = fw.run_pre_bind_pre_flights(state, POD, "n1")
    assert (status.code if status is not None else None) == want_status
    assert asyncio.run(fw.run_pre_bind(state, POD, "n1")) is None
    assert calls == want_calls
