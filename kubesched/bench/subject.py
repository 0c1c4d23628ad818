"""The kubesched processes a whole-process benchmark measures (``kubesched run``, ``up``,
``simulate``), and which source tree they run.

A whole-process row is timed by a harness in this tree, but the process it times may come from
another tree: ``python -m kubesched.bench.compare_revisions`` sets ``KUBESCHED_BENCH_SUBJECT`` to
the reference revision's checkout, so that a row this tree added can still measure the reference
revision's ``kubesched run``. Unset, the subject is the tree this module is imported from.
"""

from __future__ import annotations

import os
import subprocess
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


def compile_tree() -> None:
    """Byte-compile the subject's ``kubesched`` package in place (``__pycache__``, ignored by git), as
    ``pip install`` does: with ``PYTHONDONTWRITEBYTECODE`` set, as on the development machines, every
    start would otherwise compile its sources again (about 0.3 s of CPU), which no installed
    kubesched does."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(subject_tree() / "kubesched")], check=True,
                   stdout=subprocess.DEVNULL)


def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a subject process: the subject tree first on ``PYTHONPATH``."""
    inherited = os.environ.get("PYTHONPATH", "")
    path = os.pathsep.join(filter(None, [str(subject_tree()), inherited]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}
