"""CapacityScheduling: namespaces share the cluster through ElasticQuotas, borrowing each
other's unused guaranteed capacity and getting it back by preemption (scheduler-plugins
``pkg/capacityscheduling/capacity_scheduling.go``).

PreFilter refuses a pod whose namespace would exceed its ``max``, or that would make the quota'd
namespaces together use more than the sum of their ``min`` (counting higher-priority pods
already nominated). PostFilter is its own preemption: a pod whose namespace is within its
``min`` may evict pods of namespaces that use more than theirs (borrowers), whatever their
priority; a pod of a namespace beyond its ``min`` may only evict lower-priority pods of its own
namespace. Pods of namespaces without a quota preempt as DefaultPreemption does among themselves.

Usage is that of the pods on the cycle's snapshot (assigned and assumed), which a node table
extension keeps per namespace as pods come and go, so it is exact at every cycle without the
plugin tracking pods itself; Reserve and Unreserve have nothing to add.
"""

from __future__ import annotations

from typing import Any, ClassVar

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.contrib.capacityscheduling.elasticquota import (
    GROUP,
    PLURAL,
    VERSION,
    ElasticQuotaInfos,
    InvalidElasticQuota,
    Resources,
    add_into,
    parse_infos,
    pod_request,
)
from kubesched.contrib.capacityscheduling.usage import namespace_usage
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, Resource
from kubesched.scheduler.framework.interface import (
    EnqueueExtensions,
    PostFilterOutcome,
    PostFilterPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kubesched.scheduler.framework.status import Code, Status, is_success
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins.defaultpreemption.preemption import (
    Evaluator,
    ParsedPDB,
    PreemptionInterface,
    VictimSelection,
    filter_pods_with_pdb_violation,
    importance_key,
)

PRE_FILTER_STATE_KEY = "PreFilterCapacityScheduling"
ELASTIC_QUOTA_SNAPSHOT_KEY = "ElasticQuotaSnapshot"
#: The cluster event an ElasticQuota change is (upstream's GVK form).
ELASTIC_QUOTA_RESOURCE = Resource.custom(GROUP, VERSION, PLURAL)
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."


class PreFilterState:
    """The pod's request, and with it the requests of the nominated pods that count against the
    same quota (``in_eq``) or against the quotas' total (``total``)."""

    def __init__(self, pod_req: Resources, in_eq: Resources, total: Resources) -> None:
        self.pod_req = pod_req
        self.in_eq = in_eq
        self.total = total

    def clone(self) -> PreFilterState:
        return self


class ElasticQuotaSnapshot:
    """The quotas as this cycle sees them; preemption's dry runs change clones of it."""

    def __init__(self, infos: ElasticQuotaInfos) -> None:
        self.infos = infos

    def clone(self) -> ElasticQuotaSnapshot:
        return ElasticQuotaSnapshot(self.infos.clone())


class CapacityScheduling(PreFilterPlugin, PreFilterExtensions, PostFilterPlugin, ReservePlugin, EnqueueExtensions,
                         PreemptionInterface):
    """Upstream ``capacityscheduling.CapacityScheduling``; takes no args."""

    name = "CapacityScheduling"
    crds: ClassVar[tuple[str, ...]] = ("crds/scheduling.x-k8s.io_elasticquotas.yaml",)

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        #: ElasticQuotas, through an informer the scheduler starts with its others.
        self.quotas = self.framework.custom_objects(GROUP, VERSION, PLURAL)
        #: The quota objects last parsed, and what they parsed to (usage left empty).
        self._parsed: tuple[list[dict], ElasticQuotaInfos] = ([], ElasticQuotaInfos())
        #: The cycle state of the PostFilter call in progress (eligibility reads the quotas from it).
        self._cycle_state: CycleState | None = None
        gates = getattr(handle, "feature_gates", None)
        enable_async = gates.enabled("SchedulerAsyncPreemption") if gates is not None else True
        self.evaluator = Evaluator(self.name, handle, self, enable_async)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A deleted pod frees quota; any ElasticQuota change may admit a pod."""
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.Delete)),
            ClusterEventWithHint(ClusterEvent(ELASTIC_QUOTA_RESOURCE, ActionType.All)),
        ]

    # --- the quotas ------------------------------------------------------------------------------------
    def snapshot_elastic_quota(self) -> ElasticQuotaSnapshot:
        """Every namespace's quota with the use of its pods on the cycle's nodes, read from the
        node table's per-namespace usage (kept as pods come and go) rather than summed again."""
        infos = self._parsed_quotas().clone()
        usage = namespace_usage(self.framework.snapshot)
        for namespace, info in infos.items():
            used = usage.usage(namespace)
            if used is not None:
                info.used = dict(used.used)
                info.pods = set(used.pods)
        return ElasticQuotaSnapshot(infos)

    def _parsed_quotas(self) -> ElasticQuotaInfos:
        """The ElasticQuotas parsed, without usage; parsed again only when the informer's objects
        changed (an update replaces the object, so identity tells)."""
        quotas = self.quotas.list()
        cached, infos = self._parsed
        if len(cached) != len(quotas) or any(a is not b for a, b in zip(cached, quotas, strict=True)):
            infos = parse_infos(quotas)
            self._parsed = (quotas, infos)
        return infos

    # --- PreFilter -------------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        """Refuse a pod over its namespace's ``max``, or over the quotas' total ``min``."""
        try:
            snapshot = self.snapshot_elastic_quota()
        except InvalidElasticQuota as e:
            return None, Status(Code.UnschedulableAndUnresolvable, str(e))
        state.write(ELASTIC_QUOTA_SNAPSHOT_KEY, snapshot)
        infos = snapshot.infos
        pod_req = pod_request(pod)
        eq = infos.get(pod.namespace)
        if eq is None:
            state.write(PRE_FILTER_STATE_KEY, PreFilterState(pod_req, {}, {}))
            return None, None
        in_eq, total = self._nominated_requests(pod, infos)
        add_into(in_eq, pod_req)
        add_into(total, pod_req)
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(pod_req, in_eq, total))
        if eq.used_over_max_with(in_eq):
            return None, Status(Code.Unschedulable, f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter "
                                                    f"because ElasticQuota {eq.namespace} is more than Max")
        if infos.aggregated_used_over_min_with(total):
            return None, Status(Code.Unschedulable, f"Pod {pod.namespace}/{pod.name} is rejected in PreFilter "
                                                    "because total ElasticQuota used is more than min")
        return None, None

    def _nominated_requests(self, pod: PodInfo, infos: ElasticQuotaInfos) -> tuple[Resources, Resources]:
        """Requests of pods nominated anywhere that count before this one: of its own quota with
        at least its priority (both sums), of other quotas within their ``min`` (the total only)."""
        in_eq: Resources = {}
        total: Resources = {}
        table = self.framework.snapshot
        for info in table.infos[: table.n]:
            for other in self.framework.nominated_pods_for_node(info.name):
                if other.uid == pod.uid:
                    continue
                quota = infos.get(other.namespace)
                if quota is None:
                    continue
                if other.namespace == pod.namespace and other.priority >= pod.priority:
                    add_into(in_eq, pod_request(other))
                    add_into(total, pod_request(other))
                elif other.namespace != pod.namespace and not quota.used_over_min():
                    add_into(total, pod_request(other))
        return in_eq, total

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        snapshot = state.get(ELASTIC_QUOTA_SNAPSHOT_KEY)
        if snapshot is None:
            return Status.from_error(KeyError(f'error reading "{ELASTIC_QUOTA_SNAPSHOT_KEY}" from cycleState'))
        quota = snapshot.infos.get(pod_to_add.namespace)
        if quota is not None:
            quota.add_pod_if_not_present(pod_to_add)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        snapshot = state.get(ELASTIC_QUOTA_SNAPSHOT_KEY)
        if snapshot is None:
            return Status.from_error(KeyError(f'error reading "{ELASTIC_QUOTA_SNAPSHOT_KEY}" from cycleState'))
        quota = snapshot.infos.get(pod_to_remove.namespace)
        if quota is not None:
            quota.delete_pod_if_present(pod_to_remove)
        return None

    # --- Reserve -----------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """The assumed pod is on its node in the next cycle's snapshot, where its use is counted."""
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """The forgotten pod leaves the next cycle's snapshot, and its use with it."""
        return None

    # --- PostFilter --------------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Any) -> PostFilterOutcome:
        """Preemption by the quota rules (the generic evaluator with this plugin's victim choice).
        The evaluator asks about eligibility without the cycle state, which the quota rules need:
        it is kept for the call, as upstream's ``preemptor`` holds it."""
        self._cycle_state = state
        try:
            return self.evaluator.preempt(state, pod, statuses)
        finally:
            self._cycle_state = None
            metrics = self.framework.ctx.metrics
            if metrics is not None:
                metrics.preemption_attempts.inc()

    # --- PreemptionInterface -----------------------------------------------------------------------
    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """Every node, from the first: upstream's plugin does not sample."""
        return 0, num_nodes

    def pod_eligible_to_preempt_others(self, pod: PodInfo, nominated_node_status: Status | None) -> tuple[bool, str]:
        """Not with ``preemptionPolicy: Never``; not while a pod it could have evicted is still
        terminating on its nominated node (that room is coming)."""
        if pod.spec.get("preemptionPolicy") == "Never":
            return False, NOT_ELIGIBLE_NEVER
        nominated = pod.nominated_node_name
        if not nominated:
            return True, ""
        if nominated_node_status is not None and nominated_node_status.code == Code.UnschedulableAndUnresolvable:
            return True, ""
        node = self.framework.snapshot.get(nominated)
        state = self._cycle_state
        if node is None or state is None:
            return True, ""
        eq_snapshot, pre = state.get(ELASTIC_QUOTA_SNAPSHOT_KEY), state.get(PRE_FILTER_STATE_KEY)
        if eq_snapshot is None or pre is None:
            return True, ""
        infos: ElasticQuotaInfos = eq_snapshot.infos
        preemptor_eq = infos.get(pod.namespace)
        over_min = preemptor_eq is not None and preemptor_eq.used_over_min_with(pre.in_eq)
        for other in node.pods.values():
            if not other.deletion_timestamp:
                continue
            other_eq = infos.get(other.namespace)
            if preemptor_eq is None:
                if other_eq is None and other.priority < pod.priority:
                    return False, NOT_ELIGIBLE_TERMINATING
                continue
            if other_eq is None:
                continue
            if other.namespace == pod.namespace and other.priority < pod.priority:
                return False, NOT_ELIGIBLE_TERMINATING
            if other.namespace != pod.namespace and not over_min and other_eq.used_over_min():
                return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def select_victims_on_nodes(self, state: CycleState, pod: PodInfo, nodes: list[NodeInfo],
                                pdbs: list[ParsedPDB], thorough: bool = False) -> list[VictimSelection]:
        return [self.select_victims_on_node(state.clone(), pod, node.clone(), pdbs) for node in nodes]

    def select_victims_on_node(self, state: CycleState, pod: PodInfo, node: NodeInfo, pdbs: list[ParsedPDB]) -> VictimSelection:
        """Upstream ``SelectVictimsOnNode`` of CapacityScheduling, on copies of the state and node."""
        eq_snapshot = state.get(ELASTIC_QUOTA_SNAPSHOT_KEY)
        pre = state.get(PRE_FILTER_STATE_KEY)
        if eq_snapshot is None:
            return VictimSelection([], 0, Status(Code.Unschedulable, "Failed to read elasticQuotaSnapshot from cycleState"))
        if pre is None:
            return VictimSelection([], 0, Status(Code.Unschedulable, "Failed to read preFilterState from cycleState"))
        fw = self.framework
        infos: ElasticQuotaInfos = eq_snapshot.infos
        preemptor_eq = infos.get(pod.namespace)

        def remove(victim: PodInfo) -> Status | None:
            node.remove_pod(victim.uid)
            return fw.run_pre_filter_extension_remove_pod(state, pod, victim, node)

        def add(victim: PodInfo) -> Status | None:
            node.add_pod(victim)
            return fw.run_pre_filter_extension_add_pod(state, pod, victim, node)

        over_min = preemptor_eq is not None and preemptor_eq.used_over_min_with(pre.in_eq)
        potential = [p for p in self._by_importance(list(node.pods.values()), reverse=True)
                     if _may_evict(pod, p, infos, over_min)]
        for victim in potential:
            status = remove(victim)
            if not is_success(status):
                return VictimSelection([], 0, status)
        if not potential:
            return VictimSelection([], 0, Status(Code.UnschedulableAndUnresolvable,
                                                 f"No victims found on node {node.name} for preemptor pod {pod.name}"))
        status = fw.run_filters_with_nominated_pods(state, pod, node)
        if not is_success(status):
            return VictimSelection([], 0, status)
        if preemptor_eq is not None and (preemptor_eq.used_over_max_with(pre.pod_req)
                                         or infos.aggregated_used_over_min_with(pre.pod_req)):
            return VictimSelection([], 0, Status(Code.Unschedulable, "global quota max exceeded"))
        victims: list[PodInfo] = []
        violating, non_violating = filter_pods_with_pdb_violation(self._by_importance(potential), pdbs)

        def reprieve(candidate: PodInfo) -> bool:
            add(candidate)
            fits = is_success(fw.run_filters_with_nominated_pods(state, pod, node))
            over_quota = preemptor_eq is not None and (preemptor_eq.used_over_max_with(pre.in_eq)
                                                       or infos.aggregated_used_over_min_with(pre.total))
            if not fits or over_quota:
                remove(candidate)
                victims.append(candidate)
            return fits

        num_violating = sum(1 for candidate in violating if not reprieve(candidate))
        for candidate in non_violating:
            reprieve(candidate)
        return VictimSelection(victims, num_violating, None)

    def _by_importance(self, pods: list[PodInfo], reverse: bool = False) -> list[PodInfo]:
        ordered = sorted(pods, key=importance_key(self.framework.clock.wall()))
        return ordered[::-1] if reverse else ordered


def _may_evict(pod: PodInfo, victim: PodInfo, infos: ElasticQuotaInfos, preemptor_over_min: bool) -> bool:
    """Whether ``victim`` is a potential victim of ``pod``. A preemptor beyond its ``min`` only
    takes from lower-priority pods of its own namespace; one within its ``min`` takes back from
    the namespaces using more than theirs, whatever their priority; without a quota, from
    lower-priority pods without one."""
    preemptor_eq = infos.get(pod.namespace)
    victim_eq = infos.get(victim.namespace)
    if preemptor_eq is None:
        return victim_eq is None and victim.priority < pod.priority
    if victim_eq is None:
        return False
    if preemptor_over_min:
        return victim.namespace == pod.namespace and victim.priority < pod.priority
    return victim.namespace != pod.namespace and victim_eq.used_over_min()


__all__ = ["ELASTIC_QUOTA_RESOURCE", "CapacityScheduling"]
