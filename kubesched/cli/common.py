"""Arguments and loading shared by the commands that take manifests and a configuration."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from kubesched.api.errors import FileUnreadable, KubeschedError, NoObjects
from kubesched.contrib.registry import contrib_registry
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates, parse_flag
from kubesched.scheduler.framework.registry import (
    ENTRY_POINT_GROUP,
    Registry,
    RegistryError,
    installed_plugins,
    load_out_of_tree,
    merge,
)
from kubesched.scheduler.framework.runtime import UnknownPlugin
from kubesched.scheduler.plugins.registry import in_tree_registry

if TYPE_CHECKING:  # the simulator, manifests and rich output are imported by the commands that use them, not by `kubesched run`
    from rich.console import Console

    from kubesched.cli.progress import ProgressReporter
    from kubesched.simulator.scenario import Scenario
    from kubesched.simulator.simulate import SimulationResult

#: How ``--plugin`` names out-of-tree plugins, for every command that takes it.
PLUGIN_METAVAR = "MODULE[:CLASS]"
PLUGIN_HELP = ("register out-of-tree plugins from an importable module or a .py file; without :CLASS, "
               f"the module's PLUGINS list (repeatable; installed packages' {ENTRY_POINT_GROUP} entry points need no flag)")


def add_config_args(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--feature-gates`` and ``--plugin``: what ``configuration_from`` reads."""
    parser.add_argument("--config", help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file")
    parser.add_argument("--feature-gates", default="", metavar="A=true,B=false", help="feature gates to change for this run")
    parser.add_argument("--plugin", dest="plugins", action="append", default=[], metavar=PLUGIN_METAVAR, help=PLUGIN_HELP)


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE_OR_DIR",
                        help="manifests (YAML or JSON, multi-document, kind: List); directories are read recursively")
    add_config_args(parser)
    parser.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same placements")


def registry_from(plugins: Sequence[str]) -> Registry:
    """The plugins every command resolves names with: the in-tree ones, the bundled
    scheduler-plugins (``kubesched.contrib``), those installed packages declare
    (``kubesched.plugins`` entry points) and those of each ``--plugin``. A name registered twice
    is an error, as kube-scheduler's ``app.WithPlugin`` makes it, except that ``--plugin`` may
    name a plugin that is also installed: the flag's copy is used (a working tree over the
    installed release)."""
    installed = installed_plugins()
    flagged: Registry = {}
    for spec in plugins:
        flagged = merge(flagged, load_out_of_tree(spec))
    in_tree = merge(in_tree_registry(), contrib_registry())
    taken = sorted(set(installed) & set(in_tree))
    if taken:
        raise RegistryError(f"installed plugins named like in-tree ones: {', '.join(taken)} (entry-point group "
                            f"{ENTRY_POINT_GROUP}); the packages that declare them must use other names")
    installed = {name: factory for name, factory in installed.items() if name not in flagged}
    return merge(merge(in_tree, installed), flagged)


def error_message(error: KubeschedError) -> str:
    """The line ``kubesched`` prints for an error it raised on purpose; an unknown plugin's also
    says where a plugin of that name could come from."""
    return unknown_plugin_message(error) if isinstance(error, UnknownPlugin) else str(error)


def unknown_plugin_message(error: UnknownPlugin) -> str:
    """The framework's error, with where a plugin of that name could come from."""
    return (f"{error}: {error.plugin_name} is neither an in-tree plugin nor one an installed package declares "
            f"(entry-point group {ENTRY_POINT_GROUP}); load it with --plugin {PLUGIN_METAVAR} (a module or a .py file), "
            "or pip install the package that provides it")


def configuration_from(args: argparse.Namespace, registry: Registry) -> tuple[SchedulerConfiguration, FeatureGates]:
    gates = FeatureGates(parse_flag(args.feature_gates))
    if args.config:
        cfg = config_module.load_text(read_config(args.config), registry=registry, feature_gates=gates, source=args.config)
    else:
        cfg = config_module.default_configuration(feature_gates=gates)
    return cfg, gates


def read_config(path: str, flag: str = "--config") -> str:
    """A configuration file's text; a file that cannot be read is a ``FileUnreadable`` naming the flag."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise FileUnreadable(flag, path, e) from e
    except UnicodeDecodeError as e:
        raise FileUnreadable(flag, path, OSError(f"not UTF-8 text ({e.reason} at byte {e.start})")) from e


def load_manifests(args: argparse.Namespace, progress: ProgressReporter | None = None) -> list[dict]:
    """Every object of ``-f``; none at all is an error (an empty file or directory is most likely a wrong path).
    The ``--config`` file is no manifest, even when it sits in a directory ``-f`` names."""
    from kubesched.api.manifests import load

    skip = [args.config] if getattr(args, "config", None) else []
    if progress is not None:
        progress.phase(f"loading manifests ({_size_of(args.files, skip)})")
    objects = load(args.files, skip)
    if not objects:
        raise NoObjects(args.files)
    return objects


def _size_of(paths: Sequence[str], skip: Sequence[str]) -> str:
    """The manifests' total size, for the loading phase's label (``52.4 MB in 3 files``)."""
    from kubesched.api.manifests import manifest_files

    try:
        files = manifest_files(paths, skip)
        size = sum(f.stat().st_size for f in files)
    except (KubeschedError, OSError):
        return "?"
    return f"{size / 1e6:.1f} MB in {len(files)} file{'s' if len(files) != 1 else ''}"


def simulate_from_args(args: argparse.Namespace, *, explain: bool,
                       scenario: Scenario | None = None) -> tuple[SimulationResult, SchedulerConfiguration]:
    """Run the simulation the common flags describe (with ``scenario``'s steps on its virtual
    clock), with progress on stderr on long runs."""
    from kubesched.simulator.simulate import SimulationInterrupted, simulate

    registry = registry_from(args.plugins)
    cfg, gates = configuration_from(args, registry)
    with progress_reporter(args) as progress:
        try:
            objects = load_manifests(args, progress)
        except KeyboardInterrupt as e:
            raise SimulationInterrupted(None) from e
        result = simulate(objects, cfg, seed=args.seed, registry=registry, feature_gates=gates, explain=explain,
                          progress=progress, scenario=scenario, decoded=True)
    return result, cfg


def add_report_arg(parser: argparse.ArgumentParser, contents: str) -> None:
    parser.add_argument("--report", metavar="FILE.html",
                        help=f"also write a self-contained HTML report (plots, no network needed to view it): {contents}")


def write_report(html: str, path: str) -> None:
    """``--report``: the HTML page, announced on stderr (stdout may be data, with -o json|yaml)."""
    try:
        Path(path).expanduser().write_text(html, encoding="utf-8")
    except OSError as e:
        raise KubeschedError(f"--report {path}: cannot write the report: {e.strerror or e}") from None
    print(f"report written to {path}", file=sys.stderr)


def progress_reporter(args: argparse.Namespace) -> ProgressReporter:
    """Progress on stderr for this command's flags: JSON records with ``--logging-format json``."""
    from kubesched.cli.progress import ProgressReporter

    return ProgressReporter(json_lines=getattr(args, "logging_format", "text") == "json")


def stdout_console() -> Console:
    """Rich output on stdout: the terminal's width, or wide lines (no truncation) when piped."""
    from rich.console import Console

    out = Console(highlight=False, soft_wrap=True)
    return out if out.is_terminal else Console(highlight=False, soft_wrap=True, width=250)


def version() -> str:
    """The installed package's version, and the kube-scheduler release whose behaviour it follows."""
    try:
        installed = metadata.version("kubesched")
    except metadata.PackageNotFoundError:
        installed = "(not installed)"
    return f"kubesched v{installed} (kube-scheduler v1.35 behaviour)"
