"""An in-memory Kubernetes object store with resourceVersions and watch streams.

It behaves like kube-apiserver over etcd for what the scheduler can observe: every write gets the
next resourceVersion, watchers see ADDED/MODIFIED/DELETED in order and can resume from a version
(or get 410 Gone when it is too old), updates are optimistic (409 on a stale resourceVersion), and
pods bound to a node are deleted gracefully. The embedded cluster and the HTTP API server both
sit on it.

Objects handed to ``create``/``update`` become the store's; objects returned are shared and must
not be mutated (``mutate`` gives a private copy to change). The parts of pods, nodes and events (a
pod's containers, tolerations, labels, conditions, ...) are kept once for all objects with equal
ones, read-only (``sharing``).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kubesched.api import crd as crdapi
from kubesched.api.apierrors import AlreadyExists, BadRequest, Conflict, Forbidden, Gone, Invalid, NotFound
from kubesched.api.crd_rules import object_rule_errors
from kubesched.api.defaults import WORKLOADS, default_namespace, set_defaults, validate_spec
from kubesched.api.errors import FieldError
from kubesched.api.kinds import CRD, EVENT, NAMESPACE, NODE, POD, PRIORITY_CLASS, CustomKind, Kind, kind_for, served
from kubesched.api.meta import json_copy, set_condition
from kubesched.api.pod_update import validate_pod_update
from kubesched.api.schema_validation import DecodeError, SpecDecodes, decode, decode_field
from kubesched.api.timeutil import parse_time
from kubesched.api.validation import validate
from kubesched.api.watch import ADDED, DELETED, MODIFIED, WatchEvent
from kubesched.api.workload_api import drop_disabled_template_workload_ref, drop_disabled_workload_ref, validate_workload_update
from kubesched.apiserver import admission
from kubesched.apiserver.crds import CustomResources
from kubesched.apiserver.sharing import PartSharer
from kubesched.utils.clock import Clock, RealClock, rfc3339

#: The last second an RFC 3339 timestamp can name (9999-12-31T23:59:59Z), in epoch seconds.
LATEST_TIMESTAMP = 253402300799.0

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"

Predicate = Callable[[dict], bool]

#: The kinds whose equal parts the store keeps once (``sharing``): the many objects of a cluster,
#: each with its fields that name one object (``PartSharer.share_parts``): an Event's references
#: to what it is about, a running pod's IPs.
_SHARED_PARTS: dict[Kind, Mapping[str, frozenset[str] | None]] = {
    POD: {"status": frozenset(("podIP", "podIPs"))}, NODE: {}, EVENT: {"involvedObject": None, "related": None}}


#: The version (4) and variant (RFC 4122) bits of a random UUID.
_UUID_KEEP = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID_V4 = (0x4000 << 64) | (0x8000 << 48)


class Watch:
    """One watcher's stream: ``await next_batch()`` for events; ``stop()`` ends it."""

    def __init__(self, store: ObjectStore, kind: Kind, namespace: str | None, predicate: Predicate | None) -> None:
        self.store = store
        self.kind = kind
        self.namespace = namespace
        self.predicate = predicate
        self.pending: deque[WatchEvent] = deque()
        self.stopped = False
        self._wakeup: asyncio.Event | None = None

    def _visible(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        if self.namespace and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.predicate is None or self.predicate(obj)

    def offer(self, event: WatchEvent) -> None:
        """Deliver ``event`` as this watcher sees it: selector changes become ADDED or DELETED."""
        new_visible = event.type != DELETED and self._visible(event.object)
        old_visible = self._visible(event.old) if event.type == MODIFIED else (event.type == DELETED and self._visible(event.object))
        if event.type == ADDED:
            kind = ADDED if new_visible else None
        elif event.type == DELETED:
            kind = DELETED if old_visible else None
        elif new_visible and old_visible:
            kind = MODIFIED
        elif new_visible:
            kind = ADDED
        elif old_visible:
            kind = DELETED
        else:
            kind = None
        if kind is None:
            return
        self.pending.append(event if kind == event.type else WatchEvent(kind, event.object, event.old))
        if self._wakeup is not None:
            self._wakeup.set()

    def push(self, event: WatchEvent) -> None:
        self.pending.append(event)
        if self._wakeup is not None:
            self._wakeup.set()

    def drain(self) -> list[WatchEvent]:
        events = list(self.pending)
        self.pending.clear()
        return events

    async def next_batch(self) -> list[WatchEvent]:
        """Every pending event, waiting for at least one; [] once stopped."""
        while not self.pending and not self.stopped:
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            self._wakeup.clear()
            await self._wakeup.wait()
        return self.drain()

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.store._watches.get(self.kind, set()).discard(self)
            if self._wakeup is not None:
                self._wakeup.set()


class ObjectStore:
    """See the module docstring."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        seed: int | None = None,
        history_limit: int = 200_000,
        auto_create_namespaces: bool = False,
        graceful_pod_deletion: bool = True,
        feature_gates: Mapping[str, bool] | None = None,
        keep_uids: bool = False,
    ) -> None:
        """``keep_uids``: an object created with a uid keeps it (a simulation reading back exported
        state, whose claimRefs, reservedFor and owner references name those uids); the API server
        always assigns a fresh one, as kube-apiserver does."""
        self.clock = clock or RealClock()
        self.keep_uids = keep_uids
        self.rv = 0
        self._objects: dict[Kind, dict[tuple[str, str], dict]] = {}
        #: The watch history, oldest first: each event and its kind in two parallel deques (a pair per
        #: event would cost more than the event); an event's resourceVersion is its object's.
        self._history: deque[WatchEvent] = deque()
        self._history_kinds: deque[Kind] = deque()
        self._history_limit = history_limit
        self._watches: dict[Kind, set[Watch]] = {}
        self._parts = PartSharer()
        #: The specs decoded before (the replicas of one template are not type-checked one by one;
        #: the API server's decoding of request bodies uses them too).
        self.specs = SpecDecodes()
        self._rng = random.Random(seed)
        self._seeded = seed is not None
        self.auto_create_namespaces = auto_create_namespaces
        self.graceful_pod_deletion = graceful_pod_deletion
        self.feature_gates = feature_gates
        self.pending_timers = 0
        self.write_count = 0
        #: Counts of the writes that make progress in a simulation: creations (events aside),
        #: bindings, deletions.
        self.progress = [0, 0, 0]
        #: Called as hook(rv, kind, event) after each committed write (persistence, metrics).
        self.write_hooks: list[Callable[[int, Kind, WatchEvent], None]] = []
        #: Whether a terminating pod's kubelet can confirm that its containers stopped (the fake
        #: kubelet sets it); when it cannot (its node is down), the pod stays Terminating past its
        #: grace period, as in a real cluster.
        self.pod_stop_confirmed: Callable[[dict], bool] | None = None
        #: The kinds the established CustomResourceDefinitions serve.
        self.custom = CustomResources()
        for ns in DEFAULT_NAMESPACES:
            self._bootstrap(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for pc in admission.SYSTEM_PRIORITY_CLASSES:
            self._bootstrap(PRIORITY_CLASS, json_copy(pc))

    # --- reading ----------------------------------------------------------------------------
    def kinds(self) -> Iterable[Kind]:
        return self._objects.keys()

    def get(self, kind: Kind, namespace: str | None, name: str) -> dict:
        obj = self._objects.get(kind, {}).get((namespace or "", name))
        if obj is None:
            raise NotFound.of(kind.resource, name, kind.group)
        return obj

    def try_get(self, kind: Kind, namespace: str | None, name: str) -> dict | None:
        return self._objects.get(kind, {}).get((namespace or "", name))

    def list(self, kind: Kind, namespace: str | None = None, predicate: Predicate | None = None) -> tuple[list[dict], int]:
        items = [
            obj for (ns, _), obj in self._objects.get(kind, {}).items()
            if (not namespace or ns == namespace) and (predicate is None or predicate(obj))
        ]
        return items, self.rv

    def iter_all(self, kind: Kind) -> Iterator[dict]:
        return iter(self._objects.get(kind, {}).values())

    def count(self, kind: Kind) -> int:
        return len(self._objects.get(kind, {}))

    def watch_events_pending(self) -> bool:
        """Whether some watcher has events it has not consumed yet."""
        return any(w.pending for watches in self._watches.values() for w in watches)

    # --- watching -----------------------------------------------------------------------------
    def watch(self, kind: Kind, since: int | None = None, namespace: str | None = None,
              predicate: Predicate | None = None) -> Watch:
        """Changes after resourceVersion ``since``; with None, every current object as ADDED first."""
        w = Watch(self, kind, namespace, predicate)
        if since is None:
            for obj in self._objects.get(kind, {}).values():
                if w._visible(obj):
                    w.pending.append(WatchEvent(ADDED, obj))
        else:
            oldest = _version_of(self._history[0]) if self._history else self.rv + 1
            if since < oldest - 1 and since < self.rv:
                raise Gone(f"too old resource version: {since} ({oldest - 1})")
            newer = []  # the history is in resourceVersion order: only its tail is read
            for k, event in zip(reversed(self._history_kinds), reversed(self._history)):
                if _version_of(event) <= since:
                    break
                if k == kind:
                    newer.append(event)
            for event in reversed(newer):
                w.offer(event)
        self._watches.setdefault(kind, set()).add(w)
        return w

    # --- writing ------------------------------------------------------------------------------
    def create(self, kind: Kind, obj: dict, namespace: str | None = None, *, dry_run: bool = False,
               decoded: bool = False) -> dict:
        """Store a new object; with ``dry_run`` everything but the write happens (apiserver's ``dryRun=All``).
        ``decoded``: ``obj`` was type-checked against its kind's schema already (a loaded manifest)."""
        if not served(kind, self.feature_gates):
            raise NotFound(f"the server could not find the requested resource ({kind.api_version} {kind.kind} is served "
                           f"only with the {kind.feature_gate} feature gate on)", kind=kind.resource, group=kind.group)
        if not decoded or isinstance(kind, CustomKind):
            _decode(kind, obj, specs=self.specs)
        kind = self._custom_decode(kind, obj)
        if isinstance(kind, CustomKind) and "status" in kind.subresources:
            obj.pop("status", None)  # PrepareForCreate: the status is the status subresource's to write
        meta = obj.setdefault("metadata", {})
        if kind.namespaced:
            ns = meta.get("namespace") or namespace or "default"
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise Invalid("the namespace of the provided object does not match the namespace sent on the request",
                              kind=kind.kind, name=meta.get("name", ""))
            meta["namespace"] = ns
            self._require_namespace(ns, kind, meta.get("name") or "")
        else:
            meta.pop("namespace", None)
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        set_defaults(kind, obj, self.feature_gates)
        self._admit_create(kind, obj)
        if kind == CRD:
            self._admit_crd(obj, None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(kind, meta.get("namespace", ""), meta["generateName"])
            if kind == NAMESPACE:
                default_namespace(obj)  # the strategy's Canonicalize: the name label, now there is a name
        self._validate(kind, obj)
        key = (meta.get("namespace", ""), meta["name"])
        bucket = self._objects.setdefault(kind, {})
        if key in bucket:
            raise AlreadyExists.of(kind.resource, meta["name"], kind.group)
        uid = self._uid()  # drawn even when kept, so generated uids and names do not depend on it
        meta["uid"] = meta["uid"] if self.keep_uids and isinstance(meta.get("uid"), str) and meta["uid"] else uid
        meta["creationTimestamp"] = rfc3339(self.clock.wall())
        meta.setdefault("generation", 1)
        meta.pop("resourceVersion", None)
        meta.pop("deletionTimestamp", None)
        if dry_run:
            return obj
        if kind != EVENT:
            self.progress[0] += 1
        return self._commit(kind, ADDED, obj, None)

    def update(self, kind: Kind, obj: dict, *, status_only: bool = False, dry_run: bool = False,
               stored_but_status: bool = False, decoded: bool = False) -> dict:
        """Replace an object; a set ``metadata.resourceVersion`` must match (optimistic concurrency).
        ``stored_but_status``: a status write of a stored object whose status alone was changed
        (``mutate``), so the status alone needs its types checked; ``decoded``: none does (a
        built-in kind's object whose new values were built of the API's types in-process)."""
        if not decoded or isinstance(kind, CustomKind):
            _decode(kind, obj, "status" if stored_but_status and status_only else None)
        kind = self._custom_decode(kind, obj)
        meta = obj.get("metadata") or {}
        current = self.get(kind, meta.get("namespace"), meta.get("name", ""))
        rv = meta.get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise Conflict.of(kind.resource, meta["name"], "the object has been modified; please apply your changes to the latest version and try again", kind.group)
        if meta.get("uid") and meta["uid"] != current["metadata"]["uid"]:
            raise Conflict.of(kind.resource, meta["name"], f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {current['metadata']['uid']}", kind.group)
        new = self._carry_over(kind, current, obj, status_only)
        if not status_only:
            set_defaults(kind, new, self.feature_gates)
            self._admit_update(kind, new, current)
            if kind == CRD:
                self._admit_crd(new, current)
        elif kind == NODE:
            set_defaults(kind, new, self.feature_gates)  # SetDefaults_NodeStatus: what the kubelet reports
        self._validate(kind, new, current, status_only=status_only)
        if new.get("spec") != current.get("spec") and not status_only:
            new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if dry_run:
            return new
        result = self._commit(kind, MODIFIED, new, current)
        self._finish_deletion_if_released(kind, result)
        return result

    def mutate(self, kind: Kind, namespace: str | None, name: str, change: Callable[[dict], Any], *,
               expect_rv: str | None = None, expect_uid: str | None = None, status_only: bool = False) -> dict:
        """Apply ``change`` to a private copy of the current object and store it (a guaranteed update).

        Written as a client must write it: the status through the status subresource, the rest
        through the main resource (two writes, main first, when both changed). ``status_only``:
        ``change`` writes the status alone, of values of the API's types (an embedded component's
        report, such as the kubelet's: built in-process, as ``bind`` builds its condition), so only
        the status is copied for it (the rest is the stored, read-only object, which a change
        cannot write to by mistake) and the write is not type-checked again."""
        current = self.get(kind, namespace, name)
        if expect_uid and current["metadata"].get("uid") != expect_uid:
            raise Conflict.of(kind.resource, name, f"Precondition failed: UID in precondition: {expect_uid}, UID in object meta: {current['metadata'].get('uid')}", kind.group)
        if expect_rv and current["metadata"]["resourceVersion"] != expect_rv:
            raise Conflict.of(kind.resource, name, "the object has been modified; please apply your changes to the latest version and try again", kind.group)
        new = _status_copy(current) if status_only else json_copy(current)
        change(new)
        if new == current:
            return current
        split = "status" in kind.subresources
        result = current
        if not split or _without_status(new) != _without_status(current):
            result = self.update(kind, _with_version(new, current))
        if split and new.get("status") != current.get("status"):
            latest = self.try_get(kind, namespace, name)
            if latest is None or latest["metadata"].get("uid") != current["metadata"].get("uid"):
                return result  # the main write finished a deletion
            result = self.update(kind, _with_version(new, latest), status_only=True, stored_but_status=True,
                                 decoded=status_only)
        return result

    def delete(self, kind: Kind, namespace: str | None, name: str, *, grace_period: int | None = None,
               uid: str | None = None, resource_version: str | None = None, dry_run: bool = False) -> dict:
        """Delete, gracefully for pods on a node (deletionTimestamp now, removal after the grace period).

        A namespace first turns Terminating (its contents go), then disappears on the next loop turn,
        as the namespace controller would finish it.
        """
        current = self.get(kind, namespace, name)
        meta = current["metadata"]
        if uid and meta.get("uid") != uid:
            raise Conflict.of(kind.resource, name, f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}", kind.group)
        if resource_version and meta.get("resourceVersion") != resource_version:
            raise Conflict.of(kind.resource, name, f"Precondition failed: ResourceVersion in precondition: {resource_version}, ResourceVersion in object meta: {meta.get('resourceVersion')}", kind.group)
        grace = self._grace_period(kind, current, grace_period)
        if dry_run:
            return current
        if kind == NAMESPACE:
            return self._terminate_namespace(current)
        if kind == CRD:
            return self._terminate_crd(current)
        if grace > 0 or meta.get("finalizers"):
            return self._mark_terminating(kind, current, grace)
        return self._remove(kind, current)

    def bind(self, namespace: str, name: str, node_name: str, uid: str | None = None,
             annotations: dict | None = None, *, resource_version: str | None = None, dry_run: bool = False) -> dict:
        """The pods/binding subresource: set ``spec.nodeName`` and PodScheduled=True, once."""
        pod = self.get(POD, namespace, name)
        meta, spec = pod["metadata"], pod.get("spec") or {}
        if uid and meta.get("uid") != uid:
            raise Conflict.of("pods/binding", name, f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}")
        if resource_version and meta.get("resourceVersion") != resource_version:
            raise Conflict.of("pods/binding", name, "the object has been modified; please apply your changes to the latest version and try again")
        if meta.get("deletionTimestamp"):
            raise Conflict.of("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise Conflict.of("pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise Conflict.of("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        new = dict(pod)
        new["metadata"] = dict(meta)
        if annotations:
            new["metadata"]["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        new["spec"] = {**spec, "nodeName": node_name}
        status = dict(pod.get("status") or {})
        status["conditions"] = set_condition(status.get("conditions") or [], {"type": "PodScheduled", "status": "True"}, self.clock.wall())
        if (self.feature_gates or {}).get("ClearingNominatedNodeNameAfterBinding", True):
            status.pop("nominatedNodeName", None)
        new["status"] = status
        if dry_run:
            return new
        self.progress[1] += 1
        return self._commit(POD, MODIFIED, new, pod)

    # --- persistence --------------------------------------------------------------------------
    def restore(self, objects: Iterable[tuple[Kind, dict]], rv: int) -> None:
        """Replace every object with ``objects`` as last written at resourceVersion ``rv`` (a restart
        from durable storage). The watch history starts empty, so a watcher resuming from an older
        version gets 410 Gone and relists, as after an etcd compaction. Graceful deletions in flight
        are re-armed for what is left of their grace period."""
        self._objects = {}
        self._history.clear()
        self._history_kinds.clear()
        for kind, obj in objects:
            meta = obj["metadata"]
            self._objects.setdefault(kind, {})[(meta.get("namespace", ""), meta["name"])] = obj
        self.rv = rv
        self.custom.refresh(self._objects.get(CRD, {}).values())
        for kind, bucket in self._objects.items():
            for obj in list(bucket.values()):
                self._rearm_deletion(kind, obj)

    def _rearm_deletion(self, kind: Kind, obj: dict) -> None:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp"):
            return
        if kind == NAMESPACE:
            self._after(0, lambda: self._finish_namespace(meta["name"]))
            return
        if kind == CRD:
            self._after(0, lambda: self._finish_crd(meta["name"]))
            return
        if meta.get("deletionGracePeriodSeconds", 0) > 0:
            remaining = max(0.0, parse_time(meta["deletionTimestamp"]) - self.clock.wall())
            self._after(remaining, lambda: self._expire(kind, meta.get("namespace"), meta["name"], meta.get("uid")))

    # --- internals ----------------------------------------------------------------------------
    def _bootstrap(self, kind: Kind, obj: dict) -> None:
        set_defaults(kind, obj, self.feature_gates)
        obj["metadata"]["uid"] = self._uid()
        obj["metadata"]["creationTimestamp"] = rfc3339(self.clock.wall())
        self._commit(kind, ADDED, obj, None)

    def _uid(self) -> str:
        """A version-4 UUID, as ``str(uuid.UUID(int=bits, version=4))`` spells it (formatted directly: cheaper)."""
        bits = self._rng.getrandbits(128) if self._seeded else int.from_bytes(os.urandom(16))
        bits = (bits & _UUID_KEEP) | _UUID_V4
        h = f"{bits:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _generate_name(self, kind: Kind, namespace: str, prefix: str) -> str:
        bucket = self._objects.get(kind, {})
        for _ in range(100):
            name = prefix[:58] + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
            if (namespace, name) not in bucket:
                return name
        raise AlreadyExists.of(kind.resource, prefix, kind.group)

    def _require_namespace(self, ns: str, kind: Kind, name: str) -> None:
        """The NamespaceLifecycle admission plugin on create: the namespace must exist and not be
        terminating (upstream's Forbidden names the object being created, with a NamespaceTerminating cause)."""
        namespaces = self._objects.get(NAMESPACE, {})
        current = namespaces.get(("", ns))
        if current is None:
            if self.auto_create_namespaces:
                self.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                return
            raise NotFound.of("namespaces", ns)
        if current["metadata"].get("deletionTimestamp"):
            error = Forbidden.of(kind.resource, name, f"unable to create new content in namespace {ns} because it is being terminated",
                                 kind.group)
            error.causes = [{"reason": "NamespaceTerminating", "message": f"namespace {ns} is being terminated",
                             "field": "metadata.namespace"}]
            raise error

    def _admit_create(self, kind: Kind, obj: dict) -> None:
        """The mutating admission of a create (the object may have only a generateName yet)."""
        if (kind.group, kind.kind) in WORKLOADS:
            drop_disabled_template_workload_ref(obj, None, self.feature_gates)
        if kind == POD:
            drop_disabled_workload_ref(obj, None, self.feature_gates)
            admission.default_pod_status(obj, self.feature_gates)
            admission.apply_label_keys_to_selectors(obj, self.feature_gates)
            admission.admit_priority(obj, self._priority_class, self._global_default_priority_class())
            admission.admit_default_toleration_seconds(obj)

    def _admit_update(self, kind: Kind, new: dict, current: dict) -> None:
        if (kind.group, kind.kind) in WORKLOADS:
            drop_disabled_template_workload_ref(new, current, self.feature_gates)
        if kind == POD:
            drop_disabled_workload_ref(new, current, self.feature_gates)
            admission.keep_priority(new, current)
            admission.admit_default_toleration_seconds(new)

    def _validate(self, kind: Kind, obj: dict, old: dict | None = None, *, status_only: bool = False) -> None:
        """Validation (422), then validating admission (403); ``old`` is the object an update replaces.
        A pod's rules read its metadata and spec alone, which a status write carries over from
        ``old`` (``_carry_over``): their answer is the stored pod's, checked when it was written."""
        if status_only and kind == POD and old is not None:
            return
        errors: list[FieldError] = validate(obj, self.feature_gates)
        if isinstance(kind, CustomKind):
            errors += crdapi.validate_object(kind.schema, obj)
            errors += object_rule_errors(kind.schema, obj, old) if not errors else []
        if not status_only:
            errors += validate_spec(kind, obj)
            if kind == CRD:
                errors += crdapi.validate_crd(obj)
            if kind == POD and old is not None:
                errors += validate_pod_update(obj, old)
            if kind.feature_gate == "GenericWorkload" and old is not None:
                errors += validate_workload_update(obj, old)
        if errors:
            raise Invalid.of(kind.kind, obj["metadata"].get("name", ""), errors, kind.group)
        if kind == PRIORITY_CLASS:
            admission.admit_priority_class(obj, self._global_default_priority_class())

    def _priority_class(self, name: str) -> dict | None:
        return self._objects.get(PRIORITY_CLASS, {}).get(("", name))

    def _global_default_priority_class(self) -> dict | None:
        defaults = [pc for pc in self._objects.get(PRIORITY_CLASS, {}).values() if pc.get("globalDefault")]
        if not defaults:
            return None
        # upstream picks the lowest value if several are marked default
        return min(defaults, key=lambda pc: pc.get("value", 0))

    def _carry_over(self, kind: Kind, current: dict, obj: dict, status_only: bool) -> dict:
        """Keep what a client may not change through this verb: metadata identity, and the spec
        through the status subresource or the status (of a kind that has one) through the main
        resource."""
        new = dict(obj)
        meta = dict(obj.get("metadata") or {})
        cur_meta = current["metadata"]
        for field in ("uid", "creationTimestamp", "namespace", "name", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if field in cur_meta:
                meta[field] = cur_meta[field]
            else:
                meta.pop(field, None)
        new["metadata"] = meta
        new["apiVersion"] = current.get("apiVersion", kind.api_version)
        new["kind"] = current.get("kind", kind.kind)
        if status_only:
            for key, value in current.items():
                if key not in ("status", "metadata"):
                    new[key] = value
            meta_keep = dict(cur_meta)
            meta_keep["resourceVersion"] = meta.get("resourceVersion", cur_meta.get("resourceVersion"))
            new["metadata"] = meta_keep
        elif "status" in kind.subresources:
            if "status" in current:
                new["status"] = current["status"]
            else:
                new.pop("status", None)
        return new

    def _commit(self, kind: Kind, event_type: str, obj: dict, old: dict | None) -> dict:
        self.rv += 1
        self.write_count += 1
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if event_type == DELETED:
            obj = dict(obj)
            obj["metadata"] = {**meta, "resourceVersion": str(self.rv)}
            self._objects.get(kind, {}).pop(key, None)
        else:
            meta["resourceVersion"] = str(self.rv)
            unique = _SHARED_PARTS.get(kind)
            if unique is not None:
                self._parts.share_parts(obj, unique)
            self._objects.setdefault(kind, {})[key] = obj
        event = WatchEvent(event_type, obj, old)
        self._history.append(event)
        self._history_kinds.append(kind)
        if len(self._history) > self._history_limit:
            self._history.popleft()
            self._history_kinds.popleft()
        for w in list(self._watches.get(kind, ())):
            w.offer(event)
        for hook in self.write_hooks:
            hook(self.rv, kind, event)
        if kind == CRD:
            self.custom.refresh(self._objects.get(CRD, {}).values())
            self._accept_freed_names(obj)
        return obj

    # --- custom resources ---------------------------------------------------------------------
    def _custom_decode(self, kind: Kind, obj: dict) -> Kind:
        """For a custom resource: the served kind (404 once its CRD is gone), the object pruned
        of the fields its schema does not specify (the API server has applied the request's
        ``fieldValidation`` already) and defaulted, and stored at the storage version."""
        if not isinstance(kind, CustomKind):
            return kind
        served = self.custom.require(kind)
        crdapi.prune(served.schema, obj)
        crdapi.apply_defaults(served.schema, obj)
        obj["apiVersion"] = f"{served.group}/{served.storage_version}"
        obj["kind"] = served.kind
        return served

    def _admit_crd(self, crd: dict, current: dict | None) -> None:
        """The apiextensions controllers' work, done at the write: defaults, then the names
        accepted (or the conflict) and the CRD established, in its status."""
        crdapi.set_crd_defaults(crd)
        conflict = self.custom.name_conflict(crd, self._objects.get(CRD, {}).values())
        old_status = current.get("status") if current is not None else None
        crd["status"] = crdapi.accepted_status(crd, conflict, rfc3339(self.clock.wall()), old_status)

    def _accept_freed_names(self, changed: dict) -> None:
        """After a CRD of a group changed or went, the CRDs of the group whose names were in
        conflict are looked at again (the naming controller's work): those now free are accepted
        and established."""
        group = (changed.get("spec") or {}).get("group")
        crds = self._objects.get(CRD, {})
        for crd in list(crds.values()):
            if (crd.get("spec") or {}).get("group") != group or crdapi.established(crd) or crd["metadata"].get("deletionTimestamp"):
                continue
            if self.custom.name_conflict(crd, crds.values()):
                continue
            new = json_copy(crd)
            new["status"] = crdapi.accepted_status(new, "", rfc3339(self.clock.wall()), crd.get("status"))
            self._commit(CRD, MODIFIED, new, crd)

    def _terminate_crd(self, current: dict) -> dict:
        """kube-apiserver's CRD deletion: the CRD gets its deletion timestamp, the cleanup finalizer
        and a ``Terminating`` condition (its resource stops being served), then on the next loop
        turn its objects go and it goes (``_finish_crd``)."""
        meta = current["metadata"]
        if not meta.get("deletionTimestamp"):
            new = json_copy(current)
            new["metadata"].update(deletionTimestamp=rfc3339(self.clock.wall()), deletionGracePeriodSeconds=0,
                                   finalizers=[*(f for f in meta.get("finalizers") or () if f != CRD_CLEANUP), CRD_CLEANUP])
            self._set_terminating(new, "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress")
            current = self._commit(CRD, MODIFIED, new, current)
        name = meta["name"]
        self._after(0, lambda: self._finish_crd(name))
        return current

    def _set_terminating(self, crd: dict, status: str, reason: str, message: str) -> None:
        state = crd.setdefault("status", {})
        state["conditions"] = set_condition(state.get("conditions") or [],
                                            {"type": "Terminating", "status": status, "reason": reason, "message": message},
                                            self.clock.wall())

    def _finish_crd(self, name: str) -> None:
        """The customresourcecleanup finalizer's work: delete the objects, record it, release the
        finalizer; the CRD goes unless other finalizers hold it."""
        crd = self.try_get(CRD, None, name)
        if crd is None or not crd["metadata"].get("deletionTimestamp") or CRD_CLEANUP not in (crd["metadata"].get("finalizers") or ()):
            return
        self._delete_custom_objects(crd)
        done = json_copy(crd)
        self._set_terminating(done, "False", "InstanceDeletionCompleted", "removed all instances")
        done = self._commit(CRD, MODIFIED, done, crd)
        released = json_copy(done)
        released["metadata"]["finalizers"] = [f for f in done["metadata"]["finalizers"] if f != CRD_CLEANUP]
        if released["metadata"]["finalizers"]:
            self._commit(CRD, MODIFIED, released, done)
            return
        del released["metadata"]["finalizers"]  # the last finalizer of a deleted object: it goes
        self._remove(CRD, released)

    def _delete_custom_objects(self, crd: dict) -> None:
        """Deleting a CRD deletes its objects first (the customresourcecleanup finalizer's work)."""
        spec = crd.get("spec") or {}
        bucket = CustomKind("", spec.get("group", ""), "", (spec.get("names") or {}).get("plural", ""), True)
        for obj in list(self._objects.get(bucket, {}).values()):
            self._remove(bucket, obj)
        self._objects.pop(bucket, None)

    def _remove(self, kind: Kind, current: dict) -> dict:
        self.progress[2] += 1
        return self._commit(kind, DELETED, current, current)

    def _grace_period(self, kind: Kind, obj: dict, requested: int | None) -> int:
        if kind != POD or not self.graceful_pod_deletion:
            return 0
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        if not spec.get("nodeName") or status.get("phase") in ("Failed", "Succeeded"):
            return 0
        grace = requested if requested is not None else int(spec.get("terminationGracePeriodSeconds", 30) or 0)
        return 1 if grace < 0 else grace  # upstream turns a negative period into one second

    def _mark_terminating(self, kind: Kind, current: dict, grace: int) -> dict:
        """``BeforeDelete``: set the deletion timestamp, or move it earlier when a shorter grace
        period is asked of an object already terminating (a longer one changes nothing)."""
        meta = current["metadata"]
        pending = meta.get("deletionGracePeriodSeconds") or 0
        if meta.get("deletionTimestamp"):
            if grace == 0 and not meta.get("finalizers"):
                return self._remove(kind, current)
            if not 0 < grace < pending:
                return current
            due = parse_time(meta["deletionTimestamp"]) - pending + grace
        else:
            due = self.clock.wall() + grace
        due = min(due, LATEST_TIMESTAMP)  # a grace period of int64 seconds ends past what RFC 3339 writes
        new = dict(current)
        new["metadata"] = {**meta, "deletionTimestamp": rfc3339(due), "deletionGracePeriodSeconds": grace}
        result = self._commit(kind, MODIFIED, new, current)
        if grace > 0:
            self._after(max(0.0, due - self.clock.wall()),
                        lambda: self._expire(kind, meta.get("namespace"), meta["name"], meta.get("uid")))
        return result

    def _terminate_namespace(self, current: dict) -> dict:
        """Phase Terminating with a deletionTimestamp, contents deleted, then gone (``_finish_namespace``)."""
        meta = current["metadata"]
        if not meta.get("deletionTimestamp"):
            new = dict(current)
            new["metadata"] = {**meta, "deletionTimestamp": rfc3339(self.clock.wall()), "deletionGracePeriodSeconds": 0}
            new["status"] = {**(current.get("status") or {}), "phase": "Terminating"}
            current = self._commit(NAMESPACE, MODIFIED, new, current)
        self._delete_namespace_contents(meta["name"])
        name = meta["name"]
        self._after(0, lambda: self._finish_namespace(name))
        return current

    def _finish_namespace(self, name: str) -> None:
        namespace = self.try_get(NAMESPACE, None, name)
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        self._delete_namespace_contents(name)
        if not namespace["metadata"].get("finalizers") and self.try_get(NAMESPACE, None, name) is not None:
            self._remove(NAMESPACE, namespace)

    def _expire(self, kind: Kind, namespace: str | None, name: str, uid: str | None) -> None:
        """The grace period is over: the kubelet has stopped the pod, so the object goes."""
        current = self.try_get(kind, namespace, name)
        if current is None or current["metadata"].get("uid") != uid:
            return
        if current["metadata"].get("finalizers"):
            return
        if kind == POD and self.pod_stop_confirmed is not None and not self.pod_stop_confirmed(current):
            return
        self._remove(kind, current)

    def _finish_deletion_if_released(self, kind: Kind, obj: dict) -> None:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return
        if kind == NAMESPACE and ((obj.get("spec") or {}).get("finalizers")):
            return
        if kind == POD and meta.get("deletionGracePeriodSeconds", 0) > 0:
            return
        self._remove(kind, obj)

    def _delete_namespace_contents(self, ns: str) -> None:
        for kind in list(self._objects):
            if not kind.namespaced:
                continue
            for (obj_ns, name), _obj in list(self._objects[kind].items()):
                if obj_ns == ns and (ns, name) in self._objects[kind]:
                    self.delete(kind, ns, name, grace_period=0)

    def _after(self, seconds: float, action: Callable[[], None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            action()
            return
        self.pending_timers += 1

        def fire() -> None:
            self.pending_timers -= 1
            action()

        loop.call_later(seconds, fire)


#: The finalizer that holds a deleted CRD until its objects are gone.
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


def _decode(kind: Kind, obj: dict, only: str | None = None, specs: SpecDecodes | None = None) -> None:
    """Type-check a written object against its kind's schema before anything reads it (400 when a
    value has the wrong type). Unknown fields are dropped here without a word: the API server has
    already applied the request's ``fieldValidation``, and in-process writers build their objects.
    ``only``: the one top-level field of a built-in kind that is not a stored, decoded value.
    ``specs``: the specs decoded before, for a built-in kind (see ``SpecDecodes``)."""
    try:
        if only is not None and not isinstance(kind, CustomKind):
            decode_field(obj, kind.api_version, kind.kind, only)
        elif specs is not None and not isinstance(kind, CustomKind):
            specs.decode(obj, kind.api_version, kind.kind)
        else:
            decode(obj, kind.api_version, kind.kind)
    except DecodeError as e:
        raise BadRequest(str(e), kind=kind.kind, name=_name_of(obj)) from None


def _version_of(event: WatchEvent) -> int:
    """The resourceVersion of a committed event (its object carries the commit's)."""
    return int(event.object["metadata"]["resourceVersion"])


def _name_of(obj: dict) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def _status_copy(obj: dict) -> dict:
    """``obj`` with a private copy of its status, its other sections shared with it."""
    new = dict(obj)
    if "status" in obj:
        new["status"] = json_copy(obj["status"])
    return new


def _without_status(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k != "status"}


def _with_version(obj: dict, current: dict) -> dict:
    """``obj`` as an update of ``current`` (guarded by its resourceVersion)."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}



def kind_of(obj: dict) -> Kind:
    kind = kind_for(obj.get("apiVersion", ""), obj.get("kind", ""))
    if kind is None:
        raise NotFound(f'no matches for kind "{obj.get("kind")}" in version "{obj.get("apiVersion")}"')
    return kind
