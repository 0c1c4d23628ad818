"""Filter plugins at the framework level: which node's status counts, and when an Error aborts."""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchFilterPlugin, FilterVerdict
from kubesched.scheduler.framework.status import Code, Status, StatusError
from tests.framework.conftest import build_framework
from tests.helpers import make_pod

POD = PodInfo(make_pod("p"))


class RejectsN1(BatchFilterPlugin):
    name = "RejectsN1"

    def filter_nodes(self, state, pod, nodes):
        return FilterVerdict.fail_where(np.array([n == "n1" for n in nodes.names()]), Status(Code.Unschedulable, "not n1"))


def errors_on(node: str) -> type[BatchFilterPlugin]:
    """Returns Error on ``node`` and rejects every other node."""

    class ErrorsOn(BatchFilterPlugin):
        name = "ErrorsOn"

        def filter_nodes(self, state, pod, nodes):
            keys = np.array([1 if n == node else 2 for n in nodes.names()])
            return FilterVerdict.from_keys(keys, {1: Status(Code.Error, "boom"), 2: Status(Code.Unschedulable, "other")})

    return ErrorsOn


def test_an_error_on_a_node_an_earlier_filter_rejected_is_not_raised():
    """Upstream never runs the later plugin on that node."""
    fw, table = build_framework(RejectsN1, errors_on("n1"))
    _, ids, statuses = fw.run_batch_filters(CycleState(), POD, table.all_rows())
    names = table.all_rows().names()
    assert {name: statuses[i].message() if i >= 0 else "" for name, i in zip(names, ids)} == {"n1": "not n1", "n2": "other"}


def test_an_error_on_a_node_still_feasible_is_raised():
    fw, table = build_framework(RejectsN1, errors_on("n2"))
    with pytest.raises(StatusError, match='running "ErrorsOn" filter plugin: boom'):
        fw.run_batch_filters(CycleState(), POD, table.all_rows())
