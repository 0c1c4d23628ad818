"""The scheduling queue: activeQ, backoffQ, unschedulablePods and the nominator (upstream ``backend/queue``)."""

from kubesched.backend.queue.scheduling_queue import QueueProfile, SchedulingQueue
from kubesched.backend.queue.types import QueuedPodInfo

__all__ = ["QueueProfile", "QueuedPodInfo", "SchedulingQueue"]
