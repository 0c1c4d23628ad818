"""An out-of-tree plugin in the vectorised style: one call filters and scores every node at once.

Nodes carry their price as a label (``example.com/hourly-cost``, in cents). A pod may cap what it
pays with the annotation ``example.com/max-hourly-cost``; among nodes it may use, cheaper ones
score higher. Run it on the bundled example:

    kubesched simulate -f examples/plugins/cluster.yaml --plugin examples/plugins/cheapest_node.py \\
        --plugin examples/plugins/pods_per_app.py --config examples/plugins/config.yaml

or, with the directory installed as a package (``pip install ./examples/plugins``), no flag:

    kubesched simulate -f examples/plugins --config examples/plugins/config.yaml
"""

from __future__ import annotations

import numpy as np

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BatchFilterPlugin, BatchScorePlugin, FilterVerdict
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeBatch

COST_LABEL = "example.com/hourly-cost"
MAX_COST_ANNOTATION = "example.com/max-hourly-cost"


def node_costs(nodes: NodeBatch) -> np.ndarray:
    """Each node's cost as a float (NaN where the label is missing or not a number)."""
    column = nodes.table.label_column(COST_LABEL)
    if column is None:
        return np.full(len(nodes), np.nan)
    return column.numbers()[nodes.labels(COST_LABEL)]


class CheapestNode(BatchFilterPlugin, BatchScorePlugin):
    name = "CheapestNode"

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        cap = (pod.pod["metadata"].get("annotations") or {}).get(MAX_COST_ANNOTATION)
        if cap is None:
            return None
        too_expensive = node_costs(nodes) > float(cap)  # NaN (no price) compares False: allowed
        return FilterVerdict.fail_where(too_expensive, Status(Code.Unschedulable, f"node(s) cost more than {cap} cents an hour"))

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        costs = node_costs(nodes)
        return np.where(np.isnan(costs), 0, costs).astype(np.int64)

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray:
        """Cheapest node gets 100, the most expensive 0 (unpriced nodes count as free)."""
        top = int(scores.max()) if len(scores) else 0
        if top == 0:
            return np.full(len(scores), 100, dtype=np.int64)
        return 100 - scores * 100 // top


PLUGINS = [CheapestNode]
