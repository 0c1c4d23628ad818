"""TaintToleration: a node's NoSchedule / NoExecute taints must all be tolerated by the pod, and
nodes with fewer untolerated PreferNoSchedule taints score higher (upstream ``tainttoleration``).

Nodes share few distinct taint lists, so the table keeps one signature per distinct list
(``taint_sig``); tolerations are evaluated once per signature and the answer indexed per node.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import numpy as np

from kubesched.api.golang import go_quote
from kubesched.api.types import PodInfo, Taint, Toleration
from kubesched.scheduler.features import DEFAULT_GATES
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreScorePlugin,
    SignFragment,
    SignPlugin,
)
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._hints import is_same_pod
from kubesched.scheduler.plugins._resource_allocation import default_normalize

PRE_SCORE_KEY = "PreScore" + names.TaintToleration
#: Filter reason since 1.35 (kubernetes#134740): taint keys and values are no longer disclosed.
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
COMPARISON_GATE = "TaintTolerationComparisonOperators"

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
#: ``helper.DoNotScheduleTaintsFilterFunc``: the effects Filter (and the node hint) look at.
DO_NOT_SCHEDULE_EFFECTS = frozenset((NO_SCHEDULE, NO_EXECUTE))

_DECIMAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")


# --- toleration matching (k8s.io/api core/v1 ``Toleration.ToleratesTaint``) ------------------------
#: ``content.IsDecimalInteger``'s message for a value that is not a canonical base-10 integer.
NOT_DECIMAL = "must be a valid decimal integer in canonical form"


def _decimal_int64(text: str) -> int | None:
    """``content.IsDecimalInteger`` then ``strconv.ParseInt``: canonical base-10, no leading zeros or '+'."""
    return _parse_int64(text, "")[0]


def _parse_int64(text: str, what: str) -> tuple[int | None, str | None]:
    """The integer, or why ``text`` (a toleration or taint value) is not one, in upstream's words
    (``compareNumericValues``)."""
    if not _DECIMAL_INTEGER.match(text):
        return None, f"failed to parse {what} value {go_quote(text)} as int64: {NOT_DECIMAL}"
    value = int(text)
    if -(2**63) <= value < 2**63:
        return value, None
    return None, (f"failed to parse {what} value {go_quote(text)} as int64: "
                  f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")


def tolerates_checked(toleration: Toleration, taint: Taint, comparison_operators: bool = False) -> tuple[bool, str | None]:
    """``Toleration.ToleratesTaint``: whether one toleration tolerates one taint, and for Lt/Gt
    (with the gate on) the error when either value is not an int64."""
    if toleration.effect and toleration.effect != taint.effect:
        return False, None
    if toleration.key and toleration.key != taint.key:
        return False, None
    op = toleration.operator
    if op in ("", "Equal"):
        return toleration.value == taint.value, None
    if op == "Exists":
        return True, None
    if op in ("Lt", "Gt") and comparison_operators:
        wanted, error = _parse_int64(toleration.value, "toleration")
        if error is not None:
            return False, error
        actual, error = _parse_int64(taint.value, "taint")
        if error is not None or actual is None or wanted is None:
            return False, error
        return (actual < wanted if op == "Lt" else actual > wanted), None
    return False, None


def tolerates(toleration: Toleration, taint: Taint, comparison_operators: bool = False) -> bool:
    """Whether one toleration tolerates one taint; Lt/Gt compare integers when the gate is on (a
    value that is no integer tolerates nothing)."""
    return tolerates_checked(toleration, taint, comparison_operators)[0]


def tolerations_tolerate_checked(tolerations: Iterable[Toleration], taint: Taint,
                                 comparison_operators: bool = False) -> tuple[bool, str | None]:
    """``TolerationsTolerateTaint``: any toleration tolerating the taint; otherwise the first
    comparison error met, if any."""
    first_error: str | None = None
    for toleration in tolerations:
        tolerated, error = tolerates_checked(toleration, taint, comparison_operators)
        if tolerated:
            return True, None
        first_error = first_error or error
    return False, first_error


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Taint, comparison_operators: bool = False) -> bool:
    """``TolerationsTolerateTaint``: any toleration tolerating the taint."""
    return any(tolerates(t, taint, comparison_operators) for t in tolerations)


def _as_taints(taints: Iterable[Taint | Mapping]) -> list[Taint]:
    return [t if isinstance(t, Taint) else Taint.from_dict(t) for t in taints]


def _as_tolerations(tolerations: Iterable[Toleration | Mapping]) -> list[Toleration]:
    return [t if isinstance(t, Toleration) else Toleration.from_dict(t) for t in tolerations]


def find_untolerated_taint(taints: Iterable[Taint | Mapping], tolerations: Iterable[Toleration | Mapping],
                           effects: Collection[str] | None = DO_NOT_SCHEDULE_EFFECTS,
                           comparison_operators: bool = False) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint with one of ``effects`` (all effects when
    None) that no toleration tolerates, or None. The kubelet passes ``{"NoExecute"}``."""
    tols = _as_tolerations(tolerations)
    for taint in _as_taints(taints):
        if effects is not None and taint.effect not in effects:
            continue
        if not tolerations_tolerate(tols, taint, comparison_operators):
            return taint
    return None


def find_untolerated_taint_checked(taints: Iterable[Taint | Mapping], tolerations: Iterable[Toleration | Mapping],
                                   effects: Collection[str] | None = DO_NOT_SCHEDULE_EFFECTS,
                                   comparison_operators: bool = False) -> tuple[Taint | None, str | None]:
    """``FindMatchingUntoleratedTaint`` with its error: a cleanly untolerated taint wins (so the
    answer does not depend on taint order); else the first taint whose only obstacle was a
    comparison that could not parse, with that error; else (None, None)."""
    tols = _as_tolerations(tolerations)
    first: tuple[Taint, str] | None = None
    for taint in _as_taints(taints):
        if effects is not None and taint.effect not in effects:
            continue
        tolerated, error = tolerations_tolerate_checked(tols, taint, comparison_operators)
        if error is not None:
            first = first or (taint, error)
        elif not tolerated:
            return taint, None
    return (first[0], first[1]) if first is not None else (None, None)


def prefer_no_schedule_tolerations(tolerations: Iterable[Toleration]) -> tuple[Toleration, ...]:
    """``getAllTolerationPreferNoSchedule``: tolerations with no effect or PreferNoSchedule."""
    return tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def count_intolerable_prefer_no_schedule(taints: Iterable[Taint], tolerations: Iterable[Toleration],
                                         comparison_operators: bool = False) -> int:
    """``countIntolerableTaintsPreferNoSchedule``."""
    tols = list(tolerations)
    return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate(tols, t, comparison_operators))


def per_signature(table: NodeTable, sigs: np.ndarray, evaluate: Any, dtype: Any) -> np.ndarray:
    """``evaluate(taints)`` once per distinct taint signature in ``sigs``, spread back per node."""
    signatures = table.taint_signatures
    wanted = np.unique(sigs) if len(sigs) < len(signatures) else range(len(signatures))
    lookup = np.zeros(len(signatures), dtype=dtype)
    for sig in wanted:
        lookup[int(sig)] = evaluate(signatures[int(sig)])
    return lookup.take(sigs)  # take: sigs are int32, which fancy indexing converts first


class _PreScoreState:
    __slots__ = ("tolerations",)

    def __init__(self, tolerations: tuple[Toleration, ...]) -> None:
        self.tolerations = tolerations

    def clone(self) -> _PreScoreState:
        return self


class TaintToleration(SignPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.TaintToleration
    normalizes_by_extremes = True  # DefaultNormalizeScore
    reads_node_pods = False

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        gates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        self.comparison_operators = gates.enabled(COMPARISON_GATE)
        self._untolerated = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_UNTOLERATED)

    # --- Filter -----------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """Filtering and scoring read the pod's tolerations."""
        return [signers.tolerations(pod)]

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        sigs = nodes.col(nodes.table.taint_sig)
        if not sigs.any():
            return None
        tolerations = pod.tolerations
        cmp_ops = self.comparison_operators
        statuses: dict[int, Status] = {1: self._untolerated}
        keys_by_error: dict[str, int] = {}

        def key(taints: tuple[Taint, ...]) -> int:
            """0 when every taint is tolerated, 1 when one is not, else the key of the parse error
            (upstream: UnschedulableAndUnresolvable carrying the error as its message)."""
            taint, error = find_untolerated_taint_checked(taints, tolerations, DO_NOT_SCHEDULE_EFFECTS, cmp_ops)
            if taint is None:
                return 0
            if error is None:
                return 1
            if error not in keys_by_error:
                keys_by_error[error] = len(statuses) + 1
                statuses[keys_by_error[error]] = Status(Code.UnschedulableAndUnresolvable, error)
            return keys_by_error[error]

        return FilterVerdict.from_keys(per_signature(nodes.table, sigs, key, np.int64), statuses)

    # --- Score ------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        state.write(PRE_SCORE_KEY, _PreScoreState(prefer_no_schedule_tolerations(pod.tolerations)))
        return None

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            raise StatusError(Status.from_error(RuntimeError(
                f'failed to read "{PRE_SCORE_KEY}" from cycleState: not found')))
        sigs = nodes.col(nodes.table.taint_sig)
        if not sigs.any():
            return np.zeros(len(nodes), dtype=np.int64)
        tolerations, cmp_ops = s.tolerations, self.comparison_operators
        return per_signature(nodes.table, sigs,
                             lambda taints: count_intolerable_prefer_no_schedule(taints, tolerations, cmp_ops), np.int64)

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        return default_normalize(scores, reverse=True)

    # --- requeueing -------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeTaint), self._after_node_change),
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.UpdatePodToleration), self._after_pod_toleration_change),
        ]

    def _after_node_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        """Queue only when the node goes from having an untolerated taint to having none."""
        tolerations = PodInfo(pod).tolerations
        was_untolerated = True
        if old is not None:
            was_untolerated = find_untolerated_taint(_node_taints(old), tolerations, DO_NOT_SCHEDULE_EFFECTS,
                                                     self.comparison_operators) is not None
        is_untolerated = find_untolerated_taint(_node_taints(new), tolerations, DO_NOT_SCHEDULE_EFFECTS,
                                                self.comparison_operators) is not None
        return QueueingHint.Queue if was_untolerated and not is_untolerated else QueueingHint.QueueSkip

    @staticmethod
    def _after_pod_toleration_change(pod: dict, _old: Any, new: Any) -> QueueingHint:
        """Only the rejected pod's own toleration change can help it."""
        return QueueingHint.Queue if is_same_pod(pod, new) else QueueingHint.QueueSkip


def _node_taints(node: Mapping) -> list[Taint]:
    return [Taint.from_dict(t) for t in ((node.get("spec") or {}).get("taints") or [])]
