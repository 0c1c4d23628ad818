"""What the command line wrote, without the progress lines a slow machine adds.

A run that takes longer than ``kubesched.cli.progress.DELAY`` prints ``kubesched: PHASE: ...
elapsed`` lines on stderr. How long a run takes depends on the machine, so tests that compare
stderr exactly compare what is left once those lines are removed.
"""

from __future__ import annotations

import re

_PROGRESS_LINE = re.compile(r"^kubesched: .* elapsed\n", re.MULTILINE)


def without_progress(err: str) -> str:
    """``err`` less its plain progress lines."""
    return _PROGRESS_LINE.sub("", err)
