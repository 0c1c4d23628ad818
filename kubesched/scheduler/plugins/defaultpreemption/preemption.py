"""Generic preemption: find the node where evicting lower-priority pods makes room for a pod, pick
the best one and evict (upstream ``pkg/scheduler/framework/preemption``: the ``Evaluator`` and its
``Executor``).

The policy questions (which pods may be victims, how many candidates to try, who is eligible)
belong to the plugin, through ``PreemptionInterface``; this module holds the machinery every
preemption plugin shares: candidate search with the random start offset and the early stop, the
node-picking criteria, the FitError text when nothing helps, and the API calls that evict
victims (asynchronously, as with SchedulerAsyncPreemption).

Victim selection is batched: the plugin's ``select_victims_on_nodes`` receives a chunk of nodes
at once (upstream calls ``SelectVictimsOnNode`` per node from parallel workers). Chunks are taken
in visiting order and results are read in that order, so the candidates found are exactly those
of upstream's dry run with parallelism 1.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.diagnosis import Diagnosis, FitError
from kubesched.scheduler.framework.extender import Extender, ExtenderError
from kubesched.scheduler.framework.interface import NominatingInfo, NominatingMode, PostFilterResult
from kubesched.scheduler.framework.preemption_report import CandidateSummary, PreemptionRecord
from kubesched.scheduler.framework.status import Code, Status, failed, is_success

if TYPE_CHECKING:
    from kubesched.scheduler.framework.diagnosis import NodeToStatus
    from kubesched.scheduler.framework.runtime import Framework

log = logging.getLogger(__name__)

MAX_INT32 = 2**31 - 1
NOT_HELPFUL = "Preemption is not helpful for scheduling"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
#: Nodes dry-run together when the first chunk did not settle the search.
MIN_CHUNK = 16
#: What ``select_victims_on_nodes`` may answer, when not asked to be thorough, for a node it knows
#: cannot be a candidate without working out why; the evaluator asks again (thoroughly) only if the
#: reason is needed, that is when no node at all is a candidate.
DEFERRED = Status(Code.Unschedulable, "deferred")


class Victims(NamedTuple):
    """Pods to evict on one node, most important first, and how many of them violate a PDB
    (upstream ``extenderv1.Victims``)."""

    pods: list[PodInfo]
    num_pdb_violations: int = 0


@dataclass
class Candidate:
    """A node where the preemptor fits once ``victims`` are gone."""

    name: str
    victims: Victims


class _Found(NamedTuple):
    """The dry run's outcome: the preemptor as last seen and the nodes where preemption helps."""

    current: PodInfo
    candidates: list[Candidate]


class VictimSelection(NamedTuple):
    """One node's outcome of ``select_victims_on_nodes``: victims on success, else the status why not."""

    victims: list[PodInfo]
    num_pdb_violations: int
    status: Status | None


ScoreFunc = Callable[[str], float]


class PreemptionInterface(abc.ABC):
    """What a preemption plugin decides (upstream ``preemption.Interface``)."""

    @abc.abstractmethod
    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """A random start offset and how many candidates the dry run should find."""

    def candidates_to_victims_map(self, candidates: list[Candidate]) -> dict[str, Victims]:
        return {c.name: c.victims for c in candidates}

    @abc.abstractmethod
    def pod_eligible_to_preempt_others(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        """Whether ``pod`` may preempt at all, and the reason when not."""

    @abc.abstractmethod
    def select_victims_on_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                                pdbs: list[ParsedPDB], thorough: bool = False) -> list[VictimSelection]:
        """``SelectVictimsOnNode`` for each node of ``nodes`` (in order). ``state`` and the nodes
        are the scheduling cycle's: implementations must work on copies. Unless ``thorough``, a
        node that certainly is no candidate may get the ``DEFERRED`` status instead of its own."""

    def ordered_score_funcs(self, victims: Mapping[str, Victims]) -> list[ScoreFunc] | None:
        """Node-picking criteria overriding the default ones; None keeps upstream's."""
        return None


# --- PodDisruptionBudgets ---------------------------------------------------------------------
@dataclass(frozen=True)
class ParsedPDB:
    """A policy/v1 PodDisruptionBudget reduced to what preemption reads."""

    namespace: str
    name: str
    selector: Any  # LabelSelector, or None when invalid (matches nothing)
    disruptions_allowed: int
    disrupted_pods: frozenset[str]


class PDBCache:
    """Parsed PodDisruptionBudgets of one cluster, keyed by namespace, name and resourceVersion.

    It belongs to the scheduler reading that cluster (each preemption Evaluator owns one): a
    resourceVersion identifies an object's state only within the cluster that issued it, and a new
    simulation restarts the numbering, so a process-wide cache would hand one simulation another's
    budget status."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str, str], ParsedPDB] = {}

    def parse(self, objects: Mapping[str, dict]) -> list[ParsedPDB]:
        """The informer's PDBs, each parsed once per resourceVersion."""
        out = []
        for obj in objects.values():
            meta = obj.get("metadata") or {}
            version = meta.get("resourceVersion")
            key = (meta.get("namespace") or "default", meta.get("name", ""), str(version))
            parsed = self._parsed.get(key) if version else None
            if parsed is None:
                parsed = _parse_pdb(key[0], key[1], obj)
                if version:
                    if len(self._parsed) >= self.LIMIT:
                        self._parsed.clear()
                    self._parsed[key] = parsed
            out.append(parsed)
        return out


def parse_pdbs(objects: Mapping[str, dict]) -> list[ParsedPDB]:
    """The PDBs of ``objects`` parsed afresh (no cache: for callers outside a scheduler)."""
    return [_parse_pdb((obj.get("metadata") or {}).get("namespace") or "default",
                       (obj.get("metadata") or {}).get("name", ""), obj) for obj in objects.values()]


def _parse_pdb(namespace: str, name: str, obj: dict) -> ParsedPDB:
    from kubesched.api.selectors import InvalidSelector, parse_label_selector

    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    try:
        selector = parse_label_selector(spec.get("selector"))
    except InvalidSelector:
        selector = None
    return ParsedPDB(namespace, name, selector, int(status.get("disruptionsAllowed") or 0),
                     frozenset(status.get("disruptedPods") or {}))


def filter_pods_with_pdb_violation(pods: list[PodInfo], pdbs: list[ParsedPDB]) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split ``pods`` (order kept) into those whose eviction would exceed a PDB's allowed
    disruptions and the others (upstream ``filterPodsWithPDBViolation``). A pod already listed
    in ``disruptedPods`` was counted by the API server and does not consume budget again."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if pdb.namespace != pod.namespace or pdb.selector is None:
                    continue
                # A PDB with an empty (or nil) selector matches nothing.
                if pdb.selector.empty or not pdb.selector.matches(pod.labels):
                    continue
                if pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating


# --- ordering helpers (pkg/scheduler/util) ------------------------------------------------------
def pod_start_time(pod: PodInfo, now: float) -> float:
    """``GetPodStartTime``: status.startTime, or now for pods that have not started."""
    start = pod.start_time
    return now if start is None else start


def importance_key(now: float) -> Callable[[PodInfo], tuple[int, float]]:
    """A sort key ordering pods as upstream's ``MoreImportantPod`` does, most important first:
    higher priority, then the one that started earlier."""
    return lambda p: (-p.priority, pod_start_time(p, now))


def earliest_pod_start_time(victims: Victims, now: float) -> float | None:
    """``GetEarliestPodStartTime``: the earliest start among the highest-priority victims."""
    if not victims.pods:
        return None
    earliest = pod_start_time(victims.pods[0], now)
    highest = victims.pods[0].priority
    for pod in victims.pods:
        if pod.priority == highest:
            earliest = min(earliest, pod_start_time(pod, now))
        elif pod.priority > highest:
            highest = pod.priority
            earliest = pod_start_time(pod, now)
    return earliest


#: Names of upstream's default criteria, in the order pickOneNodeForPreemption applies them.
CRITERIA = ("fewest PDB violations", "lowest highest-priority victim", "smallest sum of victim priorities",
            "fewest victims", "latest start time of the highest-priority victims")
FIRST_CANDIDATE = "first candidate in visiting order"


def default_score_funcs(victims: Mapping[str, Victims], now: float) -> list[ScoreFunc]:
    """Upstream's criteria as score functions (higher is better)."""

    def min_pdb_violations(node: str) -> float:
        return -victims[node].num_pdb_violations

    def min_highest_priority(node: str) -> float:
        return -victims[node].pods[0].priority

    def min_sum_priorities(node: str) -> float:
        # MaxInt32+1 is added to each priority so that negative priorities still add up.
        return -sum(p.priority + MAX_INT32 + 1 for p in victims[node].pods)

    def min_num_pods(node: str) -> float:
        return -len(victims[node].pods)

    def latest_start_time(node: str) -> float:
        earliest = earliest_pod_start_time(victims[node], now)
        return float("-inf") if earliest is None else earliest

    return [min_pdb_violations, min_highest_priority, min_sum_priorities, min_num_pods, latest_start_time]


def pick_one_node_for_preemption(victims: Mapping[str, Victims], score_funcs: list[ScoreFunc] | None,
                                 now: float) -> tuple[str, int]:
    """``pickOneNodeForPreemption``: apply the criteria in order, each only among the nodes tied
    on the previous ones. Returns the node and the index of the criterion that decided (the
    number of criteria when the first remaining node was taken)."""
    if not victims:
        return "", 0
    if not score_funcs and len(victims) > 1 and all(found.pods for found in victims.values()):
        return _pick_by_default_criteria(victims, now)
    remaining = list(victims)
    funcs = score_funcs or default_score_funcs(victims, now)
    for index, func in enumerate(funcs):
        scores = [func(node) for node in remaining]
        best = max(scores)
        remaining = [node for node, score in zip(remaining, scores, strict=True) if score == best]
        if len(remaining) == 1:
            return remaining[0], index
    return remaining[0], len(funcs)


def _pick_by_default_criteria(victims: Mapping[str, Victims], now: float) -> tuple[str, int]:
    """``pick_one_node_for_preemption`` with upstream's criteria in one pass: applying them in
    turn, each among the nodes tied on the previous ones, picks the first node whose scores are
    greatest in lexicographic order; the criterion that decided is the one just past the longest
    run of leading scores another node shares with it."""
    names = list(victims)
    scores = [_default_scores(found, now) for found in victims.values()]
    best_at = 0
    for at in range(1, len(scores)):
        if scores[at] > scores[best_at]:
            best_at = at
    best = scores[best_at]
    count = len(best)
    shared = 0
    for at, score in enumerate(scores):
        if at == best_at:
            continue
        same = 0
        while same < count and score[same] == best[same]:
            same += 1
        if same > shared:
            shared = same
            if shared == count:
                break
    return names[best_at], shared


def _default_scores(found: Victims, now: float) -> tuple[float, ...]:
    """The node's scores under ``default_score_funcs``' criteria, in their order, in one pass over
    the victims (the last is ``earliest_pod_start_time``)."""
    pods = found.pods
    total = 0
    top = pods[0].priority
    earliest: float | None = None
    for pod in pods:
        priority = pod.priority
        total += priority
        start = pod.start_time
        if start is None:
            start = now
        if priority > top or earliest is None:
            top, earliest = priority, start
        elif priority == top and start < earliest:
            earliest = start
    total += len(pods) * (MAX_INT32 + 1)  # MaxInt32+1 per victim, so that negative priorities add up
    assert earliest is not None  # ``pods`` is not empty
    return (-found.num_pdb_violations, -pods[0].priority, -total, -len(pods), earliest)


def summarize(candidate: Candidate, now: float) -> CandidateSummary:
    pods = candidate.victims.pods
    return CandidateSummary(candidate.name, [p.key for p in pods], candidate.victims.num_pdb_violations,
                            pods[0].priority if pods else 0, sum(p.priority for p in pods),
                            earliest_pod_start_time(candidate.victims, now))


# --- the evaluator ----------------------------------------------------------------------------
class Evaluator:
    """Runs preemption for one plugin (upstream ``preemption.Evaluator``)."""

    def __init__(self, plugin_name: str, handle: Framework, interface: PreemptionInterface, enable_async: bool) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.interface = interface
        self.enable_async = enable_async
        self.executor = Executor(handle)
        observer = handle.ctx.preemption_observer if handle is not None else None
        #: Called with a PreemptionRecord after every attempt (the handle's PreemptionObserver).
        self.on_preemption: Callable[[PreemptionRecord], None] | None = observer.on_preemption if observer else None
        #: Whether records list every candidate with its criteria (``--explain``).
        self.record_candidates = observer.record_candidates if observer else False
        #: This scheduler's parsed PodDisruptionBudgets: resourceVersions only order one cluster's writes.
        self.pdbs = PDBCache()

    # --- Preempt ---------------------------------------------------------------------------
    def preempt(self, state: CycleState, pod: PodInfo, m: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        """Upstream ``Evaluator.Preempt``: a nominated node (Success), the reason preemption does
        not help (Unschedulable, clearing the nomination), or None plus a status to keep it.
        Without extenders to consult (see ``preempt_with_extenders``)."""
        record = self._record(pod)
        found = self._find(state, pod, m, record)
        return self._report(record, self._conclude(found, record) if isinstance(found, _Found) else found)

    def extenders_to_consult(self, pod: PodInfo) -> list[Extender]:
        """The extenders that take part in this pod's preemption."""
        extenders = self.handle.extenders if self.handle is not None else ()
        return [e for e in extenders if e.supports_preemption() and e.is_interested(pod)]

    async def preempt_with_extenders(self, state: CycleState, pod: PodInfo,
                                     m: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        """``preempt``, with the candidates narrowed by the preempt extenders before one is chosen."""
        record = self._record(pod)
        found = self._find(state, pod, m, record)
        if not isinstance(found, _Found):
            return self._report(record, found)
        narrowed = await self.call_extenders(pod, found.candidates)
        if isinstance(narrowed, Status):
            return self._report(record, (None, narrowed))
        return self._report(record, self._conclude(_Found(found.current, narrowed), record))

    async def call_extenders(self, pod: PodInfo, candidates: list[Candidate]) -> list[Candidate] | Status:
        """``callExtenders``: each preempt extender in turn keeps the candidates it accepts, with
        the victims it picks there. An ignorable extender's failure, or a node it left without
        victims, is skipped; a non-ignorable one's fails preemption."""
        victims: dict[str, tuple[list[PodInfo], int]] = dict(self.interface.candidates_to_victims_map(candidates))
        if not victims:
            return candidates
        table = self.handle.snapshot
        for extender in self.extenders_to_consult(pod):
            try:
                answer = await extender.process_preemption(pod, victims, table)
            except ExtenderError as e:
                if extender.ignorable:
                    log.info("Skipped extender %s as it returned error and has ignorable flag set: %s", extender.name, e)
                    continue
                return Status.from_error(e)
            for node, (pods, _) in list(answer.items()):
                if pods:
                    continue
                if not extender.ignorable:
                    return Status.from_error(ExtenderError(f'expected at least one victim pod on node "{node}"'))
                log.info("Ignored node %s for which extender %s didn't report victims", node, extender.name)
                del answer[node]
            victims = answer
            if not victims:
                break
        return [Candidate(node, Victims(pods, violations)) for node, (pods, violations) in victims.items()]

    def _record(self, pod: PodInfo) -> PreemptionRecord | None:
        return PreemptionRecord(pod.key, pod.uid, time=self.handle.clock.wall()) if self.on_preemption else None

    def _report(self, record: PreemptionRecord | None,
                outcome: tuple[PostFilterResult | None, Status | None]) -> tuple[PostFilterResult | None, Status | None]:
        if record is not None and self.on_preemption is not None:
            status = outcome[1]
            record.message = status.message() if status is not None else ""
            self.on_preemption(record)
        return outcome

    def _find(self, state: CycleState, pod: PodInfo, m: NodeToStatus,
              record: PreemptionRecord | None) -> _Found | tuple[PostFilterResult | None, Status | None]:
        """Steps 1-2 of Preempt: eligibility, then the candidates of the dry run; an outcome
        instead when preemption ends here."""
        latest = self.handle.objects("Pod").get(pod.key)
        if latest is None:
            return None, Status.from_error(LookupError(f'pod "{pod.name}" not found'))
        current = pod if latest is pod.pod else PodInfo(latest)
        nominated = current.nominated_node_name
        nominated_status = m.get(nominated) if nominated else m.absent
        eligible, reason = self.interface.pod_eligible_to_preempt_others(current, nominated_status)
        if not eligible:
            return None, Status(Code.Unschedulable, reason)
        table = self.handle.snapshot
        candidates, statuses, errors = self.find_candidates(state, pod, m)
        if errors and not candidates:
            return None, Status.from_error(RuntimeError(aggregate(errors)))
        if record is not None and self.record_candidates:
            record.rejected = statuses
        if not candidates:
            return PostFilterResult(NominatingInfo("", NominatingMode.Override)), Status(
                Code.Unschedulable, str(self._fit_error(pod, table.n, statuses)))
        return _Found(current, candidates)

    def _conclude(self, found: _Found,
                  record: PreemptionRecord | None) -> tuple[PostFilterResult | None, Status | None]:
        """Steps 4-5 of Preempt: choose the best candidate and start evicting its victims."""
        if not found.candidates:
            return None, Status(Code.Unschedulable, "no candidate node for preemption")
        now = self.handle.clock.wall()
        best, decided_by = self.select_candidate(found.candidates, now)
        if record is not None:
            self._fill_record(record, found.candidates, best, decided_by, now)
        if self.enable_async:
            self.executor.prepare_candidate_async(best, found.current.pod, self.plugin_name)
        else:
            self.executor.prepare_candidate(best, found.current.pod, self.plugin_name)
        return PostFilterResult(NominatingInfo(best.name, NominatingMode.Override)), None

    def _fill_record(self, record: PreemptionRecord, candidates: list[Candidate], best: Candidate,
                     decided_by: str, now: float) -> None:
        record.node = best.name
        record.victims = [p.key for p in best.victims.pods]
        record.decided_by = decided_by
        if self.record_candidates:
            record.candidates = [summarize(c, now) for c in candidates]

    @staticmethod
    def _fit_error(pod: PodInfo, num_all_nodes: int, statuses: list[tuple[str, Status]]) -> FitError:
        """The FitError preemption reports when no node is a candidate: dry-run failures, and
        "not helpful" for every node that was not tried."""
        diagnosis = Diagnosis([name for name, _ in statuses])
        diagnosis.node_to_status.absent = Status(Code.UnschedulableAndUnresolvable, NOT_HELPFUL)
        distinct: dict[int, int] = {}
        ordered: list[Status] = []
        ids = []
        for _, status in statuses:
            sid = distinct.setdefault(id(status), len(ordered))
            if sid == len(ordered):
                ordered.append(status)
            ids.append(sid)
        if statuses:
            diagnosis.node_to_status.set_rows(np.arange(len(statuses)), np.array(ids, dtype=np.int32), ordered)
        return FitError(pod.key, num_all_nodes, diagnosis)

    # --- candidates -------------------------------------------------------------------------
    def find_candidates(self, state: CycleState, pod: PodInfo,
                        m: NodeToStatus) -> tuple[list[Candidate], list[tuple[str, Status]], list[Status]]:
        """Candidates among the nodes whose filter failure was Unschedulable (not Unresolvable),
        with the dry-run status of the nodes that are not candidates and the errors met."""
        table = self.handle.snapshot
        if table.n == 0:
            return [], [], [Status.from_error(RuntimeError("no nodes available"))]
        rows = potential_rows(table, m)
        if len(rows) == 0:
            return [], [], []
        pdbs = self.pdbs.parse(self.handle.objects("PodDisruptionBudget"))
        offset, num_candidates = self.interface.get_offset_and_num_candidates(len(rows))
        infos = table.infos
        return self.dry_run_preemption(state, pod, [infos[r] for r in rows.tolist()], pdbs, offset, num_candidates)

    def dry_run_preemption(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo], pdbs: list[ParsedPDB],
                           offset: int, num_candidates: int) -> tuple[list[Candidate], list[tuple[str, Status]], list[Status]]:
        """Upstream ``DryRunPreemption`` as with parallelism 1: visit nodes from ``offset``, stop
        once there is a non-PDB-violating candidate and ``num_candidates`` in all. Each list of
        candidates keeps at most ``num_candidates``; non-violating ones come first. The other
        nodes' statuses are only gathered when something reads them (no candidate, or
        explanations on): ``Preempt`` does not otherwise."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        visited_chunks: list[tuple[list[NodeInfo], list[VictimSelection]]] = []
        thorough = self.record_candidates
        n = len(nodes)
        visited = 0
        rounds = 0
        while visited < n:
            found = len(non_violating) + len(violating)
            size = min(n - visited, max(num_candidates - found, MIN_CHUNK) << min(rounds, 4))
            rounds += 1
            chunk = [nodes[(offset + visited + j) % n] for j in range(size)]
            results = self.interface.select_victims_on_nodes(state, pod, chunk, pdbs, thorough)
            visited += size
            visited_chunks.append((chunk, results))
            for i in [i for i, r in enumerate(results) if r.victims and is_success(r.status)]:
                victims, num_violations, _ = results[i]
                candidate = Candidate(chunk[i].name, Victims(victims, num_violations))
                target = non_violating if num_violations == 0 else violating
                if len(target) < num_candidates:
                    target.append(candidate)
                if non_violating and len(non_violating) + len(violating) >= num_candidates:
                    visited_chunks[-1] = (chunk[: i + 1], results[: i + 1])
                    return non_violating + violating, *self._statuses(state, pod, pdbs, visited_chunks, False)
        candidates = non_violating + violating
        return candidates, *self._statuses(state, pod, pdbs, visited_chunks, not candidates)

    def _statuses(self, state: CycleState, pod: PodInfo, pdbs: list[ParsedPDB],
                  visited_chunks: list[tuple[list[NodeInfo], list[VictimSelection]]],
                  needed: bool) -> tuple[list[tuple[str, Status]], list[Status]]:
        """The non-candidates' statuses and the errors among them, in visiting order, when
        ``needed`` or explanations are on (empty otherwise); deferred nodes are dry-run thoroughly
        first when the statuses are ``needed``."""
        if not needed and not self.record_candidates:
            return [], []
        outcomes: list[tuple[NodeInfo, Status]] = []
        for chunk, results in visited_chunks:
            for info, (victims, _, status) in zip(chunk, results, strict=True):
                if is_success(status) and victims:
                    continue
                if not failed(status):
                    status = Status.from_error(RuntimeError(f'expected at least one victim pod on node "{info.name}"'))
                assert status is not None
                outcomes.append((info, status))
        deferred = [i for i, (_, status) in enumerate(outcomes) if status is DEFERRED]
        if needed and deferred:
            results = self.interface.select_victims_on_nodes(state, pod, [outcomes[i][0] for i in deferred], pdbs, True)
            for i, (victims, _, status) in zip(deferred, results, strict=True):
                info = outcomes[i][0]
                if not failed(status):
                    status = Status.from_error(RuntimeError(
                        f'expected at least one victim pod on node "{info.name}"' if not victims else
                        f'node "{info.name}" was deferred but is a preemption candidate'))
                outcomes[i] = (info, status)
        statuses = [(info.name, status) for info, status in outcomes if status is not DEFERRED]
        return statuses, [status for _, status in statuses if status.code == Code.Error]

    def select_candidate(self, candidates: list[Candidate], now: float) -> tuple[Candidate, str]:
        """``SelectCandidate``: the best candidate and the criterion that made it win."""
        if len(candidates) == 1:
            return candidates[0], "only candidate"
        victims = self.interface.candidates_to_victims_map(candidates)
        funcs = self.interface.ordered_score_funcs(victims)
        node, index = pick_one_node_for_preemption(victims, funcs, now)
        names = CRITERIA if not funcs else tuple(f"custom criterion {i + 1}" for i in range(len(funcs)))
        decided_by = names[index] if index < len(names) else FIRST_CANDIDATE
        chosen = victims.get(node)
        if chosen is None:
            log.error("Unexpected case no candidate was selected")
            return candidates[0], FIRST_CANDIDATE
        return Candidate(node, chosen), decided_by


def potential_rows(table: Any, m: NodeToStatus) -> np.ndarray:
    """Rows of nodes whose status is Unschedulable, in the scheduler's visiting order (upstream
    ``NodesForStatusCode(Unschedulable)``; absent nodes count when the absent status is)."""
    n = table.n
    codes = m.codes()
    order = table.order()
    if len(m.names) == n and m.names == table.names[:n]:
        return order[codes[order] == int(Code.Unschedulable)]
    wanted = {m.names[i] for i in np.flatnonzero(codes == int(Code.Unschedulable))}
    if m.absent.code == Code.Unschedulable:
        known = set(m.names)
        wanted |= {name for name in table.names[:n] if name not in known}
    return np.array([r for r in order if table.names[r] in wanted], dtype=np.int64)


def aggregate(errors: list[Status]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message, or distinct ones in brackets."""
    messages: list[str] = []
    for status in errors:
        message = str(status.as_error() or status.message())
        if message not in messages:
            messages.append(message)
    if len(errors) == 1 or len(messages) == 1:
        return messages[0]
    return "[" + ", ".join(messages) + "]"


# --- the executor -----------------------------------------------------------------------------
def disruption_condition(preemptor: Mapping, victim: Mapping) -> dict:
    """The DisruptionTarget condition a victim gets before its deletion."""
    scheduler_name = (preemptor.get("spec") or {}).get("schedulerName") or "default-scheduler"
    condition = {"type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
                 "message": f"{scheduler_name}: preempting to accommodate a higher priority pod"}
    generation = (victim.get("metadata") or {}).get("generation")
    if generation:
        condition["observedGeneration"] = generation
    return condition


def condition_changes(status: Mapping, condition: Mapping) -> bool:
    """``UpdatePodCondition``'s answer: whether patching ``condition`` changes the status."""
    for existing in status.get("conditions") or []:
        if existing.get("type") == condition["type"]:
            return any(existing.get(k) != v for k, v in condition.items())
    return True


def _alive(pod: dict | None) -> bool:
    return pod is not None and not pod["metadata"].get("deletionTimestamp")


class Executor:
    """Evicts the victims of a chosen candidate (upstream ``preemption.Executor``).

    With SchedulerAsyncPreemption the API calls run after the cycle; meanwhile the preemptor is
    kept out of activeQ by the plugin's PreEnqueue through ``is_pod_running_preemption``.
    """

    def __init__(self, handle: Framework) -> None:
        self.handle = handle
        #: Preemptors whose API calls are still running, by uid.
        self.preempting: set[str] = set()
        #: Preemptor uid -> (namespace, name) of the last victim, once only its deletion is left.
        self.last_victims: dict[str, tuple[str, str]] = {}
        #: Preemptor uid -> (namespace, name) of every victim, from the start of its preemption.
        self.victims: dict[str, list[tuple[str, str]]] = {}

    def is_pod_running_preemption(self, uid: str) -> bool:
        """``IsPodRunningPreemption``: until the last victim is being deleted. Beyond upstream, a
        preemption whose victims are all gone already (the informer delivered their deletion before
        the background calls even started) no longer holds the preemptor back: otherwise no later
        event would lift the gate and the pod would wait for the 5-minute flush."""
        if uid not in self.preempting:
            return False
        last = self.last_victims.get(uid)
        watched = [last] if last is not None else self.victims.get(uid, [])
        pods = self.handle.objects("Pod")
        return any(_alive(pods.get(f"{ns}/{name}")) for ns, name in watched)

    async def preempt_pod(self, node: str, preemptor: dict, victim: PodInfo, plugin: str) -> None:
        """Reject a waiting victim, or mark it DisruptionTarget and delete it; then the Preempted event."""
        from kubesched.api.apierrors import NotFound
        from kubesched.api.kinds import POD

        waiting = self.handle.get_waiting_pod(victim.uid)
        if waiting is not None:
            waiting.reject(plugin, "preempted")
        else:
            condition = disruption_condition(preemptor, victim.pod)
            client = self.handle.client
            try:
                if condition_changes(victim.status, condition):
                    await client.patch_pod_status(victim.pod, [condition], None)
                await client.delete(POD, victim.namespace, victim.name)
            except NotFound:
                log.debug("Victim Pod %s is already deleted", victim.key)
                return
        recorder = self.handle.event_recorder
        if recorder is not None:
            uid = (preemptor.get("metadata") or {}).get("uid", "")
            recorder.eventf(victim.pod, preemptor, "Normal", "Preempted", "Preempting", f"Preempted by pod {uid} on node {node}")

    def prepare_candidate_async(self, candidate: Candidate, preemptor: dict, plugin: str) -> None:
        """``prepareCandidateAsync``: evict in the background; the preemptor waits in the queue."""
        to_delete = [v for v in candidate.victims.pods if not v.deletion_timestamp]
        if not to_delete:
            return
        self._observe_victims(candidate)
        uid = (preemptor.get("metadata") or {}).get("uid", "")
        self.preempting.add(uid)
        self.victims[uid] = [(v.namespace, v.name) for v in to_delete]
        self.handle.run_in_background(self._evict(candidate, preemptor, plugin, to_delete, uid), "preemption")

    def prepare_candidate(self, candidate: Candidate, preemptor: dict, plugin: str) -> None:
        """Without SchedulerAsyncPreemption upstream evicts within the cycle; PostFilter cannot
        await here, so the calls are started at once and the preemptor is not held back."""
        self._observe_victims(candidate)
        to_delete = [v for v in candidate.victims.pods if not v.deletion_timestamp]
        self.handle.run_in_background(self._evict(candidate, preemptor, plugin, to_delete, None), "preemption")

    def _observe_victims(self, candidate: Candidate) -> None:
        metrics = self.handle.ctx.metrics
        if metrics is not None:
            metrics.preemption_victims.observe(len(candidate.victims.pods))

    async def _evict(self, candidate: Candidate, preemptor: dict, plugin: str, victims: list[PodInfo],
                     uid: str | None) -> None:
        """Clear lower-priority nominations on the node, evict all victims but the last, then the
        last one (so PreEnqueue can tell a finished preemption by the last victim's state)."""
        failed = False
        try:
            try:
                await self._clear_lower_priority_nominations(preemptor, candidate.name)
            except Exception as e:
                log.warning("Cannot clear 'NominatedNodeName' field from lower priority pods on node %s: %s", candidate.name, e)
                failed = True
            try:
                for victim in victims[:-1]:
                    await self.preempt_pod(candidate.name, preemptor, victim, plugin)
            except Exception as e:
                log.warning("Error occurred during async preemption: %s", e)
                failed = True
            else:
                if victims:
                    last = victims[-1]
                    if uid is not None:
                        self.last_victims[uid] = (last.namespace, last.name)
                    try:
                        await self.preempt_pod(candidate.name, preemptor, last, plugin)
                    except Exception as e:
                        log.warning("Error occurred during async preemption of the last victim: %s", e)
                        failed = True
        finally:
            if uid is not None:
                self.preempting.discard(uid)
                self.last_victims.pop(uid, None)
                self.victims.pop(uid, None)
            if failed:
                # The preemptor could otherwise wait in unschedulablePods for an event that never comes.
                info = PodInfo(preemptor)
                self.handle.activate({info.key: info})

    async def _clear_lower_priority_nominations(self, preemptor: dict, node: str) -> None:
        """Lower-priority pods nominated to the node may no longer fit: clear their nomination
        so they look for another node now rather than after the victims are gone."""
        priority = (preemptor.get("spec") or {}).get("priority") or 0
        errors = []
        for nominee in self.handle.nominated_pods_for_node(node):
            if nominee.priority >= priority or not nominee.nominated_node_name:
                continue
            try:
                await self.handle.client.patch_pod_status(nominee.pod, [], "")
            except Exception as e:
                errors.append(str(e))
        if errors:
            raise RuntimeError(", ".join(errors))
