"""The garbage collector's settings: tuned for a ``kubesched`` process, left alone for callers."""

from __future__ import annotations

import gc
import subprocess
import sys

from kubesched.cli.main import main
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
