"""A real browser (Debian's Chromium, driven by Playwright) and a ``kubesched up`` cluster for it.

Chromium comes from the machine's packages: when ``/usr/bin/chromium`` is missing, the session
installs it with ``apt-get`` (as root, which CI is); Playwright's own browser downloads are never
used. Screenshots go to ``$KUBESCHED_TEST_ARTIFACTS/ui`` (default ``build/test-artifacts/ui``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, Playwright, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
#: What lets Chromium run headless here: as root (no sandbox), without a GPU, and with none of the
#: background traffic (updates, sync, QUIC probing) a fresh profile starts.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
START_TIMEOUT = 60.0


def ensure_chromium() -> Path:
    """Debian's Chromium, installed with apt-get when absent; a clear failure when it cannot be."""
    if CHROMIUM.exists():
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: install it with `apt-get install -y chromium` "
                    "(as root; this session cannot: " + ("no apt-get" if apt is None else "not root") + ")")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", "chromium"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"installing Chromium for the browser tests failed: `{' '.join(command)}` exited with "
                        f"{done.returncode}:\n{done.stderr[-2000:]}")
    if not CHROMIUM.exists():
        pytest.fail(f"apt-get installed the chromium package but {CHROMIUM} does not exist")
    return CHROMIUM


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("KUBESCHED_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[BrowserContext]:
    """Chromium with a fresh profile (trusting the cluster's self-signed certificate)."""
    ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="kubesched-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, ignore_https_errors=True,
            viewport={"width": 1400, "height": 900})
        try:
            yield context
        finally:
            context.close()


@dataclass
class UpCluster:
    """A ``kubesched up`` process: its web UI link (one-time login) and the kubeconfig it wrote."""

    process: subprocess.Popen
    ui_link: str
    kubeconfig: Path
    banner: str


def start_up(files: list[str], folder: Path, extra: tuple[str, ...] = ()) -> UpCluster:
    """Run ``kubesched up -f FILES`` on a free port; return once its banner is printed."""
    kubeconfig = folder / "kubeconfig.yaml"
    command = [sys.executable, "-m", "kubesched", "up", "--port", "0", "--seed", "1", "--kubeconfig-out", str(kubeconfig),
               *[a for f in files for a in ("-f", f)], *extra]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("running:"):
            break
    banner = "".join(lines)
    found = re.search(r"^web UI: (\S+)", banner, re.MULTILINE)
    if found is None:
        process.kill()
        raise AssertionError(f"kubesched up printed no web UI line:\n{banner}")
    return UpCluster(process, found.group(1), kubeconfig, banner)


def stop_up(cluster: UpCluster) -> None:
    cluster.process.terminate()
    try:
        cluster.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        cluster.process.kill()
        cluster.process.wait()


@pytest.fixture(scope="module")
def example_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpCluster]:
    cluster = start_up(["examples/cluster"], tmp_path_factory.mktemp("up"))
    try:
        yield cluster
    finally:
        stop_up(cluster)


class ConsoleLog:
    """Errors the page logged or threw (a test ends by checking there were none)."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)
