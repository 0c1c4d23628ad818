"""The garbage collector (upstream ``pkg/controller/garbagecollector``), background mode: an object
whose owners are all gone is deleted; one that keeps some owner only loses the dangling
references. The ``orphan`` finalizer (``--cascade=orphan``) strips the owner's dependents of their
reference to it; ``foregroundDeletion`` deletes the dependents first and releases the owner once
none is left.

An owner of a kind kubesched does not serve (a CRD) is never considered absent, as upstream
cannot resolve it either. With ``collect_dangling`` (upstream behaviour), an object created with
references to owners that do not exist (or have another uid) is collected too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

from kubesched.api.apierrors import NotFound
from kubesched.api.kinds import Kind
from kubesched.api.watch import ADDED, DELETED, MODIFIED, WatchEvent
from kubesched.simulator.controllers.manager import Controller, DependentRef, Manager
from kubesched.simulator.controllers.util import drop_owner_references, meta, owner_kind

log = logging.getLogger(__name__)

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"

#: Work items: ("owner-gone", uid), ("finalize", uid) and ("dependent", uid).
GCKey = tuple[str, str]


class GarbageCollector(Controller):
    """See the module docstring."""

    name = "garbage-collector-controller"
    kinds = None  # every kind

    def __init__(self, manager: Manager, *, collect_dangling: bool = True) -> None:
        super().__init__(manager)
        self.collect_dangling = collect_dangling
        #: The object behind each queued "dependent" or "finalize" key.
        self._refs: dict[GCKey, DependentRef] = {}
        #: Owners in foreground deletion (uid -> owner), waiting for their dependents to go.
        self._foreground: dict[str, DependentRef] = {}

    def initial_keys(self) -> Iterable[GCKey]:
        keys: list[GCKey] = []
        for kind in list(self.store.kinds()):
            for obj in self.store.iter_all(kind):
                keys += self._keys_for(kind, WatchEvent(ADDED, obj))
        return keys

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        for key in self._keys_for(kind, event):
            self.enqueue(key)

    def _keys_for(self, kind: Kind, event: WatchEvent) -> list[GCKey]:
        obj = event.object
        obj_meta = meta(obj)
        if event.type != DELETED and not obj_meta.get("deletionTimestamp") and not obj_meta.get("ownerReferences"):
            return []  # nothing to finalize and no owner to look for: most writes (bindings, statuses, events)
        uid = obj_meta.get("uid", "")
        ref: DependentRef = (kind, obj_meta.get("namespace") or "", obj_meta["name"])
        keys: list[GCKey] = []
        if event.type == DELETED:
            self._foreground.pop(uid, None)
            if self.manager.index.dependents.get(uid):
                keys.append(("owner-gone", uid))
            for owner in obj_meta.get("ownerReferences") or []:
                if owner.get("uid") in self._foreground:
                    keys.append(("finalize", owner["uid"]))
            return keys
        if obj_meta.get("deletionTimestamp") and set(obj_meta.get("finalizers") or []) & {ORPHAN, FOREGROUND}:
            self._refs[("finalize", uid)] = ref
            keys.append(("finalize", uid))
        refs = obj_meta.get("ownerReferences") or []
        old_refs = (meta(event.old).get("ownerReferences") or []) if event.type == MODIFIED and event.old else None
        if refs and self.collect_dangling and refs != old_refs:
            self._refs[("dependent", uid)] = ref
            keys.append(("dependent", uid))
        return keys

    # --- sync --------------------------------------------------------------------------------------
    def sync(self, key: GCKey) -> None:
        what, uid = key
        if what == "owner-gone":
            for dependent in self.manager.index.dependents_of(uid):
                self._attempt_to_delete(dependent)
            return
        ref = self._refs.pop(key, None)
        if what == "dependent" and ref is not None:
            self._attempt_to_delete(ref)
        elif what == "finalize":
            self._finalize(uid, ref)

    def _attempt_to_delete(self, ref: DependentRef) -> None:
        """``attemptToDeleteItem``: delete when every owner is absent, else drop the dangling references."""
        kind, ns, name = ref
        obj = self.store.try_get(kind, ns or None, name)
        if obj is None or meta(obj).get("deletionTimestamp"):
            return
        refs = meta(obj).get("ownerReferences") or []
        dangling = {r.get("uid") for r in refs if self._absent(r, kind, ns)}
        if not dangling:
            return
        if len(dangling) == len(refs):
            self._delete(kind, obj)
        else:
            self._drop_references(kind, ns, name, dangling)

    def _absent(self, ref: dict, dependent_kind: Kind, ns: str) -> bool:
        kind = owner_kind(ref)
        if kind is None or (kind.namespaced and not dependent_kind.namespaced):
            return False
        owner = self.store.try_get(kind, ns if kind.namespaced else None, ref.get("name", ""))
        return owner is None or meta(owner).get("uid") != ref.get("uid")

    def _delete(self, kind: Kind, obj: dict, *, foreground: bool = False) -> None:
        """Delete in the background, or in the foreground (the object waits for its own dependents),
        which is how an owner being deleted in the foreground has dependents with dependents deleted."""
        ns, name, uid = meta(obj).get("namespace"), meta(obj)["name"], meta(obj).get("uid")
        with contextlib.suppress(NotFound):
            if foreground:
                self.store.mutate(kind, ns, name, lambda o: o["metadata"].__setitem__(
                    "finalizers", [*(o["metadata"].get("finalizers") or []), FOREGROUND]), expect_uid=uid)
            self.store.delete(kind, ns, name, uid=uid)

    # --- finalizers ------------------------------------------------------------------------------------
    def _finalize(self, uid: str, ref: DependentRef | None) -> None:
        if ref is None:
            ref = self._foreground.get(uid)
        if ref is None:
            return
        kind, ns, name = ref
        owner = self.store.try_get(kind, ns or None, name)
        if owner is None or meta(owner).get("uid") != uid or not meta(owner).get("deletionTimestamp"):
            self._foreground.pop(uid, None)
            return
        finalizers = meta(owner).get("finalizers") or []
        if ORPHAN in finalizers:
            for dep_kind, dep_ns, dep_name in self.manager.index.dependents_of(uid):
                self._drop_references(dep_kind, dep_ns, dep_name, {uid})
            self._remove_finalizer(kind, owner, ORPHAN)
        elif FOREGROUND in finalizers:
            self._foreground[uid] = ref
            for dep_kind, dep_ns, dep_name in self.manager.index.dependents_of(uid):
                dependent = self.store.try_get(dep_kind, dep_ns or None, dep_name)
                if dependent is not None and not meta(dependent).get("deletionTimestamp"):
                    self._delete(dep_kind, dependent, foreground=bool(self.manager.index.dependents_of(meta(dependent)["uid"])))
            if not self.manager.index.dependents_of(uid):
                self._foreground.pop(uid, None)
                self._remove_finalizer(kind, owner, FOREGROUND)

    def _drop_references(self, kind: Kind, ns: str, name: str, uids: set[str]) -> None:
        with contextlib.suppress(NotFound):
            self.store.mutate(kind, ns or None, name, lambda obj: drop_owner_references(obj, uids))

    def _remove_finalizer(self, kind: Kind, owner: dict, finalizer: str) -> None:
        def change(obj: dict) -> None:
            remaining = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
            if remaining:
                obj["metadata"]["finalizers"] = remaining
            else:
                obj["metadata"].pop("finalizers", None)

        with contextlib.suppress(NotFound):
            self.store.mutate(kind, meta(owner).get("namespace"), meta(owner)["name"], change,
                              expect_uid=meta(owner).get("uid"))
