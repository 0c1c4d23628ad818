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
)
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
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
def _decimal_int64(text: str) -> int | None:
    """``content.IsDecimalInteger`` then ``strconv.ParseInt``: canonical base-10, no leading zeros or '+'."""
    if not _DECIMAL_INTEGER.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def tolerates(toleration: Toleration, taint: Taint, comparison_operators: bool = False) -> bool:
    """Whether one toleration tolerates one taint; Lt/Gt compare integers when the gate is on."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    op = toleration.operator
    if op in ("", "Equal"):
        return toleration.value == taint.value
    if op == "Exists":
        return True
    if op in ("Lt", "Gt") and comparison_operators:
        wanted, actual = _decimal_int64(toleration.value), _decimal_int64(taint.value)
        if wanted is None or actual is None:
            return False
        return actual < wanted if op == "Lt" else actual > wanted
    return False


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
    return lookup[sigs]


class _PreScoreState:
    __slots__ = ("tolerations",)

    def __init__(self, tolerations: tuple[Toleration, ...]) -> None:
        self.tolerations = tolerations

    def clone(self) -> _PreScoreState:
        return self


class TaintToleration(BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.TaintToleration

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        gates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        self.comparison_operators = gates.enabled(COMPARISON_GATE)
        self._untolerated = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_UNTOLERATED)

    # --- Filter -----------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        sigs = nodes.col(nodes.table.taint_sig)
        if not sigs.any():
            return None
        tolerations = pod.tolerations
        cmp_ops = self.comparison_operators

        def untolerated(taints: tuple[Taint, ...]) -> bool:
            return find_untolerated_taint(taints, tolerations, DO_NOT_SCHEDULE_EFFECTS, cmp_ops) is not None

        failed = per_signature(nodes.table, sigs, untolerated, bool)
        return FilterVerdict.fail_where(failed, self._untolerated)

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
