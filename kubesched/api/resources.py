"""What a pod asks of a node, computed as component-helpers' ``PodRequests`` does.

Containers are summed; each init container's request (plus the restartable init containers
started before it) is a floor; restartable (sidecar) init containers add to the total; pod-level
``spec.resources`` override what they set; overhead is added last. Amounts are exact fractions
until the end, then rounded up as ``Quantity.MilliValue()`` (cpu) and ``Quantity.Value()`` do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import parse_quantity, saturate

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

#: ``schedutil.DefaultMilliCPURequest`` and ``DefaultMemoryRequest``, used when scoring pods that request nothing.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_POD_LEVEL_SUPPORTED = (CPU, MEMORY, "hugepages-")
_QOS_RESOURCES = (CPU, MEMORY)

Amounts = dict[str, Fraction]


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_native(name: str) -> bool:
    return "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")


def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: domain-prefixed outside kubernetes.io, and not a ``requests.`` quota name."""
    return not (is_native(name) or name.startswith("requests."))


def is_prefixed_native(name: str) -> bool:
    return "/" in name and name.split("/", 1)[0].endswith("kubernetes.io")


def is_attachable_volume(name: str) -> bool:
    return name.startswith("attachable-volumes-")


def is_scalar(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: the resources NodeInfo tracks besides cpu, memory, storage, pods."""
    return is_extended(name) or is_hugepages(name) or is_prefixed_native(name) or is_attachable_volume(name)


def to_int(name: str, amount: Fraction) -> int:
    """Round as the scheduler reads a quantity: millicores for cpu, whole units otherwise, saturated
    at int64's bounds as ``MilliValue()`` and ``Value()`` are (so the node table's int64 columns
    hold every reading)."""
    return saturate(math.ceil(amount * 1000) if name == CPU else math.ceil(amount))


def parse_list(raw: Mapping[str, Any] | None) -> Amounts:
    if not raw:
        return {}
    return {name: parse_quantity(q) for name, q in raw.items()}


def _add(into: Amounts, extra: Mapping[str, Fraction]) -> None:
    for name, amount in extra.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _max(into: Amounts, other: Mapping[str, Fraction]) -> None:
    for name, amount in other.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def _is_restartable(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def is_pod_resize_infeasible(pod: Mapping[str, Any]) -> bool:
    """``IsPodResizeInfeasible``: the PodResizePending condition says Infeasible."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodResizePending":
            return bool(condition.get("reason") == "Infeasible")
    return False


def _container_requests(container: Mapping[str, Any], statuses: Mapping[str, Mapping[str, Any]], non_missing: Mapping[str, Fraction],
                        infeasible: bool) -> Amounts:
    resources = container.get("resources") or {}
    requests = parse_list(resources.get("requests"))
    status = statuses.get(container.get("name", ""))
    if status is not None and status.get("resources") is not None:
        requests = _resizing_requests(requests, status["resources"], status, infeasible)
    if non_missing:
        requests = dict(requests)
        for name, amount in non_missing.items():
            if name not in requests:
                requests[name] = amount
    return requests


def _resizing_requests(spec: Amounts, status_resources: Mapping[str, Any], status: Mapping[str, Any], infeasible: bool) -> Amounts:
    """``determineContainerReqs``: during an in-place resize the scheduler counts the larger of
    desired and actual requests; a resize found infeasible leaves the desired ones out."""
    merged: Amounts = {} if infeasible else dict(spec)
    _max(merged, parse_list(status_resources.get("requests")))
    _max(merged, parse_list(status.get("allocatedResources")))
    return merged


def pod_level_requests_set(pod: Mapping[str, Any]) -> bool:
    requests = ((pod.get("spec") or {}).get("resources") or {}).get("requests") or {}
    return any(name in (CPU, MEMORY) or is_hugepages(name) for name in requests)


def _aggregate(spec: Mapping[str, Any], amounts_of: Callable[[Mapping[str, Any], bool], Amounts]) -> Amounts:
    """Containers summed; each init container (with the sidecars started before it) a floor;
    sidecars (restartable init containers) added. ``amounts_of(container, sidecar_or_regular)``."""
    total: Amounts = {}
    for container in spec.get("containers") or []:
        _add(total, amounts_of(container, True))
    sidecars: Amounts = {}
    init_floor: Amounts = {}
    for container in spec.get("initContainers") or []:
        restartable = _is_restartable(container)
        amounts = amounts_of(container, restartable)
        if restartable:
            _add(total, amounts)
            _add(sidecars, amounts)
            in_use = dict(sidecars)
        else:
            in_use = dict(amounts)
            _add(in_use, sidecars)
        _max(init_floor, in_use)
    _max(total, init_floor)
    return total


def _aggregate_container_requests(pod: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None = None) -> Amounts:
    """Resize status counts for regular containers and sidecars only, as upstream reads it."""
    status = pod.get("status") or {}
    statuses: dict[str, Mapping[str, Any]] = {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        statuses[cs.get("name", "")] = cs
    infeasible = bool(statuses) and is_pod_resize_infeasible(pod)
    missing = non_missing or {}
    return _aggregate(pod.get("spec") or {},
                      lambda c, use_status: _container_requests(c, statuses if use_status else {}, missing, infeasible))


def aggregate_container_limits(pod: Mapping[str, Any]) -> Amounts:
    """``AggregateContainerLimits`` over the spec alone (what pod defaulting reads)."""
    return _aggregate(pod.get("spec") or {}, lambda c, _: parse_list((c.get("resources") or {}).get("limits")))


def _pod_requests(pod: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None = None, overhead: bool = True) -> Amounts:
    """The unmemoised computation behind ``pod_requests``."""
    spec = pod.get("spec") or {}
    total = _aggregate_container_requests(pod, non_missing)
    if pod_level_requests_set(pod):
        for name, amount in parse_list(spec["resources"].get("requests")).items():
            if name in (CPU, MEMORY) or is_hugepages(name):
                total[name] = amount
    if overhead and spec.get("overhead"):
        _add(total, parse_list(spec["overhead"]))
    return total


# Pods made from one template ask for the same things: the sums are memoised by content, so
# thousands of replicas cost one computation. Pods being resized in place are not memoised. The
# memo maps the whole input of a pure function to its result, so it can never go stale; its key
# is checked against the unmemoised computation by the fast-path tests.
#: What a pod's requests depend on (:func:`content_key`): nested tuples of its request fields.
ContentKey = tuple[Hashable, ...]
_MEMO: dict[tuple[str, ContentKey, tuple[Hashable, ...]], Amounts] = {}
_MEMO_LIMIT = 8192


def _items(raw: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(raw.items())) if raw else ()


def status_sizes(status: Mapping[str, Any]) -> bool:
    """Whether a pod's status takes part in its requests: some container status carries resources
    (an in-place resize); otherwise the requests come from the spec alone."""
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("resources") is not None or cs.get("allocatedResources") is not None:
            return True
    return False


def content_key(pod: Mapping[str, Any]) -> ContentKey | None:
    """What a pod's requests depend on, hashable; None while the pod is being resized in place."""
    spec = pod.get("spec") or {}
    if status_sizes(pod.get("status") or {}):
        return None
    containers = tuple(_items((c.get("resources") or {}).get("requests")) for c in spec.get("containers") or ())
    inits = tuple((_items((c.get("resources") or {}).get("requests")), c.get("restartPolicy"))
                  for c in spec.get("initContainers") or ())
    return containers, inits, _items(spec.get("overhead")), _items((spec.get("resources") or {}).get("requests"))


def _memoised(kind: str, pod: Mapping[str, Any], extra: tuple[Hashable, ...], compute: Callable[[], Amounts]) -> Amounts:
    key = content_key(pod)
    if key is None:
        return compute()
    full = (kind, key, extra)
    found = _MEMO.get(full)
    if found is None:
        if len(_MEMO) >= _MEMO_LIMIT:
            _MEMO.clear()
        found = _MEMO[full] = compute()
    return dict(found)


def aggregate_container_requests(pod: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None = None) -> Amounts:
    """Containers summed, init containers as floors, sidecars added (without pod-level resources or overhead)."""
    extra = _items(non_missing)
    return _memoised("containers", pod, extra, lambda: _aggregate_container_requests(pod, non_missing))


def pod_requests(pod: Mapping[str, Any], non_missing: Mapping[str, Fraction] | None = None, overhead: bool = True) -> Amounts:
    """``resourcehelper.PodRequests`` with pod-level resources and overhead, as exact amounts."""
    extra = (_items(non_missing), overhead)
    return _memoised("pod", pod, extra, lambda: _pod_requests(pod, non_missing, overhead))


def non_zero_amounts(pod: Mapping[str, Any], requests: Amounts) -> Amounts:
    """The pod's requests with 100m / 200Mi for the cpu / memory no container asks for (with
    pod-level resources: only where the pod asks for none at all), as scoring counts them."""
    if pod_level_requests_set(pod):
        defaults = {}
        if CPU not in requests:
            defaults[CPU] = Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000)
        if MEMORY not in requests:
            defaults[MEMORY] = Fraction(DEFAULT_MEMORY_REQUEST)
    else:
        defaults = {CPU: Fraction(DEFAULT_MILLI_CPU_REQUEST, 1000), MEMORY: Fraction(DEFAULT_MEMORY_REQUEST)}
    return pod_requests(pod, defaults) if defaults else requests


def non_zero_requests(pod: Mapping[str, Any], requests: Amounts) -> tuple[int, int]:
    """(milli-cpu, memory) of ``non_zero_amounts``."""
    non_zero = non_zero_amounts(pod, requests)
    return to_int(CPU, non_zero.get(CPU, Fraction(0))), to_int(MEMORY, non_zero.get(MEMORY, Fraction(0)))


def scheduler_resources(amounts: Mapping[str, Fraction]) -> dict[str, int]:
    """Integer amounts for the resources NodeInfo tracks (cpu, memory, ephemeral-storage, pods, scalars)."""
    out: dict[str, int] = {}
    for name, amount in amounts.items():
        if name in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar(name):
            out[name] = to_int(name, amount)
    return out


def qos_class(pod: Mapping[str, Any], pod_level: bool = True) -> str:
    """``qos.ComputePodQOS``: Guaranteed, Burstable or BestEffort; pod-level ``spec.resources``,
    when present at all, decide alone (``pod_level``: the PodLevelResources gate)."""
    spec = pod.get("spec") or {}
    if pod_level and spec.get("resources") is not None:
        return _qos_of([spec["resources"]])
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    return _qos_of([c.get("resources") or {} for c in containers])


def _qos_of(resource_specs: list[Mapping[str, Any]]) -> str:
    requests: Amounts = {}
    limits: Amounts = {}
    guaranteed = True
    for resources in resource_specs:
        for name, amount in parse_list(resources.get("requests")).items():
            if name in _QOS_RESOURCES and amount > 0:
                _add(requests, {name: amount})
        container_limits = {n: a for n, a in parse_list(resources.get("limits")).items() if n in _QOS_RESOURCES and a > 0}
        _add(limits, container_limits)
        if set(container_limits) != set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, amount in requests.items():
            if limits.get(name) != amount:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"
