"""The exit codes of every ``kubesched`` command (documented in docs/cli.md and the README)."""

from __future__ import annotations

#: Done: for ``simulate``/``explain``, pods may still be pending (that is a result, not an error).
OK = 0
#: An error: the input or configuration is wrong (cannot be read, invalid, holds no objects, or a
#: controller could not create the pods it asks for), a file is missing, a port is taken.
ERROR = 1
#: The command line is wrong (argparse's own code).
USAGE = 2
#: ``--fail-on-pending`` and some pod did not end up running.
PENDING = 3
#: Interrupted (Ctrl-C): 128 + SIGINT, as shells report it.
INTERRUPTED = 130
#: Stdout was closed by its reader (``| head``): 128 + SIGPIPE, as shells report a tool killed by it.
BROKEN_PIPE = 141
