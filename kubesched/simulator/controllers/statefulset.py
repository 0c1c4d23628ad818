"""A simple StatefulSet controller (upstream ``pkg/controller/statefulset``): pods ``<set>-<ordinal>``
with stable names, the ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``
labels, hostname/subdomain, one PVC per claim template named ``<template>-<set>-<ordinal>``.

OrderedReady creates ordinals in order, each once the previous ones are Running and Ready, and
removes them from the highest, one at a time; Parallel does both at once. A changed template is
rolled out from the highest ordinal down to ``partition``, one pod at a time. Simplified: there
are no ControllerRevisions (pods below the partition are recreated from the current template) and
``controller-revision-hash`` is ``<set>-<hash of the template>``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable

from kubesched.api.apierrors import AlreadyExists
from kubesched.api.kinds import POD, Kind
from kubesched.api.meta import json_copy
from kubesched.api.selectors import LabelSelector
from kubesched.api.watch import ADDED, DELETED, WatchEvent
from kubesched.simulator.controllers.manager import Controller, Key, Manager
from kubesched.simulator.controllers.util import (
    FAILED,
    PVC,
    RUNNING,
    STATEFUL_SET,
    EventWriter,
    add_owner_reference,
    compute_hash,
    controller_ref,
    is_pod_available,
    is_pod_ready,
    is_terminal,
    key_of,
    labels_of,
    meta,
    new_controller_ref,
    phase,
    replicas_of,
    spec,
    status,
    update_status,
    workload_selector,
)

log = logging.getLogger(__name__)

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def parent_and_ordinal(pod: dict) -> tuple[str, int]:
    """``getParentNameAndOrdinal``: ``web-3`` -> (``web``, 3); (``""``, -1) for other names."""
    match = _ORDINAL.match(meta(pod).get("name", ""))
    if not match:
        return "", -1
    return match.group(1), int(match.group(2))


def _healthy(pod: dict, min_ready: int, now: float) -> bool:
    """Running and Ready (and available for ``minReadySeconds``)."""
    return phase(pod) == RUNNING and is_pod_ready(pod) and is_pod_available(pod, min_ready, now)


class StatefulSetController(Controller):
    """See the module docstring."""

    name = "statefulset-controller"
    kinds = (STATEFUL_SET, POD)

    def __init__(self, manager: Manager, *, events: bool = True) -> None:
        super().__init__(manager)
        self.event = EventWriter(self.store, self.name, events)

    def initial_keys(self) -> Iterable[Key]:
        return [key_of(s) for s in self.store.iter_all(STATEFUL_SET)]

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        obj = event.object
        if kind is not POD and kind == STATEFUL_SET:  # a pod's write (most) compares no kinds
            if event.type != DELETED:
                self.enqueue(key_of(obj))
            return
        ns = meta(obj).get("namespace") or ""
        old = event.old if event.type != ADDED else None
        ref = controller_ref(obj)
        for owner in (ref, controller_ref(old) if old is not None else None):
            if owner is not None and owner.get("kind") == "StatefulSet":
                self.enqueue((ns, owner.get("name", "")))
        if ref is None and event.type == ADDED:
            for sts in self.store.list(STATEFUL_SET, ns)[0]:
                selector = workload_selector(sts)
                if selector is not None and not selector.empty and selector.matches(labels_of(obj)):
                    self.enqueue(key_of(sts))

    # --- sync --------------------------------------------------------------------------------------
    def sync(self, key: Key) -> None:
        sts = self.store.try_get(STATEFUL_SET, key[0], key[1])
        if sts is None:
            return
        selector = workload_selector(sts)
        if selector is None or selector.empty:
            return
        pods = self._claim_pods(sts, selector)
        revision = f"{meta(sts)['name']}-{compute_hash(spec(sts).get('template') or {}, int(status(sts).get('collisionCount') or 0))}"
        if not meta(sts).get("deletionTimestamp"):
            self._update(sts, pods, revision)
            pods = self._owned_pods(sts)
        self._update_status(self.store.try_get(STATEFUL_SET, key[0], key[1]) or sts, pods, revision)

    def _owned_pods(self, sts: dict) -> list[dict]:
        return self.manager.owned(meta(sts)["uid"], POD)

    def _claim_pods(self, sts: dict, selector: LabelSelector) -> list[dict]:
        """Owned pods, plus orphans that match the selector and carry one of our names."""
        ns = meta(sts).get("namespace") or ""
        pods = self._owned_pods(sts)
        if meta(sts).get("deletionTimestamp"):
            return pods
        for name in sorted(self.manager.index.orphan_names(POD, ns)):
            pod = self.store.try_get(POD, ns, name)
            if pod is None or controller_ref(pod) is not None or is_terminal(pod) or meta(pod).get("deletionTimestamp"):
                continue
            parent, _ = parent_and_ordinal(pod)
            if parent == meta(sts)["name"] and selector.matches(labels_of(pod)):
                ref = new_controller_ref(sts, STATEFUL_SET)
                pods.append(self.store.mutate(POD, ns, name, functools.partial(add_owner_reference, ref=ref),
                                              expect_uid=meta(pod).get("uid")))
        return pods

    def _update(self, sts: dict, pods: list[dict], revision: str) -> None:
        """``updateStatefulSet``: create, replace, delete condemned, roll out — in that order."""
        start = int((spec(sts).get("ordinals") or {}).get("start") or 0)
        count = replicas_of(sts)
        parallel = spec(sts).get("podManagementPolicy") == "Parallel"
        min_ready = int(spec(sts).get("minReadySeconds") or 0)
        now = self.store.clock.wall()
        by_ordinal = {parent_and_ordinal(p)[1]: p for p in pods if parent_and_ordinal(p)[0] == meta(sts)["name"]}
        wanted = range(start, start + count)
        for ordinal in wanted:
            pod = by_ordinal.get(ordinal)
            if pod is None:
                self._create(sts, ordinal, revision)
                if not parallel:
                    return
                continue
            if phase(pod) == FAILED or phase(pod) == "Succeeded":
                self._delete(sts, pod)
                if not parallel:
                    return
                continue
            if not parallel and (meta(pod).get("deletionTimestamp") or not _healthy(pod, min_ready, now)):
                return
        if not self._delete_condemned(sts, by_ordinal, wanted, parallel, min_ready, now):
            return
        self._roll_out(sts, by_ordinal, wanted, revision, min_ready, now)

    def _delete_condemned(self, sts: dict, by_ordinal: dict[int, dict], wanted: range, parallel: bool,
                          min_ready: int, now: float) -> bool:
        """Remove ordinals outside the wanted range, highest first; False while one is going away."""
        condemned = sorted((o for o in by_ordinal if o not in wanted), reverse=True)
        for ordinal in condemned:
            pod = by_ordinal[ordinal]
            if meta(pod).get("deletionTimestamp"):
                if not parallel:
                    return False
                continue
            if not parallel and any(not _healthy(by_ordinal[o], min_ready, now) for o in by_ordinal
                                    if o != ordinal and o in wanted):
                return False
            self._retain_or_release_claims(sts, pod)
            self._delete(sts, pod)
            if not parallel:
                return False
        return True

    def _roll_out(self, sts: dict, by_ordinal: dict[int, dict], wanted: range, revision: str,
                  min_ready: int, now: float) -> None:
        strategy = spec(sts).get("updateStrategy") or {}
        if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        for ordinal in sorted((o for o in by_ordinal if o in wanted), reverse=True):
            pod = by_ordinal[ordinal]
            if ordinal - wanted.start < partition:
                return
            if labels_of(pod).get(REVISION_LABEL) != revision and not meta(pod).get("deletionTimestamp"):
                self._delete(sts, pod)
                return
            if meta(pod).get("deletionTimestamp") or not _healthy(pod, min_ready, now):
                return

    # --- pods and claims --------------------------------------------------------------------------------
    def _create(self, sts: dict, ordinal: int, revision: str) -> None:
        pod = new_stateful_pod(sts, ordinal, revision)
        name = meta(pod)["name"]
        if not self._create_claims(sts, pod):
            return
        try:
            self.store.create(POD, pod)
        except Exception as e:
            self.event(sts, "Warning", "FailedCreate", f"create Pod {name} in StatefulSet {meta(sts)['name']} failed error: {getattr(e, 'message', e)}")
            raise
        self.event(sts, "Normal", "SuccessfulCreate", f"create Pod {name} in StatefulSet {meta(sts)['name']} successful")

    def _create_claims(self, sts: dict, pod: dict) -> bool:
        for claim in claims_for(sts, parent_and_ordinal(pod)[1]):
            cname = meta(claim)["name"]
            existing = self.store.try_get(PVC, meta(claim)["namespace"], cname)
            if existing is not None:
                if meta(existing).get("deletionTimestamp"):
                    return False
                continue
            try:
                self.store.create(PVC, claim)
            except AlreadyExists:
                continue
            except Exception as e:
                self.event(sts, "Warning", "FailedCreate", f"create Claim {cname} for Pod {meta(pod)['name']} in StatefulSet "
                           f"{meta(sts)['name']} failed error: {getattr(e, 'message', e)}")
                raise
            self.event(sts, "Normal", "SuccessfulCreate", f"create Claim {cname} Pod {meta(pod)['name']} in StatefulSet "
                       f"{meta(sts)['name']} success")
        return True

    def _retain_or_release_claims(self, sts: dict, pod: dict) -> None:
        """whenScaled=Delete: a condemned pod becomes its claims' only owner, so they go with it."""
        policy = spec(sts).get("persistentVolumeClaimRetentionPolicy") or {}
        if policy.get("whenScaled") != "Delete":
            return
        ref = new_controller_ref(pod, POD)
        ref["controller"] = False
        for claim in claims_for(sts, parent_and_ordinal(pod)[1]):
            ns, cname = meta(claim)["namespace"], meta(claim)["name"]
            if self.store.try_get(PVC, ns, cname) is None:
                continue

            def change(obj: dict, r: dict = ref) -> None:
                replaced = {r["uid"], meta(sts)["uid"]}
                refs = [x for x in obj["metadata"].get("ownerReferences") or [] if x.get("uid") not in replaced]
                obj["metadata"]["ownerReferences"] = [*refs, r]

            self.store.mutate(PVC, ns, cname, change)

    def _delete(self, sts: dict, pod: dict) -> None:
        name = meta(pod)["name"]
        try:
            self.store.delete(POD, *key_of(pod), uid=meta(pod).get("uid"))
        except Exception as e:
            self.event(sts, "Warning", "FailedDelete", f"delete Pod {name} in StatefulSet {meta(sts)['name']} failed error: {getattr(e, 'message', e)}")
            return
        self.event(sts, "Normal", "SuccessfulDelete", f"delete Pod {name} in StatefulSet {meta(sts)['name']} successful")

    # --- status ------------------------------------------------------------------------------------
    def _update_status(self, sts: dict, pods: list[dict], revision: str) -> None:
        min_ready = int(spec(sts).get("minReadySeconds") or 0)
        now = self.store.clock.wall()
        current_revision = status(sts).get("currentRevision") or revision
        st: dict = {"observedGeneration": meta(sts).get("generation", 1), "replicas": 0, "readyReplicas": 0,
                    "currentReplicas": 0, "updatedReplicas": 0, "availableReplicas": 0}
        for pod in pods:
            if phase(pod):
                st["replicas"] += 1
            if phase(pod) == RUNNING and is_pod_ready(pod):
                st["readyReplicas"] += 1
                if is_pod_available(pod, min_ready, now):
                    st["availableReplicas"] += 1
            if phase(pod) and not meta(pod).get("deletionTimestamp"):
                pod_revision = labels_of(pod).get(REVISION_LABEL)
                st["currentReplicas"] += pod_revision == current_revision
                st["updatedReplicas"] += pod_revision == revision
        rolling = ((spec(sts).get("updateStrategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"
        if rolling and st["updatedReplicas"] == st["replicas"] == st["readyReplicas"]:  # completeRollingUpdate
            current_revision, st["currentReplicas"] = revision, st["updatedReplicas"]
        st["currentRevision"], st["updateRevision"] = current_revision, revision
        st["collisionCount"] = int(status(sts).get("collisionCount") or 0)
        for field in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if not st[field]:
                del st[field]
        update_status(self.store, STATEFUL_SET, sts, st)
        self.requeue_for_availability(key_of(sts), pods, min_ready)


def claims_for(sts: dict, ordinal: int) -> list[dict]:
    """``getPersistentVolumeClaims``: one claim per template, labelled with the selector's matchLabels."""
    out = []
    match_labels = (spec(sts).get("selector") or {}).get("matchLabels") or {}
    policy = spec(sts).get("persistentVolumeClaimRetentionPolicy") or {}
    for template in spec(sts).get("volumeClaimTemplates") or []:
        claim = json_copy(template)
        claim.setdefault("apiVersion", "v1")
        claim.setdefault("kind", "PersistentVolumeClaim")
        c_meta = claim.setdefault("metadata", {})
        c_meta["name"] = f"{c_meta.get('name', '')}-{meta(sts)['name']}-{ordinal}"
        c_meta["namespace"] = meta(sts).get("namespace") or "default"
        c_meta["labels"] = {**(c_meta.get("labels") or {}), **match_labels}
        if policy.get("whenDeleted") == "Delete":
            c_meta["ownerReferences"] = [new_controller_ref(sts, STATEFUL_SET)]
        claim.pop("status", None)
        claim["status"] = {"phase": "Pending"}
        out.append(claim)
    return out


def new_stateful_pod(sts: dict, ordinal: int, revision: str) -> dict:
    """``newVersionedStatefulSetPod``: the template with the set's identity, storage and revision."""
    template = json_copy(spec(sts).get("template") or {})
    t_meta = template.get("metadata") or {}
    name = f"{meta(sts)['name']}-{ordinal}"
    labels = {**(t_meta.get("labels") or {}), POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal), REVISION_LABEL: revision}
    pod_meta: dict = {"name": name, "namespace": meta(sts).get("namespace") or "default", "labels": labels,
                      "ownerReferences": [new_controller_ref(sts, STATEFUL_SET)]}
    if t_meta.get("annotations"):
        pod_meta["annotations"] = t_meta["annotations"]
    pod_spec = template.get("spec") or {}
    pod_spec["hostname"] = name
    if spec(sts).get("serviceName"):
        pod_spec["subdomain"] = spec(sts)["serviceName"]
    claims = {t.get("metadata", {}).get("name", ""): c for t, c in zip(spec(sts).get("volumeClaimTemplates") or [],
                                                                        claims_for(sts, ordinal))}
    volumes = [{"name": tname, "persistentVolumeClaim": {"claimName": meta(c)["name"]}} for tname, c in claims.items()]
    volumes += [v for v in pod_spec.get("volumes") or [] if v.get("name") not in claims]
    if volumes:
        pod_spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}
