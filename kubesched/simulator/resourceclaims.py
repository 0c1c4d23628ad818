"""A ResourceClaim controller for the embedded cluster (kube-controller-manager's
``pkg/controller/resourceclaim``), so pods using ResourceClaimTemplates schedule end to end.

* For each pod entry with ``resourceClaimTemplateName`` and no ``status.resourceClaimStatuses``
  entry yet, it creates a claim from the template (``generateName: <pod>-<claim>-``, owned by the
  pod, annotated ``resource.kubernetes.io/pod-claim-name``) — or adopts one created earlier — and
  records its name in the pod's status, which is what the scheduler waits for.
* It removes ``status.reservedFor`` entries of pods that are gone or finished; a claim nobody
  uses any more is deleted when its pod is gone (owner garbage collection) and otherwise
  deallocated, dropping the scheduler's ``delete-protection`` finalizer, as the controller does
  for claims allocated with structured parameters.

It works on the object store directly and reacts to the pod, claim and template watch streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubesched.api.apierrors import APIError, NotFound
from kubesched.api.kinds import POD, known_kind
from kubesched.api.meta import json_copy
from kubesched.apiserver.store import ObjectStore, Watch

log = logging.getLogger(__name__)

RESOURCE_CLAIM = known_kind("ResourceClaim")
RESOURCE_CLAIM_TEMPLATE = known_kind("ResourceClaimTemplate")
assert RESOURCE_CLAIM and RESOURCE_CLAIM_TEMPLATE

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"
MAX_BASE_NAME = 57  # leaves room for "-" and five random characters in a 63 character name


def generate_name(pod_name: str, claim_name: str) -> str:
    """The claim's ``generateName``; both parts are truncated proportionally when too long (and,
    as upstream does, the truncated form has no trailing hyphen)."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) > MAX_BASE_NAME:
        total = len(base)
        base = f"{pod_name[: len(pod_name) * MAX_BASE_NAME // total]}-{claim_name[: len(claim_name) * MAX_BASE_NAME // total]}"
    return base


def _owned_by(claim: dict, pod: dict) -> bool:
    uid = pod["metadata"].get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid for ref in claim["metadata"].get("ownerReferences") or [])


def _pod_done(pod: dict) -> bool:
    """``isPodDone``: terminal, or deleted before it was scheduled."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


class FakeResourceClaimController:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._watches: list[Watch] = []
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for kind, handler in ((POD, self._on_pod), (RESOURCE_CLAIM, self._on_claim),
                              (RESOURCE_CLAIM_TEMPLATE, self._on_template)):
            watch = self.store.watch(kind, predicate=self._concerns if kind == POD else None)
            self._watches.append(watch)
            self._tasks.append(loop.create_task(self._run(watch, handler), name=f"resourceclaim-controller-{kind.resource}"))

    async def stop(self) -> None:
        for watch in self._watches:
            watch.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def idle(self) -> bool:
        return all(not w.pending for w in self._watches)

    async def _run(self, watch: Watch, handler: Callable[[str, dict], None]) -> None:
        while True:
            batch = await watch.next_batch()
            if not batch and watch.stopped:
                return
            for event in batch:
                try:
                    handler(event.type, event.object)
                except Exception:
                    log.exception("resourceclaim controller failed on %s", event.object.get("metadata", {}).get("name"))

    # --- events ----------------------------------------------------------------------------------
    def _concerns(self, pod: dict) -> bool:
        """Whether a pod's write can matter here: the pod asks for claims, or some claim exists
        (which may name the pod as its owner or consumer). Without either, ``_on_pod`` does
        nothing, so the watch does not deliver the write (the common case: a write per pod of a
        cluster without claims, each of which would wake this controller)."""
        return bool((pod.get("spec") or {}).get("resourceClaims")) or self.store.count(RESOURCE_CLAIM) > 0

    def _on_pod(self, event: str, pod: dict) -> None:
        if event == "DELETED" or pod["metadata"].get("deletionTimestamp") or _pod_done(pod):
            self._release_claims_of(pod)
        else:
            self.sync_pod(pod)

    def _on_claim(self, event: str, claim: dict) -> None:
        if event != "DELETED":
            self.sync_claim(claim)

    def _on_template(self, event: str, template: dict) -> None:
        if event == "DELETED":
            return
        namespace = template["metadata"].get("namespace")
        name = template["metadata"]["name"]
        for pod in self.store.list(POD, namespace)[0]:
            if any(c.get("resourceClaimTemplateName") == name for c in (pod.get("spec") or {}).get("resourceClaims") or []):
                self._on_pod("MODIFIED", pod)

    # --- pods ------------------------------------------------------------------------------------
    def sync_pod(self, pod: dict) -> None:
        """Create the pod's missing claims and record them in ``status.resourceClaimStatuses``."""
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        known = {s.get("name") for s in statuses}
        added = []
        for pod_claim in (pod.get("spec") or {}).get("resourceClaims") or []:
            template = pod_claim.get("resourceClaimTemplateName")
            if template is None or pod_claim.get("name") in known:
                continue
            claim = self._find_claim(pod, pod_claim["name"]) or self._create_claim(pod, pod_claim["name"], template)
            if claim is None:
                continue
            added.append({"name": pod_claim["name"], "resourceClaimName": claim["metadata"]["name"]})
        if added:
            self._record(pod, added)

    def _find_claim(self, pod: dict, pod_claim_name: str) -> dict | None:
        """A claim created for this pod entry earlier (the pod status update may have been lost)."""
        for claim in self.store.list(RESOURCE_CLAIM, pod["metadata"].get("namespace"))[0]:
            annotations = claim["metadata"].get("annotations") or {}
            if annotations.get(POD_CLAIM_NAME_ANNOTATION) == pod_claim_name and _owned_by(claim, pod):
                return claim
        return None

    def _create_claim(self, pod: dict, pod_claim_name: str, template_name: str) -> dict | None:
        meta = pod["metadata"]
        template = self.store.try_get(RESOURCE_CLAIM_TEMPLATE, meta.get("namespace"), template_name)
        if template is None:
            log.info("pod %s/%s, PodResourceClaim %s: resource claim template %q: not found",
                     meta.get("namespace"), meta["name"], pod_claim_name, template_name)
            return None
        spec = template.get("spec") or {}
        template_meta = spec.get("metadata") or {}
        claim: dict[str, Any] = {
            "apiVersion": RESOURCE_CLAIM.api_version, "kind": "ResourceClaim",
            "metadata": {
                "generateName": generate_name(meta["name"], pod_claim_name),
                "namespace": meta.get("namespace"),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta.get("uid"),
                                     "controller": True, "blockOwnerDeletion": True}],
                "annotations": {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: pod_claim_name},
            },
            "spec": json_copy(spec.get("spec") or {}),
        }
        if template_meta.get("labels"):
            claim["metadata"]["labels"] = dict(template_meta["labels"])
        try:
            return self.store.create(RESOURCE_CLAIM, claim)
        except APIError as e:
            log.warning("creating claim for pod %s/%s failed: %s", meta.get("namespace"), meta["name"], e)
            return None

    def _record(self, pod: dict, added: list[dict]) -> None:
        def change(current: dict) -> None:
            status = current.setdefault("status", {})
            statuses = list(status.get("resourceClaimStatuses") or [])
            names = {s.get("name") for s in statuses}
            statuses += [a for a in added if a["name"] not in names]
            status["resourceClaimStatuses"] = statuses

        meta = pod["metadata"]
        try:
            self.store.mutate(POD, meta.get("namespace"), meta["name"], change, expect_uid=meta.get("uid"))
        except APIError as e:
            log.debug("recording claims of pod %s failed: %s", meta["name"], e)

    def _release_claims_of(self, pod: dict) -> None:
        for claim in self.store.list(RESOURCE_CLAIM, pod["metadata"].get("namespace"))[0]:
            if _owned_by(claim, pod) or any(r.get("uid") == pod["metadata"].get("uid")
                                            for r in (claim.get("status") or {}).get("reservedFor") or []):
                self.sync_claim(claim)

    # --- claims ----------------------------------------------------------------------------------
    def sync_claim(self, claim: dict) -> None:
        """Drop reservations of pods that are gone or done; deallocate a claim when its last
        consumer leaves; delete a generated claim whose pod will not run (``syncClaim``)."""
        meta = claim["metadata"]
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        valid = [r for r in reserved if self._reservation_valid(meta.get("namespace"), r)]
        try:
            if len(valid) < len(reserved):
                claim = self._release(claim, valid)
            elif FINALIZER in (meta.get("finalizers") or []) and meta.get("deletionTimestamp") and not valid:
                if _allocated(claim):
                    claim = self._update_status(claim, _clear_allocation)
                claim = self._drop_finalizer(claim)
            if not valid:
                self._delete_if_pod_done(claim)
        except NotFound:
            return
        except APIError as e:
            log.debug("syncing claim %s failed: %s", meta["name"], e)

    def _release(self, claim: dict, valid: list[dict]) -> dict:
        """The last consumers left: with the scheduler's finalizer, the allocation goes too."""
        builtin = FINALIZER in (claim["metadata"].get("finalizers") or [])

        def change(status: dict) -> None:
            if valid:
                status["reservedFor"] = valid
            else:
                status.pop("reservedFor", None)
                if builtin:
                    _clear_allocation(status)

        claim = self._update_status(claim, change)
        if builtin and not _allocated(claim):
            claim = self._drop_finalizer(claim)
        return claim

    def _reservation_valid(self, namespace: str | None, ref: dict) -> bool:
        if ref.get("resource") != "pods" or ref.get("apiGroup"):
            return True
        pod = self.store.try_get(POD, namespace, ref.get("name", ""))
        return pod is not None and pod["metadata"].get("uid") == ref.get("uid") and not _pod_done(pod)

    def _delete_if_pod_done(self, claim: dict) -> None:
        """A generated claim whose pod is done, replaced or gone is deleted (the garbage collector
        does the last case in a real cluster; the embedded one has none)."""
        meta = claim["metadata"]
        if meta.get("deletionTimestamp"):
            return
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") != "Pod" or not ref.get("controller"):
                continue
            pod = self.store.try_get(POD, meta.get("namespace"), ref.get("name", ""))
            if pod is None or pod["metadata"].get("uid") != ref.get("uid") or _pod_done(pod):
                self.store.delete(RESOURCE_CLAIM, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
            return

    def _update_status(self, claim: dict, change: Callable[[dict], Any]) -> dict:
        meta = claim["metadata"]

        def apply(current: dict) -> None:
            change(current.setdefault("status", {}))

        return self.store.mutate(RESOURCE_CLAIM, meta.get("namespace"), meta["name"], apply, expect_uid=meta.get("uid"))

    def _drop_finalizer(self, claim: dict) -> dict:
        meta = claim["metadata"]

        def apply(current: dict) -> None:
            current["metadata"]["finalizers"] = [f for f in current["metadata"].get("finalizers") or [] if f != FINALIZER]

        self.store.mutate(RESOURCE_CLAIM, meta.get("namespace"), meta["name"], apply, expect_uid=meta.get("uid"))
        return self.store.try_get(RESOURCE_CLAIM, meta.get("namespace"), meta["name"]) or claim


def _clear_allocation(status: dict) -> None:
    status.pop("allocation", None)
    status.pop("devices", None)


def _allocated(claim: dict) -> bool:
    return bool((claim.get("status") or {}).get("allocation"))
