"""The objects scheduler_perf creates, built from the same templates
(``test/integration/scheduler_perf/templates``): a 4-cpu / 32Gi / 110-pod node, and pods that
request (and limit) 100m / 500Mi unless the template says otherwise.

Each builder returns a fresh dict with ``generateName`` set; the API server (or the store) names
it, as upstream's pod creator does. Two deviations, both invisible to the scheduler:

* upstream's ``pod-high-priority*.yaml`` write ``spec.priority: 10`` directly, which works there
  because scheduler_perf's API server runs without the Priority admission plugin. kubesched's store
  always admits priorities, so those pods name a PriorityClass of value 10 instead
  (``HIGH_PRIORITY_CLASS``): same priority, same default preemption policy.
* nodes get their ``kubernetes.io/hostname`` label at creation, as upstream's node preparer does,
  and their zone label at creation too (upstream patches it right after; no pod exists yet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"
HIGH_PRIORITY_CLASS = "scheduler-perf-priority-10"

Template = Callable[[], dict]


def priority_class(name: str = HIGH_PRIORITY_CLASS, value: int = 10) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


# --- nodes ------------------------------------------------------------------------------------
def node_default() -> dict:
    """``templates/node-default.yaml``: capacity only (allocatable is defaulted from it), Ready."""
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"generateName": "scheduler-perf-"},
        "spec": {},
        "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                   "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"},
    }


def node_churn() -> dict:
    """``templates/churn/node-default.yaml``: a node that takes no pods (capacity pods: 0)."""
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"generateName": "node-churn-"},
        "status": {"capacity": {"pods": "0"}, "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"},
    }


# --- services -----------------------------------------------------------------------------------
def service_churn() -> dict:
    """``templates/churn/service-default.yaml``."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"generateName": "service-churn-"},
        "spec": {"selector": {"app": "foo"}, "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}]},
    }


# --- pods -----------------------------------------------------------------------------------------
def _pod(prefix: str, cpu: str = "100m", memory: str = "500Mi", *, limits: bool = True, labels: dict | None = None,
         **spec: Any) -> dict:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = {"cpu": cpu, "memory": memory}
    meta: dict[str, Any] = {"generateName": prefix}
    if labels:
        meta["labels"] = dict(labels)
    container = {"image": PAUSE_IMAGE, "name": "pause", "ports": [{"containerPort": 80}], "resources": resources}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {**spec, "containers": [container]}}


def _term(color: str, topology_key: str) -> dict:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": topology_key,
            "namespaces": ["sched-1", "sched-0"]}


def pod_default() -> dict:
    """``templates/pod-default.yaml``."""
    return _pod("pod-")


def pod_with_pod_anti_affinity() -> dict:
    """``templates/pod-with-pod-anti-affinity.yaml``: one green pod per hostname."""
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOSTNAME_KEY)]}}
    return _pod("anti-affinity-pod-", labels={"color": "green"}, affinity=affinity)


def pod_with_pod_affinity() -> dict:
    """``templates/pod-with-pod-affinity.yaml``: blue pods together in a zone."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE_KEY)]}}
    return _pod("affinity-pod-", labels={"color": "blue"}, affinity=affinity)


def pod_with_preferred_pod_affinity() -> dict:
    """``templates/pod-with-preferred-pod-affinity.yaml``: red pods prefer each other's hosts."""
    term = {"podAffinityTerm": _term("red", HOSTNAME_KEY), "weight": 1}
    affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    return _pod("preferred-affinity-pod-", labels={"color": "red"}, affinity=affinity)


def pod_with_preferred_pod_anti_affinity() -> dict:
    """``templates/pod-with-preferred-pod-anti-affinity.yaml``: yellow pods prefer apart."""
    term = {"podAffinityTerm": _term("yellow", HOSTNAME_KEY), "weight": 1}
    affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    return _pod("preferred-anti-affinity-pod-", labels={"color": "yellow"}, affinity=affinity)


def pod_with_node_affinity() -> dict:
    """``templates/pod-with-node-affinity.yaml``: zone In [zone1, zone2]."""
    requirement = {"key": ZONE_KEY, "operator": "In", "values": ["zone1", "zone2"]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [requirement]}]}}}
    return _pod("node-affinity-", affinity=affinity)


def _spreading(when: str) -> dict:
    constraint = {"maxSkew": 5, "topologyKey": ZONE_KEY, "whenUnsatisfiable": when,
                  "labelSelector": {"matchLabels": {"color": "blue"}}}
    return _pod("spreading-pod-", labels={"color": "blue"}, topologySpreadConstraints=[constraint])


def pod_with_topology_spreading() -> dict:
    """``templates/pod-with-topology-spreading.yaml``: maxSkew 5 over zones, DoNotSchedule."""
    return _spreading("DoNotSchedule")


def pod_with_preferred_topology_spreading() -> dict:
    """``templates/pod-with-preferred-topology-spreading.yaml``: the same, ScheduleAnyway."""
    return _spreading("ScheduleAnyway")


def pod_low_priority() -> dict:
    """``templates/pod-low-priority.yaml``: 900m, so four fill a 4-cpu node; deleted at once."""
    return _pod("pod-", "900m", terminationGracePeriodSeconds=0)


def pod_high_priority() -> dict:
    """``templates/pod-high-priority.yaml``: 3 cpu at priority 10, so it must preempt three of four."""
    return _pod("pod-", "3000m", priorityClassName=HIGH_PRIORITY_CLASS)


def pod_high_priority_large_cpu() -> dict:
    """``templates/pod-high-priority-large-cpu.yaml``: 9 cpu at priority 10, fits no 4-cpu node (requests only)."""
    return _pod("pod-h-", "9", limits=False, priorityClassName=HIGH_PRIORITY_CLASS)


# --- named objects (the whole-process rows, which write manifests or need stable names) ---------
ZONES = ("zone-a", "zone-b", "zone-c")


def named_node(i: int) -> dict:
    """``node_default`` named ``node-NNNNN``, its hostname label and a zone (round-robin over
    ``ZONES``) set at creation, as a kubelet and a node preparer would."""
    node = node_default()
    name = f"node-{i:05d}"
    node["metadata"] = {"name": name, "labels": {HOSTNAME_KEY: name, ZONE_KEY: ZONES[i % len(ZONES)]}}
    return node


def named_pod(i: int, namespace: str = "default", prefix: str = "pod") -> dict:
    """``pod_default`` named ``PREFIX-NNNNNN`` in ``namespace``."""
    pod = pod_default()
    pod["metadata"] = {"name": f"{prefix}-{i:06d}", "namespace": namespace}
    return pod
