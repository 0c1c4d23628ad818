"""``kubesched config``: print the default KubeSchedulerConfiguration, or validate a file.

``config defaults`` prints what ``kube-scheduler --write-config-to`` writes when given no file;
``config validate -f FILE`` reads a file the way kube-scheduler does, builds its profiles with the
plugins every command resolves (in-tree, installed packages', ``--plugin``), and prints ``valid``
on stdout, or each error on its own line on stderr (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from kubesched.api.errors import ConfigError, KubeschedError
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.cli.common import PLUGIN_HELP, PLUGIN_METAVAR, read_config, registry_from, unknown_plugin_message
from kubesched.cli.exitcodes import ERROR, OK, USAGE
from kubesched.scheduler.config import default_configuration, load_text, to_yaml
from kubesched.scheduler.features import FeatureGates, parse_flag
from kubesched.scheduler.framework.runtime import UnknownPlugin
from kubesched.scheduler.scheduler import Scheduler


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``config defaults`` and ``config validate`` to the top-level command parser."""
    parser = subparsers.add_parser("config", help="print or validate a KubeSchedulerConfiguration (v1)")
    parser.set_defaults(func=run, config_command=None)
    commands = parser.add_subparsers(dest="config_command", metavar="{defaults,validate}")
    defaults = commands.add_parser("defaults", help="print the default configuration as YAML")
    _add_feature_gates(defaults)
    defaults.set_defaults(func=run)
    validate = commands.add_parser("validate", help="validate a configuration file")
    validate.add_argument("-f", "--file", required=True, help="KubeSchedulerConfiguration file (YAML or JSON)")
    validate.add_argument("--plugin", dest="plugins", action="append", default=[], metavar=PLUGIN_METAVAR,
                          help="out-of-tree plugins whose typed Args decode their pluginConfig: " + PLUGIN_HELP)
    _add_feature_gates(validate)
    validate.set_defaults(func=run)
    parser.set_defaults(config_parser=parser)


def _add_feature_gates(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feature-gates", default="", metavar="A=true,B=false",
                        help="feature gates to set, as kube-scheduler's --feature-gates")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``config defaults`` or ``config validate``; returns the exit code."""
    out, err = out or sys.stdout, err or sys.stderr
    command = getattr(args, "config_command", None)
    if command is None:
        parser = getattr(args, "config_parser", None)
        if parser is not None:
            parser.print_help(err)
        return USAGE
    try:
        gates = FeatureGates(parse_flag(getattr(args, "feature_gates", "") or ""))
    except KubeschedError as e:
        print(f"error: invalid --feature-gates: {e}", file=err)
        return ERROR
    if command == "defaults":
        out.write(to_yaml(default_configuration(gates)))
        return OK
    return _validate(args.file, args.plugins, gates, out, err)


def _validate(path: str, plugins: Sequence[str], gates: FeatureGates, out: TextIO, err: TextIO) -> int:
    """``valid`` on ``out``; otherwise every field error on its own line on ``err`` (exit 1), so
    that ``config validate -f F > report`` keeps problems on the terminal and the exit code says it."""
    try:
        registry = registry_from(plugins)
        cfg = load_text(read_config(path, "-f"), registry=registry, feature_gates=gates, source=path)
        # Build the profiles as every command does, so a plugin no command could find is reported here.
        Scheduler(MemoryClient(ObjectStore()), cfg, registry=registry, feature_gates=gates)
    except UnknownPlugin as e:
        print(f"error: {path}: {unknown_plugin_message(e)}", file=err)
        return ERROR
    except ConfigError as e:
        print(f"error: {path}: invalid KubeSchedulerConfiguration:", file=err)
        for problem in e.errors:
            print(f"  {problem}", file=err)
        return ERROR
    except KubeschedError as e:
        print(f"error: {e}" if str(e).startswith(("-f ", path)) else f"error: {path}: {e}", file=err)
        return ERROR
    print("valid", file=out)
    return OK
