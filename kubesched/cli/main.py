"""``kubesched``: one sub-command per module of this package (simulate, explain, config, ...).

This is the one place where a user error becomes an exit code: every error kubesched raises on
purpose is a ``KubeschedError`` and is printed as one ``error: <message>`` line on stderr (exit 1);
an interrupted run prints what it had done (exit 130); a closed stdout (``| head``) ends the run
quietly. Exit codes are documented in docs/cli.md.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from kubesched.api.errors import KubeschedError
from kubesched.cli import logs
from kubesched.cli.exitcodes import BROKEN_PIPE, ERROR, INTERRUPTED, USAGE
from kubesched.utils.blas import one_blas_thread
from kubesched.utils.heap import loading_long_lived

#: Command modules of this package, in help order; each has ``register(subparsers)`` which sets
#: ``func`` on its parser.
COMMANDS = ("simulate", "explain", "capacity", "compare", "snapshot", "config_cmd", "apiserver", "up", "run", "bench", "chaos")
#: Commands whose module is imported alone when the command line names them: ``run`` is a
#: long-lived scheduler whose start-up should not pay for the simulator and the API server, and
#: ``simulate``'s time to its answer should not include the other commands' clients and servers.
STANDALONE = {"run": "run", "simulate": "simulate"}


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"kubesched.cli.{name}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``only``: register just that command module (the others are
    neither imported nor offered)."""
    parser = argparse.ArgumentParser(
        prog="kubesched",
        description="A Kubernetes scheduler with kube-scheduler 1.35's behaviour, and an embedded cluster to try it on.",
        epilog="Exit codes: 0 success, 1 error (bad input, file, port), 2 usage, 3 pods left pending with "
               "--fail-on-pending, 130 interrupted. See docs/cli.md.",
    )
    parser.add_argument("--version", action=_VersionAction)
    logs.add_logging_args(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only else COMMANDS:
        command_module(name).register(sub)
    for command in sub.choices.values():
        _add_logging_args(command)
    return parser


def _add_logging_args(parser: argparse.ArgumentParser) -> None:
    """``-v`` and ``--logging-format`` on a command and on its own sub-commands (``config validate``)."""
    if not any("--logging-format" in a.option_strings for a in parser._actions):
        logs.add_logging_args(parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for nested in action.choices.values():
                _add_logging_args(nested)


class _VersionAction(argparse._VersionAction):
    """argparse's ``--version``, reading the version (the installed package's metadata, a scan of
    every installed distribution) only when the flag is given rather than at every start."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: str | Sequence[Any] | None,
                 option_string: str | None = None) -> None:
        from kubesched.cli.common import version

        self.version = version()
        super().__call__(parser, namespace, values, option_string)


class _QuietParser(argparse.ArgumentParser):
    """A parser that raises instead of printing usage and exiting: the full parser reports errors."""

    def error(self, message: str) -> NoReturn:
        raise argparse.ArgumentError(None, message)


def standalone_command(argv: Sequence[str]) -> str | None:
    """The module of a standalone command named by ``argv`` (options before it included), if any;
    None for anything else, malformed command lines included (the full parser explains those)."""
    pre = _QuietParser(add_help=False)
    logs.add_logging_args(pre, top_level=True)
    pre.add_argument("command", nargs="?")
    try:
        known, _ = pre.parse_known_args(list(argv))
    except argparse.ArgumentError:
        return None
    return STANDALONE.get(known.command or "")


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kubesched`` command. Without ``argv`` it is the process's own command line, and the
    process is then tuned for a long-lived heap: no collection runs while the command's module
    (and all it imports) is loaded, and what the process holds then is frozen, the young generation
    collected rarely from there on (``kubesched.utils.heap.loading_long_lived``). Callers that pass
    ``argv`` (tests, programs embedding the command) keep their collector's settings. The process's
    own command also asks numpy's BLAS for one thread (``kubesched.utils.blas``). This module
    imports little at its top so that the command's imports come inside that window. Ctrl-C while
    they load ends the process as an interrupted command does, without a traceback."""
    try:
        if argv is None:
            one_blas_thread()
            with loading_long_lived():
                parser, args = parse(sys.argv[1:])
        else:
            parser, args = parse(argv)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return INTERRUPTED
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return USAGE
    restore_logging = logs.configure(args.verbosity, args.logging_format, info_v=getattr(args, "info_v", 1),
                                     klog_header=getattr(args, "klog_header", False))
    try:
        return _run(args)
    finally:
        restore_logging()


def parse(argv: Sequence[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser (with the command's module imported) and the parsed command line."""
    argv = list(argv)
    parser = build_parser(standalone_command(argv))
    return parser, parser.parse_args(argv)


def _run(args: argparse.Namespace) -> int:
    """The command, with every user error, interruption and closed pipe turned into its exit code."""
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except KubeschedError as e:
        from kubesched.cli.common import error_message

        print(f"error: {error_message(e)}", file=sys.stderr)
        return ERROR
    except KeyboardInterrupt as e:
        simulation = sys.modules.get("kubesched.simulator.simulate")  # only loaded by the commands that simulate
        if simulation is not None and isinstance(e, simulation.SimulationInterrupted):
            print(f"\ninterrupted: {e.summary()}", file=sys.stderr)
        else:
            print("\ninterrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """The reader of stdout went away (``kubesched simulate ... | head``): stop quietly, as Unix
    tools killed by SIGPIPE do. Python would otherwise complain again when it flushes stdout at exit,
    so stdout is pointed at /dev/null first."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a file descriptor (captured in tests): nothing will flush to the closed pipe
    finally:
        os.close(devnull)
    return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
