"""Server-side printing: ``meta.k8s.io/v1`` Table responses with the columns kube-apiserver's
printers (``pkg/printers/internalversion``) produce, so ``kubectl get`` shows what it shows
against a real cluster. Kinds without a printer get the default ``Name``/``Created At`` table.

Ages are computed at request time from ``creationTimestamp`` with apimachinery's
``duration.HumanDuration``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubesched.api.kinds import CustomKind, Kind
from kubesched.api.timeutil import parse_time
from kubesched.apiserver.selectors import format_label_selector, format_labels

Row = list[Any]
Printer = Callable[[dict, float], Row]


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: str | None, now: float) -> str:
    """``translateTimestampSince``: ``<unknown>`` for a zero time."""
    if not timestamp:
        return "<unknown>"
    return human_duration(now - parse_time(timestamp))


def _col(name: str, type_: str = "string", priority: int = 0, description: str = "", fmt: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
AGE = _col("Age", description="CreationTimestamp is a timestamp representing the server time when this object was created.")


def _meta(obj: Mapping) -> Mapping:
    return obj.get("metadata") or {}


def _age(obj: Mapping, now: float) -> str:
    return since(_meta(obj).get("creationTimestamp"), now)


def _containers(template_spec: Mapping | None) -> tuple[str, str]:
    containers = (template_spec or {}).get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _template_spec(obj: Mapping) -> Mapping:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


# --- pods --------------------------------------------------------------------------------------
def _restartable_init(container: Mapping | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _pod_row(pod: dict, now: float) -> Row:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, _meta(pod)
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(spec.get("containers") or []) + sum(1 for c in init_specs.values() if _restartable_init(c))
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    restarts, restartable_restarts, ready, last_restart, last_restartable = 0, 0, 0, 0.0, 0.0
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += cs.get("restartCount", 0)
        finished = parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
        last_restart = max(last_restart, finished)
        restartable = _restartable_init(init_specs.get(cs.get("name")))
        if restartable:
            restartable_restarts += cs.get("restartCount", 0)
            last_restartable = max(last_restartable, finished)
        state = cs.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if restartable and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if terminated is not None:
            if terminated.get("reason"):
                reason = "Init:" + terminated["reason"]
            elif terminated.get("signal"):
                reason = f"Init:Signal:{terminated['signal']}"
            else:
                reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in status.get("conditions") or [])
    if not initializing or initialized:
        restarts, last_restart = restartable_restarts, last_restartable
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += cs.get("restartCount", 0)
            last_restart = max(last_restart, parse_time(((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")))
            state = cs.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                reason = f"Signal:{terminated['signal']}" if terminated.get("signal") else f"ExitCode:{terminated.get('exitCode', 0)}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            reason = "Running" if pod_ready else "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_text = str(restarts)
    if restarts and last_restart:
        restarts_text = f"{restarts} ({human_duration(now - last_restart)} ago)"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gates_text = "<none>"
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        gates_text = f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    return [meta.get("name", ""), f"{ready}/{total}", reason, restarts_text, _age(pod, now),
            (ips[0].get("ip") if ips else "") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", gates_text]


def _pod_conditions(pod: dict) -> list[dict] | None:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return [{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


# --- nodes -------------------------------------------------------------------------------------
def _node_row(node: dict, now: float) -> Row:
    spec, status, meta = node.get("spec") or {}, node.get("status") or {}, _meta(node)
    states = [("Ready" if c.get("status") == "True" else "NotReady") for c in status.get("conditions") or [] if c.get("type") == "Ready"][:1]
    if not states:
        states = ["Unknown"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in (meta.get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/"):]:
            roles.add(key[len("node-role.kubernetes.io/"):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in status.get("addresses") or [] if a.get("type") == kind), "<none>")

    return [meta.get("name", ""), ",".join(states), ",".join(sorted(roles)) or "<none>", _age(node, now),
            info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


# --- events ------------------------------------------------------------------------------------
def _event_row(event: dict, now: float) -> Row:
    first = since(event.get("firstTimestamp"), now) if event.get("firstTimestamp") else since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") or 0
    if event.get("series"):
        last = since(event["series"].get("lastObservedTime"), now)
        count = event["series"].get("count", 0)
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent", "")
    instance = source.get("host") or event.get("reportingInstance", "")
    return [last, event.get("type", ""), event.get("reason", ""), target, involved.get("fieldPath", ""),
            f"{component}, {instance}" if instance else component, (event.get("message") or "").strip(), first, count,
            _meta(event).get("name", "")]


# --- workloads ---------------------------------------------------------------------------------
def _deployment_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    return [_meta(obj).get("name", ""), f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(obj, now), names, images,
            _selector_string(spec.get("selector"))]


def _selector_string(selector: Mapping | None) -> str:
    """``LabelSelectorAsSelector(...).String()``: empty for nil or ``{}``."""
    text = format_label_selector(selector)
    return "" if text == "<none>" else text


def _replica_set_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    return [_meta(obj).get("name", ""), spec.get("replicas", 0), status.get("replicas", 0), status.get("readyReplicas", 0),
            _age(obj, now), names, images, format_label_selector(spec.get("selector"))]


def _rc_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    return [_meta(obj).get("name", ""), spec.get("replicas", 0), status.get("replicas", 0), status.get("readyReplicas", 0),
            _age(obj, now), names, images, format_labels(spec.get("selector"))]


def _stateful_set_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    return [_meta(obj).get("name", ""), f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}", _age(obj, now), names, images]


def _daemon_set_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    return [_meta(obj).get("name", ""), status.get("desiredNumberScheduled", 0), status.get("currentNumberScheduled", 0),
            status.get("numberReady", 0), status.get("updatedNumberScheduled", 0), status.get("numberAvailable", 0),
            format_labels(_template_spec(obj).get("nodeSelector")), _age(obj, now), names, images,
            format_label_selector(spec.get("selector"))]


def _pdb_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    min_available = spec.get("minAvailable")
    max_unavailable = spec.get("maxUnavailable")
    return [_meta(obj).get("name", ""), "N/A" if min_available is None else str(min_available),
            "N/A" if max_unavailable is None else str(max_unavailable), status.get("disruptionsAllowed", 0), _age(obj, now)]


# --- services, storage, misc -------------------------------------------------------------------
def _service_row(obj: dict, now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    svc_type = spec.get("type", "")
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    external = spec.get("externalIPs") or []
    if svc_type in ("ClusterIP", "NodePort", ""):
        external_ip = ",".join(external) or "<none>"
    elif svc_type == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in ((status.get("loadBalancer") or {}).get("ingress") or [])]
        lb = ",".join(i for i in ingress if i)
        external_ip = ",".join([*filter(None, lb.split(",")), *external]) or lb or "<pending>"
    elif svc_type == "ExternalName":
        external_ip = spec.get("externalName", "")
    else:
        external_ip = "<unknown>"
    ports = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol", "TCP")
        ports.append(f"{port.get('port')}:{port['nodePort']}/{protocol}" if port.get("nodePort") else f"{port.get('port')}/{protocol}")
    return [_meta(obj).get("name", ""), svc_type, cluster_ips[0] if cluster_ips else "<none>", external_ip,
            ",".join(ports) or "<none>", _age(obj, now), format_labels(spec.get("selector"))]


_ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP"))


def _access_modes(modes: Iterable[str] | None) -> str:
    present = set(modes or [])
    return ",".join(short for full, short in _ACCESS_MODES if full in present)


def _pv_row(obj: dict, now: float) -> Row:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    claim = spec.get("claimRef")
    claim_text = f"{claim.get('namespace', '')}/{claim.get('name', '')}" if claim else ""
    phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase", "")
    storage_class = spec.get("storageClassName") or (meta.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")
    return [meta.get("name", ""), (spec.get("capacity") or {}).get("storage", "0"), _access_modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), phase, claim_text, storage_class,
            spec.get("volumeAttributesClassName") or "<unset>", status.get("reason", ""), _age(obj, now),
            spec.get("volumeMode") or "<unset>"]


def _pvc_row(obj: dict, now: float) -> Row:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase", "")
    capacity, modes = "", ""
    if spec.get("volumeName"):
        modes = _access_modes(status.get("accessModes"))
        capacity = (status.get("capacity") or {}).get("storage", "0")
    storage_class = spec.get("storageClassName") or (meta.get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")
    return [meta.get("name", ""), phase, spec.get("volumeName", ""), capacity, modes, storage_class,
            spec.get("volumeAttributesClassName") or "<unset>", _age(obj, now), spec.get("volumeMode") or "<unset>"]


def _storage_class_row(obj: dict, now: float) -> Row:
    meta = _meta(obj)
    annotations = meta.get("annotations") or {}
    default = "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                         annotations.get("storageclass.beta.kubernetes.io/is-default-class"))
    return [meta.get("name", "") + (" (default)" if default else ""), obj.get("provisioner", ""),
            obj.get("reclaimPolicy") or "Delete", obj.get("volumeBindingMode") or "Immediate",
            bool(obj.get("allowVolumeExpansion")), _age(obj, now)]


def _subjects(subjects: Iterable[Mapping] | None) -> tuple[str, str, str]:
    users, groups, sas = [], [], []
    for s in subjects or []:
        if s.get("kind") == "User":
            users.append(s.get("name", ""))
        elif s.get("kind") == "Group":
            groups.append(s.get("name", ""))
        elif s.get("kind") == "ServiceAccount":
            sas.append(f"{s.get('namespace', '')}/{s.get('name', '')}")
    return ", ".join(users), ", ".join(groups), ", ".join(sas)


def _binding_row(obj: dict, now: float) -> Row:
    ref = obj.get("roleRef") or {}
    return [_meta(obj).get("name", ""), f"{ref.get('kind', '')}/{ref.get('name', '')}", _age(obj, now), *_subjects(obj.get("subjects"))]


def _simple(*cells: Callable[[dict], Any]) -> Printer:
    def row(obj: dict, now: float) -> Row:
        return [_meta(obj).get("name", ""), *(c(obj) for c in cells), _age(obj, now)]

    return row


def _priority_class_row(obj: dict, now: float) -> Row:
    return [_meta(obj).get("name", ""), obj.get("value", 0), bool(obj.get("globalDefault")), _age(obj, now),
            obj.get("preemptionPolicy", "")]


def _volume_attachment_row(obj: dict, now: float) -> Row:
    spec = obj.get("spec") or {}
    return [_meta(obj).get("name", ""), spec.get("attacher", ""), (spec.get("source") or {}).get("persistentVolumeName", ""),
            spec.get("nodeName", ""), bool((obj.get("status") or {}).get("attached")), _age(obj, now)]


def _csi_driver_row(obj: dict, now: float) -> Row:
    spec = obj.get("spec") or {}
    tokens = spec.get("tokenRequests")
    return [_meta(obj).get("name", ""), spec.get("attachRequired", True), bool(spec.get("podInfoOnMount")),
            bool(spec.get("storageCapacity")), "<unset>" if tokens is None else ",".join(t.get("audience", "") for t in tokens),
            bool(spec.get("requiresRepublish")), ",".join(spec.get("volumeLifecycleModes") or []) or "<none>", _age(obj, now)]


def _resource_claim_row(obj: dict, now: float) -> Row:
    meta, status = _meta(obj), obj.get("status") or {}
    states = ["deleted"] if meta.get("deletionTimestamp") else []
    if status.get("allocation") is None:
        if not meta.get("deletionTimestamp"):
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
    return [meta.get("name", ""), ",".join(states), _age(obj, now)]


def _resource_slice_row(obj: dict, now: float) -> Row:
    spec = obj.get("spec") or {}
    return [_meta(obj).get("name", ""), spec.get("nodeName", ""), spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""), _age(obj, now)]


_I, _S, _B = "integer", "string", "boolean"
_WORKLOAD_WIDE = [_col("Containers", priority=1), _col("Images", priority=1), _col("Selector", priority=1)]

PRINTERS: dict[tuple[str, str], tuple[list[dict], Printer]] = {
    ("", "Pod"): ([NAME, _col("Ready"), _col("Status"), _col("Restarts"), AGE, _col("IP", priority=1), _col("Node", priority=1),
                   _col("Nominated Node", priority=1), _col("Readiness Gates", priority=1)], _pod_row),
    ("", "Node"): ([NAME, _col("Status"), _col("Roles"), AGE, _col("Version"), _col("Internal-IP", priority=1),
                    _col("External-IP", priority=1), _col("OS-Image", priority=1), _col("Kernel-Version", priority=1),
                    _col("Container-Runtime", priority=1)], _node_row),
    ("", "Event"): ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Subobject", priority=1),
                     _col("Source", priority=1), _col("Message"), _col("First Seen", priority=1), _col("Count", priority=1),
                     _col("Name", priority=1, fmt="name")], _event_row),
    ("", "Namespace"): ([NAME, _col("Status"), AGE], lambda o, now: [_meta(o).get("name", ""), (o.get("status") or {}).get("phase", ""), _age(o, now)]),
    ("", "Service"): ([NAME, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), AGE, _col("Selector", priority=1)], _service_row),
    ("", "PersistentVolume"): ([NAME, _col("Capacity"), _col("Access Modes"), _col("Reclaim Policy"), _col("Status"), _col("Claim"),
                                _col("StorageClass"), _col("VolumeAttributesClass"), _col("Reason"), AGE, _col("VolumeMode", priority=1)], _pv_row),
    ("", "PersistentVolumeClaim"): ([NAME, _col("Status"), _col("Volume"), _col("Capacity"), _col("Access Modes"), _col("StorageClass"),
                                     _col("VolumeAttributesClass"), AGE, _col("VolumeMode", priority=1)], _pvc_row),
    ("", "ReplicationController"): ([NAME, _col("Desired", _I), _col("Current", _I), _col("Ready", _I), AGE, *_WORKLOAD_WIDE], _rc_row),
    ("", "ConfigMap"): ([NAME, _col("Data"), AGE], _simple(lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {}))),
    ("", "Secret"): ([NAME, _col("Type"), _col("Data"), AGE], _simple(lambda o: o.get("type", ""), lambda o: len(o.get("data") or {}))),
    ("", "ServiceAccount"): ([NAME, _col("Secrets"), AGE], _simple(lambda o: len(o.get("secrets") or []))),
    ("apps", "Deployment"): ([NAME, _col("Ready"), _col("Up-to-date"), _col("Available"), AGE, *_WORKLOAD_WIDE], _deployment_row),
    ("apps", "ReplicaSet"): ([NAME, _col("Desired", _I), _col("Current", _I), _col("Ready", _I), AGE, *_WORKLOAD_WIDE], _replica_set_row),
    ("apps", "StatefulSet"): ([NAME, _col("Ready"), AGE, _col("Containers", priority=1), _col("Images", priority=1)], _stateful_set_row),
    ("apps", "DaemonSet"): ([NAME, _col("Desired", _I), _col("Current", _I), _col("Ready", _I), _col("Up-to-date", _I), _col("Available", _I),
                             _col("Node Selector"), AGE, *_WORKLOAD_WIDE], _daemon_set_row),
    ("policy", "PodDisruptionBudget"): ([NAME, _col("Min Available"), _col("Max Unavailable"), _col("Allowed Disruptions", _I), AGE], _pdb_row),
    ("scheduling.k8s.io", "PriorityClass"): ([NAME, _col("Value", _I), _col("Global-Default", _B), AGE, _col("PreemptionPolicy")], _priority_class_row),
    ("storage.k8s.io", "StorageClass"): ([NAME, _col("Provisioner"), _col("ReclaimPolicy"), _col("VolumeBindingMode"),
                                          _col("AllowVolumeExpansion"), AGE], _storage_class_row),
    ("storage.k8s.io", "CSINode"): ([NAME, _col("Drivers", _I), AGE], _simple(lambda o: len((o.get("spec") or {}).get("drivers") or []))),
    ("storage.k8s.io", "CSIDriver"): ([NAME, _col("AttachRequired", _B), _col("PodInfoOnMount", _B), _col("StorageCapacity", _B),
                                       _col("TokenRequests"), _col("RequiresRepublish", _B), _col("Modes"), AGE], _csi_driver_row),
    ("storage.k8s.io", "VolumeAttachment"): ([NAME, _col("Attacher", fmt="name"), _col("PV"), _col("Node"), _col("Attached", _B), AGE],
                                             _volume_attachment_row),
    ("storage.k8s.io", "CSIStorageCapacity"): ([NAME, _col("StorageClassName"), _col("Capacity")],
                                               lambda o, now: [_meta(o).get("name", ""), o.get("storageClassName", ""), o.get("capacity") or "<unset>"]),
    ("coordination.k8s.io", "Lease"): ([NAME, _col("Holder"), AGE], _simple(lambda o: (o.get("spec") or {}).get("holderIdentity") or "")),
    ("rbac.authorization.k8s.io", "RoleBinding"): ([NAME, _col("Role"), AGE, _col("Users", priority=1), _col("Groups", priority=1),
                                                     _col("ServiceAccounts", priority=1)], _binding_row),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ([NAME, _col("Role"), AGE, _col("Users", priority=1), _col("Groups", priority=1),
                                                            _col("ServiceAccounts", priority=1)], _binding_row),
    ("resource.k8s.io", "ResourceClaim"): ([NAME, _col("State"), AGE], _resource_claim_row),
    ("resource.k8s.io", "ResourceSlice"): ([NAME, _col("Node"), _col("Driver"), _col("Pool"), AGE], _resource_slice_row),
}
PRINTERS[("events.k8s.io", "Event")] = PRINTERS[("", "Event")]

DEFAULT_COLUMNS = [NAME, _col("Created At", fmt="date", description="CreationTimestamp is a timestamp representing the server time when this object was created.")]


def _default_row(obj: dict, now: float) -> Row:
    meta = _meta(obj)
    return [meta.get("name", ""), meta.get("creationTimestamp")]


def partial_metadata(obj: Mapping) -> dict:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def to_table(kind: Kind, objects: Iterable[dict], list_meta: dict, include_object: str = "PartialObjectMetadata",
             now: float | None = None, row_source: Callable[[dict], dict] | None = None) -> dict:
    """A ``meta.k8s.io/v1`` Table of ``objects``. ``row_source`` maps a served object to the shape the
    printer reads (events.k8s.io events are printed from their core/v1 form, as upstream does)."""
    now = time.time() if now is None else now
    if isinstance(kind, CustomKind):
        columns, printer = custom_printer(kind)
    else:
        columns, printer = PRINTERS.get((kind.group, kind.kind), (DEFAULT_COLUMNS, _default_row))
    rows = []
    for obj in objects:
        source = row_source(obj) if row_source is not None else obj
        row: dict[str, Any] = {"cells": printer(source, now)}
        if kind.kind == "Pod":
            conditions = _pod_conditions(source)
            if conditions:
                row["conditions"] = conditions
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = partial_metadata(obj)
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns, "rows": rows}


# --- custom resources ----------------------------------------------------------------------------
#: A CRD version without ``additionalPrinterColumns`` prints its objects' age.
_CUSTOM_DEFAULT_COLUMNS = ({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},)
_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\['([^']*)'\]|\[\?\(@\.([\w.-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]")


def custom_printer(kind: CustomKind) -> tuple[list[dict], Printer]:
    """The table of a custom resource: ``Name``, then the version's ``additionalPrinterColumns``
    (each a JSONPath into the object, its cell typed as the column says), as the apiextensions
    table convertor prints."""
    specs = kind.printer_columns or _CUSTOM_DEFAULT_COLUMNS
    name = {**NAME, "description": "Name must be unique within a namespace. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"}
    columns = [name] + [_col(c["name"], c["type"], int(c.get("priority") or 0), c.get("description", ""), c.get("format", ""))
                        for c in specs]

    def row(obj: dict, now: float) -> Row:
        return [_meta(obj).get("name", "")] + [_cell(c["type"], _json_path(obj, c["jsonPath"]), now) for c in specs]

    return columns, row


def _json_path(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (``.status.phase``, ``.spec.items[0]``,
    ``.status.conditions[?(@.type=="Ready")].status``), None when absent."""
    value = obj
    for field, index, quoted, filter_key, filter_value in _PATH_STEP.findall(path.strip().strip("{}")):
        if filter_key:
            items = value if isinstance(value, list) else []
            value = next((i for i in items if isinstance(i, dict) and str(_json_path(i, "." + filter_key)) == filter_value), None)
        elif index:
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
        else:
            value = value.get(field or quoted) if isinstance(value, dict) else None
        if value is None:
            return None
    return value


def _cell(column_type: str, value: Any, now: float) -> Any:
    """``cellForJSONValue``: a date as its age, numbers and booleans as such, None when absent
    or of another type."""
    if value is None:
        return None
    if column_type == "date":
        return since(value, now) if isinstance(value, str) else None
    if column_type == "integer":
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column_type == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    return value if isinstance(value, str) else json_text(value)


def json_text(value: Any) -> str:
    """A non-string value of a string column, as Go's ``fmt`` prints JSON values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
