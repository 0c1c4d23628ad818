"""``kubesched compare``: the same manifests under two scheduler configurations (same seed), side
by side: pods placed differently, pods pending under one only, and how full the nodes are
(nodes used; CPU and memory allocation per node: mean, spread, max; per zone; the largest request
a node still has room for).

With ``--scenario``, both configurations take the scenario's steps on the virtual clock, and the
comparison also says, step by step, how many pods each bound, evicted and preempted, and how many
were pending when the next step fired (docs/scenarios.md). As with ``simulate``, a step that
could not be carried out exits 1, after the comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.table import Table

from kubesched.api.errors import KubeschedError
from kubesched.api.quantity import format_quantity
from kubesched.cli.common import (
    PLUGIN_HELP,
    PLUGIN_METAVAR,
    add_report_arg,
    load_manifests,
    progress_reporter,
    read_config,
    registry_from,
    stdout_console,
    write_report,
)
from kubesched.cli.exitcodes import OK
from kubesched.cli.simulate import StepsFailed
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates, parse_flag
from kubesched.scheduler.framework.registry import Registry
from kubesched.simulator.compare import Comparison, LargestFit, Stats, StepDifference, Utilisation, compare
from kubesched.simulator.scenario import describe_seconds, load_scenario
from kubesched.simulator.simulate import SimulationInterrupted


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="the same manifests under two scheduler configurations, side by side",
                       description=__doc__)
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE_OR_DIR",
                   help="manifests (YAML or JSON, multi-document, kind: List); directories are read recursively")
    p.add_argument("--config", dest="configs", action="append", required=True, metavar="CONFIG.yaml",
                   help="a KubeSchedulerConfiguration file; give it twice (the first is A, the second B)")
    p.add_argument("--feature-gates", default="", metavar="A=true,B=false", help="feature gates to change for both runs")
    p.add_argument("--plugin", dest="plugins", action="append", default=[], metavar=PLUGIN_METAVAR, help=PLUGIN_HELP)
    p.add_argument("--seed", type=int, default=0, help="random seed, the same for both runs")
    p.add_argument("--scenario", metavar="SCENARIO.yaml",
                   help="timed steps both configurations take on the virtual clock (docs/scenarios.md); adds what each "
                        "did step by step")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_report_arg(p, "both configurations side by side: CPU/memory allocation per node by zone, the pods placed "
                      "differently, each pending pod's filter reasons per node count, and with --scenario both timelines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if len(args.configs) != 2:
        raise KubeschedError(f"--config: give exactly two configurations to compare, not {len(args.configs)}")
    registry = registry_from(args.plugins)
    gates = FeatureGates(parse_flag(args.feature_gates))
    configs = [(label, load_config(path, registry, gates)) for label, path in zip(labels(args.configs), args.configs,
                                                                                      strict=True)]
    scenario = load_scenario(args.scenario) if args.scenario else None
    with progress_reporter(args) as progress:
        try:
            objects = load_manifests(args, progress)
        except KeyboardInterrupt as e:
            raise SimulationInterrupted(None) from e
        progress.phase("simulating under both configurations")
        result = compare(objects, configs, seed=args.seed, registry=registry, feature_gates=gates, scenario=scenario,
                         explain=bool(args.report))
    if args.report:
        write_report(result.to_html(), args.report)
    if args.output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_comparison(result)
    failed = [f"under {label}: {error}" for label, run in zip(result.labels, result.results, strict=True)
              for error in run.scenario_errors]
    if failed:
        raise StepsFailed(failed)
    return OK


def labels(paths: list[str]) -> list[str]:
    """The configurations' file names, or their paths when the names are the same."""
    names = [Path(p).name for p in paths]
    return list(paths) if len(set(names)) < len(names) else names


def load_config(path: str, registry: Registry, gates: FeatureGates) -> SchedulerConfiguration:
    return config_module.load_text(read_config(path), registry=registry, feature_gates=gates, source=path)


def print_comparison(result: Comparison) -> None:
    a, b = result.labels
    print(f"{len(result.moved)} pod(s) placed differently, {result.same} on the same node.")
    if result.moved:
        _print_table(["POD", a, b], [[m.pod, m.nodes[0], m.nodes[1]] for m in result.moved])
    for label, pending in zip(result.labels, result.pending_only, strict=True):
        if pending:
            print(f"\nPending under {label} only:")
            for pod, message in pending.items():
                print(f"  {pod}: {message}")
    if result.utilisation is not None:
        print()
        _print_table(["UTILISATION", a, b], utilisation_rows(*result.utilisation))
    if result.steps:
        print(f"\nStep by step ({a} / {b}; pending when the next step fired):")
        _print_table(["STEP", "AT", "BOUND", "EVICTED", "PREEMPTED", "PENDING", ""], step_rows(result.steps))


def utilisation_rows(ua: Utilisation, ub: Utilisation) -> list[list[str]]:
    """One row per figure, the two configurations' values side by side."""
    rows = [["nodes used", f"{ua.nodes_used}/{ua.nodes}", f"{ub.nodes_used}/{ub.nodes}"]]
    for resource in ("cpu", "memory"):
        sa: Stats = getattr(ua, resource)
        sb: Stats = getattr(ub, resource)
        rows += [[f"{resource} allocated: mean", _pct(sa.mean), _pct(sb.mean)],
                 [f"{resource} allocated: spread", _pct(sa.spread), _pct(sb.spread)],
                 [f"{resource} allocated: max", _pct(sa.max), _pct(sb.max)]]
    for zone in sorted(ua.zones.keys() | ub.zones.keys()):
        za, zb = ua.zones.get(zone), ub.zones.get(zone)
        name = zone or "(no zone)"
        rows.append([f"{name}: nodes used", str(za[0]) if za else "-", str(zb[0]) if zb else "-"])
        rows.append([f"{name}: cpu / memory mean", _zone_means(za), _zone_means(zb)])
    rows.append(["largest cpu request that fits (untainted)", _fit(ua.largest_cpu, cpu=True), _fit(ub.largest_cpu, cpu=True)])
    rows.append(["largest memory request that fits (untainted)", _fit(ua.largest_memory, cpu=False),
                 _fit(ub.largest_memory, cpu=False)])
    return rows


def step_rows(steps: list[StepDifference]) -> list[list[str]]:
    """One row per stretch of the scenario, each count as ``A / B``; rows that differ are marked."""
    rows = []
    for step in steps:
        ca, cb = step.counts
        cells = [f"{getattr(ca, name)} / {getattr(cb, name)}" for name in ("bound", "evicted", "preempted", "pending")]
        label = step.step if step.step == "start" else f"{step.step}: {step.description}"
        rows.append([label, describe_seconds(step.seconds), *cells, "differs" if step.differs else ""])
    return rows


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"


def _zone_means(zone: tuple[int, Stats, Stats] | None) -> str:
    return f"{_pct(zone[1].mean)} / {_pct(zone[2].mean)}" if zone else "-"


def _fit(fit: LargestFit, *, cpu: bool) -> str:
    if not fit.node:
        return "none"
    amount = format_quantity(fit.amount, milli=cpu)
    return f"{amount} ({fit.node})"


def _print_table(columns: list[str], rows: list[list[str]]) -> None:
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="none")
    for column in columns:
        table.add_column(column, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    console = stdout_console()
    with console.capture() as captured:
        console.print(table)
    print("\n".join(line.rstrip() for line in captured.get().splitlines()))
