"""The garbage collector's settings and numpy's BLAS pool: tuned for a ``kubesched`` process, left alone
for callers."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

from kubesched.cli.main import main
from kubesched.utils.blas import POOL_SIZE_VARIABLES
from kubesched.utils.heap import YOUNG_THRESHOLD


def test_the_command_line_process_freezes_its_start_up_heap_and_collects_young_objects_less_often() -> None:
    probe = ("import gc, sys; from kubesched.cli.main import main; sys.argv = ['kubesched', 'config', 'defaults'];"
             "code = main(); print(gc.get_threshold()[0], gc.get_freeze_count() > 0, code, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stderr.split() == [str(YOUNG_THRESHOLD), "True", "0"]


def test_a_caller_passing_arguments_keeps_its_own_settings(capsys) -> None:
    before = gc.get_threshold(), gc.get_freeze_count()
    assert main(["config", "defaults"]) == 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def _command_line_probe(env: dict[str, str]) -> list[str]:
    """What a ``kubesched config defaults`` process saw: numpy loaded before ``main`` ran (it must not
    be, or its BLAS pool is already started), and the pool size numpy would read after."""
    probe = ("import os, sys; from kubesched.cli.main import main; early = 'numpy' in sys.modules;"
             "sys.argv = ['kubesched', 'config', 'defaults']; code = main();"
             "print(early, os.environ['OPENBLAS_NUM_THREADS'], code, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                          env=env)
    return done.stderr.split()


def test_the_command_line_process_asks_numpy_for_one_blas_thread_before_numpy_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k not in POOL_SIZE_VARIABLES}
    assert _command_line_probe(env) == ["False", "1", "0"]


def test_a_blas_pool_size_the_user_set_stands() -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "3"}
    assert _command_line_probe(env) == ["False", "3", "0"]
