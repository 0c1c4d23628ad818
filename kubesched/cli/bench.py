"""``kubesched bench``: upstream scheduler_perf's workloads, measured the way scheduler_perf measures
them (pods scheduled per second sampled each second; attempt latencies; peak RSS; nodes scored).

Sizes default to upstream's 5000-node variants; ``--nodes``, ``--init-pods`` and ``--pods`` change
them. ``--mode embedded`` runs the scheduler on an in-memory store in this process;
``--mode http`` runs it against ``kubesched up``'s API server with real bind calls.

kubesched's own whole-process rows (``RunStartup``, ``UpThroughput``, ``SimulateEndToEnd``) time
``kubesched run``, ``up`` and ``simulate`` as processes, from outside; ``--nodes``, ``--pods``,
``--runs``, ``--concurrency``, ``--apiserver-only``, ``--insecure``, ``--seed`` and ``--timeout``
apply to them.
"""

from __future__ import annotations

import argparse
import json
import sys

from kubesched.bench import wholeprocess
from kubesched.bench.workloads import WORKLOADS, workload
from kubesched.cli.common import add_config_args, progress_reporter, registry_from, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run an upstream scheduler_perf workload and report throughput",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", metavar="WORKLOAD",
                   help="one of: " + ", ".join([*WORKLOADS, *wholeprocess.ROWS]) + " (or 'list')")
    p.add_argument("--nodes", type=int, help="initNodes (default: the 5000-node variant's)")
    p.add_argument("--init-pods", type=int, help="initPods, created and scheduled before measuring")
    p.add_argument("--pods", type=int, help="measurePods, the pods whose scheduling is measured")
    p.add_argument("--mode", choices=("embedded", "http"), default="embedded")
    p.add_argument("--apiserver", choices=("subprocess", "in-process"), default="subprocess",
                   help="--mode http: run the API server in its own process (default) or on this event loop")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    p.add_argument("--seed", type=int, default=0, help="random seed of node names, the store and the scheduler")
    p.add_argument("--percentage-of-nodes-to-score", type=int, metavar="P",
                   help="percentageOfNodesToScore (default 100; with --config, the file's value); 0 is adaptive, as upstream's default")
    add_config_args(p)
    p.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="give up waiting for a batch of pods after this long (the run is then reported incomplete)")
    rows = p.add_argument_group("whole-process rows")
    rows.add_argument("--runs", type=int, help="RunStartup: process starts, figures are medians (default 5)")
    rows.add_argument("--concurrency", type=int, help="UpThroughput: clients creating pods at once (default 50)")
    rows.add_argument("--apiserver-only", action="store_true",
                      help="UpThroughput: `kubesched apiserver` instead of `up`, creation measured alone")
    rows.add_argument("--insecure", action="store_true",
                      help="UpThroughput: serve plain HTTP without authentication (--insecure-allow-anonymous)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kubesched.bench import report
    from kubesched.bench.runner import BenchOptions
    from kubesched.bench.runner import run as run_bench

    if args.workload == "list":
        for w in WORKLOADS.values():
            print(f"{w.name:<36}{' '.join(f'{k}={v}' for k, v in w.params.items())}")
        print("\nkubesched's whole-process rows:")
        for r in wholeprocess.ROWS.values():
            print(f"{r.name:<36}nodes={r.nodes} pods={r.pods}: {r.summary}")
        return 0
    chosen_row = wholeprocess.row(args.workload)
    if chosen_row is not None:
        return run_row(chosen_row, args)
    try:
        chosen = workload(args.workload)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    progress = progress_reporter(args)
    opts = BenchOptions(mode=args.mode, nodes=args.nodes, init_pods=args.init_pods, pods=args.pods, seed=args.seed,
                        percentage_of_nodes_to_score=args.percentage_of_nodes_to_score, config=args.config,
                        feature_gates=args.feature_gates, timeout=args.timeout, apiserver=args.apiserver,
                        progress=progress)
    with progress:
        result = run_bench(chosen, opts, registry_from(args.plugins))
    if args.output == "json":
        json.dump(report.to_json(result), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        report.print_table(result, stdout_console())
    return 0 if result.complete else 1


def run_row(row: wholeprocess.ProcessRow, args: argparse.Namespace) -> int:
    """One of kubesched's whole-process rows; its figures as a table or JSON."""
    if args.runs is not None and args.runs < 1:
        print(f"error: --runs must be at least 1, got {args.runs}", file=sys.stderr)
        return 2
    opts = row.options(nodes=args.nodes, pods=args.pods, runs=args.runs, concurrency=args.concurrency,
                       timeout=args.timeout, seed=args.seed, apiserver_only=args.apiserver_only, insecure=args.insecure)
    try:
        doc = row.measure(opts)
    except RuntimeError as e:
        print(f"error: {row.name}: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        console = stdout_console()
        console.print(f"[bold]{row.name}[/bold]: {row.summary}", highlight=False)
        for label, text in wholeprocess.lines(row, doc):
            console.print(f"  {label + ':':<34}{text}", highlight=False, markup=False)
    return 0 if doc["complete"] else 1
