"""Logging flags of every command: ``-v``/``--v`` and ``--logging-format text|json``.

``json`` is kube-scheduler's structured logging (component-base/logs/json): one compact JSON
object per line on stderr, keys in zap's order, ``ts`` (milliseconds since the epoch, as a float),
``logger`` (the Python logger's name), ``caller`` (``package/file.py:line``), ``msg``, then ``v``
(the klog verbosity the message is logged at) for info records, or ``err`` for errors that carry
an exception, then any structured key/value pairs.

Python levels map to klog verbosities: warnings and errors are always shown (klog logs warnings
as info at level 0), INFO at ``info_v`` (0 for ``kubesched run``, as kube-scheduler's info
messages; 1 for the other commands, whose stdout is their result) and DEBUG at 4.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

FORMATS = ("text", "json")
DEBUG_V = 4


def add_logging_args(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    """``-v`` and ``--logging-format`` on ``parser``. On a sub-command they default to "not given",
    so that ``kubesched -v 3 simulate`` keeps the top-level value and ``simulate -v 3`` sets it."""
    default: Any = argparse.SUPPRESS
    group = parser.add_argument_group("logging")
    group.add_argument("-v", "--v", dest="verbosity", type=int, default=0 if top_level else default, metavar="N",
                       help="log verbosity, klog's levels (default 0: warnings; 1: info; 4: debug)")
    group.add_argument("--logging-format", choices=FORMATS, default="text" if top_level else default,
                       help="text (default) or json: kube-scheduler's structured logging, one JSON object per line on stderr")


def python_level(verbosity: int, info_v: int) -> int:
    """The Python logging level that shows what klog shows at ``verbosity``."""
    if verbosity >= DEBUG_V:
        return logging.DEBUG
    return logging.INFO if verbosity >= info_v else logging.WARNING


def klog_v(levelno: int, info_v: int) -> int:
    """The klog verbosity a record of this Python level is logged at."""
    if levelno >= logging.WARNING:
        return 0
    return info_v if levelno >= logging.INFO else DEBUG_V


class JSONFormatter(logging.Formatter):
    """component-base's JSON log format (see the module docstring)."""

    def __init__(self, info_v: int) -> None:
        super().__init__()
        self.info_v = info_v

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"ts": record.created * 1000.0, "logger": record.name, "caller": caller(record.pathname, record.lineno),
                                 "msg": record.getMessage()}
        if record.levelno >= logging.ERROR:
            if record.exc_info and record.exc_info[1] is not None:
                entry["err"] = str(record.exc_info[1])
        else:
            entry["v"] = klog_v(record.levelno, self.info_v)
        entry.update(getattr(record, "kv", None) or {})
        return json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))


def caller(path: str, line: int) -> str:
    """zap's short caller: the file with its directory, ``cluster/kubelet.py:83``."""
    parent, name = os.path.split(path)
    return f"{os.path.basename(parent)}/{name}:{line}" if parent else f"{name}:{line}"


def json_line(msg: str, **kv: Any) -> str:
    """One info record at level 0 in the JSON format, logged from the caller's line; for output
    that must be shown whatever the verbosity (progress)."""
    frame = sys._getframe(1)
    entry: dict[str, Any] = {"ts": time.time() * 1000.0, "caller": caller(frame.f_code.co_filename, frame.f_lineno), "msg": msg, "v": 0}
    entry.update(kv)
    return json.dumps(entry, default=str, ensure_ascii=False, separators=(",", ":"))


TEXT_FORMAT = "%(levelname).1s %(name)s] %(message)s"
#: klog's text header: ``I1121 14:13:58.102399 1234 logger] message``.
KLOG_FORMAT = "%(levelname).1s%(asctime)s.%(msecs)03d000 %(process)d %(name)s] %(message)s"


class StderrHandler(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a record is emitted (not when configured), so
    that a replaced stderr (tests capturing it, a closed pipe) is never written to after the fact."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        """The stream is always the current ``sys.stderr``."""


def configure(verbosity: int, fmt: str, *, info_v: int = 1, klog_header: bool = False) -> Callable[[], None]:
    """Send every log record to stderr in ``fmt``, filtered as ``-v verbosity`` asks. Returns what
    puts the root logger back as it was (for ``main`` called in-process: tests, embedding)."""
    handler = StderrHandler()
    if fmt == "json":
        handler.setFormatter(JSONFormatter(info_v))
    elif klog_header:
        handler.setFormatter(logging.Formatter(KLOG_FORMAT, "%m%d %H:%M:%S"))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(python_level(verbosity, info_v))

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(level)

    return restore
