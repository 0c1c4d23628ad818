"""Explanations of scheduling attempts: per node, the first Filter plugin that rejected it (or that
it passed), and each Score plugin's raw, normalised and weighted score, plus the chosen node.

When an attempt failed and a preemption plugin ran, its preemption too: the candidate nodes it
dry-ran with the values the node-picking criteria compare, the node chosen, the criterion that
decided, and the victims.

This is what kube-scheduler-simulator records as pod annotations; kubesched keeps it as data and
renders it as JSON (stable, documented in docs/explain.md) or as a table.
"""

from __future__ import annotations

from typing import Any

from kubesched.scheduler.framework.preemption_report import CandidateSummary, PreemptionRecord
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.schedule_one import Attempt
from kubesched.utils.clock import rfc3339


def status_json(status: Status) -> dict[str, Any]:
    return {"passed": False, "plugin": status.plugin, "code": status.code.name, "reasons": list(status.reasons)}


def candidate_json(candidate: CandidateSummary) -> dict[str, Any]:
    start = candidate.earliest_start_time
    return {"node": candidate.node, "victims": list(candidate.victims), "pdbViolations": candidate.num_pdb_violations,
            "highestPriority": candidate.highest_priority, "prioritySum": candidate.priority_sum,
            "victimCount": len(candidate.victims), "earliestStartTime": rfc3339(start) if start is not None else None}


def preemption_json(record: PreemptionRecord) -> dict[str, Any]:
    """A preemption: where, whom, why this node (and, when recorded, every candidate considered)."""
    out: dict[str, Any] = {"preemptor": record.preemptor, "node": record.node or None, "victims": list(record.victims)}
    if record.node:
        out["decidedBy"] = record.decided_by
    if record.message:
        out["message"] = record.message
    if record.candidates:
        out["candidates"] = [candidate_json(c) for c in record.candidates]
    if record.rejected:
        out["rejected"] = [{"node": node, **status_json(status)} for node, status in record.rejected]
    return out


def attempt_to_json(attempt: Attempt, preemption: PreemptionRecord | None = None) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    for name in attempt.node_names:
        status = attempt.filter_status.get(name)
        nodes[name] = {"name": name, "filter": status_json(status) if status else {"passed": name in attempt.feasible}}
    if attempt.scores is not None:
        feasible = attempt.feasible
        for i, name in enumerate(feasible):
            entry = nodes.setdefault(name, {"name": name, "filter": {"passed": True}})
            entry["scores"] = {
                plugin: {"raw": int(raw[i]), "normalized": int(norm[i]), "weight": weight, "weighted": int(norm[i]) * weight}
                for plugin, raw, norm, weight in attempt.scores.plugins
            }
            entry["total"] = int(attempt.scores.total[i])
    out: dict[str, Any] = {"pod": attempt.pod, "chosen": attempt.chosen or None, "nodes": list(nodes.values())}
    if attempt.pre_filter_status is not None:
        out["preFilter"] = status_json(attempt.pre_filter_status)
    if preemption is not None:
        out["preemption"] = preemption_json(preemption)
    return out


def attempts_to_json(attempts: list[Attempt], preemptions: dict[int, PreemptionRecord] | None = None) -> list[dict[str, Any]]:
    """Every attempt; ``preemptions`` maps an attempt's index to the preemption that followed it."""
    preemptions = preemptions or {}
    return [attempt_to_json(a, preemptions.get(i)) for i, a in enumerate(attempts)]


def preemption_lines(preemption: dict[str, Any]) -> list[str]:
    """A preemption (as ``preemption_json`` gives it) as plain lines for a terminal: the outcome,
    then one line per candidate with the values the criteria compared, the chosen one marked."""
    if not preemption.get("node"):
        return [f"Preemption: none ({preemption.get('message', 'no candidate')})"]
    lines = [f"Preemption: nominated to {preemption['node']}, evicting {', '.join(preemption['victims'])} "
             f"(decided by: {preemption.get('decidedBy', '')})"]
    for c in preemption.get("candidates", []):
        mark = "*" if c["node"] == preemption["node"] else " "
        lines.append(f"  {mark} {c['node']}: victims {', '.join(c['victims'])}; PDB violations {c['pdbViolations']}, "
                     f"highest priority {c['highestPriority']}, priority sum {c['prioritySum']}, "
                     f"{c['victimCount']} victim(s), earliest start {c['earliestStartTime'] or '-'}")
    for r in preemption.get("rejected", []):
        lines.append(f"    {r['node']}: not a candidate ({', '.join(r['reasons']) or r['code']})")
    return lines
