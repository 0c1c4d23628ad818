"""The PodGroup controller of scheduler-plugins, for clusters that serve the PodGroup CRD
(Coscheduling's): it keeps each PodGroup's ``status`` (phase, running, succeeded and failed
counts, ``occupiedBy``) in step with the pods labelled ``scheduling.x-k8s.io/pod-group``. The
scheduler only reads PodGroups; this controller writes them, as scheduler-plugins' controller
manager does next to its scheduler. It does nothing in a cluster without PodGroups.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubesched.api.kinds import POD, Kind, custom_resource_kind
from kubesched.api.watch import WatchEvent
from kubesched.contrib.coscheduling.pod_group import GROUP, PLURAL, POD_GROUP_LABEL, VERSION
from kubesched.contrib.coscheduling.status import next_status
from kubesched.simulator.controllers.manager import Controller, Key
from kubesched.simulator.controllers.util import key_of, labels_of, meta, update_status

POD_GROUP = custom_resource_kind(GROUP, VERSION, PLURAL)


class PodGroupController(Controller):
    """Reconciles a PodGroup whenever it or one of its pods changes; its own status writes wake
    it again, as upstream's watch does, so each reconcile takes the phase one step further until
    it settles."""

    name = "podgroup-controller"
    kinds = (POD_GROUP, POD)

    def initial_keys(self) -> Iterable[Key]:
        return [key_of(pg) for pg in self._pod_groups()]

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        if kind is not POD and kind == POD_GROUP:  # a pod's write (most) compares no kinds
            self.enqueue(key_of(event.object))
            return
        for pod in (event.object, event.old):
            if pod is None:
                continue
            group = labels_of(pod).get(POD_GROUP_LABEL)
            if group:
                self.enqueue((meta(pod).get("namespace") or "default", group))

    def sync(self, key: Key) -> None:
        pod_group = self.store.try_get(POD_GROUP, key[0], key[1]) if self._served() else None
        if pod_group is None:
            return
        pods = [p for p in self.store.list(POD, key[0])[0] if labels_of(p).get(POD_GROUP_LABEL) == key[1]]
        update_status(self.store, POD_GROUP, pod_group, next_status(pod_group, pods))

    def _served(self) -> bool:
        """Whether the PodGroup CRD is established (custom objects exist only while it is)."""
        return self.store.custom.definition(POD_GROUP) is not None  # a lookup: asked at every pod write

    def _pod_groups(self) -> list[dict]:
        return list(self.store.iter_all(POD_GROUP)) if self._served() else []


__all__ = ["PodGroupController"]
