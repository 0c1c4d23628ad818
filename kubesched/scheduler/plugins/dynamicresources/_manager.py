"""The scheduler's shared view of DRA objects (upstream ``DefaultDRAManager``, ``assumecache`` and
``allocateddevices.go``), fed by informer events.

* ``ClaimTracker``: ResourceClaims through an assume cache (PreBind stores the claim it wrote
  until the informer catches up), the in-flight allocations between Reserve and PreBind, and the
  set of allocated devices, kept incrementally from claim events so PreFilter does not walk every
  claim of the cluster.
* ``SliceIndex``: ResourceSlices parsed once per object version and indexed by node name, node
  selector and ``allNodes``; ``snapshot()`` is rebuilt only after a slice changed.

One manager serves every profile of a scheduler (it is keyed by the informer factory), as upstream
shares one DRA manager between profiles.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from kubesched.api.kinds import object_key
from kubesched.api.volume import resource_version
from kubesched.client.informers import Handler
from kubesched.scheduler.plugins.dynamicresources._allocator import DeviceID, SliceInfo
from kubesched.scheduler.plugins.dynamicresources._cel import CelCache

log = logging.getLogger(__name__)


def allocated_devices_of(claim: Mapping) -> Iterator[DeviceID]:
    """``foreachAllocatedDevice``: devices allocated exclusively to the claim (admin access is shared)."""
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return
    for result in (allocation.get("devices") or {}).get("results") or []:
        if result.get("adminAccess"):
            continue
        yield (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))


class ClaimNotFound(LookupError):
    pass


class ClaimTracker:
    """ResourceClaims as the scheduler sees them (``ResourceClaimTracker``)."""

    def __init__(self) -> None:
        self._api: dict[str, dict] = {}
        self._latest: dict[str, dict] = {}
        self._in_flight: dict[str, dict] = {}
        self._device_counts: dict[DeviceID, int] = {}
        self._devices_of: dict[str, tuple[DeviceID, ...]] = {}

    # --- informer events ----------------------------------------------------------------------
    def on_add(self, obj: dict, _initial: bool = False) -> None:
        key = object_key(obj)
        latest = self._latest.get(key)
        if latest is not None and resource_version(obj) <= resource_version(latest):
            return  # not newer than an assumed object: keep it (as the assume cache does)
        self._api[key] = obj
        self._set_latest(key, obj)

    def on_update(self, _old: dict, new: dict) -> None:
        self.on_add(new)

    def on_delete(self, obj: dict) -> None:
        key = object_key(obj)
        self._api.pop(key, None)
        self._set_latest(key, None)

    # --- reading -------------------------------------------------------------------------------
    def get(self, namespace: str, name: str) -> dict:
        claim = self._latest.get(f"{namespace}/{name}")
        if claim is None:
            raise ClaimNotFound(f'could not find ResourceClaim "{namespace}/{name}"')
        return claim

    def allocated_devices(self) -> frozenset[DeviceID]:
        """``ListAllAllocatedDevices``: allocated per the (assumed) claims, plus in-flight ones."""
        devices = set(self._device_counts)
        for claim in self._in_flight.values():
            devices.update(allocated_devices_of(claim))
        return frozenset(devices)

    # --- assume cache --------------------------------------------------------------------------
    def assume(self, claim: dict) -> None:
        """Store a claim just written by the scheduler until the informer reports that version."""
        key = object_key(claim)
        latest = self._latest.get(key)
        if latest is None:
            raise ClaimNotFound(f'could not find ResourceClaim "{key}"')
        if resource_version(claim) < resource_version(latest):
            raise ValueError(f'ResourceClaim "{key}" is out of sync (stored: {resource_version(latest)}, '
                             f'assume: {resource_version(claim)})')
        self._set_latest(key, claim)

    def restore(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        api = self._api.get(key)
        if api is not None:
            self._set_latest(key, api)

    # --- in-flight allocations ---------------------------------------------------------------
    def has_pending_allocation(self, uid: str) -> bool:
        return uid in self._in_flight

    def signal_pending_allocation(self, uid: str, claim: dict) -> None:
        self._in_flight[uid] = claim

    def remove_pending_allocation(self, uid: str) -> bool:
        return self._in_flight.pop(uid, None) is not None

    def pending_allocations(self) -> dict[str, dict]:
        return dict(self._in_flight)

    # --- internals -----------------------------------------------------------------------------
    def _set_latest(self, key: str, claim: dict | None) -> None:
        for did in self._devices_of.pop(key, ()):
            count = self._device_counts[did] - 1
            if count:
                self._device_counts[did] = count
            else:
                del self._device_counts[did]
        if claim is None:
            self._latest.pop(key, None)
            return
        self._latest[key] = claim
        devices = tuple(allocated_devices_of(claim))
        if devices:
            self._devices_of[key] = devices
            for did in devices:
                self._device_counts[did] = self._device_counts.get(did, 0) + 1


class SliceSnapshot:
    """An immutable view of all ResourceSlices, indexed for per-node pool gathering."""

    def __init__(self, slices: Mapping[str, SliceInfo]) -> None:
        pools: dict[tuple[str, str], list[SliceInfo]] = {}
        node_local: dict[str, list[SliceInfo]] = {}
        selector: list[SliceInfo] = []
        all_nodes: list[SliceInfo] = []
        for name in sorted(slices):
            s = slices[name]
            pools.setdefault(s.pool_id, []).append(s)
            if s.node_name:
                node_local.setdefault(s.node_name, []).append(s)
            elif s.all_nodes:
                all_nodes.append(s)
            elif s.node_selector is not None:
                selector.append(s)
        self.pools = {k: tuple(v) for k, v in pools.items()}
        self.node_local = {k: tuple(v) for k, v in node_local.items()}
        self.selector = tuple(selector)
        self.all_nodes = tuple(all_nodes)


class SliceIndex:
    """ResourceSlices parsed once per version; ``snapshot()`` is cached until the next change."""

    def __init__(self) -> None:
        self._slices: dict[str, SliceInfo] = {}
        self._snapshot: SliceSnapshot | None = None

    def on_add(self, obj: dict, _initial: bool = False) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        current = self._slices.get(name)
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        if current is not None and current.raw is obj:
            return
        if current is not None and rv and current.resource_version == rv:
            return
        self._slices[name] = SliceInfo(obj)
        self._snapshot = None

    def on_update(self, _old: dict, new: dict) -> None:
        self.on_add(new)

    def on_delete(self, obj: dict) -> None:
        if self._slices.pop((obj.get("metadata") or {}).get("name", ""), None) is not None:
            self._snapshot = None

    def snapshot(self) -> SliceSnapshot:
        if self._snapshot is None:
            self._snapshot = SliceSnapshot(self._slices)
        return self._snapshot


class DRAManager:
    """Claims, slices and classes for the DynamicResources plugin (``SharedDRAManager``)."""

    def __init__(self, informers: Any = None) -> None:
        self.informers = informers
        self.claims = ClaimTracker()
        self.slices = SliceIndex()
        self.cel_cache = CelCache()
        if informers is not None:
            informers.informer("ResourceClaim").add_handler(
                Handler(self.claims.on_add, self.claims.on_update, self.claims.on_delete))
            informers.informer("ResourceSlice").add_handler(
                Handler(self.slices.on_add, self.slices.on_update, self.slices.on_delete))
        self._classes: dict[str, dict] = {}

    def device_classes(self) -> Mapping[str, dict]:
        """DeviceClasses by name (the informer cache; a local dict when there are no informers)."""
        if self.informers is None:
            return self._classes
        return self.informers.store("DeviceClass")

    def set_device_class(self, device_class: dict) -> None:
        """Add a class when running without informers (tests, ``kubesched explain``)."""
        self._classes[(device_class.get("metadata") or {}).get("name", "")] = device_class


_MANAGERS: weakref.WeakKeyDictionary[Any, DRAManager] = weakref.WeakKeyDictionary()


def manager_for(handle: Any) -> DRAManager:
    """The manager shared by every profile using the same informer factory."""
    informers = getattr(getattr(handle, "ctx", None), "informers", None)
    if informers is None:
        return DRAManager(None)
    manager = _MANAGERS.get(informers)
    if manager is None:
        manager = _MANAGERS[informers] = DRAManager(informers)
    return manager
