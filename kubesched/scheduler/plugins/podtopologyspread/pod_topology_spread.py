"""PodTopologySpread: pods spread evenly over topology domains (upstream ``podtopologyspread``:
common.go, filtering.go, scoring.go, plugin.go).

DoNotSchedule constraints filter: a node fails when ``matching pods in its domain + self-match -
global minimum > maxSkew`` (the minimum treated as 0 while fewer domains than minDomains exist),
or when it lacks a constraint's topology label. ScheduleAnyway constraints score nodes by the
matching pods in their domains, weighted by the log of the number of domains. A pod without
constraints gets the default ones (System: hostname/zone spreading by the selectors of its
Services, ReplicaSets, StatefulSets and ReplicationControllers; or the configured List).

Counting is vectorised: the table's ``PodIndex`` keeps per-row counts of pods matching a
(namespace, selector) view, eligibility (topology keys present, nodeAffinityPolicy,
nodeTaintsPolicy) is a mask over rows, and per-domain counts are one ``np.bincount``.

The global minimum is exact, also after AddPod / RemovePod. Upstream keeps only two "critical
paths" per constraint and updates them incrementally; once a tracked domain grows past a third
one (several nominated pods added, say) upstream's minimum is too high. The exact one is what
those two paths stand for, and what a fresh PreFilter on the updated cluster computes.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api.jsonmemo import JSONMemo
from kubesched.api.selectors import IN, NOTHING, InvalidSelector, LabelSelector, Requirement, parse_label_selector
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.client.informers import Handler, InformerFactory
from kubesched.scheduler.config.args import LIST_DEFAULTING, SYSTEM_DEFAULTING, PodTopologySpreadArgs
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework.batch import NO_ROWS
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
from kubesched.scheduler.plugins._affinity_terms import selector_error
from kubesched.scheduler.plugins._hints import is_same_pod, labels
from kubesched.scheduler.plugins._pod_groups import Clause, MatchView, pod_index
from kubesched.scheduler.plugins._resource_allocation import go_round
from kubesched.scheduler.plugins._topology import (
    MAX_INT32,
    DomainCounts,
    StateUpdates,
    VerdictBuilder,
    domain_sums,
    moved_domain_rows,
    rows_in_slots,
)
from kubesched.scheduler.plugins.nodeaffinity.node_affinity import RequiredNodeAffinity
from kubesched.scheduler.plugins.tainttoleration.taint_toleration import (
    COMPARISON_GATE,
    DO_NOT_SCHEDULE_EFFECTS,
    find_untolerated_taint,
    per_signature,
)

PRE_FILTER_KEY = "PreFilter" + names.PodTopologySpread
PRE_SCORE_KEY = "PreScore" + names.PodTopologySpread

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULT_CONSTRAINTS = (
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)

_FILTER_STATUSES = {
    1: lambda: Status(Code.Unschedulable, ERR_REASON_CONSTRAINTS_NOT_MATCH),
    2: lambda: Status(Code.UnschedulableAndUnresolvable, ERR_REASON_NODE_LABEL_NOT_MATCH),
}


@dataclass(frozen=True, slots=True)
class Constraint:
    """Upstream ``topologySpreadConstraint``: a v1 constraint with its selector parsed."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


class ConstraintError(ValueError):
    """A constraint whose labelSelector does not parse."""


def merge_label_set(match_labels: Mapping[str, str], selector: LabelSelector) -> LabelSelector:
    """``mergeLabelSetWithSelector``: the pod's values of matchLabelKeys ANDed with the selector
    (a nil selector stays nil: it selects nothing anyway)."""
    if selector.nothing:
        return selector
    reqs = tuple(Requirement(k, IN, frozenset([v])) for k, v in sorted(match_labels.items()))
    return LabelSelector(reqs + selector.requirements)


def filter_constraints(raw: Sequence[Mapping], pod_labels: Mapping[str, str], action: str,
                       match_label_keys: bool) -> list[Constraint]:
    """``filterTopologySpreadConstraints``: the constraints with ``whenUnsatisfiable == action``."""
    out = []
    for c in raw:
        if c.get("whenUnsatisfiable") != action:
            continue
        selector = _parse_selector(c.get("labelSelector"))
        keys = c.get("matchLabelKeys") or []
        if match_label_keys and keys:
            match_labels = {k: pod_labels[k] for k in keys if k in pod_labels}
            if match_labels:
                selector = merge_label_set(match_labels, selector)
        min_domains = c.get("minDomains")
        out.append(Constraint(
            int(c.get("maxSkew") or 0), c.get("topologyKey") or "", selector,
            1 if min_domains is None else int(min_domains),
            c.get("nodeAffinityPolicy") or HONOR, c.get("nodeTaintsPolicy") or IGNORE,
        ))
    return out


_SELECTOR_CACHE: dict[Any, LabelSelector] = {}
_SELECTOR_CACHE_SIZE = 4096


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _parse_selector(spec: Mapping | None) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector``, memoised: every pod of a workload carries the same
    selector, and parsing (with validation) costs more than a scheduling cycle's counting."""
    if spec is None:
        return NOTHING
    key = _freeze(spec)
    selector = _SELECTOR_CACHE.get(key)
    if selector is None:
        try:
            selector = parse_label_selector(spec)
        except InvalidSelector as e:
            raise ConstraintError(selector_error(spec) or str(e)) from e
        if len(_SELECTOR_CACHE) >= _SELECTOR_CACHE_SIZE:
            _SELECTOR_CACHE.clear()
        _SELECTOR_CACHE[key] = selector
    return selector


class _NodeMasks:
    """Per-row facts about the incoming pod computed once per cycle: which rows its required node
    affinity accepts and which have no untolerated NoSchedule/NoExecute taint."""

    def __init__(self, pod: PodInfo, table: NodeTable, comparison_operators: bool) -> None:
        self.pod = pod
        self.table = table
        self.comparison_operators = comparison_operators
        self._affinity: np.ndarray | None = None
        self._taints: np.ndarray | None = None

    def affinity(self) -> np.ndarray:
        if self._affinity is None:
            self._affinity = RequiredNodeAffinity.of(self.pod).mask(self.table.all_rows())
        return self._affinity

    def taints(self) -> np.ndarray:
        if self._taints is None:
            tolerations, cmp_ops = self.pod.tolerations, self.comparison_operators

            def tolerated(taints: Sequence) -> bool:
                return find_untolerated_taint(taints, tolerations, DO_NOT_SCHEDULE_EFFECTS, cmp_ops) is None

            self._taints = per_signature(self.table, self.table.taint_sig[: self.table.n], tolerated, bool)
        return self._taints

    def eligible(self, c: Constraint, base: np.ndarray) -> np.ndarray:
        mask = base
        if c.node_affinity_policy == HONOR:
            mask = mask & self.affinity()
        if c.node_taints_policy == HONOR:
            mask = mask & self.taints()
        return mask


def _node_included(c: Constraint, pod: PodInfo, node: NodeInfo, comparison_operators: bool) -> bool:
    """``matchNodeInclusionPolicies`` for one node (AddPod / RemovePod)."""
    if c.node_affinity_policy == HONOR and not RequiredNodeAffinity.of(pod).matches(node.labels, node.name):
        return False
    if c.node_taints_policy != HONOR:
        return True
    return find_untolerated_taint(node.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS, comparison_operators) is None


def _has_keys(table: NodeTable, constraints: Sequence[Constraint], rows: np.ndarray | None = None) -> np.ndarray:
    """Rows (all, or ``rows``) having every constraint's topology label."""
    size = table.n if rows is None else len(rows)
    mask = np.ones(size, dtype=bool)
    for c in constraints:
        codes = table.label_codes(c.topology_key)
        if codes is None:
            return np.zeros(size, dtype=bool)
        mask &= (codes if rows is None else codes[rows]) >= 0
    return mask


def _matching(table: NodeTable, c: Constraint, namespace: str) -> MatchView | None:
    """What ``countPodsMatchSelector`` counts on every row (non-terminating pods of the namespace);
    None when the selector is empty or nil, which counts nothing."""
    if c.selector.empty or c.selector.nothing:
        return None
    return pod_index(table).view(frozenset([Clause(frozenset([namespace]), c.selector)]), False)


@dataclass(frozen=True, slots=True)
class _Layout:
    """What PreFilter counts a constraint's pods over, which moves only with the nodes: how many
    domain codes there are, which domains the eligible nodes make (``present``), every row's
    domain code (``all_codes``, -1: none), and every row's code where it is eligible and has a
    domain (``eligible_codes``, -1 elsewhere)."""

    size: int
    present: np.ndarray
    all_codes: np.ndarray
    eligible_codes: np.ndarray

    @classmethod
    def of(cls, table: NodeTable, c: Constraint, eligible: np.ndarray, absent_as_empty: bool) -> _Layout:
        codes, size = _domain_codes(table, c.topology_key, None, absent_as_empty)
        rows = np.flatnonzero(eligible & (codes >= 0))
        eligible_codes = np.full(table.n, -1, dtype=np.int64)
        eligible_codes[rows] = codes[rows]
        return cls(size, np.bincount(codes[rows], minlength=size) > 0, codes, eligible_codes)

    def domains_among(self, rows: np.ndarray) -> int:
        """How many distinct domains ``rows`` are in."""
        codes = self.all_codes[rows]
        return int(np.count_nonzero(np.bincount(codes[codes >= 0], minlength=self.size)))

    def sums(self, table: NodeTable, matching: MatchView) -> np.ndarray:
        """Per domain, the pods ``matching`` counts on its eligible rows, summed (read only)."""
        return domain_sums(table).sums((matching, self), self.eligible_codes, matching.counts[: table.n], self.size)


class _FilterState:
    """Upstream preFilterState: per constraint, the matching pods per eligible domain."""

    __slots__ = ("_reasons", "comparison_operators", "constraints", "domains", "minimums", "pod")

    def __init__(self, pod: PodInfo, constraints: list[Constraint], domains: list[DomainCounts],
                 comparison_operators: bool) -> None:
        self.pod = pod
        self.constraints = constraints
        self.domains = domains
        self.comparison_operators = comparison_operators
        self.minimums = [self._minimum(d) for d in domains]
        self._reasons: np.ndarray | None = None

    @staticmethod
    def _minimum(domains: DomainCounts) -> int:
        values = domains.domain_values()
        return int(values.min()) if len(values) else MAX_INT32

    def domain_count(self, i: int) -> int:
        return len(self.domains[i].domain_values())

    def min_match_num(self, i: int) -> int:
        """The global minimum, 0 while fewer domains than minDomains exist."""
        if self.domain_count(i) < self.constraints[i].min_domains:
            return 0
        return self.minimums[i]

    def reasons_by_slot(self) -> np.ndarray:
        """A single constraint's Filter reason per slot of its counts (0: passes, 1: the skew, 2:
        the trailing slot, nodes without the label); kept until the counts move, so a batched
        cycle compares its own with the last cycle's at the cost of one."""
        if self._reasons is None:
            c, domains = self.constraints[0], self.domains[0]
            self_match = 1 if c.selector.matches(self.pod.labels) else 0
            reasons = np.where(domains.counts > c.max_skew - self_match + self.min_match_num(0), 1, 0)
            reasons[-1] = 2
            self._reasons = reasons
        return self._reasons

    def clone(self) -> _FilterState:
        copy = _FilterState.__new__(_FilterState)
        copy.pod = self.pod
        copy.constraints = self.constraints
        copy.comparison_operators = self.comparison_operators
        copy.domains = [d.clone() for d in self.domains]
        copy.minimums = list(self.minimums)
        copy._reasons = None
        return copy

    def update_with_pod(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        """Upstream ``updateWithPod``, keeping the exact minimum (see the module docstring)."""
        if node.node is None or other.namespace != self.pod.namespace:
            return
        node_labels = node.labels
        if any(c.topology_key not in node_labels for c in self.constraints):
            return
        self._reasons = None
        for i, c in enumerate(self.constraints):
            if not c.selector.matches(other.labels):
                continue
            if not _node_included(c, self.pod, node, self.comparison_operators):
                continue
            self.domains[i].add(node_labels[c.topology_key], delta)
            self.minimums[i] = self._minimum(self.domains[i])


def _across_domains(s: _FilterState) -> list[tuple[int, bool]]:
    """What ``filter_nodes`` reads of every domain at once, per constraint: the global minimum and
    whether the incoming pod matches the selector."""
    return [(s.min_match_num(i), c.selector.matches(s.pod.labels)) for i, c in enumerate(s.constraints)]


class _ScoreState:
    """Upstream preScoreState: soft constraints, per-domain counts and normalising weights."""

    __slots__ = ("_ignored", "constraints", "counts", "require_all", "weights")

    def __init__(self, constraints: list[Constraint], require_all: bool) -> None:
        self.constraints = constraints
        self.require_all = require_all
        self._ignored: tuple[NodeBatch, np.ndarray, bool] | None = None
        self.counts: list[DomainCounts | None] = []
        self.weights: list[float] = []

    def clone(self) -> _ScoreState:
        return self

    def ignored(self, nodes: NodeBatch) -> np.ndarray:
        """Nodes scored 0 because they lack some topology key (non-system-default constraints);
        PreScore, Score and NormalizeScore ask of the same nodes, so the last answer is kept."""
        return self._ignored_of(nodes)[1]

    def any_ignored(self, nodes: NodeBatch) -> bool:
        """Whether some node of ``nodes`` is ignored (most often none is)."""
        return self._ignored_of(nodes)[2]

    def take_ignored(self, nodes: NodeBatch, mask: np.ndarray, any_ignored: bool) -> None:
        """The ignored nodes of ``nodes``, found already (kept by the plugin for every row)."""
        self._ignored = (nodes, mask, any_ignored)

    def _ignored_of(self, nodes: NodeBatch) -> tuple[NodeBatch, np.ndarray, bool]:
        last = self._ignored
        if last is not None and last[0] is nodes:
            return last
        if not self.require_all:
            mask = np.zeros(len(nodes), dtype=bool)
        else:
            mask = ~_has_keys(nodes.table, self.constraints, nodes.row_ids())
        self._ignored = (nodes, mask, bool(mask.any()))
        return self._ignored


def _moved_verdict_slots(before: _FilterState, after: _FilterState, table: NodeTable) -> np.ndarray | None:
    """For a single constraint counted over the table's label column in both states: the slots
    whose Filter reason differs (whatever moved the counts or the minimum, a node's verdict is its
    slot's reason). None when the counts do not follow the table's column."""
    if not before.domains[0].indexes(table) or not after.domains[0].indexes(table):
        return None
    old, new = before.reasons_by_slot(), after.reasons_by_slot()
    return NO_ROWS if old.tobytes() == new.tobytes() else np.flatnonzero(old != new)


def _verdict_by_domain(s: _FilterState, slots: np.ndarray) -> FilterVerdict | None:
    """Filter's verdict for a single constraint, whose reason is a function of the node's domain
    (its slot in the counts: -1 without the label): decided once per domain and read per node.
    The statuses come in the order the general path marks them (skew, then the missing label)."""
    reasons = s.reasons_by_slot().take(slots)
    found = np.bincount(reasons, minlength=3)
    statuses: list[Status] = []
    index = np.full(3, -1, dtype=np.int32)
    for reason in (1, 2):
        if found[reason]:
            index[reason] = len(statuses)
            statuses.append(_FILTER_STATUSES[reason]())
    return FilterVerdict(index.take(reasons), statuses) if statuses else None


def _verdict_by_node(s: _FilterState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
    """Filter's verdict node by node (every constraint's counts read per node)."""
    out = VerdictBuilder(len(nodes), _FILTER_STATUSES)
    # Constraints in reverse order, so the first failing constraint's reason wins.
    for i in reversed(range(len(s.constraints))):
        c = s.constraints[i]
        has, counts = s.domains[i].lookup(nodes)
        self_match = 1 if c.selector.matches(pod.labels) else 0
        out.mark(counts > c.max_skew - self_match + s.min_match_num(i), 1)
        out.mark(~has, 2)
    return out.verdict()


def _scores_by_node(s: _ScoreState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
    """Score's rounded scores node by node (before the ignored nodes' zeros)."""
    score = np.zeros(len(nodes), dtype=np.float64)
    rows = nodes.row_ids()
    for i, c in enumerate(s.constraints):
        has = nodes.labels(c.topology_key) >= 0
        known = s.counts[i]
        if known is None:
            matching = _matching(nodes.table, c, pod.namespace)
            counts = matching.counts[rows] if matching is not None else np.zeros(len(nodes), dtype=np.int64)
        else:
            counts = known.lookup(nodes)[1]
        score = score + np.where(has, _score_part(counts, s.weights[i], c), 0.0)
    return go_round(score)


def _scores_by_domain(s: _ScoreState, nodes: NodeBatch) -> np.ndarray | None:
    """Score's rounded scores for a single constraint counted per domain: a function of the node's
    domain, so computed and rounded once per domain and read per node (-1, the trailing slot,
    without the label, scores 0). None for several constraints or a hostname constraint."""
    known = s.counts[0] if len(s.constraints) == 1 else None
    slots = None if known is None else known.slots_of(nodes)
    if known is None or slots is None:
        return None
    part = _score_part(known.counts, s.weights[0], s.constraints[0])
    part[-1] = 0.0
    return go_round(part).take(slots)


def _score_part(counts: np.ndarray, weight: float, c: Constraint) -> np.ndarray:
    """Upstream ``scoreForCount``: a constraint's part of the score of nodes (or domains) holding
    ``counts`` matching pods."""
    return counts.astype(np.float64) * weight + float(c.max_skew - 1)


def _domains_among(rows: np.ndarray, constraints: list[Constraint], layouts: list[_Layout]) -> list[int]:
    """Per constraint, the domains ``rows`` are in (0 for the hostname, whose weight counts nodes)."""
    return [0 if c.topology_key == LABEL_HOSTNAME else layout.domains_among(rows)
            for c, layout in zip(constraints, layouts, strict=True)]


def _domain_codes(table: NodeTable, key: str, rows: np.ndarray | None, absent_as_empty: bool) -> tuple[np.ndarray, int]:
    """Label codes of ``key`` (for ``rows`` or all rows) and the vocabulary size; with
    ``absent_as_empty`` a missing label counts as the value "" (upstream reads ``Labels[key]``)."""
    column = table.label_column(key)
    size = 0 if column is None else len(column.values)
    codes = column.codes[: table.n] if column is not None else np.full(table.n, -1, dtype=np.int32)
    if rows is not None:
        codes = codes[rows]
    if not absent_as_empty:
        return codes, size
    empty = column.vocab.get("") if column is not None else None
    if empty is None:
        empty, size = size, size + 1
    return np.where(codes >= 0, codes, empty), size


def _topology_normalizing_weight(size: int) -> float:
    # math.log, not np.log: numpy's AVX-512 log differs from libm in the last bit for some sizes, and
    # a score must not depend on the CPU it was computed on.
    return math.log(size + 2)


class PodTopologySpread(SignPlugin, PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.PodTopologySpread
    Args = PodTopologySpreadArgs

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        gates: FeatureGates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        if args is None:
            args = PodTopologySpreadArgs()
            args.set_defaults(gates)
        super().__init__(args, handle)
        defaulting = args.defaulting_type or SYSTEM_DEFAULTING
        self.system_defaulted = defaulting == SYSTEM_DEFAULTING
        if self.system_defaulted:
            self.default_constraints: list[dict] = [dict(c) for c in SYSTEM_DEFAULT_CONSTRAINTS]
        else:
            self.default_constraints = [dict(c) for c in args.default_constraints] if defaulting == LIST_DEFAULTING else []
        self.match_label_keys = gates.enabled("MatchLabelKeysInPodTopologySpread")
        self.comparison_operators = gates.enabled(COMPARISON_GATE)
        self._extensions = StateUpdates(PRE_FILTER_KEY, f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        self._services = service_index(handle) if self.system_defaulted or self.default_constraints else None
        self._last_layouts: dict[str, tuple[tuple[Any, ...], list[_Layout]]] = {}
        #: For the last Score layouts and a batch of every row: the ignored rows (and whether any
        #: is), how many rows are scored, and the domains among them per constraint.
        self._last_scored: tuple[list[_Layout], np.ndarray, bool, int, list[int]] | None = None
        #: Parsed constraints by the action, the pod's own raw constraints and its labels.
        self._constraints: JSONMemo[list[Constraint]] = JSONMemo()

    def _objects(self, kind: str) -> Mapping[str, dict]:
        if self.handle is None:
            return {}
        return self.handle.objects(kind)

    # --- constraints ------------------------------------------------------------------------------
    def constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        """``getConstraints`` / ``initPreScoreState``: the pod's own constraints, else the defaults.
        Raises ConstraintError."""
        own = pod.spec.get("topologySpreadConstraints") or []
        if not own:
            return self._default_constraints(pod, action)
        return list(self._constraints.get((action, own, pod.labels),  # replicas repeat their constraints and labels
                                          lambda: filter_constraints(own, pod.labels, action, self.match_label_keys)))

    def _default_constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        """``buildDefaultConstraints``: the defaults with the selector of the pod's controllers."""
        constraints = filter_constraints(self.default_constraints, pod.labels, action, self.match_label_keys)
        if not constraints:
            return []
        selector = default_selector(pod, self._objects, self._services)
        if selector.empty:
            return []
        return [Constraint(c.max_skew, c.topology_key, selector, c.min_domains, c.node_affinity_policy, c.node_taints_policy)
                for c in constraints]

    # --- signature ----------------------------------------------------------------------------------
    #: Pods are counted per topology domain: one placement moves every node of its domains.
    domain_scoped = True

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """Spreading is not a question of one pod and one node: pods with constraints, explicit or
        from the profile's defaults, are not signed (upstream's rule)."""
        if pod.spec.get("topologySpreadConstraints"):
            return unsignable("pods with topology constraints are not signable")
        if self.default_constraints:
            return unsignable("pods with default topology constraints are not signable")
        return []

    def signs_pods(self) -> bool:
        return not self.default_constraints

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        """The pod's own constraints and what the default constraints select it by (namespace,
        labels and owners, against Services and controllers): they decide whether the plugin
        runs, and where it runs a batched cycle runs it again (``domain_scoped``)."""
        return [(signers.TOPOLOGY_SPREAD, (signers.identity(pod), pod.spec.get("topologySpreadConstraints")))]

    # --- PreFilter / Filter -------------------------------------------------------------------------
    def filter_basis(self, state: CycleState) -> Any:
        return state.get(PRE_FILTER_KEY)

    def filter_slots(self, state: CycleState, table: NodeTable) -> tuple[str, np.ndarray] | None:
        """A single constraint decides per domain (``_verdict_by_domain``): nodes in a domain whose
        reason is none pass; nodes without the label never do."""
        s = state.get(PRE_FILTER_KEY)
        if not isinstance(s, _FilterState) or len(s.constraints) != 1 or not s.domains[0].indexes(table):
            return None
        return s.constraints[0].topology_key, s.reasons_by_slot() == 0

    def filter_moved_rows(self, before: Any, after: Any, table: NodeTable, limit: int) -> np.ndarray | None:
        """The rows whose verdict may differ between two PreFilter states of the same constraints.
        For a single constraint, the rows of the domains whose verdict moved (a node's verdict is
        its domain's): none while a placement keeps its zone within the skew, one row per placement
        in a spread over nodes. Otherwise the rows in a domain whose count moved, when what Filter
        reads across domains (each constraint's global minimum, whether the pod matches its
        selector) is the same in both."""
        if not isinstance(before, _FilterState) or not isinstance(after, _FilterState) or \
                before.constraints != after.constraints:
            return None
        if len(after.constraints) == 1:
            slots = _moved_verdict_slots(before, after, table)
            if slots is not None:
                if len(slots) and table.n > limit * len(after.domains[0].counts):
                    return None  # domains hold more than ``limit`` nodes on average (zones)
                rows = rows_in_slots(table, after.constraints[0].topology_key, slots)
                return rows if len(rows) <= limit else None
        moved = moved_domain_rows(zip(before.domains, after.domains, strict=True), table, limit)
        return moved if moved is not None and _across_domains(before) == _across_domains(after) else None

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except ConstraintError as e:
            return None, Status.from_error(RuntimeError(
                f"get constraints from pod: obtaining pod's hard topology spread constraints: {e}"))
        if not constraints:
            return None, Status(Code.Skip)
        table = nodes.table
        domains = []
        for c, layout in zip(constraints, self._layouts(pod, table, constraints, DO_NOT_SCHEDULE, True), strict=True):
            matching = _matching(table, c, pod.namespace)
            sums = None if matching is None else layout.sums(table, matching)
            domains.append(DomainCounts.from_sums(table, c.topology_key, sums, layout.present))
        state.write(PRE_FILTER_KEY, _FilterState(pod, constraints, domains, self.comparison_operators))
        return None, None

    def _layouts(self, pod: PodInfo, table: NodeTable, constraints: list[Constraint], action: str,
                 require_all: bool) -> list[_Layout]:
        """Each constraint's ``_Layout`` (``require_all``: only nodes with every constraint's key
        count, and a missing label is no domain; else it is the domain ""). The last pod's, per
        action, while the nodes, the constraints and what the inclusion policies read of the pod
        (node selector, node affinity, tolerations) are the same, as for replicas of one workload."""
        inputs = (table, table.generation, constraints, require_all, pod.spec.get("nodeSelector"),
                  (pod.spec.get("affinity") or {}).get("nodeAffinity"), pod.spec.get("tolerations"))
        last = self._last_layouts.get(action)
        if last is not None and last[0] == inputs:
            return last[1]
        masks = _NodeMasks(pod, table, self.comparison_operators)
        base = _has_keys(table, constraints) if require_all else np.ones(table.n, dtype=bool)
        layouts = [_Layout.of(table, c, masks.eligible(c, base), not require_all) for c in constraints]
        self._last_layouts[action] = (inputs, layouts)
        return layouts

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self._extensions

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        s: _FilterState | None = state.get(PRE_FILTER_KEY)
        if s is None:
            return FilterVerdict.all_fail(len(nodes), Status(
                Code.Error, f'reading "{PRE_FILTER_KEY}" from cycleState: not found'))
        if not s.constraints:
            return None
        if len(s.constraints) == 1 and (slots := s.domains[0].slots_of(nodes)) is not None:
            return _verdict_by_domain(s, slots)
        return _verdict_by_node(s, pod, nodes)

    # --- PreScore / Score ---------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        table = nodes.table
        if table.n == 0:
            return Status(Code.Skip)
        require_all = bool(pod.spec.get("topologySpreadConstraints")) or not self.system_defaulted
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except ConstraintError as e:
            return Status.from_error(RuntimeError(
                f"calculating preScoreState: obtaining pod's soft topology spread constraints: {e}"))
        if not constraints:
            return Status(Code.Skip)
        s = _ScoreState(constraints, require_all)
        layouts = self._layouts(pod, table, constraints, SCHEDULE_ANYWAY, require_all)
        if nodes.rows is None:
            scored, domains = self._every_row_scored(s, nodes, constraints, layouts)
        else:
            rows = nodes.row_ids()[~s.ignored(nodes)]
            scored, domains = len(rows), _domains_among(rows, constraints, layouts)
        for c, layout, among in zip(constraints, layouts, domains, strict=True):
            if c.topology_key == LABEL_HOSTNAME:
                s.counts.append(None)
                s.weights.append(_topology_normalizing_weight(scored))
                continue
            s.weights.append(_topology_normalizing_weight(among))
            s.counts.append(self._domain_counts(table, c, pod, layout))
        state.write(PRE_SCORE_KEY, s)
        return None

    def _every_row_scored(self, s: _ScoreState, nodes: NodeBatch, constraints: list[Constraint],
                          layouts: list[_Layout]) -> tuple[int, list[int]]:
        """For a batch of every row: how many nodes are scored (not ignored) and, per constraint,
        how many domains they are in. These move only with the nodes, as the layouts do, so they
        are kept with the last layouts (``s`` is handed the ignored nodes too)."""
        kept = self._last_scored
        if kept is None or kept[0] is not layouts:
            mask = s.ignored(nodes)
            rows = np.flatnonzero(~mask)
            kept = self._last_scored = (layouts, mask, bool(mask.any()), len(rows), _domains_among(rows, constraints, layouts))
        s.take_ignored(nodes, kept[1], kept[2])
        return kept[3], kept[4]

    @staticmethod
    def _domain_counts(table: NodeTable, c: Constraint, pod: PodInfo, layout: _Layout) -> DomainCounts:
        """Matching pods per domain over every eligible node of the cluster. Nodes without the label
        count toward the value "" (a layout without ``require_all``); when no node has that value,
        no scored node reads that bucket, so it is dropped."""
        matching = _matching(table, c, pod.namespace)
        if matching is None:
            return DomainCounts.zeros(table, c.topology_key)
        column = table.label_column(c.topology_key)
        known = 0 if column is None else len(column.values)
        return DomainCounts.from_sums(table, c.topology_key, layout.sums(table, matching)[:known])

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        s: _ScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None:
            raise StatusError(Status.from_error(RuntimeError(f'error reading "{PRE_SCORE_KEY}" from cycleState: not found')))
        out = _scores_by_domain(s, nodes)
        if out is None:
            out = _scores_by_node(s, pod, nodes)
        if s.any_ignored(nodes):
            out[s.ignored(nodes)] = 0
        return out

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        s: _ScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None or len(scores) == 0:
            return None
        ignored = s.ignored(nodes) if s.any_ignored(nodes) else None
        valid = scores if ignored is None else scores[~ignored]
        if len(valid) == 0:
            return np.zeros(len(scores), dtype=np.int64)
        low, high = int(valid.min()), max(int(valid.max()), 0)
        if high == 0:
            out = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        else:
            out = MAX_NODE_SCORE * (high + low - scores) // high
        if ignored is not None:
            out[ignored] = 0
        return out

    # --- requeueing -------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_actions = ActionType.Add | ActionType.UpdatePodLabel | ActionType.UpdatePodToleration | ActionType.Delete
        node_actions = ActionType.Add | ActionType.Delete | ActionType.UpdateNodeLabel | ActionType.UpdateNodeTaint
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, pod_actions), self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(Resource.Node, node_actions), self._after_node_change),
        ]

    def _after_pod_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        if (new is not None and not _involved(new, pod)) or (old is not None and not _involved(old, pod)):
            return QueueingHint.QueueSkip
        try:
            constraints = self.constraints(PodInfo(pod), DO_NOT_SCHEDULE)
        except ConstraintError:
            return QueueingHint.Queue
        if new is not None and old is not None:
            if is_same_pod(pod, new) and _tolerations(new) != _tolerations(old) and \
                    any(c.node_taints_policy == HONOR for c in constraints):
                return QueueingHint.Queue
            before, after = labels(old), labels(new)
            if before == after:
                return QueueingHint.QueueSkip
            if any(c.selector.matches(before) != c.selector.matches(after) for c in constraints):
                return QueueingHint.Queue
            return QueueingHint.QueueSkip
        pod_labels = labels(new if new is not None else old)
        return QueueingHint.Queue if any(c.selector.matches(pod_labels) for c in constraints) else QueueingHint.QueueSkip

    def _after_node_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        try:
            constraints = self.constraints(PodInfo(pod), DO_NOT_SCHEDULE)
        except ConstraintError:
            return QueueingHint.Queue
        old_match = old is not None and _has_all_keys(labels(old), constraints)
        new_match = new is not None and _has_all_keys(labels(new), constraints)
        if old is not None and new is not None:
            if old_match != new_match:
                return QueueingHint.Queue
            before, after = labels(old), labels(new)
            changed = any(before.get(c.topology_key, "") != after.get(c.topology_key, "") for c in constraints)
            taints_changed = ((old.get("spec") or {}).get("taints") or []) != ((new.get("spec") or {}).get("taints") or [])
            return QueueingHint.Queue if new_match and (changed or taints_changed) else QueueingHint.QueueSkip
        if new is not None:
            return QueueingHint.Queue if new_match else QueueingHint.QueueSkip
        return QueueingHint.Queue if old_match else QueueingHint.QueueSkip


# --- default constraints' selector (upstream helper.DefaultSelector) ------------------------------
_RC = ("", "v1", "ReplicationController")
_RS = ("apps", "v1", "ReplicaSet")
_SS = ("apps", "v1", "StatefulSet")


def _namespace_of(obj: Mapping) -> str:
    return (obj.get("metadata") or {}).get("namespace") or "default"


def _name_of(obj: Mapping) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def _service_labels(pod: PodInfo, services: Iterable[Mapping]) -> dict[str, str]:
    """``GetPodServices`` merged: the selectors of the pod's namespace's Services that match it."""
    label_set: dict[str, str] = {}
    for svc in services:
        if _namespace_of(svc) != pod.namespace:
            continue
        selector = (svc.get("spec") or {}).get("selector")
        if selector is None:
            continue  # a nil selector matches nothing, not everything
        if all(pod.labels.get(k) == v for k, v in selector.items()):
            label_set.update(selector)
    return label_set


class ServiceIndex:
    """The Services by namespace, kept by the Service informer's events, with the merged selectors
    matching a label set memoised until a Service of that namespace changes: PreScore of every pod
    without constraints of its own needs them, and scanning every Service each time adds up."""

    def __init__(self) -> None:
        self._services: dict[str, dict[str, Mapping]] = {}
        self._merged: dict[str, dict[frozenset[tuple[str, str]], dict[str, str]]] = {}

    def on_add(self, svc: Mapping, _initial: bool = False) -> None:
        self._services.setdefault(_namespace_of(svc), {})[_name_of(svc)] = svc
        self._merged.pop(_namespace_of(svc), None)

    def on_update(self, old: Mapping, new: Mapping) -> None:
        self.on_delete(old)
        self.on_add(new)

    def on_delete(self, svc: Mapping) -> None:
        self._services.get(_namespace_of(svc), {}).pop(_name_of(svc), None)
        self._merged.pop(_namespace_of(svc), None)

    def labels_for(self, pod: PodInfo) -> dict[str, str]:
        merged = self._merged.setdefault(pod.namespace, {})
        key = frozenset(pod.labels.items())
        found = merged.get(key)
        if found is None:
            if len(merged) >= _SELECTOR_CACHE_SIZE:
                merged.clear()
            found = merged[key] = _service_labels(pod, self._services.get(pod.namespace, {}).values())
        return found


_SERVICE_INDEXES: weakref.WeakKeyDictionary[Any, ServiceIndex] = weakref.WeakKeyDictionary()


def service_index(handle: Any) -> ServiceIndex | None:
    """The index fed by the scheduler's Service informer (shared by its profiles); None without
    one (tests, the plugin harness), where the informer cache is scanned instead."""
    informers = getattr(getattr(handle, "ctx", None), "informers", None)
    if not isinstance(informers, InformerFactory):
        return None
    index = _SERVICE_INDEXES.get(informers)
    if index is None:
        index = _SERVICE_INDEXES[informers] = ServiceIndex()
        informers.informer("Service").add_handler(Handler(index.on_add, index.on_update, index.on_delete))
    return index


def default_selector(pod: PodInfo, objects: Any, services: ServiceIndex | None = None) -> LabelSelector:
    """The selector deduced from the Services, ReplicationControllers, ReplicaSets and StatefulSets
    matching the pod (``objects(kind)`` is the informer cache of ``kind``; ``services``, when
    given, indexes the Service one)."""
    if services is not None:
        label_set = dict(services.labels_for(pod))
    else:
        label_set = _service_labels(pod, objects("Service").values())
    selector = _set_selector(label_set)
    owner = _controller_of(pod)
    if owner is None:
        return selector
    gvk = _group_version_kind(owner)
    if gvk is None:
        return selector
    key = f"{pod.namespace}/{owner.get('name', '')}"
    if gvk == _RC:
        rc = objects("ReplicationController").get(key)
        if rc is not None:
            label_set.update((rc.get("spec") or {}).get("selector") or {})
            selector = _set_selector(label_set)
    elif gvk in (_RS, _SS):
        obj = objects("ReplicaSet" if gvk == _RS else "StatefulSet").get(key)
        if obj is not None:
            try:
                other = parse_label_selector((obj.get("spec") or {}).get("selector"))
            except InvalidSelector:
                return selector
            if not other.nothing:
                selector = LabelSelector(selector.requirements + other.requirements)
    return selector


def _set_selector(labels: Mapping[str, str]) -> LabelSelector:
    return LabelSelector(tuple(Requirement(k, IN, frozenset([v])) for k, v in sorted(labels.items())))


def _controller_of(pod: PodInfo) -> dict | None:
    for ref in pod.pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def _group_version_kind(owner: Mapping) -> tuple[str, str, str] | None:
    api_version = owner.get("apiVersion") or ""
    parts = api_version.split("/")
    if len(parts) > 2 or (len(parts) == 2 and not parts[1]):
        return None
    group, version = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
    return group, version, owner.get("kind") or ""


def _involved(other: Mapping, pod: Mapping) -> bool:
    """``involvedInTopologySpreading``: the pod itself, or an assigned pod of its namespace."""
    if is_same_pod(pod, other):
        return True
    return bool((other.get("spec") or {}).get("nodeName")) and _namespace(other) == _namespace(pod)


def _namespace(pod: Mapping) -> str:
    return (pod.get("metadata") or {}).get("namespace") or "default"


def _tolerations(pod: Mapping) -> list:
    return (pod.get("spec") or {}).get("tolerations") or []


def _has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    return all(c.topology_key in labels for c in constraints)
