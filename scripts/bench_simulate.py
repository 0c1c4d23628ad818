"""Benchmark (not a test): where ``kubesched simulate``'s time goes, phase by phase, in this tree.

Runs what ``kubesched simulate -f FILE [-o json]`` runs, in one process, and prints the wall-clock
and CPU seconds of each phase: loading and validating the manifests, creating the objects in the
embedded store, scheduling with the fake kubelet and the controllers until the cluster settles,
and printing the report (to /dev/null). Without FILE, the input is ``kubesched bench
SimulateEndToEnd``'s (``--nodes`` nodes, ``--pods`` pods), which times the whole process instead.

Run: ``python scripts/bench_simulate.py [--nodes 500 --pods 10000 | FILE] [-o table|json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator

from kubesched.api.kinds import POD
from kubesched.api.manifests import load
from kubesched.bench.simulate_e2e import write_input
from kubesched.cli.simulate import print_objects, print_table
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.simulate import simulate


class Phases:
    """Wall-clock and CPU seconds per phase, in the order the phases ran."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []
        self._mark = (time.perf_counter(), time.process_time())

    def end(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.rows.append((name, wall - self._mark[0], cpu - self._mark[1]))
        self._mark = (wall, cpu)

    def print(self, pods: int) -> None:
        total_wall = sum(r[1] for r in self.rows)
        total_cpu = sum(r[2] for r in self.rows)
        print(f"{'phase':<34} {'wall s':>8} {'cpu s':>8}")
        for name, wall, cpu in [*self.rows, ("total", total_wall, total_cpu)]:
            print(f"{name:<34} {wall:8.2f} {cpu:8.2f}")
        print(f"{pods} pods: {pods / total_wall:,.0f} pods/s (wall), {pods / total_cpu:,.0f} pods/s (cpu)")


@contextlib.contextmanager
def stdout_to_devnull() -> Iterator[None]:
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", help="the manifests (default: SimulateEndToEnd's input, written to a temporary file)")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as generated:
        if args.file is None:
            write_input(generated, args.nodes, args.pods)
            generated.flush()
        return run(args.file or generated.name, args.output, args.seed)


def run(file: str, output: str, seed: int) -> int:
    phases = Phases()
    objects = load([file])
    phases.end("load + validate")
    cfg = default_configuration()
    seen: set[str] = set()

    def progress(phase: str, _done: int, _total: int) -> None:
        if phase == "scheduling" and phase not in seen:
            phases.end("create objects")
        seen.add(phase)

    result = simulate(objects, cfg, seed=seed, progress=progress, decoded=True)
    phases.end("schedule, kubelet, controllers")
    with stdout_to_devnull():
        if output == "json":
            print_objects(result, "json")
        else:
            print_table(result, {p.scheduler_name for p in cfg.profiles})
    phases.end(f"print ({output})")
    phases.print(result.store.count(POD))
    return 0


if __name__ == "__main__":
    sys.exit(main())
