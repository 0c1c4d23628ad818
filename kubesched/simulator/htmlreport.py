"""``--report FILE.html`` of ``simulate``, ``capacity`` and ``compare``: the outcome as one
self-contained HTML page.

Every plot is inline SVG drawn here (no script, no style sheet or font from the network, so the
file opens anywhere, offline), from four figures shared by the three reports: each node's CPU and
memory allocation (what its pods request against its allocatable), grouped by zone; horizontal
bars (for each pending pod, how many nodes each filter reason ruled out, from the pod's last
scheduling attempt: a node failing for two resources counts under both, as in the
FailedScheduling message; capacity's copies per node); and a scenario's timeline, the pods bound
and pending over virtual time with running totals of evictions and preemptions.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from html import escape
from pathlib import Path
from typing import Protocol, cast

from kubesched.api import resources as res
from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import Kind, kind_named
from kubesched.api.types import node_allocatable
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler.schedule_one import Attempt
from kubesched.simulator.scenario import describe_seconds
from kubesched.simulator.simulate import SimulationResult
from kubesched.simulator.timeline import TimelineEntry, counts

NODE_KIND = cast(Kind, kind_named("Node"))
POD_KIND = cast(Kind, kind_named("Pod"))
ZONE_LABEL = "topology.kubernetes.io/zone"
NO_ZONE = "(no zone)"
#: Plot geometry, in SVG user units.
LABEL_WIDTH, BAR_WIDTH, VALUE_WIDTH, ROW, BAR = 170, 360, 150, 22, 8
CHART_WIDTH, CHART_HEIGHT, MARGIN_LEFT, MARGIN_RIGHT, MARGIN_BOTTOM, MARGIN_TOP = 760, 230, 48, 36, 28, 40
COLOURS = {"cpu": "#3b82f6", "memory": "#8b5cf6", "reason": "#d92d20", "copies": "#0e9384",
           "bound": "#12b76a", "pending": "#f79009", "evicted": "#d92d20", "preempted": "#7a5af8"}
#: The timeline's lines: pods bound and pending at each moment, evictions and preemptions so far.
SERIES = ("bound", "pending", "evicted", "preempted")
#: A chart's scale: a value (seconds, or a count) to an SVG coordinate.
Scale = Callable[[float], float]


class PodCapacity(Protocol):
    """What ``capacity`` found for one template. The report's view of ``capacity.PodCapacity``
    (and of ``CapacityResult`` and ``compare.Comparison`` below): structural, because those
    modules import this one for their ``to_html``."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def stop_message(self) -> str: ...
    @property
    def per_node(self) -> dict[str, int]: ...
    @property
    def stop_attempt(self) -> Attempt | None: ...


class CapacityResult(Protocol):
    @property
    def pods(self) -> Sequence[PodCapacity]: ...
    @property
    def store(self) -> ObjectStore: ...


class Moved(Protocol):
    @property
    def pod(self) -> str: ...
    @property
    def nodes(self) -> tuple[str, str]: ...


class Comparison(Protocol):
    @property
    def labels(self) -> tuple[str, str]: ...
    @property
    def results(self) -> tuple[SimulationResult, SimulationResult]: ...
    @property
    def moved(self) -> Sequence[Moved]: ...
    @property
    def same(self) -> int: ...


@dataclass(frozen=True)
class NodeAllocation:
    """What the pods bound to a node request, against its allocatable (cpu in millicores)."""

    name: str
    zone: str
    cpu: int
    cpu_allocatable: int
    memory: int
    memory_allocatable: int
    pods: int


@dataclass(frozen=True)
class PendingPod:
    key: str
    message: str
    #: Filter reason -> how many nodes it ruled out, most first.
    reasons: list[tuple[str, int]]
    nodes: int


@dataclass(frozen=True)
class Line:
    """One line of a timeline chart: a series of (seconds, value) steps; ``dashed`` tells a second
    configuration's line from the first's."""

    series: str
    label: str
    points: list[tuple[float, int]]
    dashed: bool = False


def allocations(store: ObjectStore) -> list[NodeAllocation]:
    """Every node's allocation, sorted by zone then name (terminated pods hold nothing)."""
    used: dict[str, list[int]] = {}
    for pod in store.iter_all(POD_KIND):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        requests = res.pod_requests(pod)
        entry = used.setdefault(node, [0, 0, 0])
        entry[0] += res.to_int(res.CPU, requests.get(res.CPU, Fraction(0)))
        entry[1] += res.to_int(res.MEMORY, requests.get(res.MEMORY, Fraction(0)))
        entry[2] += 1
    out = []
    for node in store.iter_all(NODE_KIND):
        name = node["metadata"]["name"]
        allocatable = node_allocatable(node)
        cpu, memory, pods = used.get(name, [0, 0, 0])
        zone = (node["metadata"].get("labels") or {}).get(ZONE_LABEL) or NO_ZONE
        out.append(NodeAllocation(name, zone, cpu, allocatable.get(res.CPU, 0), memory, allocatable.get(res.MEMORY, 0), pods))
    return sorted(out, key=lambda a: (a.zone == NO_ZONE, a.zone, a.name))


def pending_pods(result: SimulationResult) -> list[PendingPod]:
    """Pods left unbound with the reasons of their last attempt (needs ``explain=True``)."""
    last = {attempt.pod: attempt for attempt in result.attempts}
    out = []
    for pod in result.pods():
        if (pod.get("spec") or {}).get("nodeName"):
            continue
        key = f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
        condition: dict = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})
        attempt = last.get(key)
        reasons, nodes = reason_counts(attempt)
        out.append(PendingPod(key, str(condition.get("message") or condition.get("reason") or "not attempted"), reasons, nodes))
    return out


def reason_counts(attempt: Attempt | None) -> tuple[list[tuple[str, int]], int]:
    """Each filter reason of a failed attempt with the number of nodes it ruled out (most first),
    and the number of nodes tried; a PreFilter rejection rules out every node."""
    if attempt is None:
        return [], 0
    found: Counter[str] = Counter()
    nodes = len(attempt.node_names)
    if attempt.pre_filter_status is not None:
        for reason in attempt.pre_filter_status.reasons:
            found[f"{attempt.pre_filter_status.plugin}: {reason}"] += nodes
    for status in attempt.filter_status.values():
        for reason in status.reasons:
            found[f"{status.plugin}: {reason}"] += 1
    return sorted(found.items(), key=lambda kv: (-kv[1], kv[0])), nodes


def timeline_lines(entries: list[TimelineEntry], final_pods: list[dict], label: str = "",
                   dashed: bool = False) -> list[Line]:
    """The four lines of a scenario run, from its timeline and its pods at the end."""
    series = counts(entries, final_pods)
    values = {"bound": lambda c: c.bound, "pending": lambda c: c.pending,
              "evicted": lambda c: c.evicted_total, "preempted": lambda c: c.preempted_total}
    return [Line(name, label or name, [(c.seconds, values[name](c)) for c in series], dashed) for name in SERIES]


def steps_of(entries: Iterable[TimelineEntry]) -> list[tuple[float, str, str]]:
    """The scenario's steps on a timeline: (seconds, ``steps[i]``, what the step does)."""
    return [(e.seconds, e.object, e.message) for e in entries if e.event == "step"]


# --- the three pages -----------------------------------------------------------------------------
def render(result: SimulationResult, title: str = "kubesched simulation") -> str:
    """``simulate --report``: allocation per node, the scenario's timeline (with one), pending pods."""
    nodes, pending = allocations(result.store), pending_pods(result)
    bound = sum(1 for p in result.pods() if (p.get("spec") or {}).get("nodeName"))
    summary = f"{len(nodes)} nodes, {bound}/{len(result.pods())} pods scheduled, {len(pending)} pending"
    parts = ["<h2>Allocation per node</h2>",
             '<p class="note">What the pods on each node request, against its allocatable. Grouped by zone.</p>',
             allocation_svg(nodes)]
    if result.timeline is not None:
        parts += ["<h2>Timeline</h2>", TIMELINE_NOTE,
                  timeline_svg(timeline_lines(result.timeline, result.pods()), steps_of(result.timeline))]
    parts += ["<h2>Pending pods</h2>", *pending_sections(pending)]
    return page(title, summary, parts)


def render_capacity(result: CapacityResult, title: str = "kubesched capacity") -> str:
    """``capacity --report``: per template, the copies per node and what stopped the next one;
    then the allocation per node with the copies in place."""
    summary = "; ".join(f"{p.count} instance(s) of the pod {p.name}" for p in result.pods)
    parts: list[str] = []
    for pod in result.pods:
        parts += [f'<h2>{escape(pod.namespace)}/{escape(pod.name)}: {pod.count} instance(s)</h2>',
                  f'<p class="message">Termination reason: {escape(pod.stop_reason)}: {escape(pod.stop_message)}</p>',
                  "<h3>Copies per node</h3>", copies_svg(pod), "<h3>What stopped the next copy</h3>",
                  reasons_svg(stop_reasons(pod))]
    parts += ["<h2>Allocation per node, with the copies</h2>",
              '<p class="note">What the pods on each node request, against its allocatable. Grouped by zone.</p>',
              allocation_svg(allocations(result.store))]
    return page(title, summary, parts)


def render_comparison(comparison: Comparison, title: str = "kubesched compare") -> str:
    """``compare --report``: both configurations side by side: allocation per node, the pods
    placed differently, the pods pending under each, and with a scenario both timelines."""
    a, b = comparison.labels
    results = comparison.results
    summary = f"{len(comparison.moved)} pod(s) placed differently, {comparison.same} on the same node"
    parts = ["<h2>Allocation per node</h2>",
             '<p class="note">What the pods on each node request, against its allocatable. Grouped by zone.</p>',
             side_by_side([(label, allocation_svg(allocations(r.store))) for label, r in zip((a, b), results, strict=True)]),
             "<h2>Pods placed differently</h2>", moved_table(comparison)]
    if results[0].timeline is not None and results[1].timeline is not None:
        parts += ["<h2>Timeline</h2>", TIMELINE_NOTE.replace("</p>", f" Solid: {escape(a)}; dashed: {escape(b)}.</p>"),
                  *comparison_timelines(comparison)]
    parts += ["<h2>Pending pods</h2>",
              side_by_side([(label, "\n".join(pending_sections(pending_pods(r))))
                            for label, r in zip((a, b), results, strict=True)])]
    return page(title, summary, parts)


def write(html: str, path: str | os.PathLike[str] | None) -> str:
    """``html``, written to ``path`` when given (a clear error when it cannot be)."""
    if path is not None:
        try:
            Path(path).expanduser().write_text(html, encoding="utf-8")
        except OSError as e:
            raise KubeschedError(f"report {path}: cannot write: {e.strerror or e}") from None
    return html


TIMELINE_NOTE = ('<p class="note">Pods bound and pending at each moment, and how many were evicted and preempted so '
                 "far, over virtual time since scheduling began; dotted lines mark the scenario's steps.</p>")


def pending_sections(pending: list[PendingPod]) -> list[str]:
    if not pending:
        return ['<p class="note">None: every pod was scheduled.</p>']
    parts = []
    for pod in pending:
        parts.append(f'<h3>{escape(pod.key)}</h3><p class="message">{escape(pod.message)}</p>')
        parts.append(reasons_svg(pod))
    return parts


def stop_reasons(pod: PodCapacity) -> PendingPod:
    """The copy that was not placed, as a pending pod: its FitError and its filter reasons."""
    reasons, nodes = reason_counts(pod.stop_attempt)
    return PendingPod(f"{pod.namespace}/{pod.name}", pod.stop_message, reasons, nodes)


def comparison_timelines(comparison: Comparison) -> list[str]:
    """One chart per count, both configurations' lines in each (solid: first, dashed: second)."""
    lines: dict[str, list[Line]] = {name: [] for name in SERIES}
    for index, (label, result) in enumerate(zip(comparison.labels, comparison.results, strict=True)):
        for line in timeline_lines(result.timeline or [], result.pods(), label, dashed=index == 1):
            lines[line.series].append(line)
    steps = steps_of(comparison.results[0].timeline or [])
    titles = {"bound": "Pods bound", "pending": "Pods pending", "evicted": "Evicted so far", "preempted": "Preempted so far"}
    return [f"<h3>{titles[name]}</h3>" + timeline_svg(lines[name], steps, name) for name in SERIES]


def moved_table(comparison: Comparison) -> str:
    if not comparison.moved:
        return '<p class="note">None: every pod placed under both is on the same node.</p>'
    a, b = comparison.labels
    rows = "".join(f"<tr><td>{escape(m.pod)}</td><td>{escape(m.nodes[0])}</td><td>{escape(m.nodes[1])}</td></tr>"
                   for m in comparison.moved)
    return (f'<table class="moved"><thead><tr><th>Pod</th><th>{escape(a)}</th><th>{escape(b)}</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def side_by_side(columns: Sequence[tuple[str, str]]) -> str:
    cells = "".join(f'<div class="column" data-configuration="{escape(label)}"><h3>{escape(label)}</h3>{body}</div>'
                    for label, body in columns)
    return f'<div class="columns">{cells}</div>'


def page(title: str, summary: str, parts: list[str]) -> str:
    body = [f"<h1>{escape(title)}</h1>", f'<p class="summary">{escape(summary)}</p>', *parts]
    return PAGE.format(title=escape(title), body="\n".join(body))


# --- the plots -----------------------------------------------------------------------------------
def allocation_svg(nodes: list[NodeAllocation]) -> str:
    """Two bars per node (CPU, memory), a heading row per zone."""
    rows: list[str] = []
    y = 0
    zone = None
    for node in nodes:
        if node.zone != zone:
            zone = node.zone
            y += ROW
            rows.append(f'<text class="zone" x="0" y="{y - 6}">{escape(zone)}</text>')
        rows.append(_node_rows(node, y))
        y += 2 * ROW + 6
    width = LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH
    return (f'<svg class="allocation" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 4}" '
            f'viewBox="0 0 {width} {y + 4}" role="img" aria-label="CPU and memory allocation per node">{"".join(rows)}</svg>')


def _node_rows(node: NodeAllocation, y: int) -> str:
    cpu = _bar("cpu", y, node.cpu, node.cpu_allocatable, f"cpu {_cores(node.cpu)} / {_cores(node.cpu_allocatable)}")
    memory = _bar("memory", y + ROW, node.memory, node.memory_allocatable,
                  f"memory {_bytes(node.memory)} / {_bytes(node.memory_allocatable)}")
    label = f'<text x="0" y="{y + ROW - 4}">{escape(node.name)}</text><text class="pods" x="0" y="{y + 2 * ROW - 6}">{node.pods} pod(s)</text>'
    return f'<g class="node" data-node="{escape(node.name)}">{label}{cpu}{memory}</g>'


def _bar(kind: str, y: int, used: int, total: int, text: str) -> str:
    fraction = min(1.0, used / total) if total > 0 else 0.0
    top = y + (ROW - BAR) // 2
    return (f'<rect class="track" x="{LABEL_WIDTH}" y="{top}" width="{BAR_WIDTH}" height="{BAR}" rx="3" fill="#eaecf0"/>'
            f'<rect class="{kind}" x="{LABEL_WIDTH}" y="{top}" width="{BAR_WIDTH * fraction:.1f}" height="{BAR}" rx="3" '
            f'fill="{COLOURS[kind]}"><title>{escape(text)} ({100 * fraction:.0f}%)</title></rect>'
            f'<text class="value" x="{LABEL_WIDTH + BAR_WIDTH + 8}" y="{top + BAR}">{escape(text)}</text>')


def reasons_svg(pod: PendingPod) -> str:
    """One bar per filter reason: the number of nodes it ruled out, out of the nodes tried."""
    if not pod.reasons:
        return ('<p class="note">No per-node filter reasons recorded for this pod (never attempted, or the run '
                'recorded no explanations).</p>')
    return hbars_svg(pod.reasons, pod.nodes, "reason", "reasons", f'data-pod="{escape(pod.key)}"',
                     f"nodes ruled out per filter reason, of {pod.nodes}", 420, "node(s)")


def copies_svg(pod: PodCapacity) -> str:
    """One bar per node: the copies placed there, against the most any node took."""
    if not pod.per_node:
        return '<p class="note">No copy was placed.</p>'
    return hbars_svg(list(pod.per_node.items()), max(pod.per_node.values()), "copies", "copies",
                     f'data-pod="{escape(pod.namespace)}/{escape(pod.name)}"', "copies placed per node", LABEL_WIDTH,
                     "instance(s)")


def hbars_svg(rows: Sequence[tuple[str, int]], total: int, kind: str, css: str, attributes: str, aria: str,
              label_width: int, unit: str) -> str:
    """Labelled horizontal bars, each ``count`` long on a scale where ``total`` fills the bar."""
    marks = []
    for i, (label, count) in enumerate(rows):
        y = i * ROW
        length = BAR_WIDTH * count / total if total else 0
        marks.append(f'<g class="bar {kind}"><text class="label" x="0" y="{y + ROW - 7}">{escape(label)}</text>'
                     f'<rect class="{kind}" x="{label_width}" y="{y + (ROW - BAR) // 2}" width="{length:.1f}" height="{BAR}" '
                     f'rx="3" fill="{COLOURS[kind]}"><title>{count} of {total} {unit}</title></rect>'
                     f'<text class="value" x="{label_width + length + 6:.1f}" y="{y + ROW - 7}">{count}</text></g>')
    width, height = label_width + BAR_WIDTH + 60, len(marks) * ROW + 4
    return (f'<svg class="{css}" {attributes} xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(aria)}">{"".join(marks)}</svg>')


def timeline_svg(lines: list[Line], steps: list[tuple[float, str, str]], css: str = "all") -> str:
    """A step chart over virtual time: each line holds its value until the next change; the
    scenario's steps are dotted verticals; a legend above."""
    last = max([s for line in lines for s, _ in line.points] + [s for s, _, _ in steps] + [0.0])
    end = max(last * 1.1, last + 5.0)  # room to see the state after the last change
    top = max([v for line in lines for _, v in line.points] + [1])
    plot_w, plot_h = CHART_WIDTH - MARGIN_LEFT - MARGIN_RIGHT, CHART_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(seconds: float) -> float:
        return MARGIN_LEFT + plot_w * seconds / end

    def y(value: float) -> float:
        return MARGIN_TOP + plot_h * (1 - value / top)

    marks = [_axes(end, top, x, y)]
    for seconds, name, description in steps:
        marks.append(f'<g class="step"><line x1="{x(seconds):.1f}" x2="{x(seconds):.1f}" y1="{MARGIN_TOP}" '
                     f'y2="{MARGIN_TOP + plot_h}" stroke="#98a2b3" stroke-dasharray="2 3"/>'
                     f'<text x="{x(seconds) + 3:.1f}" y="{MARGIN_TOP - 6}">{escape(name)}</text>'
                     f"<title>{escape(name)} at {describe_seconds(seconds)}: {escape(description)}</title></g>")
    for line in lines:
        marks.append(_polyline(line, x, y, end))
    marks.append(_legend(lines))
    return (f'<svg class="timeline {escape(css)}" xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" '
            f'height="{CHART_HEIGHT}" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" '
            f'aria-label="pod counts over virtual time">{"".join(marks)}</svg>')


def _polyline(line: Line, fx: Scale, fy: Scale, end: float) -> str:
    points: list[str] = []
    value = line.points[0][1] if line.points else 0
    for seconds, new in line.points:
        points += [f"{fx(seconds):.1f},{fy(value):.1f}", f"{fx(seconds):.1f},{fy(new):.1f}"]
        value = new
    points.append(f"{fx(end):.1f},{fy(value):.1f}")
    dash = ' stroke-dasharray="6 4"' if line.dashed else ""
    return (f'<polyline class="series" data-series="{line.series}" data-label="{escape(line.label)}" fill="none" '
            f'stroke="{COLOURS[line.series]}" stroke-width="2"{dash} points="{" ".join(points)}">'
            f"<title>{escape(line.label)}: {value} at the end</title></polyline>")


def _axes(end: float, top: int, fx: Scale, fy: Scale) -> str:
    base = fy(0)
    marks = [f'<line class="axis" x1="{MARGIN_LEFT}" x2="{fx(end):.1f}" y1="{base:.1f}" y2="{base:.1f}" stroke="#667085"/>',
             f'<line class="axis" x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" y1="{MARGIN_TOP}" y2="{base:.1f}" stroke="#667085"/>']
    for value in sorted({0, top // 2, top}):
        marks.append(f'<text class="tick" x="{MARGIN_LEFT - 6}" y="{fy(value) + 4:.1f}" text-anchor="end">{value}</text>')
    for i in range(5):
        seconds = end * i / 4
        marks.append(f'<text class="tick" x="{fx(seconds):.1f}" y="{base + 16:.1f}" text-anchor="middle">'
                     f"{describe_seconds(round(seconds))}</text>")
    return "".join(marks)


def _legend(lines: list[Line]) -> str:
    items = []
    offset = MARGIN_LEFT
    for line in lines:
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        items.append(f'<g class="legend"><line x1="{offset}" x2="{offset + 18}" y1="10" y2="10" stroke="{COLOURS[line.series]}" '
                     f'stroke-width="2"{dash}/><text x="{offset + 22}" y="14">{escape(line.label)}</text></g>')
        offset += 30 + 7 * len(line.label)
    return "".join(items)


def _cores(millis: int) -> str:
    return f"{millis / 1000:g}"


def _bytes(amount: int) -> str:
    value, unit = float(amount), ""
    for unit in ("", "Ki", "Mi", "Gi", "Ti"):
        if value < 1024 or unit == "Ti":
            break
        value /= 1024
    return f"{value:.3g}{unit}"


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; color: #1d2330; margin: 24px; }}
h2 {{ margin-top: 28px; }} h3 {{ margin: 18px 0 4px; font-size: 15px; }}
.summary {{ font-size: 15px; }} .note {{ color: #667085; }} .message {{ color: #d92d20; margin: 0 0 6px; }}
svg text {{ font: 12px system-ui, sans-serif; fill: #1d2330; }} svg text.zone {{ font-weight: 600; font-size: 13px; }}
svg text.value, svg text.pods, svg text.tick {{ fill: #667085; }}
.columns {{ display: flex; flex-wrap: wrap; gap: 32px; }} .column {{ flex: 1 1 0; min-width: 440px; }}
.column h3 {{ margin-top: 4px; }} .column svg.allocation {{ width: 100%; height: auto; }}
table.moved {{ border-collapse: collapse; }} table.moved th, table.moved td {{ padding: 2px 14px 2px 0; text-align: left; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
