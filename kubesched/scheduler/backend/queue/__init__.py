"""The scheduling queue: activeQ, backoffQ, unschedulablePods and the nominator (upstream ``backend/queue``)."""

from kubesched.scheduler.backend.queue.scheduling_queue import DEFAULT_POD_MAX_IN_UNSCHEDULABLE, QueueProfile, SchedulingQueue
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo

__all__ = ["DEFAULT_POD_MAX_IN_UNSCHEDULABLE", "QueueProfile", "QueuedPodInfo", "SchedulingQueue"]
