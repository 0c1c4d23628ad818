"""The NodeVolumeLimits plugin (upstream ``framework/plugins/nodevolumelimits``)."""

from kubesched.scheduler.plugins.names import NodeVolumeLimits as Name
from kubesched.scheduler.plugins.nodevolumelimits.node_volume_limits import NodeVolumeLimits

__all__ = ["Name", "NodeVolumeLimits"]
