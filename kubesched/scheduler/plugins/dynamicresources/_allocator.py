"""The structured-parameters allocator of DRA (``k8s.io/dynamic-resource-allocation/structured``,
the *stable* implementation, which is the one 1.35 picks for its default feature set).

For one node, ``Allocator.allocate`` gathers the resource pools whose slices reach the node, then
searches depth-first, claim by claim and request by request, for devices that are not in use,
match the DeviceClass and request CEL selectors and satisfy the claim's ``matchAttribute``
constraints. The first complete solution wins, exactly as upstream. ``firstAvailable`` lists are
tried in order; ``allocationMode: All`` takes every matching device of complete, valid pools.

Deterministic order: upstream walks pools in Go map order (random); here pools are sorted by
driver and pool name and slices by name, so the same cluster always yields the same devices.

Parsed slices (``SliceInfo``) are immutable and cached per object version; each device caches the
result of every selector expression evaluated on it, so repeated scheduling of pods with the same
claims costs one dictionary lookup per device and selector.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.selectors import NodeSelector, parse_node_selector
from kubesched.scheduler.plugins.dynamicresources._cel import (
    CelCache,
    CelError,
    CompiledExpression,
    attribute_value,
    capacity_value,
    device_input,
)

log = logging.getLogger(__name__)

ALLOCATION_RESULTS_MAX_SIZE = 32
FIRST_AVAILABLE_DEVICE_REQUEST_MAX_SIZE = 8
FINALIZER = "resource.kubernetes.io/delete-protection"
EXACT_COUNT = "ExactCount"
ALL = "All"

DeviceID = tuple[str, str, str]


def device_id_str(did: DeviceID) -> str:
    return f"{did[0]}/{did[1]}/{did[2]}"


def obj_ref(obj: Mapping) -> str:
    """``klog.KObj``: ``namespace/name`` (just ``name`` for cluster-scoped objects)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


@dataclass(frozen=True)
class Features:
    """The DRA feature gates the allocator honours (``structured.Features``)."""

    admin_access: bool = True
    prioritized_list: bool = True
    device_taints: bool = False


class AllocationError(Exception):
    """A problem with the claims or classes (upstream: Allocate returns an error).

    ``on_node`` marks errors that only concern this node (``ErrFailedAllocationOnNode``): the
    scheduler reports them as the node's unschedulable reason instead of aborting.
    """

    def __init__(self, message: str, on_node: bool = False) -> None:
        super().__init__(message)
        self.on_node = on_node


class AllocationTimeout(Exception):
    """The per-node filter timeout expired (upstream: context deadline exceeded)."""


# --- parsed ResourceSlices ------------------------------------------------------------------------
class DeviceInfo:
    """One device of a slice, with lazily built CEL input and cached selector results."""

    __slots__ = ("_cel_input", "binding_conditions", "consumes_counters", "matches_cache", "name", "raw", "taints")

    def __init__(self, raw: Mapping) -> None:
        self.raw = raw
        self.name: str = raw.get("name", "")
        self.binding_conditions = bool(raw.get("bindingConditions"))
        self.consumes_counters = bool(raw.get("consumesCounters"))
        self.taints: list[dict] = list(raw.get("taints") or [])
        self._cel_input: dict | CelError | None = None
        self.matches_cache: dict[str, bool | CelError] = {}

    def attributes(self) -> Mapping[str, Any]:
        return self.raw.get("attributes") or {}

    def cel_input(self, driver: str) -> dict:
        if self._cel_input is None:
            try:
                attrs = {}
                for name, value in self.attributes().items():
                    try:
                        attrs[name] = attribute_value(value)
                    except CelError as e:
                        raise CelError(f"attribute {name}: {e}") from e
                caps = {name: capacity_value(value) for name, value in (self.raw.get("capacity") or {}).items()}
                self._cel_input = device_input(driver, attrs, caps)
            except CelError as e:
                self._cel_input = e
        if isinstance(self._cel_input, CelError):
            raise self._cel_input
        return self._cel_input

    def evaluate(self, compiled: CompiledExpression, driver: str) -> bool | CelError:
        """The selector's result on this device, computed once per device version."""
        result = self.matches_cache.get(compiled.expression)
        if result is None:
            try:
                result = compiled.matches(self.cel_input(driver))
            except CelError as e:
                result = e
            self.matches_cache[compiled.expression] = result
        return result


class SliceInfo:
    """A ResourceSlice as the allocator reads it."""

    __slots__ = ("all_nodes", "count", "devices", "driver", "generation", "invalid_reason", "name", "node_name",
                 "node_selector", "node_selector_raw", "per_device", "pool", "raw", "resource_version", "shared_counters")

    def __init__(self, obj: Mapping) -> None:
        spec = obj.get("spec") or {}
        pool = spec.get("pool") or {}
        meta = obj.get("metadata") or {}
        self.raw = obj
        self.name: str = meta.get("name", "")
        self.resource_version: str = meta.get("resourceVersion", "")
        self.driver: str = spec.get("driver", "")
        self.pool: str = pool.get("name", "")
        #: Why the slice makes its pool invalid ("" when it does not): a malformed pool field.
        self.invalid_reason = ""
        self.generation = self._pool_int(pool, "generation")
        self.count = self._pool_int(pool, "resourceSliceCount")
        self.node_name: str = spec.get("nodeName") or ""
        self.all_nodes = bool(spec.get("allNodes"))
        self.node_selector_raw: dict | None = spec.get("nodeSelector")
        self.node_selector: NodeSelector | None = (
            parse_node_selector(self.node_selector_raw) if self.node_selector_raw is not None else None)
        self.per_device = spec.get("perDeviceNodeSelection") is not None
        self.shared_counters = bool(spec.get("sharedCounters"))
        self.devices = tuple(DeviceInfo(d) for d in spec.get("devices") or [])

    def _pool_int(self, pool: Mapping, field_name: str) -> int:
        """An integer field of ``spec.pool``; a malformed one (the API would reject it) makes the
        pool invalid instead of failing the scheduling cycle."""
        value = pool.get(field_name) or 0
        try:
            return int(value)
        except (TypeError, ValueError):
            self.invalid_reason = f"ResourceSlice {self.name}: invalid pool {field_name} {value!r}"
            log.warning("%s: its pool is treated as invalid", self.invalid_reason)
            return 0

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.driver, self.pool)


@dataclass
class Pool:
    driver: str
    pool: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[SliceInfo] = field(default_factory=list)

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.pool}"


def gather_pools(matching: Sequence[SliceInfo], pool_slices: Mapping[tuple[str, str], Sequence[SliceInfo]],
                 features: Features) -> list[Pool]:
    """``GatherPools``: the pools reaching a node, given the slices that select it. Without
    DRAPartitionableDevices (which the plugin refuses), slices with shared counters or per-device
    node selection are ignored.

    A pool is incomplete unless all ``resourceSliceCount`` slices of its newest generation are
    known; a newer generation seen only on other nodes makes the node's slices obsolete.
    """
    by_pool: dict[tuple[str, str], list[SliceInfo]] = {}
    for s in matching:
        if s.per_device or s.shared_counters:
            continue
        current = by_pool.get(s.pool_id)
        if current is None or s.generation > current[0].generation:
            by_pool[s.pool_id] = [s]
        elif s.generation == current[0].generation:
            current.append(s)
    pools = []
    for pid in sorted(by_pool):
        slices = sorted(by_pool[pid], key=lambda s: s.name)
        generation, count = slices[0].generation, slices[0].count
        if len(slices) != count:
            everything = pool_slices.get(pid, ())
            if any(s.generation > generation for s in everything):
                continue
            if sum(1 for s in everything if s.generation == generation) != count:
                pools.append(Pool(pid[0], pid[1], incomplete=True))
                continue
        pools.append(_build_pool(pid, slices))
    return pools


def _build_pool(pid: tuple[str, str], slices: list[SliceInfo]) -> Pool:
    seen: set[str] = set()
    for s in slices:
        if s.invalid_reason:
            return Pool(pid[0], pid[1], invalid=True, invalid_reason=s.invalid_reason)
        for d in s.devices:
            if d.name in seen:
                return Pool(pid[0], pid[1], invalid=True, invalid_reason=f"duplicate device name {d.name}")
            seen.add(d.name)
    return Pool(pid[0], pid[1], slices=slices)


# --- requests --------------------------------------------------------------------------------------
class RequestView:
    """A request or subrequest (upstream ``requestAccessor``)."""

    __slots__ = ("admin_access", "class_name", "count", "has_admin_access", "mode", "name", "selectors", "tolerations")

    def __init__(self, raw: Mapping, is_sub: bool) -> None:
        self.name: str = raw.get("name", "")
        self.class_name: str = raw.get("deviceClassName") or ""
        self.mode: str = raw.get("allocationMode") or EXACT_COUNT
        count = raw.get("count")
        self.count: Any = 1 if count is None else count
        self.has_admin_access = not is_sub and raw.get("adminAccess") is not None
        self.admin_access = not is_sub and bool(raw.get("adminAccess"))
        self.selectors: list[dict] = list(raw.get("selectors") or [])
        self.tolerations: list[dict] = list(raw.get("tolerations") or [])

    @classmethod
    def exact(cls, request: Mapping) -> RequestView:
        exactly = dict(request.get("exactly") or {})
        exactly["name"] = request.get("name", "")
        return cls(exactly, is_sub=False)


@dataclass
class _RequestData:
    request: RequestView
    parent: RequestView | None
    device_class: dict | None = None
    num_devices: int = 0
    selected_sub: int = 0
    all_devices: list[_Candidate] = field(default_factory=list)

    def request_name(self) -> str:
        return f"{self.parent.name}/{self.request.name}" if self.parent else self.request.name


@dataclass(slots=True)
class _Candidate:
    did: DeviceID
    device: DeviceInfo
    slice: SliceInfo
    pool: Pool


@dataclass(slots=True)
class _Result:
    request: str
    parent: str
    did: DeviceID
    device: DeviceInfo
    slice: SliceInfo
    admin_access: bool
    tolerations: list[dict]

    def request_name(self) -> str:
        return f"{self.parent}/{self.request}" if self.parent else self.request


class _MaxSizeExceeded(Exception):
    pass


class _MatchAttribute:
    """``matchAttributeConstraint``: every device of the listed requests shares the attribute value."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = set(requests)
        self.attribute = attribute
        self.value: tuple | None = None
        self.num_devices = 0

    def _applies(self, request: str, sub: str) -> bool:
        if not self.requests:
            return True
        if not sub:
            return request in self.requests
        return request in self.requests or f"{request}/{sub}" in self.requests

    def add(self, request: str, sub: str, device: DeviceInfo, did: DeviceID) -> bool:
        if not self._applies(request, sub):
            return True
        value = _lookup_attribute(device, did, self.attribute)
        if value is None:
            return False
        if self.num_devices == 0:
            self.value = value
            self.num_devices = 1
            return True
        if value != self.value:
            return False
        self.num_devices += 1
        return True

    def remove(self, request: str, sub: str) -> None:
        if self._applies(request, sub):
            self.num_devices -= 1


_VALUE_KINDS = ("string", "int", "bool", "version")


def _lookup_attribute(device: DeviceInfo, did: DeviceID, name: str) -> tuple | None:
    attrs = device.attributes()
    raw = attrs.get(name)
    if raw is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != did[0]:
            return None
        raw = attrs.get(ident)
        if raw is None:
            return None
    for kind in _VALUE_KINDS:
        if raw.get(kind) is not None:
            return (kind, raw[kind])
    return ("unknown", object())


def _tolerates(toleration: Mapping, taint: Mapping) -> bool:
    """``resourceclaim.ToleratesTaint`` for device taints."""
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def _taint_prevents(device: DeviceInfo, request: RequestView) -> bool:
    for taint in device.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in request.tolerations):
            return True
    return False


# --- the allocator ---------------------------------------------------------------------------------
class Allocator:
    """Shared per scheduling cycle (``structured.Allocator``); ``allocate`` runs for one node."""

    def __init__(self, features: Features, allocated: frozenset[DeviceID], classes: Mapping[str, dict],
                 cel_cache: CelCache, timeout: float | None = None) -> None:
        self.features = features
        self.allocated = allocated
        self.classes = classes
        self.cel_cache = cel_cache
        self.timeout = timeout

    def allocate(self, pools: list[Pool], claims: Sequence[Mapping]) -> list[dict] | None:
        """Allocation results (one per claim) or None when the claims do not fit on the node whose
        ``pools`` are given (the outcome depends on nothing else about the node).

        Raises AllocationError for broken claims/classes (``on_node`` for node-local problems)
        and AllocationTimeout when the filter timeout expires.
        """
        deadline = time.perf_counter() + self.timeout if self.timeout else None
        return _Run(self, pools, list(claims), deadline).run()


class _Run:
    """One ``Allocate`` call (upstream's unexported ``allocator``)."""

    def __init__(self, owner: Allocator, pools: list[Pool], claims: list[Mapping], deadline: float | None) -> None:
        self.features = owner.features
        self.allocated = owner.allocated
        self.classes = owner.classes
        self.cel_cache = owner.cel_cache
        self.deadline = deadline
        self.pools = pools
        self.claims = claims
        self.requests: list[list[dict]] = [list(((c.get("spec") or {}).get("devices") or {}).get("requests") or []) for c in claims]
        self.request_data: dict[tuple[int, int, int], _RequestData] = {}
        self.constraints: list[list[_MatchAttribute]] = [[] for _ in claims]
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.allocating: dict[DeviceID, set[int]] = {}
        self.device_matches: dict[tuple, bool] = {}

    # --- setup ------------------------------------------------------------------------------------
    def run(self) -> list[dict] | None:
        for ci, claim in enumerate(self.claims):
            self._prepare_claim(ci, claim)
        try:
            done = self._allocate_one(0, 0, 0, 0, False)
        except _MaxSizeExceeded:
            raise AllocationError("allocation max size exceeded") from None
        if not done:
            if any(p.invalid for p in self.pools):
                raise AllocationError("invalid resource pools were encountered", on_node=True)
            return None
        return [self._result(ci) for ci in range(len(self.claims))]

    def _prepare_claim(self, ci: int, claim: Mapping) -> None:
        ref = obj_ref(claim)
        min_devices = 0
        for ri, request in enumerate(self.requests[ci]):
            subs = request.get("firstAvailable") or []
            if subs and not self.features.prioritized_list:
                raise AllocationError(f"claim {ref}, request {request.get('name', '')}: has subrequests, but the DRAPrioritizedList feature is disabled")
            if subs:
                parent = RequestView.exact(request)
                fewest = None
                for si, sub in enumerate(subs):
                    data = self._validate(ci, (ci, ri, si), RequestView(sub, is_sub=True), parent)
                    self.request_data[(ci, ri, si)] = data
                    fewest = data.num_devices if fewest is None else min(fewest, data.num_devices)
                min_devices += fewest or 0
            else:
                data = self._validate(ci, (ci, ri, 0), RequestView.exact(request), None)
                self.request_data[(ci, ri, 0)] = data
                min_devices += data.num_devices
        if min_devices > ALLOCATION_RESULTS_MAX_SIZE:
            raise AllocationError(f"claim {ref}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}")
        for i, constraint in enumerate(((claim.get("spec") or {}).get("devices") or {}).get("constraints") or []):
            attribute = constraint.get("matchAttribute")
            if not attribute:
                raise AllocationError(f"claim {ref}, constraint #{i}: empty constraint (unsupported constraint type?)")
            self.constraints[ci].append(_MatchAttribute(constraint.get("requests") or [], attribute))

    def _validate(self, ci: int, key: tuple[int, int, int], request: RequestView, parent: RequestView | None) -> _RequestData:
        ref = obj_ref(self.claims[ci])
        data = _RequestData(request, parent)
        for i, selector in enumerate(request.selectors):
            if not (selector.get("cel") or {}).get("expression"):
                raise AllocationError(f"claim {ref}, request {request.name}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not self.features.admin_access and request.has_admin_access:
            raise AllocationError(f"claim {ref}, request {request.name}: admin access is requested, but the feature is disabled")
        if not request.class_name:
            raise AllocationError(f"claim {ref}, request {request.name}: missing device class name (unsupported request type?)")
        device_class = self.classes.get(request.class_name)
        if device_class is None:
            raise AllocationError(f'claim {ref}, request {request.name}: could not retrieve device class {request.class_name}: '
                                  f'deviceclass.resource.k8s.io "{request.class_name}" not found')
        data.device_class = device_class
        if request.mode == EXACT_COUNT:
            if isinstance(request.count, bool) or not isinstance(request.count, int):
                raise AllocationError(f"claim {ref}, request {request.name}: invalid count {request.count!r}")
            data.num_devices = request.count
        elif request.mode == ALL:
            data.all_devices = self._all_devices(ci, key, data)
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(f"claim {ref}, request {request.name}: unsupported count mode {request.mode}")
        return data

    def _all_devices(self, ci: int, key: tuple[int, int, int], data: _RequestData) -> list[_Candidate]:
        ref = obj_ref(self.claims[ci])
        out = []
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(f"claim {ref}, request {data.request.name}: asks for all devices, but resource pool {pool.pool_id} is currently being updated")
            if pool.invalid:
                raise AllocationError(f"claim {ref}, request {data.request.name}: asks for all devices, but resource pool {pool.pool_id} is currently invalid")
            for s in pool.slices:
                for device in s.devices:
                    did = (s.driver, s.pool, device.name)
                    if self._is_selectable(key, data, s, device, did):
                        out.append(_Candidate(did, device, s, pool))
        return out

    # --- search -----------------------------------------------------------------------------------
    def _allocate_one(self, ci: int, ri: int, si: int, di: int, allocate_sub: bool) -> bool:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise AllocationTimeout()
        if ci >= len(self.claims):
            return True
        if ri >= len(self.requests[ci]):
            try:
                return self._allocate_one(ci + 1, 0, 0, 0, False)
            except _MaxSizeExceeded:
                return False
        key = (ci, ri, si)
        data = self.request_data[key]
        if not allocate_sub and data.parent is not None:
            return self._allocate_sub_requests(ci, ri, di, data)
        request = data.request
        do_all = request.mode == ALL
        if do_all and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._allocate_one(ci, ri + 1, 0, 0, False)
        if len(self.results[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceeded()
        if do_all:
            return self._try(ci, ri, si, di, data.all_devices[di], True, allocate_sub)
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for s in pool.slices:
                for device in s.devices:
                    did = (pool.driver, pool.pool, device.name)
                    if request.admin_access:
                        if ci in self.allocating.get(did, ()):
                            continue
                    elif did in self.allocated or self.allocating.get(did):
                        continue
                    if not self._is_selectable(key, data, s, device, did):
                        continue
                    if self._try(ci, ri, si, di, _Candidate(did, device, s, pool), False, allocate_sub):
                        return True
        return False

    def _allocate_sub_requests(self, ci: int, ri: int, di: int, data: _RequestData) -> bool:
        all_exceeded = True
        si = 0
        while (ci, ri, si) in self.request_data:
            try:
                success = self._allocate_one(ci, ri, si, di, True)
            except _MaxSizeExceeded:
                si += 1
                continue
            all_exceeded = False
            if success:
                data.selected_sub = si
                return True
            si += 1
        if all_exceeded:
            raise _MaxSizeExceeded()
        return False

    def _try(self, ci: int, ri: int, si: int, di: int, candidate: _Candidate, must: bool, allocate_sub: bool) -> bool:
        """Allocate ``candidate`` and recurse; undo it unless a full solution follows."""
        undo = self._allocate_device(ci, ri, si, candidate, must)
        if undo is None:
            return False
        try:
            done = self._allocate_one(ci, ri, si, di + 1, allocate_sub)
        except BaseException:
            undo()
            raise
        if not done:
            undo()
        return done

    def _is_selectable(self, key: tuple[int, int, int], data: _RequestData, s: SliceInfo, device: DeviceInfo, did: DeviceID) -> bool:
        if device.binding_conditions:
            return False  # only allocatable with DRADeviceBindingConditions, which the plugin refuses
        mkey = (did, key)
        cached = self.device_matches.get(mkey)
        if cached is not None:
            return cached
        result = True
        if data.device_class is not None:
            result = self._selectors_match(key, device, s.driver, data.device_class,
                                           ((data.device_class.get("spec") or {}).get("selectors") or []))
        if result:
            result = self._selectors_match(key, device, s.driver, None, data.request.selectors)
        self.device_matches[mkey] = result
        return result

    def _selectors_match(self, key: tuple[int, int, int], device: DeviceInfo, driver: str, device_class: Mapping | None,
                         selectors: Sequence[Mapping]) -> bool:
        for i, selector in enumerate(selectors):
            compiled = self.cel_cache.get_or_compile((selector.get("cel") or {}).get("expression", ""))
            if compiled.error is not None:
                raise AllocationError(f"{self._where(key, device_class)}: selector #{i}: CEL compile error: {compiled.error}")
            result = device.evaluate(compiled, driver)
            if isinstance(result, CelError):
                raise AllocationError(f"{self._where(key, device_class)}: selector #{i}: CEL runtime error: {result}")
            if not result:
                return False
        return True

    def _where(self, key: tuple[int, int, int], device_class: Mapping | None) -> str:
        if device_class is not None:
            return f"class {(device_class.get('metadata') or {}).get('name', '')}"
        return f"claim {obj_ref(self.claims[key[0]])}"

    def _allocate_device(self, ci: int, ri: int, si: int, candidate: _Candidate, must: bool) -> Callable[[], None] | None:
        """Mark the candidate as allocated for the claim; returns an undo callable, or None."""
        data = self.request_data[(ci, ri, si)]
        request = data.request
        did = candidate.did
        if request.admin_access:
            if ci in self.allocating.get(did, ()):
                return None
        elif did in self.allocated or self.allocating.get(did):
            return None
        device = candidate.device
        if device.consumes_counters:
            return None  # only allocatable with DRAPartitionableDevices, which the plugin refuses
        base, sub = (data.parent.name, request.name) if data.parent is not None else (request.name, "")
        if self.features.device_taints and _taint_prevents(device, request):
            return None
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(base, sub, device, did):
                if must:
                    raise AllocationError(f"claim {obj_ref(self.claims[ci])}, request {request.name}: cannot add device "
                                          f"{device_id_str(did)} because a claim constraint would not be satisfied")
                for earlier in constraints[:i]:
                    earlier.remove(base, sub)
                return None
        self.allocating.setdefault(did, set()).add(ci)
        results = self.results[ci]
        before = len(results)
        results.append(_Result(request.name, data.parent.name if data.parent else "", did, device, candidate.slice,
                               request.admin_access, request.tolerations))

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(base, sub)
            self.allocating[did].discard(ci)
            del results[before:]

        return undo

    # --- results ----------------------------------------------------------------------------------
    def _result(self, ci: int) -> dict:
        claim = self.claims[ci]
        results = []
        for r in self.results[ci]:
            entry: dict[str, Any] = {"request": r.request_name(), "driver": r.did[0], "pool": r.did[1], "device": r.did[2]}
            if r.admin_access:
                entry["adminAccess"] = True
            if r.tolerations:
                entry["tolerations"] = r.tolerations
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        config = self._config(ci, claim)
        if config:
            devices["config"] = config
        out: dict[str, Any] = {"devices": devices}
        node_selector = self._node_selector(ci, claim)
        if node_selector is not None:
            out["nodeSelector"] = node_selector
        return out

    def _config(self, ci: int, claim: Mapping) -> list[dict]:
        """Class configs (once per class), then the claim's configs that apply to the chosen requests."""
        config: list[dict] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        requests = self.requests[ci]
        for ri in range(len(requests)):
            data = self.request_data[(ci, ri, 0)]
            if data.parent is not None:
                data = self.request_data[(ci, ri, data.selected_sub)]
            cls = data.device_class
            if cls is None:
                continue
            name = (cls.get("metadata") or {}).get("name", "")
            if name in class_ranges:
                start, end = class_ranges[name]
                for i in range(start, end):
                    config[i]["requests"].append(data.request_name())
                continue
            start = len(config)
            for c in (cls.get("spec") or {}).get("config") or []:
                config.append({"source": "FromClass", "requests": [data.request_name()], **_device_configuration(c)})
            class_ranges[name] = (start, len(config))
        for c in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
            wanted = c.get("requests") or []
            if not wanted:
                config.append({"source": "FromClaim", **_device_configuration(c)})
                continue
            for ri, request in enumerate(requests):
                if request.get("name") in wanted:
                    config.append({"source": "FromClaim", "requests": list(wanted), **_device_configuration(c)})
                    continue
                data = self.request_data[(ci, ri, 0)]
                if data.parent is None:
                    continue
                sub = (request.get("firstAvailable") or [])[data.selected_sub]
                if f"{request.get('name', '')}/{sub.get('name', '')}" in wanted:
                    config.append({"source": "FromClaim", "requests": list(wanted), **_device_configuration(c)})
        for entry in config:
            if "requests" in entry and len(entry["requests"]) == len(requests):
                del entry["requests"]
        return config

    def _node_selector(self, ci: int, claim: Mapping) -> dict | None:
        fields: list[dict] = []
        expressions: list[dict] = []
        for r in self.results[ci]:
            s = r.slice
            if s.node_name:
                return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [s.node_name]}]}]}
            if s.node_selector_raw is None:
                continue
            terms = s.node_selector_raw.get("nodeSelectorTerms") or []
            if len(terms) > 1:
                raise AllocationError(f"create NodeSelector for claim {(claim.get('metadata') or {}).get('name', '')}: "
                                      f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms")
            if terms:
                _add_requirements(terms[0].get("matchFields") or [], fields)
                _add_requirements(terms[0].get("matchExpressions") or [], expressions)
        if not fields and not expressions:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = expressions
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _device_configuration(config: Mapping) -> dict:
    return {k: v for k, v in config.items() if k not in ("requests", "source")}


def _add_requirements(source: Sequence[Mapping], target: list[dict]) -> None:
    for req in source:
        values = set(req.get("values") or [])
        if not any(t.get("key") == req.get("key") and t.get("operator") == req.get("operator")
                   and set(t.get("values") or []) == values for t in target):
            target.append(dict(req))
