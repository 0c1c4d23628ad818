"""kube-apiserver's defaulting (the ``SetDefaults_*`` functions of ``core/v1`` and ``apps/v1``) for
the kinds kubesched serves, applied by the object store to every create and update so that the
embedded cluster and the HTTP API server store the same objects; plus the one workload validation
rule without which a controller would create pods forever (the selector must select the
template's labels).

Every function mutates its argument in place and is idempotent, as defaulting on decode is: an
update carrying back what a create stored changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from kubesched.api import resources as res
from kubesched.api.errors import FieldError, go_map, go_stringer, invalid, required
from kubesched.api.kinds import Kind
from kubesched.api.quantity import format_quantity
from kubesched.api.selectors import InvalidSelector, parse_label_selector, selector_from_set

DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"
DEFAULT_REVISION_HISTORY_LIMIT = 10
DEFAULT_PROGRESS_DEADLINE_SECONDS = 600
_PERCENT = re.compile(r"[0-9]+%")
PERCENT_MESSAGE = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
                   "regex used for validation is '[0-9]+%')")
#: ``v1.LabelMetadataName``: every namespace carries its name as a label (namespaceSelectors match it).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Gates = Mapping[str, bool] | None
Defaulter = Callable[[dict[str, Any], Gates], None]


def gate_enabled(gates: Gates, name: str) -> bool:
    """A feature gate's value; gates absent from ``gates`` (or no gates at all) count as on."""
    return True if gates is None or name not in gates else bool(gates[name])


def _unset(obj: Mapping[str, Any], key: str) -> bool:
    """Whether Go would see the field as its zero value (nil pointer or empty string)."""
    return obj.get(key) is None or obj.get(key) == ""


def _set_default(obj: dict[str, Any], key: str, value: object) -> None:
    if _unset(obj, key):
        obj[key] = value


# --- pods --------------------------------------------------------------------------------------
def default_pod_spec(spec: dict[str, Any]) -> None:
    """``SetDefaults_PodSpec`` and ``SetDefaults_Container``, for pods and pod templates alike."""
    _set_default(spec, "dnsPolicy", "ClusterFirst")
    _set_default(spec, "restartPolicy", "Always")
    _set_default(spec, "securityContext", {})
    _set_default(spec, "terminationGracePeriodSeconds", 30)
    _set_default(spec, "schedulerName", "default-scheduler")
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(container)


def _default_container(container: dict[str, Any]) -> None:
    _set_default(container, "resources", {})
    _set_default(container, "terminationMessagePath", "/dev/termination-log")
    _set_default(container, "terminationMessagePolicy", "File")
    _set_default(container, "imagePullPolicy", pull_policy(container.get("image") or ""))
    for port in container.get("ports") or []:
        _set_default(port, "protocol", "TCP")


def pull_policy(image: str) -> str:
    """``Always`` when the image's tag is ``latest`` (an image with neither tag nor digest counts
    as ``latest``, as ``parsers.ParseImageName`` says), else ``IfNotPresent``."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def default_pod(pod: dict[str, Any], gates: Gates = None) -> None:
    """``SetDefaults_Pod`` with the pod's ``SetDefaults_PodSpec``: requests default to limits,
    pod-level requests and hugepage limits are filled in (PodLevelResources), and a hostNetwork
    pod's container ports get their port as host port."""
    spec = pod.setdefault("spec", {})
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        _requests_from_limits(container.get("resources"))
    if gate_enabled(gates, "PodLevelResources"):
        _default_hugepage_pod_limits(spec)
        _default_pod_requests(spec)
    _set_default(spec, "enableServiceLinks", True)
    if spec.get("hostNetwork"):
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            for port in container.get("ports") or []:
                if not port.get("hostPort"):
                    port["hostPort"] = port.get("containerPort")
    default_pod_spec(spec)


def _requests_from_limits(resources: dict[str, Any] | None) -> None:
    if not resources or not resources.get("limits"):
        return
    requests = resources.get("requests") or {}
    for name, quantity in resources["limits"].items():
        requests.setdefault(name, quantity)
    resources["requests"] = requests


def _supported_pod_level(name: str) -> bool:
    """``IsSupportedPodLevelResource``."""
    return name in (res.CPU, res.MEMORY) or res.is_hugepages(name)


def _format(name: str, amount: Fraction) -> str:
    """A summed amount as a quantity (cpu in millicores; memory and hugepages in bytes, with a
    binary suffix when exact)."""
    return format_quantity(res.to_int(name, amount), milli=name == res.CPU)


def _default_hugepage_pod_limits(spec: dict[str, Any]) -> None:
    """``defaultHugePagePodLimits``: with pod-level resources set, the containers' summed hugepage
    limits become the pod's, unless the pod requests that size."""
    resources = spec.get("resources")
    if not resources or (not resources.get("limits") and not resources.get("requests")):
        return
    limits = dict(resources.get("limits") or {})
    requests = resources.get("requests") or {}
    for name, amount in res.aggregate_container_limits({"spec": spec}).items():
        if res.is_hugepages(name) and name not in requests and name not in limits:
            limits[name] = _format(name, amount)
    if limits:
        resources["limits"] = limits


def _default_pod_requests(spec: dict[str, Any]) -> None:
    """``defaultPodRequests``: with pod-level limits, missing pod-level requests come from the
    containers' summed cpu and memory requests first, and only then from the pod-level limits."""
    resources = spec.get("resources")
    if not resources or not resources.get("limits"):
        return
    requests = dict(resources.get("requests") or {})
    for name, amount in res.aggregate_container_requests({"spec": spec}).items():
        if name in (res.CPU, res.MEMORY) and name not in requests:
            requests[name] = _format(name, amount)
    for name, quantity in resources["limits"].items():
        if _supported_pod_level(name) and name not in requests:
            requests[name] = quantity
    if requests:
        resources["requests"] = requests


# --- other core kinds ----------------------------------------------------------------------------
def default_node(node: dict[str, Any], _gates: Gates = None) -> None:
    """``SetDefaults_NodeStatus``: allocatable defaults to capacity."""
    status = node.setdefault("status", {})
    if status.get("allocatable") is None and status.get("capacity") is not None:
        status["allocatable"] = dict(status["capacity"])


def default_namespace(namespace: dict[str, Any], _gates: Gates = None) -> None:
    """``SetDefaults_Namespace`` (the name label), the ``kubernetes`` finalizer and phase Active."""
    meta = namespace.setdefault("metadata", {})
    if meta.get("name"):
        meta["labels"] = {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: meta["name"]}
    namespace.setdefault("spec", {"finalizers": ["kubernetes"]})
    status = namespace.setdefault("status", {})
    _set_default(status, "phase", "Active")


def default_priority_class(pc: dict[str, Any], _gates: Gates = None) -> None:
    _set_default(pc, "preemptionPolicy", "PreemptLowerPriority")


def _default_pvc(pvc: dict[str, Any], _gates: Gates = None) -> None:
    _set_default(pvc.setdefault("spec", {}), "volumeMode", "Filesystem")
    _set_default(pvc.setdefault("status", {}), "phase", "Pending")


def _default_pv(pv: dict[str, Any], _gates: Gates = None) -> None:
    spec = pv.setdefault("spec", {})
    _set_default(spec, "persistentVolumeReclaimPolicy", "Retain")
    _set_default(spec, "volumeMode", "Filesystem")
    _set_default(pv.setdefault("status", {}), "phase", "Pending")


def _default_storage_class(sc: dict[str, Any], _gates: Gates = None) -> None:
    """storage/v1 ``SetDefaults_StorageClass``: volumes are deleted with their claim and bound at
    once unless the class says otherwise (the scheduler's volume plugins rely on the mode being
    set, and report a class without one)."""
    _set_default(sc, "reclaimPolicy", "Delete")
    _set_default(sc, "volumeBindingMode", "Immediate")


# --- workloads -----------------------------------------------------------------------------------
def default_pod_template(template: dict[str, Any]) -> None:
    template.setdefault("metadata", {})
    default_pod_spec(template.setdefault("spec", {}))


def default_deployment(obj: dict[str, Any], _gates: Gates = None) -> None:
    """``SetDefaults_Deployment``: replicas 1, RollingUpdate 25%/25%, history 10, deadline 600s."""
    spec = obj.setdefault("spec", {})
    _set_default(spec, "replicas", 1)
    strategy = spec.setdefault("strategy", {})
    _set_default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        _set_default(rolling, "maxUnavailable", DEFAULT_MAX_UNAVAILABLE)
        _set_default(rolling, "maxSurge", DEFAULT_MAX_SURGE)
        strategy["rollingUpdate"] = rolling
    _set_default(spec, "revisionHistoryLimit", DEFAULT_REVISION_HISTORY_LIMIT)
    _set_default(spec, "progressDeadlineSeconds", DEFAULT_PROGRESS_DEADLINE_SECONDS)
    default_pod_template(spec.setdefault("template", {}))
    obj.setdefault("status", {})


def default_replica_set(obj: dict[str, Any], _gates: Gates = None) -> None:
    """``SetDefaults_ReplicaSet``: replicas 1."""
    spec = obj.setdefault("spec", {})
    _set_default(spec, "replicas", 1)
    default_pod_template(spec.setdefault("template", {}))
    obj.setdefault("status", {"replicas": 0})


def default_replication_controller(obj: dict[str, Any], _gates: Gates = None) -> None:
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
    _set_default(spec, "replicas", 1)
    default_pod_template(template)
    obj.setdefault("status", {"replicas": 0})


def default_stateful_set(obj: dict[str, Any], _gates: Gates = None) -> None:
    """``SetDefaults_StatefulSet``: OrderedReady, RollingUpdate partition 0, replicas 1,
    history 10, PVC retention Retain/Retain, claim templates as PVCs."""
    spec = obj.setdefault("spec", {})
    _set_default(spec, "podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    _set_default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        _set_default(rolling, "partition", 0)
        strategy["rollingUpdate"] = rolling
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    _set_default(retention, "whenDeleted", "Retain")
    _set_default(retention, "whenScaled", "Retain")
    _set_default(spec, "replicas", 1)
    _set_default(spec, "revisionHistoryLimit", DEFAULT_REVISION_HISTORY_LIMIT)
    default_pod_template(spec.setdefault("template", {}))
    for claim in spec.get("volumeClaimTemplates") or []:
        claim.setdefault("apiVersion", "v1")
        claim.setdefault("kind", "PersistentVolumeClaim")
        _default_pvc(claim)
    obj.setdefault("status", {"replicas": 0, "availableReplicas": 0})


def default_daemon_set(obj: dict[str, Any], _gates: Gates = None) -> None:
    """``SetDefaults_DaemonSet``: RollingUpdate with maxUnavailable 1 and maxSurge 0, history 10."""
    spec = obj.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {})
    _set_default(strategy, "type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        _set_default(rolling, "maxUnavailable", 1)
        _set_default(rolling, "maxSurge", 0)
        strategy["rollingUpdate"] = rolling
    _set_default(spec, "revisionHistoryLimit", DEFAULT_REVISION_HISTORY_LIMIT)
    default_pod_template(spec.setdefault("template", {}))


#: The defaulting of each kind, by (group, kind).
DEFAULTERS: dict[tuple[str, str], Defaulter] = {
    ("", "Pod"): default_pod,
    ("", "Node"): default_node,
    ("", "Namespace"): default_namespace,
    ("", "PersistentVolumeClaim"): _default_pvc,
    ("", "PersistentVolume"): _default_pv,
    ("", "ReplicationController"): default_replication_controller,
    ("apps", "Deployment"): default_deployment,
    ("apps", "ReplicaSet"): default_replica_set,
    ("apps", "StatefulSet"): default_stateful_set,
    ("apps", "DaemonSet"): default_daemon_set,
    ("scheduling.k8s.io", "PriorityClass"): default_priority_class,
    ("storage.k8s.io", "StorageClass"): _default_storage_class,
}

#: The workload kinds whose selector must select their template (``ValidateDeployment`` and
#: friends), with the word their empty-selector message uses (ReplicaSets borrow Deployments').
WORKLOADS = {("", "ReplicationController"): "", ("apps", "Deployment"): "deployment", ("apps", "ReplicaSet"): "deployment",
             ("apps", "StatefulSet"): "statefulset", ("apps", "DaemonSet"): "daemonset"}


def set_defaults(kind: Kind, obj: dict[str, Any], gates: Gates = None) -> None:
    """Default ``obj`` as decoding it would, if its kind has defaults."""
    defaulter = DEFAULTERS.get((kind.group, kind.kind))
    if defaulter is not None:
        defaulter(obj, gates)


def validate_spec(kind: Kind, obj: Mapping[str, Any]) -> list[FieldError]:
    """apiserver's validation of the workload kinds and PodDisruptionBudgets, which needs their
    defaults first (a ReplicationController's selector comes from its template)."""
    if (kind.group, kind.kind) == ("policy", "PodDisruptionBudget"):
        spec = obj.get("spec") or {}
        return [e for field in ("minAvailable", "maxUnavailable") if spec.get(field) is not None
                for e in _int_or_percent_errors(spec[field], f"spec.{field}", at_most_all=True)]
    errors = _selector_errors(kind, obj)
    if (kind.group, kind.kind) == ("apps", "Deployment"):
        errors += _rolling_update_errors(((obj.get("spec") or {}).get("strategy") or {}).get("rollingUpdate"))
    return errors


def _selector_errors(kind: Kind, obj: Mapping[str, Any]) -> list[FieldError]:
    """The selector is set and selects the template's labels (``spec.template.metadata.labels:
    Invalid value: ...: `selector` does not match template `labels```)."""
    if (kind.group, kind.kind) not in WORKLOADS:
        return []
    spec = obj.get("spec") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    raw = spec.get("selector")
    if kind.kind == "ReplicationController":
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
            return [invalid("spec.selector", raw, f"empty selector is invalid for {WORKLOADS[(kind.group, kind.kind)]}")]
    if not selector.matches(labels):
        return [invalid("spec.template.metadata.labels", go_map(labels), "`selector` does not match template `labels`")]
    return []


def _rolling_update_errors(rolling: Mapping[str, Any] | None) -> list[FieldError]:
    """``ValidateRollingUpdateDeployment``."""
    if not rolling:
        return []
    path = "spec.strategy.rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errors = _int_or_percent_errors(unavailable, f"{path}.maxUnavailable", at_most_all=True)
    errors += _int_or_percent_errors(surge, f"{path}.maxSurge", at_most_all=False)
    if _int_or_percent_value(unavailable) == 0 and _int_or_percent_value(surge) == 0:
        errors.append(invalid(f"{path}.maxUnavailable", go_stringer(unavailable), "may not be 0 when `maxSurge` is 0"))
    return errors


def _int_or_percent_errors(value: int | str | None, path: str, *, at_most_all: bool) -> list[FieldError]:
    """``ValidatePositiveIntOrPercent``, and ``IsNotMoreThan100Percent`` when ``at_most_all``
    (decoding made the value an int or a string)."""
    if value is None:
        return []
    if isinstance(value, int):
        return [invalid(path, value, "must be greater than or equal to 0")] if value < 0 else []
    if not _PERCENT.fullmatch(value):
        return [invalid(path, go_stringer(value), PERCENT_MESSAGE)]
    if at_most_all and int(value[:-1]) > 100:
        return [invalid(path, go_stringer(value), "must not be greater than 100%")]
    return []


def _int_or_percent_value(value: object) -> int:
    """``getIntOrPercentValue``: the number, a percentage's too; 0 when unreadable."""
    if isinstance(value, int):
        return value
    try:
        return int(str(value).removesuffix("%"))
    except ValueError:
        return 0
