"""An out-of-tree plugin in the classic per-node style, as kube-scheduler plugins are written:
``filter`` and ``score`` are called once per node (the framework calls them only on nodes still
feasible after the built-in filters).

A node takes at most ``maxPerNode`` pods with the same ``app`` label, and nodes running fewer of
them score higher. ``maxPerNode`` comes from the plugin's args in the configuration file.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import FilterPlugin, NodeScore, ScorePlugin
from kubesched.scheduler.framework.status import Code, Status


@dataclass
class PodsPerAppArgs:
    """Typed args: decoded from the camelCase ``args`` of this plugin's ``pluginConfig`` entry."""

    max_per_node: int = 2

    def validate(self, path: str, _gates: object = None) -> list[str]:
        return [] if self.max_per_node > 0 else [f"{path}.maxPerNode: Invalid value: {self.max_per_node}: must be greater than zero"]


def same_app(pod: PodInfo, node: NodeInfo) -> int:
    app = pod.labels.get("app")
    return sum(1 for other in node.pods.values() if app is not None and other.labels.get("app") == app)


class PodsPerApp(FilterPlugin, ScorePlugin):
    name = "PodsPerApp"
    Args = PodsPerAppArgs

    def __init__(self, args: PodsPerAppArgs | None = None, handle: object = None) -> None:
        super().__init__(args or PodsPerAppArgs(), handle)

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        if same_app(pod, node_info) >= self.args.max_per_node:
            return Status(Code.Unschedulable, f"node(s) already run {self.args.max_per_node} pods of this app")
        return None

    def score(self, state: CycleState, pod: PodInfo, node_name: str) -> int:
        node = self.handle.snapshot.get(node_name)
        return self.args.max_per_node - same_app(pod, node)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status | None:
        top = max((s.score for s in scores), default=0) or 1
        for s in scores:
            s.score = s.score * 100 // top
        return None


PLUGINS = [PodsPerApp]
