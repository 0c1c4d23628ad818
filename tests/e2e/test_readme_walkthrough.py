"""The README's kubectl walkthrough is a tested document: every ``$ kubectl ...`` in its ``console``
blocks runs, in order, against one ``kubesched up``, and prints what the README shows.

How a shown output is read:

- columns are compared as words (kubectl pads them to the widest cell), and a word that is an age
  (``2s``, ``5m3s``) matches any age;
- a line ``...`` stands for any number of lines (long outputs are shown in part);
- read-only commands (``get``, ``describe``, ``events``, ``explain``) are retried until their output
  matches or 20 s pass: the cluster settles asynchronously (scheduling, the fake kubelet, events).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_kubectl import Up

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KUBECTL = shutil.which("kubectl")
BLOCK = re.compile(r"```console\n(?P<body>\$ kubectl .*?)```", re.S)
AGE = re.compile(r"^(\d+(ms|s|m|h|d))+$")
READ_ONLY = ("get", "describe", "events", "explain")
SETTLE_SECONDS = 20.0

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def walkthrough() -> list[tuple[str, list[str]]]:
    """The README's kubectl commands with the output lines it shows for each, in page order."""
    steps: list[tuple[str, list[str]]] = []
    for block in BLOCK.finditer(README.read_text()):
        for line in block["body"].rstrip("\n").split("\n"):
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    return steps


def _line_pattern(expected: str) -> re.Pattern[str]:
    words = [r"\S+" if AGE.match(word) else re.escape(word) for word in expected.split()]
    return re.compile(r"\s*" + r"\s+".join(words) + r"\s*$")


def matches(expected: list[str], printed: list[str]) -> bool:
    """Whether ``printed`` is what ``expected`` shows (``...`` lines match any run of lines)."""
    def match_from(e: int, p: int) -> bool:
        while e < len(expected) and expected[e] != "...":
            if p >= len(printed) or not _line_pattern(expected[e]).match(printed[p]):
                return False
            e, p = e + 1, p + 1
        if e == len(expected):
            return p == len(printed)
        return any(match_from(e + 1, q) for q in range(p, len(printed) + 1))

    return match_from(0, 0)


def trimmed(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.parametrize(("expected", "printed", "verdict"), [
    (["NAME  AGE", "web   2s"], ["NAME   AGE", "web    5m3s"], True),
    (["NAME  AGE", "web   2s"], ["NAME   AGE", "api    2s"], False),
    (["a", "...", "z"], ["a", "b", "c", "z"], True),
    (["a", "...", "z"], ["a", "z"], True),
    (["a", "...", "z"], ["a", "b"], False),
    (["a"], ["a", "b"], False),
    (["a", ""], ["a", ""], True),
], ids=["ages-and-padding", "other-words", "ellipsis-skips-lines", "ellipsis-skips-nothing", "missing-tail",
        "extra-lines", "blank-lines-count"])
def test_how_a_shown_output_is_read(expected, printed, verdict):
    assert matches(expected, printed) is verdict


def test_the_readme_has_a_kubectl_walkthrough():
    commands = [command.split()[1] for command, _ in walkthrough()]
    assert {"apply", "get", "describe", "events", "explain"} <= set(commands)


@pytest.fixture(scope="module")
def up(tmp_path_factory) -> Iterator[Up]:
    cluster = Up(tmp_path_factory.mktemp("readme"))
    cluster.start()
    yield cluster
    cluster.stop()


def run(up: Up, command: str) -> list[str]:
    argv = shlex.split(command)
    assert argv[0] == "kubectl" and KUBECTL is not None
    result = subprocess.run([KUBECTL, *argv[1:]], capture_output=True, text=True, timeout=60, cwd=ROOT,
                            env={**os.environ, "KUBECONFIG": str(up.kubeconfig)})
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return trimmed(result.stdout)


def test_the_walkthrough_prints_what_the_readme_shows(up):
    for command, expected in walkthrough():
        printed = run(up, command)
        deadline = time.monotonic() + SETTLE_SECONDS
        while not matches(trimmed("\n".join(expected)), printed) and command.split()[1] in READ_ONLY \
                and time.monotonic() < deadline:
            time.sleep(0.2)
            printed = run(up, command)
        assert matches(trimmed("\n".join(expected)), printed), \
            f"$ {command}\nthe README shows:\n" + "\n".join(expected) + "\nkubectl printed:\n" + "\n".join(printed)
