"""Framework metrics carry the code each extension point returned, as upstream labels them."""

from __future__ import annotations

import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import PreFilterPlugin, PreFilterResult
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.metrics import Metrics
from tests.framework.conftest import build_framework
from tests.helpers import make_pod


def pre_filter_plugin(name: str, result: PreFilterResult | None, status: Status | None) -> type[PreFilterPlugin]:
    class Answer(PreFilterPlugin):
        def pre_filter(self, state, pod, nodes):
            return result, status.copy() if status is not None else None

    Answer.name = name
    return Answer


@pytest.mark.parametrize(("plugins", "want"), [
    pytest.param([("A", None, None)], "Success", id="success"),
    pytest.param([("A", None, Status(Code.Unschedulable, "no"))], "Unschedulable", id="unschedulable"),
    pytest.param([("A", None, Status(Code.UnschedulableAndUnresolvable, "never"))], "UnschedulableAndUnresolvable", id="unresolvable"),
    pytest.param([("A", None, Status(Code.Error, "boom"))], "Error", id="error"),
    pytest.param([("A", PreFilterResult({"n1"}), None), ("B", PreFilterResult({"n2"}), None)], "UnschedulableAndUnresolvable",
                 id="empty intersection of PreFilterResults"),
])
def test_pre_filter_duration_is_labelled_with_the_returned_code(plugins, want):
    metrics = Metrics()
    fw, _ = build_framework(*(pre_filter_plugin(*p) for p in plugins), metrics=metrics)
    fw.run_pre_filter(CycleState(), PodInfo(make_pod("p")))
    labels = {"extension_point": "PreFilter", "status": want, "profile": fw.profile_name}
    assert metrics.registry.get_sample_value("scheduler_framework_extension_point_duration_seconds_count", labels) == 1
    evaluations = {"plugin": plugins[0][0], "extension_point": "PreFilter", "profile": fw.profile_name}
    assert metrics.registry.get_sample_value("scheduler_plugin_evaluation_total", evaluations) == 1
