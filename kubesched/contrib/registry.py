"""The bundled scheduler-plugins, by name: what every command merges with the in-tree registry
(``kubesched.cli.common.registry_from``), so a configuration naming ``Coscheduling`` needs no
``--plugin`` flag. They are kept apart from the in-tree plugins: upstream ships them in another
image, and the framework never special-cases them.
"""

from __future__ import annotations

from kubesched.contrib.capacityscheduling import CapacityScheduling
from kubesched.contrib.coscheduling import Coscheduling
from kubesched.contrib.qossort import QOSSort
from kubesched.scheduler.framework.interface import Plugin
from kubesched.scheduler.framework.registry import Registry

#: Every bundled scheduler-plugins plugin, by name order.
CONTRIB_PLUGINS: tuple[type[Plugin], ...] = (
    CapacityScheduling,
    Coscheduling,
    QOSSort,
)


def contrib_registry() -> Registry:
    """Every bundled plugin, by its upstream name."""
    return {cls.name: cls for cls in CONTRIB_PLUGINS}


__all__ = ["CONTRIB_PLUGINS", "contrib_registry"]
