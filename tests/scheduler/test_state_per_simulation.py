"""Nothing a scheduler learns about one cluster leaks into another scheduler in the same process.

resourceVersions are only meaningful within the cluster that issued them and every simulation
restarts them, so two simulations whose PodDisruptionBudgets share a name and resourceVersion but
differ in status must each decide as if run alone: the same placements and victims as when each
runs in a process of its own (``python -m kubesched simulate -o json``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.scheduler.config import default_configuration
from kubesched.simulator.simulate import simulate
from tests.helpers import make_node, make_pod

ROOT = Path(__file__).resolve().parents[2]


def budgeted_cluster(min_available: int) -> list[dict]:
    """Two full nodes and a high-priority pod that must preempt: ``db-0`` (the lowest priority,
    on n0) is covered by a PDB, ``batch-0`` (on n1) is not. With budget left, the victim is the
    lowest-priority pod; with none, preemption avoids violating the PDB and takes ``batch-0``."""
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
               for name, value in (("low", 10), ("mid", 20), ("high", 1000))]
    nodes = [make_node("n0", cpu="1", memory="4Gi"), make_node("n1", cpu="1", memory="4Gi")]
    pods = [make_pod("db-0", cpu="1", memory="1Gi", labels={"app": "db"}, node="n0", priorityClassName="low"),
            make_pod("batch-0", cpu="1", memory="1Gi", labels={"app": "batch"}, node="n1", priorityClassName="mid"),
            make_pod("web", cpu="1", memory="1Gi", priorityClassName="high")]
    for pod in pods:
        pod["metadata"].pop("uid")
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": "default"},
           "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "db"}}}}
    return [*classes, *nodes, *pods[:2], pdb, pods[2]]


#: Placements (pod -> node) and the preemptions as (preemptor, node, victims).
Outcome = tuple[dict[str, str], list[tuple[str, str, list[str]]]]


def in_process(objects: list[dict]) -> Outcome:
    result = simulate(objects, default_configuration(), seed=0)
    placed = {pod["metadata"]["name"]: pod["spec"].get("nodeName", "") for pod in result.pods()}
    return placed, [(r.preemptor, r.node, r.victims) for r in result.preemptions]


def in_own_process(objects: list[dict], workdir: Path) -> Outcome:
    manifest = workdir / "cluster.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "kubesched", "simulate", "-f", str(manifest), "--seed", "0", "-o", "json"],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    placed = {item["metadata"]["name"]: item["spec"].get("nodeName", "") for item in doc["items"] if item["kind"] == "Pod"}
    return placed, [(p["preemptor"], p["node"], p["victims"]) for p in doc.get("preemptions", [])]


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Outcome]:
    """Each cluster's outcome in a process of its own, by the PDB's minAvailable."""
    return {m: in_own_process(budgeted_cluster(m), tmp_path_factory.mktemp(f"min-available-{m}")) for m in (0, 1)}


@pytest.mark.parametrize("order", [(1, 0), (0, 1)], ids=["exhausted-budget-first", "spare-budget-first"])
def test_back_to_back_simulations_decide_as_in_separate_processes(order, alone):
    together = {m: in_process(budgeted_cluster(m)) for m in order}
    assert together == alone
    assert {m: victims for m, (_, [(_, _, victims)]) in together.items()} == {0: ["default/db-0"], 1: ["default/batch-0"]}
