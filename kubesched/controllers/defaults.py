"""What kube-apiserver's defaulting does to the workload kinds on create (``apps/v1`` and
``core/v1`` ``SetDefaults_*``), for the API server to call before storing them, plus the one
validation rule without which a controller would create pods forever (the selector must select
the template's labels).

Every function mutates its argument in place and is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable

from kubesched.api.errors import FieldError, invalid, required
from kubesched.api.selectors import InvalidSelector, parse_label_selector, selector_from_set

DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"
DEFAULT_REVISION_HISTORY_LIMIT = 10
DEFAULT_PROGRESS_DEADLINE_SECONDS = 600


def default_pod_template(template: dict) -> None:
    """``SetDefaults_PodSpec`` and container defaults, as they show in a stored template."""
    template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(container)


def _default_container(container: dict) -> None:
    container.setdefault("resources", {})
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy", _pull_policy(container.get("image") or ""))
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def _pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or an untagged image, else ``IfNotPresent`` (digests count as tags)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def default_deployment(obj: dict) -> None:
    """``SetDefaults_Deployment``: replicas 1, RollingUpdate 25%/25%, history 10, deadline 600s."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        rolling.setdefault("maxUnavailable", DEFAULT_MAX_UNAVAILABLE)
        rolling.setdefault("maxSurge", DEFAULT_MAX_SURGE)
        strategy["rollingUpdate"] = rolling
    spec.setdefault("revisionHistoryLimit", DEFAULT_REVISION_HISTORY_LIMIT)
    spec.setdefault("progressDeadlineSeconds", DEFAULT_PROGRESS_DEADLINE_SECONDS)
    default_pod_template(spec.setdefault("template", {}))
    obj.setdefault("status", {})


def default_replica_set(obj: dict) -> None:
    """``SetDefaults_ReplicaSet``: replicas 1."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    default_pod_template(spec.setdefault("template", {}))
    obj.setdefault("status", {"replicas": 0})


def default_replication_controller(obj: dict) -> None:
    """``SetDefaults_ReplicationController``: selector and labels from the template's labels, replicas 1."""
    spec = obj.setdefault("spec", {})
    template = spec.setdefault("template", {})
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        obj_meta = obj.setdefault("metadata", {})
        if not obj_meta.get("labels"):
            obj_meta["labels"] = dict(labels)
    spec.setdefault("replicas", 1)
    default_pod_template(template)
    obj.setdefault("status", {"replicas": 0})


def default_stateful_set(obj: dict) -> None:
    """``SetDefaults_StatefulSet``: OrderedReady, RollingUpdate partition 0, replicas 1,
    history 10, PVC retention Retain/Retain, claim templates as PVCs."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        rolling.setdefault("partition", 0)
        strategy["rollingUpdate"] = rolling
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", DEFAULT_REVISION_HISTORY_LIMIT)
    default_pod_template(spec.setdefault("template", {}))
    for claim in spec.get("volumeClaimTemplates") or []:
        claim.setdefault("apiVersion", "v1")
        claim.setdefault("kind", "PersistentVolumeClaim")
        claim_spec = claim.setdefault("spec", {})
        claim_spec.setdefault("volumeMode", "Filesystem")
        claim.setdefault("status", {"phase": "Pending"})
    obj.setdefault("status", {"replicas": 0, "availableReplicas": 0})


DEFAULTERS: dict[str, Callable[[dict], None]] = {
    "Deployment": default_deployment,
    "ReplicaSet": default_replica_set,
    "ReplicationController": default_replication_controller,
    "StatefulSet": default_stateful_set,
}


def default_workload(obj: dict) -> None:
    """Default ``obj`` if it is one of the workload kinds, else leave it alone."""
    defaulter = DEFAULTERS.get(obj.get("kind", ""))
    if defaulter is not None:
        defaulter(obj)


def validate_workload(obj: dict) -> list[FieldError]:
    """apiserver's check that the selector is set and selects the template's labels
    (``spec.template.metadata.labels: Invalid value: ...: `selector` does not match template `labels```)."""
    kind = obj.get("kind", "")
    if kind not in DEFAULTERS:
        return []
    spec = obj.get("spec") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    raw = spec.get("selector")
    if kind == "ReplicationController":
        if not raw:
            return [required("spec.selector")]
        selector = selector_from_set(raw)
    else:
        if raw is None:
            return [required("spec.selector")]
        try:
            selector = parse_label_selector(raw, "spec.selector")
        except InvalidSelector as e:
            return list(e.errors)
        if selector.empty:
            return [invalid("spec.selector", raw, "empty selector is invalid for deployment")] if kind == "Deployment" else []
    if not selector.matches(labels):
        return [invalid("spec.template.metadata.labels", _go_map(labels), "`selector` does not match template `labels`")]
    return []


class _GoMap(dict):
    """A label map printed as Go's ``%#v`` prints it in validation messages (unquoted)."""

    def __str__(self) -> str:
        inner = ", ".join(f'"{k}":"{v}"' for k, v in sorted(self.items()))
        return f"map[string]string{{{inner}}}"


def _go_map(labels: dict[str, str]) -> _GoMap:
    return _GoMap(labels)
