"""Score plugins at the framework level: a batch plugin's error reads as upstream words it."""

from __future__ import annotations

import numpy as np
import pytest

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchScorePlugin
from kubesched.scheduler.framework.registry import merge
from kubesched.scheduler.framework.runtime import FrameworkOptions
from kubesched.scheduler.framework.status import Status, StatusError
from kubesched.scheduler.plugins.registry import in_tree_registry, trusted_score_ranges
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


class OutOfRange(BatchScorePlugin):
    name = "OutOfRange"

    def score_nodes(self, state, pod, nodes):
        return np.full(len(nodes), 150, dtype=np.int64)


OUT_OF_RANGE = ('applying score defaultWeights on Score plugins: plugin "OutOfRange" returns an invalid score 150, '
                "it should in the range of [0, 100] after normalizing")


@pytest.mark.parametrize(("trusted", "error"), [
    (frozenset(), OUT_OF_RANGE),
    (frozenset({"OutOfRange"}), None),
], ids=["checked by default", "skipped when trusted"])
def test_normalized_scores_are_range_checked_unless_the_options_trust_the_plugin(trusted, error):
    fw, table = build_framework(OutOfRange, options=FrameworkOptions(trusted_score_ranges=trusted))
    if error is None:
        assert list(fw.run_score(CycleState(), POD, table.all_rows()).total) == [150, 150]
        return
    with pytest.raises(StatusError) as err:
        fw.run_score(CycleState(), POD, table.all_rows())
    assert err.value.status.message() == error


def test_only_the_in_tree_factories_of_a_registry_are_trusted():
    """A plugin that is not the in-tree factory of its name stays checked, as upstream checks all."""
    in_tree = in_tree_registry()
    registry = merge(in_tree, {OutOfRange.name: OutOfRange})
    assert trusted_score_ranges(registry) == frozenset(in_tree)
    assert "NodeResourcesFit" not in trusted_score_ranges({"NodeResourcesFit": OutOfRange})
