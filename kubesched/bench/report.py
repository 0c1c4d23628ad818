"""Presenting a benchmark result: a readable table, or JSON shaped after scheduler_perf's
``DataItem``s (``SchedulingThroughput`` in pods/s; latencies in ms), plus the machine it ran on."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from kubesched.bench.machine import machine
from kubesched.bench.runner import BenchResult


def to_json(result: BenchResult) -> dict[str, Any]:
    doc = result.to_json()
    doc["machine"] = machine()
    return doc


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.0f} MiB"


def _stats_row(table: Table, label: str, stats: dict[str, float] | None, unit: str, digits: int) -> None:
    if stats is None:
        table.add_row(label, "-", "-", "-", "-", "-", unit)
        return
    table.add_row(label, _num(stats["average"], digits), _num(stats["perc50"], digits), _num(stats["perc90"], digits),
                  _num(stats["perc95"], digits), _num(stats["perc99"], digits), unit)


def print_table(result: BenchResult, console: Console) -> None:
    """The result as scheduler_perf reports it, on ``console`` (the command line passes its own)."""
    r = result
    sizes = ", ".join(f"{k}={v}" for k, v in r.params.items())
    console.print(f"[bold]{r.workload}[/bold] ({sizes}; mode {r.mode}, percentageOfNodesToScore "
                  f"{r.percentage_of_nodes_to_score}, seed {r.seed})")
    stats = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in ("", "Average", "Perc50", "Perc90", "Perc95", "Perc99", "unit"):
        stats.add_column(column, justify="left" if column in ("", "unit") else "right")
    _stats_row(stats, "SchedulingThroughput", r.throughput, "pods/s", 1)
    _stats_row(stats, "attempt latency", r.attempt_latency_ms, "ms", 3)
    _stats_row(stats, "algorithm latency", r.algorithm_latency_ms, "ms", 3)
    if r.unschedulable_attempt_latency_ms is not None:
        _stats_row(stats, "failed attempt latency", r.unschedulable_attempt_latency_ms, "ms", 3)
    console.print(stats)
    console.print("  (attempt latency: scheduling_attempt_duration_seconds of scheduled pods, algorithm + binding; "
                  "algorithm latency: scheduling_algorithm_duration_seconds; failed attempt latency: "
                  "scheduling_attempt_duration_seconds of unschedulable attempts, PostFilter included)")
    if r.variant == "custom":
        threshold = "none for these sizes (upstream's floors are for its own sizes, the defaults)"
    else:
        threshold = f"{r.threshold} pods/s average (upstream {r.variant})" if r.threshold else f"none (upstream {r.variant})"
    lines = [
        ("measured pods scheduled", f"{r.scheduled}/{r.measured_pods} in {r.measure_seconds:.1f}s "
                                    f"({_num(r.overall_pods_per_second)} pods/s overall)"),
        ("CPU per pod", "-" if r.cpu_ms_per_pod is None else f"{r.cpu_ms_per_pod:.3f} ms of this process's CPU per scheduled pod"),
        ("attempts", ", ".join(f"{k} {v}" for k, v in r.attempts.items()) or "-"),
        ("nodes scored", "-" if r.nodes_scored_percent is None else f"{r.nodes_scored_percent:.1f}% of nodes per scheduled pod"),
        ("peak RSS", _mib(r.peak_rss_bytes) + (f" (API server process: {_mib(r.apiserver_peak_rss_bytes)})"
                                               if r.apiserver_peak_rss_bytes else "")),
        ("memory per node / pod", _per_item(r.memory)),
        ("kubesched target", f"{r.target} pods/s average: {versus(r.throughput['average'] if r.throughput else None, r.target)}"
                             if r.target else "none"),
        ("upstream CI floor", threshold),
        ("setup", f"{r.setup_seconds:.1f}s"),
    ]
    if r.throughput is None:
        lines.append(("note", "the measured pods took under two 1s samples: SchedulingThroughput needs more pods"))
    if r.note:
        lines.append(("note", r.note))
    if not r.complete:
        lines.append(("incomplete", f"[red]{r.incomplete_reason}[/red]"))
    for label, text in lines:
        console.print(f"  {label + ':':<26}{text}")


def _per_item(memory: dict[str, float] | None) -> str:
    if memory is None:
        return "-"
    return (f"{memory['per_node_bytes'] / 1024:,.1f} KiB / {memory['per_pod_bytes'] / 1024:,.1f} KiB "
            f"(resident set deltas: {memory['nodes']:,.0f} nodes, {memory['bound_pods']:,.0f} bound pods)")


def versus(average: float | None, target: int | None) -> str:
    """How the average compares with a target: "met (+12%)" or "-48%"; "-" without both."""
    if average is None or not target:
        return "-"
    delta = 100.0 * (average / target - 1.0)
    return f"met ({delta:+.0f}%)" if average >= target else f"{delta:+.0f}%"


#: docs/performance.md's embedded-mode table, which ``markdown_row`` fills.
MARKDOWN_HEADER = (
    "| Workload | upstream variant | nodes / init / measured | kubesched avg pods/s | p50 / p90 / p99 pods/s "
    "| overall pods/s | attempt latency p50 / p99 (ms) | nodes scored | peak RSS | kubesched target | vs target "
    "| upstream CI floor (avg pods/s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def markdown_row(doc: dict[str, Any]) -> str:
    """One row of docs/performance.md's table from a JSON result."""
    tp = doc.get("throughput") or {}
    lat = doc.get("attempt_latency_ms") or {}
    scored = doc.get("nodes_scored_percent")
    average = tp.get("average") if tp else None
    target = doc.get("target")
    cells = [
        doc["workload"],
        doc.get("variant", "-"),
        " / ".join(str(doc["params"].get(k, 0)) for k in ("initNodes", "initPods", "measurePods")),
        _num(average, 0),
        " / ".join(_num(tp.get(k), 0) for k in ("perc50", "perc90", "perc99")) if tp else "-",
        _num(doc.get("overall_pods_per_second"), 1),
        " / ".join(_num(lat.get(k), 2) for k in ("perc50", "perc99")) if lat else "-",
        "-" if scored is None else f"{scored:.0f}%",
        _mib(doc.get("peak_rss_bytes")),
        f"≥ {target}" if target else "—",
        versus(average, target),
        str(doc["threshold"]) if doc.get("threshold") else "none",
    ]
    if not doc.get("complete"):
        cells[3] += " (incomplete)"
    return "| " + " | ".join(cells) + " |"
