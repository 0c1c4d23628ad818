"""Upstream's test/integration/scheduler/preemption/preemption_test.go TestPreemption, end to end
on the embedded cluster, with upstream's token filter plugin: each table case is a parametrized id
named as upstream names it.

Upstream runs every case with async preemption, async API calls and
ClearingNominatedNodeNameAfterBinding on and off; kubesched has one behaviour (preemption runs
asynchronously, as with SchedulerAsyncPreemption on, its default in 1.35), so each case runs once."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from kubesched.api.apierrors import Forbidden
from kubesched.api.kinds import POD
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import (
    FilterPlugin,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
)
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins.registry import in_tree_registry
from tests.integration.embedded import configuration, embedded, run
from tests.integration.wrappers import bound_claim, node, persistent_volume, pod

TOKEN_FILTER = "tokenfilter"
PRIORITIES = {"low": 100, "medium": 200, "high": 300}


class TokenFilter(PreFilterPlugin, FilterPlugin, PreFilterExtensions):
    """Upstream's ``tokenFilter``: each Filter call spends a token and fails once none are left;
    the preemption dry run's AddPod/RemovePod take or give back one; with ``pre_filter_enabled``
    PreFilter fails when no token is left."""

    name = TOKEN_FILTER

    def __init__(self, tokens: int, unresolvable: bool, pre_filter_enabled: bool) -> None:
        super().__init__(None, None)
        self.tokens, self.unresolvable, self.pre_filter_enabled = tokens, unresolvable, pre_filter_enabled

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if self.tokens > 0:
            self.tokens -= 1
            return None
        code = Code.UnschedulableAndUnresolvable if self.unresolvable else Code.Unschedulable
        return Status(code, f"can't fit {pod.name}")

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not self.pre_filter_enabled or self.tokens > 0:
            return None, None
        return None, Status(Code.Unschedulable)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        self.tokens -= 1
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        self.tokens += 1
        return None


def _pod(name: str, priority: str, cpu: str = "100m", memory: str = "100", labels: dict[str, str] | None = None,
         anti_to: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priorityClassName": priority}
    if anti_to:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchExpressions": [{"key": "pod", "operator": "In", "values": [anti_to]}]}, "topologyKey": "node"}]}}
    return pod(name, labels=labels, requests={"cpu": cpu, "memory": memory}, **spec)


MAX_TOKENS = 1000
CASES = [
    pytest.param(MAX_TOKENS, False, False, [_pod("victim-pod", "low", "400m", "200")], _pod("preemptor-pod", "high", "300m", "200"),
                 {"victim-pod"}, id="basic pod preemption"),
    pytest.param(1, False, False, [_pod("victim-pod", "low", "200m", "200")], _pod("preemptor-pod", "high", "200m", "200"),
                 {"victim-pod"}, id="basic pod preemption with filter"),
    pytest.param(1, True, False, [_pod("victim-pod", "low", "200m", "200")], _pod("preemptor-pod", "high", "200m", "200"),
                 {"victim-pod"}, id="basic pod preemption with preFilter"),
    pytest.param(1, False, True, [_pod("victim-pod", "low", "200m", "200")], _pod("preemptor-pod", "high", "200m", "200"),
                 set(), id="basic pod preemption with unresolvable filter"),
    pytest.param(MAX_TOKENS, False, False,
                 [_pod("pod-0", "medium", labels={"pod": "p0"}), _pod("pod-1", "low", labels={"pod": "p1"}, anti_to="preemptor")],
                 _pod("preemptor-pod", "high", labels={"pod": "preemptor"}, anti_to="p0"), {"pod-0", "pod-1"},
                 id="preemption is performed to satisfy anti-affinity"),
    pytest.param(MAX_TOKENS, False, False,
                 [_pod("pod-0", "medium", labels={"pod": "p0"}), _pod("pod-1", "high", labels={"pod": "p1"}, anti_to="preemptor")],
                 _pod("preemptor-pod", "high", labels={"pod": "preemptor"}, anti_to="p0"), set(),
                 id="preemption is not performed when anti-affinity is not satisfied"),
]


@pytest.mark.parametrize(("tokens", "pre_filter_enabled", "unresolvable", "existing", "preemptor", "victims"), CASES)
def test_preemption(tokens: int, pre_filter_enabled: bool, unresolvable: bool, existing: list[dict[str, Any]],
                    preemptor: dict[str, Any], victims: set[str]) -> None:
    """The victims are deleted carrying the DisruptionTarget condition, the others stay, and the
    preemptor is nominated to the node when there were victims."""
    token_filter = TokenFilter(tokens, unresolvable, pre_filter_enabled)
    registry = merge(in_tree_registry(), {TOKEN_FILTER: lambda _args, _handle: token_filter})
    config = configuration({"schedulerName": "default-scheduler", "plugins": {
        "filter": {"enabled": [{"name": TOKEN_FILTER}]}, "preFilter": {"enabled": [{"name": TOKEN_FILTER}]}}}, registry=registry)
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
               for n, v in PRIORITIES.items()]
    node1 = node("node1", {"node": "node1"}, capacity={"cpu": "500m", "memory": "500"})

    async def scenario() -> tuple[set[str], set[str], str]:
        last_seen: dict[str, dict[str, Any]] = {}
        nominated: list[str] = []
        async with embedded(config, [*classes, node1], registry=registry) as cluster:
            def watch(_rv: int, kind: object, event: Any) -> None:
                if kind == POD:
                    last_seen[event.object["metadata"]["name"]] = event.object
                    if event.object["metadata"]["name"] == "preemptor-pod":
                        nominated.append((event.object.get("status") or {}).get("nominatedNodeName") or "")

            cluster.store.write_hooks.append(watch)
            for p in existing:
                cluster.create(p)
                await cluster.scheduled(p["metadata"]["name"])
            cluster.create(preemptor)
            names = [p["metadata"]["name"] for p in existing]

            def settled() -> bool:
                gone = {n for n in names if not cluster.exists(n)}
                return gone == victims and (not victims or "node1" in nominated)

            await cluster.wait_for("the preemption to settle", settled)
            if not victims:
                await cluster.stays_pending("preemptor-pod", seconds=5)
            gone = {n for n in names if not cluster.exists(n)}
            marked = {n for n in gone if any(c.get("type") == "DisruptionTarget"
                                             for c in (last_seen[n].get("status") or {}).get("conditions") or [])}
            return gone, marked, "node1" if "node1" in nominated else ""

    gone, marked, nominated_node = run(scenario)
    assert gone == victims
    assert marked == victims
    assert nominated_node == ("node1" if victims else "")


# --- TestNonPreemption, TestDisablePreemption, TestPodPriorityResolution, TestPreemptionStarvation --------
NODE_500M = node("node1", capacity={"cpu": "500m", "memory": "500"})


def _priority_class(name: str, value: int, policy: str | None = None) -> dict[str, Any]:
    pc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    if policy:
        pc["preemptionPolicy"] = policy
    return pc


LOW_HIGH = [_priority_class("low", 100), _priority_class("medium", 200), _priority_class("high", 300),
            _priority_class("high-never", 300, "Never")]


async def _nominated_within(cluster: Any, name: str, seconds: float) -> bool:
    """Upstream's ``WaitForNominatedNodeNameWithTimeout``: whether the pod gets a nominated node."""
    try:
        await cluster.wait_for(f"{name} to be nominated",
                               lambda: bool((cluster.pod(name).get("status") or {}).get("nominatedNodeName"))
                               or bool(cluster.node_of(name)), seconds)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize(("preemptor_class", "nominated"), [
    pytest.param("high", True, id="pod preemption will happen"),
    pytest.param("high-never", False, id="pod preemption will not happen"),
])
def test_non_preemption(preemptor_class: str, nominated: bool) -> None:
    """A preemptor whose PriorityClass says ``preemptionPolicy: Never`` is not nominated. Upstream
    sets the policy on the pod; admission derives it from the class, so the class carries it here."""

    async def scenario() -> bool:
        async with embedded(None, [*LOW_HIGH, NODE_500M]) as cluster:
            cluster.create(_pod("victim-pod", "low", "400m", "200"))
            await cluster.scheduled("victim-pod", timeout=5)
            cluster.create(_pod("preemptor-pod", preemptor_class, "300m", "200"))
            return await _nominated_within(cluster, "preemptor-pod", 5)

    assert run(scenario) is nominated


def test_disable_preemption() -> None:
    """Upstream case "pod preemption will not happen": with DefaultPreemption disabled at
    PostFilter the preemptor stays unschedulable and is never nominated."""
    config = configuration({"schedulerName": "default-scheduler",
                            "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}})

    async def scenario() -> tuple[bool, bool]:
        async with embedded(config, [*LOW_HIGH, NODE_500M]) as cluster:
            cluster.create(_pod("victim-pod", "low", "400m", "200"))
            await cluster.scheduled("victim-pod")
            cluster.create(_pod("preemptor-pod", "high", "300m", "200"))
            await cluster.unschedulable("preemptor-pod")
            return await _nominated_within(cluster, "preemptor-pod", 5), cluster.exists("victim-pod")

    assert run(scenario) == (False, True)


@pytest.mark.parametrize(("class_name", "priority", "error"), [
    pytest.param("system-node-critical", 2000001000, None, id="SystemNodeCritical priority class"),
    pytest.param("system-cluster-critical", 2000000000, None, id="SystemClusterCritical priority class"),
    pytest.param("foo", None, 'pods "pod3-system-cluster-critical" is forbidden: no PriorityClass with name foo was found',
                 id="Invalid priority class should result in error"),
])
def test_pod_priority_resolution(class_name: str, priority: int | None, error: str | None) -> None:
    """The system priority classes exist from the start and resolve to their values; an unknown
    class is refused by admission with upstream's message."""
    names = {"system-node-critical": "pod1-system-node-critical", "system-cluster-critical": "pod2-system-cluster-critical",
             "foo": "pod3-system-cluster-critical"}

    async def scenario() -> tuple[int | None, str]:
        async with embedded(None, [NODE_500M]) as cluster:
            try:
                cluster.create(pod(names[class_name], "kube-system", priorityClassName=class_name))
            except Forbidden as e:
                return None, str(e)
            await cluster.scheduled(names[class_name], "kube-system")
            return cluster.pod(names[class_name], "kube-system")["spec"].get("priority"), ""

    got_priority, got_error = run(scenario)
    assert got_priority == priority
    assert (error in got_error) if error else got_error == ""


def test_preemption_starvation() -> None:
    """Upstream case "starvation test: higher priority pod is scheduled before the lower priority
    ones": five medium pods fill the node, five more wait; the high-priority preemptor evicts room
    for itself and gets it, nominated on the way, while the waiting pods do not take that room."""

    def medium(name: str) -> dict[str, Any]:
        return _pod(name, "medium", labels={"pod": name})

    async def scenario() -> tuple[str, bool, int]:
        async with embedded(None, [*LOW_HIGH, NODE_500M]) as cluster:
            nominated: list[str] = []

            def watch(_rv: int, kind: object, event: Any) -> None:
                if kind == POD and event.object["metadata"]["name"] == "preemptor-pod":
                    nominated.append((event.object.get("status") or {}).get("nominatedNodeName") or "")

            cluster.store.write_hooks.append(watch)
            for i in range(5):
                p = medium(f"rpod-{i}")
                p["spec"]["terminationGracePeriodSeconds"] = 0
                cluster.create(p)
            for i in range(5):
                await cluster.scheduled(f"rpod-{i}")
            for i in range(5):
                p = medium(f"ppod-{i}")
                p["spec"]["terminationGracePeriodSeconds"] = 0
                cluster.create(p)
            for i in range(5):
                await cluster.unschedulable(f"ppod-{i}")
            cluster.create(_pod("preemptor-pod", "high", "300m", "200"))
            where = await cluster.scheduled("preemptor-pod", timeout=60)
            pending = sum(1 for i in range(5) if not cluster.node_of(f"ppod-{i}"))
            return where, "node1" in nominated, pending

    assert run(scenario) == ("node1", True, 5)


# --- TestPDBInPreemption --------------------------------------------------------------------------------
def _pdb(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """Upstream's ``mkMinAvailablePDB(name, ns, uid, 2, labels)``."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": dict(labels)}}}


def _on_node(name: str, priority: str, where: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    p = _pod(name, priority, labels=labels)
    if where:
        p["spec"]["nodeName"] = where
    return p


@pytest.mark.parametrize(("node_count", "pdbs", "pdb_pods", "existing", "preemptor", "victims"), [
    pytest.param(1, [_pdb("pdb-1", {"foo": "bar"})], [2],
                 [_on_node("low-pod1", "low", labels={"foo": "bar"}), _on_node("low-pod2", "low", labels={"foo": "bar"}),
                  _on_node("mid-pod3", "medium")],
                 _pod("preemptor-pod", "high", "300m", "200"), {"mid-pod3"},
                 id="A non-PDB violating pod is preempted despite its higher priority"),
    pytest.param(2, [_pdb("pdb-1", {"foo": "bar"})], [1],
                 [_on_node("low-pod1", "low", "node-1", {"foo": "bar"}), _on_node("mid-pod2", "medium", "node-2")],
                 _pod("preemptor-pod", "high", "500m", "200"), {"mid-pod2"},
                 id="A node without any PDB violating pods is preferred for preemption"),
    pytest.param(3, [_pdb("pdb-1", {"foo1": "bar"}), _pdb("pdb-2", {"foo2": "bar"})], [1, 5],
                 [_on_node("low-pod1", "low", "node-1", {"foo1": "bar"}), _on_node("mid-pod1", "medium", "node-1"),
                  _on_node("low-pod2", "low", "node-2", {"foo2": "bar"}), _on_node("mid-pod2", "medium", "node-2", {"foo2": "bar"}),
                  _on_node("low-pod4", "low", "node-3", {"foo2": "bar"}), _on_node("low-pod5", "low", "node-3", {"foo2": "bar"}),
                  _on_node("low-pod6", "low", "node-3", {"foo2": "bar"})],
                 _pod("preemptor-pod", "high", "500m", "400"), {"low-pod4", "low-pod5", "low-pod6"},
                 id="A node with fewer PDB violating pods is preferred for preemption"),
])
def test_pdb_in_preemption(node_count: int, pdbs: list[dict[str, Any]], pdb_pods: list[int], existing: list[dict[str, Any]],
                           preemptor: dict[str, Any], victims: set[str]) -> None:
    """With the disruption controller counting each PDB's pods, preemption picks the victims
    upstream picks, and the preemptor is nominated to their node (the last node in every case)."""
    nodes = [node(f"node-{i}", capacity={"cpu": "500m", "memory": "500"}) for i in range(1, node_count + 1)]

    async def scenario() -> tuple[set[str], str]:
        async with embedded(None, [*LOW_HIGH, *nodes]) as cluster:
            nominated: list[str] = []

            def watch(_rv: int, kind: object, event: Any) -> None:
                if kind == POD and event.object["metadata"]["name"] == "preemptor-pod":
                    nominated.append((event.object.get("status") or {}).get("nominatedNodeName") or "")

            cluster.store.write_hooks.append(watch)
            for p in existing:
                cluster.create(p)
                await cluster.scheduled(p["metadata"]["name"])
            cluster.create(*pdbs)
            def counts(name: str, count: int) -> Callable[[], bool]:
                return lambda: (cluster.get("PodDisruptionBudget", name, "default").get("status") or {}).get("expectedPods") == count

            for pdb, count in zip(pdbs, pdb_pods):
                name = pdb["metadata"]["name"]
                await cluster.wait_for(f"{name} to count {count} pods", counts(name, count))
            cluster.create(preemptor)
            names = [p["metadata"]["name"] for p in existing]
            await cluster.wait_for("the victims to go", lambda: {n for n in names if not cluster.exists(n)} == victims)
            await cluster.wait_for("the preemptor to be nominated", lambda: any(nominated))
            return {n for n in names if not cluster.exists(n)}, next(n for n in nominated if n)

    gone, nominated_node = run(scenario)
    assert gone == victims
    assert nominated_node == f"node-{node_count}"


# --- TestReadWriteOncePodPreemption ------------------------------------------------------------------------
RWOP_OBJECTS = [persistent_volume("pv-with-read-write-once-pod-1", ["ReadWriteOncePod"]),
                bound_claim("pvc-with-read-write-once-pod-1", "pv-with-read-write-once-pod-1", ["ReadWriteOncePod"]),
                persistent_volume("pv-with-read-write-once-pod-2", ["ReadWriteOncePod"]),
                bound_claim("pvc-with-read-write-once-pod-2", "pv-with-read-write-once-pod-2", ["ReadWriteOncePod"])]


def _claims_pod(name: str, priority: str, *claims: int) -> dict[str, Any]:
    volumes = [{"name": f"volume-{i}", "persistentVolumeClaim": {"claimName": f"pvc-with-read-write-once-pod-{i}"}} for i in claims]
    return pod(name, priorityClassName=priority, volumes=volumes)


@pytest.mark.parametrize(("existing", "preemptor", "victims"), [
    pytest.param([_claims_pod("victim-pod", "low", 1)], _claims_pod("preemptor-pod", "high", 1), {"victim-pod"},
                 id="preempt single pod"),
    pytest.param([_claims_pod("victim-pod-1", "low", 1), _claims_pod("victim-pod-2", "low", 2)],
                 _claims_pod("preemptor-pod", "high", 1, 2), {"victim-pod-1", "victim-pod-2"}, id="preempt two pods"),
    pytest.param([_claims_pod("victim-pod", "low", 1, 2)], _claims_pod("preemptor-pod", "high", 1, 2), {"victim-pod"},
                 id="preempt single pod with two volumes"),
])
def test_read_write_once_pod_preemption(existing: list[dict[str, Any]], preemptor: dict[str, Any], victims: set[str]) -> None:
    """The pods holding the preemptor's ReadWriteOncePod claims are its victims, and the
    preemptor then runs on their node."""

    async def scenario() -> tuple[set[str], str]:
        async with embedded(None, [*LOW_HIGH, node("node1", {"node": "node1"}, capacity={"cpu": "500m", "memory": "500"}),
                                   *RWOP_OBJECTS]) as cluster:
            for p in existing:
                cluster.create(p)
                await cluster.scheduled(p["metadata"]["name"])
            cluster.create(preemptor)
            names = [p["metadata"]["name"] for p in existing]
            await cluster.wait_for("the victims to go", lambda: {n for n in names if not cluster.exists(n)} == victims)
            return {n for n in names if not cluster.exists(n)}, await cluster.scheduled("preemptor-pod")

    assert run(scenario) == (victims, "node1")


def _all_gone(cluster: Any, names: list[str]) -> bool:
    return not any(cluster.exists(n) for n in names)


# --- TestPreemptionRaces -------------------------------------------------------------------------------
def test_preemption_races() -> None:
    """Upstream case "ensures that other pods are not scheduled while preemptor is being marked as
    nominated" (its name ends with the Kubernetes issue it guards against), five rounds: two
    medium pods run, the preemptor (4900m of 5000m) evicts one, and twenty medium pods created
    right after it never take the room it freed."""
    node1 = node("node1", capacity={"pods": "100", "cpu": "5000m", "memory": "5000"})

    def medium(name: str) -> dict[str, Any]:
        p = _pod(name, "medium", labels={"pod": name})
        p["spec"]["terminationGracePeriodSeconds"] = 0
        return p

    async def scenario() -> list[tuple[str, bool, int]]:
        rounds = []
        async with embedded(None, [*LOW_HIGH, node1]) as cluster:
            for _ in range(5):
                nominated: list[str] = []

                def watch(_rv: int, kind: object, event: Any, seen: list[str] = nominated) -> None:
                    if kind == POD and event.object["metadata"]["name"] == "preemptor-pod":
                        seen.append((event.object.get("status") or {}).get("nominatedNodeName") or "")

                cluster.store.write_hooks.append(watch)
                for i in range(2):
                    cluster.create(medium(f"rpod-{i}"))
                for i in range(2):
                    await cluster.scheduled(f"rpod-{i}")
                cluster.create(_pod("preemptor-pod", "high", "4900m", "4900"))
                for i in range(20):
                    cluster.create(medium(f"ppod-{i}"))
                where = await cluster.scheduled("preemptor-pod", timeout=60)
                scheduled = sum(1 for i in range(20) if cluster.node_of(f"ppod-{i}"))
                rounds.append((where, "node1" in nominated, scheduled))
                cluster.store.write_hooks.remove(watch)
                for name in ["preemptor-pod", *[f"ppod-{i}" for i in range(20)]]:
                    cluster.delete("Pod", name, "default")
                names = ["preemptor-pod", "rpod-0", "rpod-1", *[f"ppod-{i}" for i in range(20)]]
                for name in names:
                    if cluster.exists(name):
                        cluster.delete("Pod", name, "default")
                await cluster.wait_for("the round's pods to go", partial(_all_gone, cluster, names))
        return rounds

    assert run(scenario) == [("node1", True, 0)] * 5


# --- TestNominatedNodeCleanUp --------------------------------------------------------------------------
class AlwaysFail(PreBindPlugin):
    """Upstream's ``alwaysFail``: PreBind fails Unschedulable unless the pod's name says not to."""

    name = "alwaysFailPlugin"

    def pre_bind(self, state: CycleState, pod_info: PodInfo, node_name: str) -> Status | None:
        return None if "do-not-fail-me" in pod_info.name else Status(Code.Unschedulable)


def _cpu_pod(name: str, priority: str, cpu: str) -> dict[str, Any]:
    return pod(name, requests={"cpu": cpu}, priorityClassName=priority)


CLEANUP_CASES = [
    pytest.param("5", [[_cpu_pod(f"low-{i}", "low", "1") for i in range(1, 5)], [_cpu_pod("medium", "medium", "4")],
                       [_cpu_pod("high", "high", "3")]], ["scheduled", "nominated", "nominated"], False, [], False,
                 id="mid-priority pod preempts low-priority pod, followed by a high-priority pod with another preemption"),
    pytest.param("2", [[_cpu_pod("low", "low", "1")], [_cpu_pod("medium", "medium", "2")], [_cpu_pod("high", "high", "1")]],
                 ["scheduled", "nominated", "scheduled"], False, ["low"], False,
                 id="mid-priority pod preempts low-priority pod, followed by a high-priority pod without additional preemption"),
    pytest.param("1", [[_cpu_pod("low", "low", "1")], [_cpu_pod("medium", "medium", "1")]], ["scheduled", "nominated"],
                 True, ["low"], False, id="mid-priority pod preempts low-priority pod, followed by a node deletion"),
    pytest.param("1", [[_cpu_pod("low-do-not-fail-me", "low", "1")], [_cpu_pod("medium", "medium", "1")]],
                 ["scheduled", "nominated"], False, ["low-do-not-fail-me"], True,
                 id="mid-priority pod preempts low-priority pod, but failed the scheduling unexpectedly"),
]


@pytest.mark.parametrize(("cpu", "batches", "checks", "delete_node", "delete_pods", "failing_pre_bind"), CLEANUP_CASES)
def test_nominated_node_clean_up(cpu: str, batches: list[list[dict[str, Any]]], checks: list[str], delete_node: bool,
                                 delete_pods: list[str], failing_pre_bind: bool) -> None:
    """The medium pod's ``status.nominatedNodeName`` is set by its preemption and cleared again
    when a higher-priority pod takes the room, when its node goes, or when its binding cycle
    fails."""
    registry = merge(in_tree_registry(), {AlwaysFail.name: lambda args, handle: AlwaysFail(args, handle)})
    profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
    if failing_pre_bind:
        profile["plugins"] = {"preBind": {"enabled": [{"name": AlwaysFail.name}]}}
    config = configuration(profile, registry=registry)

    async def scenario() -> str:
        async with embedded(config, [*LOW_HIGH, node("fake-node", capacity={"cpu": cpu})], registry=registry) as cluster:
            nominated: set[str] = set()

            def watch(_rv: int, kind: object, event: Any) -> None:
                if kind == POD and (event.object.get("status") or {}).get("nominatedNodeName"):
                    nominated.add(event.object["metadata"]["name"])

            cluster.store.write_hooks.append(watch)
            for batch, check in zip(batches, checks):
                cluster.create(*batch)
                for p in batch:
                    name = p["metadata"]["name"]
                    if check == "scheduled":
                        await cluster.scheduled(name)
                    else:
                        await cluster.wait_for(f"{name} to be nominated", partial(set.__contains__, nominated, name))
            if delete_node:
                cluster.delete("Node", "fake-node")
            for name in delete_pods:
                if cluster.exists(name):
                    cluster.delete("Pod", name, "default")
            await cluster.wait_for("the medium pod's nomination to be cleared",
                                   lambda: not (cluster.pod("medium").get("status") or {}).get("nominatedNodeName"))
            return str((cluster.pod("medium").get("status") or {}).get("nominatedNodeName") or "")

    assert run(scenario) == ""


# --- TestPreferNominatedNode ---------------------------------------------------------------------------
@pytest.mark.parametrize(("existing", "preemptor", "running_node"), [
    pytest.param([_on_node("low-pod1", "low", "node-2")], _pod("preemptor-pod", "high", "500m", "200"), "node-1",
                 id="nominated node released all resource, preemptor is scheduled to the nominated node"),
    pytest.param([_on_node("low-pod", "low", "node-1")], _pod("preemptor-pod1", "high", "500m", "200"), "node-2",
                 id="nominated node cannot pass all the filters, preemptor should find a different node"),
])
def test_prefer_nominated_node(existing: list[dict[str, Any]], preemptor: dict[str, Any], running_node: str) -> None:
    """A pod that already carries ``status.nominatedNodeName: node-1`` (upstream sets it in a
    wrapped NextPod; here it is written right after the pod is created, before the scheduler
    sees it) runs there when node-1 passes the filters, and elsewhere when it does not."""
    nodes = [node(f"node-{i}", capacity={"pods": "32", "cpu": "500m", "memory": "500"}) for i in (1, 2)]
    name = preemptor["metadata"]["name"]

    async def scenario() -> str:
        async with embedded(None, [*LOW_HIGH, *nodes, *existing]) as cluster:
            for p in existing:
                await cluster.scheduled(p["metadata"]["name"])
            cluster.create(preemptor)
            cluster.mutate("Pod", name, lambda p: p.setdefault("status", {}).update(nominatedNodeName="node-1"), "default")
            return await cluster.scheduled(name)

    assert run(scenario) == running_node
