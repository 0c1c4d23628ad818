"""A scheduler that spins (retries the same pods at one virtual instant, nothing in the cluster
changing) must not freeze virtual time: the simulation lets time pass as a cluster would, the
timers still fire, and the report names the pods."""

from __future__ import annotations

from typing import Any

import yaml

from kubesched.api.types import PodInfo
from kubesched.scheduler.config import load_text
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import PostFilterOutcome, PostFilterPlugin, PostFilterResult
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.simulator.scenario import load_scenario
from kubesched.simulator.simulate import UNSCHEDULABLE_FLUSH, simulate
from kubesched.simulator.spinning import SPIN_REPEATS
from tests.helpers import make_node, make_pod


class ReactivatesItself(PostFilterPlugin):
    """Activates the pod that just failed: it is in flight, so it comes back through backoffQ, and
    with activeQ empty it is popped again at once (SchedulerPopFromBackoffQ): a spin."""

    name = "ReactivatesItself"

    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Any) -> PostFilterOutcome:
        self.framework.activate({pod.key: pod})
        return PostFilterResult(), Status(Code.Unschedulable, "activated again")


def spinning_config():
    registry = {**in_tree_registry(), ReactivatesItself.name: ReactivatesItself}
    text = yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [{"schedulerName": "default-scheduler",
                                         "plugins": {"postFilter": {"enabled": [{"name": ReactivatesItself.name}],
                                                                    "disabled": [{"name": "*"}]}}}]})
    return load_text(text, registry=registry), registry


def test_a_spinning_scheduler_lets_virtual_time_pass_and_the_run_ends():
    config, registry = spinning_config()
    result = simulate([make_node("n1", cpu="1"), make_pod("big", cpu="2")], config, registry=registry)
    [spin] = result.spins
    assert spin.pods == {"default/big"} and spin.start == 0 and spin.attempts >= SPIN_REPEATS
    assert result.virtual_seconds > 2 * UNSCHEDULABLE_FLUSH
    assert spin.line().startswith("default/big: attempted ")


def test_a_change_during_the_spin_is_acted_on_at_once(tmp_path):
    """A node added at 45s ends the spin: the pod binds at 45s, not at the end of a pause."""
    config, registry = spinning_config()
    scenario_file = tmp_path / "scenario.yaml"
    scenario_file.write_text(yaml.safe_dump({
        "apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "grow"},
        "steps": [{"at": "45s", "addNodes": {"count": 1, "prefix": "big-",
                                             "template": {"status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                                                     "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}}}]}))
    result = simulate([make_node("n1", cpu="1"), make_pod("big", cpu="2")], config, registry=registry,
                      scenario=load_scenario(scenario_file))
    [bound] = [e for e in result.timeline or [] if e.event == "bound"]
    assert (bound.object, bound.node, bound.seconds) == ("Pod default/big", "big-1", 45.0)
    [spin] = result.spins
    assert spin.end == 45.0
