"""The disruption controller (upstream ``pkg/controller/disruption``): keeps each
PodDisruptionBudget's status (healthy, desired and expected pods, ``disruptionsAllowed``, the
``DisruptionAllowed`` condition) current, which is what the eviction API and the scheduler's
preemption read; and turns a DisruptionTarget condition that was never followed by a deletion
back to False after two minutes.

Expected pods come from the scale of the pods' controllers (ReplicationController, Deployment,
ReplicaSet, StatefulSet, or any kind with a scale subresource) when the budget is a percentage or
``maxUnavailable``; an integer ``minAvailable`` counts the matching pods. One deviation: a pod
event also wakes budgets with an empty selector (``{}``, every pod of the namespace), which
upstream only resyncs on budget events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kubesched.api.kinds import POD, Kind, kind_for, known_kind
from kubesched.api.meta import set_condition
from kubesched.api.selectors import InvalidSelector, parse_label_selector
from kubesched.api.timeutil import parse_time
from kubesched.api.watch import DELETED, WatchEvent
from kubesched.simulator.controllers.manager import Controller, Key, Manager
from kubesched.simulator.controllers.util import (
    DEPLOYMENT,
    REPLICA_SET,
    REPLICATION_CONTROLLER,
    STATEFUL_SET,
    EventWriter,
    SelectorCache,
    controller_ref,
    is_pod_ready,
    key_of,
    labels_of,
    meta,
    replicas_of,
    scaled_value,
    spec,
    status,
    update_status,
)
from kubesched.utils.clock import rfc3339

PDB = known_kind("PodDisruptionBudget")

#: How long a pod named in ``status.disruptedPods`` is expected to take to be deleted.
DELETION_TIMEOUT = 120.0
#: How long a DisruptionTarget condition may stay True on a pod that is not terminating.
STALE_POD_DISRUPTION_TIMEOUT = 120.0

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"


class SyncError(Exception):
    """A budget whose status cannot be computed; its message goes to the SyncFailed condition."""


class DisruptionController(Controller):
    """See the module docstring."""

    name = "disruption-controller"
    kinds = (PDB, POD)

    def __init__(self, manager: Manager, *, events: bool = True) -> None:
        super().__init__(manager)
        self.event = EventWriter(self.store, "controllermanager", events)
        self.selectors = SelectorCache()
        #: The status this controller last wrote per budget: its own writes do not wake it again
        #: (upstream's do, and its event recorder folds the repeated events into one).
        self._written: dict[Key, dict] = {}

    # --- events ------------------------------------------------------------------------------------
    def initial_keys(self) -> Iterable[Key]:
        return [key_of(pdb) for pdb in self.store.iter_all(PDB)]

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        if kind is not POD and kind == PDB:  # a pod's write (most) compares no kinds
            key = key_of(event.object)
            if event.type == DELETED:
                self._written.pop(key, None)
                self.selectors.forget(event.object)
            elif event.old is None or spec(event.old) != spec(event.object) or status(event.object) != self._written.get(key):
                self.enqueue(key)
            return
        if not self.store.count(PDB):
            return  # no budget to select the pod (the common case: a write per pod, and no lists)
        for pod in (event.object, event.old):
            if pod is not None:
                for pdb in self._budgets_selecting(pod):
                    self.enqueue(key_of(pdb))

    def _budgets_selecting(self, pod: dict) -> list[dict]:
        labels = labels_of(pod)
        out = []
        for pdb in self.store.list(PDB, meta(pod).get("namespace") or "")[0]:
            selector = self.selectors.get(pdb)
            if selector is not None and selector.matches(labels):
                out.append(pdb)
        return out

    # --- sync --------------------------------------------------------------------------------------
    def sync(self, key: Key) -> None:
        pdb = self.store.try_get(PDB, key[0], key[1])
        if pdb is None:
            return
        try:
            recheck = self._try_sync(pdb)
        except SyncError as e:
            self._fail_safe(pdb, str(e))
            return
        if recheck is not None:
            self.enqueue_after(key, recheck - self.store.clock.wall(), counted=False)

    def _try_sync(self, pdb: dict) -> float | None:
        """Write the budget's status; returns when to look again (a disrupted pod's deadline)."""
        pods = self._pods_for(pdb)
        if not pods:
            self.event(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            expected, desired, unmanaged = self._expected_pod_count(pdb, pods)
        except SyncError as e:
            self.event(pdb, "Warning", "CalculateExpectedPodCountFailed", f"Failed to calculate the number of expected pods: {e}")
            raise
        if unmanaged:
            self.event(pdb, "Warning", "UnmanagedPods",
                       f"Pods selected by this PodDisruptionBudget (selector: {go_selector_string(spec(pdb).get('selector'))}) "
                       "were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, "
                       'which may result in undefined behavior. To account for these pods please set ".spec.minAvailable" '
                       "field of the PDB to an integer value.")
        now = self.store.clock.wall()
        disrupted, recheck = self._disrupted_pods(pdb, pods, now)
        healthy = count_healthy_pods(pods, disrupted, now)
        self._update_status(pdb, healthy, desired, expected, disrupted)
        return recheck

    def _pods_for(self, pdb: dict) -> list[dict]:
        try:
            selector = parse_label_selector(spec(pdb).get("selector"))
        except InvalidSelector as e:
            self.event(pdb, "Warning", "NoPods", f"Failed to get pods: {e}")
            raise SyncError(str(e)) from None
        pods = self.store.list(POD, meta(pdb).get("namespace") or "")[0]
        return [pod for pod in pods if selector.matches(labels_of(pod))]

    def _expected_pod_count(self, pdb: dict, pods: list[dict]) -> tuple[int, int, list[str]]:
        """``getExpectedPodCount``: (expected pods, desired healthy pods, unmanaged pod names)."""
        budget = spec(pdb)
        max_unavailable, min_available = budget.get("maxUnavailable"), budget.get("minAvailable")
        if max_unavailable is not None:
            expected, unmanaged = self._expected_scale(pods)
            return expected, max(0, expected - _scaled(max_unavailable, expected)), unmanaged
        if min_available is not None:
            if isinstance(min_available, int):
                return len(pods), min_available, []
            expected, unmanaged = self._expected_scale(pods)
            return expected, _scaled(min_available, expected), unmanaged
        return 0, 0, []

    def _expected_scale(self, pods: list[dict]) -> tuple[int, list[str]]:
        """``getExpectedScale``: the summed scale of the pods' controllers, and the pods without one."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(meta(pod)["name"])
                continue
            if ref.get("uid") in scales:
                continue
            found = self._controller_scale(ref, meta(pod).get("namespace") or "")
            if found is None:
                raise SyncError(f'found no controllers for pod "{meta(pod)["name"]}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    def _controller_scale(self, ref: Mapping, namespace: str) -> tuple[str, int] | None:
        """The finders in upstream's order: the first that knows the controller gives (uid, scale)."""
        kind_name, group = ref.get("kind", ""), _group_of(ref.get("apiVersion", ""))
        if kind_name == "ReplicationController" and group == "":
            return self._scale_of(REPLICATION_CONTROLLER, namespace, ref)
        if kind_name == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self._owned(REPLICA_SET, namespace, ref)
            if rs is None:
                return self._generic_scale(ref, namespace)
            owner = controller_ref(rs)
            if owner is None or owner.get("kind") != "Deployment":
                return meta(rs)["uid"], replicas_of(rs)
            if _group_of(owner.get("apiVersion", "")) in ("apps", "extensions"):
                found = self._scale_of(DEPLOYMENT, namespace, owner)
                if found is not None:
                    return found
            return self._generic_scale(ref, namespace)
        if kind_name == "StatefulSet" and group == "apps":
            found = self._scale_of(STATEFUL_SET, namespace, ref)
            if found is not None:
                return found
        return self._generic_scale(ref, namespace)

    def _owned(self, kind: Kind, namespace: str, ref: Mapping) -> dict | None:
        obj = self.store.try_get(kind, namespace, ref.get("name", ""))
        return obj if obj is not None and meta(obj).get("uid") == ref.get("uid") else None

    def _scale_of(self, kind: Kind, namespace: str, ref: Mapping) -> tuple[str, int] | None:
        obj = self._owned(kind, namespace, ref)
        return None if obj is None else (meta(obj)["uid"], replicas_of(obj))

    def _generic_scale(self, ref: Mapping, namespace: str) -> tuple[str, int] | None:
        """``getScaleController``: any kind serving the scale subresource."""
        api_version, kind_name = ref.get("apiVersion", ""), ref.get("kind", "")
        kind = kind_for(api_version, kind_name)
        if kind is None:
            raise SyncError(f'no matches for kind "{kind_name}" in version "{api_version}"')
        if "scale" not in kind.subresources:
            resource = f"{kind.resource}.{kind.group}" if kind.group else kind.resource
            raise SyncError(f"{resource} does not implement the scale subresource")
        return self._scale_of(kind, namespace, ref)

    def _disrupted_pods(self, pdb: dict, pods: list[dict], now: float) -> tuple[dict[str, str], float | None]:
        """``buildDisruptedPodMap``: entries for pods not yet deleted and still within their
        deletion timeout, and the earliest of those deadlines."""
        recorded = status(pdb).get("disruptedPods") or {}
        kept: dict[str, str] = {}
        recheck: float | None = None
        for pod in pods:
            name = meta(pod)["name"]
            if meta(pod).get("deletionTimestamp") or name not in recorded:
                continue
            deadline = parse_time(recorded[name]) + DELETION_TIMEOUT
            if deadline < now:
                ns = meta(pdb).get("namespace")
                # reproduces upstream, which prints the budget's namespace twice instead of namespace/name
                self.event(pod, "Warning", "NotDeleted", f"Pod was expected by PDB {ns}/{ns} to be deleted but it wasn't")
                continue
            kept[name] = recorded[name]
            recheck = deadline if recheck is None else min(recheck, deadline)
        return kept, recheck

    def _update_status(self, pdb: dict, healthy: int, desired: int, expected: int, disrupted: dict[str, str]) -> None:
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        current = status(pdb)
        generation = meta(pdb).get("generation", 1)
        if (current.get("currentHealthy"), current.get("desiredHealthy"), current.get("expectedPods"),
                current.get("disruptionsAllowed"), current.get("disruptedPods") or {}, current.get("observedGeneration")) == \
                (healthy, desired, expected, allowed, disrupted, generation) and _conditions_up_to_date(pdb):
            return
        new_status: dict = {"observedGeneration": generation}
        if disrupted:
            new_status["disruptedPods"] = disrupted
        new_status.update(disruptionsAllowed=allowed, currentHealthy=healthy, desiredHealthy=desired, expectedPods=expected)
        sufficient = allowed > 0
        new_status["conditions"] = self._with_condition(
            current.get("conditions") or [], "True" if sufficient else "False",
            SUFFICIENT_PODS if sufficient else INSUFFICIENT_PODS, "", generation)
        self._write(pdb, new_status)

    def _fail_safe(self, pdb: dict, message: str) -> None:
        """``failSafe``: no disruption allowed, and a SyncFailed condition saying why."""
        new_status = dict(status(pdb))
        new_status["disruptionsAllowed"] = 0
        new_status["conditions"] = self._with_condition(new_status.get("conditions") or [], "False", SYNC_FAILED, message,
                                                        new_status.get("observedGeneration", 0))
        self._write(pdb, new_status)

    def _write(self, pdb: dict, new_status: dict) -> None:
        self._written[key_of(pdb)] = new_status
        update_status(self.store, PDB, pdb, new_status)

    def _with_condition(self, conditions: list[dict], cond_status: str, reason: str, message: str, generation: int) -> list[dict]:
        """``meta.SetStatusCondition`` for DisruptionAllowed: the transition time moves with the status."""
        out = [dict(c) for c in conditions]
        now = self.store.clock.wall()
        for cond in out:
            if cond.get("type") == DISRUPTION_ALLOWED:
                if cond.get("status") != cond_status:
                    cond["status"] = cond_status
                    cond["lastTransitionTime"] = rfc3339(now)
                cond.update(reason=reason, message=message, observedGeneration=generation)
                return out
        out.append({"type": DISRUPTION_ALLOWED, "status": cond_status, "observedGeneration": generation,
                    "lastTransitionTime": rfc3339(now), "reason": reason, "message": message})
        return out


class StaleDisruptionConditionCleaner(Controller):
    """The disruption controller's second worker: a pod marked DisruptionTarget (by preemption or
    an eviction) that is still not terminating two minutes later gets the condition set to False."""

    name = "disruption-controller-stale-pod-disruption"
    kinds = (POD,)

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        if event.type == DELETED:
            return
        wait = self._stale_after(event.object)
        if wait is not None:
            self.enqueue_after(key_of(event.object), wait, counted=False)

    def initial_keys(self) -> Iterable[Key]:
        return [key_of(pod) for pod in self.store.iter_all(POD) if self._stale_after(pod) is not None]

    def sync(self, key: Key) -> None:
        pod = self.store.try_get(POD, key[0], key[1])
        if pod is None:
            return
        wait = self._stale_after(pod)
        if wait is None:
            return
        if wait > 0:
            self.enqueue_after(key, wait, counted=False)
            return
        conditions = (pod.get("status") or {}).get("conditions") or []
        new_status = dict(pod.get("status") or {})
        new_status["conditions"] = set_condition(conditions, {"type": DISRUPTION_TARGET, "status": "False"}, self.store.clock.wall())
        update_status(self.store, POD, pod, new_status)

    def _stale_after(self, pod: dict) -> float | None:
        """``nonTerminatingPodHasStaleDisruptionCondition``: seconds until the condition is stale
        (0: already), or None when the pod has no such condition to clean."""
        if meta(pod).get("deletionTimestamp"):
            return None
        pod_status = pod.get("status") or {}
        cond = next((c for c in pod_status.get("conditions") or [] if c.get("type") == DISRUPTION_TARGET), None)
        if cond is None or cond.get("status") != "True" or cond.get("reason") == TERMINATION_BY_KUBELET \
                or pod_status.get("phase") in ("Succeeded", "Failed"):
            return None
        elapsed = self.store.clock.wall() - parse_time(cond.get("lastTransitionTime"))
        return max(0.0, STALE_POD_DISRUPTION_TIMEOUT - elapsed)


# --- helpers ---------------------------------------------------------------------------------------
def count_healthy_pods(pods: list[dict], disrupted: Mapping[str, str], now: float) -> int:
    """``countHealthyPods``: ready pods neither being deleted nor recently allowed to be disrupted."""
    healthy = 0
    for pod in pods:
        name = meta(pod)["name"]
        if meta(pod).get("deletionTimestamp"):
            continue
        if name in disrupted and parse_time(disrupted[name]) + DELETION_TIMEOUT > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def _conditions_up_to_date(pdb: dict) -> bool:
    """``pdbhelper.ConditionsAreUpToDate``."""
    st = status(pdb)
    cond = next((c for c in st.get("conditions") or [] if c.get("type") == DISRUPTION_ALLOWED), None)
    if cond is None or st.get("observedGeneration") != meta(pdb).get("generation", 1):
        return False
    if (st.get("disruptionsAllowed") or 0) > 0:
        return cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS
    return cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS


def go_selector_string(raw: Mapping | None) -> str:
    """A ``*metav1.LabelSelector`` printed with ``%v`` (its generated ``String`` method)."""
    if raw is None:
        return "nil"
    labels = raw.get("matchLabels") or {}
    match_labels = "map[string]string{" + "".join(f"{k}: {labels[k]}," for k in sorted(labels)) + "}"
    exprs = "".join(f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
                    f"Values:[{' '.join(e.get('values') or [])}],}},"
                    for e in raw.get("matchExpressions") or [])
    return f"&LabelSelector{{MatchLabels:{match_labels},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"


def _scaled(value: int | str, total: int) -> int:
    try:
        return scaled_value(value, total, round_up=True)
    except ValueError as e:
        raise SyncError(str(e)) from None


def _group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""
