"""Informer event handlers: cluster changes into the cache and the scheduling queue
(upstream ``eventhandlers.go``).

Assigned pods (any scheduler) go to the cache; unassigned pods whose ``schedulerName`` has a
profile go to the queue; node changes and other objects plugins registered for become cluster
events that may move unschedulable pods back.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from kubesched.api.types import PodInfo
from kubesched.client.informers import Handler, parse_custom_resource
from kubesched.scheduler.framework import events as ev

if TYPE_CHECKING:
    from kubesched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)

#: Kinds whose changes are cluster events for plugins, by EventResource name.
KIND_OF_RESOURCE = {
    ev.Resource.PersistentVolume: "PersistentVolume",
    ev.Resource.PersistentVolumeClaim: "PersistentVolumeClaim",
    ev.Resource.StorageClass: "StorageClass",
    ev.Resource.CSINode: "CSINode",
    ev.Resource.CSIDriver: "CSIDriver",
    ev.Resource.VolumeAttachment: "VolumeAttachment",
    ev.Resource.CSIStorageCapacity: "CSIStorageCapacity",
    ev.Resource.ResourceClaim: "ResourceClaim",
    ev.Resource.ResourceSlice: "ResourceSlice",
    ev.Resource.DeviceClass: "DeviceClass",
    ev.Resource.Workload: "Workload",
}


def _assigned(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class EventHandlers:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        #: The labelled children of ``event_handling_duration_seconds``, by event (not by its label,
        #: which is spelled anew on every read).
        self._latency: dict[ev.ClusterEvent, Any] = {}

    def _observe(self, event: ev.ClusterEvent, start: float) -> None:
        """``event_handling_duration_seconds{event}``: time since ``start`` (``time.perf_counter()``)."""
        child = self._latency.get(event)
        if child is None:
            child = self._latency[event] = self.sched.metrics.event_handling_duration.labels(event.label)
        child.observe(time.perf_counter() - start)

    def register(self) -> None:
        informers = self.sched.informers
        informers.informer("Pod").add_handler(Handler(self._pod_added, self._pod_updated, self._pod_deleted))
        informers.informer("Node").add_handler(Handler(self._node_added, self._node_updated, self._node_deleted))
        for resource in self.sched.registered_resources():
            kind = KIND_OF_RESOURCE.get(resource)
            if kind is None and parse_custom_resource(resource):
                kind = resource
            elif kind is not None and kind not in self.sched.watched_kinds():
                kind = None
            if kind is not None:
                informers.informer(kind).add_handler(self._generic_handler(resource))

    def resync(self, kind: str, obj: dict, *, present: bool) -> None:
        """Hand a Pod or Node the cache comparer found diverging to the handlers again: as an add
        when the informer holds it (an earlier handler error left it out), as a deletion when
        only the cache or the queue does."""
        if kind not in ("Pod", "Node"):
            raise ValueError(f"the cache holds no {kind} objects to resync")
        if present:
            (self._pod_added if kind == "Pod" else self._node_added)(obj, False)
        else:
            (self._pod_deleted if kind == "Pod" else self._node_deleted)(obj)

    # --- pods --------------------------------------------------------------------------------------
    def _responsible(self, pod: dict) -> bool:
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in self.sched.frameworks

    def _in_cache(self, pod: dict) -> bool:
        return _assigned(pod) and not _terminal(pod)

    def _in_queue(self, pod: dict) -> bool:
        return not _assigned(pod) and self._responsible(pod) and not _terminal(pod)

    def _pod_added(self, pod: dict, _initial: bool) -> None:
        if self.sched.workload_manager is not None:  # before the cache and the queue read it
            self.sched.workload_manager.add_pod(PodInfo(pod))
        if self._in_cache(pod):
            self._add_to_cache(pod)
        elif self._in_queue(pod):
            self._add_to_queue(pod)

    def _add_to_queue(self, pod: dict) -> None:
        start = time.perf_counter()
        self.sched.queue.add(PodInfo(pod))
        if self.sched.feature_gates.enabled("GangScheduling"):
            # The new pod may complete a gang whose other pods wait in PreEnqueue.
            self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_UNSCHEDULED_POD_ADD, None, pod)
        self._observe(ev.EVENT_UNSCHEDULED_POD_ADD, start)

    def _pod_updated(self, old: dict, new: dict) -> None:
        if self.sched.workload_manager is not None:
            self.sched.workload_manager.update_pod(PodInfo(old), PodInfo(new))
        old_cache, new_cache = self._in_cache(old), self._in_cache(new)
        old_queue = not old_cache and self._in_queue(old)
        new_queue = not new_cache and self._in_queue(new)
        if old_cache and new_cache:
            self._update_in_cache(old, new)
        elif new_cache:
            if old_queue:
                # A binding, not a removal: the binding cycle sends whatever notifications it needs.
                self.sched.queue.delete(PodInfo(old))
            self._add_to_cache(new)
        elif old_cache:
            self._delete_from_cache(old)
        if old_queue and new_queue:
            self._update_in_queue(old, new)
        elif new_queue:
            self._add_to_queue(new)
        elif old_queue and not new_cache:
            self._delete_from_queue(old)

    def _pod_deleted(self, pod: dict) -> None:
        if self.sched.workload_manager is not None:
            self.sched.workload_manager.delete_pod(PodInfo(pod))
        if self._in_cache(pod):
            self._delete_from_cache(pod)
        elif self._in_queue(pod):
            self._delete_from_queue(pod)

    def _add_to_cache(self, pod: dict) -> None:
        start = time.perf_counter()
        info = PodInfo(pod)
        try:
            self.sched.cache.add_pod(info)
        except Exception as e:
            log.error("scheduler cache AddPod failed: %s", e)
        # Upstream's queueing-hint path (1.35: always on): every unschedulable pod is offered to
        # its rejectors' hints, not only those an in-tree pre-filter thinks the pod could help.
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_ADD, None, pod)
        self._observe(ev.EVENT_ASSIGNED_POD_ADD, start)

    def _update_in_cache(self, old: dict, new: dict) -> None:
        start = time.perf_counter()
        cache = self.sched.cache
        old_info, new_info = PodInfo(old), PodInfo(new)
        if old_info.uid != new_info.uid:
            self._delete_from_cache(old)
            self._add_to_cache(new)
            return
        current = cache.get_pod(old_info.uid)
        try:
            if current is not None and cache.is_assumed(old_info.uid):
                cache.add_pod(new_info)
            else:
                cache.update_pod(current or old_info, new_info)
        except Exception as e:
            log.error("scheduler cache UpdatePod failed: %s", e)
        for event in ev.pod_scheduling_properties_change(new, old):
            self.sched.queue.move_all_to_active_or_backoff_queue(event, old, new)
            self._observe(event, start)
        self._observe(ev.EVENT_ASSIGNED_POD_UPDATE, start)

    def _delete_from_cache(self, pod: dict) -> None:
        start = time.perf_counter()
        info = PodInfo(pod)
        try:
            self.sched.cache.remove_pod(info)
        except Exception as e:
            log.error("scheduler cache RemovePod failed: %s", e)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod, None)
        self._observe(ev.EVENT_ASSIGNED_POD_DELETE, start)

    def _update_in_queue(self, old: dict, new: dict) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        start = time.perf_counter()
        if self.sched.api_dispatcher is not None:
            # Refreshes a queued status patch's view of the pod (the synced pod itself is not used, as upstream).
            self.sched.api_dispatcher.sync_object(new)
        new_info = PodInfo(new)
        if self.sched.cache.is_assumed(new_info.uid):
            return
        old_info = PodInfo(old)
        events = self.sched.queue.update(old_info, new_info)
        if old_info.nominated_node_name and old_info.nominated_node_name != new_info.nominated_node_name:
            # Lower-or-equal priority pods counted the pod as already on its old nominated node.
            self._nominee_left(old_info)
        for event in events:
            if event.label != ev.EVENT_UNSCHEDULED_POD_UPDATE.label:
                self._observe(event, start)
        self._observe(ev.EVENT_UNSCHEDULED_POD_UPDATE, start)

    def _delete_from_queue(self, pod: dict) -> None:
        start = time.perf_counter()
        info = PodInfo(pod)
        self.sched.queue.delete(info)
        fw = self.sched.frameworks.get(info.scheduler_name)
        if fw is not None and fw.reject_waiting_pod(info.uid):
            self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod, None)
        elif info.nominated_node_name:
            self._nominee_left(info)
        self._observe(ev.EVENT_UNSCHEDULED_POD_DELETE, start)

    def _nominee_left(self, pod: PodInfo) -> None:
        """A nominated pod left its node: to the lower-or-equal priority pods that counted it there,
        that is an assigned pod's deletion (upstream ``getLEPriorityPreCheck``)."""
        priority = pod.priority
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod.pod, None,
                                                             lambda p: p.priority <= priority)

    # --- nodes -------------------------------------------------------------------------------------
    def _node_added(self, node: dict, _initial: bool) -> None:
        start = time.perf_counter()
        self.sched.cache.add_node(node)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_NODE_ADD, None, node)
        self._observe(ev.EVENT_NODE_ADD, start)

    def _node_updated(self, old: dict, new: dict) -> None:
        start = time.perf_counter()
        self.sched.cache.update_node(old, new)
        for event in ev.node_scheduling_properties_change(new, old):
            self.sched.queue.move_all_to_active_or_backoff_queue(event, old, new)
            self._observe(event, start)

    def _node_deleted(self, node: dict) -> None:
        start = time.perf_counter()
        try:
            self.sched.cache.remove_node(node)
        except Exception as e:
            log.error("scheduler cache RemoveNode failed: %s", e)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_NODE_DELETE, node, None)
        self._observe(ev.EVENT_NODE_DELETE, start)

    # --- other objects -----------------------------------------------------------------------------
    def _generic_handler(self, resource: str) -> Handler:
        queue = self.sched.queue
        add, update, delete = (ev.ClusterEvent(resource, action) for action in (ev.ActionType.Add, ev.ActionType.Update, ev.ActionType.Delete))

        def added(obj: dict, _initial: bool) -> None:
            start = time.perf_counter()
            queue.move_all_to_active_or_backoff_queue(add, None, obj)
            self._observe(add, start)

        def updated(old: dict, new: dict) -> None:
            start = time.perf_counter()
            queue.move_all_to_active_or_backoff_queue(update, old, new)
            self._observe(update, start)

        def deleted(obj: dict) -> None:
            start = time.perf_counter()
            queue.move_all_to_active_or_backoff_queue(delete, obj, None)
            self._observe(delete, start)

        return Handler(added, updated, deleted)
