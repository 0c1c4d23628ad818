"""Informer event handlers: cluster changes into the cache and the scheduling queue
(upstream ``eventhandlers.go``).

Assigned pods (any scheduler) go to the cache; unassigned pods whose ``schedulerName`` has a
profile go to the queue; node changes and other objects plugins registered for become cluster
events that may move unschedulable pods back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kubesched.cluster.informers import Handler
from kubesched.framework import events as ev
from kubesched.framework.types import PodInfo

if TYPE_CHECKING:
    from kubesched.scheduler import Scheduler

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
}


def _assigned(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class EventHandlers:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    def register(self) -> None:
        informers = self.sched.informers
        informers.informer("Pod").add_handler(Handler(self._pod_added, self._pod_updated, self._pod_deleted))
        informers.informer("Node").add_handler(Handler(self._node_added, self._node_updated, self._node_deleted))
        for resource in self.sched.registered_resources():
            kind = KIND_OF_RESOURCE.get(resource)
            if kind is not None:
                informers.informer(kind).add_handler(self._generic_handler(resource))

    # --- pods --------------------------------------------------------------------------------------
    def _responsible(self, pod: dict) -> bool:
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in self.sched.frameworks

    def _in_cache(self, pod: dict) -> bool:
        return _assigned(pod) and not _terminal(pod)

    def _in_queue(self, pod: dict) -> bool:
        return not _assigned(pod) and self._responsible(pod) and not _terminal(pod)

    def _pod_added(self, pod: dict, _initial: bool) -> None:
        if self._in_cache(pod):
            self._add_to_cache(pod)
        elif self._in_queue(pod):
            self.sched.queue.add(PodInfo(pod))

    def _pod_updated(self, old: dict, new: dict) -> None:
        old_cache, new_cache = self._in_cache(old), self._in_cache(new)
        if old_cache and new_cache:
            self._update_in_cache(old, new)
        elif new_cache:
            if self._in_queue(old):
                self._delete_from_queue(old)
            self._add_to_cache(new)
        elif old_cache:
            self._delete_from_cache(old)
        old_queue, new_queue = self._in_queue(old), self._in_queue(new)
        if old_queue and new_queue:
            self._update_in_queue(old, new)
        elif new_queue:
            self.sched.queue.add(PodInfo(new))
        elif old_queue and not new_cache:
            self._delete_from_queue(old)

    def _pod_deleted(self, pod: dict) -> None:
        if self._in_cache(pod):
            self._delete_from_cache(pod)
        elif self._in_queue(pod):
            self._delete_from_queue(pod)

    def _add_to_cache(self, pod: dict) -> None:
        info = PodInfo(pod)
        try:
            self.sched.cache.add_pod(info)
        except Exception as e:
            log.error("scheduler cache AddPod failed: %s", e)
        self.sched.queue.assigned_pod_added(info)

    def _update_in_cache(self, old: dict, new: dict) -> None:
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
            self.sched.queue.assigned_pod_updated(old_info, new_info, event)

    def _delete_from_cache(self, pod: dict) -> None:
        info = PodInfo(pod)
        try:
            self.sched.cache.remove_pod(info)
        except Exception as e:
            log.error("scheduler cache RemovePod failed: %s", e)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod, None)

    def _update_in_queue(self, old: dict, new: dict) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        new_info = PodInfo(new)
        if self.sched.cache.is_assumed(new_info.uid):
            return
        self.sched.queue.update(PodInfo(old), new_info)

    def _delete_from_queue(self, pod: dict) -> None:
        info = PodInfo(pod)
        self.sched.queue.delete(info)
        fw = self.sched.frameworks.get(info.scheduler_name)
        if fw is not None and fw.reject_waiting_pod(info.uid):
            self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_ASSIGNED_POD_DELETE, pod, None)

    # --- nodes -------------------------------------------------------------------------------------
    def _node_added(self, node: dict, _initial: bool) -> None:
        self.sched.cache.add_node(node)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_NODE_ADD, None, node)

    def _node_updated(self, old: dict, new: dict) -> None:
        self.sched.cache.update_node(old, new)
        for event in ev.node_scheduling_properties_change(new, old):
            self.sched.queue.move_all_to_active_or_backoff_queue(event, old, new)

    def _node_deleted(self, node: dict) -> None:
        try:
            self.sched.cache.remove_node(node)
        except Exception as e:
            log.error("scheduler cache RemoveNode failed: %s", e)
        self.sched.queue.move_all_to_active_or_backoff_queue(ev.EVENT_NODE_DELETE, node, None)

    # --- other objects -----------------------------------------------------------------------------
    def _generic_handler(self, resource: str) -> Handler:
        queue = self.sched.queue

        def added(obj: dict, _initial: bool) -> None:
            queue.move_all_to_active_or_backoff_queue(ev.ClusterEvent(resource, ev.ActionType.Add), None, obj)

        def updated(old: dict, new: dict) -> None:
            queue.move_all_to_active_or_backoff_queue(ev.ClusterEvent(resource, ev.ActionType.Update), old, new)

        def deleted(obj: dict) -> None:
            queue.move_all_to_active_or_backoff_queue(ev.ClusterEvent(resource, ev.ActionType.Delete), obj, None)

        return Handler(added, updated, deleted)
