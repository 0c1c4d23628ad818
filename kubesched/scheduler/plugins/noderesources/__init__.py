"""The NodeResourcesFit and NodeResourcesBalancedAllocation plugins (upstream
``framework/plugins/noderesources``). ``NodeResourcesFit`` filters and scores by requested
resources; ``NodeResourcesBalancedAllocation`` scores how evenly a node's resources would be used."""

from kubesched.scheduler.plugins.names import NodeResourcesBalancedAllocation as BalancedAllocationName
from kubesched.scheduler.plugins.names import NodeResourcesFit as Name
from kubesched.scheduler.plugins.noderesources.balanced_allocation import NodeResourcesBalancedAllocation
from kubesched.scheduler.plugins.noderesources.fit import NodeResourcesFit

__all__ = ["BalancedAllocationName", "Name", "NodeResourcesBalancedAllocation", "NodeResourcesFit"]
