"""What happened when, on the virtual clock: the timeline of a scenario run, derived from the
store's writes as a watcher would see them (pods created, bound, left pending and why, evicted,
preempted, deleted; nodes added, removed, cordoned, tainted, not ready), plus the scenario's own
steps and their outcomes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kubesched.api.kinds import NODE, POD, Kind
from kubesched.api.watch import ADDED, DELETED, WatchEvent
from kubesched.apiserver.store import ObjectStore
from kubesched.simulator.scenario import describe_seconds

#: What each DisruptionTarget reason makes of a pod's deletion: the timeline event and why.
DELETION_CAUSES = {
    "EvictionByEvictionAPI": ("evicted", "through the Eviction API"),
    "PreemptionByScheduler": ("preempted", "by the scheduler"),
    "DeletionByTaintManager": ("evicted", "by the taint manager: a NoExecute taint it does not tolerate"),
    "DeletionByPodGC": ("deleted", "by PodGC: its node is gone"),
}


@dataclass(frozen=True)
class TimelineEntry:
    """One thing that happened: ``seconds`` after scheduling began, an ``event`` (bound, pending,
    evicted, step, ...), the object it happened to, its node if any, and why."""

    seconds: float
    event: str
    object: str
    node: str = ""
    message: str = ""

    def to_json(self) -> dict:
        out: dict = {"at": describe_seconds(self.seconds), "seconds": round(self.seconds, 3), "event": self.event,
                     "object": self.object}
        if self.node:
            out["node"] = self.node
        if self.message:
            out["message"] = self.message
        return out


def _pod_key(pod: dict) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"


def _condition(obj: dict | None, kind: str) -> dict:
    for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return {}


def _taints(node: dict | None) -> dict[tuple[str, str], dict]:
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    return {(str(t.get("key")), str(t.get("effect"))): t for t in taints if isinstance(t, dict)}


def _describe_taint(taint: dict) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


class Timeline:
    """Records entries from the moment ``start`` is called; times are relative to that moment."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.entries: list[TimelineEntry] = []
        self._origin = 0.0
        #: Pod uid -> the last pending message recorded (the scheduler repeats itself on retries).
        self._pending: dict[str, str] = {}
        #: Uids of pods whose deletion is already on the timeline.
        self._deleted: set[str] = set()

    def start(self) -> None:
        self._origin = asyncio.get_running_loop().time()
        self.store.write_hooks.append(self._on_write)

    def stop(self) -> None:
        if self._on_write in self.store.write_hooks:
            self.store.write_hooks.remove(self._on_write)

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self._origin

    def add(self, event: str, obj: str, node: str = "", message: str = "") -> None:
        self.entries.append(TimelineEntry(self.now(), event, obj, node, message))

    # --- from the store's writes ---------------------------------------------------------------
    def _on_write(self, _rv: int, kind: Kind, event: WatchEvent) -> None:
        if kind is POD:
            self._pod(event)
        elif kind is NODE:
            self._node(event)

    def _pod(self, event: WatchEvent) -> None:
        pod, old = event.object, event.old
        key, spec, uid = _pod_key(pod), pod.get("spec") or {}, pod["metadata"].get("uid", "")
        node = spec.get("nodeName") or ""
        if event.type == ADDED:
            self.add("created", f"Pod {key}", node, _owner(pod))
            return
        if event.type == DELETED or (pod["metadata"].get("deletionTimestamp")
                                      and not (old or {}).get("metadata", {}).get("deletionTimestamp")):
            self._deletion(pod, key, node, uid)
            return
        if node and not ((old or {}).get("spec") or {}).get("nodeName"):
            self.add("bound", f"Pod {key}", node)
            self._pending.pop(uid, None)
        scheduled = _condition(pod, "PodScheduled")
        if not node and scheduled.get("status") == "False":
            message = str(scheduled.get("message") or scheduled.get("reason") or "")
            if self._pending.get(uid) != message:
                self._pending[uid] = message
                self.add("pending", f"Pod {key}", "", message)
        status, old_status = pod.get("status") or {}, (old or {}).get("status") or {}
        if status.get("phase") == "Failed" and old_status.get("phase") != "Failed":
            self.add("failed", f"Pod {key}", node, str(status.get("message") or status.get("reason") or ""))

    def _deletion(self, pod: dict, key: str, node: str, uid: str) -> None:
        if uid in self._deleted:
            return
        self._deleted.add(uid)
        self._pending.pop(uid, None)
        target = _condition(pod, "DisruptionTarget")
        event, why = DELETION_CAUSES.get(str(target.get("reason")), ("deleted", ""))
        self.add(event, f"Pod {key}", node, why)

    def _node(self, event: WatchEvent) -> None:
        node, old = event.object, event.old
        name = f"Node {node['metadata']['name']}"
        if event.type == ADDED:
            self.add("node added", name)
            return
        if event.type == DELETED:
            self.add("node removed", name)
            return
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        if cordoned != bool(((old or {}).get("spec") or {}).get("unschedulable")):
            self.add("cordoned" if cordoned else "uncordoned", name)
        ready, old_ready = _condition(node, "Ready"), _condition(old, "Ready")
        if ready and old_ready and ready.get("status") != old_ready.get("status"):
            state = {"True": "ready", "False": "not ready"}.get(str(ready.get("status")), "unknown")
            self.add(f"node {state}", name, "", str(ready.get("message") or ready.get("reason") or ""))
        taints, old_taints = _taints(node), _taints(old)
        for taint_key in sorted(taints.keys() - old_taints.keys()):
            self.add("tainted", name, "", _describe_taint(taints[taint_key]))
        for taint_key in sorted(old_taints.keys() - taints.keys()):
            self.add("untainted", name, "", _describe_taint(old_taints[taint_key]))


def _owner(pod: dict) -> str:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return f"by {ref.get('kind')} {ref.get('name')}"
    return ""


#: Events after which a pod no longer counts as bound or pending (it is going, or gone).
GONE = frozenset({"evicted", "preempted", "deleted", "failed"})


@dataclass(frozen=True)
class Counts:
    """The cluster's pods at one moment of a timeline: how many are bound and pending then, and
    how many were bound, evicted and preempted since scheduling began (a pod bound, evicted and
    bound again counts twice)."""

    seconds: float
    bound: int
    pending: int
    bound_total: int
    evicted_total: int
    preempted_total: int


def counts(entries: list[TimelineEntry], final_pods: list[dict]) -> list[Counts]:
    """The counts after each entry, the first one at 0s before any entry.

    The timeline records changes only, so the pods there at the start (bound in the manifests,
    or pending) are found by undoing the entries from the end state, latest first: a ``bound``
    pod was pending before, a ``created`` one did not exist, a deleted one was where it was
    deleted from."""
    state = {_pod_key(p): "bound" if (p.get("spec") or {}).get("nodeName") else "pending"
             for p in final_pods if _counted(p)}
    for entry in reversed(entries):
        key = entry.object.removeprefix("Pod ")
        if not entry.object.startswith("Pod "):
            continue
        if entry.event == "created":
            state.pop(key, None)
        elif entry.event == "bound":
            state[key] = "pending"
        elif entry.event in GONE:
            state[key] = "bound" if entry.node else "pending"
    totals = {"bound": 0, "evicted": 0, "preempted": 0}
    out = [_counts(0.0, state, totals)]
    for entry in entries:
        key = entry.object.removeprefix("Pod ")
        if entry.object.startswith("Pod ") and (entry.event in ("created", "bound") or entry.event in GONE):
            if entry.event == "created":
                state[key] = "bound" if entry.node else "pending"
            elif entry.event == "bound":
                state[key] = "bound"
            else:
                state.pop(key, None)
            if entry.event in totals:
                totals[entry.event] += 1
        out.append(_counts(entry.seconds, state, totals))
    return out


def _counted(pod: dict) -> bool:
    """Whether a pod of the end state counts: not terminating, not finished."""
    return not pod["metadata"].get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _counts(seconds: float, state: dict[str, str], totals: dict[str, int]) -> Counts:
    bound = sum(1 for s in state.values() if s == "bound")
    return Counts(seconds, bound, len(state) - bound, totals["bound"], totals["evicted"], totals["preempted"])
