"""The kubesched processes a whole-process benchmark measures (``kubesched run``, ``up``,
``simulate``), and which source tree they run.

A whole-process row is timed by a harness in this tree, but the process it times may come from
another tree: ``python -m kubesched.bench.compare_revisions`` sets ``KUBESCHED_BENCH_SUBJECT`` to
the reference revision's checkout, so that a row this tree added can still measure the reference
revision's ``kubesched run``. Unset, the subject is the tree this module is imported from.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

#: The environment variable naming the source tree whose ``kubesched`` the subject runs.
SUBJECT_ENV = "KUBESCHED_BENCH_SUBJECT"


def subject_tree() -> Path:
    """The tree the measured processes import ``kubesched`` from."""
    named = os.environ.get(SUBJECT_ENV)
    return Path(named) if named else Path(__file__).resolve().parents[2]


def command(*args: str) -> list[str]:
    """``python -m kubesched ARGS`` with this interpreter; ``-P`` keeps the working directory off
    ``sys.path``, which ``-m`` would otherwise put before ``PYTHONPATH`` (and with it the subject)."""
    return [sys.executable, "-P", "-m", "kubesched", *args]


def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a subject process: the subject tree first on ``PYTHONPATH``."""
    inherited = os.environ.get("PYTHONPATH", "")
    path = os.pathsep.join(filter(None, [str(subject_tree()), inherited]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}
