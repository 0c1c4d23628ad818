"""The HTTP API server's defaulting: the kinds' ``SetDefaults_*`` (``kubesched.api.defaults``,
which the object store applies to every write as well, so the embedded cluster stores the same
objects) plus Service ClusterIP and NodePort allocation, which needs a per-server allocator. The
defaults are part of what the scheduler reads (a hostNetwork pod's host ports, pod-level
requests) and give controllers the fields they read (``spec.replicas`` defaults to 1).
"""

from __future__ import annotations

import ipaddress

from kubesched.api.defaults import set_defaults
from kubesched.api.kinds import Kind, known_kind
from kubesched.apiserver.store import ObjectStore

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)
SERVICE = known_kind("Service")
assert SERVICE


class Defaulter:
    """Per-server defaulting (it owns the ClusterIP and NodePort allocators)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._next_ip = 10

    def apply(self, kind: Kind, obj: dict) -> None:
        set_defaults(kind, obj, self.store.feature_gates)
        if kind == SERVICE:
            self._service(obj)

    def _service(self, svc: dict) -> None:
        spec = svc.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
            if spec["type"] in ("NodePort", "LoadBalancer") and not port.get("nodePort"):
                port["nodePort"] = self._node_port()
        if spec["type"] == "ExternalName":
            return
        if not spec.get("clusterIP"):
            spec["clusterIP"] = self._cluster_ip()
        if spec["clusterIP"] != "None":
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        svc.setdefault("status", {"loadBalancer": {}})

    def _used(self) -> tuple[set[str], set[int]]:
        ips: set[str] = set()
        ports: set[int] = set()
        for svc in self.store.iter_all(SERVICE):
            spec = svc.get("spec") or {}
            ips.update(spec.get("clusterIPs") or [spec.get("clusterIP")])
            ports.update(p.get("nodePort") for p in spec.get("ports") or [] if p.get("nodePort"))
        return ips, ports

    def _cluster_ip(self) -> str:
        used, _ = self._used()
        while True:
            ip = str(SERVICE_CIDR[self._next_ip])
            self._next_ip = self._next_ip + 1 if self._next_ip + 2 < SERVICE_CIDR.num_addresses else 10
            if ip not in used:
                return ip

    def _node_port(self) -> int:
        _, used = self._used()
        return next(p for p in NODE_PORTS if p not in used)
