"""A fake PV controller and external provisioner for the embedded cluster.

The embedded cluster has no kube-controller-manager and no CSI provisioners, so claims would never
bind. ``FakeVolumeController`` does what they would, enough for the scheduler's volume binding to
run end to end in a simulation:

* PVs without a claim become ``Available``; PVs whose claim is gone become ``Released`` (or are
  deleted when they were provisioned with reclaim policy ``Delete``).
* An unbound claim is bound to the smallest matching available PV (``FindMatchingVolume``); with a
  WaitForFirstConsumer class only PVs pre-bound to it (by the scheduler's PreBind) are taken, until
  the scheduler annotates the claim with ``volume.kubernetes.io/selected-node``.
* Otherwise, when the class has a provisioner, a PV is provisioned and bound: for a selected node
  its node affinity pins the node's topology (the driver's CSINode topology keys, else the zone,
  else the hostname); for Immediate classes it follows the class's allowedTopologies. When the
  driver tracks storage capacity, the space comes out of the first matching CSIStorageCapacity;
  without room, provisioning fails and the selected-node annotation is removed so the scheduler
  tries again, as real provisioners signal it. A deleted volume gives its space back to the pool
  it came from (the driver would report it free again).
* A bound claim whose volume is deleted becomes ``Lost``.

It works on the object store synchronously, reacting to its watch streams (like ``FakeKubelet``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from kubesched.api.apierrors import AlreadyExists, Conflict, NotFound
from kubesched.api.kinds import NODE, Kind, known_kind, object_key
from kubesched.api.quantity import format_quantity
from kubesched.api.selectors import InvalidSelector, parse_label_selector
from kubesched.api.volume import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    LABEL_HOSTNAME,
    LABEL_ZONE,
    NOT_SUPPORTED_PROVISIONER,
    VOLUME_AVAILABLE,
    WAIT_FOR_FIRST_CONSUMER,
    annotations_of,
    binding_mode,
    claim_class,
    claim_reference,
    find_matching_volume,
    is_volume_bound_to_claim,
    meta,
    migratable_provisioner,
    name_of,
    quantity,
    requested_storage,
    spec,
    volume_limit,
)
from kubesched.api.watch import DELETED
from kubesched.apiserver.store import ObjectStore, Watch

log = logging.getLogger(__name__)

PV = known_kind("PersistentVolume")
PVC = known_kind("PersistentVolumeClaim")
STORAGE_CLASS = known_kind("StorageClass")
CSI_DRIVER = known_kind("CSIDriver")
CSI_NODE = known_kind("CSINode")
CAPACITY = known_kind("CSIStorageCapacity")
assert PV and PVC and STORAGE_CLASS and CSI_DRIVER and CSI_NODE and CAPACITY

RELEASED, BOUND, PENDING, LOST = "Released", "Bound", "Pending", "Lost"


class FakeVolumeController:
    """See the module docstring. ``start()`` in a running loop, ``await stop()``, ``idle()``."""

    def __init__(self, store: ObjectStore, vac_enabled: bool = True) -> None:
        self.store = store
        self.vac_enabled = vac_enabled
        self._watches: dict[Kind, Watch] = {}
        self._tasks: list[asyncio.Task] = []
        self.provisioned = 0
        #: The CSIStorageCapacity (namespace, name) each provisioned volume took its space from.
        self._taken_from: dict[str, tuple[str, str]] = {}

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for kind in (STORAGE_CLASS, PV, PVC):
            watch = self._watches[kind] = self.store.watch(kind)
            self._tasks.append(loop.create_task(self._run(kind, watch), name=f"fake-pv-controller-{kind.resource}"))

    async def stop(self) -> None:
        for watch in self._watches.values():
            watch.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def idle(self) -> bool:
        return all(not w.pending for w in self._watches.values())

    async def _run(self, kind: Kind, watch: Watch) -> None:
        while True:
            batch = await watch.next_batch()
            if not batch and watch.stopped:
                return
            for event in batch:
                try:
                    self.handle(kind, event.type, event.object)
                except Exception:
                    log.exception("fake PV controller failed on %s %s", kind.kind, object_key(event.object))

    # --- reacting to changes --------------------------------------------------------------------
    def handle(self, kind: Kind, event_type: str, obj: dict) -> None:
        """React to one watch event (public so tests can drive the controller synchronously)."""
        if kind == PVC:
            if event_type == DELETED:
                self._claim_deleted(obj)
            else:
                self.sync_claim(meta(obj).get("namespace", ""), name_of(obj))
        elif kind == PV:
            if event_type == DELETED:
                self._volume_deleted(obj)
            else:
                self.sync_volume(name_of(obj))
        elif kind == STORAGE_CLASS and event_type != DELETED:
            for pvc in list(self.store.iter_all(PVC)):
                if not spec(pvc).get("volumeName") and claim_class(pvc) == name_of(obj):
                    self.sync_claim(meta(pvc).get("namespace", ""), name_of(pvc))

    def _claim_deleted(self, pvc: dict) -> None:
        volume = spec(pvc).get("volumeName")
        if volume:
            self.sync_volume(volume)

    def _volume_deleted(self, pv: dict) -> None:
        """Its space goes back to its pool, and its claim, if bound, is lost."""
        self._return_capacity(pv)
        ref = spec(pv).get("claimRef")
        if ref:
            self.sync_claim(ref.get("namespace", ""), ref.get("name", ""))

    # --- volumes ----------------------------------------------------------------------------------
    def sync_volume(self, name: str) -> None:
        """``syncVolume``: Available without a claim, Released once its claim is gone (deleted when
        dynamically provisioned with reclaim policy Delete); a bound claim gets its binding finished."""
        pv = self.store.try_get(PV, None, name)
        if pv is None or meta(pv).get("deletionTimestamp"):
            return
        ref = spec(pv).get("claimRef")
        if not ref:
            self._set_volume_phase(pv, VOLUME_AVAILABLE)
            return
        claim = self.store.try_get(PVC, ref.get("namespace", ""), ref.get("name", ""))
        if claim is None or (ref.get("uid") and meta(claim).get("uid") != ref.get("uid")):
            if not ref.get("uid"):
                self._set_volume_phase(pv, VOLUME_AVAILABLE)
                return
            self._release(pv)
            return
        self.sync_claim(ref.get("namespace", ""), ref.get("name", ""))

    def _release(self, pv: dict) -> None:
        policy = spec(pv).get("persistentVolumeReclaimPolicy") or "Retain"
        if policy == "Delete" and ANN_DYNAMICALLY_PROVISIONED in annotations_of(pv):
            self._ignore_missing(lambda: self.store.delete(PV, None, name_of(pv)))
            return
        self._set_volume_phase(pv, RELEASED)

    def _set_volume_phase(self, pv: dict, phase: str) -> None:
        if (pv.get("status") or {}).get("phase") == phase:
            return
        if phase == VOLUME_AVAILABLE and (pv.get("status") or {}).get("phase") in (RELEASED, "Failed"):
            return

        def change(obj: dict) -> None:
            obj.setdefault("status", {})["phase"] = phase

        self._ignore_missing(lambda: self.store.mutate(PV, None, name_of(pv), change))

    # --- claims -----------------------------------------------------------------------------------
    def sync_claim(self, namespace: str, name: str) -> None:
        """``syncClaim``: finish a binding, bind to a matching PV, or provision one."""
        pvc = self.store.try_get(PVC, namespace, name)
        if pvc is None or meta(pvc).get("deletionTimestamp"):
            return
        volume = spec(pvc).get("volumeName")
        if volume:
            self._sync_bound_claim(pvc, volume)
            return
        sc = self.store.try_get(STORAGE_CLASS, None, claim_class(pvc)) if claim_class(pvc) else None
        delay = sc is not None and binding_mode(sc) == WAIT_FOR_FIRST_CONSUMER
        try:
            pv = find_matching_volume(pvc, list(self.store.iter_all(PV)), None, set(), delay, self.vac_enabled)
        except ValueError as e:
            log.info("cannot bind %s/%s: %s", namespace, name, e)
            return
        if pv is not None:
            self._bind(pv, pvc)
            return
        if delay and ANN_SELECTED_NODE not in annotations_of(pvc):
            return
        provisioner = (sc or {}).get("provisioner") or ""
        if sc is None or not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            return
        self._provision(pvc, sc)

    def _sync_bound_claim(self, pvc: dict, volume: str) -> None:
        pv = self.store.try_get(PV, None, volume)
        if pv is None:
            if ANN_BIND_COMPLETED in annotations_of(pvc):
                self._set_claim_phase(pvc, LOST)
            return
        ref = spec(pv).get("claimRef")
        if ref and not is_volume_bound_to_claim(pv, pvc):
            return  # the volume belongs to another claim: this one stays pending
        self._bind(pv, pvc)

    def _bind(self, pv: Mapping, pvc: dict) -> None:
        """``bind``: the PV's claimRef and phase, then the claim's volumeName, annotations and status."""
        pv_name, claim_uid = name_of(pv), meta(pvc).get("uid", "")
        bound_by_controller = not is_volume_bound_to_claim(pv, pvc)

        def bind_volume(obj: dict) -> None:
            ref = spec(obj).get("claimRef")
            if not ref or ref.get("uid") != claim_uid:
                obj["spec"]["claimRef"] = claim_reference(pvc)
                if bound_by_controller:
                    obj["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
            obj.setdefault("status", {})["phase"] = BOUND

        try:
            pv = self.store.mutate(PV, None, pv_name, bind_volume)
        except (NotFound, Conflict) as e:
            log.debug("binding %s: %s", pv_name, e)
            return
        claim_bound_by_controller = not spec(pvc).get("volumeName")

        def bind_claim(obj: dict) -> None:
            obj["spec"]["volumeName"] = pv_name
            ann = obj["metadata"].setdefault("annotations", {})
            ann[ANN_BIND_COMPLETED] = "yes"
            if claim_bound_by_controller:
                ann[ANN_BOUND_BY_CONTROLLER] = "yes"
            status = obj.setdefault("status", {})
            status["phase"] = BOUND
            status["accessModes"] = list(spec(pv).get("accessModes") or [])
            if spec(pv).get("capacity"):
                status["capacity"] = dict(spec(pv)["capacity"])

        self._ignore_missing(lambda: self.store.mutate(PVC, meta(pvc).get("namespace"), name_of(pvc), bind_claim,
                                                       expect_uid=claim_uid or None))

    def _set_claim_phase(self, pvc: dict, phase: str) -> None:
        if (pvc.get("status") or {}).get("phase") == phase:
            return

        def change(obj: dict) -> None:
            obj.setdefault("status", {})["phase"] = phase

        self._ignore_missing(lambda: self.store.mutate(PVC, meta(pvc).get("namespace"), name_of(pvc), change))

    # --- provisioning -------------------------------------------------------------------------------
    def _provision(self, pvc: dict, sc: Mapping) -> None:
        provisioner = sc["provisioner"]
        pvc = self._annotate_provisioner(pvc, provisioner)
        selected = annotations_of(pvc).get(ANN_SELECTED_NODE)
        node = self.store.try_get(NODE, None, selected) if selected else None
        if selected and node is None:
            self._reschedule(pvc, f'node "{selected}" not found')
            return
        driver = _csi_driver(provisioner)
        size = quantity(requested_storage(pvc))
        room, pool = self._take_capacity(provisioner, sc, node, size)
        if not room:
            if selected:
                self._reschedule(pvc, "not enough free storage")
            return
        pv = self._new_volume(pvc, sc, driver, node)
        try:
            created = self.store.create(PV, pv)
        except AlreadyExists:
            created = self.store.get(PV, None, pv["metadata"]["name"])
        if pool is not None:
            self._taken_from[name_of(created)] = (meta(pool).get("namespace", ""), name_of(pool))
        self.provisioned += 1
        self._bind(created, pvc)

    def _annotate_provisioner(self, pvc: dict, provisioner: str) -> dict:
        """``setClaimProvisioner``: tell the (fake) external provisioner the claim is its own."""
        if annotations_of(pvc).get(ANN_STORAGE_PROVISIONER) == provisioner:
            return pvc

        def change(obj: dict) -> None:
            ann = obj["metadata"].setdefault("annotations", {})
            ann[ANN_STORAGE_PROVISIONER] = provisioner
            ann[ANN_BETA_STORAGE_PROVISIONER] = provisioner

        try:
            return self.store.mutate(PVC, meta(pvc).get("namespace"), name_of(pvc), change)
        except (NotFound, Conflict):
            return pvc

    def _reschedule(self, pvc: dict, reason: str) -> None:
        """A failed provisioning for a selected node: drop the annotation so the scheduler retries."""
        log.info("provisioning %s/%s failed: %s", meta(pvc).get("namespace"), name_of(pvc), reason)

        def change(obj: dict) -> None:
            obj["metadata"].get("annotations", {}).pop(ANN_SELECTED_NODE, None)

        self._ignore_missing(lambda: self.store.mutate(PVC, meta(pvc).get("namespace"), name_of(pvc), change))

    def _new_volume(self, pvc: dict, sc: Mapping, driver: str, node: dict | None) -> dict:
        uid = meta(pvc).get("uid", "")
        request = requested_storage(pvc)
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": request if request is not None else "0"},
            "accessModes": list(spec(pvc).get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
            "storageClassName": claim_class(pvc),
            "csi": {"driver": driver, "volumeHandle": f"pvc-{uid}"},
            "claimRef": claim_reference(pvc),
        }
        for field in ("volumeMode", "volumeAttributesClassName"):
            if spec(pvc).get(field):
                pv_spec[field] = spec(pvc)[field]
        if sc.get("mountOptions"):
            pv_spec["mountOptions"] = list(sc["mountOptions"])
        terms = self._topology(driver, sc, node)
        if terms:
            pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
        return {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"pvc-{uid}", "annotations": {ANN_DYNAMICALLY_PROVISIONED: sc["provisioner"]}},
            "spec": pv_spec,
            "status": {"phase": PENDING},
        }

    def _topology(self, driver: str, sc: Mapping, node: dict | None) -> list[dict]:
        """Node affinity of a new volume: the selected node's values of the driver's topology keys
        (zone, else hostname, when the CSINode does not say), or the class's allowedTopologies."""
        if node is None:
            return [{"matchExpressions": [{"key": e.get("key", ""), "operator": "In", "values": list(e.get("values") or [])}
                                          for e in term.get("matchLabelExpressions") or []]}
                    for term in sc.get("allowedTopologies") or [] if term.get("matchLabelExpressions")]
        labels = meta(node).get("labels") or {}
        keys = self._topology_keys(driver, name_of(node))
        if keys is None:
            keys = [LABEL_ZONE] if LABEL_ZONE in labels else [LABEL_HOSTNAME]
        exprs = [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]
        return [{"matchExpressions": exprs}] if exprs else []

    def _topology_keys(self, driver: str, node_name: str) -> list[str] | None:
        csinode = self.store.try_get(CSI_NODE, None, node_name)
        for d in spec(csinode or {}).get("drivers") or []:
            if d.get("name") == driver and d.get("topologyKeys"):
                return list(d["topologyKeys"])
        return None

    def _take_capacity(self, provisioner: str, sc: Mapping, node: dict | None, size: Fraction) -> tuple[bool, dict | None]:
        """For drivers with storage capacity tracking: take ``size`` from the first pool of the
        class that is large enough and reachable from the node. Whether there was room, and the
        pool (None when the driver does not track capacity)."""
        driver = self.store.try_get(CSI_DRIVER, None, provisioner)
        if driver is None or not spec(driver).get("storageCapacity"):
            return True, None
        labels = meta(node).get("labels") or {} if node is not None else None
        for cap in list(self.store.iter_all(CAPACITY)):
            if cap.get("storageClassName") != name_of(sc):
                continue
            limit = volume_limit(cap)
            if limit is None or quantity(limit) < size or not _reachable(cap, labels):
                continue
            self._adjust_capacity(cap, -size)
            return True, cap
        return False, None

    def _return_capacity(self, pv: dict) -> None:
        """A provisioned volume is deleted: its size goes back to the pool it came from (by
        memory, else the first pool of its class serving its topology)."""
        size = quantity((spec(pv).get("capacity") or {}).get("storage"))
        source = self._taken_from.pop(name_of(pv), None)
        if source is not None:
            cap = self.store.try_get(CAPACITY, *source)
            if cap is not None:
                self._adjust_capacity(cap, size)
            return
        driver = self.store.try_get(CSI_DRIVER, None, annotations_of(pv).get(ANN_DYNAMICALLY_PROVISIONED, ""))
        if driver is None or not spec(driver).get("storageCapacity"):
            return
        terms = ((spec(pv).get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or []
        labels = {e["key"]: e["values"][0] for t in terms for e in t.get("matchExpressions") or [] if e.get("values")}
        for cap in list(self.store.iter_all(CAPACITY)):
            if cap.get("storageClassName") == spec(pv).get("storageClassName") and _reachable(cap, labels or None):
                self._adjust_capacity(cap, size)
                return

    def _adjust_capacity(self, cap: dict, delta: Fraction) -> None:
        def change(obj: dict) -> None:
            left = max(quantity(obj.get("capacity")) + delta, Fraction(0))
            obj["capacity"] = _format(left)
            if obj.get("maximumVolumeSize") is not None and quantity(obj["maximumVolumeSize"]) > left:
                obj["maximumVolumeSize"] = _format(left)

        self._ignore_missing(lambda: self.store.mutate(CAPACITY, meta(cap).get("namespace"), name_of(cap), change))

    @staticmethod
    def _ignore_missing(action: Callable[[], object]) -> None:
        try:
            action()
        except (NotFound, Conflict) as e:
            log.debug("fake PV controller: %s", e)


def _csi_driver(provisioner: str) -> str:
    """The CSI driver behind a provisioner (in-tree provisioners are served by their CSI driver)."""
    plugin = migratable_provisioner(provisioner)
    return plugin.driver if plugin is not None else provisioner


def _reachable(cap: Mapping, labels: Mapping[str, str] | None) -> bool:
    """Whether a CSIStorageCapacity serves a node with these labels (any pool when no node yet)."""
    topology = cap.get("nodeTopology")
    if topology is None:
        return labels is None
    if labels is None:
        return True
    try:
        return parse_label_selector(topology).matches(labels)
    except InvalidSelector:
        return False


def _format(amount: Fraction) -> str:
    return format_quantity(int(amount))
