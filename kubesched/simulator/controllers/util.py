"""Helpers shared by the embedded controllers (upstream ``pkg/controller/controller_utils.go``,
``pkg/api/v1/pod`` and ``pkg/util/hash``): pod state predicates, owner references, the
replica-set deletion order, template hashing and core/v1 events.

Everything works on the raw dicts the object store holds; nothing here writes except
``record_event`` and ``update_status``.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.api.apierrors import AlreadyExists
from kubesched.api.events import object_reference
from kubesched.api.kinds import EVENT, Kind, kind_for, known_kind
from kubesched.api.selectors import InvalidSelector, LabelSelector, parse_label_selector, selector_from_set
from kubesched.api.timeutil import parse_time
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import rfc3339

log = logging.getLogger(__name__)

SUCCEEDED, FAILED, PENDING, RUNNING, UNKNOWN = "Succeeded", "Failed", "Pending", "Running", "Unknown"

#: ``controller.PodDeletionCost`` annotation (PodDeletionCost is GA).
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
#: ``rand.String`` / ``rand.SafeEncodeString`` alphabet: no vowels, no look-alikes.
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"

REPLICA_SET = known_kind("ReplicaSet")
REPLICATION_CONTROLLER = known_kind("ReplicationController")
DEPLOYMENT = known_kind("Deployment")
STATEFUL_SET = known_kind("StatefulSet")
PVC = known_kind("PersistentVolumeClaim")
assert REPLICA_SET and REPLICATION_CONTROLLER and DEPLOYMENT and STATEFUL_SET and PVC

_PHASE_ORDINAL = {PENDING: 0, UNKNOWN: 1, RUNNING: 2}


# --- names and keys ----------------------------------------------------------------------------
def key_of(obj: Mapping) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def meta(obj: Mapping) -> dict:
    return obj.get("metadata") or {}


def spec(obj: Mapping) -> dict:
    return obj.get("spec") or {}


def status(obj: Mapping) -> dict:
    return obj.get("status") or {}


# --- pod state ---------------------------------------------------------------------------------
def phase(pod: Mapping) -> str:
    return status(pod).get("phase") or ""


def is_terminal(pod: Mapping) -> bool:
    return phase(pod) in (SUCCEEDED, FAILED)


def is_pod_active(pod: Mapping) -> bool:
    """``controller.IsPodActive``: not terminal and not being deleted."""
    return not is_terminal(pod) and not meta(pod).get("deletionTimestamp")


def is_pod_terminating(pod: Mapping) -> bool:
    """``controller.IsPodTerminating``: being deleted but not terminal yet."""
    return not is_terminal(pod) and bool(meta(pod).get("deletionTimestamp"))


def ready_condition(pod: Mapping) -> dict | None:
    for cond in status(pod).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def is_pod_ready(pod: Mapping) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_pod_available(pod: Mapping, min_ready_seconds: int, now: float) -> bool:
    """``podutil.IsPodAvailable``: ready for at least ``minReadySeconds``."""
    if not is_pod_ready(pod):
        return False
    if not min_ready_seconds:
        return True
    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
    return since > 0 and since + min_ready_seconds < now


def ready_since(pod: Mapping) -> float:
    """When a ready pod became ready (0 for not ready or unknown)."""
    if not is_pod_ready(pod):
        return 0.0
    return parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))


def max_container_restarts(pod: Mapping) -> int:
    return max((int(cs.get("restartCount") or 0) for cs in status(pod).get("containerStatuses") or []), default=0)


def deletion_cost(pod: Mapping) -> int:
    """``helper.GetDeletionCostFromPodAnnotations``: an int32, 0 when absent or malformed."""
    raw = (meta(pod).get("annotations") or {}).get(POD_DELETION_COST)
    try:
        value = int(raw) if raw is not None else 0
    except ValueError:
        return 0
    return value if -(2**31) <= value < 2**31 else 0


# --- owner references --------------------------------------------------------------------------
def controller_ref(obj: Mapping) -> dict | None:
    """``metav1.GetControllerOf``."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def new_controller_ref(owner: Mapping, kind: Kind) -> dict:
    """``metav1.NewControllerRef``: the dependent is controlled by and blocks deletion of ``owner``."""
    return {"apiVersion": kind.api_version, "kind": kind.kind, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def owned_by(obj: Mapping, owner: Mapping) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == owner["metadata"].get("uid")


def owner_kind(ref: Mapping) -> Kind | None:
    return kind_for(ref.get("apiVersion", ""), ref.get("kind", ""))


def add_owner_reference(obj: dict, ref: dict) -> None:
    """Make ``ref`` one of ``obj``'s owner references (replacing one with the same uid)."""
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != ref.get("uid")]
    obj["metadata"]["ownerReferences"] = [*refs, ref]


def drop_owner_references(obj: dict, uids: set[str]) -> None:
    """Remove the owner references to ``uids`` (the field goes when none is left)."""
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") not in uids]
    if refs:
        obj["metadata"]["ownerReferences"] = refs
    else:
        obj["metadata"].pop("ownerReferences", None)


def replicas_of(obj: Mapping) -> int:
    """``spec.replicas``; 1 when unset or null (what the API server defaults it to)."""
    value = spec(obj).get("replicas")
    return 1 if value is None else int(value)


# --- selectors ---------------------------------------------------------------------------------
def workload_selector(obj: Mapping) -> LabelSelector | None:
    """The selector of a workload (a label-set for ReplicationControllers); None when invalid."""
    raw = spec(obj).get("selector")
    try:
        if obj.get("kind") == "ReplicationController":
            return selector_from_set(raw) if raw else None
        return parse_label_selector(raw)
    except (InvalidSelector, AttributeError, TypeError):
        return None


class SelectorCache:
    """Parsed selectors by object uid and generation (a selector lives in the spec, whose changes
    move the generation), so a burst of pod events does not re-parse every owner's or budget's."""

    def __init__(self) -> None:
        self._by_uid: dict[str, tuple[int, LabelSelector | None]] = {}

    def get(self, obj: Mapping) -> LabelSelector | None:
        obj_meta = meta(obj)
        uid, generation = obj_meta.get("uid", ""), obj_meta.get("generation", 1)
        hit = self._by_uid.get(uid)
        if hit is not None and hit[0] == generation:
            return hit[1]
        selector = workload_selector(obj)
        self._by_uid[uid] = (generation, selector)
        return selector

    def forget(self, obj: Mapping) -> None:
        self._by_uid.pop(meta(obj).get("uid", ""), None)


def template_labels(obj: Mapping) -> dict[str, str]:
    return ((spec(obj).get("template") or {}).get("metadata") or {}).get("labels") or {}


def labels_of(obj: Mapping) -> dict[str, str]:
    return meta(obj).get("labels") or {}


# --- the deletion order ------------------------------------------------------------------------
def _after_or_zero(t1: float, t2: float) -> bool:
    """``afterOrZero``: a zero time sorts first, otherwise later sorts first."""
    if not t1 or not t2:
        return not t1
    return t1 > t2


def _log_rank(t: float, now: float) -> int:
    delta_ns = (now - t) * 1e9
    return int(math.log2(delta_ns)) if delta_ns > 0 else -1


def _compare_for_deletion(a: tuple[Mapping, int], b: tuple[Mapping, int], now: float) -> int:
    """``ActivePodsWithRanks.Less`` as a cmp: negative when ``a`` should be deleted first."""
    pa, ra = a
    pb, rb = b
    na, nb = spec(pa).get("nodeName") or "", spec(pb).get("nodeName") or ""
    if na != nb and (not na or not nb):
        return -1 if not na else 1
    oa, ob = _PHASE_ORDINAL.get(phase(pa), 0), _PHASE_ORDINAL.get(phase(pb), 0)
    if oa != ob:
        return -1 if oa < ob else 1
    ready_a, ready_b = is_pod_ready(pa), is_pod_ready(pb)
    if ready_a != ready_b:
        return -1 if not ready_a else 1
    ca, cb = deletion_cost(pa), deletion_cost(pb)
    if ca != cb:
        return -1 if ca < cb else 1
    if ra != rb:
        return -1 if ra > rb else 1
    if ready_a and ready_b:
        result = _compare_times(pa, pb, ready_since(pa), ready_since(pb), now)
        if result:
            return result
    restarts_a, restarts_b = max_container_restarts(pa), max_container_restarts(pb)
    if restarts_a != restarts_b:
        return -1 if restarts_a > restarts_b else 1
    created_a = parse_time(meta(pa).get("creationTimestamp"))
    created_b = parse_time(meta(pb).get("creationTimestamp"))
    return _compare_times(pa, pb, created_a, created_b, now)


def _compare_times(pa: Mapping, pb: Mapping, ta: float, tb: float, now: float) -> int:
    """Rules 6 and 8 with LogarithmicScaleDown: newer first, on a log2 scale, ties by UID."""
    if ta == tb:
        return 0
    if not now or not ta or not tb:
        return -1 if _after_or_zero(ta, tb) else 1
    diff = _log_rank(ta, now) - _log_rank(tb, now)
    if diff == 0:
        ua, ub = meta(pa).get("uid", ""), meta(pb).get("uid", "")
        return -1 if ua < ub else (1 if ua > ub else 0)
    return -1 if diff < 0 else 1


def rank_pods_for_deletion(pods: list[dict], related: Iterable[Mapping], now: float) -> list[dict]:
    """``getPodsRankedByRelatedPodsOnSameNode`` + sort: the pods to delete first come first.

    A pod's rank is the number of active related pods (same owner's owner) on its node, so pods
    doubled up on a node go before lonely ones."""
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            node = spec(pod).get("nodeName") or ""
            on_node[node] = on_node.get(node, 0) + 1
    ranked = [(pod, on_node.get(spec(pod).get("nodeName") or "", 0)) for pod in pods]

    def deletion_order(a: tuple[dict, int], b: tuple[dict, int]) -> int:
        return _compare_for_deletion(a, b, now)

    ranked.sort(key=functools.cmp_to_key(deletion_order))
    return [pod for pod, _ in ranked]


# --- hashing -----------------------------------------------------------------------------------
def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def safe_encode_string(text: str) -> str:
    """``rand.SafeEncodeString``: each character mapped into the no-bad-words alphabet."""
    return "".join(ALPHANUMS[ord(c) % len(ALPHANUMS)] for c in text)


def compute_hash(template: Any, collision_count: int | None = None) -> str:
    """``controller.ComputeHash``: FNV-32a of the template (plus the collision count as 8
    little-endian bytes), printed in decimal and safe-encoded.

    Upstream hashes a ``spew`` dump of the typed Go struct; kubesched hashes the canonical JSON
    of the (defaulted) template, so names have upstream's shape but not a real cluster's value."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\0\0\0\0"
    return safe_encode_string(str(fnv32a(data)))


# --- int-or-percent ----------------------------------------------------------------------------
def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an integer as it is, a percentage of ``total``;
    a string must be a percentage (``"5"`` is an error, as upstream says). None counts as 0."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = text[:-1]
    if not _ATOI.fullmatch(digits):
        raise ValueError(f'invalid value for IntOrString: invalid value "{text}": strconv.Atoi: parsing "{digits}": invalid syntax')
    exact = int(digits) * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


#: What ``strconv.Atoi`` accepts.
_ATOI = re.compile(r"[+-]?[0-9]+")


# --- writes ------------------------------------------------------------------------------------
def update_status(store: ObjectStore, kind: Kind, obj: dict, new_status: dict) -> dict:
    """Write ``new_status`` through the status subresource onto the stored object (whatever its
    resourceVersion: controllers compute status from fresh reads), when it differs."""
    current = store.try_get(kind, meta(obj).get("namespace"), meta(obj)["name"])
    if current is None or current["metadata"].get("uid") != meta(obj).get("uid"):
        return obj
    if current.get("status") == new_status:
        return current
    updated = dict(current)
    updated["metadata"] = dict(current["metadata"])
    updated["status"] = new_status
    return store.update(kind, updated, status_only=True)


class EventWriter:
    """Writes ``core/v1`` Events the way client-go's legacy recorder does: an event identical to
    an earlier one (same object, type, reason and message) bumps that Event's ``count`` and
    ``lastTimestamp`` instead of adding another. Disabled writers drop everything, so callers need
    no conditionals."""

    def __init__(self, store: ObjectStore, component: str, enabled: bool = True, host: str = "") -> None:
        self.store = store
        self.component = component
        self.enabled = enabled
        self.host = host
        self._seq = 0
        self._seen: dict[tuple, tuple[str, str]] = {}

    def __call__(self, obj: dict, event_type: str, reason: str, message: str, host: str | None = None) -> None:
        if not self.enabled:
            return
        now = self.store.clock.wall()
        obj_meta = meta(obj)
        namespace = obj_meta.get("namespace") or "default"
        source = {"component": self.component}
        if host or self.host:
            source["host"] = host or self.host
        involved = object_reference(obj)
        key = (involved["kind"], namespace, involved["name"], involved.get("uid", ""), source.get("host", ""), event_type, reason,
               message)
        if self._repeat(key, now):
            return
        event = {
            "apiVersion": "v1", "kind": "Event", "metadata": {"namespace": namespace},
            "involvedObject": involved, "reason": reason, "message": message, "type": event_type,
            "source": source, "firstTimestamp": rfc3339(now), "lastTimestamp": rfc3339(now), "count": 1,
            "eventTime": None, "reportingComponent": self.component, "reportingInstance": source.get("host", ""),
        }
        created = self._create(event, obj_meta.get("name", ""), now)
        if created is None:
            return
        if len(self._seen) >= _SEEN_EVENTS:
            self._seen.clear()
        self._seen[key] = (namespace, created["metadata"]["name"])

    def _create(self, event: dict, name: str, now: float) -> dict | None:
        """Name the event ``<object>.<nanoseconds in hex>`` as client-go does, moving past names
        other writers took at the same (virtual) instant; None when it cannot be written."""
        for _ in range(_NAME_ATTEMPTS):
            self._seq += 1
            event["metadata"]["name"] = f"{name}.{int(now * 1e9) + self._seq:x}"
            try:
                return self.store.create(EVENT, event)
            except AlreadyExists:
                continue
            except Exception as e:  # events are best effort, as in client-go
                log.debug("could not record event %s on %s: %s", event["reason"], name, e)
                return None
        return None

    def _repeat(self, key: tuple, now: float) -> bool:
        """Count a repeat on the stored Event; False when there is none (never seen, or deleted)."""
        where = self._seen.get(key)
        if where is None:
            return False

        def bump(event: dict) -> None:
            event["count"] = (event.get("count") or 1) + 1
            event["lastTimestamp"] = rfc3339(now)

        try:
            self.store.mutate(EVENT, where[0], where[1], bump)
        except Exception:
            del self._seen[key]
            return False
        return True


#: Distinct events an EventWriter remembers for counting repeats (client-go's LRU holds 4096).
_SEEN_EVENTS = 4096
#: Names an EventWriter tries for one event before giving up.
_NAME_ATTEMPTS = 16
