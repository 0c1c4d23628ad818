"""``kubesched simulate``: schedule manifests on an embedded cluster and print where pods went.

With ``--scenario``, timed steps (drain a node, fail a zone, add nodes, scale a workload; see
docs/scenarios.md) change the cluster on the virtual clock, and a timeline of what happened comes
before the final state.

Nothing is left out of the report: besides placements and pending pods' reasons, it lists pods the
cluster removed during the run (bound to a node that does not exist, evicted by a taint),
controllers' warnings (a template the API rejects: FailedCreate) and objects kept but not acted on.
Exit codes: 1 when a controller could not create the pods the input asks for or a scenario step
could not be carried out, 3 with
``--fail-on-pending`` when some pod did not end up running, 0 otherwise (docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import orjson
import yaml
from rich.console import Console
from rich.table import Table

from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import EVENT, NODE
from kubesched.cli.common import add_cluster_args, add_report_arg, simulate_from_args, stdout_console, write_report
from kubesched.cli.exitcodes import OK, PENDING
from kubesched.simulator.scenario import describe_seconds, load_scenario
from kubesched.simulator.simulate import (
    NOT_ACTED_ON_BECAUSE,
    ClusterWarning,
    SimulationResult,
    creation_order,
    not_served_because,
)
from kubesched.simulator.snapshot import created_by_the_server
from kubesched.simulator.timeline import TimelineEntry

#: Kinds of runtime state that ``-o yaml|json`` leaves out of the cluster's state.
RUNTIME_KINDS = frozenset({"Event", "Lease"})
#: Timeline events that take a pod away from its node ("evicted from node-a").
LEAVING = frozenset({"evicted", "preempted", "deleted", "eviction blocked", "eviction failed"})
#: How many object names a "not acted on" line lists before "and N more".
NAMES_SHOWN = 5


class CreateFailed(KubeschedError):
    """Controllers could not create the pods the input asks for: the input is wrong, though the
    API accepted the controllers themselves."""

    def __init__(self, failures: list[ClusterWarning]) -> None:
        super().__init__(f"{len(failures)} controller(s) could not create the pods the input asks for: "
                         + "; ".join(w.line() for w in failures))
        self.failures = failures


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="schedule manifests on an embedded cluster (no cluster needed)",
                       description=__doc__)
    add_cluster_args(p)
    p.add_argument("-o", "--output", choices=("table", "wide", "yaml", "json"), default="table")
    p.add_argument("--explain", action="store_true",
                   help="record every attempt's per-node Filter and Score results (slower): a one-line summary per pod "
                        "under the table; every detail under 'explanations' with -o json|yaml")
    p.add_argument("--scenario", metavar="SCENARIO.yaml",
                   help="timed steps to run on the virtual clock (drain, failNode, addNodes, scale, ...: docs/scenarios.md); "
                        "prints a timeline before the final state")
    p.add_argument("--fail-on-pending", action="store_true",
                   help=f"exit {PENDING} when some pod did not end up running (pending, rejected, or removed)")
    add_report_arg(p, "CPU/memory allocation per node by zone, the scenario's timeline (pods bound, pending, evicted, "
                      "preempted over virtual time), and each pending pod's filter reasons per node count (records "
                      "explanations, as --explain)")
    p.set_defaults(func=run)


class StepsFailed(KubeschedError):
    """Scenario steps that could not be carried out (a node or object that did not exist then)."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"{len(errors)} scenario step(s) could not be carried out: " + "; ".join(errors))


def run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario) if args.scenario else None
    result, cfg = simulate_from_args(args, explain=args.explain or bool(args.report), scenario=scenario)
    if args.report:
        from kubesched.simulator import htmlreport

        write_report(htmlreport.render(result), args.report)
    served = {p.scheduler_name for p in cfg.profiles}
    if args.output in ("yaml", "json"):
        print_objects(result, args.output, explain=args.explain)
        warn_on_stderr(result)
    else:
        if result.timeline is not None:
            print_timeline(result.timeline)
        print_table(result, served, wide=args.output == "wide", explain=args.explain)
    failures = result.input_errors()
    if failures:
        raise CreateFailed(failures)
    if result.scenario_errors:
        raise StepsFailed(result.scenario_errors)
    if args.fail_on_pending and not_running(result):
        return PENDING
    return OK


def print_timeline(entries: list[TimelineEntry]) -> None:
    """The scenario's timeline, one aligned line per entry: virtual time (to the second; -o json has
    the milliseconds), event, object, node, why."""
    print("Timeline (virtual time since scheduling began):")
    times = [describe_seconds(round(e.seconds)) for e in entries]
    time_width = max((len(t) for t in times), default=0)
    event_width = max((len(e.event) for e in entries), default=0)
    for at, entry in zip(times, entries, strict=True):
        line = f"  {at:>{time_width}}  {entry.event:<{event_width}}  {entry.object}"
        if entry.node:
            line += f" {'from' if entry.event in LEAVING else 'on'} {entry.node}"
        if entry.message:
            line += f": {entry.message}"
        print(line.rstrip())
    print()


def not_running(result: SimulationResult) -> list[str]:
    """Pods that did not end up running: never bound, bound but failed, or removed by the cluster."""
    out = [f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" for p in result.pods()
           if not (p.get("spec") or {}).get("nodeName") or (p.get("status") or {}).get("phase") == "Failed"]
    return out + [r.key for r in result.removed]


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


def print_table(result: SimulationResult, served: set[str], wide: bool = False, explain: bool = False) -> None:
    console = stdout_console()
    columns = ["NAMESPACE", "NAME", "STATUS", "NODE"]
    if wide:
        columns += ["IP", "NOMINATED NODE", "PRIORITY"]
    notes = []
    rows: list[list[str]] = [columns]
    pods = result.pods()
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        row = [meta.get("namespace", ""), meta["name"], pod_status(pod), spec.get("nodeName") or "<none>"]
        if wide:
            row += [status.get("podIP") or "<none>", status.get("nominatedNodeName") or "<none>", str(spec.get("priority", 0))]
        rows.append(row)
        reason = pending_reason(pod, served)
        if reason:
            notes.append((f"{meta.get('namespace')}/{meta['name']}", reason))
    print("\n".join(table_lines(console, rows)))
    scheduled = sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))
    removed = f", {len(result.removed)} removed" if result.removed else ""
    print(f"\n{scheduled}/{len(pods)} pods scheduled{removed}.")
    if notes:
        print("\nPending pods:")
        for key, reason in notes:
            print(f"  {key}: {reason}")
    print_preemptions(console, result)
    for title, lines in report_sections(result):
        print(f"\n{title}:")
        for line in lines:
            print(f"  {line}")
    if explain:
        print_explanations(result)


#: Cell text rich prints as it is: printable ASCII without markup (``[``) or emoji codes (``:``).
_PLAIN_CELL = re.compile(r"[ -9;-Z\\-~]*")


def table_lines(console: Console, rows: list[list[str]]) -> list[str]:
    """``rows`` (the header, then the cells) as a borderless rich table prints them on
    ``console``, columns two spaces apart, each line without trailing blanks. Laid out here when
    every cell is plain text and the table fits the console, which is all rich does then, at a
    fraction of its cost for thousands of pods; otherwise rich lays it out (markup, wide
    characters, columns to shrink)."""
    widths = [max(len(cell) for cell in column) for column in zip(*rows, strict=True)]
    if sum(widths) + 2 * (len(widths) - 1) <= console.width and all(
            _PLAIN_CELL.fullmatch(cell) for row in rows for cell in row):
        return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="none")
    for column in rows[0]:
        table.add_column(column, no_wrap=True)
    for row in rows[1:]:
        table.add_row(*row)
    with console.capture() as captured:
        console.print(table)
    return [line.rstrip() for line in captured.get().splitlines()]


def report_sections(result: SimulationResult) -> list[tuple[str, list[str]]]:
    """What the cluster did besides placing pods, each a titled list of lines; empty ones left out."""
    nodes = {n["metadata"]["name"] for n in result.store.iter_all(NODE)}
    sections = [
        ("Removed pods", [f"{r.key}: {r.explanation(r.node in nodes)}" for r in result.removed]),
        ("Warnings", [w.line() for w in result.warnings()]),
        ("Spinning", [spin.line() for spin in result.spins]),
        ("Not acted on", not_acted_on_lines(result)),
    ]
    return [(title, lines) for title, lines in sections if lines]


def not_acted_on_lines(result: SimulationResult) -> list[str]:
    """One line per kind of object kept but not acted on: which objects, and why."""
    unserved = {str(o.get("kind")): not_served_because(o) for o in result.ignored}
    lines = []
    for kind, keys in sorted(result.not_acted_on().items()):
        shown = ", ".join(keys[:NAMES_SHOWN]) + (f" and {len(keys) - NAMES_SHOWN} more" if len(keys) > NAMES_SHOWN else "")
        if kind in NOT_ACTED_ON_BECAUSE:
            why = NOT_ACTED_ON_BECAUSE[kind]
        elif kind in unserved:
            why = unserved[kind]
        else:
            why = "nothing in the simulation reads this kind"
        lines.append(f"{kind} {shown}: {why}")
    return lines


def warn_on_stderr(result: SimulationResult) -> None:
    """With -o json|yaml (stdout is data), the report's extra sections as warnings on stderr."""
    for title, lines in report_sections(result):
        for line in lines:
            print(f"warning: {title.lower()}: {line}", file=sys.stderr)


def print_explanations(result: SimulationResult) -> None:
    """``--explain`` in the table: each attempted pod's outcome in one line (``explain POD`` has the details)."""
    from kubesched.cli.explain import summary_line
    from kubesched.simulator.explain import attempt_to_json

    by_pod: dict[str, list[dict]] = {}
    for index, attempt in enumerate(result.attempts):
        by_pod.setdefault(attempt.pod, []).append(attempt_to_json(attempt, result.preemption_of_attempt.get(index)))
    if not by_pod:
        return
    print("\nExplanations (kubesched explain POD -n NAMESPACE for the details):")
    for pod in sorted(by_pod):
        print(f"  {summary_line(by_pod[pod])}")


def print_preemptions(console: Console, result: SimulationResult) -> None:
    """One line per preemption: who preempted, on which node, whom."""
    if not result.preemptions:
        return
    console.print("\nPreemptions:", markup=False)
    for record in result.preemptions:
        console.print(f"  {record.preemptor} preempted {', '.join(record.victims)} on {record.node}", markup=False)


def state_objects(result: SimulationResult) -> list[dict]:
    """Every object the cluster holds at the end, in the order ``simulate`` creates them, so that
    the output read back with ``-f`` is the same cluster: bound pods stay on their nodes, objects
    keep their uids (owner references, claimRefs and reservedFor still match). Left out: what the
    cluster creates by itself (the default namespaces and system PriorityClasses, node Leases) and
    events (printed apart, under ``events``: they are a record of the run, not state)."""
    objects: list[dict] = []
    for kind in result.store.kinds():
        if kind.kind in RUNTIME_KINDS:
            continue
        objects += [o for o in result.store.iter_all(kind) if not created_by_the_server(o)]
    ordered, _ = creation_order([*objects, *result.ignored], result.store.feature_gates)
    return ordered + [o for o in result.ignored if o not in ordered]


def print_objects(result: SimulationResult, fmt: str, explain: bool = False) -> None:
    from kubesched.simulator.explain import attempts_to_json, preemption_json

    events = sorted(result.store.iter_all(EVENT), key=lambda e: e["metadata"]["name"])
    doc: dict = {"apiVersion": "v1", "kind": "List", "items": state_objects(result), "events": events}
    if result.preemptions:
        doc["preemptions"] = [preemption_json(r) for r in result.preemptions]
    if explain:
        doc["explanations"] = attempts_to_json(result.attempts, result.preemption_of_attempt)
    if result.timeline is not None:
        doc["timeline"] = [entry.to_json() for entry in result.timeline]
    if result.spins:
        doc["spinning"] = [spin.to_json() for spin in result.spins]
    if fmt == "json":
        sys.stdout.write(indented_json(doc))
        sys.stdout.write("\n")
    else:
        yaml.safe_dump(doc, sys.stdout, sort_keys=False)


#: Number characters: what precedes a float's exponent or its leading zeros in a JSON text.
_NUMBER_BYTES = frozenset(b"0123456789.-")


def indented_json(doc: object) -> str:
    """``json.dumps(doc, indent=2)``, character for character, made by orjson (some thirty times
    faster for a cluster of ten thousand pods) whenever both would write the same text: ASCII
    only (``json`` escapes the rest), no value ``json`` would refuse or write as ``NaN``, and no
    float below 1e-4 (the one place the two spell numbers differently: ``1e-05`` and
    ``0.00001``). Anything else is left to ``json``."""
    try:
        json.dumps(doc, allow_nan=False)  # C speed: refuses NaN and non-JSON values as json.dumps does
        fast = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
    except (TypeError, ValueError, orjson.JSONEncodeError):
        return json.dumps(doc, indent=2)
    if not fast.isascii() or b"\x7f" in fast or _has_small_float(fast):
        return json.dumps(doc, indent=2)
    return fast.decode("ascii")


def _has_small_float(text: bytes) -> bool:
    """Whether ``text`` (indented JSON) may hold a number below 1e-4 as orjson spells it
    (``2.5e-7``, ``0.00001``): a number token, which follows a space or is the whole document,
    ending in either mark. A string that looks the same only costs the slower encoder."""
    for mark in (b"e-", b"0.0000"):
        at = text.find(mark)
        while at >= 0:
            start = at
            while start > 0 and text[start - 1] in _NUMBER_BYTES:
                start -= 1
            if start == 0 or text[start - 1] == 0x20:
                return True
            at = text.find(mark, at + 1)
    return False
