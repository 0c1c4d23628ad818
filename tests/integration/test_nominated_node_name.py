"""Upstream's test/integration/scheduler/nominated_node_name/nominated_node_name_test.go,
TestNominatedNodeNameIsSetBeforePreBindAndWaitOnPermit, end to end on the embedded cluster
(without kubelet and controllers, as upstream's runs).

With NominatedNodeNameForExpectation (beta, on in 1.35) the binding cycle records the chosen node
in ``status.nominatedNodeName`` before work that may take long: a PreBind plugin that will run,
or a wait at Permit. Upstream's ``NoNNNPostBindPlugin`` checks that a bound pod reaches PostBind
without a nominated node; here it records any it sees."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import PermitPlugin, Plugin, PostBindPlugin, PreBindPlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from tests.integration.embedded import configuration, embedded, run
from tests.integration.wrappers import node, pod

NOMINATION_WAIT = 1.0  # upstream's WaitForNominatedNodeNameWithTimeout(..., time.Second)


class RunForeverPreBind(PreBindPlugin):
    """Upstream's ``RunForeverPreBindPlugin``: has work to do (PreBindPreFlight succeeds) and
    never finishes it until the test ends."""

    name = "RunForeverPreBindPlugin"

    def __init__(self) -> None:
        super().__init__(None, None)
        self.cancel: asyncio.Event | None = None

    def pre_bind_pre_flight(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        return None

    async def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        assert self.cancel is not None, "the test gives the plugin its cancel event"
        await self.cancel.wait()
        return Status(Code.Error, "pre-bind cancelled")


class FakePermit(PermitPlugin):
    """Upstream's ``FakePermitPlugin``: answers ``code`` (a Wait lasts ten minutes)."""

    name = "FakePermitPlugin"

    def __init__(self, code: Code) -> None:
        super().__init__(None, None)
        self.code = code

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]:
        if self.code == Code.Wait:
            return Status(Code.Wait), 600
        return None, 0


class NoNominationPostBind(PostBindPlugin):
    """Upstream's ``NoNNNPostBindPlugin``: a pod reaching PostBind has no nominated node."""

    name = "NoNNNPostBindPlugin"

    def __init__(self) -> None:
        super().__init__(None, None)
        self.nominated: list[str] = []

    def post_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        nominated = (pod_info.pod.get("status") or {}).get("nominatedNodeName")
        if nominated:
            self.nominated.append(f"{pod_info.key} nominated to {nominated}")


POINTS = {PreBindPlugin: "preBind", PermitPlugin: "permit", PostBindPlugin: "postBind"}


@pytest.mark.parametrize("gate", [pytest.param(True, id="NominatedNodeName for expectation: true"),
                                  pytest.param(False, id="NominatedNodeName for expectation: false")])
@pytest.mark.parametrize(("plugin_kind", "expect_nomination"), [
    pytest.param("prebind", True, id="NominatedNodeName is put if PreBindPlugin will run"),
    pytest.param("permit-wait", True, id="NominatedNodeName is put if PermitPlugin will run at WaitOnPermit"),
    pytest.param("permit-success", False, id="NominatedNodeName is not put if PermitPlugin won't run at WaitOnPermit"),
    pytest.param("", False, id="NominatedNodeName is not put if PermitPlugin nor PreBindPlugin will run"),
])
def test_nominated_node_name_is_set_before_pre_bind_and_wait_on_permit(plugin_kind: str, expect_nomination: bool,
                                                                        gate: bool) -> None:
    """The nomination appears (within a second) only when PreBind or a Permit wait will hold the
    binding, and only with the gate on; otherwise the pod is bound without one."""
    post_bind = NoNominationPostBind()
    plugins: list[Plugin] = [post_bind]
    pre_bind = RunForeverPreBind() if plugin_kind == "prebind" else None
    if pre_bind is not None:
        plugins.append(pre_bind)
    elif plugin_kind:
        plugins.append(FakePermit(Code.Wait if plugin_kind == "permit-wait" else Code.Success))
    registry = merge(in_tree_registry(), {p.name: _factory(p) for p in plugins})
    points: dict[str, Any] = {}
    for p in plugins:
        for kind, point in POINTS.items():
            if isinstance(p, kind):
                points.setdefault(point, {"enabled": []})["enabled"].append({"name": p.name})
    gates = {"NominatedNodeNameForExpectation": gate}
    config = configuration({"schedulerName": "default-scheduler", "plugins": points}, registry=registry, gates=gates)
    nodes = [node(f"test-node-{i}") for i in range(10)]

    async def scenario() -> tuple[bool, str]:
        async with embedded(config, nodes, registry=registry, gates=gates, kubelet=False, controllers=False) as cluster:
            if pre_bind is not None:
                pre_bind.cancel = asyncio.Event()
            cluster.create(pod("test-pod"))
            try:
                if not expect_nomination:
                    return False, await cluster.scheduled("test-pod")
                try:
                    await cluster.wait_for("the nomination", lambda: bool(
                        (cluster.pod("test-pod").get("status") or {}).get("nominatedNodeName")), NOMINATION_WAIT)
                except AssertionError:
                    return False, cluster.node_of("test-pod")
                return True, cluster.node_of("test-pod")
            finally:
                if pre_bind is not None and pre_bind.cancel is not None:
                    pre_bind.cancel.set()

    nominated, where = run(scenario)
    if expect_nomination:
        assert nominated is gate
        assert where == ""
    else:
        assert where.startswith("test-node-")
    assert post_bind.nominated == []


def _factory(plugin: Plugin) -> Any:
    def build(_args: Any, handle: Any) -> Plugin:
        plugin.handle = handle
        return plugin

    return build
