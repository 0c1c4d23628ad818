"""Regenerate the README's screenshots of the web UI (docs/images/ui-*.png) and of a report.

They are the ones the browser tests take: this runs ``tests/ui/test_webui.py`` (which starts
``kubesched up -f examples/cluster --seed 1`` and drives Debian's Chromium, installing it with
apt-get when it is missing) and ``tests/ui/test_scenarios.py``'s scenario run, and copies the
cluster view, a pod's explanation and a scenario's progress into docs/images.

    python scripts/ui_screenshots.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOTS = {"cluster.png": "ui-cluster.png", "pod-explanation.png": "ui-explanation.png",
         "compare-report.png": "compare-report.png", "scenario-drained.png": "ui-scenario.png"}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kubesched-ui-") as artifacts:
        env = {**os.environ, "KUBESCHED_TEST_ARTIFACTS": artifacts}
        tests = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/ui/test_webui.py",
                 "tests/ui/test_report.py", "tests/ui/test_scenarios.py",
                 "-k", "cluster_view or explanation_marks or compare_report or drains_a_node"]
        done = subprocess.run(tests, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            print("the browser tests failed: screenshots not updated", file=sys.stderr)
            return done.returncode
        target = ROOT / "docs" / "images"
        target.mkdir(parents=True, exist_ok=True)
        for taken, kept in SHOTS.items():
            shutil.copyfile(Path(artifacts, "ui", taken), target / kept)
            print(f"wrote {target / kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
