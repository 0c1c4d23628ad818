"""The same input under two scheduler configurations, with the same seed: which pods landed
elsewhere, which are pending under one and not the other, and how full the nodes are under each.

Utilisation is what the scheduler itself accounts: requested CPU and memory (pod requests as
NodeResourcesFit sums them) over each node's allocatable. "Spread" is the population standard
deviation of the per-node fractions: low when the load is even (LeastAllocated's aim), high when
it is packed (MostAllocated's). With a scenario, both runs take the same steps at the same virtual
times, and the comparison also says, step by step, how many pods each configuration bound,
evicted and preempted, and left pending. Fragmentation is the largest CPU request and the largest memory
request that a single schedulable node without NoSchedule or NoExecute taints still has room for
(what an ordinary pod could still get): packing leaves bigger holes.
"""

from __future__ import annotations

import copy
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.api import resources as res
from kubesched.api.kinds import NODE
from kubesched.api.types import node_allocatable
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.registry import Registry
from kubesched.simulator.scenario import Scenario, describe_seconds
from kubesched.simulator.simulate import SimulationResult, simulate
from kubesched.simulator.timeline import Counts, TimelineEntry, counts

ZONE_LABEL = "topology.kubernetes.io/zone"
#: Phases of pods that hold no resources any more.
TERMINATED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Stats:
    """Mean, spread (population standard deviation) and maximum of per-node fractions (0..1)."""

    mean: float
    spread: float
    max: float

    @staticmethod
    def of(values: Sequence[float]) -> Stats:
        if not values:
            return Stats(0.0, 0.0, 0.0)
        return Stats(statistics.fmean(values), statistics.pstdev(values), max(values))

    def to_json(self) -> dict[str, float]:
        return {"mean": round(self.mean, 4), "spread": round(self.spread, 4), "max": round(self.max, 4)}


@dataclass(frozen=True)
class LargestFit:
    """The largest request of one resource a single node still has room for, where, and what of
    the other resource is free there."""

    amount: int
    node: str
    other: int

    def to_json(self, unit: str, other_unit: str) -> dict[str, Any]:
        return {unit: self.amount, "node": self.node or None, f"free{other_unit}": self.other}


@dataclass(frozen=True)
class Utilisation:
    """How full the schedulable nodes are under one configuration."""

    nodes: int
    nodes_used: int
    cpu: Stats
    memory: Stats
    #: Zone -> (nodes used, CPU stats, memory stats); nodes without a zone label under "".
    zones: dict[str, tuple[int, Stats, Stats]]
    #: Milli-CPU, with the node's free memory in bytes.
    largest_cpu: LargestFit
    #: Memory bytes, with the node's free milli-CPU.
    largest_memory: LargestFit

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes, "nodesUsed": self.nodes_used, "cpu": self.cpu.to_json(), "memory": self.memory.to_json(),
            "zones": {zone: {"nodesUsed": used, "cpu": cpu.to_json(), "memory": mem.to_json()}
                      for zone, (used, cpu, mem) in self.zones.items()},
            "largestFit": {"cpu": self.largest_cpu.to_json("milliCPU", "MemoryBytes"),
                           "memory": self.largest_memory.to_json("memoryBytes", "MilliCPU")},
        }


@dataclass(frozen=True)
class _NodeLoad:
    name: str
    zone: str
    pods: int
    #: Whether NoSchedule or NoExecute taints keep ordinary pods off.
    tainted: bool
    cpu: tuple[int, int]  # (requested milli-CPU, allocatable milli-CPU)
    memory: tuple[int, int]  # (requested bytes, allocatable bytes)

    def fraction(self, pair: tuple[int, int]) -> float:
        return pair[0] / pair[1] if pair[1] > 0 else 0.0


def utilisation(result: SimulationResult) -> Utilisation:
    """CPU and memory allocation per schedulable (not cordoned) node at the end of a simulation."""
    loads = _node_loads(result)
    zones: dict[str, list[_NodeLoad]] = {}
    for load in loads:
        zones.setdefault(load.zone, []).append(load)
    return Utilisation(
        nodes=len(loads), nodes_used=sum(1 for n in loads if n.pods),
        cpu=Stats.of([n.fraction(n.cpu) for n in loads]), memory=Stats.of([n.fraction(n.memory) for n in loads]),
        zones={zone: (sum(1 for n in group if n.pods), Stats.of([n.fraction(n.cpu) for n in group]),
                      Stats.of([n.fraction(n.memory) for n in group])) for zone, group in sorted(zones.items())},
        largest_cpu=_largest(loads, cpu_first=True), largest_memory=_largest(loads, cpu_first=False),
    )


def _node_loads(result: SimulationResult) -> list[_NodeLoad]:
    requested: dict[str, list[int]] = {}
    for pod in result.pods():
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINATED:
            continue
        amounts = res.pod_requests(pod)
        entry = requested.setdefault(node, [0, 0, 0])
        entry[0] += 1
        entry[1] += res.to_int(res.CPU, amounts.get(res.CPU, Fraction(0)))
        entry[2] += res.to_int(res.MEMORY, amounts.get(res.MEMORY, Fraction(0)))
    loads = []
    for node in sorted(result.store.iter_all(NODE), key=lambda n: n["metadata"]["name"]):
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        name = node["metadata"]["name"]
        allocatable = node_allocatable(node)
        pods, cpu, memory = requested.get(name, [0, 0, 0])
        zone = str((node["metadata"].get("labels") or {}).get(ZONE_LABEL, ""))
        tainted = any(t.get("effect") in ("NoSchedule", "NoExecute") for t in (node.get("spec") or {}).get("taints") or [])
        loads.append(_NodeLoad(name, zone, pods, tainted, (cpu, allocatable.get(res.CPU, 0)),
                               (memory, allocatable.get(res.MEMORY, 0))))
    return loads


def _largest(loads: list[_NodeLoad], *, cpu_first: bool) -> LargestFit:
    """The node with the most free CPU (or memory), ties to the one with more of the other free."""
    best = LargestFit(0, "", 0)
    for load in loads:
        if load.tainted:
            continue
        free_cpu = max(load.cpu[1] - load.cpu[0], 0)
        free_memory = max(load.memory[1] - load.memory[0], 0)
        amount, other = (free_cpu, free_memory) if cpu_first else (free_memory, free_cpu)
        if (amount, other) > (best.amount, best.other):
            best = LargestFit(amount, load.name, other)
    return best


@dataclass(frozen=True)
class Moved:
    pod: str
    nodes: tuple[str, str]


@dataclass(frozen=True)
class StepCounts:
    """What one configuration did between a step and the next: pods bound, evicted and
    preempted then, and pods pending once the next step fires (or the run ends)."""

    bound: int
    evicted: int
    preempted: int
    pending: int

    def to_json(self) -> dict[str, int]:
        return {"bound": self.bound, "evicted": self.evicted, "preempted": self.preempted, "pending": self.pending}


@dataclass(frozen=True)
class StepDifference:
    """One stretch of a scenario run under both configurations: ``step`` is ``start`` (scheduling
    the input, before the first step) or ``steps[i]``, fired at ``seconds``."""

    step: str
    seconds: float
    description: str
    counts: tuple[StepCounts, StepCounts]

    @property
    def differs(self) -> bool:
        return self.counts[0] != self.counts[1]


@dataclass
class Comparison:
    """Two runs of the same input; ``labels`` name the configurations (their file names)."""

    labels: tuple[str, str]
    results: tuple[SimulationResult, SimulationResult]
    moved: list[Moved] = field(default_factory=list)
    #: Pod -> its pending message, for pods pending under one configuration only (index as ``labels``).
    pending_only: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    #: Pods placed on the same node under both.
    same: int = 0
    utilisation: tuple[Utilisation, Utilisation] | None = None
    #: With a scenario: per step, what each configuration did (empty without one).
    steps: list[StepDifference] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        a, b = self.labels
        util = self.utilisation
        return {
            "configurations": [a, b],
            "samePlacement": self.same,
            "moved": [{"pod": m.pod, a: m.nodes[0], b: m.nodes[1]} for m in self.moved],
            "pendingOnlyIn": {a: dict(self.pending_only[0]), b: dict(self.pending_only[1])},
            "utilisation": {a: util[0].to_json(), b: util[1].to_json()} if util else {},
            **({"steps": [{"step": d.step, "at": describe_seconds(d.seconds), "description": d.description,
                           a: d.counts[0].to_json(), b: d.counts[1].to_json()} for d in self.steps]}
               if self.steps else {}),
        }

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The comparison as a self-contained HTML page (``compare --report``), written to ``path``
        when given. Pending pods' filter reasons need the runs' explanations (``explain=True``)."""
        from kubesched.simulator import htmlreport

        return htmlreport.write(htmlreport.render_comparison(self), path)


def compare(
    objects: list[dict],
    configs: Sequence[tuple[str, SchedulerConfiguration]],
    *,
    seed: int = 0,
    registry: Registry | None = None,
    feature_gates: FeatureGates | None = None,
    scenario: Scenario | None = None,
    explain: bool = False,
) -> Comparison:
    """Simulate ``objects`` under each of the two labelled configurations (same seed, same
    ``scenario`` steps) and compare. ``explain`` records the attempts (for the report)."""
    if len(configs) != 2:
        raise ValueError(f"compare takes exactly two configurations, not {len(configs)}")
    (label_a, cfg_a), (label_b, cfg_b) = configs
    if label_a == label_b:
        label_a, label_b = f"{label_a} (1)", f"{label_b} (2)"
    runs = tuple(simulate(copy.deepcopy(objects), cfg, seed=seed, registry=registry, feature_gates=feature_gates,
                          scenario=scenario, explain=explain) for cfg in (cfg_a, cfg_b))
    return comparison((label_a, label_b), (runs[0], runs[1]))


def comparison(labels: tuple[str, str], results: tuple[SimulationResult, SimulationResult]) -> Comparison:
    """What differs between two finished simulations of the same input."""
    placed = [placements(r) for r in results]
    pending = [pending_messages(r) for r in results]
    out = Comparison(labels, results, utilisation=(utilisation(results[0]), utilisation(results[1])))
    for pod in sorted(placed[0].keys() & placed[1].keys()):
        if placed[0][pod] == placed[1][pod]:
            out.same += 1
        else:
            out.moved.append(Moved(pod, (placed[0][pod], placed[1][pod])))
    out.pending_only = ({p: m for p, m in pending[0].items() if p in placed[1]},
                        {p: m for p, m in pending[1].items() if p in placed[0]})
    if results[0].timeline is not None and results[1].timeline is not None:
        out.steps = step_differences(results[0], results[1])
    return out


def step_differences(a: SimulationResult, b: SimulationResult) -> list[StepDifference]:
    """Both scenario runs cut at their ``step`` entries (the same steps, fired at the same virtual
    times), with what each configuration did in each stretch."""
    stretches = [_stretches(r) for r in (a, b)]
    if len(stretches[0]) != len(stretches[1]):
        raise ValueError(f"the runs took {len(stretches[0]) - 1} and {len(stretches[1]) - 1} steps: "
                         "not the same scenario")
    return [StepDifference(name, seconds, description, (ca, cb))
            for (name, seconds, description, ca), (_, _, _, cb) in zip(*stretches, strict=True)]


def _stretches(result: SimulationResult) -> list[tuple[str, float, str, StepCounts]]:
    entries: list[TimelineEntry] = result.timeline or []
    series = counts(entries, result.pods())
    starts = [i for i, e in enumerate(entries) if e.event == "step"]
    bounds = [0, *starts, len(entries)]
    out = []
    for k in range(len(bounds) - 1):
        begin, end = bounds[k], bounds[k + 1]
        if k == 0:
            name, seconds, description = "start", 0.0, "scheduling the input"
        else:
            step = entries[begin]
            name, seconds, description = step.object, step.seconds, step.message
        out.append((name, seconds, description, _between(series[begin], series[end])))
    return out


def _between(start: Counts, end: Counts) -> StepCounts:
    return StepCounts(end.bound_total - start.bound_total, end.evicted_total - start.evicted_total,
                      end.preempted_total - start.preempted_total, end.pending)


def placements(result: SimulationResult) -> dict[str, str]:
    """Pod (namespace/name) -> node, for pods bound and not failed."""
    out = {}
    for pod in result.pods():
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") != "Failed":
            out[_key(pod)] = str(node)
    return out


def pending_messages(result: SimulationResult) -> dict[str, str]:
    """Pod -> why it is not placed: its PodScheduled condition's message (kube-scheduler's), or
    what holds it back when the scheduler never said anything."""
    out = {}
    for pod in result.pods():
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("nodeName"):
            continue
        message = next((str(c.get("message") or c.get("reason") or "") for c in status.get("conditions") or []
                        if c.get("type") == "PodScheduled" and c.get("status") == "False"), "")
        if not message and spec.get("schedulingGates"):
            message = "waiting for scheduling gates: [" + " ".join(g.get("name", "") for g in spec["schedulingGates"]) + "]"
        out[_key(pod)] = message or "not scheduled"
    return out


def _key(pod: dict) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"
