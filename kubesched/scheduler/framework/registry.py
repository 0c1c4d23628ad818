"""Plugin registries: names mapped to factories (upstream ``runtime.Registry``).

A factory is called as ``factory(args, handle)`` and returns a plugin; a Plugin subclass is its
own factory. The in-tree registry (``kubesched.scheduler.plugins.registry``) is merged with out-of-tree plugins
the way ``app.WithPlugin`` does: a name may be registered only once.

Out-of-tree plugins come from ``--plugin`` specs (``load_out_of_tree``) or from installed
packages: every entry point of the ``kubesched.plugins`` group (``installed_plugins``) names one
plugin, ``Name = "module:Class"``, so ``pip install`` is all it takes to configure it by name.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from kubesched.api.errors import KubeschedError
from kubesched.scheduler.framework.interface import Plugin

PluginFactory = Callable[[Any, Any], Plugin]
Registry = dict[str, PluginFactory]


class RegistryError(KubeschedError, ValueError):
    pass


def merge(base: Mapping[str, PluginFactory], extra: Mapping[str, PluginFactory]) -> Registry:
    merged = dict(base)
    for name, factory in extra.items():
        if name in merged:
            raise RegistryError(f"a plugin named {name} already exists")
        merged[name] = factory
    return merged


def _import(module_name: str) -> ModuleType:
    """A module by dotted name, or from a ``.py`` file path (for plugins that are not installed)."""
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise RegistryError(f"plugin file {module_name!r} does not exist")
        # The resolved path's digest in the name keeps two files with the same stem apart in sys.modules.
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(f"kubesched_plugin_{path.stem}_{digest}", path)
        if spec is None or spec.loader is None:
            raise RegistryError(f"cannot load plugin file {module_name!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        raise RegistryError(f"cannot import plugin module {module_name!r}: {e}") from e


def load_out_of_tree(spec: str) -> Registry:
    """Plugins from ``package.module:Class`` or ``path/to/file.py:Class`` (without ``:Class``, the
    module's ``PLUGINS`` list)."""
    head, sep, tail = spec.rpartition(":")
    module_name, attr = (head, tail) if sep and tail.isidentifier() else (spec, "")
    module = _import(module_name)
    if attr:
        target = getattr(module, attr, None)
        if target is None:
            raise RegistryError(f"module {module_name!r} has no attribute {attr!r}")
        plugins = [target]
    else:
        plugins = list(getattr(module, "PLUGINS", []))
        if not plugins:
            raise RegistryError(f"module {module_name!r} defines no PLUGINS list; name a class with {module_name}:Class")
    out: Registry = {}
    for plugin in plugins:
        name = getattr(plugin, "name", "")
        if not name:
            raise RegistryError(f"plugin {plugin!r} has no name")
        out[name] = plugin
    return out


#: The entry-point group installed packages register their plugins in.
ENTRY_POINT_GROUP = "kubesched.plugins"


def installed_plugins(entry_points: Iterable[metadata.EntryPoint] | None = None) -> Registry:
    """The plugins installed packages declare in the ``kubesched.plugins`` entry-point group,
    each under its entry point's name (which must be the plugin's own ``name``)."""
    found = metadata.entry_points(group=ENTRY_POINT_GROUP) if entry_points is None else entry_points
    out: Registry = {}
    for entry in found:
        package = entry.dist.name if entry.dist is not None else "an installed package"
        where = f"plugin {entry.name} of {package} (entry point {entry.value!r} in group {ENTRY_POINT_GROUP})"
        try:
            plugin = entry.load()
        except Exception as e:
            raise RegistryError(f"{where} cannot be loaded: {type(e).__name__}: {e}") from e
        name = getattr(plugin, "name", "")
        if name != entry.name:
            raise RegistryError(f"{where} names a plugin called {name!r}: the entry point must be named after its plugin")
        if entry.name in out:
            raise RegistryError(f"{where}: a plugin named {entry.name} is installed twice")
        out[entry.name] = plugin
    return out


def args_type(factory: PluginFactory) -> type | None:
    """The typed args class a plugin declares (``Args``), used to decode, default and validate its config."""
    return getattr(factory, "Args", None)

