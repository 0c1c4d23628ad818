"""The NodePorts plugin (upstream ``framework/plugins/nodeports``)."""

from kubesched.scheduler.plugins.names import NodePorts as Name
from kubesched.scheduler.plugins.nodeports.node_ports import NodePorts

__all__ = ["Name", "NodePorts"]
