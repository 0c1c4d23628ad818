"""The Deployment controller (upstream ``pkg/controller/deployment``): a Deployment owns one
ReplicaSet per pod template, named ``<deployment>-<pod-template-hash>``; the RollingUpdate strategy
scales the new one up and the old ones down within ``maxSurge``/``maxUnavailable``, Recreate
scales the old ones to zero first; scaling events are spread proportionally over the active
ReplicaSets; status and the Progressing/Available conditions are what ``kubectl rollout status``
reads.

Differences from upstream: no rollback (``spec.rollbackTo`` is gone from apps/v1 anyway) and the
template hash is computed over JSON instead of a Go struct dump (see ``util.compute_hash``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kubesched.api.apierrors import AlreadyExists
from kubesched.api.kinds import POD, Kind
from kubesched.api.meta import json_copy
from kubesched.api.selectors import LabelSelector
from kubesched.api.timeutil import parse_time
from kubesched.api.watch import DELETED, WatchEvent
from kubesched.simulator.controllers.manager import Controller, Key, Manager
from kubesched.simulator.controllers.util import (
    DEPLOYMENT,
    REPLICA_SET,
    EventWriter,
    SelectorCache,
    add_owner_reference,
    compute_hash,
    controller_ref,
    drop_owner_references,
    is_terminal,
    key_of,
    labels_of,
    meta,
    new_controller_ref,
    replicas_of,
    scaled_value,
    spec,
    status,
    update_status,
)
from kubesched.utils.clock import rfc3339

log = logging.getLogger(__name__)

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_SKIPPED_ANNOTATIONS = frozenset({LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS,
                                  "deployment.kubernetes.io/error-selector-overlapping-with",
                                  "deployment.kubernetes.io/selector-updated-at"})
MAX_REVISION_HISTORY_CHARS = 2000
MAX_INT32 = 2**31 - 1

# Condition types and reasons (deploymentutil).
PROGRESSING, AVAILABLE, REPLICA_FAILURE = "Progressing", "Available", "ReplicaFailure"
REPLICA_SET_UPDATED = "ReplicaSetUpdated"
NEW_REPLICA_SET_CREATED = "NewReplicaSetCreated"
FOUND_NEW_REPLICA_SET = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"


# --- spec accessors (tolerant of objects the API server did not default) --------------------------
def is_rolling_update(d: dict) -> bool:
    return ((spec(d).get("strategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"


def resolve_fenceposts(d: dict) -> tuple[int, int]:
    """``ResolveFenceposts``: (maxSurge rounded up, maxUnavailable rounded down); both zero means 1 unavailable."""
    rolling = (spec(d).get("strategy") or {}).get("rollingUpdate") or {}
    desired = replicas_of(d)
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: dict) -> int:
    return resolve_fenceposts(d)[0] if is_rolling_update(d) else 0


def max_unavailable(d: dict) -> int:
    """``MaxUnavailable``: never more than the desired replicas."""
    if not is_rolling_update(d) or replicas_of(d) == 0:
        return 0
    return min(resolve_fenceposts(d)[1], replicas_of(d))


def has_progress_deadline(d: dict) -> bool:
    deadline = spec(d).get("progressDeadlineSeconds", 600)
    return deadline is not None and deadline != MAX_INT32


def revision_of(rs: dict) -> int:
    try:
        return int((meta(rs).get("annotations") or {}).get(REVISION, "0") or 0)
    except ValueError:
        return 0


def _annotation_int(rs: dict, key: str) -> int | None:
    try:
        return int((meta(rs).get("annotations") or {})[key])
    except (KeyError, ValueError, TypeError):
        return None


def _creation_key(rs: dict) -> tuple[float, str]:
    return parse_time(meta(rs).get("creationTimestamp")), meta(rs).get("name", "")


def equal_ignore_hash(t1: dict, t2: dict) -> bool:
    """``EqualIgnoreHash``: templates equal apart from the ``pod-template-hash`` label."""
    a, b = json_copy(t1 or {}), json_copy(t2 or {})
    for t in (a, b):
        labels = (t.get("metadata") or {}).get("labels")
        if labels is not None:
            labels.pop(POD_TEMPLATE_HASH, None)
            if not labels:
                t["metadata"].pop("labels")
        if t.get("metadata") == {}:
            t.pop("metadata")
    return a == b


def find_new_replica_set(d: dict, rs_list: list[dict]) -> dict | None:
    """The oldest ReplicaSet whose template matches the Deployment's."""
    template = spec(d).get("template") or {}
    for rs in sorted(rs_list, key=_creation_key):
        if equal_ignore_hash(spec(rs).get("template") or {}, template):
            return rs
    return None


def _active(rss: Iterable[dict | None]) -> list[dict]:
    return [rs for rs in rss if rs is not None and replicas_of(rs) > 0]


def _sum_spec(rss: Iterable[dict | None]) -> int:
    return sum(replicas_of(rs) for rs in rss if rs is not None)


def _sum_status(rss: Iterable[dict | None], field: str) -> int:
    return sum(int(status(rs).get(field) or 0) for rs in rss if rs is not None)


def new_condition(kind: str, cond_status: str, reason: str, message: str, now: float) -> dict:
    stamp = rfc3339(now)
    return {"type": kind, "status": cond_status, "lastUpdateTime": stamp, "lastTransitionTime": stamp,
            "reason": reason, "message": message}


def get_condition(st: dict, kind: str) -> dict | None:
    return next((c for c in st.get("conditions") or [] if c.get("type") == kind), None)


def set_condition(st: dict, condition: dict) -> None:
    """``SetDeploymentCondition``: same status and reason is a no-op; same status keeps the transition time."""
    current = get_condition(st, condition["type"])
    if current is not None and current.get("status") == condition["status"] and current.get("reason") == condition["reason"]:
        return
    if current is not None and current.get("status") == condition["status"]:
        condition = {**condition, "lastTransitionTime": current.get("lastTransitionTime")}
    st["conditions"] = [c for c in st.get("conditions") or [] if c.get("type") != condition["type"]] + [condition]


def remove_condition(st: dict, kind: str) -> None:
    conditions = [c for c in st.get("conditions") or [] if c.get("type") != kind]
    if conditions:
        st["conditions"] = conditions
    else:
        st.pop("conditions", None)


def _omit_zero(st: dict, fields: Iterable[str]) -> dict:
    for field in fields:
        if not st.get(field):
            st.pop(field, None)
    return st


class DeploymentController(Controller):
    """See the module docstring."""

    name = "deployment-controller"
    kinds = (DEPLOYMENT, REPLICA_SET, POD)

    def __init__(self, manager: Manager, *, events: bool = True) -> None:
        super().__init__(manager)
        self.event = EventWriter(self.store, self.name, events)
        self.selectors = SelectorCache()

    # --- events ------------------------------------------------------------------------------------
    def initial_keys(self) -> Iterable[Key]:
        return [key_of(d) for d in self.store.iter_all(DEPLOYMENT)]

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        obj = event.object
        if kind is POD:  # the store's constant (most writes): no comparison of kinds
            if event.type == DELETED:
                self._observe_pod_deleted(obj)
            return
        if kind == DEPLOYMENT:
            if event.type == DELETED:
                self.selectors.forget(obj)
            else:
                self.enqueue(key_of(obj))
        elif kind == REPLICA_SET:
            self._observe_replica_set(event)
        elif event.type == DELETED:
            self._observe_pod_deleted(obj)

    def _observe_replica_set(self, event: WatchEvent) -> None:
        rs, old = event.object, event.old if event.type != "ADDED" else None
        ns = meta(rs).get("namespace") or ""
        ref = controller_ref(rs)
        old_ref = controller_ref(old) if old is not None else None
        for r in (ref, old_ref):
            if r is not None and r.get("kind") == "Deployment":
                self.enqueue((ns, r["name"]))
        if ref is None and event.type != DELETED and (old is None or labels_of(old) != labels_of(rs) or old_ref is not None):
            for d in self.store.list(DEPLOYMENT, ns)[0]:
                selector = self.selectors.get(d)
                if selector is not None and not selector.empty and selector.matches(labels_of(rs)):
                    self.enqueue(key_of(d))

    def _observe_pod_deleted(self, pod: dict) -> None:
        """Recreate waits for every old pod to be gone, so a pod deletion may unblock it."""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        ns = meta(pod).get("namespace") or ""
        rs = self.store.try_get(REPLICA_SET, ns, ref.get("name", ""))
        owner = controller_ref(rs) if rs is not None else None
        if owner is None or owner.get("kind") != "Deployment":
            return
        d = self.store.try_get(DEPLOYMENT, ns, owner.get("name", ""))
        if d is not None and not is_rolling_update(d):
            self.enqueue(key_of(d))

    # --- sync --------------------------------------------------------------------------------------
    def sync(self, key: Key) -> None:
        d = self.store.try_get(DEPLOYMENT, key[0], key[1])
        if d is None:
            return
        selector = self.selectors.get(d)
        if selector is None:
            return
        if selector.empty:
            self.event(d, "Warning", "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
            if int(status(d).get("observedGeneration") or 0) < meta(d).get("generation", 1):
                update_status(self.store, DEPLOYMENT, d, {**status(d), "observedGeneration": meta(d).get("generation", 1)})
            return
        rs_list = self._claim_replica_sets(d, selector)
        if meta(d).get("deletionTimestamp"):
            self._sync_status_only(d, rs_list)
            return
        d = self._check_paused_conditions(d)
        if spec(d).get("paused"):
            self._sync_scaling(d, rs_list)
            return
        if self._is_scaling_event(d, rs_list):
            self._sync_scaling(d, rs_list)
            return
        if is_rolling_update(d):
            self._rollout_rolling(d, rs_list)
        else:
            self._rollout_recreate(d, rs_list)

    def _fresh(self, obj: dict, kind: Kind = DEPLOYMENT) -> dict:
        return self.store.try_get(kind, *key_of(obj)) or obj

    def _claim_replica_sets(self, d: dict, selector: LabelSelector) -> list[dict]:
        """``getReplicaSetsForDeployment``: owned ones that still match, plus adopted matching orphans."""
        ns = meta(d).get("namespace") or ""
        uid = meta(d)["uid"]
        deleting = bool(meta(d).get("deletionTimestamp"))
        claimed = []
        for rs in self.store.list(REPLICA_SET, ns)[0]:
            ref = controller_ref(rs)
            matches = selector.matches(labels_of(rs))
            if ref is not None and ref.get("uid") == uid:
                if matches or deleting:
                    claimed.append(rs)
                else:
                    self._set_owner(rs, None, uid)
            elif ref is None and matches and not deleting and not meta(rs).get("deletionTimestamp"):
                claimed.append(self._set_owner(rs, new_controller_ref(d, DEPLOYMENT), uid))
        return claimed

    def _set_owner(self, rs: dict, ref: dict | None, uid: str) -> dict:
        """Adopt (``ref``) or release (None) a ReplicaSet."""
        def change(obj: dict) -> None:
            if ref is not None:
                add_owner_reference(obj, ref)
            else:
                drop_owner_references(obj, {uid})

        return self.store.mutate(REPLICA_SET, *key_of(rs), change, expect_uid=meta(rs).get("uid"))

    # --- new and old ReplicaSets ---------------------------------------------------------------------
    def _all_replica_sets(self, d: dict, rs_list: list[dict], create: bool) -> tuple[dict, dict | None, list[dict]]:
        """``getAllReplicaSetsAndSyncRevision``: (deployment, new RS or None, all old RSs)."""
        new = find_new_replica_set(d, rs_list)
        olds = [rs for rs in rs_list if new is None or meta(rs)["uid"] != meta(new)["uid"]]
        d, new = self._new_replica_set(d, new, olds, create)
        return d, new, olds

    def _new_replica_set(self, d: dict, existing: dict | None, olds: list[dict], create: bool) -> tuple[dict, dict | None]:
        new_revision = str(max((revision_of(rs) for rs in olds), default=0) + 1)
        if existing is not None:
            return self._sync_existing_new_rs(d, existing, new_revision)
        if not create:
            return d, None
        return self._create_new_rs(d, olds, new_revision)

    def _sync_existing_new_rs(self, d: dict, rs: dict, new_revision: str) -> tuple[dict, dict]:
        rs = self._fresh(rs, REPLICA_SET)
        updated = json_copy(rs)
        changed = set_new_rs_annotations(d, updated, new_revision, exists=True)
        if changed or spec(updated).get("minReadySeconds", 0) != spec(d).get("minReadySeconds", 0):
            updated["spec"]["minReadySeconds"] = spec(d).get("minReadySeconds", 0)
            return d, self.store.update(REPLICA_SET, updated)
        d = self._set_revision(d, (meta(rs).get("annotations") or {}).get(REVISION, ""))
        if has_progress_deadline(d) and get_condition(status(d), PROGRESSING) is None:
            st = json_copy(status(d))
            set_condition(st, new_condition(PROGRESSING, "True", FOUND_NEW_REPLICA_SET,
                                            f'Found new replica set "{meta(rs)["name"]}"', self.store.clock.wall()))
            d = update_status(self.store, DEPLOYMENT, d, st)
        return d, rs

    def _set_revision(self, d: dict, revision: str) -> dict:
        """``SetDeploymentRevision`` (an annotation, so a metadata write)."""
        if (meta(d).get("annotations") or {}).get(REVISION) == revision:
            return d

        def change(obj: dict) -> None:
            obj["metadata"].setdefault("annotations", {})[REVISION] = revision

        return self.store.mutate(DEPLOYMENT, *key_of(d), change, expect_uid=meta(d).get("uid"))

    def _create_new_rs(self, d: dict, olds: list[dict], new_revision: str) -> tuple[dict, dict | None]:
        collision = status(d).get("collisionCount")
        template = json_copy(spec(d).get("template") or {})
        pod_hash = compute_hash(template, collision)
        t_meta = template.setdefault("metadata", {})
        t_meta["labels"] = {**(t_meta.get("labels") or {}), POD_TEMPLATE_HASH: pod_hash}
        selector = json_copy(spec(d).get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: pod_hash}
        name = f"{meta(d)['name']}-{pod_hash}"
        rs: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": name, "namespace": meta(d).get("namespace"), "labels": dict(t_meta["labels"]),
                           "ownerReferences": [new_controller_ref(d, DEPLOYMENT)]},
              "spec": {"replicas": 0, "minReadySeconds": spec(d).get("minReadySeconds", 0), "selector": selector,
                       "template": template}}
        count = new_rs_new_replicas(d, [*olds, rs], rs)
        rs["spec"]["replicas"] = count
        set_new_rs_annotations(d, rs, new_revision, exists=False)
        try:
            created = self.store.create(REPLICA_SET, rs)
        except AlreadyExists:
            return self._on_name_taken(d, name)
        if count > 0:
            self.event(d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name} to {count}")
        d = self._set_revision(d, new_revision)
        if has_progress_deadline(d):
            st = json_copy(status(d))
            set_condition(st, new_condition(PROGRESSING, "True", NEW_REPLICA_SET_CREATED,
                                            f'Created new replica set "{name}"', self.store.clock.wall()))
            d = update_status(self.store, DEPLOYMENT, d, st)
        return d, created

    def _on_name_taken(self, d: dict, name: str) -> tuple[dict, dict | None]:
        """The hash's name exists: ours with the same template is the new RS, anything else is a
        collision, resolved by bumping ``status.collisionCount`` and trying again."""
        rs = self.store.get(REPLICA_SET, meta(d).get("namespace"), name)
        ref = controller_ref(rs)
        if ref is not None and ref.get("uid") == meta(d)["uid"] and equal_ignore_hash(spec(d).get("template") or {},
                                                                                   spec(rs).get("template") or {}):
            return d, rs
        st = json_copy(status(d))
        st["collisionCount"] = int(st.get("collisionCount") or 0) + 1
        update_status(self.store, DEPLOYMENT, d, st)
        raise AlreadyExists.of("replicasets", name, "apps")

    # --- scaling ----------------------------------------------------------------------------------------
    def _is_scaling_event(self, d: dict, rs_list: list[dict]) -> bool:
        d2, new, olds = self._all_replica_sets(d, rs_list, create=False)
        for rs in _active([*olds, new]):
            desired = _annotation_int(rs, DESIRED_REPLICAS)
            if desired is not None and desired != replicas_of(d2):
                return True
        return False

    def _sync_scaling(self, d: dict, rs_list: list[dict]) -> None:
        """``sync``: scale proportionally, clean up if paused, write status."""
        d, new, olds = self._all_replica_sets(d, rs_list, create=False)
        self._scale(d, new, olds)
        new, olds = self._refresh(new), [self._fresh(rs, REPLICA_SET) for rs in olds]
        d = self._fresh(d)
        if spec(d).get("paused"):
            self._cleanup(d, olds)
        self._write_status(d, self._calculate_status([*olds, new], new, d))

    def _refresh(self, rs: dict | None) -> dict | None:
        return None if rs is None else self._fresh(rs, REPLICA_SET)

    def _scale(self, d: dict, new: dict | None, olds: list[dict]) -> None:
        target = find_active_or_latest(new, olds)
        if target is not None:
            if replicas_of(target) != replicas_of(d):
                self._scale_rs_and_record(target, replicas_of(d), d)
            return
        if is_saturated(d, new):
            for old in _active(olds):
                self._scale_rs_and_record(old, 0, d)
            return
        if not is_rolling_update(d):
            return
        all_rss = _active([*olds, new])
        allowed = replicas_of(d) + max_surge(d) if replicas_of(d) > 0 else 0
        to_add = allowed - _sum_spec(all_rss)
        operation = ""
        if to_add > 0:  # ReplicaSetsBySizeNewer: larger first, then newer (name descending on ties)
            all_rss.sort(key=lambda rs: meta(rs)["name"], reverse=True)
            all_rss.sort(key=lambda rs: (-replicas_of(rs), -_creation_key(rs)[0]))
            operation = "up"
        elif to_add < 0:
            all_rss.sort(key=lambda rs: (-replicas_of(rs), _creation_key(rs)))
            operation = "down"
        sizes: dict[str, int] = {}
        added = 0
        for rs in all_rss:
            if to_add:
                proportion = get_proportion(rs, d, to_add, added)
                sizes[meta(rs)["name"]] = replicas_of(rs) + proportion
                added += proportion
            else:
                sizes[meta(rs)["name"]] = replicas_of(rs)
        for i, rs in enumerate(all_rss):
            name = meta(rs)["name"]
            if i == 0 and to_add:
                sizes[name] = max(0, sizes[name] + to_add - added)
            self._scale_rs(rs, sizes[name], d, operation)

    def _scale_rs_and_record(self, rs: dict, new_scale: int, d: dict) -> tuple[bool, dict]:
        if replicas_of(rs) == new_scale:
            return False, rs
        return self._scale_rs(rs, new_scale, d, "up" if replicas_of(rs) < new_scale else "down")

    def _scale_rs(self, rs: dict, new_scale: int, d: dict, operation: str) -> tuple[bool, dict]:
        """``scaleReplicaSet``: set replicas and the desired/max annotations, record the event."""
        rs = self._fresh(rs, REPLICA_SET)
        size_changed = replicas_of(rs) != new_scale
        updated = json_copy(rs)
        annotations_changed = set_replicas_annotations(updated, replicas_of(d), replicas_of(d) + max_surge(d))
        if not size_changed and not annotations_changed:
            return False, rs
        old_scale = replicas_of(rs)
        updated["spec"]["replicas"] = new_scale
        result = self.store.update(REPLICA_SET, updated)
        if size_changed:
            self.event(d, "Normal", "ScalingReplicaSet",
                       f"Scaled {operation} replica set {meta(rs)['name']} to {new_scale} from {old_scale}")
        return size_changed, result

    # --- rollouts ----------------------------------------------------------------------------------------
    def _rollout_rolling(self, d: dict, rs_list: list[dict]) -> None:
        d, new, olds = self._all_replica_sets(d, rs_list, create=True)
        assert new is not None
        if self._reconcile_new(d, [*olds, new], new):
            self._sync_rollout_status(self._fresh(d), [self._fresh(rs, REPLICA_SET) for rs in olds], self._refresh(new))
            return
        new = self._refresh(new)
        if self._reconcile_olds(d, [self._fresh(rs, REPLICA_SET) for rs in olds], new):
            self._sync_rollout_status(self._fresh(d), [self._fresh(rs, REPLICA_SET) for rs in olds], self._refresh(new))
            return
        olds = [self._fresh(rs, REPLICA_SET) for rs in olds]
        d = self._fresh(d)
        if deployment_complete(d, self._calculate_status([*olds, new], new, d)):
            self._cleanup(d, olds)
        self._sync_rollout_status(self._fresh(d), [self._fresh(rs, REPLICA_SET) for rs in olds if self.store.try_get(
            REPLICA_SET, *key_of(rs))], self._refresh(new))

    def _reconcile_new(self, d: dict, all_rss: list[dict], new: dict) -> bool:
        if replicas_of(new) == replicas_of(d):
            return False
        if replicas_of(new) > replicas_of(d):
            return self._scale_rs_and_record(new, replicas_of(d), d)[0]
        return self._scale_rs_and_record(new, new_rs_new_replicas(d, all_rss, new), d)[0]

    def _reconcile_olds(self, d: dict, olds: list[dict], new: dict | None) -> bool:
        """``reconcileOldReplicaSets``: drop unhealthy old replicas first, then old ones within maxUnavailable."""
        active_olds = _active(olds)
        if _sum_spec(active_olds) == 0:
            return False
        all_count = _sum_spec([*active_olds, new])
        min_available = replicas_of(d) - max_unavailable(d)
        new_unavailable = (replicas_of(new) - int(status(new).get("availableReplicas") or 0)) if new is not None else 0
        max_scaled_down = all_count - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        active_olds, cleaned = self._cleanup_unhealthy(active_olds, d, max_scaled_down)
        scaled = self._scale_down_olds(d, [*active_olds, new], active_olds)
        return cleaned + scaled > 0

    def _cleanup_unhealthy(self, olds: list[dict], d: dict, max_cleanup: int) -> tuple[list[dict], int]:
        olds = sorted(olds, key=_creation_key)
        total = 0
        for i, rs in enumerate(olds):
            if total >= max_cleanup:
                break
            available = int(status(rs).get("availableReplicas") or 0)
            if replicas_of(rs) == 0 or replicas_of(rs) == available:
                continue
            count = min(max_cleanup - total, replicas_of(rs) - available)
            _, olds[i] = self._scale_rs_and_record(rs, replicas_of(rs) - count, d)
            total += count
        return olds, total

    def _scale_down_olds(self, d: dict, all_rss: list[dict | None], olds: list[dict]) -> int:
        min_available = replicas_of(d) - max_unavailable(d)
        available = _sum_status(all_rss, "availableReplicas")
        if available <= min_available:
            return 0
        total, budget = 0, available - min_available
        for rs in sorted(olds, key=_creation_key):
            if total >= budget:
                break
            if replicas_of(rs) == 0:
                continue
            count = min(replicas_of(rs), budget - total)
            self._scale_rs_and_record(rs, replicas_of(rs) - count, d)
            total += count
        return total

    def _rollout_recreate(self, d: dict, rs_list: list[dict]) -> None:
        d, new, olds = self._all_replica_sets(d, rs_list, create=False)
        scaled = False
        for rs in _active(olds):
            scaled |= self._scale_rs_and_record(rs, 0, d)[0]
        olds = [self._fresh(rs, REPLICA_SET) for rs in olds]
        if scaled or self._old_pods_running(new, olds):
            self._sync_rollout_status(self._fresh(d), olds, self._refresh(new))
            return
        if new is None:
            d, new, olds = self._all_replica_sets(self._fresh(d), [*olds], create=True)
        assert new is not None
        self._scale_rs_and_record(new, replicas_of(d), d)
        new, d = self._refresh(new), self._fresh(d)
        if deployment_complete(d, self._calculate_status([*olds, new], new, d)):
            self._cleanup(d, olds)
        self._sync_rollout_status(self._fresh(d), [rs for rs in olds if self.store.try_get(REPLICA_SET, *key_of(rs))], new)

    def _old_pods_running(self, new: dict | None, olds: list[dict]) -> bool:
        if _sum_status(olds, "replicas") > 0:
            return True
        for rs in olds:
            if new is not None and meta(rs)["uid"] == meta(new)["uid"]:
                continue
            if any(not is_terminal(pod) for pod in self.manager.owned(meta(rs)["uid"], POD)):
                return True
        return False

    def _cleanup(self, d: dict, olds: list[dict]) -> None:
        """``cleanupDeployment``: keep ``revisionHistoryLimit`` old ReplicaSets, deleting the oldest idle ones."""
        limit = spec(d).get("revisionHistoryLimit", 10)
        if limit is None:
            return
        alive = [rs for rs in olds if not meta(rs).get("deletionTimestamp")]
        diff = len(alive) - int(limit)
        if diff <= 0:
            return
        for rs in sorted(alive, key=lambda r: (revision_of(r), _creation_key(r)))[:diff]:
            if (int(status(rs).get("replicas") or 0) != 0 or replicas_of(rs) != 0
                    or meta(rs).get("generation", 1) > int(status(rs).get("observedGeneration") or 0)):
                continue
            try:
                self.store.delete(REPLICA_SET, *key_of(rs))
            except Exception as e:
                log.debug("could not clean up %s: %s", meta(rs)["name"], e)

    # --- status ------------------------------------------------------------------------------------------
    def _calculate_status(self, all_rss: list[dict | None], new: dict | None, d: dict) -> dict:
        available = _sum_status(all_rss, "availableReplicas")
        total = _sum_spec(all_rss)
        st: dict = {
            "observedGeneration": meta(d).get("generation", 1),
            "replicas": _sum_status(all_rss, "replicas"),
            "updatedReplicas": _sum_status([new], "replicas"),
            "readyReplicas": _sum_status(all_rss, "readyReplicas"),
            "availableReplicas": available,
            "unavailableReplicas": max(0, total - available),
        }
        _omit_zero(st, list(st))
        st["terminatingReplicas"] = _sum_status(all_rss, "terminatingReplicas")
        if status(d).get("collisionCount") is not None:
            st["collisionCount"] = status(d)["collisionCount"]
        if status(d).get("conditions"):
            st["conditions"] = json_copy(status(d)["conditions"])
        now = self.store.clock.wall()
        if available >= replicas_of(d) - max_unavailable(d):
            set_condition(st, new_condition(AVAILABLE, "True", MIN_AVAILABLE, "Deployment has minimum availability.", now))
        else:
            set_condition(st, new_condition(AVAILABLE, "False", MIN_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
        return st

    def _write_status(self, d: dict, st: dict) -> dict:
        return update_status(self.store, DEPLOYMENT, d, st)

    def _sync_status_only(self, d: dict, rs_list: list[dict]) -> None:
        d, new, olds = self._all_replica_sets(d, rs_list, create=False)
        self._write_status(d, self._calculate_status([*olds, new], new, d))

    def _sync_rollout_status(self, d: dict, olds: list[dict], new: dict | None) -> None:
        """``syncRolloutStatus``: status plus the Progressing condition (complete, progressing, timed out)."""
        st = self._calculate_status([*olds, new], new, d)
        now = self.store.clock.wall()
        if not has_progress_deadline(d):
            remove_condition(st, PROGRESSING)
        current = get_condition(status(d), PROGRESSING)
        complete = st.get("replicas", 0) == st.get("updatedReplicas", 0) and current is not None and current.get("reason") == NEW_RS_AVAILABLE
        if has_progress_deadline(d) and not complete:
            self._update_progressing(d, st, new, current, now)
        failures = _replica_failures([*olds, new], new)
        if failures:
            set_condition(st, failures[0])
        else:
            remove_condition(st, REPLICA_FAILURE)
        if st == status(d):
            self._requeue_stuck(d, st, now)
            return
        self._write_status(d, st)

    def _update_progressing(self, d: dict, st: dict, new: dict | None, current: dict | None, now: float) -> None:
        subject = f'ReplicaSet "{meta(new)["name"]}"' if new is not None else f'Deployment "{meta(d)["name"]}"'
        if deployment_complete(d, st):
            set_condition(st, new_condition(PROGRESSING, "True", NEW_RS_AVAILABLE, f"{subject} has successfully progressed.", now))
        elif deployment_progressing(d, st):
            condition = new_condition(PROGRESSING, "True", REPLICA_SET_UPDATED, f"{subject} is progressing.", now)
            if current is not None:
                if current.get("status") == "True":
                    condition["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(st, PROGRESSING)
            set_condition(st, condition)
        elif deployment_timed_out(d, st, now):
            set_condition(st, new_condition(PROGRESSING, "False", TIMED_OUT, f"{subject} has timed out progressing.", now))

    def _requeue_stuck(self, d: dict, st: dict, now: float) -> None:
        """``requeueStuckDeployment``: come back when the progress deadline would pass."""
        current = get_condition(status(d), PROGRESSING)
        if not has_progress_deadline(d) or current is None:
            return
        if deployment_complete(d, st) or current.get("reason") == TIMED_OUT:
            return
        after = parse_time(current.get("lastUpdateTime")) + int(spec(d).get("progressDeadlineSeconds", 600)) - now
        self.enqueue_after(key_of(d), max(0.0, after) + 1.0, counted=False)

    def _check_paused_conditions(self, d: dict) -> dict:
        if not has_progress_deadline(d):
            return d
        cond = get_condition(status(d), PROGRESSING)
        if cond is not None and cond.get("reason") == TIMED_OUT:
            return d
        paused_exists = cond is not None and cond.get("reason") == PAUSED
        now = self.store.clock.wall()
        st = json_copy(status(d))
        if spec(d).get("paused") and not paused_exists:
            set_condition(st, new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now))
        elif not spec(d).get("paused") and paused_exists:
            set_condition(st, new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed", now))
        else:
            return d
        return update_status(self.store, DEPLOYMENT, d, st)


# --- pure helpers (deploymentutil) ----------------------------------------------------------------
def set_replicas_annotations(rs: dict, desired: int, maximum: int) -> bool:
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(maximum))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def set_new_rs_annotations(d: dict, rs: dict, new_revision: str, *, exists: bool) -> bool:
    """``SetNewReplicaSetAnnotations``: copy the Deployment's annotations, raise the revision
    (remembering the previous ones in revision-history), and on creation the replica annotations."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for k, v in (meta(d).get("annotations") or {}).items():
        if k in _SKIPPED_ANNOTATIONS or annotations.get(k) == v:
            continue
        annotations[k] = v
        changed = True
    old_revision = annotations.get(REVISION)
    try:
        old_int = int(old_revision) if old_revision else 0
    except ValueError:
        return changed
    if old_int < int(new_revision):
        annotations[REVISION] = new_revision
        changed = True
        if old_revision:
            history = [r for r in (annotations.get(REVISION_HISTORY) or "").split(",") if r]
            history.append(old_revision)
            while history and len(",".join(history)) > MAX_REVISION_HISTORY_CHARS:
                history.pop(0)
            annotations[REVISION_HISTORY] = ",".join(history)
    if not exists and set_replicas_annotations(rs, replicas_of(d), replicas_of(d) + max_surge(d)):
        changed = True
    return changed


def new_rs_new_replicas(d: dict, all_rss: list[dict], new: dict) -> int:
    """``NewRSNewReplicas``: how far the new ReplicaSet may grow now."""
    if not is_rolling_update(d):
        return replicas_of(d)
    current = _sum_spec(all_rss)
    max_total = replicas_of(d) + max_surge(d)
    if current >= max_total:
        return replicas_of(new)
    scale_up = min(max_total - current, replicas_of(d) - replicas_of(new))
    return replicas_of(new) + scale_up


def find_active_or_latest(new: dict | None, olds: list[dict]) -> dict | None:
    """The only active ReplicaSet, or the newest when none is active; None when several are."""
    if new is None and not olds:
        return None
    ordered = sorted(olds, key=_creation_key, reverse=True)
    active = _active([*ordered, new])
    if not active:
        return new if new is not None else ordered[0]
    return active[0] if len(active) == 1 else None


def is_saturated(d: dict, rs: dict | None) -> bool:
    if rs is None:
        return False
    desired = _annotation_int(rs, DESIRED_REPLICAS)
    return desired is not None and replicas_of(rs) == replicas_of(d) and desired == replicas_of(d)


def get_proportion(rs: dict, d: dict, to_add: int, added: int) -> int:
    if replicas_of(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = _replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _replica_set_fraction(rs: dict, d: dict) -> int:
    if replicas_of(d) == 0:
        return -replicas_of(rs)
    deployment_replicas = replicas_of(d) + max_surge(d)
    annotated = _annotation_int(rs, MAX_REPLICAS)
    if not annotated:  # missing, unreadable or 0: the current size stands in
        annotated = int(status(d).get("replicas") or 0)
    if not annotated:
        return 0
    size = replicas_of(rs) * deployment_replicas / annotated
    return int(size + 0.5) - replicas_of(rs)  # integer.RoundToInt32 (sizes are positive)


def deployment_complete(d: dict, st: dict) -> bool:
    want = replicas_of(d)
    return (st.get("updatedReplicas", 0) == want and st.get("replicas", 0) == want
            and st.get("availableReplicas", 0) >= want - max_unavailable(d)
            and st.get("observedGeneration", 0) >= meta(d).get("generation", 1))


def deployment_progressing(d: dict, st: dict) -> bool:
    old = status(d)
    old_old = int(old.get("replicas") or 0) - int(old.get("updatedReplicas") or 0)
    new_old = st.get("replicas", 0) - st.get("updatedReplicas", 0)
    return (st.get("updatedReplicas", 0) > int(old.get("updatedReplicas") or 0) or new_old < old_old
            or st.get("readyReplicas", 0) > int(old.get("readyReplicas") or 0)
            or st.get("availableReplicas", 0) > int(old.get("availableReplicas") or 0))


def deployment_timed_out(d: dict, st: dict, now: float) -> bool:
    if not has_progress_deadline(d):
        return False
    cond = get_condition(st, PROGRESSING)
    if cond is None:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    return parse_time(cond.get("lastUpdateTime")) + int(spec(d).get("progressDeadlineSeconds", 600)) < now


def _replica_failures(all_rss: list[dict | None], new: dict | None) -> list[dict]:
    def converted(rs: dict | None) -> list[dict]:
        out = []
        for c in status(rs).get("conditions") or [] if rs is not None else []:
            if c.get("type") == REPLICA_FAILURE:
                out.append({"type": REPLICA_FAILURE, "status": c.get("status"), "lastUpdateTime": c.get("lastTransitionTime"),
                            "lastTransitionTime": c.get("lastTransitionTime"), "reason": c.get("reason"), "message": c.get("message")})
        return out

    failures = converted(new)
    if failures:
        return failures
    for rs in all_rss:
        failures += converted(rs)
    return failures
