"""In-tree plugins, one module each, named after the plugin (``node_resources_fit`` is NodeResourcesFit)."""

from kubesched.plugins.default_binder import DefaultBinder
from kubesched.plugins.node_name import NodeName
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.plugins.node_unschedulable import NodeUnschedulable
from kubesched.plugins.priority_sort import PrioritySort
from kubesched.plugins.scheduling_gates import SchedulingGates

IN_TREE_PLUGINS: list[type] = [
    SchedulingGates,
    PrioritySort,
    NodeUnschedulable,
    NodeName,
    NodeResourcesFit,
    DefaultBinder,
]

__all__ = ["IN_TREE_PLUGINS"]
