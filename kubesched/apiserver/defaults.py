"""Defaulting the HTTP API server adds on top of ``kubesched.cluster.admission`` (which the
embedded cluster shares): the workload kinds' ``SetDefaults_*`` (``kubesched.controllers.defaults``)
and DaemonSets', Services', the namespace name label, container defaults, and ClusterIP/NodePort
allocation. These make what
``kubectl get -o yaml`` shows look like a real cluster and give controllers the fields they read
(``spec.replicas`` defaults to 1). Nothing here changes what the scheduler decides.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from kubesched.api.kinds import Kind
from kubesched.cluster.errors import Invalid
from kubesched.cluster.store import ObjectStore
from kubesched.controllers.defaults import DEFAULTERS, validate_workload

SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)


def _container(container: dict) -> None:
    image = container.get("image") or ""
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in container:
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def pod_spec(spec: dict) -> None:
    """``SetDefaults_PodSpec`` and its containers (also for templates)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        _container(container)


def _template(obj: dict) -> None:
    template = (obj.get("spec") or {}).get("template")
    if isinstance(template, dict):
        pod_spec(template.setdefault("spec", {}))


def _daemon_set(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if strategy.get("type") == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {"maxUnavailable": 1, "maxSurge": 0})
    spec.setdefault("revisionHistoryLimit", 10)
    _template(obj)


def _namespace(obj: dict) -> None:
    meta = obj.setdefault("metadata", {})
    if meta.get("name"):
        meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": meta["name"]}


def _pvc(obj: dict) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")


def _pv(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")


class Defaulter:
    """Per-server defaulting (it owns the ClusterIP and NodePort allocators)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._next_ip = 10
        self._by_kind: dict[str, Callable[[dict], None]] = {
            **DEFAULTERS, "DaemonSet": _daemon_set, "Namespace": _namespace,
            "PersistentVolumeClaim": _pvc, "PersistentVolume": _pv, "Service": self._service,
            "Pod": lambda pod: pod_spec(pod.setdefault("spec", {})),
        }

    def apply(self, kind: Kind, obj: dict) -> None:
        if kind.group not in ("", "apps"):
            return
        fn = self._by_kind.get(kind.kind)
        if fn is not None:
            fn(obj)

    @staticmethod
    def validate(kind: Kind, obj: dict) -> None:
        """apiserver's checks the store does not make (a workload's selector must select its template)."""
        if kind.group not in ("", "apps"):
            return
        errors = validate_workload(obj)
        if errors:
            raise Invalid.of(kind.kind, (obj.get("metadata") or {}).get("name", ""), errors, kind.group)

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
        from kubesched.api.kinds import kind_named

        ips, ports = set(), set()
        service = kind_named("Service")
        if service is not None:
            for svc in self.store.iter_all(service):
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
