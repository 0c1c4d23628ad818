"""``kubesched explain``: why did my pod go there, and not there?

Schedules the manifests on an embedded cluster with explanations recorded, then shows, for one pod,
each node's Filter outcome and each Score plugin's contribution, the winner first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kubesched.api.errors import KubeschedError
from kubesched.cli.common import add_cluster_args, simulate_from_args, stdout_console
from kubesched.simulator.explain import attempt_to_json, preemption_lines


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="show why a pod was placed where it was (filters and scores per node)",
                       description=__doc__)
    add_cluster_args(p)
    p.add_argument("pod", metavar="POD_NAME", help="the pod to explain")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-o", "--output", choices=("table", "wide", "json"), default="table",
                   help="table: weighted scores; wide: raw/normalised/weighted; json: every attempt, as data")
    p.add_argument("--top", type=int, default=10, help="feasible nodes to list in the table (default 10)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result, _ = simulate_from_args(args, explain=True)
    key = f"{args.namespace}/{args.pod}"
    attempts = [attempt_to_json(a, result.preemption_of_attempt.get(i)) for i, a in enumerate(result.attempts) if a.pod == key]
    if not attempts:
        known = any(p["metadata"]["name"] == args.pod and p["metadata"].get("namespace") == args.namespace for p in result.pods())
        if known:
            raise KubeschedError(f'pod "{key}" was never attempted by kubesched (bound in the manifests, gated, '
                                 "or its schedulerName has no profile)")
        raise KubeschedError(f'pod "{key}" is not in the manifests')
    if args.output == "json":
        json.dump({"pod": key, "attempts": attempts}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    render(attempts[-1], len(attempts), args.top, wide=args.output == "wide")
    return 0


#: Short column headings for the in-tree Score plugins (the legend under the table spells them out).
SHORT = {
    "TaintToleration": "Taint", "NodeAffinity": "NodeAff", "NodeResourcesFit": "Fit", "NodeResourcesBalancedAllocation": "Balanced",
    "ImageLocality": "Image", "InterPodAffinity": "PodAff", "PodTopologySpread": "Spread", "DynamicResources": "DRA",
    "VolumeBinding": "Volume",
}


def _score_plugins(nodes: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Score plugins to show, and those that gave every node 0 (left out of the table)."""
    seen: list[str] = []
    for node in nodes:
        for plugin in node.get("scores", {}):
            if plugin not in seen:
                seen.append(plugin)
    zero = [p for p in seen if all(n.get("scores", {}).get(p, {}).get("weighted", 0) == 0 for n in nodes)]
    return [p for p in seen if p not in zero], zero


def render(attempt: dict[str, Any], count: int, top: int, wide: bool = False, console: Console | None = None) -> None:
    """The readable table: feasible nodes by total score (winner marked), then why the others failed."""
    console = console or stdout_console()
    nodes = attempt["nodes"]
    feasible = [n for n in nodes if n["filter"].get("passed")]
    filtered = [n for n in nodes if not n["filter"].get("passed") and "plugin" in n["filter"]]
    chosen = attempt.get("chosen")
    header = f"Pod {attempt['pod']}: " + (f"scheduled to {chosen}" if chosen else "no node fits")
    console.print(escape(f"{header} (attempt {count} of {count}; {len(feasible)} feasible of {len(nodes)} nodes)"))
    if "preFilter" in attempt:
        pre = attempt["preFilter"]
        console.print(escape(f"PreFilter {pre['plugin']}: {pre['code']}: {', '.join(pre['reasons'])}"))
    if feasible:
        shown, zero = _score_plugins(feasible)
        console.print(_score_table(feasible, shown, chosen, top, wide))
        if len(feasible) > top:
            console.print(f"... and {len(feasible) - top} more feasible node(s)")
        legend = [f"{SHORT.get(p, p)} = {p}" for p in shown if SHORT.get(p, p) != p]
        if legend:
            console.print(escape("Columns: " + "; ".join(legend) + (" (raw/normalised x weight)" if wide else " (weighted)")))
        if zero:
            console.print(escape("Scored 0 on every node: " + ", ".join(zero)))
    if filtered:
        console.print("\nFiltered out:")
        reasons = Counter((n["filter"]["plugin"], ", ".join(n["filter"]["reasons"])) for n in filtered)
        for (plugin, reason), number in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            examples = [n["name"] for n in filtered if (n["filter"]["plugin"], ", ".join(n["filter"]["reasons"])) == (plugin, reason)]
            shown = ", ".join(examples[:3]) + (", ..." if len(examples) > 3 else "")
            console.print(escape(f"  {number} node(s) ({shown})  {plugin}: {reason}"))
    if "preemption" in attempt:
        console.print()
        for line in preemption_lines(attempt["preemption"]):
            console.print(escape(line))


def _score_table(feasible: list[dict[str, Any]], plugins: list[str], chosen: str | None, top: int, wide: bool) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("NODE", no_wrap=True, min_width=4)
    for plugin in plugins:
        table.add_column(SHORT.get(plugin, plugin), justify="right", no_wrap=True)
    table.add_column("TOTAL", justify="right", no_wrap=True)
    ordered = sorted(feasible, key=lambda n: (n.get("name") != chosen, -n.get("total", 0), n["name"]))
    for node in ordered[:top]:
        cells = []
        for plugin in plugins:
            score = node.get("scores", {}).get(plugin)
            if score is None:
                cells.append("-")
            elif wide:
                cells.append(f"{score['raw']}/{score['normalized']}x{score['weight']}")
            else:
                cells.append(str(score["weighted"]))
        mark = "*" if node["name"] == chosen else ""
        table.add_row(mark, node["name"], *cells, str(node.get("total", "")))
    return table
