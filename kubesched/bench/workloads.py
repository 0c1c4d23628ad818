"""scheduler_perf's workloads as op lists, with the sizes of their 5000-node variants.

The op vocabulary is upstream's (``createNodes``, ``createNamespaces``, ``createPods``, ``churn``)
and so is the naming: pods of op ``i`` without an explicit namespace go to ``namespace-<i>``,
which is also the namespace the throughput collector watches for the measured op.

Sources (kubernetes/kubernetes ``test/integration/scheduler_perf``): ``misc/performance-config.yaml``
(SchedulingBasic, PreemptionBasic, Unschedulable, SchedulingWithMixedChurn),
``affinity/performance-config.yaml`` (the affinity workloads) and
``topology_spreading/performance-config.yaml``. ``threshold`` is upstream's CI floor for the variant
(average pods/s), None where upstream sets none; ``targets`` are the
throughputs kubesched itself aims for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesched.bench import templates as t
from kubesched.scheduler.plugins import names

#: Parameter names, as upstream's ``countParam: $initNodes`` etc.
NODES, INIT_PODS, PODS = "initNodes", "initPods", "measurePods"


@dataclass(frozen=True)
class CreateNodes:
    count: str = NODES
    template: t.Template = t.node_default
    #: ``labelNodePrepareStrategy``: zone values given round-robin over the nodes, by name.
    zones: tuple[str, ...] = ()


@dataclass(frozen=True)
class CreateNamespaces:
    prefix: str
    count: int


@dataclass(frozen=True)
class CreatePods:
    count: str
    template: t.Template
    namespace: str | None = None
    collect_metrics: bool = False
    #: Don't wait for these pods to be scheduled (upstream ``skipWaitToCompletion``).
    skip_wait: bool = False


@dataclass(frozen=True)
class Churn:
    """``churn``: every ``interval_ms``, for each template: ``create`` makes one more object;
    ``recreate`` deletes the one it made last tick, or makes one if there is none."""

    mode: str
    templates: tuple[t.Template, ...]
    interval_ms: int = 500
    namespace: str | None = None


Op = CreateNodes | CreateNamespaces | CreatePods | Churn


@dataclass(frozen=True)
class Workload:
    name: str
    ops: tuple[Op, ...]
    #: Default sizes: upstream's 5000-node variant named ``variant``.
    params: dict[str, int]
    variant: str
    threshold: int | None = None
    #: kubesched's own throughput targets (average pods/s) by mode, where it has one.
    targets: dict[str, int] = field(default_factory=dict)
    #: Plugins the workload exercises that must be in the registry and the profile.
    requires: tuple[str, ...] = ()
    note: str = ""
    #: Smallest upstream variant (``5Nodes`` and the like), what the smoke test runs.
    small: dict[str, int] = field(default_factory=dict)

    def measured_op(self) -> int:
        return next(i for i, op in enumerate(self.ops) if isinstance(op, CreatePods) and op.collect_metrics)

    def uses(self, param: str) -> bool:
        return any(getattr(op, "count", None) == param for op in self.ops)


def _sizes(nodes: int, init: int, measure: int) -> dict[str, int]:
    return {NODES: nodes, INIT_PODS: init, PODS: measure}


def _basic(template: t.Template, zones: tuple[str, ...] = ()) -> tuple[Op, ...]:
    return (CreateNodes(zones=zones), CreatePods(INIT_PODS, template),
            CreatePods(PODS, template, collect_metrics=True))


def _two_namespaces(template: t.Template, zones: tuple[str, ...] = ()) -> tuple[Op, ...]:
    """Init pods in ``sched-0``, measured pods in ``sched-1`` (the affinity workloads)."""
    return (CreateNodes(zones=zones), CreateNamespaces("sched", 2), CreatePods(INIT_PODS, template, "sched-0"),
            CreatePods(PODS, template, "sched-1", collect_metrics=True))


def _spreading(template: t.Template) -> tuple[Op, ...]:
    return (CreateNodes(zones=("moon-1", "moon-2", "moon-3")), CreatePods(INIT_PODS, t.pod_default),
            CreatePods(PODS, template, collect_metrics=True))


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("SchedulingBasic", _basic(t.pod_default), _sizes(5000, 1000, 10000), "5000Nodes_10000Pods", 680,
             targets={"embedded": 3000, "http": 700}, small=_sizes(5, 5, 10)),
    Workload("SchedulingPodAntiAffinity", _two_namespaces(t.pod_with_pod_anti_affinity), _sizes(5000, 1000, 2000),
             "5000Nodes_2000Pods", 60, targets={"embedded": 1000}, small=_sizes(5, 1, 4)),
    Workload("SchedulingPodAffinity", _two_namespaces(t.pod_with_pod_affinity, ("zone1",)), _sizes(5000, 5000, 5000),
             "5000Nodes_5000Pods", 35, targets={"embedded": 1000}, small=_sizes(5, 5, 10)),
    Workload("SchedulingPreferredPodAffinity", _two_namespaces(t.pod_with_preferred_pod_affinity),
             _sizes(5000, 5000, 5000), "5000Nodes_5000Pods", 90, targets={"embedded": 1000}, small=_sizes(5, 5, 10)),
    Workload("SchedulingPreferredPodAntiAffinity", _two_namespaces(t.pod_with_preferred_pod_anti_affinity),
             _sizes(5000, 5000, 5000), "5000Nodes_5000Pods", 90, targets={"embedded": 1000}, small=_sizes(5, 5, 10)),
    Workload("SchedulingNodeAffinity", _basic(t.pod_with_node_affinity, ("zone1",)), _sizes(5000, 5000, 10000),
             "5000Nodes_10000Pods", 220, targets={"embedded": 2500}, small=_sizes(5, 5, 10)),
    Workload("TopologySpreading", _spreading(t.pod_with_topology_spreading), _sizes(5000, 5000, 5000),
             "5000Nodes_5000Pods", 460, targets={"embedded": 1500}, small=_sizes(5, 10, 10)),
    Workload("PreferredTopologySpreading", _spreading(t.pod_with_preferred_topology_spreading),
             _sizes(5000, 5000, 5000), "5000Nodes_5000Pods", 340, targets={"embedded": 1500},
             small=_sizes(5, 10, 10)),
    Workload("PreemptionBasic",
             (CreateNodes(), CreatePods(INIT_PODS, t.pod_low_priority), CreatePods(PODS, t.pod_high_priority, collect_metrics=True)),
             _sizes(5000, 20000, 5000), "5000Nodes", None, targets={"embedded": 200}, requires=(names.DefaultPreemption,),
             note="upstream keeps this 5000-node variant commented out (kubernetes#108308); its CI runs 1000Nodes "
                  "(1000 nodes, 4000 init pods, 1000 measured) without a threshold",
             small=_sizes(5, 20, 5)),
    Workload("Unschedulable",
             (CreateNodes(), CreatePods(INIT_PODS, t.pod_default),
              Churn("create", (t.pod_high_priority_large_cpu,), interval_ms=200),
              CreatePods(PODS, t.pod_default, collect_metrics=True)),
             _sizes(5000, 100, 10000), "5kNodes/100Init/10kPods", 590, small=_sizes(5, 1, 10)),
    Workload("SchedulingWithMixedChurn",
             (CreateNodes(), Churn("recreate", (t.node_churn, t.pod_high_priority_large_cpu, t.service_churn), interval_ms=1000),
              CreatePods(PODS, t.pod_default, collect_metrics=True)),
             {NODES: 5000, PODS: 10000}, "5000Nodes_10000Pods", 710, small={NODES: 10, PODS: 100}),
)}


def workload(name: str) -> Workload:
    """The workload called ``name`` (case-insensitive), or KeyError listing the known ones."""
    for key, value in WORKLOADS.items():
        if key.lower() == name.lower():
            return value
    raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
