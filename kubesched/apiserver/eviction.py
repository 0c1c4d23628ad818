"""The Eviction subresource (upstream ``pkg/registry/core/pod/storage/eviction.go``): a pod is
deleted only if its PodDisruptionBudget allows one more disruption, which the eviction charges.

One function for every caller: the HTTP handler (``POST pods/NAME/eviction``) and the simulator's
scenarios (``drain``), so a drain in a simulation is refused exactly when the API would refuse it.
"""

from __future__ import annotations

from kubesched.api.apierrors import APIError, Conflict, TooManyRequests
from kubesched.api.kinds import POD, known_kind
from kubesched.api.meta import set_condition
from kubesched.api.selectors import parse_label_selector
from kubesched.apiserver.store import ObjectStore
from kubesched.utils.clock import rfc3339

PDB = known_kind("PodDisruptionBudget")
#: Phases in which a pod is not disrupted by its eviction, so no budget is charged.
NOT_DISRUPTED_PHASES = ("Succeeded", "Failed", "Pending")
DISRUPTION_TARGET = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                     "message": "Eviction API: evicting"}


def evict(store: ObjectStore, namespace: str, name: str, *, grace_period: int | None = None, uid: str | None = None,
          resource_version: str | None = None, dry_run: bool = False) -> None:
    """Evict one pod: charge its budget (``TooManyRequests`` when the budget has no disruption
    left), mark it a ``DisruptionTarget`` as upstream's ``addConditionAndDeletePod`` does, then
    delete it gracefully. ``NotFound`` when the pod is gone."""
    pod = store.get(POD, namespace, name)
    status = pod.get("status") or {}
    ignore_budget = pod["metadata"].get("deletionTimestamp") or status.get("phase") in NOT_DISRUPTED_PHASES
    if not ignore_budget:
        _charge_budget(store, pod, dry_run)
    if not dry_run and not pod["metadata"].get("deletionTimestamp"):
        _mark_disruption_target(store, pod)
    store.delete(POD, namespace, name, grace_period=grace_period, uid=uid, resource_version=resource_version,
                 dry_run=dry_run)


def _mark_disruption_target(store: ObjectStore, pod: dict) -> None:
    meta, now = pod["metadata"], store.clock.wall()

    def change(obj: dict) -> None:
        status = obj.setdefault("status", {})
        status["conditions"] = set_condition(status.get("conditions") or [], DISRUPTION_TARGET, now)

    store.mutate(POD, meta.get("namespace"), meta["name"], change, expect_uid=meta.get("uid"))


def _charge_budget(store: ObjectStore, pod: dict, dry_run: bool) -> None:
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    matching = []
    for pdb in store.list(PDB, meta.get("namespace"))[0]:
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is not None and parse_label_selector(selector).matches(labels):
            matching.append(pdb)
    if not matching:
        return
    if len(matching) > 1:
        raise APIError("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
    pdb = matching[0]
    status = pdb.get("status") or {}
    name = pdb["metadata"]["name"]
    if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
        raise too_many(f"The disruption budget {name} is still being processed by the server.")
    if status.get("disruptionsAllowed", 0) <= 0:
        raise too_many(f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                       f"{status.get('currentHealthy', 0)} currently")
    if dry_run:
        return
    stamp = rfc3339(store.clock.wall())

    def charge(obj: dict) -> None:
        st = obj.setdefault("status", {})
        st["disruptionsAllowed"] = st.get("disruptionsAllowed", 0) - 1
        st.setdefault("disruptedPods", {})[meta["name"]] = stamp

    try:
        store.mutate(PDB, meta.get("namespace"), name, charge)
    except Conflict:
        raise too_many(f"The disruption budget {name} changed while evicting; try again.") from None


def too_many(cause: str) -> TooManyRequests:
    """The 429 of an eviction a budget refuses, with the budget's reason as its cause."""
    return TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.",
                           causes=[{"reason": "DisruptionBudget", "message": cause}])
