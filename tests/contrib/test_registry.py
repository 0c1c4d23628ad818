"""The bundled scheduler-plugins are known to every command by their upstream names."""

from __future__ import annotations

from pathlib import Path

import kubesched
from kubesched.cli.common import registry_from
from kubesched.contrib.capacityscheduling import CapacityScheduling
from kubesched.contrib.coscheduling import Coscheduling
from kubesched.contrib.qossort import QOSSort


def test_every_command_resolves_the_bundled_plugins_by_name():
    """No ``--plugin`` flag: the commands' registry holds the bundled plugins beside the in-tree ones."""
    registry = registry_from([])
    assert (registry["QOSSort"], registry["Coscheduling"], registry["CapacityScheduling"]) == (
        QOSSort, Coscheduling, CapacityScheduling)
    assert "PrioritySort" in registry


def test_the_python_api_resolves_the_bundled_plugins():
    """``kubesched.simulate`` with a Coscheduling configuration installs the PodGroup CRD and
    holds the group back as the command does."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "coscheduling"
    run = kubesched.simulate(examples / "cluster.yaml", examples / "config.yaml", explain=False)
    assert run.placements == {}
    assert sorted(run.pending) == [f"default/trainer-{i}" for i in range(4)]
