"""The API server's Unix socket directories: one left by a server that was killed (a real
process, SIGKILL) is removed by the next server; a live server's, one made just now and a file
that only has the name are left alone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubesched.apiserver.unixsocket import ABANDONED_AFTER, PREFIX, SOCKET_NAME, remove_abandoned_socket_dirs

LISTENER = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen()
print("listening", flush=True)
sys.stdin.read()
"""


def _listening_child(path: Path) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", LISTENER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "listening"
    return child


def _socket_dir(parent: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))


def test_the_directory_of_a_killed_server_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    killed, live, young = _socket_dir(tmp_path), _socket_dir(tmp_path), _socket_dir(tmp_path)
    (tmp_path / f"{PREFIX}not-a-directory").write_text("")
    dead = _listening_child(killed / SOCKET_NAME)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    assert (killed / SOCKET_NAME).exists()  # SIGKILL left the socket and its directory behind
    alive = _listening_child(live / SOCKET_NAME)
    try:
        later = time.time() + ABANDONED_AFTER + 1
        os.utime(young, (later, later))  # made just now, as far as the check can tell: no socket yet
        assert remove_abandoned_socket_dirs(tmp_path, now=later) == [killed]
        assert not killed.exists() and live.exists() and young.exists()
        assert (tmp_path / f"{PREFIX}not-a-directory").exists()
    finally:
        alive.stdin.close()  # type: ignore[union-attr]
        alive.wait()


def test_a_fresh_directory_without_its_socket_yet_is_not_taken_for_abandoned(tmp_path: Path) -> None:
    starting = _socket_dir(tmp_path)
    assert remove_abandoned_socket_dirs(tmp_path) == []
    assert starting.exists()


def test_the_probe_tells_a_listening_socket_from_a_dead_one(tmp_path: Path) -> None:
    directory = _socket_dir(tmp_path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(directory / SOCKET_NAME))
        server.listen()
        assert remove_abandoned_socket_dirs(tmp_path, now=time.time() + ABANDONED_AFTER + 1) == []
    assert remove_abandoned_socket_dirs(tmp_path, now=time.time() + ABANDONED_AFTER + 1) == [directory]
