"""``kubesched simulate``: schedule manifests on an embedded cluster and print where pods went."""

from __future__ import annotations

import argparse
import json
import sys

import yaml
from rich.console import Console
from rich.table import Table

from kubesched.api.kinds import EVENT
from kubesched.cli.common import add_cluster_args, simulate_from_args, stdout_console
from kubesched.simulator.simulate import SimulationResult


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="schedule manifests on an embedded cluster (no cluster needed)",
                       description=__doc__)
    add_cluster_args(p)
    p.add_argument("-o", "--output", choices=("table", "wide", "yaml", "json"), default="table")
    p.add_argument("--explain", action="store_true", help="record per-node filter and score details (slower)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result, cfg = simulate_from_args(args, explain=args.explain)
    served = {p.scheduler_name for p in cfg.profiles}
    if args.output in ("yaml", "json"):
        print_objects(result, args.output, explain=args.explain)
    else:
        print_table(result, served, wide=args.output == "wide")
    return 0


def pod_status(pod: dict) -> str:
    """kubectl's STATUS column, as far as a simulation gets: a gated pod reads SchedulingGated."""
    meta, status = pod["metadata"], pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    if _scheduling_gated(status):
        return "SchedulingGated"
    return status.get("reason") or status.get("phase") or "Pending"


def _scheduling_gated(status: dict) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in status.get("conditions") or [])


def pending_reason(pod: dict, served: set[str]) -> str | None:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if spec.get("nodeName"):
        return status.get("message") if status.get("phase") == "Failed" else None
    name = spec.get("schedulerName") or "default-scheduler"
    if name not in served:
        return f'schedulerName "{name}" has no profile here, so kubesched leaves the pod for another scheduler'
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" and not _scheduling_gated(status):
            return condition.get("message") or condition.get("reason")
    if spec.get("schedulingGates"):
        return "waiting for scheduling gates: [" + " ".join(g.get("name", "") for g in spec["schedulingGates"]) + "]"
    return None


def print_table(result: SimulationResult, served: set[str], wide: bool = False) -> None:
    console = stdout_console()
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="none")
    columns = ["NAMESPACE", "NAME", "STATUS", "NODE"]
    if wide:
        columns += ["IP", "NOMINATED NODE", "PRIORITY"]
    for column in columns:
        table.add_column(column, no_wrap=True)
    notes = []
    for pod in result.pods():
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        row = [meta.get("namespace", ""), meta["name"], pod_status(pod), spec.get("nodeName") or "<none>"]
        if wide:
            row += [status.get("podIP") or "<none>", status.get("nominatedNodeName") or "<none>", str(spec.get("priority", 0))]
        table.add_row(*row)
        reason = pending_reason(pod, served)
        if reason:
            notes.append((f"{meta.get('namespace')}/{meta['name']}", reason))
    with console.capture() as captured:
        console.print(table)
    print("\n".join(line.rstrip() for line in captured.get().splitlines()))
    scheduled = sum(1 for p in result.pods() if (p.get("spec") or {}).get("nodeName"))
    print(f"\n{scheduled}/{len(result.pods())} pods scheduled.")
    if notes:
        print("\nPending pods:")
        for key, reason in notes:
            print(f"  {key}: {reason}")
    print_preemptions(console, result)
    if result.ignored:
        kinds = sorted({o["kind"] for o in result.ignored})
        print(f"\nnote: kubesched kept but does not act on {len(result.ignored)} object(s) of kind(s): {', '.join(kinds)}", file=sys.stderr)


def print_preemptions(console: Console, result: SimulationResult) -> None:
    """One line per preemption: who preempted, on which node, whom."""
    if not result.preemptions:
        return
    console.print("\nPreemptions:", markup=False)
    for record in result.preemptions:
        console.print(f"  {record.preemptor} preempted {', '.join(record.victims)} on {record.node}", markup=False)


def print_objects(result: SimulationResult, fmt: str, explain: bool = False) -> None:
    from kubesched.simulator.explain import attempts_to_json, preemption_json

    items = list(result.pods()) + sorted(result.store.iter_all(EVENT), key=lambda e: e["metadata"]["name"])
    doc: dict = {"apiVersion": "v1", "kind": "List", "items": items}
    if result.preemptions:
        doc["preemptions"] = [preemption_json(r) for r in result.preemptions]
    if explain:
        doc["explanations"] = attempts_to_json(result.attempts, result.preemption_of_attempt)
    if fmt == "json":
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        yaml.safe_dump(doc, sys.stdout, sort_keys=False)
