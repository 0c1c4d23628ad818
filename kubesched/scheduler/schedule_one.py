"""Finding a node for one pod: PreFilter, Filter, Score and host selection over the node table
(upstream ``schedule_one.go``: schedulePod, findNodesThatFitPod, prioritizeNodes, selectHost).

Filtering is vectorised: batch Filter plugins evaluate every candidate node at once; the result is
then read in upstream's visiting order (round-robin over zones, rotated by the start index) to take
the first ``numFeasibleNodesToFind`` feasible nodes, exactly as the parallel upstream loop would
settle if it ran sequentially.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from kubesched.api.types import PodInfo
from kubesched.scheduler.extender import extender_scores, find_nodes_that_pass_extenders, scaled
from kubesched.scheduler.framework.batch import MAX_MOVED_TOTALS, BatchCycle, BatchEntry, RankedTotals
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import Diagnosis, FitError, NoNodesAvailable
from kubesched.scheduler.framework.extender import EXTENDER_NAME, Extender
from kubesched.scheduler.framework.interface import BatchScorePlugin
from kubesched.scheduler.framework.memo import FEW_ROWS
from kubesched.scheduler.framework.nominated import NomineeChecks, nominated_overlay
from kubesched.scheduler.framework.runtime import Framework, ScoreResult
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable

T = TypeVar("T")

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BATCHING_GATE = "OpportunisticBatching"


@dataclass
class ScheduleResult:
    suggested_host: str = ""
    evaluated_nodes: int = 0
    feasible_nodes: int = 0


@dataclass
class _Visit:
    """The Filter side of an attempt as the cycle left it (rows, not names): the nodes in visiting
    order, the status id of each processed one (-1: passed), and the positions found feasible."""

    names: np.ndarray
    rotated: np.ndarray
    ids: np.ndarray
    statuses: list[Status]
    positions: np.ndarray


class _Named(Generic[T]):
    """A field of an ``Attempt`` filled from its recorded visit when first read (or written)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, attempt: Attempt, owner: type | None = None) -> T:
        attempt._named()
        value: T = getattr(attempt, self.slot)
        return value

    def __set__(self, attempt: Attempt, value: T) -> None:
        attempt._named()
        setattr(attempt, self.slot, value)


class Attempt:
    """What one scheduling attempt saw, kept when explanations are on (``--explain``). A cycle
    records its Filter side as rows (``record_visit``), named only when read: a scheduler that
    explains every attempt keeps most of them unread."""

    __slots__ = ("_feasible", "_filter_status", "_node_names", "_visit", "chosen", "pod", "pre_filter_status", "scores")

    #: Every node in the order the cycle visited them (those it did not reach too).
    node_names: _Named[list[str]] = _Named()
    #: The status of each node a Filter plugin (or an extender) rejected.
    filter_status: _Named[dict[str, Status]] = _Named()
    #: The feasible nodes the cycle found, in visiting order.
    feasible: _Named[list[str]] = _Named()

    def __init__(self, pod: str, node_names: list[str] | None = None, filter_status: dict[str, Status] | None = None,
                 feasible: list[str] | None = None, scores: ScoreResult | None = None, chosen: str = "",
                 pre_filter_status: Status | None = None) -> None:
        self.pod = pod
        self._node_names = node_names if node_names is not None else []
        self._filter_status = filter_status if filter_status is not None else {}
        self._feasible = feasible if feasible is not None else []
        self.scores, self.chosen, self.pre_filter_status = scores, chosen, pre_filter_status
        self._visit: _Visit | None = None

    def record_visit(self, names: np.ndarray, rotated: np.ndarray, ids: np.ndarray, statuses: list[Status],
                     positions: np.ndarray, processed: int) -> None:
        """Every node in visiting order (``names[rotated]``), the verdicts of the ``processed``
        first (``ids``: -1 passed, else an index in ``statuses``) and the feasible ``positions``.
        The arrays are kept as they are: callers hand over arrays nothing writes to later."""
        self._visit = _Visit(names, rotated, ids[:processed], statuses, positions)

    def _named(self) -> None:
        visit, self._visit = self._visit, None
        if visit is None:
            return
        names, rotated, ids = visit.names, visit.rotated, visit.ids
        self._node_names = names[rotated].tolist()
        failed = np.flatnonzero(ids >= 0)
        self._filter_status = dict(zip(names[rotated[failed]].tolist(), [visit.statuses[s] for s in ids[failed].tolist()],
                                       strict=True))
        self._feasible = names[rotated[visit.positions]].tolist()


def num_feasible_nodes_to_find(percentage: int | None, global_percentage: int, num_all: int) -> int:
    """``numFeasibleNodesToFind``: every node below 100 nodes, else a percentage (adaptive when 0)."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all
    pct = percentage if percentage is not None else global_percentage
    if pct == 0:
        pct = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    count = num_all * pct // 100
    return max(count, MIN_FEASIBLE_NODES_TO_FIND)


class Algorithm:
    """The node-selection half of the scheduler; holds the rotating start index and the
    configuration's extenders (called on the feasible nodes, after the Filter plugins)."""

    def __init__(self, global_percentage: int, rng: random.Random, extenders: Sequence[Extender] = ()) -> None:
        self.global_percentage = global_percentage
        self.rng = rng
        self.extenders = tuple(extenders)
        self.next_start_node_index = 0
        #: The batching context of the cycle running (None: not batched).
        self._batch: BatchCycle | None = None
        #: The scheduling cycle, set by the scheduler before each attempt (upstream's cycle counter).
        self.cycle = 0
        #: The pod's signature and the node upstream's batching hinted at, this cycle.
        self._signature: str | None = None
        self._hint = ""

    async def schedule_pod(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                           attempt: Attempt | None = None) -> ScheduleResult:
        """Pick a node or raise FitError / NoNodesAvailable / StatusError (ExtenderError too, from
        an extender that is not ignorable).

        With batching, a pod of the same shape as the last one reuses that cycle's results
        (``framework/batch.py``); should the reused cycle find no node or meet an error, the cycle
        runs in full from the start, so failures are diagnosed (and preempted for) as always."""
        if table.n == 0:
            raise NoNodesAvailable()
        cycle = self._begin_batch(fw, pod, table)
        if cycle is not None and cycle.reuse is not None:
            entry, start_index = cycle.reuse, self.next_start_node_index
            result = await self._scheduled_with(cycle, fw, state, pod, table, attempt)
            if result is not None:
                if cycle.refreshed:  # else the changed rows are still to be refreshed
                    entry.version = cycle.version
                fw.batches.keep(entry, reused=True)
                return result
            state.restore(CycleState())
            self.next_start_node_index = start_index
            cycle = BatchCycle(cycle.key, version=cycle.version)
        if cycle is not None:
            cycle.fill = fw.batches.new_entry(cycle, table, self._objects_version(fw) or 0)
            cycle.explained = attempt is not None
        try:
            result = await self._schedule_once(cycle, fw, state, pod, table, attempt)
        except BaseException:
            fw.batches.drop()
            raise
        if cycle is not None and cycle.fill is not None and cycle.fill.raw:
            fw.batches.keep(cycle.fill, reused=False)
        else:
            fw.batches.drop()
        return result

    # --- batching --------------------------------------------------------------------------------
    @staticmethod
    def _objects_version(fw: Framework) -> int | None:
        version = fw.ctx.objects_version
        return None if version is None else version()

    def _begin_batch(self, fw: Framework, pod: PodInfo, table: NodeTable) -> BatchCycle | None:
        """The cycle's batching context, None when the pod is not batched (option or gate off,
        no key, a nominated node or nominated pods in play)."""
        if not fw.options.batching or not fw.feature_gates.enabled(BATCHING_GATE):
            return None
        shareable = not pod.nominated_node_name and not _nominations(fw)
        key = fw.batch_key(pod, table) if shareable else None
        return fw.batches.begin(key, table, self._objects_version(fw), shareable, fw.pod_readers)

    async def _scheduled_with(self, cycle: BatchCycle, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                              attempt: Attempt | None) -> ScheduleResult | None:
        """The cycle on the reused entry; None when it found no node or a plugin failed."""
        entry = cycle.reuse
        assert entry is not None
        state.restore(entry.state)
        try:
            result = self._schedule_kept(cycle, fw, state, pod, table, attempt) if attempt is None or not entry.rerun else None
            if result is not None or entry.rerun:  # domain-scoped plugins run again in the kept cycle only
                return result
            return await self._schedule_once(cycle, fw, state, pod, table, attempt)
        except (FitError, StatusError):
            return None

    def _schedule_kept(self, cycle: BatchCycle, fw: Framework, state: CycleState, pod: PodInfo,
                       table: NodeTable, attempt: Attempt | None = None) -> ScheduleResult | None:
        """A batched cycle on the totals its entry keeps (``RankedTotals``): the changed rows'
        verdicts and raw scores refreshed, their totals rewritten, the best total taken; the node,
        the random draw, the start index and the metrics are those of the generic cycle. For at
        least two feasible nodes, batch plugins only, no extenders, no signature (upstream's
        hints). Where the search samples (more feasible nodes than ``numFeasibleNodesToFind``), the
        nodes the generic cycle would visit are read from the kept verdicts and their kept totals
        corrected where a normalisation over them differs from the kept one (``_sampled``). The
        entry's domain-scoped plugins run again in full where every node is visited: PreFilter,
        Filter over every row, PreScore and Score over the feasible rows (never for an explained
        cycle: their raw scores are not kept). An explained cycle's ``attempt`` is filled from the
        entry as the generic cycle fills it. None otherwise: the generic cycle runs on the
        refreshed entry, or a full cycle where domain-scoped plugins run."""
        plugins = self._kept_plugins(fw, state, pod)
        if plugins is None:
            return None
        gate = fw.feature_gates.enabled(BATCHING_GATE)
        if gate:
            self._hint = fw.hints.hint(None, self.cycle, _fits_anything)  # no signature: drops any ranking
        start_filter = time.perf_counter()
        try:
            entry = self._refresh_changed(cycle, fw, state, pod, table)
            domain_moved = self._rerun_domain_filters(entry, fw, state, pod, table) if entry.rerun else False
        except StatusError as e:
            fw.observe("Filter", e.status, start_filter)
            raise
        if domain_moved is None:
            return None
        ranked = entry.ranked
        if ranked is None or ranked.order is not table.order():
            ranked = entry.ranked = RankedTotals.of(entry, table.order())
            entry.dirty.clear()
        elif domain_moved:
            ranked.take_feasible(entry)
        else:
            ranked.take_verdicts(entry)
        if entry.slot_mode:
            ranked.allow_slots(*entry.slots)
        n = table.n
        to_find = num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, self.global_percentage, n)
        if ranked.count < 2 or (ranked.count > to_find and entry.rerun):
            # The generic cycle runs and keeps no totals: they are all recomputed when they serve again,
            # so the rows changed meanwhile need not be remembered.
            ranked.complete = False
            entry.dirty.clear()
            return None
        fw.observe("Filter", None, start_filter)
        feasible = table.all_rows() if ranked.count == n else table.batch(np.flatnonzero(ranked.effective()))
        if entry.rerun:
            if not fw.rerun_pre_score(state, pod, feasible, entry.rerun):
                return None
            plugins = fw.kept_score_plugins(state)
            if plugins is None:
                return None
        self._keep_scores(entry, ranked, plugins, fw, state, pod, feasible)
        if ranked.count > to_find:
            result = self._sampled(entry, ranked, plugins, fw, state, pod, table, to_find, attempt)
        else:
            self.next_start_node_index %= n  # every node was processed: the start index moved by n
            host = table.names[ranked.best(self.next_start_node_index, self.rng)]
            if attempt is not None:
                self._record_kept(attempt, entry, ranked, plugins, table, host)
            result = ScheduleResult(host, n, ranked.count)
        if gate:
            fw.hints.store(None, "", result.suggested_host, None, self.cycle)
        fw.batches.kept += 1
        return result

    def _sampled(self, entry: BatchEntry, ranked: RankedTotals, plugins: list[tuple[BatchScorePlugin, int, bool]],
                 fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, to_find: int,
                 attempt: Attempt | None) -> ScheduleResult:
        """The kept cycle where the search samples: the first ``to_find`` feasible nodes from the
        start index in visiting order, as the generic cycle finds them, and their totals. A kept
        total normalises over every feasible node and the generic cycle over the nodes it visited,
        so each normalising plugin's scores over the visited nodes are computed, and where they
        differ from the kept ones the totals are corrected by the difference (times the weight)."""
        n = table.n
        start = self.next_start_node_index % n
        rotated = _rotated(ranked.order, start)
        positions = np.flatnonzero(ranked.feasible.take(rotated))[:to_find]
        processed = int(positions[-1]) + 1
        rows = rotated[positions]
        totals = ranked.in_order.take(ranked.position.take(rows))
        visited = table.batch(rows)
        normalized: dict[str, np.ndarray] = {}
        for pl, weight, normalises in plugins:
            if not normalises:
                continue
            kept = ranked.normalized[pl.name].take(rows)
            raw = entry.raw[pl.name].take(rows)
            extremes = ranked.extremes.get(pl.name)
            if extremes is not None and _extremes(pl, raw) == extremes:
                normalized[pl.name] = kept  # the same lowest and highest: the same normalisation
                continue
            over_visited = normalized[pl.name] = fw.normalize_one(pl, state, pod, visited, raw)
            if not np.array_equal(over_visited, kept):
                totals = totals + (over_visited - kept) * weight
        self.next_start_node_index = (start + processed) % n
        host = table.names[int(rows[self.select_host(totals)])]
        if attempt is not None:
            self._record_filters(attempt, table, rotated, entry.ids.take(rotated[:processed]), entry.statuses, positions,
                                 processed)
            parts = []
            for pl, weight, _ in plugins:
                raw = entry.raw[pl.name].take(rows)
                parts.append((pl.name, raw, normalized.get(pl.name, raw), weight))
            attempt.scores = ScoreResult(totals, parts)
            attempt.chosen = host
        return ScheduleResult(host, processed, len(rows))

    def _record_kept(self, attempt: Attempt, entry: BatchEntry, ranked: RankedTotals,
                     plugins: list[tuple[BatchScorePlugin, int, bool]], table: NodeTable, host: str) -> None:
        """What the generic cycle records of a pod that visits every node: each node's verdict in
        visiting order, then each feasible node's raw, normalised and weighted scores and total
        (copies: the entry's arrays change with the next cycle)."""
        rotated = _rotated(ranked.order, self.next_start_node_index)
        ids = entry.ids[rotated]
        positions = np.flatnonzero(ids < 0)
        self._record_filters(attempt, table, rotated, ids, entry.statuses, positions, len(rotated))
        rows = rotated[positions]
        parts = [(pl.name, entry.raw[pl.name][rows], (ranked.normalized[pl.name] if normalises else entry.raw[pl.name])[rows], weight)
                 for pl, weight, normalises in plugins]
        attempt.scores = ScoreResult(ranked.in_order[ranked.position[rows]], parts)
        attempt.chosen = host

    def _kept_plugins(self, fw: Framework, state: CycleState, pod: PodInfo) -> list[tuple[BatchScorePlugin, int, bool]] | None:
        """The Score plugins a cycle that keeps its totals runs, or None where no such cycle serves
        (a plugin that is not a batch plugin, extenders, no filter or score plugins, fast paths
        off, a pod upstream's hints serve)."""
        plugins = fw.kept_score_plugins(state)
        if plugins is None or self.extenders or fw.has_classic_filters or not fw.has_filter_plugins() \
                or not fw.has_score_plugins() or not fw.options.fast_paths:
            return None
        if fw.feature_gates.enabled(BATCHING_GATE) and fw.sign_pod(pod) is not None:
            return None
        return plugins

    @staticmethod
    def _rerun_domain_filters(entry: BatchEntry, fw: Framework, state: CycleState, pod: PodInfo,
                              table: NodeTable) -> bool | None:
        """The entry's domain-scoped plugins again: PreFilter, then Filter on the rows whose
        verdict may have moved (the domains whose counts did, when the plugins can tell) or every
        row; whether verdicts moved on many rows, or None when a PreFilter does more than pass or
        skip (a full cycle then decides). Where the one plugin that runs decides per domain
        (``Framework.domain_filter_slots``), its verdicts are kept per domain instead
        (``entry.slots``, read by the kept totals)."""
        if not fw.rerun_pre_filter(state, pod, entry.rerun):
            return None
        slots = _domain_slots(fw, state, entry, table)
        entry.keep_domain_slots(slots is not None)
        if slots is not None:
            entry.slots = slots
            return False
        before, entry.domain_basis = entry.domain_basis, fw.domain_filter_basis(state, entry.rerun)
        if entry.domain_passes and entry.rerun <= state.skip_filter_plugins:
            return False  # they all skip, and passed everywhere before: no verdict moved
        rows = fw.domain_filter_moved_rows(before, entry.domain_basis, table, MAX_MOVED_TOTALS)
        if rows is not None:
            if len(rows) <= FEW_ROWS and fw.options.fast_paths:
                for row in rows.tolist():
                    entry.set_domain_row(row, fw.run_row_filters(state, pod, table, row, entry.rerun))
            elif len(rows):
                entry.set_domain_rows(rows, fw.run_batch_filters(state, pod, table.batch(rows), entry.rerun.__contains__))
            return False
        return entry.set_domain_filters(fw.run_batch_filters(state, pod, table.all_rows(), entry.rerun.__contains__))

    @staticmethod
    def _keep_scores(entry: BatchEntry, ranked: RankedTotals, plugins: list[tuple[BatchScorePlugin, int, bool]],
                     fw: Framework, state: CycleState, pod: PodInfo, feasible: NodeBatch) -> None:
        """Bring ``ranked`` up to date: raw scores where the feasible rows lack them (every feasible
        row once the totals are stale, else the rows that moved), normalisations over the feasible
        rows where stale, then the totals of the rows that moved (normalised scores included), or
        all of them. Domain-scoped plugins score every feasible row again."""
        table = feasible.table
        moved, entry.dirty = entry.dirty, set()
        few: list[int] | None = None  # a few rows to score, scored row by row
        if ranked.complete:
            few = sorted(r for r in moved if ranked.feasible[r])
            rows: np.ndarray | None = np.array(few, dtype=np.int64)
            if len(few) > FEW_ROWS:
                few = None
        else:
            rows = None if ranked.count == table.n else np.flatnonzero(ranked.feasible)
        renormalise, ranked.feasibility_moved = ranked.feasibility_moved, False

        def refresh(pl: BatchScorePlugin, normalises: bool) -> None:
            if pl.name in entry.rerun:
                ranked.keep_scores(pl.name, _domain_scores(fw, pl, state, pod, feasible, normalises), moved)
                return
            if few is not None and pl.name in entry.known:
                for row in few:
                    if entry.lacks(pl.name, row):
                        entry.set_raw_row(pl.name, row, fw.raw_score_of_row(pl, state, pod, table, row))
            else:
                need = entry.lacking(pl.name, rows)
                if len(need):
                    entry.set_raw(pl.name, need, fw.raw_scores(pl, state, pod, table.batch(need)))
            if normalises and (renormalise or pl.name in ranked.stale or pl.name not in ranked.normalized):
                ranked.stale.discard(pl.name)
                scores, extremes = _normalized_over(fw, pl, state, pod, table, entry.raw[pl.name], ranked)
                ranked.keep_scores(pl.name, scores, moved, extremes)

        fw.run_kept_scores(state, plugins, refresh)
        entry.dirty.clear()  # the rows just scored
        parts = [(ranked.normalized[pl.name] if normalises or pl.name in entry.rerun else entry.raw[pl.name], weight)
                 for pl, weight, normalises in plugins]
        if ranked.complete:
            ranked.update(sorted(moved), parts)
        else:
            ranked.recompute(parts)

    async def _schedule_once(self, cycle: BatchCycle | None, fw: Framework, state: CycleState, pod: PodInfo,
                             table: NodeTable, attempt: Attempt | None) -> ScheduleResult:
        self._batch = cycle
        try:
            return await self._schedule(fw, state, pod, table, attempt)
        finally:
            self._batch = None

    async def _schedule(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                        attempt: Attempt | None) -> ScheduleResult:
        self._signature, self._hint = None, ""
        feasible, diagnosis = await self.find_nodes_that_fit(fw, state, pod, table, attempt)
        if len(feasible) == 0:
            raise FitError(pod.key, table.n, diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1:
            host = table.names[int(feasible[0])]
            if attempt is not None:
                attempt.chosen = host
            if fw.feature_gates.enabled(BATCHING_GATE):
                fw.hints.store(self._signature, self._hint, host, None, self.cycle)
            return ScheduleResult(host, evaluated, 1)
        if len(feasible) == table.n and fw.options.fast_paths:
            # Every node is feasible: score whole columns in row order, then read totals in visiting order.
            totals = self.prioritize(fw, state, pod, table.all_rows(), attempt)[feasible]
            if attempt is not None and attempt.scores is not None:
                attempt.scores = attempt.scores.reordered(feasible)
        else:
            totals = self.prioritize(fw, state, pod, table.batch(feasible), attempt)
        if self.extenders:
            totals = await self._add_extender_scores(pod, table, feasible, totals, attempt)
        chosen = self.select_host(totals)
        host = table.names[int(feasible[chosen])]
        if attempt is not None:
            attempt.chosen = host
        if fw.feature_gates.enabled(BATCHING_GATE):
            rest = None if self._signature is None else (table, np.delete(feasible, chosen), np.delete(totals, chosen))
            fw.hints.store(self._signature, self._hint, host, rest, self.cycle)
        return ScheduleResult(host, evaluated, len(feasible))

    # --- filtering -------------------------------------------------------------------------------
    async def find_nodes_that_fit(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                                  attempt: Attempt | None = None) -> tuple[np.ndarray, Diagnosis]:
        diagnosis = Diagnosis(table.names, table.n)
        batch = self._batch
        if batch is not None and batch.reuse is not None:
            # PreFilter ran for the entry's pod: every node a candidate, nothing rejected.
            pre_result, status, plugins = None, None, set[str]()
        else:
            pre_result, status, plugins = fw.run_pre_filter(state, pod)
            if batch is not None and not (pre_result is None or pre_result.all_nodes()):
                batch.fill = None
        diagnosis.unschedulable_plugins = set(plugins)
        if status is not None and not status.is_success():
            if not status.is_rejected():
                raise StatusError(status)
            diagnosis.node_to_status.absent = status
            diagnosis.pre_filter_msg = status.message()
            diagnosis.add_plugin_status(status)
            if attempt is not None:
                attempt.pre_filter_status = status
            return np.empty(0, dtype=np.int64), diagnosis
        if fw.feature_gates.enabled(BATCHING_GATE):
            self._signature = fw.sign_pod(pod)
            self._hint = fw.hints.hint(self._signature, self.cycle, lambda name: self._fits(fw, state, pod, table, name))
        if pod.nominated_node_name or self._hint:
            feasible = self._evaluate_nominated_node(fw, state, pod, table, diagnosis, attempt, self._hint)
            if self.extenders:
                feasible = await self._pass_extenders(pod, table, feasible, diagnosis, attempt)
            if len(feasible):
                return feasible, diagnosis
        candidates = table.order()
        if pre_result is not None and not pre_result.all_nodes():
            wanted = {table.row_of[n] for n in pre_result.node_names or () if n in table.row_of}
            candidates = candidates[np.isin(candidates, list(wanted))] if wanted else np.empty(0, dtype=np.int64)
            names = " ".join(sorted(plugins))
            diagnosis.node_to_status.absent = Status(Code.UnschedulableAndUnresolvable, f"node(s) didn't satisfy plugin(s) [{names}]")
        feasible, processed = self.find_nodes_that_pass_filters(fw, state, pod, table, candidates, diagnosis, attempt)
        if table.n:
            self.next_start_node_index = (self.next_start_node_index + processed) % table.n
        if not self.extenders:
            return feasible, diagnosis
        passed = await self._pass_extenders(pod, table, feasible, diagnosis, attempt)
        if len(passed) != len(feasible):
            # Extenders register no events: any cluster event may make the pod schedulable again.
            diagnosis.unschedulable_plugins.add(EXTENDER_NAME)
        return passed, diagnosis

    async def _pass_extenders(self, pod: PodInfo, table: NodeTable, feasible: np.ndarray, diagnosis: Diagnosis,
                              attempt: Attempt | None) -> np.ndarray:
        """The feasible rows the filter extenders keep; their verdicts join the explanation."""
        if len(feasible) == 0:
            return feasible
        removed_by: dict[str, str] = {}
        passed = await find_nodes_that_pass_extenders(self.extenders, pod, table, feasible, diagnosis.node_to_status,
                                                      removed_by if attempt is not None else None)
        if attempt is not None:
            for name, extender in removed_by.items():
                status = diagnosis.node_to_status.get(name)
                # A node dropped without a reason is recorded for the explanation only, as upstream
                # leaves it out of the diagnosis.
                attempt.filter_status[name] = status if status.plugin == extender else Status(
                    Code.UnschedulableAndUnresolvable, plugin=extender)
            attempt.feasible = [table.names[int(r)] for r in passed]
        return passed

    @staticmethod
    def _fits(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, name: str) -> bool:
        """Whether the Filter plugins let the pod on node ``name`` (a missing node counts as
        fitting: the ranking that named it is stale either way)."""
        info = table.get(name)
        if info is None:
            return True
        status = fw.run_filters_on_node_info(state, pod, info)
        return status is None or not status.is_rejected()

    def _evaluate_nominated_node(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                                 diagnosis: Diagnosis, attempt: Attempt | None = None, hint: str = "") -> np.ndarray:
        """``evaluateNominatedNode``: the nominated node alone, or else the node batching hints at;
        the explanation shows that one node (a failing one is then overwritten by the full pass)."""
        row = table.row_of.get(pod.nominated_node_name or hint)
        if row is None:
            return np.empty(0, dtype=np.int64)
        feasible, _ = self.find_nodes_that_pass_filters(fw, state, pod, table, np.array([row], dtype=np.int64), diagnosis,
                                                        attempt)
        return feasible

    def find_nodes_that_pass_filters(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                                     candidates: np.ndarray, diagnosis: Diagnosis,
                                     attempt: Attempt | None = None) -> tuple[np.ndarray, int]:
        """The first feasible nodes in visiting order, and how many nodes were processed."""
        n_all = len(candidates)
        if n_all == 0:
            return candidates, 0
        to_find = num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, self.global_percentage, n_all)
        if not self._has_scoring(fw) and not any(e.is_filter() for e in self.extenders):
            to_find = 1
        start = self.next_start_node_index % n_all
        rotated = _rotated(candidates, start)
        if not fw.has_filter_plugins():
            return rotated[:to_find], min(to_find, n_all)
        start_filter = time.perf_counter()
        error: Status | None = None
        try:
            return self._filter(fw, state, pod, table, rotated, to_find, diagnosis, attempt)
        except StatusError as e:
            error = e.status
            raise
        finally:
            fw.observe("Filter", error, start_filter)  # one observation per pass, as upstream

    def _filter(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, rotated: np.ndarray, to_find: int,
                diagnosis: Diagnosis, attempt: Attempt | None) -> tuple[np.ndarray, int]:
        n_all = len(rotated)
        first_pos, ids, statuses = self._batched_filters(fw, state, pod, table, rotated)
        statuses = list(statuses)
        checks = _nominee_checks(fw, pod, table)
        nominees = _positions_with_nominees(fw, pod, table, rotated, checks)
        if fw.has_classic_filters:
            passed, processed = self._per_node_pass(fw, state, pod, table, rotated, first_pos, ids, statuses, to_find,
                                                    set(nominees.tolist()))
        else:
            passed = ids < 0
            processed = n_all
            if len(nominees):
                self._nominee_pass(fw, state, pod, table, rotated, passed, ids, statuses, to_find, nominees, checks)
        positions = np.flatnonzero(passed[:processed])
        if len(positions) > to_find:
            processed = int(positions[to_find - 1]) + 1
            positions = positions[:to_find]
        failed = np.flatnonzero(ids[:processed] >= 0)
        if len(failed):
            diagnosis.node_to_status.set_rows(rotated[failed], ids[failed], statuses)
            for sid in np.flatnonzero(np.bincount(ids[failed])):  # status ids are small: no sort
                diagnosis.add_plugin_status(statuses[sid])
        if attempt is not None:
            self._record_filters(attempt, table, rotated, ids, statuses, positions, processed)
        return rotated[positions], processed

    def _batched_filters(self, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                         rotated: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[Status]]:
        """The batch filters' answer over ``rotated``: from the reused entry, refreshed on the rows
        changed since; or computed, and kept in the entry being filled."""
        cycle = self._batch
        if cycle is None or len(rotated) != table.n:
            if cycle is not None:
                cycle.fill = None
            return self._run_batch_filters(fw, state, pod, table, rotated)
        if cycle.reuse is not None:
            entry = self._refresh_changed(cycle, fw, state, pod, table)
            return entry.first_pos[rotated], entry.ids[rotated], entry.statuses
        readers, domain = fw.pod_readers.__contains__, fw.domain_scoped.__contains__
        fill = cycle.fill
        if fill is not None and fw.domain_scoped & fw.ran_plugins(state, "filter") and \
                not self._keeps_totals(cycle, fw, state, pod, table):
            fill = cycle.fill = None  # an entry they would run again in could not serve: none is filled
        if fill is None:
            return self._run_batch_filters(fw, state, pod, table, rotated)
        rows, every = np.arange(table.n), table.all_rows()
        try:
            node_only = fw.run_batch_filters(state, pod, every, lambda name: not readers(name) and not domain(name))
            pod_reading = fw.run_batch_filters(state, pod, every, readers)
            domain_scoped = fw.run_batch_filters(state, pod, every, domain) if fw.domain_scoped & fw.ran_plugins(state, "filter") else None
        except StatusError:  # perhaps on a node one pass would not ask: that pass decides
            cycle.fill = None
            return self._run_batch_filters(fw, state, pod, table, rotated)
        fill.set_filters(fill.node_only, rows, node_only)
        fill.set_filters(fill.pod_reading, rows, pod_reading)
        if domain_scoped is not None:
            fill.set_domain_filters(domain_scoped)
        return fill.first_pos[rotated], fill.ids[rotated], fill.statuses

    def _keeps_totals(self, cycle: BatchCycle, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable) -> bool:
        """Whether a cycle reusing this one's entry could keep its totals while running domain-scoped
        plugins again: not an explained one (its raw scores are not kept for the explanation, and a
        scheduler explains every attempt or none), not where no such cycle serves, nor where the search samples
        (``numFeasibleNodesToFind`` below the node count: such cycles visit every node)."""
        return not cycle.explained and self._kept_plugins(fw, state, pod) is not None and \
            num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, self.global_percentage, table.n) >= table.n

    @staticmethod
    def _refresh_changed(cycle: BatchCycle, fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable) -> BatchEntry:
        """The reused entry, its pod-reading Filter plugins' verdicts refreshed on the rows changed
        since (once a cycle: a kept-totals cycle that hands over to the generic one did it)."""
        entry = cycle.reuse
        assert entry is not None
        if not cycle.refreshed:
            rows = cycle.changed
            if len(rows) <= FEW_ROWS and fw.options.fast_paths:  # row by row: the node that took the last pod
                for row in rows.tolist():
                    entry.set_row_filters(row, fw.run_row_filters(state, pod, table, row))
            elif len(rows):
                entry.set_filters(entry.pod_reading, rows, fw.run_batch_filters(state, pod, table.batch(rows),
                                                                                 fw.pod_readers.__contains__))
            cycle.refreshed = True
        return entry

    @staticmethod
    def _run_batch_filters(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable,
                           rotated: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[Status]]:
        """Batch filters over ``rotated`` rows. When every node is a candidate the plugins read whole
        columns (views, no copies) and only the two small result arrays are put in visiting order."""
        if len(rotated) == table.n and fw.options.fast_paths:
            first_pos, ids, statuses = fw.run_batch_filters(state, pod, table.all_rows())
            return first_pos[rotated], ids[rotated], statuses
        return fw.run_batch_filters(state, pod, table.batch(rotated))

    @staticmethod
    def _per_node_pass(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, rotated: np.ndarray,
                       first_pos: np.ndarray, ids: np.ndarray, statuses: list[Status], to_find: int,
                       nominees: set[int]) -> tuple[np.ndarray, int]:
        """Node by node in visiting order: classic Filter plugins, each only where no earlier plugin
        failed, or every filter with and without the nominated pods on nodes that have some; stop
        once enough nodes passed everything."""
        classic = fw.classic_filters(state)
        infos = table.infos
        passed = np.zeros(len(rotated), dtype=bool)
        found = 0
        for position in range(len(rotated)):
            info = infos[rotated[position]]
            if position in nominees:
                ids[position] = -1
                status = fw.run_filters_with_nominated_pods(state, pod, info)
            else:
                status = fw.run_classic_filters(classic, int(first_pos[position]), state, pod, info)
            if status is not None:
                _record(position, status, ids, statuses)
            elif ids[position] < 0:
                passed[position] = True
                found += 1
                if found >= to_find:
                    return passed, position + 1
        return passed, len(rotated)

    @staticmethod
    def _nominee_pass(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, rotated: np.ndarray,
                      passed: np.ndarray, ids: np.ndarray, statuses: list[Status], to_find: int, nominees: np.ndarray,
                      checks: NomineeChecks | None) -> None:
        """Re-check, with and without their nominated pods, the nodes that have some (``nominees``:
        their positions, ascending), in visiting order until enough nodes pass before the next one
        (upstream would never reach it). With a cycle state no PreFilter extension updates, the
        main pass already is the check without nominees, and one batch over the nominated-pod
        overlay (or a scratch table of all those nodes) is the check with them."""
        if fw.options.fast_paths and not fw.has_active_pre_filter_extensions(state):
            failures, found = _filter_with_nominees(fw, state, pod, table, rotated[nominees], checks)
            _apply_nominee_failures(nominees, failures, found, passed, ids, statuses, to_find)
            return
        feasible_before = np.cumsum(passed) - passed
        lost = 0
        for position in nominees.tolist():
            if feasible_before[position] - lost >= to_find:
                return
            status = fw.run_filters_with_nominated_pods(state, pod, table.infos[rotated[position]])
            lost += int(passed[position]) - (status is None)
            passed[position] = status is None
            if status is None:
                ids[position] = -1
            else:
                _record(position, status, ids, statuses)

    @staticmethod
    def _record_filters(attempt: Attempt, table: NodeTable, rotated: np.ndarray, ids: np.ndarray,
                        statuses: list[Status], positions: np.ndarray, processed: int) -> None:
        """The attempt's Filter side. Every array is the cycle's own (indexing an entry's arrays
        copies them), and statuses are only ever appended."""
        attempt.record_visit(table.names_array(), rotated, ids, statuses, positions, processed)

    # --- scoring ---------------------------------------------------------------------------------
    def _has_scoring(self, fw: Framework) -> bool:
        return fw.has_score_plugins() or any(e.is_prioritizer() for e in self.extenders)

    def prioritize(self, fw: Framework, state: CycleState, pod: PodInfo, batch: NodeBatch,
                   attempt: Attempt | None = None) -> np.ndarray:
        """The Score plugins' weighted totals (all ones when nothing scores at all)."""
        if not fw.has_score_plugins() and not self.extenders:
            return np.ones(len(batch), dtype=np.int64)
        cycle = self._batch
        if cycle is not None and cycle.reuse is not None:
            result = self._reused_scores(cycle, fw, state, pod, batch, attempt is not None)
        else:
            status = fw.run_pre_score(state, pod, batch)
            if status is not None and not status.is_success():
                raise StatusError(status)
            result = fw.run_score(state, pod, batch, keep_parts=attempt is not None)
            if cycle is not None and cycle.fill is not None:
                self._fill_scores(cycle, fw, state, pod, batch, result)
        if attempt is not None:
            attempt.scores = result
        return result.total

    @staticmethod
    def _reused_scores(cycle: BatchCycle, fw: Framework, state: CycleState, pod: PodInfo, batch: NodeBatch,
                       keep_parts: bool) -> ScoreResult:
        """Scores from the entry's raw scores, each plugin run only on the rows it lacks (changed
        since, or not feasible when the entry was filled); normalisation and weights as always."""
        entry = cycle.reuse
        assert entry is not None
        return fw.run_score(state, pod, batch, keep_parts, _ReusedScores(entry, fw, state, pod, batch))

    def _fill_scores(self, cycle: BatchCycle, fw: Framework, state: CycleState, pod: PodInfo, batch: NodeBatch,
                     result: ScoreResult) -> None:
        """Keep the raw scores (but the domain-scoped plugins', scored again by every cycle) and the
        cycle state (as PreScore left it) for the next pod; no entry where domain-scoped plugins
        would run again and no cycle could keep its totals."""
        entry = cycle.fill
        assert entry is not None
        entry.rerun = fw.domain_reruns(pod, batch.table, state)
        if entry.rerun and not self._keeps_totals(cycle, fw, state, pod, batch.table):
            cycle.fill = None
            return
        rows = batch.row_ids()
        for name, raw in result.raw.items():
            if name not in fw.domain_scoped:
                entry.set_raw(name, rows, raw)
        saved = state.clone()
        saved.pods_to_activate = {}
        entry.state = saved
        entry.domain_basis = fw.domain_filter_basis(saved, entry.rerun)

    async def _add_extender_scores(self, pod: PodInfo, table: NodeTable, feasible: np.ndarray, totals: np.ndarray,
                                   attempt: Attempt | None) -> np.ndarray:
        """Add each prioritizing extender's scaled scores to the plugins' totals (``feasible`` order);
        the explanation gets one column per extender."""
        parts = await extender_scores(self.extenders, pod, [table.infos[int(r)] for r in feasible])
        if not parts:
            return totals
        totals = totals.astype(np.int64, copy=True)
        for name, raw, weight in parts:
            contribution = scaled(raw, weight)
            totals += contribution
            if attempt is not None and attempt.scores is not None:
                attempt.scores.plugins.append((name, raw, contribution // max(weight, 1), weight))
        if attempt is not None and attempt.scores is not None:
            attempt.scores.total = totals
        return totals

    def select_host(self, totals: np.ndarray) -> int:
        """Index of a highest total; ties broken uniformly at random."""
        best = totals.max()
        ties = np.flatnonzero(totals == best)
        if len(ties) == 1:
            return int(ties[0])
        return int(ties[self.rng.randrange(len(ties))])


class _ReusedScores:
    """A batched cycle's scores (``ScoreSource``): raw scores from the entry, computed on the rows
    it lacks; over every node, a plugin's normalised scores too while its raw scores stay put."""

    def __init__(self, entry: BatchEntry, fw: Framework, state: CycleState, pod: PodInfo, batch: NodeBatch) -> None:
        self.entry, self.fw, self.state, self.pod, self.batch = entry, fw, state, pod, batch

    def raw(self, pl: BatchScorePlugin) -> np.ndarray:
        entry, batch = self.entry, self.batch
        need = entry.lacking(pl.name, batch.rows)
        if len(need):
            entry.set_raw(pl.name, need, self.fw.raw_scores(pl, self.state, self.pod, batch.table.batch(need)))
        return batch.col(entry.raw[pl.name])

    def normalized(self, pl: BatchScorePlugin, raw: np.ndarray, normalize: Callable[[], np.ndarray]) -> np.ndarray:
        if self.batch.rows is not None:
            return normalize()
        kept = self.entry.normalized.get(pl.name)
        if kept is None:
            kept = self.entry.normalized[pl.name] = normalize()
        return kept


def _normalized_over(fw: Framework, pl: BatchScorePlugin, state: CycleState, pod: PodInfo, table: NodeTable,
                     raw: np.ndarray, ranked: RankedTotals) -> tuple[np.ndarray, tuple[int, int] | None]:
    """A plugin's normalised scores over the feasible rows of ``ranked``, by row (0 elsewhere): what
    the generic cycle normalises over its feasible nodes (in visiting order; in-tree normalisations
    read the set, not its order); and the lowest and highest raw score over those rows where the
    plugin normalises by them (``_sampled`` reuses the scores where a window has the same)."""
    if ranked.count == table.n:
        batch = table.all_rows()
        values = batch.col(raw)
        return fw.normalize_one(pl, state, pod, batch, values), _extremes(pl, values)
    rows = np.flatnonzero(ranked.effective())
    batch = table.batch(rows)
    values = batch.col(raw)
    out = np.zeros(table.n, dtype=np.int64)
    out[rows] = fw.normalize_one(pl, state, pod, batch, values)
    return out, _extremes(pl, values)


def _extremes(pl: BatchScorePlugin, values: np.ndarray) -> tuple[int, int] | None:
    """The lowest and highest of ``values`` where ``pl`` normalises by them (None otherwise, or
    for no values)."""
    if not pl.normalizes_by_extremes or not len(values):
        return None
    return int(values.min()), int(values.max())


def _domain_scores(fw: Framework, pl: BatchScorePlugin, state: CycleState, pod: PodInfo, feasible: NodeBatch,
                   normalises: bool) -> np.ndarray:
    """A domain-scoped plugin's scores over the ``feasible`` rows, normalised over them where it
    normalises, by row (0 elsewhere)."""
    raw = fw.raw_scores(pl, state, pod, feasible)
    scores = fw.normalize_one(pl, state, pod, feasible, raw) if normalises else raw
    if feasible.rows is None:
        return scores
    out = np.zeros(feasible.table.n, dtype=np.int64)
    out[feasible.row_ids()] = scores
    return out


def _domain_slots(fw: Framework, state: CycleState, entry: BatchEntry, table: NodeTable) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's slot and whether each slot passes, where the entry's domain-scoped verdicts are
    kept per domain: one plugin decides per domain (``Framework.domain_filter_slots``) and its
    domains hold more than ``MAX_MOVED_TOTALS`` nodes on average (zones). Domains of a few nodes
    (hostnames) move a few rows per placement, which per-row verdicts take at the cost of those
    rows, where a domain moving in slot mode costs every total."""
    slots = fw.domain_filter_slots(state, entry.rerun, table)
    if slots is None or table.n <= MAX_MOVED_TOTALS * (len(slots[1]) - 1):
        return None
    codes = table.label_codes(slots[0])
    return None if codes is None else (codes, slots[1])


def _rotated(order: np.ndarray, start: int) -> np.ndarray:
    """The nodes in visiting order from position ``start`` (``order`` itself when it is 0)."""
    return np.concatenate([order[start:], order[:start]]) if start else order


def _fits_anything(name: str) -> bool:
    """A stand-in filter for upstream's hints where no signature asks for one."""
    return True


def _nominations(fw: Framework) -> bool:
    """Whether some pod is nominated to a node (the nominee pass then depends on more than rows)."""
    nominator = fw.ctx.nominator
    if nominator is None:
        return False
    names = getattr(nominator, "nominated_node_names", None)
    return names is None or bool(names())


def _record(position: int, status: Status, ids: np.ndarray, statuses: list[Status]) -> None:
    statuses.append(status)
    ids[position] = len(statuses) - 1


def _nominee_checks(fw: Framework, pod: PodInfo, table: NodeTable) -> NomineeChecks | None:
    """The nominated-pod overlay's answer for ``pod``; None when the nominator keeps no journal."""
    overlay = nominated_overlay(table, fw.ctx.nominator)
    return None if overlay is None else overlay.checks_for(pod)


def _positions_with_nominees(fw: Framework, pod: PodInfo, table: NodeTable, rotated: np.ndarray,
                             checks: NomineeChecks | None) -> np.ndarray:
    """Positions in ``rotated`` (ascending) of the nodes with other pods of higher or equal
    priority nominated to them: the pod must fit there with those pods too."""
    if checks is not None:
        rows = np.concatenate([checks.rows, np.array([table.row_of[name] for name in checks.mixed], dtype=np.int64)])
    else:
        nominated_node_names = getattr(fw.ctx.nominator, "nominated_node_names", None)
        names = nominated_node_names() if nominated_node_names is not None else None
        rows = np.array([table.row_of[name] for name in names or () if name in table.row_of and any(
            p.priority >= pod.priority and p.uid != pod.uid for p in fw.nominated_pods_for_node(name))], dtype=np.int64)
    if not len(rows):
        return rows
    position_of_row = np.full(table.n, -1, dtype=np.int64)
    position_of_row[rotated] = np.arange(len(rotated))
    positions = position_of_row[rows]
    return np.sort(positions[positions >= 0])


def _filter_with_nominees(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray,
                          checks: NomineeChecks | None) -> tuple[np.ndarray, list[Status]]:
    """Per row of ``rows`` (nodes with nominees), the batch filters' failure with the nominees
    added (an index into the statuses returned; -1 where the pod fits beside them): the overlay's
    rows in one batch, the nodes it does not stand for copied (``Framework.filter_with_nominated_pods``)."""
    failures = np.full(len(rows), -1, dtype=np.int64)
    found: list[Status] = []
    copied = np.arange(len(rows))
    if checks is not None:
        view_of = np.full(table.n, -1, dtype=np.int64)
        view_of[checks.rows] = checks.view_rows
        view_rows = view_of[rows]
        in_view = np.flatnonzero(view_rows >= 0)
        if len(in_view):
            _, ids, found = fw.run_batch_filters(state, pod, checks.view.batch(view_rows[in_view]))
            failures[in_view] = ids
        copied = np.flatnonzero(view_rows < 0)
    if len(copied):
        statuses = fw.filter_with_nominated_pods(state, pod, [table.infos[r] for r in rows[copied].tolist()])
        for position, status in zip(copied.tolist(), statuses, strict=True):
            if status is not None:
                found.append(status)
                failures[position] = len(found) - 1
    return failures, found


def _apply_nominee_failures(nominees: np.ndarray, failures: np.ndarray, found: list[Status], passed: np.ndarray,
                            ids: np.ndarray, statuses: list[Status], to_find: int) -> None:
    """Record the failures beside nominees, in visiting order, up to the first position with
    enough feasible nodes before it (counting the nodes lost to nominees before it)."""
    failed = failures >= 0
    lost = passed[nominees] & failed
    lost_before = np.cumsum(lost) - lost
    enough = np.flatnonzero(np.cumsum(passed)[nominees] - passed[nominees] - lost_before >= to_find)
    stop = int(enough[0]) if len(enough) else len(nominees)
    chosen = np.flatnonzero(failed[:stop])
    if not len(chosen):
        return
    positions = nominees[chosen]
    passed[positions] = False
    ids[positions] = failures[chosen] + len(statuses)
    statuses.extend(found)
