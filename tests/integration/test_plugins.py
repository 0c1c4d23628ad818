"""Upstream's test/integration/scheduler/plugins/plugins_test.go, and rescheduling_test.go's
TestReScheduling (which uses the same kind of plugins), end to end on the embedded cluster:
out-of-tree plugins at every extension point from PreEnqueue to PostBind, each behaving as
upstream's test plugin of that name (succeed, fail with an Error, reject as Unschedulable, wait),
and the outcomes upstream checks: the pod scheduled, unschedulable, or failed with a scheduling
error (PodScheduled=False, reason SchedulerError), and how often each plugin was called.

Upstream's ``initRegistryAndConfig`` adds the plugins to the default profile at the extension
points they implement; ``initTestSchedulerForFrameworkTest`` starts the scheduler on ``n`` nodes
named ``test-node-<i>``, with no kubelet or controllers. The same here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

from kubesched.api.kinds import POD
from kubesched.api.types import PodInfo
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    NodeScore,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from kubesched.scheduler.framework.registry import Registry, merge
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins.registry import in_tree_registry
from tests.integration.embedded import Cluster, configuration, embedded, run
from tests.integration.wrappers import node, pod

EXTENSION_POINTS = {PreEnqueuePlugin: "preEnqueue", PreScorePlugin: "preScore", PreFilterPlugin: "preFilter", FilterPlugin: "filter",
                    PostFilterPlugin: "postFilter", ScorePlugin: "score", ReservePlugin: "reserve",
                    PreBindPlugin: "preBind", PermitPlugin: "permit", BindPlugin: "bind", PostBindPlugin: "postBind"}
BIND_PLUGIN_ANNOTATION = "bindPluginName"


def _injected(pod_info: PodInfo) -> Status:
    return Status(Code.Error, f"injecting failure for pod {pod_info.name}")


def _rejected(pod_info: PodInfo) -> Status:
    return Status(Code.Unschedulable, f"reject pod {pod_info.name}")


class FakePreFilter(PreFilterPlugin):
    """Upstream's ``PreFilterPlugin``: counts its calls; fails or rejects when told to."""

    name = "prefilter-plugin"

    def __init__(self, fail: bool = False, reject: bool = False) -> None:
        super().__init__(None, None)
        self.fail, self.reject, self.calls = fail, reject, 0

    def pre_filter(self, state: CycleState, pod_info: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        self.calls += 1
        if self.fail:
            return None, _injected(pod_info)
        if self.reject:
            return None, _rejected(pod_info)
        return None, None


class FakeFilter(FilterPlugin):
    """Upstream's ``FilterPlugin``: counts its calls; fails or rejects every node when told to."""

    name = "filter-plugin"

    def __init__(self, reject: bool = False, fail: bool = False) -> None:
        super().__init__(None, None)
        self.reject, self.fail, self.calls = reject, fail, 0

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: Any) -> Status | None:
        self.calls += 1
        if self.fail:
            return _injected(pod_info)
        return _rejected(pod_info) if self.reject else None


class FakePreScore(PreScorePlugin):
    """Upstream's ``PreScorePlugin``: counts its calls; fails when told to."""

    name = "prescore-plugin"

    def __init__(self, fail: bool = False) -> None:
        super().__init__(None, None)
        self.fail, self.calls = fail, 0

    def pre_score(self, state: CycleState, pod_info: PodInfo, nodes: NodeBatch) -> Status | None:
        self.calls += 1
        return _injected(pod_info) if self.fail else None


class FakePreEnqueue(PreEnqueuePlugin):
    """Upstream's ``PreEnqueuePlugin``: admits pods, or keeps them out as unresolvable."""

    name = "enqueue-plugin"

    def __init__(self, admit: bool) -> None:
        super().__init__(None, None)
        self.admit, self.calls = admit, 0

    def pre_enqueue(self, pod_info: PodInfo) -> Status | None:
        self.calls += 1
        return None if self.admit else Status(Code.UnschedulableAndUnresolvable, "not ready for scheduling")


class FakeScore(ScorePlugin):
    """Upstream's ``ScorePlugin``: the first node it scores gets the maximum, the others 1."""

    name = "score-plugin"

    def __init__(self, fail: bool = False) -> None:
        super().__init__(None, None)
        self.fail, self.calls, self.high_score_node = fail, 0, ""

    def score(self, state: CycleState, pod_info: PodInfo, node_name: str) -> int | tuple[int, Status | None]:
        self.calls += 1
        if self.fail:
            return 0, _injected(pod_info)
        if self.calls == 1:
            self.high_score_node = node_name
            return MAX_NODE_SCORE
        return 1


class FakeScoreWithNormalize(ScorePlugin):
    """Upstream's ``ScoreWithNormalizePlugin``: scores 10 everywhere and counts both calls."""

    name = "score-with-normalize-plugin"

    def __init__(self) -> None:
        super().__init__(None, None)
        self.calls = self.normalize_calls = 0

    def score(self, state: CycleState, pod_info: PodInfo, node_name: str) -> int | tuple[int, Status | None]:
        self.calls += 1
        return 10

    def normalize_score(self, state: CycleState, pod_info: PodInfo, scores: list[NodeScore]) -> Status | None:
        self.normalize_calls += 1
        return None


class FakeReserve(ReservePlugin):
    """Upstream's ``ReservePlugin``: counts Reserve and Unreserve calls; Reserve fails when told to."""

    name = "reserve-plugin"

    def __init__(self, fail: bool = False, invocations: list[tuple[str, int]] | None = None) -> None:
        super().__init__(None, None)
        self.fail, self.invocations = fail, invocations
        self.reserve_calls = self.unreserve_calls = 0

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        self.reserve_calls += 1
        return _injected(pod_info) if self.fail else None

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        self.unreserve_calls += 1
        if self.invocations is not None:
            self.invocations.append((self.name, self.unreserve_calls))


class FakePreBind(PreBindPlugin):
    """Upstream's ``PreBindPlugin``: fails or rejects when told to, but lets a pod it has already
    seen through when ``succeed_on_retry``."""

    name = "prebind-plugin"

    def __init__(self, fail: bool = False, reject: bool = False, succeed_on_retry: bool = False) -> None:
        super().__init__(None, None)
        self.fail, self.reject, self.succeed_on_retry = fail, reject, succeed_on_retry
        self.calls = 0
        self.seen: set[str] = set()

    def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        self.calls += 1
        if pod_info.uid in self.seen and self.succeed_on_retry:
            return None
        self.seen.add(pod_info.uid)
        if self.fail:
            return _injected(pod_info)
        if self.reject:
            return _rejected(pod_info)
        return None


class FakePermit(PermitPlugin):
    """Upstream's ``PermitPlugin`` in its fail, reject and timeout modes: an Error, a rejection, or
    a 3 s wait (which times out)."""

    name = "permit-plugin"

    def __init__(self, reject: bool = False, timeout: bool = False, fail: bool = False,
                 wait_and_reject: bool = False, wait_and_allow: bool = False) -> None:
        super().__init__(None, None)
        self.reject, self.timeout, self.fail = reject, timeout, fail
        self.wait_and_reject, self.wait_and_allow = wait_and_reject, wait_and_allow
        self.calls = 0
        self.waiting_pod = self.rejecting_pod = self.allowing_pod = ""

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]:
        self.calls += 1
        if self.fail:
            return _injected(pod_info), 0
        if self.reject:
            return _rejected(pod_info), 0
        if self.timeout:
            return Status(Code.Wait), 3
        if self.wait_and_reject or self.wait_and_allow:
            return self._co_schedule(pod_info)
        return None, 0

    def _co_schedule(self, pod_info: PodInfo) -> tuple[Status | None, float]:
        """The first pod waits (30 s); the next one rejects it (and itself) or allows it."""
        if self.waiting_pod in ("", pod_info.name):
            self.waiting_pod = pod_info.name
            return Status(Code.Wait), 30
        if self.wait_and_reject:
            self.rejecting_pod = pod_info.name
            self.framework.iterate_waiting_pods(lambda wp: wp.reject(self.name, f"reject pod {wp.pod.name}"))
            return _rejected(pod_info), 0
        self.allowing_pod = pod_info.name
        self.allow_all_pods()
        return None, 0

    def allow_all_pods(self) -> None:
        self.framework.iterate_waiting_pods(lambda wp: wp.allow(self.name))


class FakeBind(BindPlugin):
    """Upstream's ``BindPlugin``: answers a preset status; on success it binds the pod itself
    through the API, marking the binding with its name."""

    def __init__(self, status: Status | None = None, invocations: list[tuple[str, int]] | None = None) -> None:
        super().__init__(None, None)
        self.status, self.invocations = status, invocations
        self.calls = 0
        self.store: ObjectStore | None = None

    def bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        self.calls += 1
        if self.invocations is not None:
            self.invocations.append((self.name, self.calls))
        if self.status is None or self.status.is_success():
            assert self.store is not None, "the test gives the plugin the cluster's store"
            self.store.bind(pod_info.namespace, pod_info.name, node_name, uid=pod_info.uid,
                            annotations={BIND_PLUGIN_ANNOTATION: self.name})
        return self.status


class FakePostBind(PostBindPlugin):
    """Upstream's ``PostBindPlugin``: counts its calls."""

    name = "postbind-plugin"

    def __init__(self, invocations: list[tuple[str, int]] | None = None) -> None:
        super().__init__(None, None)
        self.invocations = invocations
        self.calls = 0

    def post_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        self.calls += 1
        if self.invocations is not None:
            self.invocations.append((self.name, self.calls))


def _registry_and_config(*plugins: Plugin, profiles: Sequence[dict[str, Any]] = ()) -> tuple[Registry, SchedulerConfiguration]:
    """Upstream's ``initRegistryAndConfig``: each plugin enabled, in the default profile, at the
    extension points it implements, DefaultBinder disabled when there is a Bind plugin (unless
    ``profiles`` say otherwise)."""
    registry = merge(in_tree_registry(), {p.name: _factory(p) for p in plugins})
    if not profiles:
        points: dict[str, list[dict[str, str]]] = {}
        for p in plugins:
            for kind, point in EXTENSION_POINTS.items():
                if isinstance(p, kind):
                    points.setdefault(point, []).append({"name": p.name})
        plugin_sets: dict[str, dict[str, Any]] = {point: {"enabled": names} for point, names in points.items()}
        if "bind" in plugin_sets:
            # As upstream: DefaultBinder would bind before the test's Bind plugin.
            plugin_sets["bind"]["disabled"] = [{"name": "DefaultBinder"}]
        profiles = [{"schedulerName": "default-scheduler", "plugins": plugin_sets}]
    return registry, configuration(*profiles, registry=registry)


def _factory(plugin: Plugin) -> Callable[[Any, Any], Plugin]:
    def build(_args: Any, handle: Any) -> Plugin:
        plugin.handle = handle
        return plugin

    return build


P = TypeVar("P", bound=Plugin)


def named(cls: type[P], name: str) -> type[P]:
    """``cls`` under another plugin name (upstream's test plugins take their name as a field)."""
    return type(name, (cls,), {"name": name})


def _nodes(count: int) -> list[dict[str, Any]]:
    return [node(f"test-node-{i}", capacity={"cpu": "500m", "memory": "500"}) for i in range(count)]


def _scheduling_error(cluster: Cluster, name: str = "test-pod") -> Callable[[], bool]:
    """``testutils.PodSchedulingError``: PodScheduled=False with a reason other than Unschedulable."""
    def check() -> bool:
        c = cluster.condition(name)
        return c.get("status") == "False" and c.get("reason") not in (None, "", "Unschedulable")

    return check


async def _outcome(cluster: Cluster, want: str, name: str = "test-pod") -> str:
    """Wait for the outcome ``want`` (scheduled, unschedulable, error) and return the node or reason."""
    if want == "scheduled":
        return await cluster.scheduled(name)
    if want == "unschedulable":
        await cluster.unschedulable(name)
        return "Unschedulable"
    await cluster.wait_for(f"a scheduling error for {name}", _scheduling_error(cluster, name))
    return str(cluster.condition(name).get("reason"))


def _attempt(plugins: Sequence[Plugin], nodes: int, want: str, profiles: Sequence[dict[str, Any]] = ()) -> str:
    """Schedule ``test-pod`` with ``plugins`` on ``nodes`` nodes and check the ``want`` outcome
    (scheduled, unschedulable, error); returns the node or the condition's reason."""
    registry, config = _registry_and_config(*plugins, profiles=profiles)
    return _attempt_with(registry, config, nodes, want)


def _attempt_with(registry: Registry, config: SchedulerConfiguration, nodes: int, want: str) -> str:
    """``_attempt`` for a registry and configuration built by the caller."""

    async def scenario() -> str:
        async with embedded(config, _nodes(nodes), registry=registry, kubelet=False, controllers=False) as cluster:
            cluster.create(pod("test-pod"))
            return await _outcome(cluster, want)

    outcome = run(scenario)
    expected = {"error": {"SchedulerError"}, "unschedulable": {"Unschedulable"}}.get(
        want, {n["metadata"]["name"] for n in _nodes(nodes)})
    assert outcome in expected, f"{outcome!r} is not the {want} outcome"
    return outcome


# --- TestPreFilterPlugin ------------------------------------------------------------------------------
@pytest.mark.parametrize(("fail", "reject", "want"), [
    pytest.param(False, False, "scheduled", id="disable fail and reject flags"),
    pytest.param(True, False, "error", id="enable fail and disable reject flags"),
    pytest.param(False, True, "unschedulable", id="disable fail and enable reject flags"),
])
def test_pre_filter_plugin(fail: bool, reject: bool, want: str) -> None:
    plugin = FakePreFilter(fail, reject)
    _attempt([plugin], 2, want)
    assert plugin.calls > 0


# --- TestScorePlugin, TestNormalizeScorePlugin --------------------------------------------------------
@pytest.mark.parametrize("fail", [pytest.param(True, id="fail score plugin"), pytest.param(False, id="do not fail score plugin")])
def test_score_plugin(fail: bool) -> None:
    """A failing Score fails the attempt with an error; otherwise the pod lands on the node the
    plugin scored highest (the in-tree scores tie on identical empty nodes)."""
    plugin = FakeScore(fail)
    outcome = _attempt([plugin], 10, "error" if fail else "scheduled")
    if not fail:
        assert outcome == plugin.high_score_node
    assert plugin.calls > 0


def test_normalize_score_plugin() -> None:
    plugin = FakeScoreWithNormalize()
    _attempt([plugin], 10, "scheduled")
    assert plugin.calls > 0
    assert plugin.normalize_calls > 0


# --- TestReservePluginReserve -------------------------------------------------------------------------
@pytest.mark.parametrize("fail", [pytest.param(True, id="fail reserve plugin"),
                                  pytest.param(False, id="do not fail reserve plugin")])
def test_reserve_plugin_reserve(fail: bool) -> None:
    plugin = FakeReserve(fail=fail)
    _attempt([plugin], 2, "error" if fail else "scheduled")
    assert plugin.reserve_calls > 0


# --- TestPrebindPlugin --------------------------------------------------------------------------------
@pytest.mark.parametrize(("fail", "reject", "succeed_on_retry", "with_unschedulable_pod", "want"), [
    pytest.param(False, False, False, False, "scheduled", id="disable fail and reject flags"),
    pytest.param(True, False, False, False, "error", id="enable fail and disable reject flags"),
    pytest.param(False, True, False, False, "unschedulable", id="disable fail and enable reject flags"),
    pytest.param(True, True, False, False, "error", id="enable fail and reject flags"),
    pytest.param(True, False, True, False, "scheduled", id="fail on 1st try but succeed on retry"),
    pytest.param(True, False, False, True, "error", id="failure on preBind moves unschedulable pods"),
])
def test_prebind_plugin(fail: bool, reject: bool, succeed_on_retry: bool, with_unschedulable_pod: bool, want: str) -> None:
    """PreBind outcomes; a second profile whose Filter plugin rejects everything holds an
    unschedulable pod, which a PreBind failure of the first profile's pod moves back to be tried
    again (its Filter plugin, registering no events, is requeued by any)."""
    pre_bind = FakePreBind(fail, reject, succeed_on_retry)
    filter_plugin = FakeFilter(reject=with_unschedulable_pod)
    profiles = [{"schedulerName": "default-scheduler", "plugins": {"preBind": {"enabled": [{"name": pre_bind.name}]}}},
                {"schedulerName": "2nd-scheduler", "plugins": {"filter": {"enabled": [{"name": filter_plugin.name}]}}}]
    registry, config = _registry_and_config(pre_bind, filter_plugin, profiles=profiles)

    async def scenario() -> int:
        async with embedded(config, _nodes(2), registry=registry, kubelet=False, controllers=False) as cluster:
            if with_unschedulable_pod:
                cluster.create(pod("unschedulable-pod", schedulerName="2nd-scheduler"))
                await cluster.unschedulable("unschedulable-pod")
            cluster.create(pod("test-pod"))
            await _outcome(cluster, want)
            if with_unschedulable_pod:
                await cluster.wait_for("the unschedulable pod to be retried", lambda: filter_plugin.calls >= 2 * 2, timeout=15)
            return pre_bind.calls

    assert run(scenario) > 0


# --- TestUnReserveReservePlugins ----------------------------------------------------------------------
@pytest.mark.parametrize(("fails", "fail_index"), [
    pytest.param([("failedReservePlugin1", True), ("succeedReservePlugin", False), ("failedReservePlugin2", True)], 0,
                 id="The first Reserve plugin fails"),
    pytest.param([("succeedReservePlugin1", False), ("failedReservePlugin1", True), ("succeedReservePlugin2", False)], 1,
                 id="The middle Reserve plugin fails"),
    pytest.param([("succeedReservePlugin1", False), ("succeedReservePlugin2", False), ("failedReservePlugin1", True)], 2,
                 id="The last Reserve plugin fails"),
    pytest.param([("succeedReservePlugin1", False), ("succeedReservePlugin2", False), ("succeedReservePlugin3", False)], -1,
                 id="The Reserve plugins succeed"),
])
def test_un_reserve_reserve_plugins(fails: list[tuple[str, bool]], fail_index: int) -> None:
    """Reserve runs in order up to the first failure; then every Reserve plugin's Unreserve runs
    once (those that did not reserve too)."""
    plugins = [named(FakeReserve, name)(fail) for name, fail in fails]
    _attempt(plugins, 2, "error" if fail_index >= 0 else "scheduled")
    if fail_index >= 0:
        assert [p.reserve_calls for p in plugins] == [1 if i <= fail_index else 0 for i in range(len(plugins))]
        assert [p.unreserve_calls for p in plugins] == [1] * len(plugins)
    else:
        assert [(p.reserve_calls, p.unreserve_calls) for p in plugins] == [(1, 0)] * len(plugins)


# --- TestUnReservePermitPlugins, TestUnReservePreBindPlugins ------------------------------------------
@pytest.mark.parametrize(("permit_name", "mode", "want"), [
    pytest.param("rejectedPermitPlugin", {"reject": True}, "unschedulable",
                 id="All Reserve plugins passed, but a Permit plugin was rejected"),
    pytest.param("timeoutPermitPlugin", {"timeout": True}, "unschedulable",
                 id="All Reserve plugins passed, but a Permit plugin timeout in waiting"),
    pytest.param("succeedPermitPlugin", {}, "scheduled", id="The Permit plugin succeed"),
])
def test_un_reserve_permit_plugins(permit_name: str, mode: dict[str, bool], want: str) -> None:
    """Each attempt a Permit plugin rejects (or lets time out) unreserves once. A rejected pod is
    tried again at once here (its rejecting plugin registers no events, so any event requeues it,
    and 1.35 pops backoffQ while activeQ is empty): upstream reads its counters right after the
    first rejection and expects one call each; the translation compares them per attempt."""
    permit = named(FakePermit, permit_name)(**mode)
    reserve = named(FakeReserve, "reservePlugin")()
    _attempt([permit, reserve], 2, want)
    assert permit.calls >= 1
    assert reserve.unreserve_calls == (permit.calls if want == "unschedulable" else 0)


@pytest.mark.parametrize(("reject", "want"), [
    pytest.param(True, "unschedulable", id="All Reserve plugins passed, but a PreBind plugin failed"),
    pytest.param(False, "scheduled", id="All Reserve plugins passed, and PreBind plugin succeed"),
])
def test_un_reserve_pre_bind_plugins(reject: bool, want: str) -> None:
    """Each attempt a PreBind plugin rejects unreserves once (compared per attempt, as above)."""
    pre_bind = FakePreBind(reject=reject)
    reserve = named(FakeReserve, "reservePlugin")()
    _attempt([pre_bind, reserve], 2, want)
    assert pre_bind.calls >= 1
    assert reserve.unreserve_calls == (pre_bind.calls if reject else 0)


# --- TestUnReserveBindPlugins -------------------------------------------------------------------------
@pytest.mark.parametrize("bind_name", [
    pytest.param("SucceedBindPlugin", id="All Reserve plugins passed, and Bind plugin succeed"),
    pytest.param("FailedBindPlugin", id="All Reserve plugins passed, but a Bind plugin failed"),
])
def test_un_reserve_bind_plugins(bind_name: str) -> None:
    """Upstream's two cases both bind (its "failed" plugin has no failing status set): the pod
    is scheduled, the Bind plugin called once, and nothing unreserved."""
    bind = named(FakeBind, bind_name)()
    reserve = named(FakeReserve, "reservePlugin")()
    registry, config = _registry_and_config(bind, reserve)

    async def scenario() -> str:
        async with embedded(config, _nodes(2), registry=registry, kubelet=False, controllers=False) as cluster:
            bind.store = cluster.store
            cluster.create(pod("test-pod"))
            await cluster.scheduled("test-pod")
            return str(cluster.pod("test-pod")["metadata"].get("annotations", {}).get(BIND_PLUGIN_ANNOTATION, ""))

    assert run(scenario) == bind_name
    assert (bind.calls, reserve.unreserve_calls) == (1, 0)


# --- TestBindPlugin -----------------------------------------------------------------------------------
SKIP, SUCCESS = Status(Code.Skip), None


@pytest.mark.parametrize(("statuses", "bound_by", "want_invocations"), [
    pytest.param([SKIP, SKIP], "", [("bind-plugin-1", 1), ("bind-plugin-2", 1), ("mock-post-bind-plugin", 1)],
                 id="bind plugins skipped to bind the pod and scheduler bond the pod"),
    pytest.param([SKIP, SUCCESS], "bind-plugin-2", [("bind-plugin-1", 1), ("bind-plugin-2", 1), ("mock-post-bind-plugin", 1)],
                 id="bindplugin2 succeeded to bind the pod"),
    pytest.param([SUCCESS, SUCCESS], "bind-plugin-1", [("bind-plugin-1", 1), ("mock-post-bind-plugin", 1)],
                 id="bindplugin1 succeeded to bind the pod"),
    pytest.param([Status(Code.Error, "failed to bind"), SUCCESS], None, [("bind-plugin-1", 1), ("mock-reserve-plugin", 1)],
                 id="bind plugin fails to bind the pod"),
])
def test_bind_plugin(statuses: list[Status | None], bound_by: str | None, want_invocations: list[tuple[str, int]]) -> None:
    """Bind plugins run in order until one does not Skip; DefaultBinder, listed last, binds when
    both skip; PostBind follows a binding, Unreserve a failed one (and the pod gets a scheduling
    error). ``bound_by``: the plugin expected to bind ("" for DefaultBinder, None for no binding)."""
    invocations: list[tuple[str, int]] = []
    binds = [named(FakeBind, f"bind-plugin-{i}")(status, invocations) for i, status in enumerate(statuses, 1)]
    reserve = named(FakeReserve, "mock-reserve-plugin")(invocations=invocations)
    post_bind = named(FakePostBind, "mock-post-bind-plugin")(invocations)
    registry, config = _registry_and_config(reserve, post_bind, *binds, profiles=[{
        "schedulerName": "default-scheduler", "plugins": {
            "multiPoint": {"disabled": [{"name": "DefaultBinder"}]},
            "reserve": {"enabled": [{"name": reserve.name}]},
            "bind": {"enabled": [*[{"name": b.name} for b in binds], {"name": "DefaultBinder"}],
                     "disabled": [{"name": "DefaultBinder"}]},
            "postBind": {"enabled": [{"name": post_bind.name}]}}}])

    async def scenario() -> str | None:
        async with embedded(config, _nodes(2), registry=registry, kubelet=False, controllers=False) as cluster:
            for b in binds:
                b.store = cluster.store
            cluster.create(pod("test-pod"))
            if bound_by is None:
                await _outcome(cluster, "error")
                return None
            await cluster.scheduled("test-pod")
            await cluster.wait_for("PostBind", lambda: post_bind.calls == 1)
            return str(cluster.pod("test-pod")["metadata"].get("annotations", {}).get(BIND_PLUGIN_ANNOTATION, ""))

    assert run(scenario) == bound_by
    assert invocations[:len(want_invocations)] == want_invocations
    if bound_by is not None:
        assert reserve.unreserve_calls == 0
    else:
        assert post_bind.calls == 0


# --- TestPostBindPlugin -------------------------------------------------------------------------------
@pytest.mark.parametrize("pre_bind_fail", [pytest.param(True, id="plugin preBind fail"),
                                           pytest.param(False, id="plugin preBind do not fail")])
def test_post_bind_plugin(pre_bind_fail: bool) -> None:
    pre_bind = FakePreBind(fail=pre_bind_fail)
    post_bind = FakePostBind()
    _attempt([pre_bind, post_bind], 2, "error" if pre_bind_fail else "scheduled")
    assert (post_bind.calls == 0) if pre_bind_fail else (post_bind.calls > 0)


# --- TestPermitPlugin ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("fail", "reject", "timeout", "want"), [
    pytest.param(False, False, False, "scheduled", id="disable fail, reject and timeout flags"),
    pytest.param(True, False, False, "error", id="enable fail, disable reject and timeout flags"),
    pytest.param(False, True, False, "unschedulable", id="disable fail and timeout, enable reject flags"),
    pytest.param(True, True, False, "error", id="enable fail and reject, disable timeout flags"),
    pytest.param(False, False, True, "unschedulable", id="disable fail and reject, disable timeout flags"),
    pytest.param(False, False, True, "unschedulable", id="disable fail and reject, enable timeout flags"),
])
def test_permit_plugin(fail: bool, reject: bool, timeout: bool, want: str) -> None:
    """An Error from Permit fails the attempt; a rejection or a timed-out wait leaves the pod
    unschedulable. (Upstream's "disable fail and reject, disable timeout flags" sets the timeout
    flag, as its name does not say; translated as written.)"""
    permit = FakePermit(reject=reject, timeout=timeout, fail=fail)
    _attempt([permit], 2, want)
    assert permit.calls > 0


# --- TestMultiplePermitPlugins --------------------------------------------------------------------------
def test_multiple_permit_plugins() -> None:
    """Two Permit plugins make the pod wait: it waits on both, on one once the first allows it,
    and is scheduled once both have."""
    first, second = named(FakePermit, "permit-plugin-1")(timeout=True), named(FakePermit, "permit-plugin-2")(timeout=True)
    registry, config = _registry_and_config(first, second)

    async def scenario() -> tuple[list[str], list[str], str]:
        async with embedded(config, _nodes(2), registry=registry, kubelet=False, controllers=False) as cluster:
            cluster.create(pod("test-pod"))
            uid = cluster.pod("test-pod")["metadata"]["uid"]
            await cluster.wait_for("the pod to wait", lambda: first.framework.get_waiting_pod(uid) is not None)
            waiting = first.framework.get_waiting_pod(uid)
            assert waiting is not None
            both = sorted(waiting.pending_plugins())
            first.allow_all_pods()
            one = waiting.pending_plugins()
            second.allow_all_pods()
            return both, one, await cluster.scheduled("test-pod")

    both, one, where = run(scenario)
    assert both == ["permit-plugin-1", "permit-plugin-2"]
    assert one == ["permit-plugin-2"]
    assert where.startswith("test-node-")
    assert first.calls > 0 and second.calls > 0


# --- TestCoSchedulingWithPermitPlugin ------------------------------------------------------------------
@pytest.mark.parametrize(("wait_reject", "wait_allow"), [
    pytest.param(True, False, id="having wait reject true and wait allow false"),
    pytest.param(False, True, id="having wait reject false and wait allow true"),
])
def test_co_scheduling_with_permit_plugin(wait_reject: bool, wait_allow: bool) -> None:
    """The first of two pods waits at Permit; the second rejects both or allows the first and
    passes: both unschedulable, or both scheduled."""
    permit = FakePermit(wait_and_reject=wait_reject, wait_and_allow=wait_allow)
    registry, config = _registry_and_config(permit)

    async def scenario() -> None:
        async with embedded(config, _nodes(2), registry=registry, kubelet=False, controllers=False) as cluster:
            cluster.create(pod("pod-a"), pod("pod-b"))
            for name in ("pod-a", "pod-b"):
                await _outcome(cluster, "unschedulable" if wait_reject else "scheduled", name)

    run(scenario)
    other = permit.rejecting_pod if wait_reject else permit.allowing_pod
    assert {permit.waiting_pod, other} == {"pod-a", "pod-b"}
    assert permit.calls > 0


# --- TestFilterPlugin, TestPreScorePlugin ---------------------------------------------------------------
@pytest.mark.parametrize("fail", [pytest.param(True, id="fail filter plugin"), pytest.param(False, id="do not fail filter plugin")])
def test_filter_plugin(fail: bool) -> None:
    """On the one node: an Error from Filter fails the attempt; otherwise Filter runs once."""
    plugin = FakeFilter(fail=fail)
    _attempt([plugin], 1, "error" if fail else "scheduled")
    assert plugin.calls >= 1 if fail else plugin.calls == 1


@pytest.mark.parametrize("fail", [pytest.param(True, id="fail preScore plugin"),
                                  pytest.param(False, id="do not fail preScore plugin")])
def test_pre_score_plugin(fail: bool) -> None:
    plugin = FakePreScore(fail)
    _attempt([plugin], 2, "error" if fail else "scheduled")
    assert plugin.calls > 0


# --- TestPreEnqueuePlugin -------------------------------------------------------------------------------
@pytest.mark.parametrize(("gates", "admit"), [
    pytest.param([], True, id="pod is admitted to enqueue"),
    pytest.param(["foo"], False, id="pod is not admitted to enqueue"),
])
def test_pre_enqueue_plugin(gates: list[str], admit: bool) -> None:
    """An admitted pod is scheduled (PreEnqueue ran); a gated one is reported SchedulingGated and
    never reaches PreFilter."""
    enqueue, pre_filter = FakePreEnqueue(admit), FakePreFilter()
    registry, config = _registry_and_config(enqueue, pre_filter)
    spec: dict[str, Any] = {"schedulingGates": [{"name": g} for g in gates]} if gates else {}

    async def scenario() -> str:
        async with embedded(config, _nodes(1), registry=registry, kubelet=False, controllers=False) as cluster:
            cluster.create(pod("p", **spec))
            if admit:
                return await cluster.scheduled("p", timeout=10)
            await cluster.wait_for("the pod to be gated", lambda: cluster.condition("p").get("reason") == "SchedulingGated",
                                   timeout=10)
            return ""

    where = run(scenario)
    if admit:
        assert where == "test-node-0"
        assert enqueue.calls > 0
    else:
        assert pre_filter.calls == 0


# --- TestPreemptWithPermitPlugin ------------------------------------------------------------------------
class CountingFilter(FakeFilter):
    """Upstream's FilterPlugin with ``numCalledPerPod``: how often each pod was tried."""

    def __init__(self) -> None:
        super().__init__()
        self.per_pod: dict[str, int] = {}

    def filter(self, state: CycleState, pod_info: PodInfo, node_info: Any) -> Status | None:
        self.per_pod[pod_info.name] = self.per_pod.get(pod_info.name, 0) + 1
        return super().filter(state, pod_info, node_info)


def _priority_pod(name: str, priority: str, cpu: str, memory: str) -> dict[str, Any]:
    p = pod(name, requests={"cpu": cpu, "memory": memory}, priorityClassName=priority)
    p["spec"]["terminationGracePeriodSeconds"] = 0
    return p


PRIORITY_CLASSES = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
                    for n, v in (("low", 100), ("high", 300))]


@pytest.mark.parametrize(("running", "preemptor_priority", "delete_waiting", "max_waiting_calls"), [
    pytest.param(True, "high", False, 2, id="waiting pod is not physically deleted upon preemption"),
    pytest.param(False, "high", False, 1, id="rejecting a waiting pod to trigger retrying unschedulable pods immediately, "
                                             "but the waiting pod itself won't be retried"),
    pytest.param(False, "low", True, 1, id="deleting a waiting pod to trigger retrying unschedulable pods immediately"),
])
def test_preempt_with_permit_plugin(running: bool, preemptor_priority: str, delete_waiting: bool,
                                    max_waiting_calls: int) -> None:
    """A pod waiting at Permit is a preemption victim like a bound one, but is only rejected (it
    leaves the waiting pods, not the API server); rejecting or deleting it lets the preemptor,
    400m on a 500m node, be scheduled."""
    permit = FakePermit(wait_and_allow=True)
    permit.waiting_pod = "waiting-pod"
    counting = CountingFilter()
    registry, config = _registry_and_config(permit, counting, profiles=[{"schedulerName": "default-scheduler", "plugins": {
        "permit": {"enabled": [{"name": permit.name}]},
        "filter": {"enabled": [{"name": counting.name}, {"name": "NodeResourcesFit"}],
                   "disabled": [{"name": "NodeResourcesFit"}]}}}])

    async def scenario() -> tuple[str, bool, bool, int]:
        objects = [*PRIORITY_CLASSES, node("test-node-0", capacity={"pods": "32", "cpu": "500m", "memory": "500"})]
        async with embedded(config, objects, registry=registry, kubelet=False, controllers=False) as cluster:
            if running:
                cluster.create(_priority_pod("running-pod", "low", "200m", "200"))
                await cluster.scheduled("running-pod")
            cluster.create(_priority_pod("waiting-pod", "low", "200m", "200"))
            await cluster.wait_for("the pod to wait", lambda: _waiting(permit) > 0)
            cluster.create(_priority_pod("preemptor-pod", preemptor_priority, "400m", "400"))
            if delete_waiting:
                cluster.delete("Pod", "waiting-pod", "default")
            where = await cluster.scheduled("preemptor-pod")
            await cluster.wait_for("no pod to wait", lambda: _waiting(permit) == 0)
            return where, cluster.exists("waiting-pod"), running and cluster.exists("running-pod"), counting.per_pod["waiting-pod"]

    where, waiting_exists, running_exists, waiting_calls = run(scenario)
    assert where == "test-node-0"
    assert waiting_exists is not delete_waiting
    assert not running_exists
    assert waiting_calls <= max_waiting_calls
    assert permit.calls > 0


def _waiting(permit: FakePermit) -> int:
    found: list[str] = []
    permit.framework.iterate_waiting_pods(lambda wp: found.append(wp.pod.name))
    return len(found)


# --- TestActivatePods -----------------------------------------------------------------------------------
class JobPlugin(PreFilterPlugin, PostBindPlugin):
    """Upstream's ``JobPlugin``: executors wait (unresolvable) until a driver pod exists; the
    driver's PostBind activates them. It reads pods from the cluster, as upstream's lister does."""

    name = "job plugin"

    def __init__(self) -> None:
        super().__init__(None, None)
        self.store: ObjectStore | None = None
        self.pods_activated = False

    def _pods(self, label: str) -> list[dict[str, Any]]:
        assert self.store is not None, "the test gives the plugin the cluster's store"
        return [p for p in self.store.iter_all(POD)
                if label in ((p.get("metadata") or {}).get("labels") or {})]

    def pre_filter(self, state: CycleState, pod_info: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not self._pods("driver"):
            return None, Status(Code.UnschedulableAndUnresolvable, "unable to find driver pod")
        return None, None

    def post_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        if "driver" not in pod_info.labels:
            return
        executors = self._pods("executor")
        if executors:
            for p in executors:
                state.pods_to_activate[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] = PodInfo(p)
            self.pods_activated = True


def test_activate_pods() -> None:
    """Two executors wait for their driver; once it is bound its PostBind activates them, and
    all three are scheduled."""
    job = JobPlugin()
    registry, config = _registry_and_config(job, profiles=[{"schedulerName": "default-scheduler", "plugins": {
        "preFilter": {"enabled": [{"name": job.name}]}, "postBind": {"enabled": [{"name": job.name}]}}}])

    async def scenario() -> list[str]:
        async with embedded(config, _nodes(1), registry=registry, kubelet=False, controllers=False) as cluster:
            job.store = cluster.store
            executors = [pod(f"executor-{i}", labels={"executor": ""}) for i in (1, 2)]
            cluster.create(*executors)
            for p in executors:
                await cluster.unschedulable(p["metadata"]["name"])
            cluster.create(pod("driver", labels={"driver": ""}))
            return [await cluster.scheduled(n) for n in ("executor-1", "executor-2", "driver")]

    assert run(scenario) == ["test-node-0"] * 3
    assert job.pods_activated


# --- TestReScheduling (test/integration/scheduler/rescheduling_test.go) ---------------------------------
class _RejectOnce:
    """rescheduling_test.go's plugins: the first call rejects (or every call fails, with an
    Error code); Node/Add events requeue the pods they rejected."""

    def __init__(self, code: Code) -> None:
        self.code, self.calls = code, 0

    def verdict(self, what: str) -> Status | None:
        self.calls += 1
        if self.code == Code.Error:
            return Status(Code.Error, f"failed to {what}")
        if self.code == Code.Unschedulable and self.calls <= 1:
            return Status(Code.Unschedulable, f"reject to {what}")
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add), lambda pod, old, new: QueueingHint.Queue)]


class ReschedulingPermit(_RejectOnce, PermitPlugin, EnqueueExtensions):
    name = "permit"

    def __init__(self, code: Code) -> None:
        _RejectOnce.__init__(self, code)
        PermitPlugin.__init__(self, None, None)

    def permit(self, state: CycleState, pod_info: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return self.verdict("permit"), 0


class ReschedulingReserve(_RejectOnce, ReservePlugin, EnqueueExtensions):
    name = "reserve"

    def __init__(self, code: Code) -> None:
        _RejectOnce.__init__(self, code)
        ReservePlugin.__init__(self, None, None)

    def reserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        return self.verdict("reserve")

    def unreserve(self, state: CycleState, pod_info: PodInfo, node_name: str) -> None:
        return None


NEW_NODE = node("fake-node")
UNRELATED_POD = pod("test-pod-2")


@pytest.mark.parametrize(("plugin_class", "code", "action", "first", "want"), [
    pytest.param(ReschedulingPermit, Code.Unschedulable, NEW_NODE, "unschedulable", "scheduled",
                 id="Rescheduling pod rejected by Permit Plugin"),
    pytest.param(ReschedulingPermit, Code.Unschedulable, UNRELATED_POD, "unschedulable", "unschedulable",
                 id="Rescheduling pod rejected by Permit Plugin with unrelated event"),
    pytest.param(ReschedulingPermit, Code.Error, NEW_NODE, "error", "error", id="Rescheduling pod failed by Permit Plugin"),
    pytest.param(ReschedulingReserve, Code.Unschedulable, NEW_NODE, "unschedulable", "scheduled",
                 id="Rescheduling pod rejected by Reserve Plugin"),
    pytest.param(ReschedulingReserve, Code.Unschedulable, UNRELATED_POD, "unschedulable", "unschedulable",
                 id="Rescheduling pod rejected by Reserve Plugin with unrelated event"),
    pytest.param(ReschedulingReserve, Code.Error, NEW_NODE, "error", "error", id="Rescheduling pod failed by Reserve Plugin"),
])
def test_re_scheduling(plugin_class: type[ReschedulingPermit] | type[ReschedulingReserve], code: Code,
                       action: dict[str, Any], first: str, want: str) -> None:
    """A pod rejected at Reserve or Permit is tried again when a Node is added (the event its
    plugin registers), and scheduled; an unrelated event (another pod) leaves it pending; a plugin
    that always fails keeps failing. Upstream runs each case with SchedulerAsyncAPICalls on and
    off; kubesched has one behaviour, so each runs once."""
    plugin = plugin_class(code)
    registry, config = _registry_and_config(plugin)

    async def scenario() -> str:
        async with embedded(config, _nodes(2), registry=registry, kubelet=False, controllers=False) as cluster:
            cluster.create(pod("test-pod"))
            await _outcome(cluster, first)
            cluster.create(action)
            if want == "unschedulable":
                await cluster.stays_pending("test-pod", seconds=5)
            return await _outcome(cluster, want)

    run(scenario)


# --- TestPostFilterPlugin -------------------------------------------------------------------------------
class FakePostFilter(PostFilterPlugin):
    """Upstream's ``PostFilterPlugin``: runs the Filter plugins on every node and the Score plugins
    through the framework (results ignored), then succeeds, fails, rejects or rejects as
    unresolvable."""

    name = "postfilter-plugin"

    def __init__(self, reject: bool = False, unresolvable: bool = False) -> None:
        super().__init__(None, None)
        self.reject, self.unresolvable, self.calls = reject, unresolvable, 0

    def post_filter(self, state: CycleState, pod_info: PodInfo, statuses: Any) -> tuple[PostFilterResult | None, Status | None]:
        self.calls += 1
        table = self.framework.snapshot
        for info in table.infos:
            self.framework.run_filters_on_node_info(state, pod_info, info)
        with contextlib.suppress(StatusError):  # upstream's plugin ignores what RunScorePlugins returns
            self.framework.run_score(state, pod_info, table.all_rows())
        if self.reject:
            return None, Status(Code.Unschedulable, f"injecting unschedulable for pod {pod_info.name}")
        if self.unresolvable:
            return None, Status(Code.UnschedulableAndUnresolvable, f"injecting unresolvable for pod {pod_info.name}")
        return None, Status(Code.Success, f"make room for pod {pod_info.name} to be schedulable")


@pytest.mark.parametrize(("nodes", "reject_filter", "fail_score", "post_filters", "filter_calls", "score_calls",
                          "post_filters_per_attempt"), [
    pytest.param(30, False, False, ({}, {}), 30, 30, 0, id="Filter passed and Score success"),
    pytest.param(1, True, False, ({}, {}), 2, 1, 1, id="Filter failed and PostFilter passed"),
    pytest.param(1, True, False, ({"reject": True}, {}), 2, 1, 2, id="Filter failed and PostFilter failed"),
    pytest.param(1, True, True, ({"reject": True}, {}), 2, 1, 2, id="Score failed and PostFilter failed"),
    pytest.param(1, True, False, ({"unresolvable": True}, {}), 2, 0, 1, id="Filter failed and first PostFilter broken"),
    pytest.param(1, True, False, ({"reject": True}, {"reject": True, "unresolvable": True}), 2, 0, 2,
                 id="Filter failed and second PostFilter broken"),
])
def test_post_filter_plugin(nodes: int, reject_filter: bool, fail_score: bool, post_filters: tuple[dict[str, bool], dict[str, bool]],
                            filter_calls: int, score_calls: int, post_filters_per_attempt: int) -> None:
    """PostFilter plugins run in order until one succeeds or rejects as unresolvable. Upstream
    counts PostFilter calls right after the first failed attempt; a pod rejected by a plugin that
    registers no events is tried again at once here (see TestUnReservePermitPlugins), so the
    counts are checked per attempt: the first PostFilter plugin runs once per attempt, the second
    as often when the first only rejects. Filter and Score counts are lower bounds, as upstream's."""
    filter_plugin, score = FakeFilter(reject=reject_filter), FakeScore(fail_score)
    first = FakePostFilter(**post_filters[0])
    second = named(FakePostFilter, "postfilter-plugin2")(**post_filters[1])
    registry, config = _registry_and_config(filter_plugin, score, first, second, profiles=[{
        "schedulerName": "default-scheduler", "plugins": {
            "filter": {"enabled": [{"name": filter_plugin.name}]},
            "score": {"enabled": [{"name": score.name}], "disabled": [{"name": "*"}]},
            "postFilter": {"enabled": [{"name": first.name}, {"name": second.name}], "disabled": [{"name": "*"}]}}}])
    _attempt_with(registry, config, nodes, "unschedulable" if reject_filter else "scheduled")
    assert filter_plugin.calls >= filter_calls if reject_filter else filter_plugin.calls == filter_calls
    assert score.calls >= score_calls if reject_filter else score.calls == score_calls
    attempts = first.calls
    assert (attempts >= 1) if reject_filter else attempts == 0
    assert first.calls + second.calls == attempts * post_filters_per_attempt
