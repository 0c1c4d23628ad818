"""Profiles and plugins shared by the scheduler-level tests."""

from __future__ import annotations

from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile, SchedulerConfiguration

CORE = ["SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName", "NodeResourcesFit", "DefaultBinder"]


def core_config(*extra: str, weights: dict[str, int] | None = None, name: str = "default-scheduler") -> SchedulerConfiguration:
    """The core plugin set ``CORE`` (plus ``extra`` plugins at every point they implement)."""
    weights = {"NodeResourcesFit": 1, **(weights or {})}
    refs = [PluginRef(n, weights.get(n, 0)) for n in (*CORE, *extra)]
    profile = Profile(scheduler_name=name, plugins=Plugins(multi_point=PluginSet(refs)))
    return SchedulerConfiguration(profiles=[profile])
