"""Signature fragments the in-tree plugins share (upstream ``fwk.TolerationsSigner``,
``fwk.VolumesSigner``, ``fwk.HostPortsSigner`` and the signer names): each names the pod fields a
plugin reads, so two pods with equal fragments get the same verdicts and scores.

Values are the pod's own JSON fields, unparsed: computing a fragment costs a dictionary lookup,
and a fragment that tells apart two pods that are in fact equivalent only batches less.
"""

from __future__ import annotations

from typing import Any

from kubesched.api import resources as res
from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.interface import SignFragment, unsignable
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.plugins._resource_allocation import pod_memo

RESOURCES = "Resources"
TOLERATIONS = "Tolerations"
NODE_AFFINITY = "NodeAffinity"
NODE_NAME = "NodeName"
HOST_PORTS = "HostPorts"
IMAGES = "Images"
VOLUMES = "Volumes"
POD_AFFINITY = "PodAffinity"
TOPOLOGY_SPREAD = "TopologySpread"


def resources(pod: PodInfo) -> SignFragment | Status:
    """The pod's requests, as every resource plugin reads them (containers, init containers,
    overhead, pod-level resources); a pod being resized in place is not signed."""
    key = pod_memo(pod, "_sign_resources", lambda: res.content_key(pod.pod))
    if key is None:
        return unsignable("pods being resized in place are not signable")
    return RESOURCES, key


def tolerations(pod: PodInfo) -> SignFragment:
    return TOLERATIONS, pod.spec.get("tolerations")


def node_affinity(pod: PodInfo) -> SignFragment:
    """The node selector and the node affinity, required and preferred."""
    return NODE_AFFINITY, (pod.spec.get("nodeSelector"), (pod.spec.get("affinity") or {}).get("nodeAffinity"))


def node_name(pod: PodInfo) -> SignFragment:
    return NODE_NAME, pod.spec.get("nodeName")


def host_ports(pod: PodInfo) -> SignFragment:
    return HOST_PORTS, [(p.ip, p.protocol, p.port) for p in pod.host_ports]


def images(pod: PodInfo) -> SignFragment:
    return IMAGES, pod.images


def volumes(pod: PodInfo) -> SignFragment:
    """The volumes, except config maps and secrets (upstream leaves those out: they are synthetic)."""
    return VOLUMES, pod_memo(pod, "_sign_volumes", lambda: [
        v for v in pod.spec.get("volumes") or () if "configMap" not in v and "secret" not in v])


def claimless_volumes(pod: PodInfo) -> SignFragment | Status:
    """``volumes`` for kubesched's reuse, which leaves out pods with claims: what a claim allows
    depends on volumes and claims elsewhere in the cluster, not on one node's row."""
    name, value = volumes(pod)
    if any("persistentVolumeClaim" in v or "ephemeral" in v for v in value):
        return unsignable("pods with volume claims are not batched")
    return name, value


def pod_affinity(pod: PodInfo) -> dict[str, Any]:
    """The inter-pod affinity terms: empty for a pod that has none."""
    affinity = pod.spec.get("affinity") or {}
    return {k: affinity[k] for k in ("podAffinity", "podAntiAffinity") if affinity.get(k)}


def identity(pod: PodInfo) -> tuple[str, Any, Any]:
    """What other pods' terms and selectors match a pod by: namespace, labels and owners."""
    meta = pod.pod.get("metadata") or {}
    return pod.namespace, meta.get("labels"), meta.get("ownerReferences")
