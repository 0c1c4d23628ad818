"""``kubesched chaos``: the fault-injection run. ``kubesched apiserver`` and ``kubesched run``
replicas as processes on loopback, each replica behind a fault-injecting proxy; pods are created
while faults are injected (API server kill -9 and restart with and without its data, dropped and
stalled watches, 410 and too-large-resource-version answers, leader kill -9 and SIGSTOP, invalid
objects, failing and slow bindings), then, once the cluster is quiet, the run checks that nothing
was lost, bound twice, over capacity or bound by a replica without the Lease, that the leader's
cache equals the API server's state, and measures the failover after each leader kill.

Exit status 0 when every check holds, 1 when one does not (each is named on stderr).
See docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kubesched.cli.exitcodes import ERROR


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chaos", help="run the fault-injection run against kubesched apiserver and run replicas",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=10_000, help="pods to create (default 10000)")
    p.add_argument("--replicas", type=int, default=2, help="kubesched run replicas (default 2)")
    p.add_argument("--workdir", type=Path, default=Path("chaos-run"),
                   help="where the logs, kubeconfigs and database go (default chaos-run)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the injected faults (default 1)")
    p.add_argument("--fault-interval", type=float, default=5.0, help="seconds between injected faults (default 5)")
    p.add_argument("--rounds", type=int, default=1, help="times the fault cycle runs (default 1)")
    p.add_argument("--lease", default="15,10,2", metavar="DURATION,RENEW,RETRY",
                   help="leaseDuration, renewDeadline and retryPeriod in seconds (default kube-scheduler's 15,10,2)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="how to print the figures")
    # The run's progress ("injecting: ...") is logged at info: shown without -v.
    p.set_defaults(func=run, info_v=0)


def run(args: argparse.Namespace) -> int:
    from kubesched.bench.chaos import ChaosOptions, failures
    from kubesched.bench.chaos import run as run_chaos

    problem = _invalid(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return ERROR
    lease_duration, renew_deadline, retry_period = _lease(args.lease)
    opts = ChaosOptions(pods=args.pods, replicas=args.replicas, workdir=args.workdir, seed=args.seed,
                        fault_interval=args.fault_interval, rounds=args.rounds, lease_duration=lease_duration,
                        renew_deadline=renew_deadline, retry_period=retry_period)
    report = run_chaos(opts)
    if args.output == "json":
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_report(report)
    problems = failures(report)
    for line in problems:
        print(f"FAILED {line}", file=sys.stderr)
    return ERROR if problems else 0


def _invalid(args: argparse.Namespace) -> str:
    """What is wrong with the options, naming the flag ("" when nothing is)."""
    for flag in ("pods", "replicas", "rounds"):
        if getattr(args, flag) < 1:
            return f"--{flag} must be at least 1, got {getattr(args, flag)}"
    if args.fault_interval <= 0:
        return f"--fault-interval must be positive, got {args.fault_interval:g}"
    try:
        lease_duration, renew_deadline, retry_period = _lease(args.lease)
    except ValueError:
        return f"--lease: want three numbers of seconds separated by commas (DURATION,RENEW,RETRY), got {args.lease!r}"
    from kubesched.client.leaderelection import LeaderElectionConfigError, validate_durations

    try:
        validate_durations(lease_duration, renew_deadline, retry_period)
    except LeaderElectionConfigError as e:
        return f"--lease {args.lease}: {e}"
    return ""


def _lease(text: str) -> tuple[float, float, float]:
    values = [float(v) for v in text.split(",")]
    if len(values) != 3:
        raise ValueError(text)
    return values[0], values[1], values[2]


def print_report(report: dict[str, Any]) -> None:
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
