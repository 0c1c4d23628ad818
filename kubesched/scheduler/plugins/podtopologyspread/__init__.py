"""The PodTopologySpread plugin (upstream ``framework/plugins/podtopologyspread``)."""

from kubesched.scheduler.plugins.names import PodTopologySpread as Name
from kubesched.scheduler.plugins.podtopologyspread.pod_topology_spread import PodTopologySpread

__all__ = ["Name", "PodTopologySpread"]
