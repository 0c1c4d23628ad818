"""``kubesched explain``: why did my pod go there, and not there?

Schedules the manifests on an embedded cluster with explanations recorded, then shows, for one pod,
each node's Filter outcome and each Score plugin's contribution (extenders' verdicts and scores beside
the plugins'), the winner first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

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
    p.add_argument("pod", metavar="POD_NAME", help="the pod to explain (NAME with -n, or NAMESPACE/NAME)")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-o", "--output", choices=("table", "wide", "json"), default="table",
                   help="table: weighted scores; wide: raw/normalised/weighted; json: every attempt, as data")
    p.add_argument("--top", type=positive_int, default=10, help="feasible nodes to list in the table (default 10)")
    p.set_defaults(func=run)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    result, _ = simulate_from_args(args, explain=True)
    namespace, name = args.pod.split("/", 1) if "/" in args.pod else (args.namespace, args.pod)
    key = f"{namespace}/{name}"
    attempts = [attempt_to_json(a, result.preemption_of_attempt.get(i)) for i, a in enumerate(result.attempts) if a.pod == key]
    if not attempts:
        raise not_attempted(key, [f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" for p in result.pods()],
                            [r.key for r in result.removed])
    if args.output == "json":
        json.dump({"pod": key, "attempts": attempts}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    render_attempts(attempts, args.top, wide=args.output == "wide")
    unbound = not_bound_line(attempts[-1], next((p for p in result.pods() if _pod_key(p) == key), None))
    if unbound:
        stdout_console().print(escape(unbound))
    return 0


def _pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"


def not_bound_line(last: dict[str, Any], pod: dict[str, Any] | None) -> str:
    """When the last cycle chose a node but the pod is not bound (a Permit plugin rejected it, as
    gang scheduling does when its gang does not form, or binding failed): what the pod says now."""
    if pod is None or not last.get("chosen") or (pod.get("spec") or {}).get("nodeName"):
        return ""
    conditions = (pod.get("status") or {}).get("conditions") or []
    message = next((c.get("message") for c in conditions if c.get("type") == "PodScheduled" and c.get("message")), "")
    return f"\nNot bound: the cycle chose {last['chosen']}, then {message or 'binding did not complete'}"


def not_attempted(key: str, pods: list[str], removed: list[str]) -> KubeschedError:
    """Why ``key`` has no attempt to show, suggesting the pods the user may have meant: the same
    name in another namespace (``explain web-1`` without ``-n shop``)."""
    if key in pods:
        return KubeschedError(f'pod "{key}" was never attempted by kubesched (bound in the manifests, gated, '
                              "or its schedulerName has no profile)")
    if key in removed:
        return KubeschedError(f'pod "{key}" was never attempted by kubesched: the cluster removed it (see simulate\'s "Removed pods")')
    name = key.split("/", 1)[1]
    same_name = [p for p in pods if p.split("/", 1)[1] == name]
    if same_name:
        hints = ", ".join(f"{p} (-n {p.split('/', 1)[0]})" for p in same_name)
        return KubeschedError(f'pod "{key}" is not in the manifests; did you mean {hints}?')
    similar = [p for p in pods if name in p.split("/", 1)[1]][:5]
    if similar:
        return KubeschedError(f'pod "{key}" is not in the manifests; pods with similar names: {", ".join(similar)}')
    return KubeschedError(f'pod "{key}" is not in the manifests')


def render_attempts(attempts: list[dict[str, Any]], top: int, wide: bool = False, console: Console | None = None) -> None:
    """The last attempt; when it went to the node an earlier preemption nominated, that attempt too,
    with the preemption's candidates and victims (the last attempt then only checked that node)."""
    console = console or stdout_console()
    last = len(attempts)
    render(attempts[-1], last, top, wide, console, index=last)
    if "preemption" in attempts[-1]:
        return
    preempted = next((i for i in range(last - 1, 0, -1) if "preemption" in attempts[i - 1]), None)
    if preempted is None:
        return
    nominated = attempts[preempted - 1]["preemption"].get("node")
    if nominated and attempts[-1].get("chosen") == nominated:
        console.print(escape(f"{nominated} is the node preemption nominated: the scheduler checks a pod's nominated "
                             "node first and, when it fits, looks at no other node."))
    console.print()
    render(attempts[preempted - 1], last, top, wide, console, index=preempted)


def summary_line(attempts: list[dict[str, Any]]) -> str:
    """A pod's attempts in one line: the outcome, what the last attempt saw, the preemption if any."""
    last = attempts[-1]
    nodes = last["nodes"]
    feasible = [n for n in nodes if n["filter"].get("passed")]
    outcome = f"scheduled to {last['chosen']}" if last.get("chosen") else "no node fits"
    parts = [f"{len(feasible)} feasible of {len(nodes)} nodes"]
    scored = sorted((n for n in feasible if "total" in n), key=lambda n: (n["name"] != last.get("chosen"), -n["total"], n["name"]))
    if scored:
        parts.append(f"score {scored[0]['total']}" + (f", next {scored[1]['name']} {scored[1]['total']}" if len(scored) > 1 else ""))
    rejected = Counter(n["filter"]["plugin"] for n in nodes if "plugin" in n["filter"])
    if rejected:
        parts.append("filtered out by " + ", ".join(f"{plugin} ({count})" for plugin, count in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))))
    if "preFilter" in last:
        parts.append(f"PreFilter {last['preFilter']['plugin']}: {', '.join(last['preFilter']['reasons'])}")
    line = f"{last['pod']}: {outcome} (attempt {len(attempts)}: {'; '.join(parts)})"
    preemption = next((a["preemption"] for a in reversed(attempts) if "preemption" in a), None)
    if preemption is not None and preemption.get("node"):
        line += f"; preempted {', '.join(preemption['victims'])} on {preemption['node']}"
    return line


#: Short column headings for the in-tree Score plugins (the legend under the table spells them out).
SHORT = {
    "TaintToleration": "Taint", "NodeAffinity": "NodeAff", "NodeResourcesFit": "Fit", "NodeResourcesBalancedAllocation": "Balanced",
    "ImageLocality": "Image", "InterPodAffinity": "PodAff", "PodTopologySpread": "Spread", "DynamicResources": "DRA",
    "VolumeBinding": "Volume",
}


def heading(plugin: str) -> str:
    """A score column's heading: the short name of an in-tree plugin, ``ext:HOST:PORT`` for an
    extender (named by its URL prefix), else the plugin's name."""
    if "://" in plugin:
        return "ext:" + urlsplit(plugin).netloc
    return SHORT.get(plugin, plugin)


def _score_plugins(nodes: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Score plugins to show, and those that gave every node 0 (left out of the table)."""
    seen: list[str] = []
    for node in nodes:
        for plugin in node.get("scores", {}):
            if plugin not in seen:
                seen.append(plugin)
    zero = [p for p in seen if all(n.get("scores", {}).get(p, {}).get("weighted", 0) == 0 for n in nodes)]
    return [p for p in seen if p not in zero], zero


def render(attempt: dict[str, Any], count: int, top: int, wide: bool = False, console: Console | None = None,
           index: int | None = None) -> None:
    """The readable table of attempt ``index`` (default: the last) of ``count``: feasible nodes by
    total score (winner marked), then why the others failed, then the preemption that followed."""
    console = console or stdout_console()
    nodes = attempt["nodes"]
    feasible = [n for n in nodes if n["filter"].get("passed")]
    filtered = [n for n in nodes if not n["filter"].get("passed") and "plugin" in n["filter"]]
    chosen = attempt.get("chosen")
    header = f"Pod {attempt['pod']}: " + (f"scheduled to {chosen}" if chosen else "no node fits")
    console.print(escape(f"{header} (attempt {index or count} of {count}; {len(feasible)} feasible of {len(nodes)} nodes)"))
    if "preFilter" in attempt:
        pre = attempt["preFilter"]
        console.print(escape(f"PreFilter {pre['plugin']}: {pre['code']}: {', '.join(pre['reasons'])}"))
    if feasible and not any("total" in n for n in feasible):
        names = ", ".join(n["name"] for n in feasible[:top]) + (", ..." if len(feasible) > top else "")
        console.print(escape(f"Passed every filter: {names} (not scored: with one feasible node, or no Score plugin, "
                             "the scheduler skips scoring)"))
    elif feasible:
        shown, zero = _score_plugins(feasible)
        console.print(_score_table(feasible, shown, chosen, top, wide))
        if len(feasible) > top:
            console.print(f"... and {len(feasible) - top} more feasible node(s)")
        legend = [f"{heading(p)} = {p}" for p in shown if heading(p) != p]
        if legend:
            console.print(escape("Columns: " + "; ".join(legend) + (" (raw/normalised x weight)" if wide else " (weighted)")))
        if zero:
            console.print(escape("Scored 0 on every node: " + ", ".join(zero)))
    if filtered:
        console.print("\nFiltered out:")
        reasons = Counter((n["filter"]["plugin"], ", ".join(n["filter"]["reasons"])) for n in filtered)
        for (plugin, reason), number in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            examples = [n["name"] for n in filtered if (n["filter"]["plugin"], ", ".join(n["filter"]["reasons"])) == (plugin, reason)]
            listed = ", ".join(examples[:3]) + (", ..." if len(examples) > 3 else "")
            console.print(escape(f"  {number} node(s) ({listed})  {plugin}: {reason}"))
    if "preemption" in attempt:
        console.print()
        for line in preemption_lines(attempt["preemption"]):
            console.print(escape(line))


def _score_table(feasible: list[dict[str, Any]], plugins: list[str], chosen: str | None, top: int, wide: bool) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("NODE", no_wrap=True, min_width=4)
    for plugin in plugins:
        table.add_column(heading(plugin), justify="right", no_wrap=True)
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
