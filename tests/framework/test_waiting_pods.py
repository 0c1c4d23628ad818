"""Permit's waiting pods (upstream waiting_pods_map.go): allowed once every waiting plugin allows,
rejected by any plugin or by the timeout of a plugin that has not allowed yet."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.status import Code
from kubesched.scheduler.framework.waiting_pods import WaitingPod
from kubesched.simulator.virtualtime import run_virtual

POD = PodInfo({"metadata": {"name": "p", "namespace": "default", "uid": "u"}})


@pytest.mark.parametrize(("actions", "want"), [
    pytest.param([(1, "allow A"), (10, "allow B")], None, id="A's timer stops when A allows"),
    pytest.param([(1, "allow A")], "rejected due to timeout after waiting 30s at plugin B", id="B still times out"),
    pytest.param([(1, "allow B")], "rejected due to timeout after waiting 5s at plugin A", id="A times out"),
    pytest.param([(1, "reject B")], "no", id="any plugin rejects"),
])
def test_waiting_pod_with_two_plugins(actions, want):
    async def scenario():
        wp = WaitingPod(POD, {"A": 5.0, "B": 30.0})
        for at, action in actions:
            await asyncio.sleep(at)
            verb, plugin = action.split()
            if verb == "allow":
                wp.allow(plugin)
            else:
                wp.reject(plugin, "no")
        return await wp.wait()

    status = run_virtual(scenario())
    if want is None:
        assert status is None
    else:
        assert (status.code, status.message()) == (Code.Unschedulable, want)
