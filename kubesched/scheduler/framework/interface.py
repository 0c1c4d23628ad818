"""Extension points of the scheduling framework, one small base class each (upstream ``interface.go``).

A plugin subclasses the extension points it implements and sets ``name``. Filter and Score come in
two styles:

* **batch** (``BatchFilterPlugin``, ``BatchScorePlugin``): one call evaluates every candidate
  node through the columnar node table; this is how in-tree plugins are written;
* **classic** (``FilterPlugin``, ``ScorePlugin``): one call per node, as in kube-scheduler; the
  framework calls it only on nodes still feasible, so users' plugins keep their familiar shape.

Methods may return ``None`` for success. PreBind, Bind and Permit-waiting are awaited when they
return a coroutine, so a plugin that talks to the API server can be ``async``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ClusterEventWithHint
from kubesched.scheduler.framework.status import Status

if TYPE_CHECKING:
    from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.nodetable.table import NodeBatch

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1


class Plugin:
    """Base of every plugin. ``name`` is what configuration files refer to; ``handle`` is the
    profile's Framework (upstream's framework.Handle)."""

    name: ClassVar[str] = ""

    def __init__(self, args: Any = None, handle: Framework | None = None) -> None:
        self.args = args
        self.handle = handle


@dataclass
class PreFilterResult:
    """Node names a PreFilter plugin already knows are the only candidates; None means all nodes."""

    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.all_nodes():
            return self
        if self.all_nodes():
            return PreFilterResult(set(other.node_names or ()))
        return PreFilterResult(self.node_names & other.node_names)  # type: ignore[operator]


class NominatingMode(Enum):
    Noop = 0
    Override = 1


@dataclass
class NominatingInfo:
    nominated_node_name: str = ""
    mode: NominatingMode = NominatingMode.Noop


@dataclass
class PostFilterResult:
    nominating_info: NominatingInfo | None = None


@dataclass
class NodeScore:
    name: str
    score: int


@dataclass
class FilterVerdict:
    """A batch Filter's answer: per node (in batch order) -1 for pass, else an index into ``statuses``."""

    codes: np.ndarray
    statuses: list[Status] = field(default_factory=list)

    @classmethod
    def fail_where(cls, failed: np.ndarray, status: Status) -> FilterVerdict | None:
        """Nodes where ``failed`` is True get ``status``; None (all pass) when nothing failed."""
        if not failed.any():
            return None
        return cls(np.where(failed, 0, -1).astype(np.int32), [status])

    @classmethod
    def all_fail(cls, size: int, status: Status) -> FilterVerdict:
        return cls(np.zeros(size, dtype=np.int32), [status])

    @classmethod
    def from_keys(cls, keys: np.ndarray, statuses_by_key: Mapping[int, Status]) -> FilterVerdict | None:
        """Nodes with key 0 pass; every other key maps to the Status those nodes get."""
        if not keys.any():
            return None
        unique, inverse = np.unique(keys, return_inverse=True)
        failing = unique != 0
        index = np.cumsum(failing, dtype=np.int32) - 1
        statuses = [statuses_by_key[int(key)] for key in unique[failing]]
        return cls(np.where(failing, index, -1).astype(np.int32)[inverse.reshape(-1)], statuses)

    def status_at(self, position: int) -> Status | None:
        code = int(self.codes[position])
        return None if code < 0 else self.statuses[code]


# --- queueing -------------------------------------------------------------------------------
class PreEnqueuePlugin(Plugin):
    """Decides whether a pod may enter activeQ at all (SchedulingGates is one)."""

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        raise NotImplementedError


class EnqueueExtensions:
    """Events that may make a pod this plugin rejected schedulable again."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        raise NotImplementedError


# --- filtering ------------------------------------------------------------------------------
class PreFilterExtensions:
    """Incremental updates of PreFilter state when a pod is added to or removed from a node."""

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        raise NotImplementedError

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    """Classic, per-node filter."""

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        raise NotImplementedError


class BatchFilterPlugin(Plugin):
    """Vectorised filter over a batch of nodes.

    By default it sees every candidate node, which is cheapest for array code. A plugin whose
    per-node work is expensive sets ``feasible_only = True`` and is given only the nodes that
    earlier plugins let through, as upstream runs filters.
    """

    feasible_only: ClassVar[bool] = False

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        raise NotImplementedError


class PostFilterPlugin(Plugin):
    def post_filter(self, state: CycleState, pod: PodInfo, statuses: Any) -> tuple[PostFilterResult | None, Status | None]:
        raise NotImplementedError


# --- scoring --------------------------------------------------------------------------------
class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        raise NotImplementedError


class ScorePlugin(Plugin):
    """Classic, per-node score. May return an int or ``(int, Status)``."""

    def score(self, state: CycleState, pod: PodInfo, node_name: str) -> int | tuple[int, Status | None]:
        raise NotImplementedError

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status | None:
        """Optional (upstream ScoreExtensions): rewrite ``scores`` in place."""
        return None


class BatchScorePlugin(Plugin):
    """Vectorised score: an int64 array aligned with the batch."""

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        raise NotImplementedError

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        """Optional: return normalised scores (or None to keep them)."""
        return None


# --- reserve, permit, bind ------------------------------------------------------------------
class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """(status, timeout in seconds). A Wait status parks the pod until allowed, rejected or timed out."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Whether pre_bind will do anything (Success) or not (Skip)."""
        return None

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | Awaitable[Status | None] | None:
        raise NotImplementedError


class BindPlugin(Plugin):
    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | Awaitable[Status | None] | None:
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        raise NotImplementedError


EXTENSION_POINTS: dict[str, tuple[type, ...]] = {
    "preEnqueue": (PreEnqueuePlugin,),
    "queueSort": (QueueSortPlugin,),
    "preFilter": (PreFilterPlugin,),
    "filter": (FilterPlugin, BatchFilterPlugin),
    "postFilter": (PostFilterPlugin,),
    "preScore": (PreScorePlugin,),
    "score": (ScorePlugin, BatchScorePlugin),
    "reserve": (ReservePlugin,),
    "permit": (PermitPlugin,),
    "preBind": (PreBindPlugin,),
    "bind": (BindPlugin,),
    "postBind": (PostBindPlugin,),
}

#: Upstream's interface names, used in configuration errors (``FilterPlugin "X" does not exist``).
INTERFACE_NAMES = {
    "preEnqueue": "PreEnqueuePlugin",
    "queueSort": "QueueSortPlugin",
    "preFilter": "PreFilterPlugin",
    "filter": "FilterPlugin",
    "postFilter": "PostFilterPlugin",
    "preScore": "PreScorePlugin",
    "score": "ScorePlugin",
    "reserve": "ReservePlugin",
    "permit": "PermitPlugin",
    "preBind": "PreBindPlugin",
    "bind": "BindPlugin",
    "postBind": "PostBindPlugin",
}


def normalizes(plugin: object) -> bool:
    """Whether a Score plugin overrides its normalisation hook (upstream ``ScoreExtensions() != nil``)."""
    if isinstance(plugin, BatchScorePlugin):
        return type(plugin).normalize_scores is not BatchScorePlugin.normalize_scores
    return type(plugin).normalize_score is not ScorePlugin.normalize_score
