"""merge_plugins: upstream TestMergePlugins, case by case."""

from __future__ import annotations

import pytest

from kubesched.scheduler.config.defaults import merge_plugin_set, merge_plugins
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet


def _set(enabled: list = (), disabled: list = ()) -> PluginSet:
    def refs(items: list) -> list[PluginRef]:
        return [PluginRef(*i) if isinstance(i, tuple) else PluginRef(i) for i in items]

    return PluginSet(enabled=refs(list(enabled)), disabled=refs(list(disabled)))


def _filter(enabled: list = (), disabled: list = ()) -> Plugins:
    plugins = Plugins()
    plugins.points["filter"] = _set(enabled, disabled)
    return plugins


def _multi(enabled: list = (), disabled: list = (), score_disabled: list = ()) -> Plugins:
    plugins = Plugins(multi_point=_set(enabled, disabled))
    plugins.points["score"] = _set((), score_disabled)
    return plugins


CASES = [
    ("AppendCustomPlugin", _filter(["CustomPlugin"]), _filter(["DefaultPlugin1", "DefaultPlugin2"]),
     _filter(["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"])),
    ("InsertAfterDefaultPlugins2", _filter(["CustomPlugin", "DefaultPlugin2"], ["DefaultPlugin2"]),
     _filter(["DefaultPlugin1", "DefaultPlugin2"]),
     _filter(["DefaultPlugin1", "CustomPlugin", "DefaultPlugin2"], ["DefaultPlugin2"])),
    ("InsertBeforeAllPlugins", _filter(["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"], ["*"]),
     _filter(["DefaultPlugin1", "DefaultPlugin2"]),
     _filter(["CustomPlugin", "DefaultPlugin1", "DefaultPlugin2"], ["*"])),
    ("ReorderDefaultPlugins", _filter(["DefaultPlugin2", "DefaultPlugin1"], ["*"]),
     _filter(["DefaultPlugin1", "DefaultPlugin2"]),
     _filter(["DefaultPlugin2", "DefaultPlugin1"], ["*"])),
    ("ApplyNilCustomPlugin", None, _filter(["DefaultPlugin1", "DefaultPlugin2"]),
     _filter(["DefaultPlugin1", "DefaultPlugin2"])),
    ("CustomPluginOverrideDefaultPlugin", _filter([("Plugin1", 2), ("Plugin3", 3)]), _filter(["Plugin1", "Plugin2", "Plugin3"]),
     _filter([("Plugin1", 2), "Plugin2", ("Plugin3", 3)])),
    ("OrderPreserveAfterOverride", _filter([("Plugin2", 2), ("Plugin1", 1)]), _filter(["Plugin1", "Plugin2", "Plugin3"]),
     _filter([("Plugin1", 1), ("Plugin2", 2), "Plugin3"])),
    ("RepeatedCustomPlugin", _filter(["Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4)]), _filter(["Plugin1", "Plugin2", "Plugin3"]),
     _filter(["Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2)])),
    ("Append custom MultiPoint plugin", _multi(["CustomPlugin"]), _multi(["DefaultPlugin1", "DefaultPlugin2"]),
     _multi(["DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"])),
    ("Append disabled Multipoint plugins", _multi(["CustomPlugin", "CustomPlugin2"], ["DefaultPlugin2"], ["CustomPlugin2"]),
     _multi(["DefaultPlugin1", "DefaultPlugin2"]),
     _multi(["DefaultPlugin1", "CustomPlugin", "CustomPlugin2"], ["DefaultPlugin2"], ["CustomPlugin2"])),
    ("override default MultiPoint plugins with custom value", _multi([("DefaultPlugin", 5)]), _multi(["DefaultPlugin"]),
     _multi([("DefaultPlugin", 5)])),
    ("disabled MultiPoint plugin in default set", _multi(["CustomPlugin"]), _multi(["DefaultPlugin"], ["DefaultPlugin2"]),
     _multi(["DefaultPlugin", "CustomPlugin"], ["DefaultPlugin2"])),
    ("disabled MultiPoint plugin in default set for specific extension point", _multi(["CustomPlugin"]),
     _multi(["DefaultPlugin"], score_disabled=["DefaultPlugin2"]),
     _multi(["DefaultPlugin", "CustomPlugin"], score_disabled=["DefaultPlugin2"])),
    ("multipoint with only disabled gets merged", _multi(disabled=["DefaultPlugin"]), _multi(["DefaultPlugin"]),
     _multi(disabled=["DefaultPlugin"])),
]


@pytest.mark.parametrize(("name", "custom", "default", "expected"), CASES, ids=[c[0] for c in CASES])
def test_merge_plugins(name: str, custom: Plugins | None, default: Plugins, expected: Plugins) -> None:
    assert merge_plugins(default, custom) == expected


def test_merge_does_not_modify_its_inputs() -> None:
    default, custom = _filter(["A", "B"]), _filter([("A", 3)], ["B"])
    merge_plugins(default, custom)
    assert default == _filter(["A", "B"]) and custom == _filter([("A", 3)], ["B"])


@pytest.mark.parametrize(("custom", "expected"), [
    (_set(disabled=["*"]), _set(disabled=["*"])),
    (_set(["X"], ["*"]), _set(["X"], ["*"])),
    (_set(disabled=["B"]), _set(["A", "C"], ["B"])),
])
def test_star_disables_every_default(custom: PluginSet, expected: PluginSet) -> None:
    assert merge_plugin_set(_set(["A", "B", "C"]), custom) == expected
