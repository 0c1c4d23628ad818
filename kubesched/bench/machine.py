"""The machine a benchmark ran on, recorded with every JSON result: figures from different
machines (or from one machine under different loads) are not comparable without it."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any


def cpu_count() -> int:
    """Cores this process may run on (its affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What the figures depend on: cores usable by this process, CPU model, Python and numpy."""
    import numpy as np

    return {"cpus": cpu_count(), "cpu_model": cpu_model(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "numpy": np.__version__,
            "platform": f"{sys.platform} {platform.release()}", "pid": os.getpid()}
