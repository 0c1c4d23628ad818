"""What kube-apiserver's admission does to an object before storing it (defaulting is
``kubesched.api.defaults``): the plugins that matter to scheduling (Priority,
DefaultTolerationSeconds) and the pod strategy's create-time changes.

Kept apart from the store so that the embedded cluster, the HTTP API server and tests agree on
what a created pod looks like.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubesched.api.apierrors import Forbidden
from kubesched.api.defaults import gate_enabled
from kubesched.api.jsonmemo import JSONMemo
from kubesched.api.resources import qos_class

SYSTEM_PRIORITY_CLASSES = (
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
     "metadata": {"name": "system-node-critical"}, "value": 2000001000,
     "description": "Used for system critical pods that must not be moved from their current node.",
     "preemptionPolicy": "PreemptLowerPriority"},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
     "metadata": {"name": "system-cluster-critical"}, "value": 2000000000,
     "description": "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
     "preemptionPolicy": "PreemptLowerPriority"},
)

DEFAULT_NOT_READY_TOLERATION_SECONDS = 300
DEFAULT_UNREACHABLE_TOLERATION_SECONDS = 300

PriorityClassLookup = Callable[[str], Mapping | None]

#: The QoS classes of the resource sections seen last (``_pod_qos_class``).
_QOS_BY_RESOURCES: JSONMemo[str] = JSONMemo()


def default_pod_status(pod: dict, gates: Mapping[str, bool] | None = None) -> None:
    """The pod strategy's ``PrepareForCreate``: phase Pending, the QoS class, and a gated pod's
    ``PodScheduled=False/SchedulingGated`` condition. A status the manifest brings (pods exported
    from a live cluster, with their start times) is kept, where upstream resets it."""
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _pod_qos_class(pod, gate_enabled(gates, "PodLevelResources")))
    conditions = status.get("conditions") or []
    if (pod.get("spec") or {}).get("schedulingGates") and not any(c.get("type") == "PodScheduled" for c in conditions):
        status["conditions"] = [*conditions, {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                              "lastTransitionTime": None, "reason": "SchedulingGated",
                                              "message": "Scheduling is blocked due to non-empty scheduling gates"}]


def _pod_qos_class(pod: dict, pod_level: bool) -> str:
    """``qos_class``, computed once per distinct set of resource sections: the class depends on
    them alone, and replicas of one template, created together, carry equal ones (the exact
    arithmetic over quantities costs far more than encoding them)."""
    spec = pod.get("spec") or {}
    sections: list[Any] = [pod_level, spec.get("resources")]
    for field in ("containers", "initContainers"):
        sections.append([c.get("resources") for c in spec.get(field) or ()])
    return _QOS_BY_RESOURCES.get(sections, lambda: qos_class(pod, pod_level))


def admit_priority(pod: dict, lookup: PriorityClassLookup, global_default: Mapping | None) -> None:
    """The Priority admission plugin: resolve ``priorityClassName`` into priority and preemptionPolicy."""
    spec = pod["spec"]
    name = spec.get("priorityClassName")
    meta = pod.get("metadata") or {}
    if name:
        pc = lookup(name)
        if pc is None:
            raise _forbidden(meta, f"no PriorityClass with name {name} was found")
    else:
        pc = global_default
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
    value = pc.get("value", 0) if pc else 0
    if spec.get("priority") is not None and spec["priority"] != value:
        raise _forbidden(meta, f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                               f"priority admission controller computed {value} from the given PriorityClass name")
    spec["priority"] = value
    # With no class at all, upstream's getDefaultPriority answers priority 0, PreemptLowerPriority.
    policy = pc.get("preemptionPolicy") if pc is not None else "PreemptLowerPriority"
    if policy:
        if spec.get("preemptionPolicy") not in (None, policy):
            raise _forbidden(meta, f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided "
                                   f"in pod spec; priority admission controller computed {policy} from the given PriorityClass name")
        spec["preemptionPolicy"] = policy


def _forbidden(meta: Mapping, detail: str) -> Forbidden:
    """``admission.NewForbidden``: a pod not named yet is called by its generateName."""
    return Forbidden.of("pods", meta.get("name") or meta.get("generateName", ""), detail)


def keep_priority(pod: dict, old: Mapping) -> None:
    """The Priority plugin on update: priority and preemptionPolicy, set on create, stay when the
    update leaves them out (any other change is refused by pod update validation)."""
    spec, old_spec = pod.setdefault("spec", {}), old.get("spec") or {}
    for field in ("priority", "preemptionPolicy"):
        if spec.get(field) is None and old_spec.get(field) is not None:
            spec[field] = old_spec[field]


def admit_priority_class(pc: Mapping, existing_default: Mapping | None) -> None:
    """The Priority plugin's PriorityClass check: only one class may be the global default."""
    name = (pc.get("metadata") or {}).get("name", "")
    if pc.get("globalDefault") and existing_default is not None and existing_default["metadata"]["name"] != name:
        raise Forbidden.of("priorityclasses", name, f"PriorityClass {existing_default['metadata']['name']} is already "
                           "marked as default. Only one default can exist", "scheduling.k8s.io")


def admit_default_toleration_seconds(pod: dict) -> None:
    """The DefaultTolerationSeconds admission plugin: tolerate not-ready/unreachable for 300s."""
    tolerations = pod["spec"].setdefault("tolerations", [])
    for key, seconds in (("node.kubernetes.io/not-ready", DEFAULT_NOT_READY_TOLERATION_SECONDS),
                         ("node.kubernetes.io/unreachable", DEFAULT_UNREACHABLE_TOLERATION_SECONDS)):
        if any(_tolerates_no_execute(t, key) for t in tolerations):
            continue
        tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})


def _tolerates_no_execute(tol: Mapping, key: str) -> bool:
    return (tol.get("key") or "") in ("", key) and (tol.get("effect") or "") in ("", "NoExecute")


def apply_label_keys_to_selectors(pod: dict, gates: Mapping[str, bool] | None = None) -> None:
    """kube-apiserver's pod creation defaulting (``mutatePodAffinity`` and
    ``mutateTopologySpreadConstraints`` in ``pkg/registry/core/pod/strategy.go``): each key of
    ``matchLabelKeys`` / ``mismatchLabelKeys`` found in the pod's labels becomes a ``key In (value)``
    / ``key NotIn (value)`` requirement of the term's labelSelector (of the constraint's, for
    topology spread), so the scheduler and the pod's later readers see the merged selector.

    Gates: MatchLabelKeysInPodAffinity for (anti-)affinity terms; MatchLabelKeysInPodTopologySpread
    and MatchLabelKeysInPodTopologySpreadSelectorMerge for topology spread constraints.
    """
    def enabled(name: str) -> bool:
        return gate_enabled(gates, name)

    spec = pod.get("spec") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    affinity = spec.get("affinity") or {}
    if enabled("MatchLabelKeysInPodAffinity"):
        for section in ("podAffinity", "podAntiAffinity"):
            part = affinity.get(section) or {}
            for weighted in part.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
                _merge_affinity_label_keys(weighted.get("podAffinityTerm") or {}, labels)
            for term in part.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
                _merge_affinity_label_keys(term, labels)
    if enabled("MatchLabelKeysInPodTopologySpread") and enabled("MatchLabelKeysInPodTopologySpreadSelectorMerge"):
        for constraint in spec.get("topologySpreadConstraints") or []:
            if constraint.get("matchLabelKeys") and constraint.get("labelSelector") is not None:
                _append_label_key_requirements(constraint["labelSelector"], constraint["matchLabelKeys"], "In", labels)


def _merge_affinity_label_keys(term: dict, labels: Mapping[str, str]) -> None:
    """``applyMatchLabelKeysAndMismatchLabelKeys``; a nil labelSelector (matches nothing) is left alone."""
    match, mismatch = term.get("matchLabelKeys") or [], term.get("mismatchLabelKeys") or []
    if (not match and not mismatch) or term.get("labelSelector") is None:
        return
    _append_label_key_requirements(term["labelSelector"], match, "In", labels)
    _append_label_key_requirements(term["labelSelector"], mismatch, "NotIn", labels)


def _append_label_key_requirements(selector: dict, keys: list[str], operator: str, labels: Mapping[str, str]) -> None:
    """``applyLabelKeysToLabelSelector``: keys missing from the pod's labels are skipped."""
    for key in keys:
        if key in labels:
            selector.setdefault("matchExpressions", [])
            if selector["matchExpressions"] is None:
                selector["matchExpressions"] = []
            selector["matchExpressions"].append({"key": key, "operator": operator, "values": [labels[key]]})
