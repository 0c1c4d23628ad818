"""ElasticQuota (``scheduling.x-k8s.io/v1alpha1``) and the per-namespace bookkeeping
CapacityScheduling does with it (scheduler-plugins ``pkg/capacityscheduling/elasticquota.go``).

An ElasticQuota gives its namespace a guaranteed ``min`` and a ceiling ``max``. A namespace may
use more than its ``min`` (up to ``max``) while the sum of what every quota'd namespace uses stays
within the sum of their ``min``: it borrows what the others leave unused, and gives it back by
preemption when a lender needs its ``min``.

Comparisons follow upstream's ``cmp2`` exactly: cpu, memory and ephemeral-storage missing from
``min`` or ``max`` count as 0 (a ``max`` without memory admits no pod that requests memory), an
absent ``max`` is unlimited for them, and an extended resource missing from ``min`` counts as 0
and from ``max`` as unlimited. Pods are never counted, as upstream's requests leave them out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.quantity import INT64_MAX, parse_quantity
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, to_int
from kubesched.api.types import PodInfo

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
PLURAL = "elasticquotas"

#: The resources upstream's ``framework.Resource`` keeps in fields of their own (0 when unset).
NATIVE = (CPU, MEMORY, EPHEMERAL_STORAGE)
UPPER_BOUND_OF_MAX = INT64_MAX
LOWER_BOUND_OF_MIN = 0

Resources = dict[str, int]


class InvalidElasticQuota(ValueError):
    """An ElasticQuota whose spec cannot be used; the message names the object and the field."""


def pod_request(pod: PodInfo) -> Resources:
    """What the pod counts against its quota: its requests (containers, init containers, overhead),
    pods left out."""
    return {name: amount for name, amount in pod.requests.items() if name != PODS}


def add_into(into: Resources, extra: Mapping[str, int], sign: int = 1) -> None:
    for name, amount in extra.items():
        into[name] = into.get(name, 0) + sign * amount


def exceeds(x1: Mapping[str, int], x2: Mapping[str, int], y: Mapping[str, int], bound: int) -> bool:
    """Whether ``x1 + x2`` exceeds ``y`` in some resource (upstream ``cmp2``): the native ones
    compare with 0 where ``y`` lacks them, the others of ``x1`` with ``bound``."""
    for name in NATIVE:
        if x1.get(name, 0) + x2.get(name, 0) > y.get(name, 0):
            return True
    for name, amount in x1.items():
        if name in NATIVE:
            continue
        if amount + x2.get(name, 0) > y.get(name, bound):
            return True
    return False


@dataclass
class ElasticQuotaInfo:
    """One namespace's quota and what its pods use (upstream ``ElasticQuotaInfo``)."""

    namespace: str
    min: Resources
    max: Resources
    used: Resources = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)

    def clone(self) -> ElasticQuotaInfo:
        return ElasticQuotaInfo(self.namespace, dict(self.min), dict(self.max), dict(self.used), set(self.pods))

    def used_over_min_with(self, request: Mapping[str, int]) -> bool:
        return exceeds(request, self.used, self.min, LOWER_BOUND_OF_MIN)

    def used_over_max_with(self, request: Mapping[str, int]) -> bool:
        return exceeds(request, self.used, self.max, UPPER_BOUND_OF_MAX)

    def used_over_min(self) -> bool:
        return exceeds(self.used, {}, self.min, LOWER_BOUND_OF_MIN)

    def add_pod_if_not_present(self, pod: PodInfo) -> None:
        if pod.key in self.pods:
            return
        self.pods.add(pod.key)
        add_into(self.used, pod_request(pod))

    def delete_pod_if_present(self, pod: PodInfo) -> None:
        if pod.key not in self.pods:
            return
        self.pods.discard(pod.key)
        add_into(self.used, pod_request(pod), -1)


class ElasticQuotaInfos(dict[str, ElasticQuotaInfo]):
    """Quotas by namespace (each namespace has at most one)."""

    def clone(self) -> ElasticQuotaInfos:
        return ElasticQuotaInfos({ns: info.clone() for ns, info in self.items()})

    def aggregated_used_over_min_with(self, request: Mapping[str, int]) -> bool:
        """Whether every quota's use plus ``request`` exceeds the sum of every quota's ``min``."""
        used: Resources = {}
        total_min: Resources = {}
        for info in self.values():
            add_into(used, info.used)
            add_into(total_min, info.min)
        add_into(used, request)
        return exceeds(used, {}, total_min, LOWER_BOUND_OF_MIN)


def parse_elastic_quota(obj: Mapping[str, Any]) -> ElasticQuotaInfo:
    """The quota ``obj`` without usage; InvalidElasticQuota names the field that cannot be used."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    where = f'ElasticQuota "{namespace}/{meta.get("name", "")}"'
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidElasticQuota(f"{where}: spec: must be an object")
    minimum = _resources(where, "spec.min", spec.get("min"))
    maximum = _resources(where, "spec.max", spec.get("max"))
    return ElasticQuotaInfo(
        namespace,
        minimum if minimum is not None else {name: LOWER_BOUND_OF_MIN for name in NATIVE},
        maximum if maximum is not None else {name: UPPER_BOUND_OF_MAX for name in NATIVE},
    )


def _resources(where: str, path: str, raw: Any) -> Resources | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidElasticQuota(f"{where}: {path}: must be a map of resource names to quantities")
    out: Resources = {}
    for name, value in raw.items():
        try:
            out[str(name)] = to_int(str(name), parse_quantity(value))
        except ValueError as e:
            raise InvalidElasticQuota(f"{where}: {path}[{name}]: {e}") from e
    return out


def parse_infos(quotas: Iterable[Mapping[str, Any]]) -> ElasticQuotaInfos:
    """Every namespace's quota without usage (the oldest when a namespace has several, as
    upstream keeps one)."""
    infos = ElasticQuotaInfos()
    for obj in sorted(quotas, key=lambda o: ((o.get("metadata") or {}).get("creationTimestamp") or "",
                                             (o.get("metadata") or {}).get("name") or "")):
        info = parse_elastic_quota(obj)
        infos.setdefault(info.namespace, info)
    return infos


def build_infos(quotas: Iterable[Mapping[str, Any]], assigned: Iterable[PodInfo]) -> ElasticQuotaInfos:
    """Every namespace's quota (``parse_infos``) with the use of its assigned pods that have not
    finished, counted from the pods themselves."""
    infos = parse_infos(quotas)
    for pod in assigned:
        quota = infos.get(pod.namespace)
        if quota is not None and pod.status.get("phase") not in ("Succeeded", "Failed"):
            quota.add_pod_if_not_present(pod)
    return infos


__all__ = [
    "GROUP",
    "PLURAL",
    "VERSION",
    "ElasticQuotaInfo",
    "ElasticQuotaInfos",
    "InvalidElasticQuota",
    "build_infos",
    "exceeds",
    "parse_elastic_quota",
    "parse_infos",
    "pod_request",
]
