"""``simulate --report FILE.html``: a simulation's outcome as one self-contained HTML page.

Two plots, as inline SVG (no script, no style sheet or font from the network, so the file opens
anywhere, offline): each node's CPU and memory allocation (what its pods request against its
allocatable), grouped by zone; and for each pending pod, how many nodes each filter reason ruled
out, from the pod's last scheduling attempt (a node failing for two resources counts under both,
as in the FailedScheduling message).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from html import escape
from typing import cast

from kubesched.api import resources as res
from kubesched.api.kinds import Kind, kind_named
from kubesched.api.types import node_allocatable
from kubesched.simulator.simulate import SimulationResult

NODE_KIND = cast(Kind, kind_named("Node"))
ZONE_LABEL = "topology.kubernetes.io/zone"
NO_ZONE = "(no zone)"
#: Plot geometry, in SVG user units.
LABEL_WIDTH, BAR_WIDTH, VALUE_WIDTH, ROW, BAR = 170, 360, 150, 22, 8
COLOURS = {"cpu": "#3b82f6", "memory": "#8b5cf6", "reason": "#d92d20"}


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


def allocations(result: SimulationResult) -> list[NodeAllocation]:
    """Every node's allocation, sorted by zone then name (terminated pods hold nothing)."""
    used: dict[str, list[int]] = {}
    for pod in result.pods():
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        requests = res.pod_requests(pod)
        entry = used.setdefault(node, [0, 0, 0])
        entry[0] += res.to_int(res.CPU, requests.get(res.CPU, Fraction(0)))
        entry[1] += res.to_int(res.MEMORY, requests.get(res.MEMORY, Fraction(0)))
        entry[2] += 1
    out = []
    for node in result.store.iter_all(NODE_KIND):
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
        counts: Counter[str] = Counter()
        nodes = 0
        if attempt is not None:
            nodes = len(attempt.node_names)
            if attempt.pre_filter_status is not None:
                for reason in attempt.pre_filter_status.reasons:
                    counts[f"{attempt.pre_filter_status.plugin}: {reason}"] += nodes
            for status in attempt.filter_status.values():
                for reason in status.reasons:
                    counts[f"{status.plugin}: {reason}"] += 1
        reasons = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(PendingPod(key, str(condition.get("message") or condition.get("reason") or "not attempted"), reasons, nodes))
    return out


def render(result: SimulationResult, title: str = "kubesched simulation") -> str:
    """The whole page."""
    nodes, pending = allocations(result), pending_pods(result)
    bound = sum(1 for p in result.pods() if (p.get("spec") or {}).get("nodeName"))
    summary = f"{len(nodes)} nodes, {bound}/{len(result.pods())} pods scheduled, {len(pending)} pending"
    parts = [f"<h1>{escape(title)}</h1>", f'<p class="summary">{escape(summary)}</p>',
             "<h2>Allocation per node</h2>",
             '<p class="note">What the pods on each node request, against its allocatable. Grouped by zone.</p>',
             allocation_svg(nodes), "<h2>Pending pods</h2>"]
    if not pending:
        parts.append('<p class="note">None: every pod was scheduled.</p>')
    for pod in pending:
        parts.append(f'<h3>{escape(pod.key)}</h3><p class="message">{escape(pod.message)}</p>')
        parts.append(reasons_svg(pod))
    return PAGE.format(title=escape(title), body="\n".join(parts))


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
        return '<p class="note">No per-node reasons recorded for this pod.</p>'
    label_width, width = 420, 420 + BAR_WIDTH + 60
    rows = []
    for i, (reason, count) in enumerate(pod.reasons):
        y = i * ROW
        length = BAR_WIDTH * count / pod.nodes if pod.nodes else 0
        rows.append(f'<g class="reason"><text class="label" x="0" y="{y + ROW - 7}">{escape(reason)}</text>'
                    f'<rect x="{label_width}" y="{y + (ROW - BAR) // 2}" width="{length:.1f}" height="{BAR}" rx="3" '
                    f'fill="{COLOURS["reason"]}"><title>{count} of {pod.nodes} node(s)</title></rect>'
                    f'<text class="value" x="{label_width + length + 6:.1f}" y="{y + ROW - 7}">{count}</text></g>')
    height = len(rows) * ROW + 4
    return (f'<svg class="reasons" data-pod="{escape(pod.key)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="nodes ruled out per filter reason, of {pod.nodes}">{"".join(rows)}</svg>')


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
svg text.value, svg text.pods {{ fill: #667085; }}
</style>
</head>
<body>
{body}
</body>
</html>
"""
