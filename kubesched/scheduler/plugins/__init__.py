"""In-tree plugins, one module each, named after the plugin (``node_resources_fit`` is NodeResourcesFit).

Every public module of this package is imported and each Plugin subclass it defines with a
``name`` is registered, so adding a plugin is adding its module.
"""

from __future__ import annotations

import importlib
import pkgutil

from kubesched.scheduler.framework.interface import Plugin


def _discover() -> list[type[Plugin]]:
    found: dict[str, type[Plugin]] = {}
    for module_info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        leaf = module_info.name.rpartition(".")[2]
        if leaf.startswith("_") or leaf == "names":
            continue
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Plugin) and value.name and value.__module__ == module.__name__:
                found[value.name] = value
    return [found[name] for name in sorted(found)]


IN_TREE_PLUGINS: list[type[Plugin]] = _discover()

__all__ = ["IN_TREE_PLUGINS"]
