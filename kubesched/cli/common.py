"""Arguments and loading shared by the commands that take manifests and a configuration."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kubesched.api.manifests import load
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates, parse_flag
from kubesched.scheduler.framework.registry import Registry, load_out_of_tree, merge
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.simulator.simulate import SimulationResult, simulate

#: How ``--plugin`` names out-of-tree plugins, for every command that takes it.
PLUGIN_METAVAR = "MODULE[:CLASS]"
PLUGIN_HELP = ("register out-of-tree plugins from an importable module or a .py file; without :CLASS, "
               "the module's PLUGINS list (repeatable)")


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
    """The in-tree plugins and those of each ``--plugin``; a name registered twice is an error, as
    kube-scheduler's ``app.WithPlugin`` makes it."""
    registry = in_tree_registry()
    for spec in plugins:
        registry = merge(registry, load_out_of_tree(spec))
    return registry


def configuration_from(args: argparse.Namespace, registry: Registry) -> tuple[SchedulerConfiguration, FeatureGates]:
    gates = FeatureGates(parse_flag(args.feature_gates))
    if args.config:
        cfg = config_module.load_file(args.config, registry=registry, feature_gates=gates)
    else:
        cfg = config_module.default_configuration(feature_gates=gates)
    return cfg, gates


def load_manifests(args: argparse.Namespace) -> list[dict]:
    return load(args.files)


def simulate_from_args(args: argparse.Namespace, *, explain: bool) -> tuple[SimulationResult, SchedulerConfiguration]:
    """Run the simulation the common flags describe, with a progress bar on long runs."""
    registry = registry_from(args.plugins)
    cfg, gates = configuration_from(args, registry)
    objects = load_manifests(args)
    progress = LazyProgress("scheduling")
    try:
        result = simulate(objects, cfg, seed=args.seed, registry=registry, feature_gates=gates, explain=explain, progress=progress)
    finally:
        progress.close()
    return result, cfg


def stdout_console() -> Console:
    """Rich output on stdout: the terminal's width, or wide lines (no truncation) when piped."""
    out = Console(highlight=False, soft_wrap=True)
    return out if out.is_terminal else Console(highlight=False, soft_wrap=True, width=250)


class LazyProgress:
    """A progress bar on stderr that appears only for runs longer than ``delay`` seconds."""

    def __init__(self, label: str, delay: float = 2.0) -> None:
        self.label = label
        self.delay = delay
        self.started = time.monotonic()
        self.progress: Progress | None = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None:
            if time.monotonic() - self.started < self.delay:
                return
            self.progress = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                     console=Console(file=sys.stderr), transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=total)
        self.progress.update(self.task, completed=done, total=total)  # type: ignore[arg-type]

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()

