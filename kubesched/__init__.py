"""kubesched: a Kubernetes scheduler with kube-scheduler 1.35's behaviour, vectorised over nodes,
and an embedded cluster (in-memory or behind a Kubernetes-compatible API server) to run it on.

The public surface: the ``kubesched`` command; for notebooks and scripts, ``simulate``,
``simulate_async``, ``capacity`` and ``compare`` here (docs/python-api.md); for plugin authors,
``kubesched.testing.PluginHarness`` and the plugin interfaces in
``kubesched.scheduler.framework.interface``. Everything else is private. The packages are the
layers of the README's architecture section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["CapacityResult", "Comparison", "Simulation", "capacity", "compare", "simulate", "simulate_async"]

if TYPE_CHECKING:
    from kubesched.simulator.capacity import CapacityResult
    from kubesched.simulator.compare import Comparison
    from kubesched.simulator.python_api import Simulation, capacity, compare, simulate, simulate_async

#: Where each public name lives; imported on first use, so that ``import kubesched.api`` (and the
#: command's start) does not load the whole simulator.
_LOCATIONS = {
    "CapacityResult": "kubesched.simulator.capacity",
    "Comparison": "kubesched.simulator.compare",
    "Simulation": "kubesched.simulator.python_api",
    "capacity": "kubesched.simulator.python_api",
    "compare": "kubesched.simulator.python_api",
    "simulate": "kubesched.simulator.python_api",
    "simulate_async": "kubesched.simulator.python_api",
}


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'kubesched' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
