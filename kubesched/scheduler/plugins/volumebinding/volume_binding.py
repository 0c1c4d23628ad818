"""VolumeBinding: a pod's PersistentVolumeClaims must be bound, or bindable on the node
(upstream ``volumebinding``).

* PreFilter rejects pods whose claims are missing, lost, being deleted or still waiting for the
  PV controller (Immediate binding), and sorts the rest into bound and WaitForFirstConsumer claims.
* Filter evaluates every node at once (``_volume_binder.find``): bound PVs' node affinity, the
  available PVs each unbound claim could take there, and dynamic provisioning (StorageClass
  allowedTopologies, CSIStorageCapacity).
* Reserve assumes the chosen PV bindings and ``selected-node`` annotations in in-memory caches so
  the next pods see them; PreBind writes them through the API and waits (``bindTimeoutSeconds``)
  until the PV controller has bound every claim; Unreserve forgets the assumptions.
* Score (only with the StorageCapacityScoring gate) prefers nodes by how full the chosen PVs or
  the storage pools of the provisioned claims would be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kubesched.api.kinds import known_kind
from kubesched.api.types import PodInfo
from kubesched.api.volume import (
    ANN_MIGRATED_PLUGINS,
    ANN_SELECTED_NODE,
    CLAIM_LOST,
    WAIT_FOR_FIRST_CONSUMER,
    annotations_of,
    bind_volume_to_claim,
    binding_mode,
    claim_class,
    csi_migration_on,
    is_pvc_fully_bound,
    meta,
    migrated_plugins,
    name_of,
    node_selector_matches,
    node_selector_of,
    not_found,
    pv_capacity,
    pv_facts,
    pv_plugin,
    quantity_value,
    requested_storage,
    resource_version,
    spec,
    translate_pv,
    translation_error,
    volume_is_for_pod,
    volume_limit,
)
from kubesched.scheduler.config.args import VolumeBindingArgs
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    SignFragment,
    SignPlugin,
)
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._resource_allocation import MAX_CUSTOM_PRIORITY_SCORE, broken_linear
from kubesched.scheduler.plugins.volumebinding._binder import (
    REASONS,
    AssumeCache,
    AssumeError,
    Evaluation,
    FindError,
    Lookups,
    PodClaims,
    PodVolumes,
    find,
    pv_class_name,
    pvc_key,
)
from kubesched.scheduler.plugins.volumeutil.batch import ChangeFeed, ClassIndex, CSINodeViews
from kubesched.scheduler.plugins.volumeutil.claims import pod_claims, queue_if_claim_of_pod

STATE_KEY = names.VolumeBinding
MAX_UTILIZATION = 100
POLL_INTERVAL = 1.0
PV_KIND = known_kind("PersistentVolume")
PVC_KIND = known_kind("PersistentVolumeClaim")


class _State:
    """The pod's claims (PreFilter), every Filter evaluation, and the chosen node's plan."""

    __slots__ = ("all_bound", "claims", "evaluations", "has_static", "plans", "skip")

    def __init__(self, claims: PodClaims | None = None) -> None:
        self.skip = claims is None
        self.claims = claims
        self.evaluations: list[Evaluation] = []
        self.has_static = False
        self.all_bound = False
        self.plans: dict[str, PodVolumes | None] = {}

    def clone(self) -> _State:
        """Shared, as upstream's pointer: preemption's Filter results land in the same state."""
        return self

    def pod_volumes(self, node_name: str) -> PodVolumes | None:
        """The node's plan from the latest evaluation it passed (upstream ``podVolumesByNode``),
        derived once (Reserve is first): later phases must not re-derive it from the evaluations'
        row numbers, which may by then name other nodes."""
        if node_name not in self.plans:
            self.plans[node_name] = self._find_plan(node_name)
        return self.plans[node_name]

    def _find_plan(self, node_name: str) -> PodVolumes | None:
        for ev in reversed(self.evaluations):
            position = ev.position(node_name)
            if position is not None:
                return ev.plan(position)
        return None


class BindingError(Exception):
    pass


class VolumeBinding(SignPlugin, PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, ReservePlugin, PreBindPlugin,
                    EnqueueExtensions):
    name = names.VolumeBinding
    Args = VolumeBindingArgs

    def __init__(self, args: VolumeBindingArgs | None = None, handle: Any = None) -> None:
        gates: FeatureGates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        if args is None:
            args = VolumeBindingArgs()
            args.set_defaults(gates)
        super().__init__(args, handle)
        self.gates = gates
        self.bind_timeout = float(args.bind_timeout_seconds)
        self.capacity_scoring = gates.enabled("StorageCapacityScoring")
        self.vac_enabled = gates.enabled("VolumeAttributesClass")
        self.scorer: Callable[[np.ndarray], np.ndarray] | None = None
        if self.capacity_scoring:
            scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            self.scorer = broken_linear([(p.utilization, p.score * scale) for p in (args.shape or [])])
        self.pv_cache = AssumeCache(lambda: self._objects("PersistentVolume"), "v1.PersistentVolume")
        self.pvc_cache = AssumeCache(lambda: self._objects("PersistentVolumeClaim"), "v1.PersistentVolumeClaim")
        self._csinodes = CSINodeViews(ChangeFeed(handle, ("CSINode",), window=0) if handle is not None else None)
        self._pv_classes = ClassIndex(ChangeFeed(handle, ("PersistentVolume",)) if handle is not None else None,
                                      lambda pv: pv_facts(pv).cls)

    def _objects(self, kind: str) -> Mapping[str, dict]:
        return self.handle.objects(kind) if self.handle is not None else {}

    # --- PreFilter ----------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.volumes(pod)]

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        fragment = signers.claimless_volumes(pod)
        return fragment if isinstance(fragment, Status) else [fragment]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not pod_claims(pod):
            state.write(STATE_KEY, _State())
            return None, Status(Code.Skip)
        message = self._pvc_problem(pod)
        if message is not None:
            return None, Status(Code.UnschedulableAndUnresolvable, message)
        try:
            claims = self.pod_volume_claims(pod)
        except BindingError as e:
            return None, Status.from_error(e)
        if claims.unbound_immediate:
            return None, Status(Code.UnschedulableAndUnresolvable, "pod has unbound immediate PersistentVolumeClaims")
        state.write(STATE_KEY, _State(claims))
        return None, None

    def _pvc_problem(self, pod: PodInfo) -> str | None:
        """``podHasPVCs``: the first claim that is missing, lost, being deleted or not the pod's own."""
        pvcs = self._objects("PersistentVolumeClaim")
        for ref in pod_claims(pod):
            pvc = pvcs.get(f"{pod.namespace}/{ref.claim}")
            if pvc is None:
                if ref.ephemeral:
                    return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{ref.claim}"'
                return not_found("persistentvolumeclaim", ref.claim)
            if (pvc.get("status") or {}).get("phase") == CLAIM_LOST:
                return f'persistentvolumeclaim "{ref.claim}" bound to non-existent persistentvolume "{spec(pvc).get("volumeName", "")}"'
            if meta(pvc).get("deletionTimestamp"):
                return f'persistentvolumeclaim "{ref.claim}" is being deleted'
            if ref.ephemeral:
                problem = volume_is_for_pod(pod.namespace, pod.name, pod.uid, pvc)
                if problem is not None:
                    return problem
        return None

    def pod_volume_claims(self, pod: PodInfo) -> PodClaims:
        """``GetPodVolumeClaims``: bound, unbound WaitForFirstConsumer and unbound Immediate claims
        (from the assume cache), and the PVs of the unbound claims' classes."""
        out = PodClaims()
        classes = self._objects("StorageClass")
        for ref in pod_claims(pod):
            key = f"{pod.namespace}/{ref.claim}"
            pvc = self.pvc_cache.get(key)
            if pvc is None:
                raise BindingError(f'error getting PVC "{key}": {self.pvc_cache.not_found(key)}')
            if ref.ephemeral:
                problem = volume_is_for_pod(pod.namespace, pod.name, pod.uid, pvc)
                if problem is not None:
                    raise BindingError(problem)
            if is_pvc_fully_bound(pvc):
                out.bound.append((pvc, self.pv_cache.get(spec(pvc).get("volumeName", ""))))
            elif self._delay_binding(pvc, classes) and not spec(pvc).get("volumeName"):
                out.unbound_delay.append(pvc)
            else:
                out.unbound_immediate.append(pvc)
        for cls in {claim_class(pvc) for pvc in out.unbound_delay}:
            out.unbound_volumes[cls] = self._class_volumes(cls)
        return out

    def _class_volumes(self, cls: str) -> list[dict]:
        """The class's PVs as the assume cache has them (``ListPVs``), in the informer's order."""
        out = []
        for name in self._pv_classes.names(self._objects("PersistentVolume"), cls):
            pv = self.pv_cache.get(name)
            if pv is not None:
                out.append(pv)
        return out

    @staticmethod
    def _delay_binding(pvc: Mapping, classes: Mapping[str, Mapping]) -> bool:
        """``IsDelayBindingMode``."""
        cls = claim_class(pvc)
        if not cls or cls not in classes:
            return False
        mode = binding_mode(classes[cls])
        if mode is None:
            raise BindingError(f'VolumeBindingMode not set for StorageClass "{cls}"')
        return mode == WAIT_FOR_FIRST_CONSUMER

    # --- Filter ---------------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return FilterVerdict.all_fail(len(nodes), Status.from_error(RuntimeError("not found")))
        if s.skip or s.claims is None:
            return None
        try:
            ev = find(s.claims, nodes, self._lookups(s.claims, nodes))
        except FindError as e:
            return FilterVerdict.all_fail(len(nodes), Status.from_error(e))
        s.evaluations.append(ev)
        s.has_static = s.has_static or ev.has_static()
        if not ev.reasons.any():
            return None
        statuses = {int(bits): Status(Code.UnschedulableAndUnresolvable, *[r for bit, r in REASONS if bits & bit])
                    for bits in np.unique(ev.reasons) if bits}
        return FilterVerdict.from_keys(ev.reasons, statuses)

    def _lookups(self, claims: PodClaims, nodes: NodeBatch) -> Lookups:
        needs_csinodes = any(pv is not None and pv_plugin(pv) is not None for _, pv in claims.bound)
        return Lookups(
            classes=self._objects("StorageClass"),
            csidrivers=self._objects("CSIDriver"),
            capacities=list(self._objects("CSIStorageCapacity").values()) if claims.unbound_delay else [],
            csinodes=self._csinodes.view(nodes.table, self._objects("CSINode")) if needs_csinodes else None,
            vac_enabled=self.vac_enabled,
        )

    # --- Score ----------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        if self.scorer is None:
            return Status(Code.Skip)
        s = state.get(STATE_KEY)
        if s is None:
            return Status.from_error(RuntimeError("not found"))
        if s.has_static or self.capacity_scoring:
            return None
        return Status(Code.Skip)

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        scores = np.zeros(len(nodes), dtype=np.int64)
        s = state.get(STATE_KEY)
        if self.scorer is None or s is None or s.skip:
            return scores
        done = np.zeros(len(nodes), dtype=bool)
        rows = nodes.row_ids()
        for ev in reversed(s.evaluations):
            if ev.table is not nodes.table:
                continue
            lookup = np.full(nodes.table.capacity, -1, dtype=np.int64)
            lookup[ev.rows] = np.arange(len(ev.rows))
            positions = lookup[rows]
            hit = ~done & (positions >= 0)
            hit[hit] = ev.reasons[positions[hit]] == 0
            if hit.any():
                scores[hit] = self._score_evaluation(ev, positions[hit], self.scorer)
                done |= hit
        return scores

    def _score_evaluation(self, ev: Evaluation, positions: np.ndarray, scorer: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Per node, the mean over storage classes of the shape's score for requested / capacity."""
        n = len(positions)
        acc: dict[str, list[np.ndarray]] = {}

        def bucket(cls: str) -> list[np.ndarray]:
            if cls not in acc:
                acc[cls] = [np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)]
            return acc[cls]

        static = np.zeros(n, dtype=bool)
        if ev.choices is not None and len(ev.choices):
            chosen = ev.choices[:, positions]
            static = np.asarray((chosen >= 0).any(axis=0))
            for i, pvc in enumerate(ev.match_claims):
                claim_request = quantity_value(requested_storage(pvc))
                for idx in np.unique(chosen[i][chosen[i] >= 0]):
                    pv = ev.pvs[int(idx)]
                    m = chosen[i] == idx
                    b = bucket(pv_class_name(pv))
                    b[0][m] += claim_request
                    b[1][m] += quantity_value(pv_capacity(pv))
                    b[2] |= m
        if ev.provision_capacity is not None:
            slots = ev.provision_capacity[:, positions]
            for j, pvc in enumerate(ev.provision_claims):
                has = (slots[j] >= 0) & ~static
                if not has.any():
                    continue
                b = bucket(spec(pvc).get("storageClassName") or claim_class(pvc))
                for idx in np.unique(slots[j][has]):
                    m = has & (slots[j] == idx)
                    b[1][m] = quantity_value(ev.capacities[int(idx)].get("capacity"))
                b[0][has] += quantity_value(requested_storage(pvc))
                b[2] |= has
        total = np.zeros(n, dtype=np.int64)
        count = np.zeros(n, dtype=np.int64)
        for requested, capacity, present in acc.values():
            safe = np.where(capacity == 0, 1, capacity)
            util = np.where((capacity == 0) | (requested > capacity), MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
            total += np.where(present, scorer(util), 0)
            count += present
        mean = total / np.maximum(count, 1)
        return np.where(count > 0, np.floor(mean + 0.5), 0).astype(np.int64)

    # --- Reserve --------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return Status.from_error(RuntimeError("not found"))
        plan = s.pod_volumes(node_name)  # memoised, None included, for Unreserve and PreBind
        if plan is None:
            s.all_bound = True
            return None
        try:
            s.all_bound = self.assume_pod_volumes(pod, node_name, plan)
        except AssumeError as e:
            return Status.from_error(e)
        return None

    def assume_pod_volumes(self, pod: PodInfo, node_name: str, plan: PodVolumes) -> bool:
        """``AssumePodVolumes``: cache the PVs bound to their claims and the claims annotated with the
        selected node, so later pods see them taken. Returns whether everything was already bound."""
        if self.pod_volumes_bound(pod):
            return True
        assumed_pvs: list[str] = []
        new_bindings = []
        try:
            for binding in plan.static_bindings:
                new_pv, dirty = bind_volume_to_claim(binding.pv, binding.pvc)
                if dirty:
                    self.pv_cache.assume(name_of(new_pv), new_pv)
                    assumed_pvs.append(name_of(new_pv))
                new_bindings.append(type(binding)(binding.pvc, new_pv))
            assumed_pvcs: list[str] = []
            new_provisions = []
            try:
                for provision in plan.dynamic_provisions:
                    clone = _with_selected_node(provision.pvc, node_name)
                    self.pvc_cache.assume(pvc_key(clone), clone)
                    assumed_pvcs.append(pvc_key(clone))
                    new_provisions.append(type(provision)(clone, provision.capacity))
            except AssumeError:
                for key in assumed_pvcs:
                    self.pvc_cache.restore(key)
                raise
        except AssumeError:
            for name in assumed_pvs:
                self.pv_cache.restore(name)
            raise
        plan.static_bindings = new_bindings
        plan.dynamic_provisions = new_provisions
        return False

    def pod_volumes_bound(self, pod: PodInfo) -> bool:
        """``arePodVolumesBound``: every claim of the pod is fully bound in the assume cache."""
        for ref in pod_claims(pod):
            pvc = self.pvc_cache.get(f"{pod.namespace}/{ref.claim}")
            if pvc is None or not is_pvc_fully_bound(pvc):
                return False
            if ref.ephemeral and volume_is_for_pod(pod.namespace, pod.name, pod.uid, pvc) is not None:
                return False
        return True

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if s is None:
            return
        plan = s.pod_volumes(node_name)
        if plan is not None:
            self.revert(plan)

    def revert(self, plan: PodVolumes) -> None:
        for binding in plan.static_bindings:
            self.pv_cache.restore(name_of(binding.pv))
        for provision in plan.dynamic_provisions:
            self.pvc_cache.restore(pvc_key(provision.pvc))

    # --- PreBind --------------------------------------------------------------------------------------
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return Status.from_error(RuntimeError("not found"))
        if s.all_bound:
            return Status(Code.Skip)
        if s.pod_volumes(node_name) is None:
            return Status.from_error(RuntimeError(f'no pod volumes found for node "{node_name}"'))
        return None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return Status.from_error(RuntimeError("not found"))
        if s.all_bound:
            return None
        plan = s.pod_volumes(node_name)
        if plan is None:
            return Status.from_error(RuntimeError(f'no pod volumes found for node "{node_name}"'))
        try:
            await self.bind_pod_volumes(pod, node_name, plan)
        except Exception as e:
            return Status.from_error(e)
        return None

    async def bind_pod_volumes(self, pod: PodInfo, node_name: str, plan: PodVolumes) -> None:
        """``BindPodVolumes``: write the bindings and annotations, then poll every second until the PV
        controller has bound every claim, a check fails, or bindTimeoutSeconds pass."""
        await self._bind_api_update(plan)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bind_timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= POLL_INTERVAL:
                await asyncio.sleep(max(remaining, 0.0))
                raise BindingError("binding volumes: context deadline exceeded")
            await asyncio.sleep(POLL_INTERVAL)
            try:
                if self.check_bindings(pod, node_name, plan):
                    return
            except BindingError as e:
                raise BindingError(f"binding volumes: {e}") from e

    async def _bind_api_update(self, plan: PodVolumes) -> None:
        """``bindAPIUpdate``: update each PV (claimRef), then each claim (selected-node); assumptions
        not yet written are reverted when a write fails."""
        client = self.framework.client
        bindings, provisions = plan.static_bindings, plan.dynamic_provisions
        done_b = done_p = 0
        try:
            for binding in bindings:
                binding.pv = await client.update(PV_KIND, binding.pv)
                done_b += 1
            for provision in provisions:
                provision.pvc = await client.update(PVC_KIND, provision.pvc)
                done_p += 1
        finally:
            for binding in bindings[done_b:]:
                self.pv_cache.restore(name_of(binding.pv))
            for provision in provisions[done_p:]:
                self.pvc_cache.restore(pvc_key(provision.pvc))

    def check_bindings(self, pod: PodInfo, node_name: str, plan: PodVolumes) -> bool:
        """``checkBindings`` on the API objects (informer caches): True once every claim is fully
        bound; raises BindingError when binding must be retried from scratch."""
        node = self._objects("Node").get(node_name)
        if node is None:
            raise BindingError(f'failed to get node "{node_name}": {not_found("node", node_name)}')
        labels = meta(node).get("labels") or {}
        migrated = migrated_plugins(self._objects("CSINode").get(node_name))
        if self._objects("Pod").get(f"{pod.namespace}/{pod.name}") is None:
            raise BindingError(f'pod does not exist any more: {not_found("pod", pod.name)}')
        for binding in plan.static_bindings:
            name = name_of(binding.pv)
            pv = self.pv_cache.get_api(name)
            if pv is None:
                raise BindingError(f"failed to check binding: {self.pv_cache.not_found(name)}")
            pvc = self.pvc_cache.get_api(pvc_key(binding.pvc))
            if pvc is None:
                raise BindingError(f"failed to check binding: {self.pvc_cache.not_found(pvc_key(binding.pvc))}")
            if resource_version(binding.pv) > resource_version(pv):
                return False
            self._check_affinity(pv, node_name, labels, migrated, "failed to translate pv to csi: ")
            ref = spec(pv).get("claimRef") or {}
            if not ref or not ref.get("uid"):
                raise BindingError(f'ClaimRef got reset for pv "{name}"')
            if not is_pvc_fully_bound(pvc):
                return False
        for provision in plan.dynamic_provisions:
            pvc = self.pvc_cache.get_api(pvc_key(provision.pvc))
            if pvc is None:
                raise BindingError(f"failed to check provisioning pvc: {self.pvc_cache.not_found(pvc_key(provision.pvc))}")
            if resource_version(provision.pvc) > resource_version(pvc):
                return False
            if not meta(pvc).get("annotations"):
                raise BindingError(f'selectedNode annotation reset for PVC "{name_of(pvc)}"')
            if annotations_of(pvc).get(ANN_SELECTED_NODE) != node_name:
                raise BindingError(f'provisioning failed for PVC "{name_of(pvc)}"')
            volume = spec(pvc).get("volumeName")
            if volume:
                pv = self.pv_cache.get_api(volume)
                if pv is None:
                    return False
                self._check_affinity(pv, node_name, labels, migrated)
            if not is_pvc_fully_bound(pvc):
                return False
        return True

    @staticmethod
    def _check_affinity(pv: dict, node_name: str, labels: Mapping[str, str], migrated: frozenset[str],
                        context: str = "") -> None:
        """``tryTranslatePVToCSI`` (a migratable in-tree PV whose migration is on and listed in the
        node's CSINode), then ``CheckNodeAffinity``."""
        plugin = pv_plugin(pv)
        if plugin is not None and csi_migration_on(plugin.name) and plugin.name in migrated:
            translated = translate_pv(pv)
            if translated is None:
                raise BindingError(f"{context}could not translate pv: {translation_error(spec(pv)[plugin.source])}")
            pv = translated
        if not node_selector_matches(node_selector_of(pv), labels):
            raise BindingError(f'pv "{name_of(pv)}" node affinity doesn\'t match node "{node_name}": no matching NodeSelectorTerms')

    # --- requeueing -----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.StorageClass, ActionType.Add | ActionType.Update),
                                 self.is_schedulable_after_storage_class_change),
            ClusterEventWithHint(ClusterEvent(Resource.PersistentVolumeClaim, ActionType.Add | ActionType.Update),
                                 self.is_schedulable_after_pvc_change),
            ClusterEventWithHint(ClusterEvent(Resource.PersistentVolume, ActionType.Add | ActionType.Update)),
            ClusterEventWithHint(ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel)),
            ClusterEventWithHint(ClusterEvent(Resource.CSINode, ActionType.Add | ActionType.Update),
                                 self.is_schedulable_after_csinode_change),
            ClusterEventWithHint(ClusterEvent(Resource.CSIDriver, ActionType.Update), self.is_schedulable_after_csidriver_change),
            ClusterEventWithHint(ClusterEvent(Resource.CSIStorageCapacity, ActionType.Add | ActionType.Update),
                                 self.is_schedulable_after_capacity_change),
        ]

    @staticmethod
    def is_schedulable_after_csinode_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        if old is None:
            return QueueingHint.Queue
        if annotations_of(old).get(ANN_MIGRATED_PLUGINS) != annotations_of(new or {}).get(ANN_MIGRATED_PLUGINS):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip

    is_schedulable_after_pvc_change = staticmethod(queue_if_claim_of_pod)

    @staticmethod
    def is_schedulable_after_storage_class_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        if old is None:
            return QueueingHint.Queue
        if (old.get("allowedTopologies") or None) != ((new or {}).get("allowedTopologies") or None):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip

    @staticmethod
    def is_schedulable_after_capacity_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        if old is None:
            return QueueingHint.Queue
        new_limit, old_limit = volume_limit(new or {}), volume_limit(old)
        if new_limit is not None and (old_limit is None or quantity_value(new_limit) > quantity_value(old_limit)):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip

    @staticmethod
    def is_schedulable_after_csidriver_change(pod: dict, old: Any, new: Any) -> QueueingHint:
        driver = name_of(new or {})
        for vol in spec(pod).get("volumes") or []:
            csi = vol.get("csi")
            if csi is None or csi.get("driver") != driver:
                continue
            if spec(old or {}).get("storageCapacity") and not spec(new or {}).get("storageCapacity"):
                return QueueingHint.Queue
        return QueueingHint.QueueSkip


def _with_selected_node(pvc: dict, node_name: str) -> dict:
    clone = dict(pvc)
    clone["metadata"] = {**meta(pvc), "annotations": {**annotations_of(pvc), ANN_SELECTED_NODE: node_name}}
    return clone

