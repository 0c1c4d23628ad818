"""The NodeUnschedulable plugin (upstream ``framework/plugins/nodeunschedulable``)."""

from kubesched.scheduler.plugins.names import NodeUnschedulable as Name
from kubesched.scheduler.plugins.nodeunschedulable.node_unschedulable import NodeUnschedulable

__all__ = ["Name", "NodeUnschedulable"]
