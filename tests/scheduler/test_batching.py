"""Batches of same-shaped pods reuse the previous cycle's filter verdicts and scores, and never move
a placement: seeded workloads of every scheduler_perf kind the bench runs land identically with
batching on and off, explanations included; upstream's signatures and their rules."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest

from kubesched.api.kinds import Kind, known_kind
from kubesched.api.types import PodInfo
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.bench import templates as t
from kubesched.scheduler.config import default_configuration
from kubesched.scheduler.config.args import LIST_DEFAULTING
from kubesched.scheduler.config.types import PluginRef, SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.batch import MAX_MOVED_TOTALS, OpportunisticBatch
from kubesched.scheduler.framework.interface import FilterPlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.runtime import Framework
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.schedule_one import Algorithm
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.explain import attempts_to_json
from kubesched.simulator.virtualtime import run_virtual
from kubesched.utils.clock import VIRTUAL_EPOCH, LoopClock, ManualClock
from tests.helpers import make_node, make_pod

ZONES = ("moon-1", "moon-2", "moon-3")


@dataclass
class Workload:
    """A scheduler_perf workload in small: nodes, init pods, then measured pods created in chunks
    with a churn step between chunks (deterministic, where the bench's churn runs on a timer)."""

    nodes: int
    init: Callable[[], dict] | None
    init_count: int
    measured: Callable[[], dict]
    measured_count: int
    zones: tuple[str, ...] = ()
    namespaces: tuple[str, str] = ("namespace-1", "namespace-2")
    churn: tuple[Callable[[], dict], ...] = ()
    recreate: bool = False
    chunk: int = 9
    extra: list[dict] = field(default_factory=list)


WORKLOADS = {
    "SchedulingBasic": Workload(40, t.pod_default, 30, t.pod_default, 90),
    "SchedulingNodeAffinity": Workload(40, t.pod_with_node_affinity, 20, t.pod_with_node_affinity, 90, zones=("zone1",)),
    "TopologySpreading": Workload(30, t.pod_default, 30, t.pod_with_topology_spreading, 60, zones=ZONES),
    "PreferredTopologySpreading": Workload(30, t.pod_default, 30, t.pod_with_preferred_topology_spreading, 60, zones=ZONES),
    "SchedulingPodAffinity": Workload(30, t.pod_with_pod_affinity, 20, t.pod_with_pod_affinity, 40, zones=("zone1",),
                                      namespaces=("sched-0", "sched-1")),
    "SchedulingPodAntiAffinity": Workload(30, t.pod_with_pod_anti_affinity, 5, t.pod_with_pod_anti_affinity, 20,
                                          namespaces=("sched-0", "sched-1")),
    "SchedulingPreferredPodAffinity": Workload(30, t.pod_with_preferred_pod_affinity, 20, t.pod_with_preferred_pod_affinity,
                                               40, namespaces=("sched-0", "sched-1")),
    "SchedulingPreferredPodAntiAffinity": Workload(30, t.pod_with_preferred_pod_anti_affinity, 20,
                                                   t.pod_with_preferred_pod_anti_affinity, 40, namespaces=("sched-0", "sched-1")),
    "Unschedulable": Workload(30, t.pod_default, 10, t.pod_default, 90, churn=(t.pod_high_priority_large_cpu,)),
    "SchedulingWithMixedChurn": Workload(30, None, 0, t.pod_default, 90, recreate=True,
                                         churn=(t.node_churn, t.pod_high_priority_large_cpu, t.service_churn)),
    "PreemptionBasic": Workload(8, t.pod_low_priority, 32, t.pod_high_priority, 12, chunk=4),
}

KIND_OF = {name: known_kind(name) for name in ("Pod", "Node", "Service", "PriorityClass", "Namespace")}
POD = KIND_OF["Pod"]


class Cluster:
    """A scheduler on the embedded store with a virtual clock, fed step by step."""

    def __init__(self, store: ObjectStore, sched: Scheduler) -> None:
        self.store = store
        self.sched = sched
        self.serial = 0

    def create(self, obj: dict, namespace: str | None = None) -> dict:
        meta = obj["metadata"]
        prefix = meta.pop("generateName", None)
        if prefix is not None:
            self.serial += 1
            meta["name"] = f"{prefix}{self.serial:05d}"
        if obj["kind"] == "Node":
            meta.setdefault("labels", {})["kubernetes.io/hostname"] = meta["name"]
        elif obj["kind"] not in ("PriorityClass", "Namespace"):
            meta["namespace"] = namespace or "default"
        kind: Kind = KIND_OF[obj["kind"]]
        return self.store.create(kind, obj)

    def delete(self, obj: dict) -> None:
        meta = obj["metadata"]
        self.store.delete(KIND_OF[obj["kind"]], meta.get("namespace"), meta["name"])

    async def settle(self) -> None:
        """Let the scheduler place (or give up on) everything it can, binding cycles included."""
        await asyncio.sleep(30)


def run_workload(w: Workload, seed: int, batching: bool) -> tuple[dict[str, str], int]:
    """Where every pod of the workload ended up (pods by name; '' for pending), and how many
    cycles of the measured phase reused their predecessor's results."""

    async def body() -> tuple[dict[str, str], int]:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=seed, auto_create_namespaces=True)
        sched = Scheduler(MemoryClient(store), default_configuration(), clock=clock, seed=seed, batching=batching)
        cluster = Cluster(store, sched)
        cluster.create(t.priority_class())
        rng = random.Random(seed)
        nodes = [t.node_default() for _ in range(w.nodes)]
        for i, node in enumerate(nodes):
            if w.zones:
                node["metadata"]["labels"] = {t.ZONE_KEY: w.zones[i % len(w.zones)]}
            cluster.create(node)
        await sched.start()
        loop = asyncio.get_running_loop().create_task(sched.run())
        if w.init is not None:
            for _ in range(w.init_count):
                cluster.create(w.init(), w.namespaces[0])
            await cluster.settle()
        before = sum(fw.batches.reused for fw in sched.frameworks.values())
        live: list[dict | None] = [None] * len(w.churn)
        created = 0
        while created < w.measured_count:
            size = min(w.chunk + rng.randrange(3), w.measured_count - created)
            for _ in range(size):
                cluster.create(w.measured(), w.namespaces[1])
            created += size
            for i, template in enumerate(w.churn):
                if w.recreate and live[i] is not None:
                    cluster.delete(live[i])
                    live[i] = None
                else:
                    live[i] = cluster.create(template(), w.namespaces[1])
            await asyncio.sleep(0.05 * rng.randrange(4))
        await cluster.settle()
        placements = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in store.iter_all(POD)}
        reused = sum(fw.batches.reused for fw in sched.frameworks.values()) - before
        await sched.stop()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        return placements, reused

    return run_virtual(body())


#: Workloads whose measured pods are batched: all but the preemptors (batching pauses while pods are
#: nominated). Spreading constraints and inter-pod affinity terms count pods per topology domain, so
#: their plugins run again in every batched cycle.
BATCHED = set(WORKLOADS) - {"PreemptionBasic"}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_placements_are_identical_with_and_without_batching(name):
    w = WORKLOADS[name]
    batched, reused = run_workload(w, seed=3, batching=True)
    one_by_one, none = run_workload(w, seed=3, batching=False)
    assert batched == one_by_one
    assert sum(1 for node in batched.values() if node) >= w.measured_count // 2
    assert none == 0
    assert (reused > w.measured_count // 3) if name in BATCHED else reused == 0


# --- explanations -----------------------------------------------------------------------------------
def explained(objects: list[dict], batching: bool) -> tuple[list[dict[str, Any]], int, int, int]:
    """Every attempt's explanation (what ``kubesched explain`` prints), the cycles batched, the
    entries left for the next pod and the cycles that kept their totals."""

    async def body() -> tuple[list[dict[str, Any]], int, int, int]:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=5, auto_create_namespaces=True)
        attempts: list[Any] = []
        sched = Scheduler(MemoryClient(store), default_configuration(), clock=clock, seed=5, batching=batching,
                          on_attempt=attempts.append)
        for obj in objects:
            store.create(KIND_OF[obj["kind"]], obj)
        await sched.start()
        loop = asyncio.get_running_loop().create_task(sched.run())
        await asyncio.sleep(30)
        batches = sched.frameworks["default-scheduler"].batches
        await sched.stop()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        return attempts_to_json(attempts), batches.reused, batches.filled, batches.kept

    return run_virtual(body())


def mixed_cluster() -> list[dict]:
    """Nodes that differ in size, zone, taints (normalised scores) and images; runs of same-shaped
    pods that fill the small nodes (Insufficient cpu, Too many pods) and a few other shapes between runs."""
    nodes = [make_node(f"n{i}", cpu=("2" if i % 3 == 0 else "4"), pods=("4" if i % 4 == 0 else "110"),
                       labels={"topology.kubernetes.io/zone": f"z{i % 2}"},
                       taints=[{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}] if i % 5 == 0 else None,
                       images=[{"names": ["registry.k8s.io/app:1"], "sizeBytes": 400_000_000}] if i % 2 else None)
             for i in range(12)]
    pods = []
    for run, (cpu, image, count) in enumerate((("500m", "nginx", 20), ("1", "registry.k8s.io/app:1", 12), ("250m", "nginx", 25))):
        for i in range(count):
            pod = make_pod(f"r{run}-{i:02d}", cpu=cpu, memory="256Mi")
            pod["spec"]["containers"][0]["image"] = image
            pods.append(pod)
        pods.append(make_pod(f"odd{run}", cpu="3", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                                "values": ["z1"]}]}}]}}))
    pods.append(make_pod("too-big", cpu="9"))
    return nodes + pods


def test_explanations_of_batched_pods_equal_the_unbatched_ones():
    """Most batched cycles keep their totals, and fill the explanation from the kept entry."""
    batched, reused, _, kept = explained(mixed_cluster(), batching=True)
    one_by_one, none, _, _ = explained(mixed_cluster(), batching=False)
    assert reused > 30 and kept > 30 and none == 0
    assert batched == one_by_one


def test_explained_cycles_leave_no_entry_for_domain_scoped_plugins_to_run_again():
    """Domain-scoped plugins run again only in cycles that keep their totals and explain nothing
    (their raw scores are not kept): a scheduler that explains every attempt leaves no such entry (here inter-pod
    terms are in play from the first pod, so none at all), and explains every pod as without
    batching."""
    batched, _, filled, _ = explained(domain_scoped_cluster(), batching=True)
    one_by_one, _, _, _ = explained(domain_scoped_cluster(), batching=False)
    assert batched == one_by_one
    assert filled == 0
    _, _, plain_filled, _ = explained(mixed_cluster(), batching=True)
    assert plain_filled > 0  # where no domain-scoped plugin runs, explained cycles still leave entries


def placed(objects: list[dict], batching: bool, removed: list[str], more: list[dict],
           config: SchedulerConfiguration | None = None) -> tuple[dict[str, str], int]:
    """Where every pod ends up (no explanations: batched cycles then keep their totals), with the
    nodes ``removed`` deleted once the first pods are placed and ``more`` pods created after; and
    how many cycles were served from the kept totals. ``config``: the default configuration."""

    async def body() -> tuple[dict[str, str], int]:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=5, auto_create_namespaces=True)
        sched = Scheduler(MemoryClient(store), config or default_configuration(), clock=clock, seed=5, batching=batching)
        for obj in objects:
            store.create(KIND_OF[obj["kind"]], obj)
        await sched.start()
        loop = asyncio.get_running_loop().create_task(sched.run())
        await asyncio.sleep(30)
        for name in removed:
            store.delete(KIND_OF["Node"], None, name)
        for obj in more:
            store.create(KIND_OF[obj["kind"]], obj)
        await asyncio.sleep(30)
        placements = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in store.iter_all(POD)}
        kept = sched.frameworks["default-scheduler"].batches.kept
        await sched.stop()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        return placements, kept

    return run_virtual(body())


def test_kept_totals_place_as_full_cycles_do():
    """Rows that turn infeasible as their nodes fill (the feasible set, and with it the normalised
    taint and image scores, move), ties between equal nodes, nodes removed between two runs of
    the same shape: the cycles that keep their totals place every pod where full cycles do."""
    more = [make_pod(f"late-{i:02d}", cpu="250m", memory="256Mi") for i in range(30)]
    batched, kept = placed(mixed_cluster(), True, ["n3", "n7"], more)
    one_by_one, none = placed(mixed_cluster(), False, ["n3", "n7"], more)
    assert kept > 30 and none == 0
    assert batched == one_by_one
    assert sum(1 for node in batched.values() if node) > 60


def test_kept_totals_take_ties_from_the_rotated_start():
    """Past 100 nodes the start index moves while more nodes are feasible than are looked for; once
    the one-pod nodes are full, cycles keep their totals and take ties in the visiting order that
    begins at that index."""
    nodes = [make_node(f"n{i:03d}", pods="1" if i % 4 == 0 else "110") for i in range(120)]
    pods = [make_pod(f"p{i:03d}", cpu="100m", memory="64Mi") for i in range(150)]
    batched, kept = placed(nodes + pods, True, [], [])
    one_by_one, _ = placed(nodes + pods, False, [], [])
    assert kept > 50
    assert batched == one_by_one


def _term(app: str) -> dict:
    return {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": app}}}


def domain_scoped_cluster() -> list[dict]:
    """Runs of pods whose spreading constraints and inter-pod terms count pods per domain: a zone
    skew of 1 (whole zones turn infeasible and back), preferred anti-affinity between replicas
    (scores that move on one node and normalise over all), required anti-affinity (each placement
    makes its node infeasible), and plain pods that an earlier pod's required anti-affinity keeps
    off its node once it lands (terms come into play in the middle of a run of plain pods), and a
    spread over nodes (one node moves per placement, every node once the minimum does)."""
    nodes = [make_node(f"n{i:02d}", cpu="2" if i % 4 == 0 else "4", labels={"topology.kubernetes.io/zone": f"z{i % 3}"},
                       taints=[{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}] if i % 5 == 0 else None)
             for i in range(18)]
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "s"}}}],
              "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                  {"weight": 10, "podAffinityTerm": _term("s")}]}}}
    pods = [make_pod(f"s-{i:02d}", cpu="300m", memory="256Mi", labels={"app": "s"}, **spread) for i in range(30)]
    pods += [make_pod(f"w-{i:02d}", cpu="200m", memory="256Mi", labels={"app": "w"}) for i in range(12)]
    pods.append(make_pod("guard", cpu="100m", labels={"app": "g"},
                         affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("w")]}}))
    pods += [make_pod(f"w-late-{i:02d}", cpu="200m", memory="256Mi", labels={"app": "w"}) for i in range(12)]
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("a")]}}}
    pods += [make_pod(f"a-{i:02d}", cpu="100m", labels={"app": "a"}, **anti) for i in range(20)]
    over_nodes = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                  "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "h"}}}]}
    pods += [make_pod(f"h-{i:02d}", cpu="100m", labels={"app": "h"}, **over_nodes) for i in range(24)]
    return nodes + pods


def test_domain_scoped_plugins_run_again_in_kept_cycles():
    """Pods with spreading constraints and inter-pod terms are batched, their plugins running again
    in every cycle; zones and nodes turning infeasible, normalised scores moving on one row or on
    all, and terms coming into play land every pod where full cycles do."""
    batched, kept = placed(domain_scoped_cluster(), True, [], [])
    one_by_one, none = placed(domain_scoped_cluster(), False, [], [])
    assert kept > 40 and none == 0
    assert batched == one_by_one
    assert sum(1 for node in batched.values() if node) > 60


def test_domain_verdicts_filtered_again_on_the_moved_rows_equal_a_filter_of_every_row(monkeypatch):
    """Between two pods of a batch, a placement moves the counts of its node's domains only: a kept
    cycle filters those rows again (required anti-affinity per hostname: one row) and keeps the
    other rows' domain-scoped verdicts, which are then those of a Filter over every row, status for
    status; a zone whose verdict moves is filtered in full."""
    narrowed: list[bool] = []
    rerun = Algorithm._rerun_domain_filters

    def checked(entry, fw, state, pod, table):
        before = entry.domain_basis
        moved = rerun(entry, fw, state, pod, table)
        if moved is not None:
            first_pos, ids, statuses = fw.run_batch_filters(state, pod, table.all_rows(), entry.rerun.__contains__)
            assert [entry.statuses[i] if i >= 0 else None for i in entry.domain.ids.tolist()] == \
                [statuses[i] if i >= 0 else None for i in ids.tolist()]
            assert entry.domain.first_pos.tolist() == first_pos.tolist()
            narrowed.append(fw.domain_filter_moved_rows(before, entry.domain_basis, table, MAX_MOVED_TOTALS) is not None)
        return moved

    monkeypatch.setattr(Algorithm, "_rerun_domain_filters", staticmethod(checked))
    batched, _ = placed(domain_scoped_cluster(), True, [], [])
    monkeypatch.undo()
    one_by_one, _ = placed(domain_scoped_cluster(), False, [], [])
    assert batched == one_by_one
    assert sum(narrowed) > 10 and not all(narrowed)


def zone_spread_cluster() -> list[dict]:
    """Zones of twenty nodes, where a spread over zones keeps its verdicts per zone: a skew of 1
    (a zone turns infeasible or feasible again at most placements) and of 3, PreferNoSchedule
    taints in one zone only (so the normalised taint scores move with that zone's verdict), the
    largest nodes in another (the best nodes while that zone is let through), small nodes that
    fill up, nodes without the zone label (never feasible), and plain pods between."""
    nodes = [make_node(f"n{i:02d}", cpu="1" if i % 4 == 0 else "32" if i % 3 == 0 else "8",
                       labels={"topology.kubernetes.io/zone": f"z{i % 3}"},
                       taints=[{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}] if i % 3 == 2 and i % 2 else None)
             for i in range(60)]
    nodes += [make_node(f"bare{i}", cpu="8") for i in range(3)]

    def spreading(app: str, skew: int, count: int) -> list[dict]:
        constraint = {"maxSkew": skew, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                      "labelSelector": {"matchLabels": {"app": app}}}
        return [make_pod(f"{app}-{i:02d}", cpu="300m", memory="128Mi", labels={"app": app},
                         topologySpreadConstraints=[constraint]) for i in range(count)]

    plain = [make_pod(f"p-{i:02d}", cpu="300m", memory="128Mi") for i in range(10)]
    return nodes + spreading("s", 1, 45) + plain + spreading("t", 3, 40)


def without_normalising_scores() -> SchedulerConfiguration:
    """The default configuration without the Score plugins that normalise over the feasible nodes:
    a node's total then does not depend on which others are feasible."""
    config = default_configuration()
    for name in ("TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity"):
        config.profiles[0].plugins.get("score").disabled.append(PluginRef(name))
    return config


@pytest.mark.parametrize("config", [default_configuration, without_normalising_scores], ids=["default", "not-normalising"])
def test_spreads_over_zones_keep_their_verdicts_per_zone_and_place_as_full_cycles_do(monkeypatch, config):
    """A batched cycle of a pod spread over zones keeps the spread's verdict per zone: the nodes
    it lets through are those a Filter over every row passes, and every pod lands where a full
    cycle puts it, through zones turning infeasible and back and nodes filling up."""
    per_zone = 0
    rerun = Algorithm._rerun_domain_filters

    def checked(entry, fw, state, pod, table):
        nonlocal per_zone
        moved = rerun(entry, fw, state, pod, table)
        if moved is not None and entry.slot_mode:
            _, ids, _ = fw.run_batch_filters(state, pod, table.all_rows(), entry.rerun.__contains__)
            codes, slot_ok = entry.slots
            assert slot_ok.take(codes).tolist() == (ids < 0).tolist()
            assert (entry.domain.ids < 0).all()
            per_zone += 1
        return moved

    monkeypatch.setattr(Algorithm, "_rerun_domain_filters", staticmethod(checked))
    batched, kept = placed(zone_spread_cluster(), True, [], [], config())
    monkeypatch.undo()
    one_by_one, none = placed(zone_spread_cluster(), False, [], [], config())
    assert per_zone > 60 and kept > 60 and none == 0
    assert batched == one_by_one
    assert sum(1 for node in batched.values() if node) > 80


def _spot(count: int) -> list[dict]:
    return [{"key": f"spot-{i}", "value": "x", "effect": "PreferNoSchedule"} for i in range(count)]


def sampled_cluster() -> list[dict]:
    """150 nodes, of which 100 are looked for: the generic cycle visits a different window of the
    nodes each time, and the kept totals serve them. Scores that normalise over the nodes visited
    vary: PreferNoSchedule taints (one on scattered nodes, two on a run of nodes that most windows
    leave out, so a window's highest count differs from all nodes') and a preferred zone; small
    nodes fill up and turn infeasible. Then a run of pods that fits any node."""
    nodes = [make_node(f"n{i:03d}", cpu="2" if i % 7 == 0 else "8", pods="3" if i % 9 == 0 else "110",
                       labels={"topology.kubernetes.io/zone": f"z{i % 3}", "tier": "gold" if i % 5 == 0 else "plain"},
                       taints=_spot(2) if 120 <= i < 128 else _spot(1) if i % 11 == 0 else None)
             for i in range(150)]
    prefer_gold = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 7, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}},
        {"weight": 2, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                            "values": ["z1"]}]}}]}}
    pods = [make_pod(f"gold-{i:03d}", cpu="500m", memory="256Mi", affinity=prefer_gold) for i in range(120)]
    pods += [make_pod(f"plain-{i:03d}", cpu="100m", memory="64Mi") for i in range(100)]
    return nodes + pods


def test_sampled_cycles_keep_their_totals_and_place_as_full_cycles_do():
    """With more feasible nodes than are looked for, batched cycles keep their totals too: they
    visit the nodes the generic cycle visits (from the rotating start index), correct the totals
    where a normalisation over those nodes differs from the one over every feasible node, and so
    place every pod where the generic cycle does, through nodes filling up and removed."""
    more = [make_pod(f"late-{i:03d}", cpu="250m", memory="128Mi") for i in range(40)]
    batched, kept = placed(sampled_cluster(), True, ["n004", "n050", "n121"], more)
    one_by_one, none = placed(sampled_cluster(), False, ["n004", "n050", "n121"], more)
    assert kept > 200 and none == 0
    assert batched == one_by_one
    assert sum(1 for node in batched.values() if node) == len(batched)


def test_sampled_cycles_explain_as_full_cycles_do():
    """An explained sampled cycle served from the kept totals records what the generic cycle
    records: every node in visiting order, the verdicts of the nodes it visited, the nodes it
    scored and their scores normalised over those nodes."""
    batched, reused, _, kept = explained(sampled_cluster(), batching=True)
    one_by_one, none, _, _ = explained(sampled_cluster(), batching=False)
    assert reused > 200 and kept > 200 and none == 0
    assert batched == one_by_one


def test_sampled_kept_cycles_leave_no_changed_rows_behind():
    """The rows each placement changed are taken into the kept totals by the next cycle, so they
    do not pile up in the entry (reading them would cost every later cycle)."""
    nodes = [make_node(f"n{i:03d}", pods="110") for i in range(150)]
    pods = [make_pod(f"p{i:03d}", cpu="100m", memory="64Mi") for i in range(80)]
    sizes: list[int] = []

    async def body() -> None:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=5, auto_create_namespaces=True)
        sched = Scheduler(MemoryClient(store), default_configuration(), clock=clock, seed=5, batching=True)
        for obj in nodes + pods:
            store.create(KIND_OF[obj["kind"]], obj)
        await sched.start()
        loop = asyncio.get_running_loop().create_task(sched.run())
        await asyncio.sleep(30)
        batches = sched.frameworks["default-scheduler"].batches
        assert batches.entry is not None and batches.kept > 50
        sizes.append(len(batches.entry.dirty))
        await sched.stop()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)

    run_virtual(body())
    assert sizes[0] <= 2


# --- signatures -------------------------------------------------------------------------------------
class ClassicFilter(FilterPlugin):
    """A user's per-node filter: it has no signature support."""

    name = "ClassicFilter"

    def filter(self, state: Any, pod: PodInfo, node_info: Any) -> Status | None:
        return None


def framework(spread_defaults: bool = True, classic: bool = False) -> Framework:
    """The default profile's framework; ``spread_defaults`` off gives PodTopologySpread no default
    constraints (``defaultingType: List``); ``classic`` adds a user's classic filter."""
    config = default_configuration()
    profile = config.profiles[0]
    if not spread_defaults:
        args = replace(profile.plugin_config["PodTopologySpread"], defaulting_type=LIST_DEFAULTING, default_constraints=[])
        profile = replace(profile, plugin_config={**profile.plugin_config, "PodTopologySpread": args})
    if classic:
        profile.plugins.get("filter").enabled.append(PluginRef(ClassicFilter.name))
    registry = merge(in_tree_registry(), {ClassicFilter.name: ClassicFilter})
    sched = Scheduler(MemoryClient(ObjectStore(ManualClock(), seed=1)), SchedulerConfiguration(profiles=[profile]),
                      registry=registry)
    return sched.frameworks["default-scheduler"]


SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                          "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"a": "b"}}}]}
ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a": "b"}}}]}}}
CLAIM = {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}
DRA = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}]}

#: (case, profile options, pod spec, upstream signs it, kubesched batches it)
SIGNING_CASES = [
    ("plain pod, default profile: system default spreading leaves it unsigned upstream", {}, {}, False, True),
    ("plain pod, no default spreading", {"spread_defaults": False}, {}, True, True),
    ("spread constraints: batched, the plugin running again each cycle", {"spread_defaults": False}, SPREAD, False, True),
    ("required anti-affinity: batched, the plugin running again each cycle", {"spread_defaults": False}, ANTI, False, True),
    ("volume claim: signed by its volumes, not batched", {"spread_defaults": False}, CLAIM, True, False),
    ("resource claims", {"spread_defaults": False}, DRA, False, False),
    ("a classic filter without signature support", {"spread_defaults": False, "classic": True}, {}, False, False),
]


@pytest.mark.parametrize(("options", "spec", "signed", "batched"), [c[1:] for c in SIGNING_CASES],
                         ids=[c[0] for c in SIGNING_CASES])
def test_which_pods_are_signed_and_batched(options, spec, signed, batched):
    fw = framework(**options)
    pod = PodInfo(make_pod("p", cpu="100m", labels={"a": "b"}, **spec))
    assert (fw.sign_pod(pod) is not None) == signed
    assert (fw.batch_key(pod, fw.snapshot) is not None) == batched


@pytest.mark.parametrize(("change", "same"), [
    ("another name", True),
    ("another cpu request", False),
    ("a toleration", False),
    ("another label", False),
    ("a node selector", False),
    ("another image", False),
])
def test_signatures_tell_apart_what_plugins_read(change, same):
    fw = framework(spread_defaults=False)

    def pod(name: str = "p", cpu: str = "100m", labels: dict | None = None, image: str = "nginx", **spec: Any) -> PodInfo:
        manifest = make_pod(name, cpu=cpu, labels=labels or {"a": "b"}, **spec)
        manifest["spec"]["containers"][0]["image"] = image
        return PodInfo(manifest)

    base = pod()
    other = {
        "another name": lambda: pod(name="q"),
        "another cpu request": lambda: pod(cpu="200m"),
        "a toleration": lambda: pod(tolerations=[{"key": "k", "operator": "Exists"}]),
        "another label": lambda: pod(labels={"a": "c"}),
        "a node selector": lambda: pod(nodeSelector={"disk": "ssd"}),
        "another image": lambda: pod(image="redis"),
    }[change]()
    assert (fw.sign_pod(base) == fw.sign_pod(other)) == same
    assert (fw.batch_key(base, fw.snapshot) == fw.batch_key(other, fw.snapshot)) == same


# --- upstream's node hints (OpportunisticBatching) ------------------------------------------------
class Table:
    """A stand-in node table for the ranking: names by row."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def names_array(self) -> np.ndarray:
        return np.array(self.names, dtype=object)


def ranked(*pairs: tuple[str, int]) -> tuple[Any, Any, Any]:
    names = [name for name, _ in pairs]
    return Table(names), np.arange(len(names)), np.array([score for _, score in pairs])


#: (case, second pod's signature, its cycle, seconds later, does it fit the first pod's node, hint)
HINT_CASES = [
    ("same signature, next cycle, first node now full: the next best node", "sig", 2, 0.1, False, "n2"),
    ("another signature", "other", 2, 0.1, False, ""),
    ("an unsigned pod", None, 2, 0.1, False, ""),
    ("a cycle in between (another pod, or a failure)", "sig", 3, 0.1, False, ""),
    ("the first node still fits: its new score is unknown", "sig", 2, 0.1, True, ""),
    ("results older than the batch age", "sig", 2, 0.6, False, ""),
]


@pytest.mark.parametrize(("signature", "cycle", "later", "fits", "expected"), [c[1:] for c in HINT_CASES],
                         ids=[c[0] for c in HINT_CASES])
def test_get_node_hint(signature, cycle, later, fits, expected):
    clock = ManualClock()
    batch = OpportunisticBatch(clock.now, random.Random(1))
    assert batch.hint("sig", 1, lambda name: False) == ""
    batch.store("sig", "", "n1", ranked(("n2", 90), ("n3", 80), ("n4", 70)), 1)
    clock.step(later)
    asked: list[str] = []
    assert batch.hint(signature, cycle, lambda name: asked.append(name) or fits) == expected
    if expected:
        assert asked == ["n1"]


def test_a_taken_hint_keeps_the_ranking_and_an_ignored_one_replaces_it():
    clock = ManualClock()
    batch = OpportunisticBatch(clock.now, random.Random(1))
    batch.store("sig", "", "n1", ranked(("n2", 90), ("n3", 80), ("n4", 70)), 1)
    assert batch.hint("sig", 2, lambda name: False) == "n2"
    batch.store("sig", "n2", "n2", None, 2)
    assert batch.batched_pods == 1
    assert batch.hint("sig", 3, lambda name: False) == "n3"
    batch.store("sig", "n3", "n5", ranked(("n6", 50), ("n4", 40)), 3)  # the hint failed its filters
    assert batch.hint("sig", 4, lambda name: False) == "n6"


def test_ties_in_the_ranking_are_taken_in_random_order():
    picks = set()
    for seed in range(20):
        batch = OpportunisticBatch(ManualClock().now, random.Random(seed))
        batch.store("sig", "", "n1", ranked(("a", 50), ("b", 50), ("c", 10)), 1)
        first = batch.hint("sig", 2, lambda name: False)
        picks.add(first)
        batch.store("sig", first, first, None, 2)
        assert {first, batch.hint("sig", 3, lambda name: False)} == {"a", "b"}
    assert picks == {"a", "b"}


def one_pod_per_node(gates: dict[str, bool]) -> tuple[dict[str, str], list[dict[str, Any]], int]:
    """3-cpu pods on 4-cpu nodes, under a profile that signs them (no default spreading)."""
    config = default_configuration()
    profile = config.profiles[0]
    args = replace(profile.plugin_config["PodTopologySpread"], defaulting_type=LIST_DEFAULTING, default_constraints=[])
    profile = replace(profile, plugin_config={**profile.plugin_config, "PodTopologySpread": args})

    async def body() -> tuple[dict[str, str], list[dict[str, Any]], int]:
        clock = LoopClock(asyncio.get_running_loop(), VIRTUAL_EPOCH)
        store = ObjectStore(clock, seed=2, auto_create_namespaces=True)
        attempts: list[Any] = []
        sched = Scheduler(MemoryClient(store), SchedulerConfiguration(profiles=[profile]), clock=clock, seed=2,
                          feature_gates=FeatureGates(gates), on_attempt=attempts.append)
        for i in range(8):
            store.create(KIND_OF["Node"], make_node(f"n{i}", cpu=("4" if i % 2 else "8")))
        for i in range(8):
            store.create(POD, make_pod(f"p{i}", cpu="3"))
        await sched.start()
        loop = asyncio.get_running_loop().create_task(sched.run())
        await asyncio.sleep(30)
        hinted = sched.frameworks["default-scheduler"].hints.batched_pods
        await sched.stop()
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        placements = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in store.iter_all(POD)}
        return placements, attempts_to_json(attempts), hinted

    return run_virtual(body())


def test_pods_that_fill_their_node_take_the_next_node_of_the_previous_ranking():
    placements, attempts, hinted = one_pod_per_node({})
    assert all(placements.values())
    assert hinted >= 3
    # A hinted pod is placed without scoring: its attempt evaluated the hinted node alone.
    assert sum(1 for a in attempts if len(a["nodes"]) == 1) == hinted
    _, _, without = one_pod_per_node({"OpportunisticBatching": False})
    assert without == 0
