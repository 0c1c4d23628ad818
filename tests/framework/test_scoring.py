"""Score plugins at the framework level: a batch plugin's error reads as upstream words it."""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchScorePlugin
from kubesched.scheduler.framework.status import Status, StatusError
from tests.framework.conftest import build_framework
from tests.helpers import make_pod

POD = PodInfo(make_pod("p"))


class FailsToScore(BatchScorePlugin):
    name = "FailsToScore"

    def score_nodes(self, state, pod, nodes):
        raise StatusError(Status.from_error(RuntimeError("no data")))


class FailsToNormalize(BatchScorePlugin):
    name = "FailsToNormalize"

    def score_nodes(self, state, pod, nodes):
        return np.zeros(len(nodes), dtype=np.int64)

    def normalize_scores(self, state, pod, nodes, scores):
        raise StatusError(Status.from_error(RuntimeError("bad range")))


@pytest.mark.parametrize(("plugin", "message"), [
    (FailsToScore, 'running Score plugins: plugin "FailsToScore" failed with: no data'),
    (FailsToNormalize, 'running Normalize on Score plugins: plugin "FailsToNormalize" failed with: bad range'),
])
def test_a_batch_score_error_names_the_plugin(plugin, message):
    fw, table = build_framework(plugin)
    with pytest.raises(StatusError) as err:
        fw.score_one(fw.plugins[plugin.name], CycleState(), POD, table.all_rows())
    assert err.value.status.message() == message
    assert err.value.status.plugin == plugin.name
