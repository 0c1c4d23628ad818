"""Manifest builders shaped like upstream's ``st.MakeNode()`` / ``st.MakePod()`` wrappers: a node
has capacity ``pods: 32`` plus what the test gives (no CPU or memory unless asked), a pod runs one
pause container with no requests unless asked."""

from __future__ import annotations

from typing import Any

PAUSE = "registry.k8s.io/pause:3.10"


def node(name: str, labels: dict[str, str] | None = None, capacity: dict[str, str] | None = None,
         taints: list[dict[str, Any]] | None = None, images: dict[str, int] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    """``st.MakeNode().Name(name).Label(...).Capacity(...).Taints(...).Images(...)``."""
    resources = {"pods": "32", **(capacity or {})}
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": dict(labels or {})},
                           "spec": {}, "status": {"capacity": dict(resources), "allocatable": dict(resources)}}
    if taints:
        obj["spec"]["taints"] = taints
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    if images:
        obj["status"]["images"] = [{"names": [image], "sizeBytes": size} for image, size in images.items()]
    return obj


def pod(name: str, namespace: str = "default", labels: dict[str, str] | None = None, node_name: str = "",
        requests: dict[str, str] | None = None, sidecar_requests: dict[str, str] | None = None,
        image: str = PAUSE, **spec: Any) -> dict[str, Any]:
    """``st.MakePod().Name(name).Namespace(ns).Label(...).Node(...).Res(...).SidecarReq(...)``;
    ``spec`` adds pod spec fields (camelCase) such as affinity, tolerations,
    topologySpreadConstraints, schedulerName, priorityClassName, schedulingGates."""
    container: dict[str, Any] = {"name": "container", "image": image}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    body: dict[str, Any] = {"containers": [container], **spec}
    if sidecar_requests:
        body["initContainers"] = [{"name": "sidecar", "image": image, "restartPolicy": "Always",
                                   "resources": {"requests": dict(sidecar_requests)}}]
    if node_name:
        body["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})}, "spec": body}


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def label_selector(**match: Any) -> dict[str, Any]:
    """A label selector from ``exists=[keys]``, ``in_=(key, values)``, ``labels={...}``."""
    selector: dict[str, Any] = {}
    if "labels" in match:
        selector["matchLabels"] = dict(match["labels"])
    expressions = [{"key": k, "operator": "Exists"} for k in match.get("exists", ())]
    if "in_" in match:
        key, values = match["in_"]
        expressions.append({"key": key, "operator": "In", "values": list(values)})
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def spread(max_skew: int, key: str, when: str, selector: dict[str, Any], match_label_keys: list[str] | None = None,
           node_affinity_policy: str | None = None, node_taints_policy: str | None = None,
           min_domains: int | None = None) -> dict[str, Any]:
    """``SpreadConstraint(maxSkew, key, when, selector, minDomains, affinityPolicy, taintsPolicy, matchLabelKeys)``."""
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector}
    if min_domains is not None:
        c["minDomains"] = min_domains
    if match_label_keys:
        c["matchLabelKeys"] = list(match_label_keys)
    if node_affinity_policy:
        c["nodeAffinityPolicy"] = node_affinity_policy
    if node_taints_policy:
        c["nodeTaintsPolicy"] = node_taints_policy
    return c


def persistent_volume(name: str, modes: list[str], capacity: str = "1Mi",
                      node_affinity: tuple[str, list[str]] | None = None) -> dict[str, Any]:
    """``st.MakePersistentVolume()`` with a host path source, as upstream's filter tests build it."""
    spec: dict[str, Any] = {"accessModes": list(modes), "capacity": {"storage": capacity},
                            "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}
    if node_affinity:
        key, values = node_affinity
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def bound_claim(name: str, volume: str, modes: list[str], namespace: str = "default", storage: str = "1Mi") -> dict[str, Any]:
    """A claim already bound to ``volume`` (``pv.kubernetes.io/bind-completed`` and ``volumeName``)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
            "spec": {"accessModes": list(modes), "volumeName": volume, "resources": {"requests": {"storage": storage}}}}


def claim_volume(claim: str) -> list[dict[str, Any]]:
    return [{"name": "volume", "persistentVolumeClaim": {"claimName": claim}}]


def pod_group(name: str, min_count: int | None = None) -> dict[str, Any]:
    """``st.MakePodGroup().Name(name).MinCount(n)`` (a gang policy), or ``.BasicPolicy()`` without ``min_count``."""
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {"name": name, "policy": policy}


def workload(name: str, *groups: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    """``st.MakeWorkload().Name(name).PodGroup(...)``: a ``scheduling.k8s.io/v1alpha1`` Workload."""
    return {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"podGroups": list(groups)}}


def workload_ref(name: str, group: str, replica_key: str = "") -> dict[str, Any]:
    """A pod's ``spec.workloadRef`` (``st.MakePod().WorkloadRef(...)``)."""
    ref = {"name": name, "podGroup": group}
    if replica_key:
        ref["podGroupReplicaKey"] = replica_key
    return {"workloadRef": ref}
