"""The private directories of the API server's Unix sockets (``APIServer.listen_unix``).

Each server makes its own directory under the temporary directory (mode 0700, the socket inside
mode 0600) and removes it when it stops. A server that dies without stopping (SIGKILL, the OOM
killer) leaves its directory behind; the next server to open a socket removes those of this user
whose socket no longer accepts connections, so that repeated runs do not accumulate them.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

#: The name of every socket directory starts so.
PREFIX = "kubesched-api-"
#: The socket's name in its directory.
SOCKET_NAME = "api.sock"
#: Seconds a directory must have existed before it may be taken for abandoned: a server starting
#: right now has made its directory but not yet its socket.
ABANDONED_AFTER = 60.0


def make_socket_dir() -> Path:
    """A new private directory for a socket (mode 0700), after removing abandoned ones."""
    remove_abandoned_socket_dirs()
    return Path(tempfile.mkdtemp(prefix=PREFIX))


def remove_abandoned_socket_dirs(parent: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove this user's socket directories under ``parent`` (the temporary directory) that are
    older than ``ABANDONED_AFTER`` and whose socket is gone or refuses connections (its server
    died); the directories removed."""
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    now = time.time() if now is None else now
    removed = []
    for directory in parent.glob(f"{PREFIX}*"):
        try:
            info = directory.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or now - info.st_mtime < ABANDONED_AFTER:
            continue
        if _accepts(directory / SOCKET_NAME):
            continue
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
    return removed


def _accepts(path: Path) -> bool:
    """Whether a server listens on the Unix socket at ``path`` (a connection is accepted)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
