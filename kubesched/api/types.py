"""The scheduler's parsed view of pods and nodes (upstream ``framework.PodInfo`` / ``NodeInfo``).

A PodInfo parses a pod once (requests, tolerations, affinity terms, ports, images) and keeps the
raw object beside it; everything is computed lazily on first use and cached for the pod's life.
A NodeInfo aggregates a node and the pods on it; it is what a classic per-node plugin receives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api import resources as res
from kubesched.api.jsonmemo import JSONMemo
from kubesched.api.quantity import parse_quantity
from kubesched.api.selectors import (
    LabelSelector,
    NodeSelector,
    parse_label_selector,
    parse_node_selector,
    selector_from_set,
)
from kubesched.api.timeutil import parse_time
from kubesched.utils.cached import cached_property

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: Requests and non-zero requests by ``requests_key``: what replicas of one template share.
_REQUESTS_BY_KEY: dict[Any, dict[str, int]] = {}
_NON_ZERO_BY_KEY: dict[Any, tuple[int, int]] = {}
_MEMO_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint reduced to what scheduling reads (upstream ``v1.Taint``)."""
    key: str
    value: str
    effect: str

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Taint:
        """The taint of a ``spec.taints`` entry."""
        return cls(raw.get("key", ""), raw.get("value", "") or "", raw.get("effect", ""))


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (upstream ``v1.Toleration``); ``seconds`` is ``tolerationSeconds``."""
    key: str
    operator: str
    value: str
    effect: str
    seconds: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Toleration:
        """The toleration of a ``spec.tolerations`` entry, the operator defaulting to Equal."""
        return cls(
            raw.get("key", "") or "",
            raw.get("operator", "") or "Equal",
            raw.get("value", "") or "",
            raw.get("effect", "") or "",
            raw.get("tolerationSeconds"),
        )

    def tolerates(self, taint: Taint) -> bool:
        """``v1.Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        return False


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A pod (anti-)affinity term with its namespaces resolved (upstream ``framework.AffinityTerm``)."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector
    weight: int = 0

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str] | None) -> bool:
        """Whether ``pod`` (whose namespace has ``ns_labels``) is selected by this term (upstream
        ``AffinityTerm.Matches``)."""
        if pod.namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(pod.labels)
        return False

    @classmethod
    def from_spec(cls, owner_namespace: str, term: Mapping[str, Any], weight: int = 0) -> AffinityTerm:
        """The term of a pod's ``podAffinityTerm``, with no namespaces and no namespace selector meaning
        the owner's namespace (upstream ``newAffinityTerm``)."""
        selector = parse_label_selector(term.get("labelSelector"))
        ns_spec = term.get("namespaceSelector")
        namespaces = term.get("namespaces") or []
        if not namespaces and ns_spec is None:
            namespaces = [owner_namespace]
        return cls(frozenset(namespaces), selector, term.get("topologyKey", ""), parse_label_selector(ns_spec), weight)


#: Parsed inter-pod terms by their kind, raw form and namespace (``PodInfo._terms``).
_TERMS: JSONMemo[list[AffinityTerm]] = JSONMemo()


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host port a container asks for (upstream ``framework.ProtocolPort`` with its IP)."""
    ip: str
    protocol: str
    port: int


def pod_host_ports(spec: Mapping[str, Any]) -> list[HostPort]:
    """``schedutil.GetHostPorts``: host ports of containers and of restartable init containers."""
    ports: list[HostPort] = []
    containers = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    containers += spec.get("containers") or []
    for container in containers:
        for p in container.get("ports") or []:
            host_port = p.get("hostPort") or 0
            if host_port > 0:
                ports.append(HostPort(p.get("hostIP") or DEFAULT_BIND_ALL_HOST_IP, p.get("protocol") or "TCP", host_port))
    return ports


class PodInfo:
    """A pod plus everything the scheduler derives from it, computed once (upstream
    ``framework.PodInfo``)."""

    __slots__ = ("__dict__", "key", "name", "namespace", "pod", "uid")

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod
        meta = pod["metadata"]
        self.name: str = meta["name"]
        self.namespace: str = meta.get("namespace") or "default"
        self.uid: str = meta.get("uid") or f"{self.namespace}/{self.name}"
        self.key = f"{self.namespace}/{self.name}"

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"

    def bound_to(self, node_name: str) -> PodInfo:
        """This pod assigned to ``node_name``: the scheduler's assumed pod (upstream copies the pod and
        sets ``Spec.NodeName`` in ``assume``), reusing what was parsed."""
        pod = dict(self.pod)
        pod["spec"] = {**self.spec, "nodeName": node_name}
        copy = PodInfo.__new__(PodInfo)
        copy.__dict__.update(self.__dict__)
        copy.pod = pod
        copy.name, copy.namespace, copy.uid, copy.key = self.name, self.namespace, self.uid, self.key
        return copy

    @property
    def spec(self) -> dict[str, Any]:
        """The pod's ``spec`` ({} when absent)."""
        return self.pod.get("spec") or {}

    @property
    def status(self) -> dict[str, Any]:
        """The pod's ``status`` ({} when absent)."""
        return self.pod.get("status") or {}

    @cached_property
    def labels(self) -> dict[str, str]:
        """The pod's labels, what selectors match."""
        return self.pod["metadata"].get("labels") or {}

    @property
    def node_name(self) -> str:
        """``spec.nodeName``: the node the pod is bound (or assumed) to, "" while pending."""
        return self.spec.get("nodeName") or ""

    @property
    def nominated_node_name(self) -> str:
        """``status.nominatedNodeName``: where preemption made room for the pod."""
        return self.status.get("nominatedNodeName") or ""

    @cached_property
    def scheduler_name(self) -> str:
        """``spec.schedulerName``, which picks the profile (upstream defaults it to
        default-scheduler)."""
        return self.spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME

    @cached_property
    def priority(self) -> int:
        """``corev1helpers.PodPriority``: spec.priority, 0 when unset."""
        return self.spec.get("priority") or 0

    @property
    def deletion_timestamp(self) -> str | None:
        """``metadata.deletionTimestamp``: set once the pod is terminating."""
        stamp: str | None = self.pod["metadata"].get("deletionTimestamp")
        return stamp

    @cached_property
    def start_time(self) -> float | None:
        """``status.startTime`` (None when the pod has not started), used to order preemption victims
        (upstream ``util.GetPodStartTime``)."""
        raw = self.status.get("startTime")
        return parse_time(raw) if raw else None

    @cached_property
    def scheduling_gates(self) -> list[str]:
        """Names of ``spec.schedulingGates``; a gated pod waits before the queue (SchedulingGates)."""
        return [g.get("name", "") for g in self.spec.get("schedulingGates") or []]

    # --- resources -------------------------------------------------------------------------
    @cached_property
    def requests_key(self) -> res.ContentKey | None:
        """What the requests depend on: replicas of one template share it (None while resizing).
        kubesched's memo key; upstream recomputes requests per pod."""
        return res.content_key(self.pod)

    @cached_property
    def request_amounts(self) -> dict[str, Any]:
        """The pod's requests as exact amounts (upstream ``resourcehelper.PodRequests``)."""
        return res.pod_requests(self.pod)

    @cached_property
    def requests(self) -> dict[str, int]:
        """cpu (millicores), memory, ephemeral-storage and scalar resources, as NodeResourcesFit reads
        them (upstream ``computePodResourceRequest``). Replicas of one template share the
        computation (by ``requests_key``): every pod the scheduler assumes and the cache accounts
        needs it, and the exact arithmetic over quantities costs tens of microseconds."""
        key = self.requests_key
        if key is None:
            return res.scheduler_resources(self.request_amounts)
        found = _REQUESTS_BY_KEY.get(key)
        if found is None:
            if len(_REQUESTS_BY_KEY) >= _MEMO_LIMIT:
                _REQUESTS_BY_KEY.clear()
            found = _REQUESTS_BY_KEY[key] = res.scheduler_resources(self.request_amounts)
        return dict(found)

    @cached_property
    def non_zero_amounts(self) -> dict[str, Any]:
        """Requests with scoring's 100m / 200Mi defaults for what containers leave unset (upstream
        ``schedutil.GetNonzeroRequests`` applied through ``resourcehelper.PodRequests``)."""
        return res.non_zero_amounts(self.pod, self.request_amounts)

    @cached_property
    def non_zero_requests(self) -> tuple[int, int]:
        """cpu (millicores) and memory with scoring's defaults (upstream
        ``schedutil.GetNonzeroRequests``), shared by replicas of one template as ``requests`` is."""
        key = self.requests_key
        found = None if key is None else _NON_ZERO_BY_KEY.get(key)
        if found is None:
            amounts = self.non_zero_amounts
            found = res.to_int(res.CPU, amounts.get(res.CPU, 0)), res.to_int(res.MEMORY, amounts.get(res.MEMORY, 0))
            if key is not None:
                if len(_NON_ZERO_BY_KEY) >= _MEMO_LIMIT:
                    _NON_ZERO_BY_KEY.clear()
                _NON_ZERO_BY_KEY[key] = found
        return found

    # --- node selection --------------------------------------------------------------------
    @cached_property
    def node_selector(self) -> dict[str, str]:
        """``spec.nodeSelector`` ({} when unset)."""
        return self.spec.get("nodeSelector") or {}

    @cached_property
    def node_selector_labels(self) -> LabelSelector:
        """``spec.nodeSelector`` as a label selector, as NodeAffinity matches it."""
        return selector_from_set(self.node_selector)

    @cached_property
    def required_node_affinity(self) -> NodeSelector | None:
        """The required node affinity as a parsed node selector (None when unset), as NodeAffinity's
        Filter reads it."""
        node_affinity = (self.spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is None:
            return None
        return parse_node_selector(required)

    @cached_property
    def tolerations(self) -> tuple[Toleration, ...]:
        """The pod's tolerations, parsed (TaintToleration reads them)."""
        return tuple(Toleration.from_dict(t) for t in self.spec.get("tolerations") or [])

    @cached_property
    def host_ports(self) -> list[HostPort]:
        """Host ports the pod asks for (upstream ``schedutil.GetHostPorts``), as NodePorts reads
        them."""
        return pod_host_ports(self.spec)

    @cached_property
    def images(self) -> list[str]:
        """Images of init containers then containers, as ImageLocality sums them (upstream
        ``sumImageScores``)."""
        spec = self.spec
        return [c.get("image", "") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]

    # --- inter-pod affinity ------------------------------------------------------------------
    def _terms(self, kind: str, preferred: bool) -> list[AffinityTerm]:
        """The parsed terms, shared by pods with equal raw terms and namespace, as replicas'
        are (terms are immutable)."""
        section = (self.spec.get("affinity") or {}).get(kind) or {}
        raw = section.get("preferredDuringSchedulingIgnoredDuringExecution" if preferred
                          else "requiredDuringSchedulingIgnoredDuringExecution") or []
        if not raw:
            return []

        def parse() -> list[AffinityTerm]:
            if preferred:
                return [AffinityTerm.from_spec(self.namespace, w.get("podAffinityTerm") or {}, w.get("weight", 0))
                        for w in raw]
            return [AffinityTerm.from_spec(self.namespace, t) for t in raw]

        return list(_TERMS.get((kind, preferred, self.namespace, raw), parse))

    @cached_property
    def required_affinity_terms(self) -> list[AffinityTerm]:
        """Required pod affinity terms (upstream ``PodInfo.RequiredAffinityTerms``)."""
        return self._terms("podAffinity", False)

    @cached_property
    def required_anti_affinity_terms(self) -> list[AffinityTerm]:
        """Required pod anti-affinity terms (upstream ``PodInfo.RequiredAntiAffinityTerms``)."""
        return self._terms("podAntiAffinity", False)

    @cached_property
    def preferred_affinity_terms(self) -> list[AffinityTerm]:
        """Preferred pod affinity terms with their weights (upstream
        ``PodInfo.PreferredAffinityTerms``)."""
        return self._terms("podAffinity", True)

    @cached_property
    def preferred_anti_affinity_terms(self) -> list[AffinityTerm]:
        """Preferred pod anti-affinity terms with their weights (upstream
        ``PodInfo.PreferredAntiAffinityTerms``)."""
        return self._terms("podAntiAffinity", True)

    @cached_property
    def has_affinity(self) -> bool:
        """Whether the pod has any pod affinity or anti-affinity (upstream ``NodeInfo.PodsWithAffinity``
        membership)."""
        affinity = self.spec.get("affinity") or {}
        return bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))

    @cached_property
    def has_required_anti_affinity(self) -> bool:
        """Whether the pod has required anti-affinity (upstream
        ``NodeInfo.PodsWithRequiredAntiAffinity`` membership)."""
        return bool(self.required_anti_affinity_terms)


@dataclass
class HostPortInfo:
    """Host ports in use on a node, keyed by IP then (protocol, port) (upstream
    ``framework.HostPortInfo``)."""

    by_ip: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)

    def add(self, port: HostPort) -> None:
        """Count ``port`` as used (upstream ``HostPortInfo.Add``)."""
        bucket = self.by_ip.setdefault(port.ip, {})
        key = (port.protocol, port.port)
        bucket[key] = bucket.get(key, 0) + 1

    def remove(self, port: HostPort) -> None:
        """Release one use of ``port`` (upstream ``HostPortInfo.Remove``)."""
        bucket = self.by_ip.get(port.ip)
        key = (port.protocol, port.port)
        if not bucket or key not in bucket:
            return
        bucket[key] -= 1
        if bucket[key] <= 0:
            del bucket[key]
        if not bucket:
            del self.by_ip[port.ip]

    def conflicts(self, port: HostPort) -> bool:
        """``HostPortInfo.CheckConflict``: 0.0.0.0 clashes with every IP on the same protocol and port."""
        if port.port <= 0:
            return False
        key = (port.protocol, port.port)
        if port.ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(key in bucket for bucket in self.by_ip.values())
        for ip in (DEFAULT_BIND_ALL_HOST_IP, port.ip):
            bucket = self.by_ip.get(ip)
            if bucket and key in bucket:
                return True
        return False

    def __len__(self) -> int:
        return sum(len(b) for b in self.by_ip.values())

    def copy(self) -> HostPortInfo:
        """An independent copy, for cloned NodeInfos."""
        return HostPortInfo({ip: dict(b) for ip, b in self.by_ip.items()})


#: Tracked allocatable by a node's raw ``status.allocatable``: nodes of one machine type report the
#: same, and the quantity arithmetic is most of a node's cost when a cache fills (1000 nodes at start).
_ALLOCATABLE: JSONMemo[dict[str, int]] = JSONMemo()


def node_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """Allocatable as the scheduler tracks it: cpu in millicores, pods as a count, scalars in units
    (upstream ``NodeInfo.Allocatable``, built from ``status.allocatable``). A fresh dict each call."""
    status = node.get("status") or {}
    raw = status.get("allocatable")
    if raw is None:
        raw = status.get("capacity") or {}
    return dict(_ALLOCATABLE.get(raw, lambda: _tracked_allocatable(raw)))


def _tracked_allocatable(raw: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, quantity in raw.items():
        if name in (res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE, res.PODS) or res.is_scalar(name):
            out[name] = res.to_int(name, parse_quantity(quantity))
    return out


class NodeInfo:
    """A node and the pods assigned or assumed on it (upstream ``framework.NodeInfo``)."""

    __slots__ = (
        "allocatable",
        "generation",
        "name",
        "node",
        "non_zero_requested",
        "pods",
        "pods_with_affinity",
        "pods_with_required_anti_affinity",
        "requested",
        "used_ports",
    )

    def __init__(self, node: dict[str, Any] | None = None, name: str = "") -> None:
        self.node: dict[str, Any] | None = None
        self.name = name
        self.pods: dict[str, PodInfo] = {}
        self.pods_with_affinity: dict[str, PodInfo] = {}
        self.pods_with_required_anti_affinity: dict[str, PodInfo] = {}
        self.requested: dict[str, int] = {}
        self.non_zero_requested = [0, 0]
        self.allocatable: dict[str, int] = {}
        self.used_ports = HostPortInfo()
        self.generation = 0
        if node is not None:
            self.set_node(node)

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"

    def set_node(self, node: dict[str, Any]) -> None:
        """Attach (or replace) the Node object and its allocatable (upstream ``NodeInfo.SetNode``)."""
        self.node = node
        self.name = node["metadata"]["name"]
        self.allocatable = node_allocatable(node)

    @property
    def labels(self) -> dict[str, str]:
        """The node's labels ({} before the Node is known)."""
        return (self.node or {}).get("metadata", {}).get("labels") or {}

    @property
    def taints(self) -> list[Taint]:
        """The node's ``spec.taints``, parsed."""
        return [Taint.from_dict(t) for t in ((self.node or {}).get("spec") or {}).get("taints") or []]

    @property
    def unschedulable(self) -> bool:
        """``spec.unschedulable`` (cordoned), as NodeUnschedulable reads it."""
        return bool(((self.node or {}).get("spec") or {}).get("unschedulable"))

    def add_pod(self, pod: PodInfo) -> None:
        """Account ``pod`` on this node: requests, ports, affinity lists (upstream
        ``NodeInfo.AddPod``)."""
        self.pods[pod.uid] = pod
        if pod.has_affinity:
            self.pods_with_affinity[pod.uid] = pod
        if pod.has_required_anti_affinity:
            self.pods_with_required_anti_affinity[pod.uid] = pod
        self._account(pod, 1)

    def remove_pod(self, pod_uid: str) -> PodInfo | None:
        """Forget the pod with ``pod_uid``; the removed PodInfo, or None if it was not here (upstream
        ``NodeInfo.RemovePod``)."""
        pod = self.pods.pop(pod_uid, None)
        if pod is None:
            return None
        self.pods_with_affinity.pop(pod_uid, None)
        self.pods_with_required_anti_affinity.pop(pod_uid, None)
        self._account(pod, -1)
        return pod

    def _account(self, pod: PodInfo, sign: int) -> None:
        requested = self.requested
        for name, amount in pod.requests.items():
            requested[name] = requested.get(name, 0) + sign * amount
        cpu, mem = pod.non_zero_requests
        self.non_zero_requested[0] += sign * cpu
        self.non_zero_requested[1] += sign * mem
        for port in pod.host_ports:
            if sign > 0:
                self.used_ports.add(port)
            else:
                self.used_ports.remove(port)
        self.generation += 1

    def clone(self) -> NodeInfo:
        """A copy whose pod set and aggregates can change without touching the original (upstream
        ``NodeInfo.Snapshot``)."""
        copy = NodeInfo.__new__(NodeInfo)
        copy.node = self.node
        copy.name = self.name
        copy.pods = dict(self.pods)
        copy.pods_with_affinity = dict(self.pods_with_affinity)
        copy.pods_with_required_anti_affinity = dict(self.pods_with_required_anti_affinity)
        copy.requested = dict(self.requested)
        copy.non_zero_requested = list(self.non_zero_requested)
        copy.allocatable = self.allocatable
        copy.used_ports = self.used_ports.copy()
        copy.generation = self.generation
        return copy

