"""ElasticQuota bookkeeping (scheduler-plugins ``pkg/capacityscheduling/elasticquota_test.go``):
use against ``min`` and ``max`` with upstream's comparison rules, and quotas parsed from their
manifests."""

from __future__ import annotations

import pytest

from kubesched.api.quantity import INT64_MAX
from kubesched.api.types import PodInfo
from kubesched.contrib.capacityscheduling.elasticquota import (
    ElasticQuotaInfo,
    ElasticQuotaInfos,
    InvalidElasticQuota,
    build_infos,
    parse_elastic_quota,
)

GPU = "nvidia.com/gpu"
UNBOUNDED = {"cpu": INT64_MAX, "memory": INT64_MAX, "ephemeral-storage": INT64_MAX}
ZERO = {"cpu": 0, "memory": 0, "ephemeral-storage": 0}


def info(used: dict, minimum: dict | None = None, maximum: dict | None = None) -> ElasticQuotaInfo:
    """A quota as upstream's tests build one; an absent bound is what an absent spec field gives."""
    return ElasticQuotaInfo("ns1", dict(ZERO if minimum is None else minimum), dict(UNBOUNDED if maximum is None else maximum),
                            dict(used))


OVER_MIN_WITH = [
    ("ElasticQuotaInfo OverMinWith Sum Of PodRequest And Used Is Bigger Than Min",
     info({"cpu": 4000, "memory": 200, GPU: 5}, {"cpu": 3000, "memory": 100, GPU: 5}), {"cpu": 1500, "memory": 100}, True),
    ("ElasticQuotaInfo OverMinWith Sum Of PodRequest And Used Is Not Bigger Than Min",
     info({"cpu": 300, "memory": 100, GPU: 5}, {"cpu": 4000, "memory": 200, GPU: 5}), {"cpu": 100, "memory": 50}, False),
    ("ElasticQuotaInfo OverMinWith ElasticQuotaInfo Doesn't Have Min",
     info({"cpu": 3900, "memory": 100, GPU: 5}), {"cpu": 100, "memory": 100}, True),
    ("ElasticQuotaInfo OverMinWith Used And Min Don't Have GPU Value",
     info({"cpu": 10, "memory": 10}, {"cpu": 3000, "memory": 100}), {"cpu": 10, "memory": 10, GPU: 5}, True),
    ("ElasticQuotaInfo OverMinWith EphemeralStorage",
     info({"cpu": 10, "memory": 10, "ephemeral-storage": 10}, {"cpu": 3000, "memory": 100, "ephemeral-storage": 100}),
     {"cpu": 10, "memory": 10, "ephemeral-storage": 10}, False),
]


@pytest.mark.parametrize("name,quota,request_,want", OVER_MIN_WITH, ids=[c[0] for c in OVER_MIN_WITH])
def test_used_over_min_with(name, quota, request_, want):
    assert quota.used_over_min_with(request_) is want


OVER_MAX_WITH = [
    ("ElasticQuotaInfo OverMaxWith Sum Of PodRequest And Used Is Bigger Than Max",
     info({"cpu": 4000, "memory": 200, GPU: 5}, maximum={"cpu": 4000, "memory": 200, GPU: 5}), {"cpu": 100, "memory": 100}, True),
    ("ElasticQuotaInfo OverMaxWith Sum Of PodRequest And Used Is Not Bigger Than Max",
     info({"cpu": 3900, "memory": 100, GPU: 5}, maximum={"cpu": 4000, "memory": 200, GPU: 5}), {"cpu": 100, "memory": 100}, False),
    ("ElasticQuotaInfo OverMaxWith ElasticQuotaInfo Doesn't Have Max",
     info({"cpu": 3900, "memory": 100, GPU: 5}), {"cpu": 100, "memory": 100}, False),
    ("ElasticQuotaInfo OverMaxWith Used And Max Don't Have GPU Value",
     info({"cpu": 10, "memory": 10}, maximum={"cpu": 3000, "memory": 100}), {"cpu": 10, "memory": 10, GPU: 5}, False),
    ("ElasticQuotaInfo OverMaxWith EphemeralStorage",
     info({"cpu": 10, "memory": 10, "ephemeral-storage": 10}, maximum={"cpu": 3000, "memory": 100, "ephemeral-storage": 100}),
     {"cpu": 10, "memory": 10, "ephemeral-storage": 100}, True),
]


@pytest.mark.parametrize("name,quota,request_,want", OVER_MAX_WITH, ids=[c[0] for c in OVER_MAX_WITH])
def test_used_over_max_with(name, quota, request_, want):
    assert quota.used_over_max_with(request_) is want


OVER_MIN = [
    ("ElasticQuotaInfo OverMin Used Is Bigger Than Min",
     info({"cpu": 4000, "memory": 200, GPU: 5}, {"cpu": 3000, "memory": 300, GPU: 5}), True),
    ("ElasticQuotaInfo OverMin Used Is Not Bigger Than Min",
     info({"cpu": 300, "memory": 100, GPU: 5}, {"cpu": 4000, "memory": 200, GPU: 5}), False),
    ("ElasticQuotaInfo OverMin ElasticQuotaInfo Doesn't Have Min", info({"cpu": 3900, "memory": 100, GPU: 5}), True),
    ("ElasticQuotaInfo OverMin Used Has GPU But Min Doesn't Have GPU",
     info({"cpu": 300, "memory": 100, GPU: 5}, {"cpu": 4000, "memory": 200}), True),
    ("ElasticQuotaInfo OverMin EphemeralStorage",
     info({"cpu": 300, "memory": 100, "ephemeral-storage": 100}, {"cpu": 4000, "memory": 200, "ephemeral-storage": 10}), True),
]


@pytest.mark.parametrize("name,quota,want", OVER_MIN, ids=[c[0] for c in OVER_MIN])
def test_used_over_min(name, quota, want):
    assert quota.used_over_min() is want


def quota_manifest(namespace: str, minimum: dict | None, maximum: dict | None, name: str = "quota") -> dict:
    spec = {k: v for k, v in (("min", minimum), ("max", maximum)) if v is not None}
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


NEW_INFO = [
    ("ElasticQuota", {"cpu": "100m", "memory": "1000"}, {"cpu": "10m", "memory": "100"},
     {"cpu": 100, "memory": 1000}, {"cpu": 10, "memory": 100}),
    ("ElasticQuota Without Max", None, {"cpu": "10m", "memory": "100"}, UNBOUNDED, {"cpu": 10, "memory": 100}),
    ("ElasticQuota Without Min", {"cpu": "100m", "memory": "1000"}, None, {"cpu": 100, "memory": 1000}, ZERO),
    ("ElasticQuota Without Max and Min", None, None, UNBOUNDED, ZERO),
]


@pytest.mark.parametrize("name,maximum,minimum,want_max,want_min", NEW_INFO, ids=[c[0] for c in NEW_INFO])
def test_new_elastic_quota_info(name, maximum, minimum, want_max, want_min):
    parsed = parse_elastic_quota(quota_manifest("ns1", minimum, maximum))
    assert (parsed.namespace, parsed.max, parsed.min, parsed.used) == ("ns1", want_max, want_min, {})


def pod(name: str, namespace: str, cpu: str, memory: str, gpu: int = 0, phase: str = "Running") -> PodInfo:
    requests = {"cpu": cpu, "memory": memory} | ({GPU: str(gpu)} if gpu else {})
    return PodInfo({"metadata": {"name": name, "namespace": namespace, "uid": name},
                    "spec": {"nodeName": "node-a", "containers": [{"name": "c", "resources": {"requests": requests}}]},
                    "status": {"phase": phase}})


def test_reserve_and_unreserve_resource():
    """Upstream ``TestReserveResource`` / ``TestUnReserveResource``: pods add their requests to the
    use, once each, and take them back when removed."""
    quota = info({"cpu": 1000, "memory": 200, GPU: 2})
    pods = [pod("t1-p1", "ns1", "50m", "1000", 1), pod("t1-p2", "ns2", "100m", "2000"), pod("t1-p3", "ns2", "0", "0", 2)]
    for p in pods:
        quota.add_pod_if_not_present(p)
    quota.add_pod_if_not_present(pods[0])
    assert quota.used == {"cpu": 1150, "memory": 3200, GPU: 5}
    for p in pods:
        quota.delete_pod_if_present(p)
    quota.delete_pod_if_present(pods[0])
    assert quota.used == {"cpu": 1000, "memory": 200, GPU: 2}


def test_aggregated_used_over_min_with():
    """Borrowing is allowed while all quotas together stay within the sum of their ``min``."""
    infos = ElasticQuotaInfos({"a": info({"cpu": 0}, {"cpu": 2000}), "b": info({"cpu": 3000}, {"cpu": 2000})})
    assert infos.aggregated_used_over_min_with({"cpu": 1000}) is False
    assert infos.aggregated_used_over_min_with({"cpu": 1001}) is True


def test_build_infos_counts_assigned_pods_of_quota_namespaces_only():
    infos = build_infos([quota_manifest("ns1", {"cpu": "1"}, {"cpu": "2"})],
                        [pod("a", "ns1", "500m", "1Gi"), pod("b", "ns2", "1", "1Gi"), pod("done", "ns1", "1", "1Gi", phase="Succeeded")])
    assert list(infos) == ["ns1"]
    assert infos["ns1"].used == {"cpu": 500, "memory": 2**30}


@pytest.mark.parametrize("name,spec,message", [
    ("min is not a map", {"min": ["cpu"]}, 'ElasticQuota "ns1/quota": spec.min: must be a map of resource names to quantities'),
    ("max holds a bad quantity", {"max": {"cpu": "lots"}}, 'ElasticQuota "ns1/quota": spec.max[cpu]: '),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_invalid_quota_is_named(name, spec, message):
    manifest = quota_manifest("ns1", None, None) | {"spec": spec}
    with pytest.raises(InvalidElasticQuota, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_elastic_quota(manifest)
