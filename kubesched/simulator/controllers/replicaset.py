"""ReplicaSet and ReplicationController controllers (upstream ``pkg/controller/replicaset``; the
RC controller is the same code with another kind): keep ``spec.replicas`` active pods matching
the selector, adopting orphans, releasing pods that stopped matching, and on scale-down deleting
pods in ``ActivePodsWithRanks`` order (unscheduled, pending, not ready, cheap, doubled-up, recently
ready, restarting, young first).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from kubesched.api.kinds import POD, Kind
from kubesched.api.meta import json_copy
from kubesched.api.selectors import LabelSelector, selector_from_set
from kubesched.api.watch import ADDED, DELETED, WatchEvent
from kubesched.simulator.controllers.manager import Controller, Key, Manager
from kubesched.simulator.controllers.util import (
    REPLICA_SET,
    REPLICATION_CONTROLLER,
    EventWriter,
    SelectorCache,
    add_owner_reference,
    controller_ref,
    drop_owner_references,
    is_pod_active,
    is_pod_available,
    is_pod_ready,
    is_pod_terminating,
    key_of,
    labels_of,
    meta,
    new_controller_ref,
    rank_pods_for_deletion,
    replicas_of,
    spec,
    template_labels,
    update_status,
)
from kubesched.utils.clock import rfc3339

log = logging.getLogger(__name__)

#: ``BurstReplicas``: at most this many pods created or deleted per sync.
BURST_REPLICAS = 500
REPLICA_FAILURE = "ReplicaFailure"


class ReplicaSetController(Controller):
    """See the module docstring; ``kind`` is ReplicaSet or ReplicationController."""

    def __init__(self, manager: Manager, kind: Kind = REPLICA_SET, *, events: bool = True) -> None:
        super().__init__(manager)
        self.kind = kind
        self.kinds = (kind, POD)
        self.name = "replicaset-controller" if kind == REPLICA_SET else "replicationcontroller-controller"
        self.event = EventWriter(self.store, self.name, events)
        self.selectors = SelectorCache()
        #: (orphan generation, owner generation) at the last orphan scan of each owner.
        self._scanned: dict[Key, tuple[int, int]] = {}

    # --- events ------------------------------------------------------------------------------------
    def initial_keys(self) -> Iterable[Key]:
        return [key_of(obj) for obj in self.store.iter_all(self.kind)]

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        if kind is not POD and kind == self.kind:  # a pod's write (most) compares no kinds
            if event.type == DELETED:
                self._scanned.pop(key_of(event.object), None)
                self.selectors.forget(event.object)
            else:
                self.enqueue(key_of(event.object))
            return
        pod, old = event.object, event.old
        ref = controller_ref(pod)
        if ref is not None and self._mine(ref):
            self.enqueue((meta(pod).get("namespace") or "", ref["name"]))
        old_ref = controller_ref(old) if old is not None and event.type != ADDED else None
        if old_ref is not None and old_ref != ref and self._mine(old_ref):
            self.enqueue((meta(pod).get("namespace") or "", old_ref["name"]))
        if ref is None and event.type != DELETED:
            changed = old is None or event.type == ADDED or labels_of(old) != labels_of(pod) or old_ref is not None
            if changed:
                self._enqueue_selecting(pod)

    def _mine(self, ref: Mapping) -> bool:
        return ref.get("kind") == self.kind.kind and ref.get("apiVersion") == self.kind.api_version

    def _enqueue_selecting(self, pod: dict) -> None:
        """An orphan appeared or changed: every owner whose selector matches may adopt it."""
        ns = meta(pod).get("namespace") or ""
        labels = labels_of(pod)
        for owner in self.store.list(self.kind, ns)[0]:
            selector = self.selectors.get(owner)
            if selector is not None and not selector.empty and selector.matches(labels):
                self.enqueue(key_of(owner))

    # --- sync --------------------------------------------------------------------------------------
    def sync(self, key: Key) -> None:
        rs = self.store.try_get(self.kind, key[0], key[1])
        if rs is None:
            return
        selector = self.selectors.get(rs)
        if selector is None:
            return
        pods = self._claim_pods(rs, selector)
        active = [p for p in pods if is_pod_active(p)]
        terminating = [p for p in pods if is_pod_terminating(p)]
        error: str | None = None
        if not meta(rs).get("deletionTimestamp"):
            error = self._manage_replicas(rs, active, selector)
            pods = self._owned_pods(rs)
            active = [p for p in pods if is_pod_active(p)]
            terminating = [p for p in pods if is_pod_terminating(p)]
        rs = self.store.try_get(self.kind, key[0], key[1])
        if rs is None:
            return
        new_status = self._calculate_status(rs, active, terminating, error)
        if not _status_unchanged(rs, new_status):
            rs = update_status(self.store, self.kind, rs, new_status)
        self.requeue_for_availability(key, active, int(spec(rs).get("minReadySeconds") or 0))

    def _owned_pods(self, rs: dict) -> list[dict]:
        return self.manager.owned(meta(rs)["uid"], POD)

    def _claim_pods(self, rs: dict, selector: LabelSelector) -> list[dict]:
        """``PodControllerRefManager.ClaimPods`` over active pods (terminating ones stay as they are):
        keep owned matching pods, release owned non-matching ones, adopt matching orphans."""
        ns = meta(rs).get("namespace") or ""
        deleting = bool(meta(rs).get("deletionTimestamp"))
        claimed = []
        for pod in self._owned_pods(rs):
            if not is_pod_active(pod) or selector.matches(labels_of(pod)) or deleting:
                claimed.append(pod)
            else:
                self._release(pod, rs)
        if deleting or selector.empty:
            return claimed
        scan_key = (self.manager.index.generation(POD, ns), meta(rs).get("generation", 1))
        if self._scanned.get(key_of(rs)) == scan_key:
            return claimed
        for name in sorted(self.manager.index.orphan_names(POD, ns)):
            orphan = self.store.try_get(POD, ns, name)
            if orphan is None or not is_pod_active(orphan) or controller_ref(orphan) is not None:
                continue
            if selector.matches(labels_of(orphan)):
                claimed.append(self._adopt(orphan, rs))
        self._scanned[key_of(rs)] = (self.manager.index.generation(POD, ns), meta(rs).get("generation", 1))
        return claimed

    def _adopt(self, pod: dict, rs: dict) -> dict:
        ref = new_controller_ref(rs, self.kind)
        return self.store.mutate(POD, *key_of(pod), lambda p: add_owner_reference(p, ref), expect_uid=meta(pod).get("uid"))

    def _release(self, pod: dict, rs: dict) -> None:
        uid = meta(rs)["uid"]
        try:
            self.store.mutate(POD, *key_of(pod), lambda p: drop_owner_references(p, {uid}), expect_uid=meta(pod).get("uid"))
        except Exception as e:
            log.debug("could not release %s: %s", meta(pod).get("name"), e)

    def _manage_replicas(self, rs: dict, active: list[dict], selector: LabelSelector) -> str | None:
        """Create or delete pods towards ``spec.replicas``; the first error, if any."""
        diff = len(active) - replicas_of(rs)
        if diff < 0:
            if not selector.matches(template_labels(rs)):
                return None  # validation should have refused it; creating would never converge
            return self._create_pods(rs, min(-diff, BURST_REPLICAS))
        if diff > 0:
            diff = min(diff, BURST_REPLICAS)
            for pod in self._pods_to_delete(rs, active, diff):
                self._delete_pod(rs, pod)
        return None

    def _create_pods(self, rs: dict, count: int) -> str | None:
        for _ in range(count):
            pod = pod_from_template(rs, self.kind)
            try:
                created = self.store.create(POD, pod)
            except Exception as e:
                message = getattr(e, "message", str(e))
                self.event(rs, "Warning", "FailedCreate", f"Error creating: {message}")
                return message
            self.event(rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        return None

    def _pods_to_delete(self, rs: dict, active: list[dict], diff: int) -> list[dict]:
        """``getPodsToDelete``: rank against the pods of every ReplicaSet under the same controller."""
        if diff >= len(active):
            return active[:diff]
        related = self._related_pods(rs)
        return rank_pods_for_deletion(list(active), related, self.store.clock.wall())[:diff]

    def _related_pods(self, rs: dict) -> list[dict]:
        """``getIndirectlyRelatedPods``: the pods selected by any ReplicaSet under the same
        controller; none for a ReplicaSet without one (every rank is then 0)."""
        owner = controller_ref(rs)
        if owner is None:
            return []
        ns = meta(rs).get("namespace") or ""
        pods = self.store.list(POD, ns)[0]
        seen: dict[str, dict] = {}
        for sibling in self.manager.owned(owner.get("uid", ""), self.kind):
            selector = self.selectors.get(sibling)
            if selector is None or meta(sibling).get("namespace") != ns:
                continue
            for pod in pods:
                if selector.matches(labels_of(pod)):
                    seen.setdefault(meta(pod).get("uid", ""), pod)
        return list(seen.values())

    def _delete_pod(self, rs: dict, pod: dict) -> None:
        try:
            self.store.delete(POD, *key_of(pod), uid=meta(pod).get("uid"))
        except Exception as e:
            self.event(rs, "Warning", "FailedDelete", f"Error deleting: {getattr(e, 'message', e)}")
            return
        self.event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {meta(pod)['name']}")

    # --- status ------------------------------------------------------------------------------------
    def _calculate_status(self, rs: dict, active: list[dict], terminating: list[dict], error: str | None) -> dict:
        """``calculateStatus``: counts over active pods, the ReplicaFailure condition, terminating count."""
        new = json_copy(rs.get("status") or {})
        now = self.store.clock.wall()
        template = selector_from_set(template_labels(rs))
        min_ready = int(spec(rs).get("minReadySeconds") or 0)
        new["replicas"] = len(active)
        new["fullyLabeledReplicas"] = sum(1 for p in active if template.matches(labels_of(p)))
        new["readyReplicas"] = sum(1 for p in active if is_pod_ready(p))
        new["availableReplicas"] = sum(1 for p in active if is_pod_available(p, min_ready, now))
        if self.kind == REPLICA_SET:
            new["terminatingReplicas"] = len(terminating)
        conditions = [c for c in new.get("conditions") or [] if c.get("type") != REPLICA_FAILURE]
        failure = next((c for c in new.get("conditions") or [] if c.get("type") == REPLICA_FAILURE), None)
        if error is not None:
            reason = "FailedCreate" if len(active) < replicas_of(rs) else "FailedDelete"
            if failure is None or failure.get("reason") != reason:
                failure = {"type": REPLICA_FAILURE, "status": "True", "lastTransitionTime": rfc3339(now),
                           "reason": reason, "message": error}
            conditions.append(failure)
        if conditions:
            new["conditions"] = conditions
        else:
            new.pop("conditions", None)
        new["observedGeneration"] = meta(rs).get("generation", 1)
        for field in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):  # omitempty
            if not new[field]:
                del new[field]
        return new


def _status_unchanged(rs: dict, new_status: dict) -> bool:
    return (rs.get("status") or {}) == new_status


def pod_from_template(owner: dict, owner_kind: Kind) -> dict:
    """``GetPodFromTemplate``: labels, annotations, finalizers and spec from the template,
    ``generateName: <owner>-`` and the controller reference."""
    template = json_copy((owner.get("spec") or {}).get("template") or {})
    t_meta = template.get("metadata") or {}
    name = meta(owner)["name"]
    prefix = f"{name}-"
    pod_meta: dict = {"generateName": prefix, "namespace": meta(owner).get("namespace") or "default",
                      "ownerReferences": [new_controller_ref(owner, owner_kind)]}
    for field in ("labels", "annotations", "finalizers"):
        if t_meta.get(field):
            pod_meta[field] = t_meta[field]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}


def replication_controller(manager: Manager, *, events: bool = True) -> ReplicaSetController:
    return ReplicaSetController(manager, REPLICATION_CONTROLLER, events=events)
