"""The NodeAffinity plugin (upstream ``framework/plugins/nodeaffinity``)."""

from kubesched.scheduler.plugins.names import NodeAffinity as Name
from kubesched.scheduler.plugins.nodeaffinity.node_affinity import NodeAffinity

__all__ = ["Name", "NodeAffinity"]
