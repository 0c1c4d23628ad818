"""The PrioritySort plugin (upstream ``framework/plugins/queuesort``)."""

from kubesched.scheduler.plugins.names import PrioritySort as Name
from kubesched.scheduler.plugins.queuesort.priority_sort import PrioritySort

__all__ = ["Name", "PrioritySort"]
