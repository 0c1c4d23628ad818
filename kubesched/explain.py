"""Explanations of scheduling attempts: per node, the first Filter plugin that rejected it (or that
it passed), and each Score plugin's raw, normalised and weighted score, plus the chosen node.

This is what kube-scheduler-simulator records as pod annotations; kubesched keeps it as data and
renders it as JSON (stable, documented in docs/explain.md) or as a table.
"""

from __future__ import annotations

from typing import Any

from kubesched.framework.status import Status
from kubesched.schedule_one import Attempt


def status_json(status: Status) -> dict[str, Any]:
    return {"passed": False, "plugin": status.plugin, "code": status.code.name, "reasons": list(status.reasons)}


def attempt_to_json(attempt: Attempt) -> dict[str, Any]:
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
    return out


def attempts_to_json(attempts: list[Attempt]) -> list[dict[str, Any]]:
    return [attempt_to_json(a) for a in attempts]
