"""DynamicResources: pods get the devices their ResourceClaims ask for (DRA with structured
parameters, ``resource.k8s.io/v1``), as kube-scheduler 1.35 allocates them.

* PreEnqueue/PreFilter resolve the pod's claims (generated claims through
  ``status.resourceClaimStatuses``) and check their classes; a pod without claims is skipped at
  the cost of one dictionary lookup. Claims that still need devices get an ``Allocator`` built
  once per cycle from the slices, classes and allocated devices (in-flight allocations included).
* Filter runs the allocator once per set of ResourceSlices reaching a node (the outcome depends on
  nothing else), so nodes served by the same slices, and all the nodes no slice reaches, share
  one run. Allocated claims restrict nodes by
  ``status.allocation.nodeSelector``, evaluated for the whole batch at once.
* Score ranks ``firstAvailable`` choices (1.35 scoring of prioritized lists).
* PostFilter deallocates an allocated, unused claim that made nodes unavailable; Reserve keeps
  the chosen allocation in memory as in flight so the next pod sees the devices taken; PreBind
  writes ``status.allocation`` and ``status.reservedFor``; Unreserve undoes both.

Reasons and codes are upstream's. See ``_dra_allocator`` for the allocator, ``_dra_cel`` for the
selector language and ``_dra_manager`` for the shared claim and slice caches.

Device selectors use kubesched's own CEL interpreter (``kubesched.api.cel``, which CRD validation
rules share; the selector glue is ``_cel``), not a CEL library. Measured
on ``device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory
.compareTo(quantity("10Gi")) >= 0`` (one core, Python 3.11), with the Kubernetes functions added
to each library as Python callables:

* kubesched's interpreter: 3.9 µs per device, 32 µs to compile;
* ``common-expression-language`` 0.10 (Rust bindings): 2.1 µs with one context reused, but
  30 µs per device once each device is put into a context, as a selector needs; and custom
  values cannot cross into it, so ``quantity`` and ``semver`` would have to become floats and
  strings (inexact for large quantities, wrong ordering for versions); no ``cel.bind``, none of
  the string extensions, and an unknown attribute domain raises instead of reading as empty;
* ``cel-python`` 0.5 (pure Python): 293 µs per device (75 times slower), 260 µs to compile.

Neither library gives DRA's semantics (Kubernetes' quantity and semver types, the defaulted
domain maps) or cel-go's error texts, which reach users through the Filter status; the
interpreter does, and its function library is tested case by case against upstream's tables.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.apierrors import Conflict
from kubesched.api.errors import aggregate
from kubesched.api.kinds import known_kind
from kubesched.api.selectors import NodeSelector, parse_node_selector
from kubesched.api.types import PodInfo
from kubesched.scheduler.config.args import DynamicResourcesArgs
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    SignFragment,
    SignPlugin,
    unsignable,
)
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.selectors import node_selector_mask
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._resource_allocation import default_normalize
from kubesched.scheduler.plugins.dynamicresources._allocator import (
    FINALIZER,
    FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE,
    AllocationError,
    AllocationTimeout,
    Allocator,
    Features,
    SliceInfo,
    gather_pools,
    obj_ref,
)
from kubesched.scheduler.plugins.dynamicresources._manager import ClaimNotFound, DRAManager, SliceSnapshot, manager_for

log = logging.getLogger(__name__)

STATE_KEY = names.DynamicResources
RESOURCE_CLAIM = known_kind("ResourceClaim")
RETRY_STEPS = 5  # retry.DefaultRetry
RESERVED_FOR_MAX_SIZE = 256  # resourceapi.ResourceClaimReservedForMaxSize

#: DRA gates (all alpha, off by default in 1.35) whose behaviour this plugin does not implement: it
#: refuses to start with any of them on rather than schedule differently from kube-scheduler.
UNIMPLEMENTED_GATES = ("DRAConsumableCapacity", "DRADeviceBindingConditions", "DRADeviceTaintRules",
                       "DRAExtendedResource", "DRAPartitionableDevices")

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
TIMED_OUT = "timed out trying to allocate devices"


class ClaimLookupError(Exception):
    """A claim of the pod cannot be used yet (foreachPodResourceClaim's errors)."""


# --- pod claims ---------------------------------------------------------------------------------
def pod_claim_refs(pod: Mapping) -> list[dict]:
    return list((pod.get("spec") or {}).get("resourceClaims") or [])


def claim_name(pod: Mapping, pod_claim: Mapping) -> tuple[str | None, bool]:
    """``resourceclaim.Name``: the claim's name (None: intentionally not created) and whether
    the claim must be checked to be owned by the pod."""
    meta = pod.get("metadata") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name", "")
    if pod_claim.get("resourceClaimName") is not None:
        return pod_claim["resourceClaimName"], False
    if pod_claim.get("resourceClaimTemplateName") is not None:
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == pod_claim.get("name"):
                return status.get("resourceClaimName"), True
        raise ClaimLookupError(f'pod "{ns}/{name}": ResourceClaim not created yet')
    raise ClaimLookupError(f'pod "{ns}/{name}", spec.resourceClaim "{pod_claim.get("name", "")}": none of the supported fields are set')


def is_for_pod(pod: Mapping, claim: Mapping) -> bool:
    """``resourceclaim.IsForPod``: same namespace and the pod is the claim's controller."""
    pod_meta, claim_meta = pod.get("metadata") or {}, claim.get("metadata") or {}
    if (claim_meta.get("namespace") or "default") != (pod_meta.get("namespace") or "default"):
        return False
    uid = pod_meta.get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid for ref in claim_meta.get("ownerReferences") or [])


def is_reserved_for_pod(pod: Mapping, claim: Mapping) -> bool:
    uid = (pod.get("metadata") or {}).get("uid")
    return any(r.get("uid") == uid for r in (claim.get("status") or {}).get("reservedFor") or [])


def can_be_reserved(claim: Mapping) -> bool:
    """``resourceclaim.CanBeReserved``: ``status.reservedFor`` has room for one more consumer."""
    return len((claim.get("status") or {}).get("reservedFor") or []) < RESERVED_FOR_MAX_SIZE


def _allocation(claim: Mapping) -> dict | None:
    return (claim.get("status") or {}).get("allocation")


def _uid(obj: Mapping) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# --- cycle state ---------------------------------------------------------------------------------
@dataclass
class _ClaimInfo:
    available_on: NodeSelector | None = None
    allocation: dict | None = None


@dataclass
class _State:
    """Per-cycle data (upstream ``stateData``); shared, not copied, by ``clone`` as upstream does."""

    claims: list[dict] = field(default_factory=list)
    infos: list[_ClaimInfo] = field(default_factory=list)
    allocator: Allocator | None = None
    slices: SliceSnapshot | None = None
    node_allocations: dict[str, list[dict]] = field(default_factory=dict)
    unavailable_nodes: dict[int, set[str]] = field(default_factory=dict)
    #: Allocation outcome per tuple of the slices reaching a node.
    outcomes: dict[tuple[SliceInfo, ...], list[dict] | tuple[Code, str]] = field(default_factory=dict)

    def clone(self) -> _State:
        return self

    def to_allocate(self) -> Iterator[tuple[int, dict]]:
        for index, claim in enumerate(self.claims):
            if _allocation(claim) is None:
                yield index, claim


_NO_CLAIMS = _State()


def _unresolvable(reason: str) -> Status:
    return Status(Code.UnschedulableAndUnresolvable, reason)


def _error(message: str) -> Status:
    return Status.from_error(RuntimeError(message))


class DynamicResources(SignPlugin, PreEnqueuePlugin, PreFilterPlugin, BatchFilterPlugin, PostFilterPlugin, BatchScorePlugin,
                       ReservePlugin, PreBindPlugin, EnqueueExtensions):
    name = names.DynamicResources
    #: Pods with claims are not signed; for the others this plugin answers without reading a node.
    reads_node_pods = False
    Args = DynamicResourcesArgs
    #: The allocator's per-node work is expensive: run it only where earlier filters passed.
    feasible_only = True

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        gates: FeatureGates = getattr(handle, "feature_gates", None) or DEFAULT_GATES
        unimplemented = [gate for gate in UNIMPLEMENTED_GATES if gates.enabled(gate)]
        if unimplemented:
            raise ValueError("; ".join(f"kubesched does not implement feature gate {gate}" for gate in unimplemented))
        if args is None:
            args = DynamicResourcesArgs()
            args.set_defaults(gates)
        super().__init__(args, handle)
        self.gates = gates
        self.features = Features(
            admin_access=gates.enabled("DRAAdminAccess"),
            prioritized_list=gates.enabled("DRAPrioritizedList"),
            device_taints=gates.enabled("DRADeviceTaints"),
        )
        timeout = args.filter_timeout if gates.enabled("DRASchedulerFilterTimeout") else None
        self.filter_timeout: float | None = timeout if timeout and timeout > 0 else None
        self.manager: DRAManager = manager_for(handle)

    # --- claims of a pod ------------------------------------------------------------------------
    def foreach_pod_claim(self, pod: Mapping) -> Iterator[tuple[str, dict]]:
        """``foreachPodResourceClaim``: (pod claim name, claim) for every claim that exists;
        raises ClaimLookupError when one is missing, being deleted or not the pod's."""
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        for pod_claim in pod_claim_refs(pod):
            name, must_check_owner = claim_name(pod, pod_claim)
            if name is None:
                continue
            try:
                claim = self.manager.claims.get(ns, name)
            except ClaimNotFound as e:
                raise ClaimLookupError(str(e)) from e
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                raise ClaimLookupError(f'resourceclaim "{name}" is being deleted')
            if must_check_owner and not is_for_pod(pod, claim):
                claim_ns = (claim.get("metadata") or {}).get("namespace") or "default"
                raise ClaimLookupError(f"ResourceClaim {claim_ns}/{name} was not created for pod {ns}/{meta.get('name', '')} (pod is not owner)")
            yield pod_claim.get("name", ""), claim

    # --- PreEnqueue -----------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.spec.get("resourceClaims"):
            return None
        try:
            for _ in self.foreach_pod_claim(pod.pod):
                pass
        except ClaimLookupError as e:
            return _unresolvable(str(e))
        return None

    # --- PreFilter ------------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """Pods with claims are not signed: whether a claim fits a node is not a question of the
        pod and the node alone (upstream leaves them out for the same reason)."""
        if pod.spec.get("resourceClaims"):
            return unsignable("pods with dra resource claims are not signable")
        return []

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.spec.get("resourceClaims"):
            state.write(STATE_KEY, _NO_CLAIMS)
            return None, Status(Code.Skip)
        s = _State()
        state.write(STATE_KEY, s)
        try:
            claims = [claim for _, claim in self.foreach_pod_claim(pod.pod)]
        except ClaimLookupError as e:
            return None, _unresolvable(str(e))
        if not claims:
            return None, Status(Code.Skip)
        s.infos = [_ClaimInfo() for _ in claims]
        to_allocate = 0
        for index, claim in enumerate(claims):
            allocation = _allocation(claim)
            if allocation is not None and not can_be_reserved(claim) and not is_reserved_for_pod(pod.pod, claim):
                return None, _unresolvable("resourceclaim in use")
            if allocation is not None:
                raw = allocation.get("nodeSelector")
                if raw is not None:
                    selector = parse_node_selector(raw)
                    if selector.errors:
                        return None, _error(aggregate(selector.errors))
                    s.infos[index].available_on = selector
                continue
            to_allocate += 1
            if self.manager.claims.has_pending_allocation(_uid(claim)):
                return None, _unresolvable(f"resource claim {obj_ref(claim)} is in the process of being allocated")
            status = self._check_requests(claim)
            if status is not None:
                return None, status
        if to_allocate:
            s.allocator = Allocator(self.features, self.manager.claims.allocated_devices(), self.manager.device_classes(),
                                    self.manager.cel_cache, self.filter_timeout)
            s.slices = self.manager.slices.snapshot()
        s.claims = claims
        return None, None

    def _check_requests(self, claim: Mapping) -> Status | None:
        """Every request names an existing class (subrequests only with DRAPrioritizedList)."""
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            req_name = request.get("name", "")
            if request.get("exactly") is not None:
                status = self._validate_class(request["exactly"].get("deviceClassName") or "", req_name)
            elif request.get("firstAvailable"):
                if not self.features.prioritized_list:
                    return _unresolvable(f"resource claim {obj_ref(claim)}, request {req_name}: has subrequests, "
                                         "but the DRAPrioritizedList feature is disabled")
                status = None
                for sub in request["firstAvailable"]:
                    status = self._validate_class(sub.get("deviceClassName") or "", f"{req_name}/{sub.get('name', '')}")
                    if status is not None:
                        break
            else:
                return _unresolvable(f"resource claim {obj_ref(claim)}, request {req_name}: unknown request type")
            if status is not None:
                return status
        return None

    def _validate_class(self, class_name: str, request_name: str) -> Status | None:
        if not class_name:
            return _error(f"request {request_name}: unsupported request type")
        if class_name not in self.manager.device_classes():
            return _unresolvable(f"request {request_name}: device class {class_name} does not exist")
        return None

    def pre_filter_extensions(self) -> None:
        return None

    # --- Filter ---------------------------------------------------------------------------------
    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        s = state.get(STATE_KEY)
        if s is None:
            return FilterVerdict.all_fail(len(nodes), _error("not found"))
        if not s.claims or len(nodes) == 0:
            return None
        unavailable, per_claim = self._unavailable(s, nodes)
        names_ = nodes.names()
        codes = np.full(len(nodes), -1, dtype=np.int32)
        statuses: list[Status] = []
        index_of: dict[tuple[Code, str], int] = {}

        def fail(position: int, code: Code, message: str) -> None:
            key = (code, message)
            if key not in index_of:
                index_of[key] = len(statuses)
                statuses.append(Status(code, message) if code != Code.Error else _error(message))
            codes[position] = index_of[key]

        outcomes = self._allocate(s, nodes) if s.allocator is not None else None
        for position in range(len(nodes)) if outcomes is not None else np.flatnonzero(unavailable):
            position = int(position)
            if outcomes is not None:
                outcome = outcomes(position)
                if not isinstance(outcome, list):
                    fail(position, *outcome)
                    continue
            if unavailable[position]:
                for index, bad in per_claim.items():
                    if bad[position]:
                        s.unavailable_nodes.setdefault(index, set()).add(names_[position])
                fail(position, Code.UnschedulableAndUnresolvable, NOT_AVAILABLE)
            elif outcomes is not None:
                s.node_allocations[names_[position]] = outcome
        if not statuses:
            return None
        return FilterVerdict(codes, statuses)

    @staticmethod
    def _unavailable(s: _State, nodes: NodeBatch) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """Nodes that allocated claims' node selectors exclude, per claim and in total."""
        total = np.zeros(len(nodes), dtype=bool)
        per_claim: dict[int, np.ndarray] = {}
        for index, info in enumerate(s.infos):
            if info.available_on is None:
                continue
            bad = ~node_selector_mask(nodes, info.available_on)
            if bad.any():
                per_claim[index] = bad
                total |= bad
        return total, per_claim

    def _allocate(self, s: _State, nodes: NodeBatch) -> Callable[[int], list[dict] | tuple[Code, str]]:
        """Per-node allocation outcomes, computed lazily, once per set of slices reaching nodes."""
        assert s.allocator is not None and s.slices is not None
        slices = s.slices
        claims = [claim for _, claim in s.to_allocate()]
        reaching = _slices_per_node(slices, nodes)

        def outcome(position: int) -> list[dict] | tuple[Code, str]:
            key = tuple(reaching[position])
            found = s.outcomes.get(key)
            if found is None:
                pools = gather_pools(key, slices.pools, self.features)
                found = s.outcomes[key] = self._run_allocator(s, pools, claims)
            return found

        return outcome

    def _run_allocator(self, s: _State, pools: list, claims: list[dict]) -> list[dict] | tuple[Code, str]:
        assert s.allocator is not None
        try:
            results = s.allocator.allocate(pools, claims)
        except AllocationTimeout:
            return Code.UnschedulableAndUnresolvable, TIMED_OUT
        except AllocationError as e:
            return (Code.UnschedulableAndUnresolvable if e.on_node else Code.Error), str(e)
        if results is None or len(results) != len(claims):
            return Code.UnschedulableAndUnresolvable, CANNOT_ALLOCATE
        return results

    # --- PostFilter -----------------------------------------------------------------------------
    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Any) -> tuple[PostFilterResult | None, Status | None]:
        s = state.get(STATE_KEY)
        if s is None:
            return None, _error("not found")
        if not s.claims:
            return None, Status(Code.Unschedulable, "no new claims to deallocate")
        for index in sorted(self._unavailable_claims(s, statuses)):
            claim = s.claims[index]
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                update = copy.deepcopy(claim)
                status = update.setdefault("status", {})
                for field_name in ("reservedFor", "allocation", "devices"):
                    status.pop(field_name, None)
                self._spawn(self._update_status(update), f"deallocate ResourceClaim {obj_ref(claim)}")
                return None, Status(Code.Unschedulable, "deallocation of ResourceClaim completed")
        return None, Status(Code.Unschedulable, "still not schedulable")

    @staticmethod
    def _unavailable_claims(s: _State, statuses: Any) -> set[int]:
        """Claims found unavailable on nodes where this plugin's Filter was the one that failed
        (upstream records them only where its Filter ran, i.e. after every earlier plugin passed)."""
        if not s.unavailable_nodes or statuses is None:
            return set()
        found: set[int] = set()
        for node_name, status in statuses.items():
            if status.plugin == names.DynamicResources and status.reasons == [NOT_AVAILABLE]:
                found.update(i for i, nodes in s.unavailable_nodes.items() if node_name in nodes)
        return found

    async def _update_status(self, claim: dict) -> None:
        await self.framework.client.update_status(RESOURCE_CLAIM, claim)

    # --- Score ----------------------------------------------------------------------------------
    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        s = state.get(STATE_KEY)
        scores = np.zeros(len(nodes), dtype=np.int64)
        if s is None or not s.claims or not s.node_allocations:
            return scores
        for position, node_name in enumerate(nodes.names()):
            allocations = s.node_allocations.get(node_name)
            if allocations is not None:
                scores[position] = _compute_score(s.claims, allocations)
        return scores

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        s = state.get(STATE_KEY)
        if s is None or not s.claims or not s.node_allocations:
            return None  # every score is 0, which normalising leaves as it is
        return default_normalize(scores, False)

    # --- Reserve --------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return _error("not found")
        if not s.claims:
            return None
        pending = list(s.to_allocate())
        if not pending or s.allocator is None:
            return None
        allocations = s.node_allocations.get(node_name)
        if not allocations:
            return _error("claim allocation not found for node")
        if len(allocations) != len(pending):
            return _error(f"internal error, have {len(allocations)} allocations, {len(pending)} claims to allocate, "
                          f"want {len(pending)} claims")
        for (index, claim), allocation in zip(pending, allocations):
            s.infos[index].allocation = allocation
            allocated = copy.deepcopy(claim)
            finalizers = allocated.setdefault("metadata", {}).setdefault("finalizers", [])
            if FINALIZER not in finalizers:
                finalizers.append(FINALIZER)
            allocated.setdefault("status", {})["allocation"] = allocation
            self.manager.claims.signal_pending_allocation(_uid(claim), allocated)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if s is None or not s.claims:
            return
        for claim in s.claims:
            meta = claim.get("metadata") or {}
            if self.manager.claims.remove_pending_allocation(_uid(claim)):
                self.manager.claims.restore(meta.get("namespace") or "default", meta.get("name", ""))
            if _allocation(claim) is not None and is_reserved_for_pod(pod.pod, claim):
                self._spawn(self._remove_reservation(claim, pod.uid), f"unreserve ResourceClaim {obj_ref(claim)}")

    async def _remove_reservation(self, claim: dict, pod_uid: str) -> None:
        """Drop the pod from ``status.reservedFor`` (upstream: a strategic-merge patch by UID)."""
        client = self.framework.client
        meta = claim["metadata"]
        for attempt in range(RETRY_STEPS):
            current = await client.get(RESOURCE_CLAIM, meta.get("namespace"), meta["name"])
            if current is None or current["metadata"].get("uid") != meta.get("uid"):
                return
            update = copy.deepcopy(current)
            status = update.setdefault("status", {})
            status["reservedFor"] = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod_uid]
            try:
                await client.update_status(RESOURCE_CLAIM, update)
                return
            except Conflict:
                if attempt == RETRY_STEPS - 1:
                    raise

    # --- PreBind --------------------------------------------------------------------------------
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return _error("not found")
        return Status(Code.Skip) if not s.claims else None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return _error("not found")
        for index, claim in enumerate(s.claims):
            if is_reserved_for_pod(pod.pod, claim):
                continue
            try:
                s.claims[index] = await self._bind_claim(s, index, pod)
            except Exception as e:
                return _error(str(e))
        return None

    async def _bind_claim(self, s: _State, index: int, pod: PodInfo) -> dict:
        """Write the allocation from Reserve (if any) and the pod's reservation, retrying conflicts."""
        client = self.framework.client
        claim = s.claims[index]
        allocation = s.infos[index].allocation
        ref = obj_ref(claim)
        modified = False
        try:
            for attempt in range(RETRY_STEPS):
                if attempt:
                    meta = claim["metadata"]
                    fresh = await client.get(RESOURCE_CLAIM, meta.get("namespace"), meta["name"])
                    if fresh is None:
                        raise RuntimeError(f'get updated claim {ref} after conflict: resourceclaims.resource.k8s.io "{meta["name"]}" not found')
                    claim = fresh
                try:
                    claim = await self._write_claim(claim, allocation, pod, ref)
                except Conflict as e:
                    if attempt == RETRY_STEPS - 1:
                        raise RuntimeError(str(e.args[0]) if e.args else str(e)) from e
                    continue
                modified = True
                return claim
            raise RuntimeError(f"update claim {ref}: retries exhausted")
        finally:
            if modified:
                try:
                    self.manager.claims.assume(claim)
                except (ClaimNotFound, ValueError) as e:
                    log.debug("claim not stored in assume cache: %s", e)
            if allocation is not None:
                self.manager.claims.remove_pending_allocation(_uid(claim))

    async def _write_claim(self, claim: dict, allocation: dict | None, pod: PodInfo, ref: str) -> dict:
        client = self.framework.client
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            raise RuntimeError(f"claim {ref} got deleted in the meantime")
        claim = copy.deepcopy(claim)
        if allocation is not None:
            if _allocation(claim) is not None:
                raise RuntimeError(f"claim {ref} got allocated elsewhere in the meantime")
            finalizers = claim["metadata"].setdefault("finalizers", [])
            if FINALIZER not in finalizers:
                finalizers.append(FINALIZER)
                claim = copy.deepcopy(await _wrap(client.update(RESOURCE_CLAIM, claim), f"add finalizer to claim {ref}"))
            claim.setdefault("status", {})["allocation"] = copy.deepcopy(allocation)
        status = claim.setdefault("status", {})
        status["reservedFor"] = [*(status.get("reservedFor") or []), {"resource": "pods", "name": pod.name, "uid": pod.uid}]
        what = "add allocation and reservation to claim" if allocation is not None else "add reservation to claim"
        return await _wrap(client.update_status(RESOURCE_CLAIM, claim), f"{what} {ref}")

    # --- requeueing -----------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        node_actions = ActionType.Add | ActionType.UpdateNodeLabel | ActionType.UpdateNodeAllocatable
        return [
            ClusterEventWithHint(ClusterEvent(Resource.Node, node_actions)),
            ClusterEventWithHint(ClusterEvent(Resource.ResourceClaim, ActionType.Add | ActionType.Update), self.is_schedulable_after_claim_change),
            ClusterEventWithHint(ClusterEvent(Resource.Pod, ActionType.UpdatePodGeneratedResourceClaim), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(ClusterEvent(Resource.DeviceClass, ActionType.Add | ActionType.Update)),
            ClusterEventWithHint(ClusterEvent(Resource.ResourceSlice, ActionType.Add | ActionType.Update)),
        ]

    def is_schedulable_after_claim_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        modified_uid = _uid(new)
        try:
            uses_claim = any(_uid(claim) == modified_uid for _, claim in self.foreach_pod_claim(pod))
        except ClaimLookupError:
            return QueueingHint.QueueSkip
        if old is not None and _allocation(old) is not None and _allocation(new) is None:
            return QueueingHint.Queue
        if not uses_claim:
            return QueueingHint.QueueSkip
        if old is None:
            return QueueingHint.Queue
        if (old.get("status") or {}) == (new.get("status") or {}):
            return QueueingHint.QueueSkip
        return QueueingHint.Queue

    def is_schedulable_after_pod_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        if _uid(pod) != _uid(new):
            return QueueingHint.QueueSkip
        try:
            for _ in self.foreach_pod_claim(new):
                pass
        except ClaimLookupError:
            return QueueingHint.QueueSkip
        return QueueingHint.Queue

    # --- helpers --------------------------------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        """Run an API write in the background (PostFilter and Unreserve are synchronous here)."""
        run = getattr(self.handle, "run_in_background", None)
        if run is not None:
            run(coro, what)
            return
        try:
            asyncio.get_running_loop().create_task(coro)
        except RuntimeError:
            asyncio.run(coro)


async def _wrap(call: Coroutine[Any, Any, dict], context: str) -> dict:
    """Await an API call, prefixing non-conflict errors with what was being done."""
    try:
        return await call
    except Conflict:
        raise
    except Exception as e:
        raise RuntimeError(f"{context}: {e}") from e


def _slices_per_node(snapshot: SliceSnapshot, nodes: NodeBatch) -> list[list[SliceInfo]]:
    """The slices reaching each node of the batch: its own, selector-matched, and all-nodes ones."""
    reaching: list[list[SliceInfo]] = [list(snapshot.all_nodes) for _ in range(len(nodes))]
    if snapshot.node_local:
        for position, node_name in enumerate(nodes.names()):
            local = snapshot.node_local.get(node_name)
            if local:
                reaching[position].extend(local)
    for s in snapshot.selector:
        assert s.node_selector is not None
        for matched in np.flatnonzero(node_selector_mask(nodes, s.node_selector)).tolist():
            reaching[matched].append(s)
    return reaching


def _compute_score(claims: list[dict], allocations: list[dict]) -> int:
    """``computeScore`` as 1.35 has it: allocation results are indexed by the claim's position
    among all the pod's claims, so a pod mixing allocated and unallocated claims gets an error
    (fixed upstream after 1.35)."""
    score = 0
    for i, claim in enumerate(claims):
        if i >= len(allocations):
            raise StatusError(Status.from_error(RuntimeError(
                f"number of allocations {len(allocations)} is smaller than number of claims")))
        chosen = {r.get("request", "") for r in (allocations[i].get("devices") or {}).get("results") or []
                  if "/" in r.get("request", "")}
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            if request.get("exactly") is not None:
                continue
            for j, sub in enumerate(request.get("firstAvailable") or []):
                if f"{request.get('name', '')}/{sub.get('name', '')}" in chosen:
                    score += FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE - j
    return score
