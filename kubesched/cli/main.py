"""``kubesched``: one sub-command per module of this package (simulate, explain, config, ...)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kubesched.api.errors import KubeschedError
from kubesched.cli import apiserver, bench, config_cmd, explain, run, simulate, up

#: Command modules, in help order; each has ``register(subparsers)`` which sets ``func`` on its parser.
COMMANDS = (simulate, explain, config_cmd, apiserver, up, run, bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubesched",
        description="A Kubernetes scheduler with kube-scheduler 1.35's behaviour, and an embedded cluster to try it on.",
    )
    parser.add_argument("-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (klog-style levels)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return parser


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity < 4 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname).1s %(name)s] %(message)s", stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _configure_logging(getattr(args, "verbosity", 0))
    try:
        return int(args.func(args) or 0)
    except KubeschedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
