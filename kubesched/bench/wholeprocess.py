"""kubesched's own rows of ``kubesched bench``: whole processes timed from outside.

Upstream's scheduler_perf workloads (``workloads.py``) time the scheduler inside the benchmark's
process. These rows time what a user waits for instead: ``kubesched run`` from process start to
its first binding (``startup.py``), ``kubesched up`` under concurrent clients (``upclients.py``)
and ``kubesched simulate`` from start to its last line (``simulate_e2e.py``). The process timed is
the *subject* tree's ``kubesched`` (``subject.py``), so that this tree's harness can time a
reference revision's commands (``compare_revisions`` sets the subject); everything else (the
API server ``run`` talks to, the clients of ``up``, the input of ``simulate``) is this tree's, the
same for both sides. Each row declares the figures ``compare_revisions`` compares.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import math
import os
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kubesched.bench import subject
from kubesched.bench.machine import machine
from kubesched.bench.targets import peak_rss_of


@dataclass(frozen=True)
class Figure:
    """One figure of a row's JSON document: a label (with its unit), a dotted key, and whether a
    higher value is better (``compare_revisions`` inverts the ratio of the others)."""

    label: str
    key: str
    higher_is_better: bool


@dataclass(frozen=True)
class RowOptions:
    nodes: int
    pods: int
    #: RunStartup: process starts, the figures being medians over them.
    runs: int
    #: UpThroughput: clients creating pods at once.
    concurrency: int
    timeout: float
    seed: int | None = None
    #: UpThroughput: ``kubesched apiserver`` instead of ``up`` (creation only, nothing binds).
    apiserver_only: bool = False
    #: UpThroughput: pass ``--insecure-allow-anonymous`` (plain HTTP, no authentication), to
    #: separate what TLS and authentication cost; revisions without the flag cannot run it.
    insecure: bool = False


@dataclass(frozen=True)
class ProcessRow:
    name: str
    #: The module (under ``kubesched.bench``) whose ``measure(RowOptions) -> dict`` runs the row;
    #: imported when the row runs, so that listing the rows imports none of them.
    module: str
    summary: str
    nodes: int
    pods: int
    figures: tuple[Figure, ...]
    target: str
    runs: int = 1
    concurrency: int = 50

    def options(self, nodes: int | None = None, pods: int | None = None, runs: int | None = None,
                concurrency: int | None = None, **rest: Any) -> RowOptions:
        """The row's defaults where a value is None."""
        return RowOptions(nodes=self.nodes if nodes is None else nodes, pods=self.pods if pods is None else pods,
                          runs=self.runs if runs is None else runs,
                          concurrency=self.concurrency if concurrency is None else concurrency, **rest)

    def measure(self, opts: RowOptions) -> dict[str, Any]:
        """Run the row; its JSON document (the figures, the sizes, the subject tree and the machine)."""
        subject.compile_tree()
        figures: dict[str, Any] = importlib.import_module(f"kubesched.bench.{self.module}").measure(opts)
        return {"workload": self.name, "kind": "whole-process", "subject": str(subject.subject_tree()),
                "params": {"nodes": opts.nodes, "pods": opts.pods, "runs": opts.runs, "concurrency": opts.concurrency,
                           "apiserver_only": opts.apiserver_only, "insecure": opts.insecure},
                "target": self.target, "complete": True, "incomplete_reason": None, **figures, "machine": machine()}


RSS = Figure("peak RSS MiB", "peak_rss_bytes", False)

ROWS: dict[str, ProcessRow] = {r.name: r for r in (
    ProcessRow("RunStartup", "startup",
               "`kubesched run`: process start to the first pod bound, against `kubesched apiserver` holding --nodes "
               "nodes and --pods pending pods; median over --runs starts", 1000, 5,
               (Figure("s to first binding", "first_binding_seconds.median", False),
                Figure("CPU s to first binding", "first_binding_cpu_seconds.median", False), RSS),
               "<= 0.5 s (kube-scheduler 0.3-0.8 s)", runs=5),
    ProcessRow("UpThroughput", "upclients",
               "`kubesched up`: --nodes nodes, then --pods pods created by --concurrency clients; pods/s from the "
               "first creation to all bound, and the create latency", 1000, 10_000,
               (Figure("pods/s created to bound", "pods_per_second", True),
                Figure("creates/s", "creates_per_second", True),
                Figure("create p99 ms", "create_latency_ms.p99", False), RSS),
               ">= 1,500 pods/s with 50 clients, create p99 <= 100 ms"),
    ProcessRow("SimulateEndToEnd", "simulate_e2e",
               "`kubesched simulate -f` on --nodes nodes and --pods pods, process start to the last line; and "
               "`kubesched bench SchedulingBasic` at the same size", 500, 10_000,
               (Figure("pods/s end to end", "pods_per_second", True), Figure("CPU s", "cpu_seconds", False),
                Figure("% of bench SchedulingBasic", "percent_of_bench", True), RSS),
               ">= 80% of `bench SchedulingBasic` and >= 3x 2813cd5"),
)}


def row(name: str) -> ProcessRow | None:
    """The row called ``name`` (case-insensitive), or None."""
    return next((r for key, r in ROWS.items() if key.lower() == name.lower()), None)


# --- helpers the rows share -----------------------------------------------------------------------
def free_port() -> int:
    """A TCP port free on the loopback interface now (for flags that cannot take 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (the value at index ceil(n*p/100)-1 of the sorted values)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * p / 100) - 1)]


def cpu_seconds_of(pid: int) -> float | None:
    """User + system CPU seconds a live process has used so far (/proc), None where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spawn(args: Sequence[str], log: IO[str], stdout: int | IO[Any] = subprocess.DEVNULL) -> subprocess.Popen:
    """The subject's ``kubesched ARGS``, its standard error into ``log``."""
    return subprocess.Popen(subject.command(*args), env=subject.env({"PYTHONUNBUFFERED": "1"}), stdin=subprocess.DEVNULL,
                            stdout=stdout, stderr=log)


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> int | None:
    """Terminate ``proc`` (SIGTERM, then SIGKILL after ``timeout``); its peak RSS, read just before."""
    rss = peak_rss_of(proc.pid)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return rss


async def while_alive(done: Callable[[], bool], proc: subprocess.Popen, log: Path, timeout: float,
                     awaited: str) -> None:
    """Poll until ``done()``; an error naming ``awaited`` (and the end of the subject's log) if
    ``proc`` exits or ``timeout`` seconds pass first."""
    deadline = time.perf_counter() + timeout
    while not done():
        if proc.poll() is not None:
            raise failure(f"the subject exited with code {proc.returncode} before {awaited}", log)
        if time.perf_counter() > deadline:
            raise failure(f"no {awaited} in {timeout:g}s", log)
        await asyncio.sleep(0.05)


def failure(what: str, log: Path) -> RuntimeError:
    """An error naming ``what`` failed, with the end of the subject's log."""
    with contextlib.suppress(OSError):
        tail = log.read_text(errors="replace").strip()[-1500:]
        return RuntimeError(f"{what}; its log ends:\n{tail}" if tail else what)
    return RuntimeError(what)


def figure(doc: dict[str, Any], key: str) -> float | None:
    """A dotted key of a bench JSON document (``throughput.average``); None when absent."""
    value: Any = doc
    for part in key.split("."):
        if not isinstance(value, dict) or value.get(part) is None:
            return None
        value = value[part]
    return float(value)


def lines(r: ProcessRow, doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The readable form of a row's document: its figures, then sizes, target and subject."""
    out = []
    for f in r.figures:
        value = figure(doc, f.key)
        if f.key == "peak_rss_bytes" and value is not None:
            value /= 2**20
        out.append((f.label, "-" if value is None else f"{value:,.3f}" if value < 10 else f"{value:,.1f}"))
    out += [(key, str(value)) for key, value in doc.get("details", {}).items()]
    params = doc["params"]
    out += [("sizes", f"{params['nodes']} nodes, {params['pods']} pods"), ("target", r.target), ("subject", doc["subject"])]
    if not doc.get("complete"):
        out.append(("incomplete", str(doc.get("incomplete_reason"))))
    return out
