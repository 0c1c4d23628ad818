"""The NodeName plugin (upstream ``framework/plugins/nodename``)."""

from kubesched.scheduler.plugins.names import NodeName as Name
from kubesched.scheduler.plugins.nodename.node_name import NodeName

__all__ = ["Name", "NodeName"]
