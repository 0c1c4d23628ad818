"""Running one workload: start the scheduler, execute the workload's ops as scheduler_perf's
``WorkloadExecutor`` does, measure the op that collects metrics, and report.

Order of events, as upstream: the scheduler starts on an empty cluster; ``createNodes`` makes the
nodes; each ``createPods`` makes its pods and waits until they are all bound (init pods included);
``churn`` starts a background loop that runs until the end; the measured ``createPods`` starts the
collectors first, creates its pods, waits for them and stops the collectors. Everything runs on a
real-time event loop: throughput is wall-clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.apierrors import APIError
from kubesched.api.errors import KubeschedError
from kubesched.bench import templates as t
from kubesched.bench.collectors import BoundPods, RecordingMetrics, ScoredNodesAlgorithm, ThroughputCollector, summarize
from kubesched.bench.targets import EmbeddedTarget, HttpTarget, Target, peak_rss_of, rss_of
from kubesched.bench.workloads import Churn, CreateNamespaces, CreateNodes, CreatePods, Op, Workload
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates, parse_flag
from kubesched.scheduler.framework.extender import Extender
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.scheduler.scheduler import Scheduler

DEFAULT_PERCENTAGE = 100
#: ``names.SimpleNameGenerator``: five characters of ``rand.String``'s alphabet after the prefix.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NAME_SUFFIX_LENGTH = 5
#: Draws for one name before giving up (27^5 names; a prefix this full is a bench misconfiguration).
NAME_ATTEMPTS = 100
#: How often the progress callback hears about bound pods.
PROGRESS_INTERVAL = 0.5

Progress = Callable[[str, int, int], None]


class BenchError(KubeschedError):
    """A benchmark that cannot run as asked (a missing plugin, a bad size)."""


class NodeNamer:
    """Names the benchmark's nodes itself, as upstream's node preparer has them named at creation,
    so that the hostname label can carry the name. Five random characters collide often past a few
    thousand names (at 15,000 nodes about eight pairs are expected), so a name already given is
    drawn again, as kube-apiserver retries a generated name that is taken."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.taken: set[str] = set()

    def name(self, prefix: str) -> str:
        for _ in range(NAME_ATTEMPTS):
            name = prefix + "".join(self.rng.choice(NAME_ALPHABET) for _ in range(NAME_SUFFIX_LENGTH))
            if name not in self.taken:
                self.taken.add(name)
                return name
        raise BenchError(f"no free node name with prefix {prefix!r} after {NAME_ATTEMPTS} draws")


@dataclass
class BenchOptions:
    mode: str = "embedded"
    nodes: int | None = None
    init_pods: int | None = None
    pods: int | None = None
    seed: int = 0
    #: None: 100, or the configuration file's value when ``config`` is given.
    percentage_of_nodes_to_score: int | None = None
    config: str | None = None
    feature_gates: str = ""
    #: Seconds each wait for pods may take before the run is reported incomplete.
    timeout: float = 3600.0
    #: ``--mode http`` only: the API server in a subprocess, or on this process's event loop.
    apiserver: str = "subprocess"
    progress: Progress | None = None
    #: Called with the target once the scheduler stopped, before the cluster goes (tests inspect it).
    on_finish: Callable[[Target], Any] | None = None


@dataclass
class BenchResult:
    workload: str
    mode: str
    params: dict[str, int]
    variant: str
    threshold: int | None
    #: kubesched's own throughput target for this workload in this mode (average pods/s), if any.
    target: int | None
    percentage_of_nodes_to_score: int
    seed: int
    complete: bool = False
    incomplete_reason: str = ""
    measured_pods: int = 0
    scheduled: int = 0
    throughput: dict[str, float] | None = None
    overall_pods_per_second: float | None = None
    measure_seconds: float = 0.0
    #: CPU time (user + system, every thread) this process spent per scheduled pod while measuring:
    #: the scheduler's own cost, as the measured pods are created from another process.
    cpu_ms_per_pod: float | None = None
    setup_seconds: float = 0.0
    attempt_latency_ms: dict[str, float] | None = None
    #: The same for attempts that failed (Filter found no node; includes PostFilter, i.e. preemption).
    unschedulable_attempt_latency_ms: dict[str, float] | None = None
    algorithm_latency_ms: dict[str, float] | None = None
    attempts: dict[str, int] = field(default_factory=dict)
    nodes_scored_percent: float | None = None
    peak_rss_bytes: int | None = None
    apiserver_peak_rss_bytes: int | None = None
    #: Resident memory of this process per node and per bound pod (see ``MemoryProbe``).
    memory: dict[str, float] | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def resolve_params(w: Workload, opts: BenchOptions) -> dict[str, int]:
    """The workload's 5000-node sizes with the command line's overrides."""
    params = dict(w.params)
    for param, value in (("initNodes", opts.nodes), ("initPods", opts.init_pods), ("measurePods", opts.pods)):
        if value is None:
            continue
        if value < 0:
            raise BenchError(f"{param} must not be negative, got {value}")
        if param not in params:
            raise BenchError(f"{w.name} has no {param} parameter (upstream creates none)")
        params[param] = value
    return params


def configuration(opts: BenchOptions, registry: Registry) -> tuple[SchedulerConfiguration, FeatureGates]:
    gates = FeatureGates(parse_flag(opts.feature_gates))
    if opts.config:
        cfg = config_module.load_file(opts.config, registry=registry, feature_gates=gates)
    else:
        cfg = config_module.default_configuration(feature_gates=gates)
    if opts.percentage_of_nodes_to_score is not None:
        if not 0 <= opts.percentage_of_nodes_to_score <= 100:
            raise BenchError(f"percentageOfNodesToScore must be in [0, 100], got {opts.percentage_of_nodes_to_score}")
        cfg.percentage_of_nodes_to_score = opts.percentage_of_nodes_to_score
    elif not opts.config:
        cfg.percentage_of_nodes_to_score = DEFAULT_PERCENTAGE
    return cfg, gates


def check_requirements(w: Workload, registry: Registry, sched: Scheduler | None = None) -> None:
    """Fail clearly when the workload needs a plugin the registry or the profile lacks."""
    for name in w.requires:
        if name not in registry:
            raise BenchError(f"{w.name} needs the {name} plugin, which this build of kubesched does not have yet")
        if sched is None:
            continue
        for fw in sched.frameworks.values():
            if not any(p.name == name for plugins in fw.points.values() for p in plugins):
                raise BenchError(f"{w.name} needs the {name} plugin, which profile {fw.profile_name!r} does not enable")


def make_target(opts: BenchOptions) -> Target:
    if opts.mode == "embedded":
        return EmbeddedTarget(opts.seed)
    if opts.mode == "http":
        return HttpTarget(opts.seed, in_process=opts.apiserver == "in-process")
    raise BenchError(f"unknown mode {opts.mode!r} (embedded or http)")


def run(w: Workload, opts: BenchOptions, registry: Registry | None = None) -> BenchResult:
    """Blocking entry point: run ``w`` on a fresh event loop."""
    return asyncio.run(run_async(w, opts, registry))


async def run_async(w: Workload, opts: BenchOptions, registry: Registry | None = None) -> BenchResult:
    registry = registry if registry is not None else in_tree_registry()
    check_requirements(w, registry)
    params = resolve_params(w, opts)
    cfg, gates = configuration(opts, registry)
    upstream_sizes = params == w.params  # floors and targets hold for the 5000-node sizes only
    result = BenchResult(w.name, opts.mode, params, w.variant if upstream_sizes else "custom",
                         w.threshold if upstream_sizes else None, w.targets.get(opts.mode) if upstream_sizes else None,
                         cfg.percentage_of_nodes_to_score, opts.seed, note=w.note if upstream_sizes else "")
    target = make_target(opts)
    await target.start()
    try:
        await Executor(w, opts, params, target, cfg, gates, registry, result).run()
        if opts.on_finish is not None:
            await _maybe_await(opts.on_finish(target))
    finally:
        await target.stop()
    result.peak_rss_bytes = peak_rss_of() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result.apiserver_peak_rss_bytes = target.server_peak_rss
    return result


async def _maybe_await(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


class MemoryProbe:
    """Memory per node and per pod from this process's resident set: read (after a full garbage
    collection) before the first node, after the last node and once every pod the run waits for is
    bound. The node delta divided by the nodes and the pod delta by the bound pods are what one
    more node or pod costs at this size: the store's object, the informer caches' copies, the
    scheduler's cache entry and node table row. In ``--mode http`` the API server's share is in its
    own process and not included. Freed memory is not always returned to the system, so these are
    upper bounds."""

    def __init__(self) -> None:
        self.before_nodes: int | None = None
        self.after_nodes: int | None = None
        self.nodes = 0

    @staticmethod
    def sample() -> int | None:
        gc.collect()
        return rss_of()

    def nodes_starting(self) -> None:
        if self.before_nodes is None:
            self.before_nodes = self.sample()

    def nodes_created(self, count: int) -> None:
        self.nodes += count
        self.after_nodes = self.sample()

    def report(self, pods: int) -> dict[str, float] | None:
        after_pods = self.sample()
        if self.before_nodes is None or self.after_nodes is None or after_pods is None:
            return None
        return {"rss_before_nodes_bytes": self.before_nodes, "rss_after_nodes_bytes": self.after_nodes,
                "rss_after_pods_bytes": after_pods, "nodes": self.nodes, "bound_pods": pods,
                "per_node_bytes": (self.after_nodes - self.before_nodes) / self.nodes if self.nodes else 0.0,
                "per_pod_bytes": (after_pods - self.after_nodes) / pods if pods else 0.0}


class Executor:
    """One run of one workload (upstream's ``WorkloadExecutor``)."""

    def __init__(self, w: Workload, opts: BenchOptions, params: dict[str, int], target: Target,
                 cfg: SchedulerConfiguration, gates: FeatureGates, registry: Registry, result: BenchResult) -> None:
        self.w = w
        self.opts = opts
        self.params = params
        self.target = target
        self.result = result
        self.registry = registry
        self.node_namer = NodeNamer(random.Random(opts.seed))
        self.metrics = RecordingMetrics()
        built: list[ScoredNodesAlgorithm] = []

        def algorithm(global_percentage: int, rng: random.Random, extenders: Sequence[Extender]) -> ScoredNodesAlgorithm:
            built.append(ScoredNodesAlgorithm(global_percentage, rng, extenders))
            return built[-1]

        self.sched = Scheduler(target.scheduler_client(), cfg, registry=registry, seed=opts.seed,
                               feature_gates=gates, metrics=self.metrics, algorithm=algorithm)
        self.algorithm = built[0]
        self.bound = BoundPods(self.sched.informers.informer("Pod"))
        self.namespaces: set[str] = set()
        self.background: list[asyncio.Task] = []
        self.memory = MemoryProbe()

    async def run(self) -> None:
        check_requirements(self.w, self.registry, self.sched)
        started = time.monotonic()
        await self.sched.start()
        runner = asyncio.get_running_loop().create_task(self.sched.run(), name="scheduler")
        try:
            await self.target.create(t.priority_class())
            for index, op in enumerate(self.w.ops):
                if not await self._run_op(index, op, started):
                    break
        finally:
            for task in self.background:
                task.cancel()
            await asyncio.gather(*self.background, return_exceptions=True)
            await self.sched.stop()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            await self.sched.client.close()

    async def _run_op(self, index: int, op: Op, started: float) -> bool:
        """Run one op; False once the run cannot go on (a wait timed out)."""
        if isinstance(op, CreateNodes):
            await self._create_nodes(index, op)
        elif isinstance(op, CreateNamespaces):
            for i in range(op.count):
                await self._namespace(f"{op.prefix}-{i}")
        elif isinstance(op, Churn):
            namespace = op.namespace or f"namespace-{index}"
            await self._namespace(namespace)
            self.background.append(asyncio.get_running_loop().create_task(self._churn(op, namespace), name="churn"))
        elif isinstance(op, CreatePods):
            if op.collect_metrics:
                self.result.setup_seconds = time.monotonic() - started
                return await self._measure(index, op)
            return await self._create_pods(index, op)
        return True

    async def _namespace(self, name: str) -> None:
        if name not in self.namespaces:
            await self.target.ensure_namespace(name)
            self.namespaces.add(name)

    # --- nodes ------------------------------------------------------------------------------------
    async def _create_nodes(self, index: int, op: CreateNodes) -> None:
        count = self.params[op.count]
        self.memory.nodes_starting()
        nodes = [self._named_node(op, index) for _ in range(count)]
        if op.zones:
            for i, node in enumerate(sorted(nodes, key=lambda n: n["metadata"]["name"])):
                node["metadata"]["labels"][t.ZONE_KEY] = op.zones[i % len(op.zones)]
        expected = self.sched.cache.node_count() + count
        await self.target.create_many(nodes)
        await self._wait_for_nodes(expected)
        self.memory.nodes_created(count)

    def _named_node(self, op: CreateNodes, index: int) -> dict:
        """Named here, as upstream's node preparer does, so the hostname label can be set at creation."""
        node = op.template()
        meta = node["metadata"]
        prefix = meta.pop("generateName", None) or f"node-{index}-"
        meta["name"] = self.node_namer.name(prefix)
        meta["labels"] = {t.HOSTNAME_KEY: meta["name"]}
        return node

    async def _wait_for_nodes(self, expected: int) -> None:
        """Until the scheduler's cache has ``expected`` nodes. Pods created before the scheduler has
        the nodes would just fail once and wait for a NodeAdd; waiting keeps the first attempts honest."""
        deadline = time.monotonic() + self.opts.timeout
        while self.sched.cache.node_count() < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    # --- pods ---------------------------------------------------------------------------------------
    def _pods(self, op: CreatePods, namespace: str) -> list[dict]:
        pods = []
        for _ in range(self.params[op.count]):
            pod = op.template()
            pod["metadata"]["namespace"] = namespace
            pods.append(pod)
        return pods

    async def _create_pods(self, index: int, op: CreatePods) -> bool:
        namespace = op.namespace or f"namespace-{index}"
        await self._namespace(namespace)
        count = self.params[op.count]
        await self.target.create_many(self._pods(op, namespace))
        if op.skip_wait:
            return True
        return await self._wait_bound(namespace, count, f"init pods of op {index}")

    async def _wait_bound(self, namespace: str, count: int, what: str) -> bool:
        monitor = self._start_progress(what, namespace, count)
        try:
            await asyncio.wait_for(self.bound.wait(namespace, count), self.opts.timeout)
            return True
        except TimeoutError:
            done = self.bound.counts.get(namespace, 0)
            self.result.incomplete_reason = f"{what}: {done}/{count} pods bound after {self.opts.timeout:g}s"
            return False
        finally:
            if monitor is not None:
                monitor.cancel()

    def _start_progress(self, what: str, namespace: str, count: int) -> asyncio.Task | None:
        progress = self.opts.progress
        if progress is None:
            return None

        async def report() -> None:
            while True:
                progress(what, self.bound.counts.get(namespace, 0), count)
                await asyncio.sleep(PROGRESS_INTERVAL)

        return asyncio.get_running_loop().create_task(report(), name="bench-progress")

    async def _measure(self, index: int, op: CreatePods) -> bool:
        namespace = op.namespace or f"namespace-{index}"
        await self._namespace(namespace)
        count = self.params[op.count]
        pods = self._pods(op, namespace)
        collector = ThroughputCollector(self.bound, [namespace])
        self._recording(True)
        collector.start()
        begin, cpu_begin = time.monotonic(), time.process_time()
        try:
            await self.target.create_many(pods, measured=True)
            complete = await self._wait_bound(namespace, count, "measured pods")
        finally:
            end, cpu = time.monotonic(), time.process_time() - cpu_begin
            await collector.stop()
            self._recording(False)
        self._report(collector, namespace, count, begin, end, complete)
        if self.result.scheduled:
            self.result.cpu_ms_per_pod = 1000.0 * cpu / self.result.scheduled
        return complete

    def _recording(self, on: bool) -> None:
        self.metrics.recording = on
        self.algorithm.recording = on

    def _report(self, collector: ThroughputCollector, namespace: str, count: int, begin: float, end: float,
                complete: bool) -> None:
        r = self.result
        r.complete = complete
        r.measured_pods = count
        r.scheduled = self.bound.counts.get(namespace, 0)
        r.measure_seconds = end - begin
        r.throughput = collector.collect()
        if r.scheduled and end > begin:
            r.overall_pods_per_second = r.scheduled / (end - begin)
        r.attempt_latency_ms = summarize(self.metrics.attempt_seconds[self.metrics.SCHEDULED], 1000.0)
        r.unschedulable_attempt_latency_ms = summarize(self.metrics.attempt_seconds[self.metrics.UNSCHEDULABLE], 1000.0)
        r.algorithm_latency_ms = summarize(self.metrics.algorithm_seconds, 1000.0)
        r.attempts = {result: len(samples) for result, samples in self.metrics.attempt_seconds.items()}
        ratios = self.algorithm.ratios
        r.nodes_scored_percent = 100.0 * sum(ratios) / len(ratios) if ratios else None
        r.memory = self.memory.report(sum(self.bound.counts.values()))

    # --- churn --------------------------------------------------------------------------------------
    async def _churn(self, op: Churn, namespace: str) -> None:
        """upstream ``runChurnOp``: a ticker; ``create`` adds one object per template per tick,
        ``recreate`` (number 1) alternately creates and deletes one object per template."""
        live: list[dict | None] = [None] * len(op.templates)
        interval = op.interval_ms / 1000.0
        loop = asyncio.get_running_loop()
        next_tick = loop.time() + interval
        while True:
            await asyncio.sleep(max(next_tick - loop.time(), 0.0))
            next_tick += interval
            for i, template in enumerate(op.templates):
                with contextlib.suppress(APIError):
                    previous = live[i]
                    if op.mode == "recreate" and previous is not None:
                        await self.target.delete(previous)
                        live[i] = None
                        continue
                    obj = template()
                    if obj["kind"] != "Node":
                        obj["metadata"]["namespace"] = namespace
                    live[i] = await self.target.create(obj)
