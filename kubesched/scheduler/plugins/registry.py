"""The in-tree plugins, listed explicitly (upstream ``framework/plugins/registry.go``,
``NewInTreeRegistry``).

Adding an in-tree plugin is adding its package and one line here. Out-of-tree plugins
(``--plugin module:Class`` or ``--plugin path/to/file.py``) are merged into this registry by
``kubesched.scheduler.framework.registry.load_out_of_tree`` and ``merge``.
"""

from __future__ import annotations

from kubesched.scheduler.framework.interface import Plugin
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.plugins.defaultbinder import DefaultBinder
from kubesched.scheduler.plugins.defaultpreemption import DefaultPreemption
from kubesched.scheduler.plugins.dynamicresources import DynamicResources
from kubesched.scheduler.plugins.gangscheduling import GangScheduling
from kubesched.scheduler.plugins.imagelocality import ImageLocality
from kubesched.scheduler.plugins.interpodaffinity import InterPodAffinity
from kubesched.scheduler.plugins.nodeaffinity import NodeAffinity
from kubesched.scheduler.plugins.nodename import NodeName
from kubesched.scheduler.plugins.nodeports import NodePorts
from kubesched.scheduler.plugins.noderesources import NodeResourcesBalancedAllocation, NodeResourcesFit
from kubesched.scheduler.plugins.nodeunschedulable import NodeUnschedulable
from kubesched.scheduler.plugins.nodevolumelimits import NodeVolumeLimits
from kubesched.scheduler.plugins.podtopologyspread import PodTopologySpread
from kubesched.scheduler.plugins.queuesort import PrioritySort
from kubesched.scheduler.plugins.schedulinggates import SchedulingGates
from kubesched.scheduler.plugins.tainttoleration import TaintToleration
from kubesched.scheduler.plugins.volumebinding import VolumeBinding
from kubesched.scheduler.plugins.volumerestrictions import VolumeRestrictions
from kubesched.scheduler.plugins.volumezone import VolumeZone

#: Every in-tree plugin, by name order.
IN_TREE_PLUGINS: tuple[type[Plugin], ...] = (
    DefaultBinder,
    DefaultPreemption,
    DynamicResources,
    GangScheduling,
    ImageLocality,
    InterPodAffinity,
    NodeAffinity,
    NodeName,
    NodePorts,
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeUnschedulable,
    NodeVolumeLimits,
    PodTopologySpread,
    PrioritySort,
    SchedulingGates,
    TaintToleration,
    VolumeBinding,
    VolumeRestrictions,
    VolumeZone,
)


def in_tree_registry() -> Registry:
    """Every in-tree plugin, by name: the registry a scheduler starts from."""
    return {cls.name: cls for cls in IN_TREE_PLUGINS}


def trusted_score_ranges(registry: Registry) -> frozenset[str]:
    """Names ``registry`` binds to the in-tree plugin of that name. kubesched's own tests cover
    that their normalized scores stay in [0, 100], so the framework may skip that check for them
    (``FrameworkOptions.trusted_score_ranges``); any other factory, under any name, stays checked
    as upstream checks every plugin."""
    in_tree = in_tree_registry()
    return frozenset(name for name, factory in registry.items() if in_tree.get(name) is factory)


__all__ = ["IN_TREE_PLUGINS", "in_tree_registry", "trusted_score_ranges"]
