"""CycleState: data plugins share within one scheduling cycle of one pod.

Preemption and the nominated-pods filter clone it and let plugins update their PreFilter state
through AddPod/RemovePod, so a stored value that can change must implement ``clone()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubesched.api.types import PodInfo


class StateData(Protocol):
    def clone(self) -> StateData: ...


class CycleState:
    __slots__ = ("_data", "pods_to_activate", "record_plugin_metrics", "skip_filter_plugins", "skip_pre_bind_plugins",
                 "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        #: PreBind plugins whose PreBindPreFlight answered Skip: PreBind does not run them.
        self.skip_pre_bind_plugins: set[str] = set()
        self.record_plugin_metrics = False
        self.pods_to_activate: dict[str, PodInfo] = {}

    def read(self, key: str) -> Any:
        """The value stored under ``key``; raises KeyError (upstream ``ErrNotFound``) when absent."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def restore(self, saved: CycleState) -> None:
        """Replace what plugins wrote and skipped with a copy of ``saved``'s (a batched cycle takes
        over its predecessor's PreFilter and PreScore state; a fresh CycleState empties it). The
        metrics sampling and the pods to activate stay this cycle's."""
        self._data = {key: (value.clone() if hasattr(value, "clone") else value) for key, value in saved._data.items()}
        self.skip_filter_plugins = set(saved.skip_filter_plugins)
        self.skip_score_plugins = set(saved.skip_score_plugins)
        self.skip_pre_bind_plugins = set(saved.skip_pre_bind_plugins)

    def clone(self) -> CycleState:
        copy = CycleState()
        for key, value in self._data.items():
            clone = getattr(value, "clone", None)
            copy._data[key] = clone() if clone is not None else value
        copy.skip_filter_plugins = set(self.skip_filter_plugins)
        copy.skip_score_plugins = set(self.skip_score_plugins)
        copy.skip_pre_bind_plugins = set(self.skip_pre_bind_plugins)
        copy.record_plugin_metrics = self.record_plugin_metrics
        copy.pods_to_activate = self.pods_to_activate
        return copy
