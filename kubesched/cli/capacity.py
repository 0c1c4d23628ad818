"""``kubesched capacity``: how many more copies of a pod the cluster can take, and what stops the
next one, with the full scheduler (every plugin of the configuration; preemption only with
``--preemption``). With several ``--pod`` templates, each is copied in turn on the cluster the
previous one left.
"""

from __future__ import annotations

import argparse
import json
import sys

from kubesched.api.errors import NoObjects
from kubesched.api.manifests import load
from kubesched.cli.common import (
    add_cluster_args,
    add_report_arg,
    configuration_from,
    load_manifests,
    progress_reporter,
    registry_from,
    write_report,
)
from kubesched.cli.exitcodes import OK
from kubesched.simulator.capacity import CapacityResult, capacity
from kubesched.simulator.simulate import SimulationInterrupted


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capacity", help="how many more copies of a pod fit, and what stops the next one",
                       description=__doc__)
    add_cluster_args(p)
    p.add_argument("--pod", dest="pods", action="append", required=True, metavar="POD.yaml",
                   help="the pod to copy (a Pod manifest; a file with several pods gives several templates; repeatable)")
    p.add_argument("--max", dest="max_copies", type=int, metavar="N", help="stop after N copies of each pod")
    p.add_argument("--preemption", action="store_true",
                   help="let copies preempt lower-priority pods (off: only free room counts)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    add_report_arg(p, "the copies per node, what stopped the next copy (its filter reasons per node count), and "
                      "CPU/memory allocation per node by zone with the copies in place")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    registry = registry_from(args.plugins)
    cfg, gates = configuration_from(args, registry)
    with progress_reporter(args) as progress:
        try:
            objects = load_manifests(args, progress)
            templates = load(args.pods)
        except KeyboardInterrupt as e:
            raise SimulationInterrupted(None) from e
        if not templates:
            raise NoObjects(args.pods)
        progress.phase("placing copies")
        result = capacity(objects, templates, cfg, seed=args.seed, max_copies=args.max_copies,
                          preemption=args.preemption, registry=registry, feature_gates=gates,
                          explain=bool(args.report))
    if args.report:
        write_report(result.to_html(), args.report)
    print_result(result, args.output)
    return OK


def print_result(result: CapacityResult, fmt: str) -> None:
    if fmt == "json":
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    blocks = ["\n".join(pod.lines()) for pod in result.pods]
    print("\n\n".join(blocks))
