"""Out-of-tree plugins loaded from files (``--plugin path/to/file.py:Class``)."""

from __future__ import annotations

import sys
from pathlib import Path

from kubesched.scheduler.framework.registry import load_out_of_tree

PLUGIN = '''
from kubesched.scheduler.framework.interface import FilterPlugin

class {cls}(FilterPlugin):
    name = "{cls}"

    def filter(self, state, pod, node_info):
        return None
'''


def test_two_plugin_files_with_the_same_name_stay_separate_modules(tmp_path: Path):
    loaded = []
    for cls in ("First", "Second"):
        path = tmp_path / cls / "plugin.py"
        path.parent.mkdir()
        path.write_text(PLUGIN.format(cls=cls))
        loaded.append(load_out_of_tree(f"{path}:{cls}")[cls])
    first, second = loaded
    assert first.__module__ != second.__module__
    assert sys.modules[first.__module__].First is first
    assert sys.modules[second.__module__].Second is second
