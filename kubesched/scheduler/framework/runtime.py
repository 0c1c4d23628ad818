"""The framework runtime: one profile's plugins, instantiated and run at each extension point
(upstream ``framework/runtime/framework.go``).

Filter and Score run batch plugins over the whole node batch at once and classic plugins node by
node on the nodes still feasible, keeping upstream's rule that a node's recorded failure is the
first failing plugin in configured order.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import custom_resource_kind
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.client.informers import CustomObjectLister
from kubesched.client.interface import ClusterClient
from kubesched.scheduler.config.types import POINTS, PluginRef, Profile
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework.batch import SKIPPED_FILTER, BatchCache, OpportunisticBatch, union_of_rows
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ClusterEventWithHint, unroll_wildcard
from kubesched.scheduler.framework.extender import Extender
from kubesched.scheduler.framework.interface import (
    EXTENSION_POINTS,
    INTERFACE_NAMES,
    MAX_NODE_SCORE,
    MAX_TOTAL_SCORE,
    MIN_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
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
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SignPlugin,
    normalizes,
)
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.framework.status import Code, Status, StatusError, failed, is_success
from kubesched.scheduler.framework.waiting_pods import WaitingPod, WaitingPods
from kubesched.scheduler.framework.workloads import WorkloadManager
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.utils.clock import Clock

if TYPE_CHECKING:
    from kubesched.scheduler.framework.preemption_report import PreemptionObserver
    from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
    from kubesched.scheduler.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
PluginT = TypeVar("PluginT", bound=Plugin)

MAX_PERMIT_TIMEOUT = 15 * 60.0


class FrameworkError(KubeschedError, ValueError):
    """A profile that cannot be built (unknown plugin, plugin at a point it does not implement...)."""


class Nominator(Protocol):
    """Where the framework finds pods nominated to a node (the scheduling queue's nominator)."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pods nominated to ``node_name``, in nomination order."""
        ...


class InformerStores(Protocol):
    """The informer caches plugins read objects from (``client.informers.InformerFactory``)."""

    def store(self, kind_name: str) -> dict[str, dict[str, Any]]:
        """The cache of ``kind_name`` keyed ``namespace/name`` (``name`` for cluster-scoped kinds)."""
        ...


class UnknownPlugin(FrameworkError):
    """A profile enables a plugin the registry does not hold (``plugin_name``)."""

    def __init__(self, message: str, plugin_name: str) -> None:
        super().__init__(message)
        self.plugin_name = plugin_name


@dataclass
class HandleContext:
    """Services every profile's plugins share (what upstream's Handle exposes)."""

    clock: Clock
    snapshot: Callable[[], NodeTable]
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    client: ClusterClient | None = None
    recorder: Any = None
    nominator: Nominator | None = None
    activator: Callable[[dict[str, PodInfo]], None] | None = None
    informers: InformerStores | None = None
    feature_gates: FeatureGates = field(default_factory=lambda: DEFAULT_GATES)
    metrics: Metrics | None = None
    parallelism: int = 16
    #: API writes plugins started from synchronous extension points (PostFilter, Unreserve, ...).
    background: set[asyncio.Task[None]] = field(default_factory=set)
    #: The run's seeded random source, for plugins that randomise (preemption's start offset).
    rng: random.Random = field(default_factory=random.Random)
    #: Told of every preemption decision (the simulator's report); None: nobody listens.
    preemption_observer: PreemptionObserver | None = None
    #: The configuration's extenders, non-ignorable ones first (upstream ``Handle.Extenders``).
    extenders: Sequence[Extender] = ()
    #: The pod groups of Workloads; None unless the GenericWorkload gate is on (upstream
    #: ``Handle.WorkloadManager``).
    workload_manager: WorkloadManager | None = None
    #: A number that moves whenever an informed object other than a pod or a node changes (what
    #: plugins read besides the node table); None when nobody counts, which disables batching.
    objects_version: Callable[[], int] | None = None


@dataclass(frozen=True)
class FrameworkOptions:
    """Choices fixed when a Framework is built, for every profile of a scheduler (upstream passes
    ``frameworkruntime.Option`` values to ``NewFramework``).

    ``fast_paths``: plugins and the scheduling algorithm may use their optimisations that never move
    a placement (memoised per-node results, whole-column evaluation, float arithmetic where it is
    exact); off, each runs its plain counterpart, so tests can compare the two.
    ``trusted_score_ranges``: plugins whose normalized scores are known to stay in
    [MIN_NODE_SCORE, MAX_NODE_SCORE], so the framework skips their range check. The scheduler fills
    it from the registry's declaration (``registry.score_range_trusted``): in-tree plugins only;
    every other plugin is checked, as upstream checks every plugin's.
    ``batching``: see the field.
    """

    fast_paths: bool = True
    trusted_score_ranges: frozenset[str] = frozenset()
    #: Reuse the previous cycle's filter verdicts and scores for a pod with the same batch key,
    #: recomputing only the nodes that changed (``framework/batch.py``); placements are those of
    #: scheduling every pod from scratch. Only where the OpportunisticBatching gate is on.
    batching: bool = True


@dataclass
class ScoreResult:
    """Scores of a batch: the weighted total and, per plugin, raw / normalised / weight."""

    total: np.ndarray
    plugins: list[tuple[str, np.ndarray, np.ndarray, int]]
    #: Each scoring plugin's raw scores as the plugin returned them (may be memoised arrays the
    #: plugin updates later: copy to keep).
    raw: dict[str, np.ndarray] = field(default_factory=dict)

    def reordered(self, order: np.ndarray) -> ScoreResult:
        """The same scores for the nodes at ``order`` (positions into this result)."""
        return ScoreResult(self.total[order], [(n, raw[order], norm[order], w) for n, raw, norm, w in self.plugins])


class ScoreSource(Protocol):
    """Scores a batched cycle already has (``schedule_one``'s reuse of the previous cycle)."""

    def raw(self, pl: BatchScorePlugin) -> np.ndarray:
        """The plugin's raw scores over the cycle's batch."""
        ...

    def normalized(self, pl: BatchScorePlugin, raw: np.ndarray, normalize: Callable[[], np.ndarray]) -> np.ndarray:
        """The plugin's normalised scores: kept ones, or ``normalize()``."""
        ...


class Framework:
    """One scheduling profile. Plugins receive it as their ``handle``."""

    def __init__(self, registry: Registry, profile: Profile, ctx: HandleContext,
                 options: FrameworkOptions | None = None) -> None:
        self.profile = profile
        self.options = options or FrameworkOptions()
        self.profile_name = profile.scheduler_name
        self.percentage_of_nodes_to_score = profile.percentage_of_nodes_to_score
        self.ctx = ctx
        self.plugins: dict[str, Plugin] = {}
        self.points: dict[str, list[Plugin]] = {p: [] for p in POINTS}
        self.score_weights: dict[str, int] = {}
        self.enqueue_extensions: list[tuple[str, list[ClusterEventWithHint]]] = []
        #: Labelled metric children, cached: labels() costs more than the observation.
        self._evaluation_counters: dict[tuple[str, str], Any] = {}
        self._duration_children: dict[tuple[str, str], Any] = {}
        self._build(registry)
        # Each point's plugins as that point's type (_update_point checked every one against it).
        self._pre_enqueue = self._plugins_at("preEnqueue", PreEnqueuePlugin)
        self._queue_sort = self._plugins_at("queueSort", QueueSortPlugin)
        self._pre_filters = self._plugins_at("preFilter", PreFilterPlugin)
        self._post_filters = self._plugins_at("postFilter", PostFilterPlugin)
        self._pre_scores = self._plugins_at("preScore", PreScorePlugin)
        self._reserves = self._plugins_at("reserve", ReservePlugin)
        self._permits = self._plugins_at("permit", PermitPlugin)
        self._pre_binds = self._plugins_at("preBind", PreBindPlugin)
        self._binds = self._plugins_at("bind", BindPlugin)
        self._post_binds = self._plugins_at("postBind", PostBindPlugin)
        self._filters = self.points["filter"]
        self._range_checked = {p.name for p in self.points["score"] if p.name not in self.options.trusted_score_ranges}
        #: ``kept_score_plugins`` by the set of Score plugins skipped.
        self._kept_plugins: dict[frozenset[str], list[tuple[BatchScorePlugin, int, bool]] | None] = {}
        #: Classic (per-node) Filter plugins with their configured positions among all filters.
        self._classic_filters: list[tuple[int, FilterPlugin]] = [
            (i, p) for i, p in enumerate(self._filters) if isinstance(p, FilterPlugin) and not isinstance(p, BatchFilterPlugin)]
        self._signers, self.signatures_enabled = self._batchable_plugins()
        self._signs_pods = all(p.signs_pods() for p in self._signers)
        #: The last pod's shape and the fragments of the signers that read only the pod.
        self._pod_fragments: tuple[tuple[Any, ...], tuple[Any, ...] | None] | None = None
        #: Plugins whose results depend on other rows; a batched cycle runs them again where they run.
        self.domain_scoped = frozenset(p.name for p in self._signers if p.domain_scoped)
        #: Plugins whose answer for a node depends on the pods on it and nothing beyond its row
        #: (``SignPlugin.reads_node_pods``, not ``domain_scoped``).
        self.pod_readers = frozenset(p.name for p in self._signers if p.reads_node_pods) - self.domain_scoped
        #: The batch Filter plugins among the pod readers, and the domain-scoped ones, with their
        #: positions among all filters.
        self._pod_reading_filters: list[tuple[int, BatchFilterPlugin]] = [
            (i, p) for i, p in enumerate(self._filters) if isinstance(p, BatchFilterPlugin) and p.name in self.pod_readers]
        self._domain_filters: list[tuple[int, BatchFilterPlugin]] = [
            (i, p) for i, p in enumerate(self._filters) if isinstance(p, BatchFilterPlugin) and p.name in self.domain_scoped]
        #: The previous cycle's results, for the next pod with the same batch key.
        self.batches = BatchCache()
        #: Upstream's node hints (the OpportunisticBatching gate).
        self.hints = OpportunisticBatch(ctx.clock.now, ctx.rng)

    def _plugins_at(self, point: str, kind: type[PluginT]) -> list[PluginT]:
        return [p for p in self.points[point] if isinstance(p, kind)]

    def _batchable_plugins(self) -> tuple[list[SignPlugin], bool]:
        """``computeBatchablePlugins``: the PreFilter, Filter, PreScore and Score plugins, each
        once; signatures are off when one of them cannot sign, or with extenders."""
        signers: dict[str, SignPlugin] = {}
        enabled = not self.ctx.extenders
        for point in ("preFilter", "filter", "preScore", "score"):
            for plugin in self.points[point]:
                if isinstance(plugin, SignPlugin):
                    signers.setdefault(plugin.name, plugin)
                else:
                    enabled = False
        return list(signers.values()), enabled

    # --- signatures ----------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> str | None:
        """Upstream's ``SignPod``: the scheduler name and every plugin's fragments as JSON, or None
        when signatures are off for the profile or a plugin cannot sign the pod."""
        if not self.signatures_enabled or not self._signs_pods:
            return None
        signature: dict[str, Any] = {"SchedulerName": pod.scheduler_name}
        for plugin in self._signers:
            fragments = plugin.sign_pod(pod)
            if isinstance(fragments, Status):
                return None
            signature.update(fragments)
        return json.dumps(signature, sort_keys=True, default=repr)

    def batch_key(self, pod: PodInfo, table: NodeTable) -> tuple[Any, ...] | None:
        """What the results of every plugin for ``pod`` depend on besides each node's own row
        (``SignPlugin.batch_key``), or None when some plugin's may depend on other rows too. Two
        pods with equal keys get the same verdicts and scores from the same table. The fragments'
        values are the pod's own fields, compared with ``==`` (no hashing, no serialising)."""
        if not self.signatures_enabled:
            return None
        meta = pod.pod.get("metadata") or {}
        shape = (pod.spec, pod.pod.get("status"), pod.namespace, meta.get("labels"), meta.get("annotations"),
                 meta.get("ownerReferences"))
        cached = self._pod_fragments
        if cached is None or cached[0] != shape:  # a replica of the last pod has the same fragments
            cached = self._pod_fragments = (shape, self._fragments(pod, table, False))
        table_fragments = self._fragments(pod, table, True)
        if cached[1] is None or table_fragments is None:
            return None
        return cached[1] + table_fragments

    def domain_reruns(self, pod: PodInfo, table: NodeTable, state: CycleState) -> frozenset[str]:
        """The domain-scoped plugins a cycle reusing this one's results (left in ``state``) runs
        again: those that ran here, and those that may run for a pod with the same key."""
        ran = self.ran_plugins(state, "filter") | self.ran_plugins(state, "score")
        return frozenset(p.name for p in self._signers
                         if p.domain_scoped and (p.name in ran or p.batch_reruns(pod, table)))

    def domain_filter_basis(self, state: CycleState, names: frozenset[str]) -> dict[str, Any]:
        """Per domain-scoped plugin of ``names``: what its Filter verdicts derive from in ``state``
        (``SignPlugin.filter_basis``; ``SKIPPED_FILTER`` where PreFilter skipped it)."""
        skipped = state.skip_filter_plugins
        return {p.name: SKIPPED_FILTER if p.name in skipped else p.filter_basis(state)
                for p in self._signers if p.name in names}

    def domain_filter_slots(self, state: CycleState, names: frozenset[str], table: NodeTable) -> tuple[str, np.ndarray] | None:
        """The Filter verdicts of the domain-scoped plugins ``names`` per value of one node label
        (``SignPlugin.filter_slots``), when exactly one of them runs (its PreFilter did not skip
        it) and it can tell; None otherwise."""
        running = [p for p in self._signers if p.name in names and p.name not in state.skip_filter_plugins]
        return running[0].filter_slots(state, table) if len(running) == 1 else None

    def domain_filter_moved_rows(self, before: dict[str, Any] | None, after: dict[str, Any],
                                 table: NodeTable, limit: int) -> np.ndarray | None:
        """The rows whose domain-scoped Filter verdicts may differ between two
        ``domain_filter_basis`` answers, ascending; None when any row may, or more than ``limit``."""
        if before is None or before.keys() != after.keys():
            return None
        found = []
        for plugin in self._signers:
            if plugin.name not in after:
                continue
            old, new = before[plugin.name], after[plugin.name]
            if old is SKIPPED_FILTER and new is SKIPPED_FILTER:
                continue  # passes everywhere, as before
            comparable = all(basis is not None and basis is not SKIPPED_FILTER for basis in (old, new))
            rows = plugin.filter_moved_rows(old, new, table, limit) if comparable else None
            if rows is None:
                return None
            found.append(rows)
        moved = union_of_rows(found)
        return moved if len(moved) <= limit else None

    def ran_plugins(self, state: CycleState, point: str) -> set[str]:
        """The plugins at ``point`` ("filter" or "score") a cycle runs (PreFilter / PreScore did
        not skip them)."""
        skipped = state.skip_filter_plugins if point == "filter" else state.skip_score_plugins
        return {p.name for p in self.points[point] if p.name not in skipped}

    def _fragments(self, pod: PodInfo, table: NodeTable, reading_table: bool) -> tuple[Any, ...] | None:
        """The batch-key fragments of the signers that read the table (or of the others)."""
        key: list[Any] = []
        for plugin in self._signers:
            if plugin.key_reads_table != reading_table:
                continue
            fragments = plugin.batch_key(pod, table)
            if isinstance(fragments, Status):
                return None
            key.extend(fragments)
        return tuple(key)

    # --- construction ------------------------------------------------------------------------
    def _build(self, registry: Registry) -> None:
        plugins = self.profile.plugins
        needed: list[str] = []
        for point in ("multiPoint", *POINTS):
            for ref in plugins.get(point).enabled:
                if ref.name not in needed:
                    needed.append(ref.name)
        for name in needed:
            factory = registry.get(name)
            if factory is None:
                continue
            try:
                plugin = factory(self.profile.plugin_config.get(name), self)
            except KubeschedError:
                raise
            except Exception as e:
                raise FrameworkError(f'initializing plugin "{name}": {e}') from e
            self.plugins[name] = plugin
            self._fill_enqueue_extensions(plugin)
        for point in POINTS:
            self._update_point(point, plugins.get(point).enabled)
        if plugins.multi_point.enabled:
            self._expand_multi_point()
        if len(self.points["queueSort"]) != 1:
            raise FrameworkError(f'only one queue sort plugin required for profile with scheduler name "{self.profile_name}", '
                                 f"but got {len(self.points['queueSort'])}")
        if not self.points["bind"]:
            raise FrameworkError(f'at least one bind plugin is needed for profile with scheduler name "{self.profile_name}"')
        self._score_weights(plugins.get("score").enabled + plugins.multi_point.enabled)

    def _update_point(self, point: str, enabled: list[PluginRef]) -> None:
        seen: set[str] = set()
        for ref in enabled:
            plugin = self.plugins.get(ref.name)
            if plugin is None:
                raise UnknownPlugin(f'{INTERFACE_NAMES[point]} "{ref.name}" does not exist', ref.name)
            if not isinstance(plugin, EXTENSION_POINTS[point]):
                raise FrameworkError(f'plugin "{ref.name}" does not extend {INTERFACE_NAMES[point]} plugin')
            if ref.name in seen:
                raise FrameworkError(f'plugin "{ref.name}" already registered as "{INTERFACE_NAMES[point]}"')
            seen.add(ref.name)
            self.points[point].append(plugin)

    def _expand_multi_point(self) -> None:
        """MultiPoint plugins go to every point they implement, after explicit overrides (upstream order)."""
        plugins = self.profile.plugins
        for point in POINTS:
            pset = plugins.get(point)
            enabled = [ref.name for ref in pset.enabled]
            disabled = {ref.name for ref in pset.disabled}
            if "*" in disabled:
                continue
            overrides: list[str] = []
            multi: list[str] = []
            for ref in plugins.multi_point.enabled:
                plugin = self.plugins.get(ref.name)
                if plugin is None:
                    raise UnknownPlugin(f'{INTERFACE_NAMES["preFilter"]} "{ref.name}" does not exist', ref.name)
                if not isinstance(plugin, EXTENSION_POINTS[point]) or ref.name in disabled:
                    continue
                if ref.name in enabled:
                    overrides.append(ref.name)
                    continue
                if ref.name in multi:
                    raise FrameworkError(f'plugin "{ref.name}" already registered as "{INTERFACE_NAMES[point]}"')
                multi.append(ref.name)
            ordered = [n for n in enabled if n in overrides] + multi + [n for n in enabled if n not in overrides]
            self.points[point] = [self.plugins[n] for n in ordered]

    def _score_weights(self, refs: list[PluginRef]) -> None:
        total = 0
        for ref in refs:
            plugin = self.plugins.get(ref.name)
            if not isinstance(plugin, (ScorePlugin, BatchScorePlugin)) or ref.name in self.score_weights:
                continue
            weight = ref.weight or 1
            self.score_weights[ref.name] = weight
            if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
                raise FrameworkError("total score of Score plugins could overflow")
            total += weight * MAX_NODE_SCORE
        for plugin in self.points["score"]:
            if not self.score_weights.get(plugin.name):
                raise FrameworkError(f'score plugin "{plugin.name}" is not configured with weight')

    def _fill_enqueue_extensions(self, plugin: Plugin) -> None:
        if not isinstance(plugin, (PreEnqueuePlugin, PreFilterPlugin, FilterPlugin, BatchFilterPlugin, ReservePlugin, PermitPlugin)):
            return
        if isinstance(plugin, EnqueueExtensions):
            self.enqueue_extensions.append((plugin.name, plugin.events_to_register()))
        else:
            self.enqueue_extensions.append((plugin.name, [ClusterEventWithHint(e) for e in unroll_wildcard()]))

    # --- handle ------------------------------------------------------------------------------
    @property
    def snapshot(self) -> NodeTable:
        return self.ctx.snapshot()

    @property
    def client(self) -> ClusterClient:
        """The API client plugins write through (bindings, claim and volume updates, evictions)."""
        if self.ctx.client is None:
            raise RuntimeError(f"profile {self.profile_name} was built without an API client")
        return self.ctx.client

    @property
    def event_recorder(self) -> Any:
        return self.ctx.recorder

    @property
    def clock(self) -> Clock:
        return self.ctx.clock

    @property
    def feature_gates(self) -> FeatureGates:
        return self.ctx.feature_gates

    def custom_objects(self, group: str, version: str, plural: str) -> CustomObjectLister:
        """A lister of the custom resource ``plural`` in ``group/version`` (a CRD's objects, as
        plain dicts), backed by an informer the scheduler starts and syncs with its others."""
        kind = custom_resource_kind(group, version, plural)
        stores = self.ctx.informers
        return CustomObjectLister(kind, stores.store if stores is not None else None)

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        """Informer cache of ``kind`` (e.g. "PersistentVolumeClaim"), keyed ``namespace/name``."""
        if self.ctx.informers is None:
            return {}
        return self.ctx.informers.store(kind)

    @property
    def extenders(self) -> Sequence[Extender]:
        return self.ctx.extenders

    @property
    def workload_manager(self) -> WorkloadManager:
        """The pod groups' state, for plugins that schedule Workloads' pods together."""
        if self.ctx.workload_manager is None:
            raise RuntimeError(f"profile {self.profile_name} was built without a workload manager "
                               "(the GenericWorkload feature gate is off)")
        return self.ctx.workload_manager

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        if self.ctx.nominator is None:
            return []
        return self.ctx.nominator.nominated_pods_for_node(node_name)

    def activate(self, pods: dict[str, PodInfo]) -> None:
        if self.ctx.activator is not None:
            self.ctx.activator(pods)

    def run_in_background(self, coro: Coroutine[Any, Any, Any], what: str) -> None:
        """Run an API call from a synchronous extension point without blocking the cycle (upstream
        does such writes asynchronously too); failures are logged, and the scheduler counts the
        task as work in flight until it ends."""

        async def guarded() -> None:
            try:
                await coro
            except Exception as e:
                log.warning("%s failed: %s", what, e)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the scheduler's loop (tools, tests): just run it
            asyncio.run(guarded())
            return
        task = loop.create_task(guarded(), name=what)
        self.ctx.background.add(task)
        task.add_done_callback(self.ctx.background.discard)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.ctx.waiting_pods.get(uid)

    def iterate_waiting_pods(self, callback: Callable[[WaitingPod], None]) -> None:
        self.ctx.waiting_pods.iterate(callback)

    def reject_waiting_pod(self, uid: str) -> bool:
        wp = self.ctx.waiting_pods.get(uid)
        if wp is None:
            return False
        wp.reject("", "removed")
        return True

    # --- queueing ------------------------------------------------------------------------------
    def queue_sort_less(self) -> Callable[[QueuedPodInfo, QueuedPodInfo], bool]:
        return self._queue_sort[0].less

    def queue_sort_key(self) -> Callable[[QueuedPodInfo], Any] | None:
        """The QueueSort plugin's key function, if it has one (same order as ``queue_sort_less``)."""
        return self._queue_sort[0].sort_key()

    def pre_enqueue_plugins(self) -> list[PreEnqueuePlugin]:
        return self._pre_enqueue

    def has_filter_plugins(self) -> bool:
        return bool(self._filters)

    def has_post_filter_plugins(self) -> bool:
        return bool(self.points["postFilter"])

    def has_score_plugins(self) -> bool:
        return bool(self.points["score"])

    # --- PreFilter -----------------------------------------------------------------------------
    def run_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """PreFilter plugins; Skip-ping ones are recorded so Filter skips them too."""
        start = time.perf_counter()
        skip: set[str] = set()
        try:
            out = self._pre_filter(state, pod, skip)
        finally:
            state.skip_filter_plugins = skip
        self.observe("PreFilter", out[1], start)
        return out

    def rerun_pre_filter(self, state: CycleState, pod: PodInfo, names: frozenset[str]) -> bool:
        """Run again the PreFilter plugins ``names`` on a state another pod's cycle left (a batched
        cycle), their skips updated; False when one does anything but pass or skip for every node
        (the cycle then runs in full, where the diagnosis is made)."""
        skip = state.skip_filter_plugins
        skip -= names
        result, status, _ = self._pre_filter(state, pod, skip, names)
        return status is None and (result is None or result.all_nodes())

    def _pre_filter(self, state: CycleState, pod: PodInfo, skip: set[str],
                    only: frozenset[str] | None = None) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        result: PreFilterResult | None = None
        with_nodes: set[str] = set()
        returned: Status | None = None
        nodes = self.snapshot.all_rows()
        for pl in self._pre_filters:
            if only is not None and pl.name not in only:
                continue
            t = time.perf_counter()
            self._evaluated(pl.name, "PreFilter", 1)
            r, s = pl.pre_filter(state, pod, nodes)
            self._observe_plugin(state, pl.name, "PreFilter", s, t)
            if s is not None and s.code == Code.Skip:
                skip.add(pl.name)
                continue
            if not is_success(s):
                assert s is not None
                s.plugin = pl.name
                if s.code == Code.UnschedulableAndUnresolvable:
                    return None, s, set()
                if s.code == Code.Unschedulable:
                    returned = s
                    continue
                return None, _wrap(s, f'running PreFilter plugin "{pl.name}"', pl.name), set()
            if r is not None and not r.all_nodes():
                with_nodes.add(pl.name)
            result = r if result is None else result.merge(r)
            if result is not None and not result.all_nodes() and not result.node_names:
                names = sorted(with_nodes)
                msg = (f"node(s) didn't satisfy plugin {names[0]}" if len(names) == 1
                       else f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously")
                return result, Status(Code.UnschedulableAndUnresolvable, msg), with_nodes
        return result, returned, with_nodes

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        return self._run_pre_filter_extensions("AddPod", state, pod, to_add, node)

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        return self._run_pre_filter_extensions("RemovePod", state, pod, to_remove, node)

    def _run_pre_filter_extensions(self, op: str, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo) -> Status | None:
        for pl in self._pre_filters:
            ext = pl.pre_filter_extensions()
            if ext is None or pl.name in state.skip_filter_plugins:
                continue
            s = ext.add_pod(state, pod, other, node) if op == "AddPod" else ext.remove_pod(state, pod, other, node)
            if failed(s):
                return Status.from_error(RuntimeError(f'running {op} on PreFilter plugin "{pl.name}": {s.message()}'))
        return None

    # --- Filter --------------------------------------------------------------------------------
    def run_batch_filters(self, state: CycleState, pod: PodInfo, batch: NodeBatch,
                          only: Callable[[str], bool] | None = None) -> tuple[np.ndarray, np.ndarray, list[Status]]:
        """Run the batch Filter plugins (those ``only`` admits, if given) on every node of ``batch``.

        Returns (first failing filter position per node or a large number, status id per node,
        statuses). Raises StatusError when a plugin returns an Error.
        """
        size = len(batch)
        first_pos = np.full(size, _NO_FAILURE, dtype=np.int32)
        ids = np.full(size, -1, dtype=np.int32)
        statuses: list[Status] = []
        skip = state.skip_filter_plugins
        for position, pl in enumerate(self._filters):
            if pl.name in skip or not isinstance(pl, BatchFilterPlugin) or (only is not None and not only(pl.name)):
                continue
            self._evaluated(pl.name, "Filter", size if not statuses else int(np.count_nonzero(ids < 0)))
            if pl.feasible_only:
                t = time.perf_counter()
                codes, verdict_statuses = self._filter_feasible_only(pl, state, pod, batch, ids)
                self._observe_plugin(state, pl.name, "Filter", verdict_statuses[0] if verdict_statuses else None, t)
            else:
                t = time.perf_counter()
                verdict = pl.filter_nodes(state, pod, batch)
                self._observe_plugin(state, pl.name, "Filter", verdict.statuses[0] if verdict is not None and verdict.statuses else None, t)
                if verdict is None:
                    continue
                codes, verdict_statuses = verdict.codes, verdict.statuses
            newly = (codes >= 0) & (ids < 0)
            if not newly.any():
                continue
            base = len(statuses)
            # Only statuses of nodes no earlier plugin rejected count: upstream never runs this
            # plugin on the others, so an Error there is not raised.
            # By row numbers rather than the mask: indexing by a scattered mask costs several times more.
            rows = np.flatnonzero(newly)
            found = codes.take(rows)
            counted = set(np.flatnonzero(np.bincount(found)).tolist())  # codes are small: no sort
            for i, s in enumerate(verdict_statuses):
                statuses.append(self._filter_status(pl.name, s) if i in counted else s)
            ids[rows] = found + base
            first_pos[rows] = position
        return first_pos, ids, statuses

    def run_row_filters(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int,
                        domain: frozenset[str] | None = None) -> tuple[int, Status | None]:
        """The pod-reading batch Filter plugins (or the domain-scoped ones in ``domain``) on one
        row, in order until one rejects it (as upstream runs filters on a node;
        ``BatchFilterPlugin.filter_row``): the position of that plugin and its status, or (no
        failure, None). Observed as ``run_batch_filters`` observes."""
        skip = state.skip_filter_plugins
        for position, pl in self._pod_reading_filters if domain is None else self._domain_filters:
            if pl.name in skip or (domain is not None and pl.name not in domain):
                continue
            self._evaluated(pl.name, "Filter", 1)
            t = time.perf_counter()
            status = pl.filter_row(state, pod, table, row)
            self._observe_plugin(state, pl.name, "Filter", status, t)
            if status is not None:
                return position, self._filter_status(pl.name, status)
        return _NO_FAILURE, None

    @staticmethod
    def _filter_feasible_only(pl: BatchFilterPlugin, state: CycleState, pod: PodInfo, batch: NodeBatch,
                              ids: np.ndarray) -> tuple[np.ndarray, list[Status]]:
        """Run an expensive plugin only on the nodes no earlier plugin rejected."""
        codes = np.full(len(ids), -1, dtype=np.int32)
        alive = np.flatnonzero(ids < 0)
        if len(alive) == 0:
            return codes, []
        verdict = pl.filter_nodes(state, pod, batch if len(alive) == len(ids) else batch.subset(alive))
        if verdict is None:
            return codes, []
        codes[alive] = verdict.codes
        return codes, verdict.statuses

    def _filter_status(self, plugin: str, status: Status) -> Status:
        if not status.is_rejected():
            raise StatusError(_wrap(status, f'running "{plugin}" filter plugin', plugin))
        if status.plugin != plugin:
            status = status.copy()
            status.plugin = plugin
        return status

    def classic_filters(self, state: CycleState) -> list[tuple[int, FilterPlugin]]:
        """The classic Filter plugins this cycle runs (PreFilter did not skip them), with their positions."""
        skip = state.skip_filter_plugins
        if not skip:
            return self._classic_filters
        return [(i, pl) for i, pl in self._classic_filters if pl.name not in skip]

    def classic_filters_before(self, position: int, state: CycleState) -> list[tuple[int, FilterPlugin]]:
        """Classic Filter plugins configured before ``position`` (all of them for a large position)."""
        return [(i, pl) for i, pl in self.classic_filters(state) if i < position]

    @property
    def has_classic_filters(self) -> bool:
        return bool(self._classic_filters)

    def run_classic_filters(self, classic: list[tuple[int, FilterPlugin]], before: int, state: CycleState, pod: PodInfo,
                            node: NodeInfo) -> Status | None:
        """The status of the first of ``classic`` (from ``classic_filters``) configured before
        position ``before`` that rejects ``node``; None if none does."""
        for i, pl in classic:
            if i >= before:
                break
            s = self.run_classic_filter(pl, state, pod, node)
            if s is not None:
                return s
        return None

    def run_classic_filter(self, pl: FilterPlugin, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        t = time.perf_counter()
        self._evaluated(pl.name, "Filter", 1)
        s = pl.filter(state, pod, node)
        self._observe_plugin(state, pl.name, "Filter", s, t)
        if failed(s):
            return self._filter_status(pl.name, s)
        return None

    def run_filters_on_node_info(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """All Filter plugins on one (possibly modified) node, in configured order (upstream RunFilterPlugins)."""
        table = NodeTable.from_infos([node])
        first_pos, ids, statuses = self.run_batch_filters(state, pod, table.all_rows())
        s = self.run_classic_filters(self.classic_filters(state), int(first_pos[0]), state, pod, node)
        if s is not None:
            return s
        return None if ids[0] < 0 else statuses[ids[0]]

    def run_filters_with_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Upstream RunFilterPluginsWithNominatedPods: also require fitting beside higher-or-equal
        priority pods nominated to the node."""
        added, state_with, node_with = self.add_nominated_pods(state, pod, node)
        if added:
            s = self.run_filters_on_node_info(state_with, pod, node_with)
            if not is_success(s):
                return s
        return self.run_filters_on_node_info(state, pod, node)

    def add_nominated_pods(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[bool, CycleState, NodeInfo]:
        nominated = self._nominees(pod, node.name)
        if not nominated:
            return False, state, node
        node_out = node.clone()
        state_out = state.clone()
        for p in nominated:
            node_out.add_pod(p)
            s = self.run_pre_filter_extension_add_pod(state_out, pod, p, node_out)
            if failed(s):
                raise StatusError(s)
        return True, state_out, node_out

    def has_active_pre_filter_extensions(self, state: CycleState) -> bool:
        """Whether some PreFilter plugin that ran (did not Skip) updates its state on AddPod/RemovePod:
        if none does, one cycle state serves every node, whatever pods are added or removed."""
        return any(pl.name not in state.skip_filter_plugins and pl.pre_filter_extensions() is not None
                   for pl in self._pre_filters)

    def filter_with_nominated_pods(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo]) -> list[Status | None]:
        """The first half of ``RunFilterPluginsWithNominatedPods`` on many nodes at once: per node,
        the batch filters' failure with its higher-or-equal priority nominated pods added (None
        where it fits with them or has none). Only for a state no PreFilter extension updates (see
        ``has_active_pre_filter_extensions``): then the nodes share one scratch table and one pass."""
        out: list[Status | None] = [None] * len(nodes)
        positions, clones, rows = [], [], []
        table = self.snapshot
        for position, node in enumerate(nodes):
            nominated = self._nominees(pod, node.name)
            if nominated:
                clone = node.clone()
                for p in nominated:
                    clone.add_pod(p)
                positions.append(position)
                clones.append(clone)
                row = table.row_of.get(node.name, -1)
                rows.append(row if row >= 0 and table.infos[row] is node else -1)
        if clones:
            scratch = NodeTable.from_infos(clones) if min(rows) < 0 else \
                NodeTable.from_rows(table, np.array(rows, dtype=np.int64), clones)
            _, ids, statuses = self.run_batch_filters(state, pod, scratch.all_rows())
            for position, sid in zip(positions, ids.tolist(), strict=True):
                out[position] = None if sid < 0 else statuses[sid]
        return out

    def _nominees(self, pod: PodInfo, node_name: str) -> list[PodInfo]:
        return [p for p in self.nominated_pods_for_node(node_name) if p.priority >= pod.priority and p.uid != pod.uid]

    # --- PostFilter ----------------------------------------------------------------------------
    async def run_post_filter(self, state: CycleState, pod: PodInfo, statuses: Any) -> tuple[PostFilterResult | None, Status]:
        """PostFilter plugins in order until one helps; a plugin may answer with an awaitable
        (preemption consulting extenders over HTTP)."""
        start = time.perf_counter()
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        status: Status | None = None
        try:
            for pl in self._post_filters:
                t = time.perf_counter()
                r, s = await _maybe_await(pl.post_filter(state, pod, statuses))
                self._observe_plugin(state, pl.name, "PostFilter", s, t)
                if is_success(s):
                    status = s or Status()
                    return r, status
                assert s is not None
                if s.code == Code.UnschedulableAndUnresolvable:
                    s.plugin = pl.name
                    status = s
                    return r, s
                if not s.is_rejected():
                    status = Status.from_error(s.as_error() or RuntimeError(s.message()), plugin=pl.name)
                    return None, status
                if r is not None and r.nominating_info is not None and r.nominating_info.mode.value != 0:
                    result = r
                reasons += s.reasons
                rejector = rejector or pl.name
            status = Status(Code.Unschedulable, *reasons, plugin=rejector)
            return result, status
        finally:
            self.observe("PostFilter", status, start)

    # --- Score ---------------------------------------------------------------------------------
    def rerun_pre_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch, names: frozenset[str]) -> bool:
        """Run again the PreScore plugins ``names`` (as ``rerun_pre_filter``); False on a failure."""
        kept = state.skip_score_plugins - names
        status = self.run_pre_score(state, pod, batch, names)
        state.skip_score_plugins |= kept
        return status is None

    def run_pre_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch, only: frozenset[str] | None = None) -> Status | None:
        start = time.perf_counter()
        skip: set[str] = set()
        status: Status | None = None
        try:
            for pl in self._pre_scores:
                if only is not None and pl.name not in only:
                    continue
                t = time.perf_counter()
                self._evaluated(pl.name, "PreScore", 1)
                s = pl.pre_score(state, pod, batch)
                self._observe_plugin(state, pl.name, "PreScore", s, t)
                if s is not None and s.code == Code.Skip:
                    skip.add(pl.name)
                    continue
                if failed(s):
                    status = _wrap(s, f'running PreScore plugin "{pl.name}"', pl.name)
                    return status
            return None
        finally:
            state.skip_score_plugins = skip
            self.observe("PreScore", status, start)

    def run_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch, keep_parts: bool = False,
                  source: ScoreSource | None = None) -> ScoreResult:
        """Score, normalise and weight every node of ``batch``. Raises StatusError on plugin errors.
        ``source`` supplies batch plugins' scores in place of running them (a batched cycle)."""
        start = time.perf_counter()
        total = np.zeros(len(batch), dtype=np.int64)
        parts: list[tuple[str, np.ndarray, np.ndarray, int]] = []
        raws: dict[str, np.ndarray] = {}
        status: Status | None = None
        try:
            for pl in self.points["score"]:
                if pl.name in state.skip_score_plugins:
                    continue
                t = time.perf_counter()
                if source is not None and isinstance(pl, BatchScorePlugin):
                    raw = source.raw(pl)
                    normalized = source.normalized(pl, raw, partial(self.normalize_one, pl, state, pod, batch, raw))
                else:
                    self._evaluated(pl.name, "Score", len(batch))
                    raw, normalized = self.score_one(pl, state, pod, batch)
                self._observe_plugin(state, pl.name, "Score", None, t)
                if pl.name in self._range_checked and len(normalized) and \
                        (normalized.max() > MAX_NODE_SCORE or normalized.min() < MIN_NODE_SCORE):
                    bad = normalized[(normalized > MAX_NODE_SCORE) | (normalized < MIN_NODE_SCORE)][0]
                    raise StatusError(Status.from_error(RuntimeError(
                        f'applying score defaultWeights on Score plugins: plugin "{pl.name}" returns an invalid score {bad}, '
                        f"it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing")))
                weight = self.score_weights[pl.name]
                total += normalized * weight
                raws[pl.name] = raw
                if keep_parts:  # copies: plugins may hand out memoised arrays they update later
                    parts.append((pl.name, raw.copy(), normalized.copy(), weight))
            return ScoreResult(total, parts, raws)
        except StatusError as e:
            status = e.status
            raise
        finally:
            self.observe("Score", status, start)

    def kept_score_plugins(self, state: CycleState) -> list[tuple[BatchScorePlugin, int, bool]] | None:
        """The Score plugins this cycle runs, with their weights and whether they normalise, for a
        batched cycle that keeps its totals (``RankedTotals``); None when one is not a batch plugin
        or has its range checked (the generic ``run_score`` then scores)."""
        skip = frozenset(state.skip_score_plugins)
        if skip not in self._kept_plugins:
            self._kept_plugins[skip] = self._kept_without(skip)
        return self._kept_plugins[skip]

    def _kept_without(self, skip: frozenset[str]) -> list[tuple[BatchScorePlugin, int, bool]] | None:
        kept = []
        for pl in self.points["score"]:
            if pl.name in skip:
                continue
            if not isinstance(pl, BatchScorePlugin) or pl.name in self._range_checked:
                return None
            kept.append((pl, self.score_weights[pl.name], normalizes(pl)))
        return kept

    def run_kept_scores(self, state: CycleState, plugins: list[tuple[BatchScorePlugin, int, bool]],
                        refresh: Callable[[BatchScorePlugin, bool], None]) -> None:
        """The Score point of a batched cycle that keeps its totals: ``refresh(plugin, normalises)``
        brings each plugin's kept scores up to date; observed as ``run_score`` observes."""
        start = time.perf_counter()
        status: Status | None = None
        try:
            for pl, _, normalises in plugins:
                t = time.perf_counter()
                refresh(pl, normalises)
                self._observe_plugin(state, pl.name, "Score", None, t)
        except StatusError as e:
            status = e.status
            raise
        finally:
            self.observe("Score", status, start)

    def score_one(self, pl: Plugin, state: CycleState, pod: PodInfo, batch: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """One Score plugin over ``batch``: raw and normalised scores, unweighted."""
        if isinstance(pl, BatchScorePlugin):
            raw = self.raw_scores(pl, state, pod, batch)
            return raw, self.normalize_one(pl, state, pod, batch, raw)
        assert isinstance(pl, ScorePlugin)
        scores = []
        for name in batch.names():
            result = pl.score(state, pod, name)
            value, status = result if isinstance(result, tuple) else (result, None)
            if failed(status):
                raise StatusError(_wrap(status, f'running Score plugins: plugin "{pl.name}" failed with', pl.name))
            scores.append(NodeScore(name, int(value)))
        raw = np.array([s.score for s in scores], dtype=np.int64)
        if not normalizes(pl):
            return raw, raw
        s = pl.normalize_score(state, pod, scores)
        if failed(s):
            raise StatusError(_wrap(s, f'running Normalize on Score plugins: plugin "{pl.name}" failed with', pl.name))
        return raw, np.array([x.score for x in scores], dtype=np.int64)

    def raw_scores(self, pl: BatchScorePlugin, state: CycleState, pod: PodInfo, batch: NodeBatch) -> np.ndarray:
        """A batch Score plugin's raw scores over ``batch``."""
        try:
            return np.asarray(pl.score_nodes(state, pod, batch), dtype=np.int64)
        except StatusError as e:
            raise StatusError(_wrap(e.status, f'running Score plugins: plugin "{pl.name}" failed with', pl.name)) from e

    def raw_score_of_row(self, pl: BatchScorePlugin, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> int:
        """A batch Score plugin's raw score of one row (``BatchScorePlugin.score_row``)."""
        try:
            return pl.score_row(state, pod, table, row)
        except StatusError as e:
            raise StatusError(_wrap(e.status, f'running Score plugins: plugin "{pl.name}" failed with', pl.name)) from e

    @staticmethod
    def normalize_one(pl: BatchScorePlugin, state: CycleState, pod: PodInfo, batch: NodeBatch, raw: np.ndarray) -> np.ndarray:
        """A batch Score plugin's normalisation of ``raw`` (``raw`` itself when it has none)."""
        if not normalizes(pl):
            return raw
        try:
            out = pl.normalize_scores(state, pod, batch, raw.copy())
        except StatusError as e:
            raise StatusError(_wrap(e.status, f'running Normalize on Score plugins: plugin "{pl.name}" failed with',
                                    pl.name)) from e
        return raw if out is None else np.asarray(out, dtype=np.int64)

    # --- Reserve, Permit -----------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        start = time.perf_counter()
        status = self._reserve(state, pod, node_name)
        self.observe("Reserve", status, start)
        return status

    def _reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        record = state.record_plugin_metrics
        for pl in self._reserves:
            t = time.perf_counter() if record else 0.0
            s = pl.reserve(state, pod, node_name)
            if record:
                self._observe_plugin(state, pl.name, "Reserve", s, t)
            if failed(s):
                if s.is_rejected():
                    s.plugin = pl.name
                    return s
                return _wrap(s, f'running Reserve plugin "{pl.name}"', pl.name)
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        start = time.perf_counter()
        for pl in reversed(self._reserves):
            try:
                t = time.perf_counter()
                pl.unreserve(state, pod, node_name)
                self._observe_plugin(state, pl.name, "Unreserve", None, t)
            except Exception:
                log.exception("Unreserve of plugin %s failed for pod %s", pl.name, pod.key)
        self.observe("Unreserve", None, start)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        start = time.perf_counter()
        status = self._permit(state, pod, node_name)
        self.observe("Permit", status, start)
        return status

    def _permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        waits: dict[str, float] = {}
        record = state.record_plugin_metrics
        for pl in self._permits:
            t = time.perf_counter() if record else 0.0
            s, timeout = pl.permit(state, pod, node_name)
            if record:
                self._observe_plugin(state, pl.name, "Permit", s, t)
            if not failed(s):
                continue
            if s.is_rejected():
                s.plugin = pl.name
                return s
            if s.code == Code.Wait:
                waits[pl.name] = min(float(timeout), MAX_PERMIT_TIMEOUT)
                continue
            return _wrap(s, f'running Permit plugin "{pl.name}"', pl.name)
        if waits:
            self.ctx.waiting_pods.add(WaitingPod(pod, waits))
            return Status(Code.Wait, f'one or more plugins asked to wait and no plugin rejected pod "{pod.name}"')
        return None

    def will_wait_on_permit(self, pod: PodInfo) -> bool:
        return self.ctx.waiting_pods.get(pod.uid) is not None

    async def wait_on_permit(self, pod: PodInfo) -> Status | None:
        wp = self.ctx.waiting_pods.get(pod.uid)
        if wp is None:
            return None
        start = self.ctx.clock.now()
        try:
            s = await wp.wait()
        finally:
            self.ctx.waiting_pods.remove(pod.uid)
        if self.ctx.metrics is not None:
            code = "Success" if s is None else s.code.name
            self.ctx.metrics.permit_wait_duration.labels(code).observe(self.ctx.clock.now() - start)
        if is_success(s):
            return None
        assert s is not None
        if s.is_rejected():
            return s
        return Status.from_error(RuntimeError(f"waiting on permit for pod: {s.message()}"), plugin=s.plugin)

    # --- Bind ------------------------------------------------------------------------------------
    def run_pre_bind_pre_flights(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Success if some PreBind plugin has work to do for the pod, Skip if none has; the plugins
        that answered Skip are recorded and PreBind does not run them."""
        start = time.perf_counter()
        status = self._pre_bind_pre_flights(state, pod, node_name)
        self.observe("PreBindPreFlight", status, start)
        return status

    def _pre_bind_pre_flights(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        result: Status | None = Status(Code.Skip)
        skip: set[str] = set()
        record = state.record_plugin_metrics
        for pl in self._pre_binds:
            t = time.perf_counter() if record else 0.0
            s = pl.pre_bind_pre_flight(state, pod, node_name)
            if record:
                self._observe_plugin(state, pl.name, "PreBindPreFlight", s, t)
            if s is not None and s.code == Code.Error:
                return _wrap(s, f'running PreBindPreFlight "{pl.name}"', pl.name)
            if not failed(s):
                result = None
            elif s.code == Code.Skip:
                skip.add(pl.name)
            else:
                return Status.from_error(RuntimeError(
                    f'PreBindPreFlight {pl.name} returned "{s.code.name}", which is unsupported. '
                    "It is supposed to return Success, Skip, or Error status"))
        state.skip_pre_bind_plugins = skip
        return result

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        start = time.perf_counter()
        status = await self._pre_bind(state, pod, node_name)
        self.observe("PreBind", status, start)
        return status

    async def _pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for pl in self._pre_binds:
            if pl.name in state.skip_pre_bind_plugins:
                continue
            t = time.perf_counter()
            s = await _maybe_await(pl.pre_bind(state, pod, node_name))
            self._observe_plugin(state, pl.name, "PreBind", s, t)
            if failed(s):
                if s.is_rejected():
                    s.plugin = pl.name
                    return s
                return _wrap(s, f'running PreBind plugin "{pl.name}"', pl.name)
        return None

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        start = time.perf_counter()
        status = await self._bind(state, pod, node_name)
        self.observe("Bind", status, start)
        return status

    async def _bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        status: Status | None = Status(Code.Skip, "")
        record = state.record_plugin_metrics
        for pl in self._binds:
            t = time.perf_counter() if record else 0.0
            status = await _maybe_await(pl.bind(state, pod, node_name))
            if record:
                self._observe_plugin(state, pl.name, "Bind", status, t)
            if status is not None and status.code == Code.Skip:
                continue
            if failed(status):
                if status.is_rejected():
                    status.plugin = pl.name
                    return status
                return _wrap(status, f'running Bind plugin "{pl.name}"', pl.name)
            return status
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        start = time.perf_counter()
        for pl in self._post_binds:
            try:
                t = time.perf_counter()
                pl.post_bind(state, pod, node_name)
                self._observe_plugin(state, pl.name, "PostBind", None, t)
            except Exception:
                log.exception("PostBind of plugin %s failed for pod %s", pl.name, pod.key)
        self.observe("PostBind", None, start)

    # --- metrics --------------------------------------------------------------------------------
    def _observe_plugin(self, state: CycleState, plugin: str, point: str, status: Status | None, start: float) -> None:
        """``plugin_execution_duration_seconds`` for cycles sampled by ``state.record_plugin_metrics``
        (upstream samples 10% of cycles). Batch Filter plugins are observed once per batch, with the
        code of their first failure, where upstream observes each plugin once per node."""
        metrics = self.ctx.metrics
        if state.record_plugin_metrics and metrics is not None:
            code = "Success" if status is None else status.code.name
            metrics.plugin_execution_duration.labels(plugin, point, code).observe(time.perf_counter() - start)

    def observe(self, point: str, status: Status | None, start: float) -> None:
        """``framework_extension_point_duration_seconds`` of one run of ``point`` since ``start``
        (``time.perf_counter()``), labelled with the code it returned."""
        metrics = self.ctx.metrics
        if metrics is None:
            return
        code = "Success" if status is None else status.code.name
        child = self._duration_children.get((point, code))
        if child is None:
            child = self._duration_children[(point, code)] = metrics.framework_extension_point_duration.labels(point, code, self.profile_name)
        child.observe(time.perf_counter() - start)

    def _evaluated(self, plugin: str, point: str, count: int) -> None:
        """``plugin_evaluation_total``: ``plugin`` ran at ``point`` for ``count`` pods or nodes."""
        metrics = self.ctx.metrics
        if metrics is None or not count:
            return
        child = self._evaluation_counters.get((plugin, point))
        if child is None:
            child = self._evaluation_counters[(plugin, point)] = metrics.plugin_evaluation.labels(plugin, point, self.profile_name)
        child.inc(count)


#: The first-failure position of a node no Filter plugin rejects.
_NO_FAILURE = int(np.iinfo(np.int32).max)


def _wrap(status: Status, context: str, plugin: str) -> Status:
    error = status.as_error()
    message = status.message() if error is None else str(error)
    return Status(Code.Error, f"{context}: {message}", plugin=plugin, error=RuntimeError(f"{context}: {message}"))


async def _maybe_await(value: T | Awaitable[T]) -> T:
    """A PreBind or Bind plugin's answer, awaited when the plugin is asynchronous."""
    if isinstance(value, Awaitable):
        return await value
    return value

