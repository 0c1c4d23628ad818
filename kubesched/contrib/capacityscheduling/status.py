"""An ElasticQuota's ``status.used``, as scheduler-plugins' ElasticQuota controller writes it
(``pkg/controllers/elasticquota_controller.go``): every resource its ``min`` or ``max`` names,
from 0, plus the requests of the namespace's running pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.api.quantity import format_quantity
from kubesched.api.resources import CPU, pod_requests, to_int


def elastic_quota_used(quota: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``status.used`` of ``quota`` for its namespace's ``pods``."""
    spec = quota.get("spec") or {}
    used: dict[str, int] = {str(name): 0 for bound in ("min", "max") for name in (spec.get(bound) or {})}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        for name, amount in pod_requests(pod).items():
            used[name] = used.get(name, 0) + to_int(name, amount)
    return {name: format_quantity(amount, milli=name == CPU) for name, amount in sorted(used.items())}


__all__ = ["elastic_quota_used"]
