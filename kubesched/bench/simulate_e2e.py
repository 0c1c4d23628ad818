"""SimulateEndToEnd: ``kubesched simulate -f cluster.yaml`` from process start to its last line.

The input (``write_input``) is ``nodes`` nodes (scheduler_perf's ``node-default``: 4 cpu, 32Gi,
110 pods, Ready, three zones) and ``pods`` pause pods (``pod-default``: requests = limits = 100m /
500Mi) in one multi-document YAML file. The subject's ``kubesched simulate -f FILE`` runs with its
output to /dev/null; its wall-clock time (spawn to exit), CPU seconds and peak RSS (``wait4``) are
the figures, with pods/s = pods / wall-clock seconds. Then the subject's ``kubesched bench
SchedulingBasic`` runs at the same size (no init pods, ``pods`` measured), and ``percent_of_bench``
is simulate's pods/s over bench's average pods/s: the scheduler alone against the whole command.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

import yaml

from kubesched.bench import templates as t
from kubesched.bench.wholeprocess import RowOptions, failure, figure, spawn


def write_input(out: IO[str], nodes: int, pods: int) -> None:
    """The manifests ``simulate`` reads: ``nodes`` named nodes, then ``pods`` named pods."""
    docs = [t.named_node(i) for i in range(nodes)] + [t.named_pod(i) for i in range(pods)]
    yaml.dump_all(docs, out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def measure(opts: RowOptions) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kubesched-bench-simulate-") as workdir:
        manifest, log_path = Path(workdir) / "cluster.yaml", Path(workdir) / "simulate.log"
        with open(manifest, "w") as out:
            write_input(out, opts.nodes, opts.pods)
        with open(log_path, "w") as log:
            wall, usage = _timed(["simulate", "-f", str(manifest)], log, log_path, opts.timeout)
            bench = _bench(opts, log, log_path)
    pods_per_second = opts.pods / wall
    average = figure(bench, "throughput.average")
    return {"pods_per_second": pods_per_second, "wall_seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_bytes": usage.ru_maxrss * 1024,
            "bench": {"average": average, "overall": figure(bench, "overall_pods_per_second")},
            "percent_of_bench": 100 * pods_per_second / average if average else None,
            "details": {"wall s": f"{wall:.2f}", "bench SchedulingBasic avg pods/s": "-" if average is None else f"{average:,.1f}"}}


def _timed(args: list[str], log: IO[str], log_path: Path, timeout: float) -> tuple[float, Any]:
    """Run the subject's ``kubesched ARGS`` to its end: (wall-clock seconds, its resource usage)."""
    started = time.perf_counter()
    proc = spawn(args, log)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        watchdog.cancel()
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise failure(f"`kubesched {' '.join(args[:1])}` exited with code {proc.returncode}", log_path)
    return wall, usage


def _bench(opts: RowOptions, log: IO[str], log_path: Path) -> dict[str, Any]:
    """The subject's ``kubesched bench SchedulingBasic`` at this size, its JSON document."""
    args = ["bench", "SchedulingBasic", "--nodes", str(opts.nodes), "--init-pods", "0", "--pods", str(opts.pods), "-o", "json"]
    proc = spawn(args, log, stdout=subprocess.PIPE)
    try:
        out, _ = proc.communicate(timeout=opts.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise failure(f"`kubesched bench SchedulingBasic` took longer than {opts.timeout:g}s", log_path) from None
    if not out.strip():
        raise failure(f"`kubesched bench SchedulingBasic` failed (exit {proc.returncode})", log_path)
    doc: dict[str, Any] = json.loads(out)
    return doc
