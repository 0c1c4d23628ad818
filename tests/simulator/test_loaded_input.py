"""Objects that loading type-checked already are created without a second type check: the
cluster and the report are the same as when the store checks them again."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from kubesched.api.kinds import EVENT
from kubesched.api.manifests import load
from kubesched.cli.simulate import state_objects
from kubesched.scheduler.config import default_configuration
from kubesched.simulator.simulate import SimulationResult, simulate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def report(result: SimulationResult) -> str:
    events = sorted(result.store.iter_all(EVENT), key=lambda e: e["metadata"]["name"])
    return json.dumps({"state": state_objects(result), "events": events,
                       "preemptions": [(r.preemptor, r.node, list(r.victims)) for r in result.preemptions]}, sort_keys=True)


def test_loaded_objects_give_the_same_cluster_without_a_second_type_check():
    for example in ("cluster", "preemption"):
        objects = load([EXAMPLES / example])
        checked = simulate(copy.deepcopy(objects), default_configuration(), seed=3)
        trusted = simulate(copy.deepcopy(objects), default_configuration(), seed=3, decoded=True)
        assert report(trusted) == report(checked), example
