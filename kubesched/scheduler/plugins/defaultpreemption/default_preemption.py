"""DefaultPreemption: when no node fits a pod, evict lower-priority pods from the node where that
helps most (upstream ``plugins/defaultpreemption``).

The policy lives here: who may preempt (not ``preemptionPolicy: Never``, not while victims of an
earlier preemption are still terminating on the nominated node), who may be a victim (lower
priority, plus the ``is_eligible_pod`` hook), the order victims are reprieved in
(``more_important_pod``) and how many candidate nodes to dry-run. The search, the node-picking
criteria and the evictions are the generic ``Evaluator`` of ``kubesched.scheduler.plugins.defaultpreemption.preemption``.

With SchedulerAsyncPreemption (beta, on in 1.35) the evictions run after the cycle and PreEnqueue
keeps the preemptor out of activeQ until they are done.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.config.args import DefaultPreemptionArgs
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    EnqueueExtensions,
    PostFilterOutcome,
    PostFilterPlugin,
    PreEnqueuePlugin,
)
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins.defaultpreemption._dry_run import KeptSelections, VictimSelector
from kubesched.scheduler.plugins.defaultpreemption.preemption import (
    DISRUPTION_TARGET,
    REASON_PREEMPTION_BY_SCHEDULER,
    Evaluator,
    ParsedPDB,
    PreemptionInterface,
    VictimSelection,
    importance_key,
)

NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
WAITING_FOR_PREEMPTION = "waiting for the preemption for this pod to be finished"

#: ``IsEligiblePodFunc``: may ``victim`` on ``node`` be preempted by ``preemptor`` (besides having lower priority)?
IsEligiblePod = Callable[[NodeInfo, PodInfo, PodInfo], bool]
#: ``MoreImportantPodFunc``: is the first pod more important (to be reprieved before) the second?
MoreImportantPod = Callable[[PodInfo, PodInfo], bool]


class DefaultPreemption(PostFilterPlugin, PreEnqueuePlugin, EnqueueExtensions, PreemptionInterface):
    name = names.DefaultPreemption
    Args = DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None = None, handle: Any = None) -> None:
        if args is None:
            args = DefaultPreemptionArgs()
        errors = args.validate()
        if errors:
            raise ValueError("; ".join(str(e) for e in errors))
        super().__init__(args, handle)
        self.args: DefaultPreemptionArgs = args
        gates = getattr(handle, "feature_gates", None)
        self.enable_async = gates.enabled("SchedulerAsyncPreemption") if gates is not None else True
        self.evaluator = Evaluator(self.name, handle, self, self.enable_async)
        #: Extra victim filter (upstream ``IsEligiblePod``); None lets every lower-priority pod be a victim.
        self.is_eligible_pod: IsEligiblePod | None = None
        #: Victim ordering (upstream ``MoreImportantPod``); None is priority, then earlier start time.
        self.more_important_pod: MoreImportantPod | None = None
        #: The random start offset (upstream ``getOffsetRand``); None uses the scheduler's seeded source.
        self.offset_rand: Callable[[int], int] | None = None
        #: Dry-run answers kept for the next preemptor of the same shape.
        self._kept = KeptSelections()

    # --- PostFilter -----------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: Any) -> PostFilterOutcome | Awaitable[PostFilterOutcome]:
        """Preempt; when extenders take part, an awaitable (they answer over HTTP)."""
        if self.evaluator.extenders_to_consult(pod):
            return self._post_filter_with_extenders(state, pod, statuses)
        try:
            outcome = self.evaluator.preempt(state, pod, statuses)
        finally:
            self._count_attempt()
        return _prefixed(outcome)

    async def _post_filter_with_extenders(self, state: CycleState, pod: PodInfo, statuses: Any) -> PostFilterOutcome:
        try:
            outcome = await self.evaluator.preempt_with_extenders(state, pod, statuses)
        finally:
            self._count_attempt()
        return _prefixed(outcome)

    def _count_attempt(self) -> None:
        metrics = self.handle.ctx.metrics if self.handle is not None else None
        if metrics is not None:
            metrics.preemption_attempts.inc()

    # --- PreEnqueue and queueing hints ------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Hold a preemptor back while its victims are still being evicted."""
        if not self.enable_async:
            return None
        if self.evaluator.executor.is_pod_running_preemption(pod.uid):
            return Status(Code.UnschedulableAndUnresolvable, WAITING_FOR_PREEMPTION)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A gated preemptor may pass PreEnqueue again after a pod deletion; whether it is worth
        retrying is for the plugins that rejected it to say, so this hint always skips."""
        if not self.enable_async:
            return []
        return [ClusterEventWithHint(ClusterEvent(Resource.AssignedPod, ActionType.Delete), _skip)]

    # --- PreemptionInterface ------------------------------------------------------------------
    def calculate_num_candidates(self, num_nodes: int) -> int:
        """How many candidates the dry run should find: a percentage of the nodes, at least the
        absolute minimum, at most all nodes."""
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        rand = self.offset_rand if self.offset_rand is not None else self.framework.ctx.rng.randrange
        return rand(num_nodes), self.calculate_num_candidates(num_nodes)

    def pod_eligible_to_preempt_others(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        """Not with ``preemptionPolicy: Never``; and not while an earlier preemption's victims are
        still terminating on the pod's nominated node (unless that node became unresolvable)."""
        if pod.spec.get("preemptionPolicy") == "Never":
            return False, NOT_ELIGIBLE_NEVER
        nominated = pod.nominated_node_name
        if nominated:
            if nominated_node_status is not None and nominated_node_status.code == Code.UnschedulableAndUnresolvable:
                return True, ""
            info = self.framework.snapshot.get(nominated)
            if info is not None:
                for p in info.pods.values():
                    if self.is_preemption_allowed(info, p, pod) and pod_terminating_by_preemption(p):
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def select_victims_on_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                                pdbs: list[ParsedPDB], thorough: bool = False) -> list[VictimSelection]:
        eligible = self.is_eligible_pod
        allowed = None if eligible is None else (lambda info, victim: eligible(info, victim, pod))
        kept = self._kept if eligible is None and self.more_important_pod is None else None
        selector = VictimSelector(self.framework, state, pod, allowed, self._sorter(), pdbs, thorough, kept)
        return selector.select(nodes)

    def select_victims_on_node(self, state: CycleState, pod: PodInfo, node: NodeInfo,
                               pdbs: list[ParsedPDB]) -> VictimSelection:
        """Upstream ``SelectVictimsOnNode`` for a single node (always with the node's own status)."""
        return self.select_victims_on_nodes(state, pod, [node], pdbs, thorough=True)[0]

    def is_preemption_allowed(self, node: NodeInfo, victim: PodInfo, preemptor: PodInfo) -> bool:
        """A victim must have lower priority than the preemptor and pass ``is_eligible_pod``."""
        if victim.priority >= preemptor.priority:
            return False
        return self.is_eligible_pod is None or self.is_eligible_pod(node, victim, preemptor)

    def _sorter(self) -> Callable[[list[PodInfo]], list[PodInfo]]:
        """Most important first: stable, so pods tied on priority and start time keep node order."""
        custom = self.more_important_pod
        if custom is None:
            key = importance_key(self.framework.clock.wall())
            return lambda pods: sorted(pods, key=key)

        def compare(a: PodInfo, b: PodInfo) -> int:
            return -1 if custom(a, b) else (1 if custom(b, a) else 0)

        return lambda pods: sorted(pods, key=functools.cmp_to_key(compare))


def pod_terminating_by_preemption(pod: PodInfo) -> bool:
    """Whether the pod is terminating because the scheduler preempted it (its DisruptionTarget
    condition says PreemptionByScheduler)."""
    if not pod.deletion_timestamp:
        return False
    for condition in pod.status.get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET:
            return condition.get("status") == "True" and condition.get("reason") == REASON_PREEMPTION_BY_SCHEDULER
    return False


def _skip(_pod: dict, _old: Any, _new: Any) -> QueueingHint:
    return QueueingHint.QueueSkip


def _prefixed(outcome: PostFilterOutcome) -> PostFilterOutcome:
    """Preemption's messages start with "preemption: ", as upstream's PostFilter status does."""
    result, status = outcome
    if status is not None and status.message():
        return result, Status(status.code, "preemption: " + status.message())
    return result, status
