"""InterPodAffinity: required pod affinity / anti-affinity as a filter (both the incoming pod's terms
and, by symmetry, existing pods' required anti-affinity), preferred terms as a score (upstream
``interpodaffinity``: filtering.go, scoring.go, plugin.go).

Nothing here walks every pod. The table's ``PodIndex`` extension keeps per-row counts of pods per
label group and per term, so PreFilter and PreScore sum rows into topology domains with one
``np.bincount`` per topology key, and Filter / Score are array lookups by the nodes' label codes.
PreFilter state is per topology domain (``DomainCounts``) and is updated by AddPod / RemovePod
from a NodeInfo's labels, so preemption's scratch tables see the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kubesched.api.selectors import InvalidSelector
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import InterPodAffinityArgs
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    SignFragment,
    SignPlugin,
    unsignable,
)
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._affinity_terms import (
    IncomingTerm,
    matches_all,
    merge_namespaces,
    namespace_labels,
    parse_pod_terms,
)
from kubesched.scheduler.plugins._hints import labels
from kubesched.scheduler.plugins._pod_groups import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI,
    MatchView,
    PodIndex,
    RowCounts,
    pod_index,
)
from kubesched.scheduler.plugins._topology import (
    DomainCounts,
    StateUpdates,
    VerdictBuilder,
    domain_sums,
    moved_domain_rows,
    row_sums_by_code,
)

PRE_FILTER_KEY = "PreFilter" + names.InterPodAffinity
PRE_SCORE_KEY = "PreScore" + names.InterPodAffinity
_TERM_KINDS = (REQUIRED_ANTI, REQUIRED_AFFINITY, PREFERRED_AFFINITY, PREFERRED_ANTI)

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

Sums = dict[str, np.ndarray]
#: Per-row counts of pods: those matching a term, or those carrying one.
Counted = MatchView | RowCounts

_FILTER_STATUSES = {
    1: lambda: Status(Code.UnschedulableAndUnresolvable, ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    2: lambda: Status(Code.Unschedulable, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    3: lambda: Status(Code.Unschedulable, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
}


def _pod_shape(pod: PodInfo, ns_labels: Mapping[str, str] | None) -> tuple:
    """What an existing pod's term match against ``pod`` depends on (the match cache key)."""
    return pod.namespace, frozenset(pod.labels.items()), frozenset((ns_labels or {}).items())


def _add_sums(out: Sums, table: NodeTable, key: str, counted: Counted, factor: int = 1) -> None:
    """Add the per-row counts of ``counted``, summed by ``key``'s domain and times ``factor``, to ``out``."""
    column = table.label_column(key)
    if column is None:
        return
    codes = column.codes[: table.n]
    rows, counts = counted.weights(table.n)
    sums: np.ndarray | None
    if rows is None:
        sums = domain_sums(table).sums((counted, column), codes, counts, len(column.values))
        if not sums.any():
            return
    else:
        sums = row_sums_by_code(codes, counts, rows, len(column.values))
        if sums is None:
            return
    if factor != 1:
        sums = sums * factor
    previous = out.get(key)
    out[key] = sums if previous is None else previous + sums


def _domains(table: NodeTable, sums: Sums) -> dict[str, DomainCounts]:
    return {key: DomainCounts.from_sums(table, key, s) for key, s in sums.items()}


#: The counts a Filter verdict reads, per topology key (``_FilterState``'s fields).
_COUNTED = ("existing", "anti", "affinity")


def _self_satisfied(s: _FilterState) -> bool:
    """What ``filter_nodes`` reads of every domain at once: whether the incoming pod's affinity is
    satisfied by the pod itself (no pod matches its terms anywhere, and it matches them)."""
    return bool(s.required_affinity) and not any(dc.any_nonzero() for dc in s.affinity.values()) \
        and matches_all(s.required_affinity, s.pod)


class _FilterState:
    """Upstream preFilterState: counts per (topology key, value), plus what AddPod/RemovePod need."""

    __slots__ = ("affinity", "anti", "existing", "ns_labels", "pod", "required_affinity", "required_anti", "table")

    def __init__(self, pod: PodInfo, ns_labels: dict[str, str] | None, required_affinity: list[IncomingTerm],
                 required_anti: list[IncomingTerm], table: NodeTable) -> None:
        self.pod = pod
        self.ns_labels = ns_labels
        self.required_affinity = required_affinity
        self.required_anti = required_anti
        self.table = table
        #: existing pods' required anti-affinity terms matching the incoming pod
        self.existing: dict[str, DomainCounts] = {}
        #: existing pods matching all the incoming pod's affinity terms (once per term)
        self.affinity: dict[str, DomainCounts] = {}
        #: existing pods matching each incoming anti-affinity term
        self.anti: dict[str, DomainCounts] = {}

    def clone(self) -> _FilterState:
        copy = _FilterState(self.pod, self.ns_labels, self.required_affinity, self.required_anti, self.table)
        copy.existing = {k: v.clone() for k, v in self.existing.items()}
        copy.affinity = {k: v.clone() for k, v in self.affinity.items()}
        copy.anti = {k: v.clone() for k, v in self.anti.items()}
        return copy

    def _counts(self, which: dict[str, DomainCounts], key: str) -> DomainCounts:
        dc = which.get(key)
        if dc is None:
            dc = which[key] = DomainCounts.zeros(self.table, key)
        return dc

    def update_with_pod(self, other: PodInfo, node: NodeInfo, multiplier: int) -> None:
        """Upstream ``updateWithPod``: account ``other`` (added or removed) on ``node``."""
        node_labels = node.labels
        try:
            anti_terms = other.required_anti_affinity_terms
        except InvalidSelector:
            anti_terms = []
        for t in anti_terms:
            value = node_labels.get(t.topology_key)
            if value is not None and t.matches(self.pod, self.ns_labels):
                self._counts(self.existing, t.topology_key).add(value, multiplier)
        if matches_all(self.required_affinity, other):
            for it in self.required_affinity:
                value = node_labels.get(it.topology_key)
                if value is not None:
                    self._counts(self.affinity, it.topology_key).add(value, multiplier)
        for it in self.required_anti:
            value = node_labels.get(it.topology_key)
            if value is not None and it.matches(other):
                self._counts(self.anti, it.topology_key).add(value, multiplier)


class _ScoreState:
    """Upstream preScoreState: the score each (topology key, value) earns."""

    __slots__ = ("scores",)

    def __init__(self, scores: dict[str, DomainCounts]) -> None:
        self.scores = scores

    def clone(self) -> _ScoreState:
        return self


class InterPodAffinity(SignPlugin, PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.InterPodAffinity
    normalizes_by_extremes = True  # DefaultNormalizeScore
    Args = InterPodAffinityArgs

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        if args is None:
            args = InterPodAffinityArgs()
        super().__init__(args, handle)
        self.hard_pod_affinity_weight = int(args.hard_pod_affinity_weight)
        self.ignore_preferred_terms_of_existing_pods = bool(args.ignore_preferred_terms_of_existing_pods)
        self._extensions = StateUpdates(PRE_FILTER_KEY, f'error reading "{PRE_FILTER_KEY}" from cycleState: not found')

    def _namespaces(self) -> Mapping[str, dict]:
        if self.handle is None:
            return {}
        return self.handle.objects("Namespace")

    # --- signature ----------------------------------------------------------------------------
    #: A term counts pods per topology domain, beyond one node's row.
    domain_scoped = True
    key_reads_table = True

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """A pod without terms of its own is signed by what other pods' terms match it by."""
        if signers.pod_affinity(pod):
            return unsignable("pods with inter-pod affinity terms are not signable")
        return [(signers.POD_AFFINITY, signers.identity(pod))]

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        """What other pods' terms match the pod by, and whether terms are in play at all: while
        no pod, incoming or placed, has any, the plugin skips wherever pods land; once some has,
        a batched cycle runs it again (``batch_reruns``)."""
        return [(signers.POD_AFFINITY, (signers.identity(pod), self.batch_reruns(pod, table)))]

    def batch_reruns(self, pod: PodInfo, table: NodeTable) -> bool:
        """Whether a pod, incoming or placed, has terms (the plugin may then run for this pod)."""
        index = pod_index(table)
        return bool(signers.pod_affinity(pod)) or any(index.term_counts(kind) for kind in _TERM_KINDS)

    def filter_basis(self, state: CycleState) -> Any:
        return state.get(PRE_FILTER_KEY)

    def filter_moved_rows(self, before: Any, after: Any, table: NodeTable, limit: int) -> np.ndarray | None:
        """The rows in a domain whose counts moved, when the terms and what Filter reads across
        domains (whether the pod's affinity is satisfied by the pod itself) are the same in both."""
        if not isinstance(before, _FilterState) or not isinstance(after, _FilterState):
            return None
        pairs = []
        for part in _COUNTED:
            old, new = getattr(before, part), getattr(after, part)
            if old.keys() != new.keys():
                return None
            pairs += [(old[key], counts) for key, counts in new.items()]
        moved = moved_domain_rows(pairs, table, limit)
        if moved is None:
            return None
        same_terms = before.required_affinity == after.required_affinity and before.required_anti == after.required_anti
        return moved if same_terms and _self_satisfied(before) == _self_satisfied(after) else None

    # --- PreFilter ------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        terms, error = parse_pod_terms(pod)
        if terms is None:
            return None, Status(Code.UnschedulableAndUnresolvable, f"parsing pod: {error}")
        table = nodes.table
        index = pod_index(table)
        if not terms.required_affinity and not terms.required_anti_affinity and not index.term_counts(REQUIRED_ANTI):
            return None, Status(Code.Skip)  # no term anywhere to count: the Skip below, without the state
        namespaces = self._namespaces()
        ns_labels = namespace_labels(namespaces, pod.namespace)
        s = _FilterState(pod, ns_labels,
                         [merge_namespaces(t, namespaces) for t in terms.required_affinity],
                         [merge_namespaces(t, namespaces) for t in terms.required_anti_affinity], table)
        s.existing = _domains(table, self._existing_anti_sums(index, table, pod, ns_labels))
        if s.required_affinity or s.required_anti:
            self._incoming_counts(s, index, table)
        if not s.existing and not s.required_affinity and not s.required_anti:
            return None, Status(Code.Skip)
        state.write(PRE_FILTER_KEY, s)
        return None, None

    @staticmethod
    def _existing_anti_sums(index: PodIndex, table: NodeTable, pod: PodInfo, ns_labels: dict[str, str] | None) -> Sums:
        """Existing pods' required anti-affinity terms that match the incoming pod, per domain."""
        out: Sums = {}
        counters = index.term_counts(REQUIRED_ANTI)
        if not counters:
            return out
        shape = _pod_shape(pod, ns_labels)
        for term, tc in counters.items():
            if tc.matches(pod, shape, ns_labels):
                _add_sums(out, table, term.topology_key, tc.rows)
        return out

    @staticmethod
    def _incoming_counts(s: _FilterState, index: PodIndex, table: NodeTable) -> None:
        """Existing pods matching the incoming pod's required terms, per domain."""
        affinity: Sums = {}
        if s.required_affinity:
            matching = index.view(frozenset(t.clause for t in s.required_affinity), True)
            for t in s.required_affinity:
                _add_sums(affinity, table, t.topology_key, matching)
        anti: Sums = {}
        for t in s.required_anti:
            _add_sums(anti, table, t.topology_key, index.view(frozenset([t.clause]), True))
        s.affinity = _domains(table, affinity)
        s.anti = _domains(table, anti)

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self._extensions

    # --- Filter ---------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        s: _FilterState | None = state.get(PRE_FILTER_KEY)
        if s is None:
            return FilterVerdict.all_fail(len(nodes), Status(
                Code.Error, f'error reading "{PRE_FILTER_KEY}" from cycleState: not found'))
        out = VerdictBuilder(len(nodes), _FILTER_STATUSES)
        # Marked in reverse order of precedence: existing pods, anti-affinity, then affinity.
        for dc in s.existing.values():
            out.mark(dc.lookup(nodes)[1] > 0, 3)
        if any(dc.any_nonzero() for dc in s.anti.values()):
            for t in s.required_anti:
                anti = s.anti.get(t.topology_key)
                if anti is not None:
                    out.mark(anti.lookup(nodes)[1] > 0, 2)
        if s.required_affinity:
            out.mark(~self._satisfies_affinity(s, nodes), 1)
        return out.verdict()

    @staticmethod
    def _satisfies_affinity(s: _FilterState, nodes: NodeBatch) -> np.ndarray:
        """Upstream ``satisfyPodAffinity``: every topology key present, and a matching pod in each
        domain, unless no pod matches anywhere and the pod matches its own terms."""
        all_keys = np.ones(len(nodes), dtype=bool)
        pods_exist = np.ones(len(nodes), dtype=bool)
        for t in s.required_affinity:
            dc = s.affinity.get(t.topology_key)
            if dc is None:
                all_keys &= nodes.labels(t.topology_key) >= 0
                pods_exist[:] = False
                continue
            has, counts = dc.lookup(nodes)
            all_keys &= has
            pods_exist &= counts > 0
        if not pods_exist.all():
            no_match_anywhere = not any(dc.any_nonzero() for dc in s.affinity.values())
            if no_match_anywhere and matches_all(s.required_affinity, s.pod):
                pods_exist[:] = True
        return all_keys & pods_exist

    # --- PreScore / Score -----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        if len(nodes) == 0:
            return Status(Code.Skip)
        terms, error = parse_pod_terms(pod)
        if terms is None:
            return Status.from_error(RuntimeError(f"failed to parse pod: {error}"))
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status(Code.Skip)
        table = nodes.table
        index = pod_index(table)
        namespaces = self._namespaces()
        sums: Sums = {}
        for sign, pod_terms in ((1, terms.preferred_affinity), (-1, terms.preferred_anti_affinity)):
            for term in pod_terms:
                t = merge_namespaces(term, namespaces)
                _add_sums(sums, table, t.topology_key, index.view(frozenset([t.clause]), True), factor=sign * t.weight)
        self._existing_terms_sums(sums, index, table, pod, namespace_labels(namespaces, pod.namespace))
        if not sums:
            return Status(Code.Skip)
        state.write(PRE_SCORE_KEY, _ScoreState(_domains(table, sums)))
        return None

    def _existing_terms_sums(self, sums: Sums, index: PodIndex, table: NodeTable, pod: PodInfo,
                             ns_labels: dict[str, str] | None) -> None:
        """Symmetry: existing pods' required affinity (hardPodAffinityWeight) and preferred terms
        that the incoming pod matches."""
        kinds = [(PREFERRED_AFFINITY, 1), (PREFERRED_ANTI, -1)]
        if self.hard_pod_affinity_weight > 0:
            kinds.insert(0, (REQUIRED_AFFINITY, 0))
        shape = None
        for kind, sign in kinds:
            for term, tc in index.term_counts(kind).items():
                if shape is None:
                    shape = _pod_shape(pod, ns_labels)
                if not tc.matches(pod, shape, ns_labels):
                    continue
                weight = self.hard_pod_affinity_weight if kind == REQUIRED_AFFINITY else sign * term.weight
                _add_sums(sums, table, term.topology_key, tc.rows, factor=weight)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        s: _ScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None:
            raise StatusError(Status.from_error(RuntimeError(f'failed to read "{PRE_SCORE_KEY}" from cycleState: not found')))
        total = np.zeros(len(nodes), dtype=np.int64)
        for dc in s.scores.values():
            total += dc.lookup(nodes)[1]
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        s: _ScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None or not s.scores or len(scores) == 0:
            return None
        low, high = int(scores.min()), int(scores.max())
        diff = high - low
        if diff <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        return (float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(diff))).astype(np.int64)

    # --- requeueing -----------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        # With queueing hints (always on in 1.35) the preCheck workaround UpdateNodeTaint is not needed.
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Add | ActionType.UpdatePodLabel | ActionType.Delete),
                                 self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel),
                                 self._after_node_change),
        ]

    @staticmethod
    def _after_pod_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        if (new is not None and not _node_name(new)) or (old is not None and not _node_name(old)):
            return QueueingHint.QueueSkip
        target = PodInfo(pod)
        try:
            terms, anti_terms = target.required_affinity_terms, target.required_anti_affinity_terms
        except InvalidSelector:
            return QueueingHint.Queue
        if new is not None and old is not None:
            before, after = PodInfo(old), PodInfo(new)
            if not matches_all(terms, before) and matches_all(terms, after):
                return QueueingHint.Queue
            if matches_all(anti_terms, before) and not matches_all(anti_terms, after):
                return QueueingHint.Queue
            return QueueingHint.QueueSkip
        if new is not None:
            return QueueingHint.Queue if matches_all(terms, PodInfo(new)) else QueueingHint.QueueSkip
        deleted = PodInfo(old)
        if matches_all(anti_terms, deleted):
            return QueueingHint.Queue
        # The deleted pod's own required anti-affinity may have been what kept the target pod away.
        try:
            return QueueingHint.Queue if matches_all(deleted.required_anti_affinity_terms, target) else QueueingHint.QueueSkip
        except InvalidSelector:
            return QueueingHint.Queue

    @staticmethod
    def _after_node_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        target = PodInfo(pod)
        try:
            terms, anti_terms = target.required_affinity_terms, target.required_anti_affinity_terms
        except InvalidSelector:
            return QueueingHint.Queue
        after = labels(new)
        before = None if old is None else labels(old)
        for t in terms:
            key = t.topology_key
            if before is None:
                if key in after:
                    return QueueingHint.Queue
                continue
            if key in after and (key not in before or before[key] != after[key]):
                return QueueingHint.Queue
        for t in anti_terms:
            key = t.topology_key
            if before is None:
                # A new node may join a domain without the pods the incoming pod avoids.
                return QueueingHint.Queue
            if key in before and (key not in after or before[key] != after[key]):
                return QueueingHint.Queue
        return QueueingHint.QueueSkip


def _node_name(pod: Mapping) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""
