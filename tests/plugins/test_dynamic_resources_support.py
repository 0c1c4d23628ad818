"""Builders shared by the DynamicResources tests: DRA objects, a Framework over an embedded store
whose informer caches follow every write synchronously, and a node table."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubesched.api.kinds import kind_named
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.api.watch import ADDED, DELETED, WatchEvent
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.client.informers import Handler
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.framework.runtime import Framework, HandleContext
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.defaultbinder.default_binder import DefaultBinder
from kubesched.scheduler.plugins.dynamicresources.dynamic_resources import DynamicResources
from kubesched.scheduler.plugins.noderesources.fit import NodeResourcesFit
from kubesched.scheduler.plugins.queuesort.priority_sort import PrioritySort
from kubesched.utils.clock import ManualClock
from tests.helpers import make_node, make_pod

CLAIM = kind_named("ResourceClaim")
TEMPLATE = kind_named("ResourceClaimTemplate")
CLASS = kind_named("DeviceClass")
SLICE = kind_named("ResourceSlice")
POD = kind_named("Pod")
NODE = kind_named("Node")
DRIVER = "gpu.example.com"


# --- objects --------------------------------------------------------------------------------------
def device(name: str, attributes: dict | None = None, capacity: dict | None = None, **extra: Any) -> dict:
    out: dict[str, Any] = {"name": name, **extra}
    if attributes:
        out["attributes"] = {k: _attr(v) for k, v in attributes.items()}
    if capacity:
        out["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    return out


def _attr(value: Any) -> dict:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str) and value.startswith("v:"):
        return {"version": value[2:]}
    return {"string": value}


def resource_slice(name: str, devices: list[dict], node: str | None = None, driver: str = DRIVER, pool: str | None = None,
                   all_nodes: bool = False, node_selector: dict | None = None, generation: int = 1, count: int = 1) -> dict:
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node or name, "generation": generation,
                                                       "resourceSliceCount": count}, "devices": devices}
    if node:
        spec["nodeName"] = node
    if all_nodes:
        spec["allNodes"] = True
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def device_class(name: str = "gpu", expression: str | None = None, config: list | None = None) -> dict:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression or f'device.driver == "{DRIVER}"'}}]}
    if config:
        spec["config"] = config
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def exact(name: str = "req-1", device_class_name: str = "gpu", count: int | None = None, mode: str | None = None,
          selectors: list[str] | None = None, admin: bool | None = None) -> dict:
    body: dict[str, Any] = {"deviceClassName": device_class_name}
    if count is not None:
        body["count"] = count
    if mode is not None:
        body["allocationMode"] = mode
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin is not None:
        body["adminAccess"] = admin
    return {"name": name, "exactly": body}


def first_available(name: str, *subs: dict) -> dict:
    return {"name": name, "firstAvailable": list(subs)}


def sub(name: str, device_class_name: str = "gpu", count: int | None = None, selectors: list[str] | None = None) -> dict:
    out: dict[str, Any] = {"name": name, "deviceClassName": device_class_name}
    if count is not None:
        out["count"] = count
    if selectors:
        out["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return out


def claim(name: str, *requests: dict, namespace: str = "default", constraints: list | None = None,
          owner: dict | None = None, allocation: dict | None = None, reserved_for: list[dict] | None = None,
          config: list | None = None) -> dict:
    devices: dict[str, Any] = {"requests": list(requests or [exact()])}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    obj: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": namespace}, "spec": {"devices": devices}}
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["metadata"]["name"],
                                               "uid": owner["metadata"]["uid"], "controller": True}]
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = allocation
    if reserved_for:
        status["reservedFor"] = reserved_for
    if status:
        obj["status"] = status
    return obj


def allocation_on(node: str, *devices: tuple[str, str], driver: str = DRIVER, pool: str | None = None) -> dict:
    """An allocation result for (request, device) pairs from the node's pool."""
    return {"devices": {"results": [{"request": r, "driver": driver, "pool": pool or node, "device": d} for r, d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def pod_with_claims(name: str = "my-pod", *claim_names: str, templates: dict[str, str] | None = None, **kw: Any) -> dict:
    refs = [{"name": n, "resourceClaimName": n} for n in claim_names]
    refs += [{"name": n, "resourceClaimTemplateName": t} for n, t in (templates or {}).items()]
    return make_pod(name, resourceClaims=refs, **kw)


# --- informers over the store -------------------------------------------------------------------
class _SyncInformer:
    def __init__(self) -> None:
        self.store: dict[str, dict] = {}
        self.handlers: list[Handler] = []

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)
        for obj in list(self.store.values()):
            if handler.on_add:
                handler.on_add(obj, True)


class SyncInformers:
    """Informer caches that see every store write at once (write hook), so tests need no awaits."""

    def __init__(self, store: ObjectStore) -> None:
        self._informers: dict[str, _SyncInformer] = {}
        self.objects = store
        store.write_hooks.append(self._on_write)
        for kind in store.kinds():
            for obj in store.iter_all(kind):
                self.informer(kind.kind).store[_key(obj)] = obj

    def informer(self, kind: str) -> _SyncInformer:
        return self._informers.setdefault(kind, _SyncInformer())

    def store(self, kind: str) -> dict[str, dict]:
        return self.informer(kind).store

    def _on_write(self, _rv: int, kind: Any, event: WatchEvent) -> None:
        inf = self.informer(kind.kind)
        key = _key(event.object)
        old = inf.store.get(key)
        if event.type == DELETED:
            inf.store.pop(key, None)
            for h in inf.handlers:
                if h.on_delete:
                    h.on_delete(event.object)
            return
        inf.store[key] = event.object
        for h in inf.handlers:
            if event.type == ADDED or old is None:
                if h.on_add:
                    h.on_add(event.object, False)
            elif h.on_update:
                h.on_update(old, event.object)


def _key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


# --- framework ------------------------------------------------------------------------------------
REGISTRY: Registry = {p.name: p for p in (PrioritySort, DynamicResources, DefaultBinder, NodeResourcesFit)}


class Env:
    """A store, its informers, a node table and a Framework running DynamicResources."""

    def __init__(self, nodes: Iterable[dict] = (), objects: Iterable[dict] = (), gates: FeatureGates | None = None,
                 args: Any = None, plugins: tuple[str, ...] = ("PrioritySort", "DynamicResources", "DefaultBinder")) -> None:
        self.store = ObjectStore(ManualClock(), seed=1, auto_create_namespaces=True)
        self.informers = SyncInformers(self.store)
        self.table = NodeTable()
        ctx = HandleContext(clock=ManualClock(), snapshot=lambda: self.table, client=MemoryClient(self.store),
                            informers=self.informers, feature_gates=gates or DEFAULT_GATES)
        profile = Profile(plugins=Plugins(multi_point=PluginSet(enabled=[PluginRef(p) for p in plugins])),
                          plugin_config={"DynamicResources": args} if args is not None else {})
        self.fw = Framework(REGISTRY, profile, ctx)
        self.plugin: DynamicResources = self.fw.plugins["DynamicResources"]  # type: ignore[assignment]
        for node in nodes:
            self.add_node(node)
        for obj in objects:
            self.create(obj)

    def add_node(self, node: dict) -> None:
        self.table.set_node(NodeInfo(node))

    def create(self, obj: dict) -> dict:
        return self.store.create(kind_named(obj["kind"]), obj)  # type: ignore[arg-type]

    def get(self, kind: str, name: str, namespace: str | None = "default") -> dict | None:
        return self.store.try_get(kind_named(kind), namespace, name)  # type: ignore[arg-type]

    def pod(self, pod: dict) -> PodInfo:
        """The pod as stored (with a uid), parsed."""
        stored = self.create(pod)
        return PodInfo(stored)

    def pre_filter(self, pod: PodInfo) -> tuple[CycleState, Any]:
        state = CycleState()
        _, status = self.plugin.pre_filter(state, pod, self.table.all_rows())
        return state, status

    def filter(self, state: CycleState, pod: PodInfo) -> dict[str, Any]:
        """Node name -> Status (None when the node passes)."""
        batch = self.table.all_rows()
        verdict = self.plugin.filter_nodes(state, pod, batch)
        return {name: (None if verdict is None else verdict.status_at(i)) for i, name in enumerate(batch.names())}


def nodes(*names: str, **labels: dict) -> list[dict]:
    return [make_node(n, labels=labels.get(n)) for n in names]
