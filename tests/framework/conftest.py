"""Building one profile's Framework around test plugins, over a small node table."""

from __future__ import annotations

from collections.abc import Iterable

from kubesched.scheduler.backend.cache import Cache
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from kubesched.scheduler.framework.interface import Plugin
from kubesched.scheduler.framework.runtime import Framework, FrameworkOptions, HandleContext
from kubesched.scheduler.metrics import Metrics
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.utils.clock import ManualClock
from tests.helpers import make_node


def build_framework(*plugins: type[Plugin], nodes: Iterable[str] = ("n1", "n2"), metrics: Metrics | None = None,
                    nominator: object = None, options: FrameworkOptions | None = None) -> tuple[Framework, NodeTable]:
    """``plugins`` at every point they implement, after PrioritySort and before DefaultBinder."""
    cache = Cache(ManualClock())
    for name in nodes:
        cache.add_node(make_node(name))
    table = cache.update_snapshot()
    registry = {**in_tree_registry(), **{p.name: p for p in plugins}}
    refs = [PluginRef("PrioritySort"), *(PluginRef(p.name, 1) for p in plugins), PluginRef("DefaultBinder")]
    ctx = HandleContext(clock=ManualClock(), snapshot=lambda: table, metrics=metrics, nominator=nominator)
    return Framework(registry, Profile(plugins=Plugins(multi_point=PluginSet(refs))), ctx, options), table
