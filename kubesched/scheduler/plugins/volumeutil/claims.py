"""The claims of a pod's volumes as the volume plugins read them: memoised on the pod for its
lifetime, and the queueing hints that requeue a pod when one of its claims appears or changes."""

from __future__ import annotations

from typing import Any

from kubesched.api.types import PodInfo
from kubesched.api.volume import ClaimRef, meta, name_of, raw_pod_claims
from kubesched.scheduler.framework.events import QueueingHint
from kubesched.scheduler.plugins._resource_allocation import pod_memo


def pod_claims(pod: PodInfo) -> tuple[ClaimRef, ...]:
    """``raw_pod_claims`` of a PodInfo, computed once for the pod."""
    return pod_memo(pod, "_kvol_claims", lambda: raw_pod_claims(pod.pod))


def pvc_volume_claims(pod: PodInfo) -> tuple[str, ...]:
    """Claim names of the pod's ``persistentVolumeClaim`` volumes (generic ephemeral ones excluded)."""
    return pod_memo(pod, "_kvol_pvc_names", lambda: tuple(ref.claim for ref in pod_claims(pod) if not ref.ephemeral))


# --- queueing hints on claims ------------------------------------------------------------------------
def _claim_of_pod_hint(pod: dict, pvc: Any, ephemeral: bool) -> QueueingHint:
    if pvc is None or meta(pvc).get("namespace") != (meta(pod).get("namespace") or "default"):
        return QueueingHint.QueueSkip
    if any(ref.claim == name_of(pvc) and (ephemeral or not ref.ephemeral) for ref in raw_pod_claims(pod)):
        return QueueingHint.Queue
    return QueueingHint.QueueSkip


def queue_if_claim_of_pod(pod: dict, old: Any, new: Any) -> QueueingHint:
    """Queue when the added or updated PVC is one a volume of the pod (generic ephemeral ones
    included) uses."""
    return _claim_of_pod_hint(pod, new, True)


def queue_if_pvc_volume_of_pod(pod: dict, old: Any, new: Any) -> QueueingHint:
    """Queue when the added or updated PVC is one a ``persistentVolumeClaim`` volume of the pod uses."""
    return _claim_of_pod_hint(pod, new, False)
