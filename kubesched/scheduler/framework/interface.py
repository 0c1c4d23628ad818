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

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ClusterEventWithHint
from kubesched.scheduler.framework.status import Code, Status

if TYPE_CHECKING:
    from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable

#: Bounds of a normalized score (upstream ``framework.MaxNodeScore`` / ``MinNodeScore``).
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
#: Upper bound of a node's weighted total (upstream ``framework.MaxTotalScore``).
MAX_TOTAL_SCORE = 2**63 - 1


class Plugin:
    """Base of every plugin (upstream ``framework.Plugin``). ``name`` is what configuration files
    refer to; ``handle`` is the profile's Framework (upstream's ``framework.Handle``)."""

    name: ClassVar[str] = ""

    def __init__(self, args: Any = None, handle: Framework | None = None) -> None:
        self.args = args
        self.handle = handle

    @property
    def fast_paths(self) -> bool:
        """Whether this plugin may use its optimisations that never move a placement: the
        framework's ``FrameworkOptions.fast_paths`` (on for a plugin built without a framework).
        kubesched's own switch; upstream has a single code path."""
        return self.handle is None or self.handle.options.fast_paths

    @property
    def framework(self) -> Framework:
        """The handle, for work that needs the profile's services (the API client, the snapshot,
        the clock): a plugin built on its own, without a framework, cannot do that work."""
        if self.handle is None:
            raise RuntimeError(f"plugin {self.name} was built without a framework handle")
        return self.handle


@dataclass
class PreFilterResult:
    """Node names a PreFilter plugin already knows are the only candidates; None means all nodes
    (upstream ``framework.PreFilterResult``)."""

    node_names: set[str] | None = None

    def all_nodes(self) -> bool:
        """Whether every node stays a candidate (no node set was given)."""
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        """The intersection of two plugins' node sets, as the framework combines PreFilter results
        (upstream ``PreFilterResult.Merge``)."""
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


class NominatingMode(Enum):
    """Whether a PostFilter result changes the pod's nominated node (upstream
    ``framework.NominatingMode``): ``Noop`` leaves it, ``Override`` sets it."""
    Noop = 0
    Override = 1


@dataclass
class NominatingInfo:
    """The node a PostFilter plugin nominates the pod for, and whether to apply it (upstream
    ``framework.NominatingInfo``)."""
    nominated_node_name: str = ""
    mode: NominatingMode = NominatingMode.Noop


@dataclass
class PostFilterResult:
    """What a PostFilter plugin (preemption) returns: the nomination, if any (upstream
    ``framework.PostFilterResult``)."""
    nominating_info: NominatingInfo | None = None


@dataclass
class NodeScore:
    """One node's score, as a classic Score plugin's normalisation sees it (upstream
    ``framework.NodeScore``)."""
    name: str
    score: int


@dataclass
class FilterVerdict:
    """A batch Filter's answer: per node (in batch order) -1 for pass, else an index into ``statuses``
    (kubesched's columnar form of the per-node Statuses upstream's Filter returns)."""

    codes: np.ndarray
    statuses: list[Status] = field(default_factory=list)

    @classmethod
    def fail_where(cls, failed: np.ndarray, status: Status) -> FilterVerdict | None:
        """Nodes where ``failed`` is True get ``status``; None (all pass) when nothing failed
        (kubesched's columnar Filter result; upstream returns one Status per node)."""
        if not failed.any():
            return None
        return cls(np.where(failed, 0, -1).astype(np.int32), [status])

    @classmethod
    def all_fail(cls, size: int, status: Status) -> FilterVerdict:
        """Every one of ``size`` nodes fails with ``status`` (a plugin error, a missing PreFilter
        state)."""
        return cls(np.zeros(size, dtype=np.int32), [status])

    @classmethod
    def from_keys(cls, keys: np.ndarray, statuses_by_key: Mapping[int, Status]) -> FilterVerdict | None:
        """Nodes with key 0 pass; every other key maps to the Status those nodes get (nodes failing
        for the same reason share one Status, where upstream builds one per node)."""
        if not keys.any():
            return None
        unique, inverse = np.unique(keys, return_inverse=True)
        failing = unique != 0
        index = np.cumsum(failing, dtype=np.int32) - 1
        statuses = [statuses_by_key[int(key)] for key in unique[failing]]
        return cls(np.where(failing, index, -1).astype(np.int32)[inverse.reshape(-1)], statuses)

    def status_at(self, position: int) -> Status | None:
        """The Status of the node at ``position`` of the batch; None when it passes."""
        code = int(self.codes[position])
        return None if code < 0 else self.statuses[code]


# --- signatures -----------------------------------------------------------------------------
#: One part of a pod's scheduling signature: a key naming what was read (upstream's signer names,
#: e.g. "Resources", "Tolerations") and a JSON-serialisable value (upstream ``fwk.SignFragment``).
SignFragment = tuple[str, Any]


class SignPlugin(Plugin):
    """A plugin that can say which fields of a pod its PreFilter, Filter, PreScore and Score read
    (upstream ``fwk.SignPlugin``). Two pods whose fragments agree for every enabled plugin get the
    same feasibility and scores on the same nodes in the same state; a profile with any such plugin
    that is not a SignPlugin signs no pod.

    ``sign_pod`` answers as upstream's plugin does and drives OpportunisticBatching's node hints.
    ``batch_key`` drives kubesched's exact reuse of the previous cycle's filter verdicts and scores
    (see ``framework/batch.py``); it answers ``sign_pod``'s fragments unless the plugin knows
    better. ``domain_scoped`` plugins' results depend on more than a node's own row (pods counted
    per topology domain): a cycle that reuses its predecessor's results runs them again (PreFilter,
    Filter on every node or on those ``filter_moved_rows`` names, PreScore, Score on the feasible
    nodes) where they ran in the cycle that left the results or ``batch_reruns`` says they may;
    elsewhere their fragments must guarantee they skip again.
    """

    domain_scoped: ClassVar[bool] = False
    #: Whether the plugin's verdict or score for a node depends on the pods on it (off for plugins
    #: that read only the node: its labels, taints, images). A placement changes a row's pods only,
    #: so a batched cycle runs only the plugins that read them on the rows that changed.
    reads_node_pods: ClassVar[bool] = True
    #: Whether ``batch_key`` reads the node table as well as the pod. The framework reuses the other
    #: plugins' fragments for a pod equal to the last one in spec, status, namespace, labels,
    #: annotations and owners: fragments must not read anything else of the pod.
    key_reads_table: ClassVar[bool] = False

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """The pod's fragments, or an Unschedulable Status when this plugin cannot sign the pod
        (upstream ``fwk.SignPlugin.SignPod``)."""
        raise NotImplementedError

    def signs_pods(self) -> bool:
        """False when ``sign_pod`` answers Unschedulable for every pod whatever it is (a
        configuration that rules signatures out): the profile then skips signing altogether."""
        return True

    def batch_key(self, pod: PodInfo, table: NodeTable) -> list[SignFragment] | Status:
        """What this plugin's results for ``pod`` depend on besides each node's own row, or an
        Unschedulable Status when they may depend on other rows too (never reused)."""
        return self.sign_pod(pod)

    def batch_reruns(self, pod: PodInfo, table: NodeTable) -> bool:
        """For a ``domain_scoped`` plugin: whether a batched cycle must run it again even where it
        skipped in the cycle that left the results (it may stop skipping as pods land without
        ``batch_key`` changing). False promises it skips again for every pod with the same key."""
        return False

    def filter_basis(self, state: CycleState) -> Any:
        """For a ``domain_scoped`` plugin: what its Filter verdicts derive from besides each node's
        own labels (the state its PreFilter wrote in ``state``), for ``filter_moved_rows``. None
        (the default) says it is not known: a batched cycle then runs Filter on every row again."""
        return None

    def filter_slots(self, state: CycleState, table: NodeTable) -> tuple[str, np.ndarray] | None:
        """For a ``domain_scoped`` plugin whose Filter verdict (in ``state``, after its PreFilter)
        is a function of one node label's value: the label key and, per code of ``table``'s column
        of that label plus a last slot for nodes without it, whether a node passes. A batched cycle
        then keeps this plugin's verdicts per domain rather than per node, so a zone that turns
        infeasible or feasible again costs no work per node. None (the default): not known."""
        return None

    def filter_moved_rows(self, before: Any, after: Any, table: NodeTable, limit: int) -> np.ndarray | None:
        """For a ``domain_scoped`` plugin: the rows of ``table`` whose Filter verdict may differ
        between two ``filter_basis`` answers (between two pods of a batch, the domains of the node
        that took the first), ascending; None when any row may, or more than ``limit`` rows (a
        batched cycle then runs Filter on every row again, else on these rows only)."""
        return None


def unsignable(reason: str) -> Status:
    """The answer of a SignPlugin that cannot sign a pod."""
    return Status(Code.Unschedulable, reason)


# --- queueing -------------------------------------------------------------------------------
class PreEnqueuePlugin(Plugin):
    """Decides whether a pod may enter activeQ at all; SchedulingGates is one (upstream
    ``framework.PreEnqueuePlugin``)."""

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """None (or Success) lets the pod into activeQ; any other Status keeps it among the
        unschedulable pods until an event requeues it (upstream
        ``framework.PreEnqueuePlugin.PreEnqueue``)."""
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    """Orders the active queue; a profile has exactly one (upstream ``framework.QueueSortPlugin``)."""
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` pops before ``b`` (upstream ``framework.QueueSortPlugin.Less``)."""
        raise NotImplementedError

    def sort_key(self) -> Callable[[QueuedPodInfo], Any] | None:
        """Optionally, a key function that orders pods exactly as ``less`` does (``less(a, b)`` if
        and only if ``key(a) < key(b)``), computed once per queued pod so that the active queue
        compares keys rather than calling ``less``; None (the default) keeps ``less``."""
        return None


class EnqueueExtensions:
    """Events that may make a pod this plugin rejected schedulable again (upstream
    ``framework.EnqueueExtensions``)."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """The cluster events worth retrying a rejected pod for, each with an optional queueing hint
        (upstream ``framework.EnqueueExtensions.EventsToRegister``)."""
        raise NotImplementedError


# --- filtering ------------------------------------------------------------------------------
class PreFilterExtensions:
    """Incremental updates of PreFilter state when a pod is added to or removed from a node
    (upstream ``framework.PreFilterExtensions``)."""

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        """Update ``state`` as if ``pod_to_add`` ran on ``node_info``: nominated pods, preemption dry
        runs (upstream ``framework.PreFilterExtensions.AddPod``)."""
        raise NotImplementedError

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        """Update ``state`` as if ``pod_to_remove`` left ``node_info``: preemption victims (upstream
        ``framework.PreFilterExtensions.RemovePod``)."""
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    """Runs once per scheduling cycle before Filter: precomputes state and may narrow the candidate
    nodes (upstream ``framework.PreFilterPlugin``)."""
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        """Write what Filter needs into ``state``; return the only possible nodes (None: all) and a
        Status, Skip meaning this plugin's Filter need not run (upstream
        ``framework.PreFilterPlugin.PreFilter``)."""
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        """The incremental updater of this plugin's cycle state, if it has one (upstream
        ``framework.PreFilterPlugin.PreFilterExtensions``)."""
        return None


class FilterPlugin(Plugin):
    """Classic, per-node filter (upstream ``framework.FilterPlugin``)."""

    def filter(self, state: CycleState, pod: PodInfo, node_info: NodeInfo) -> Status | None:
        """Whether the pod fits ``node_info``: None (or Success) passes, Unschedulable and
        UnschedulableAndUnresolvable reject (upstream ``framework.FilterPlugin.Filter``)."""
        raise NotImplementedError


class BatchFilterPlugin(Plugin):
    """Vectorised filter over a batch of nodes (kubesched's columnar ``framework.FilterPlugin``).

    By default it sees every candidate node, which is cheapest for array code. A plugin whose
    per-node work is expensive sets ``feasible_only = True`` and is given only the nodes that
    earlier plugins let through, as upstream runs filters.
    """

    feasible_only: ClassVar[bool] = False

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        """The verdict for every node of ``nodes`` at once; None when all pass (kubesched's columnar
        form of upstream ``framework.FilterPlugin.Filter``)."""
        raise NotImplementedError

    def filter_row(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> Status | None:
        """The verdict for the node of one row of ``table``; None when it passes. A batched cycle
        asks this of the node that took the last pod. The default runs ``filter_nodes`` on that
        row; a plugin with a scalar form answers without array calls, which cost more than the
        arithmetic of one node."""
        verdict = self.filter_nodes(state, pod, table.batch(np.array([row], dtype=np.int64)))
        if verdict is None:
            return None
        code = int(verdict.codes[0])
        return None if code < 0 else verdict.statuses[code]


#: What a PostFilter plugin answers: where the pod may go once it made room, and how it went.
PostFilterOutcome = tuple["PostFilterResult | None", "Status | None"]


class PostFilterPlugin(Plugin):
    """Runs when no node fits, to make one fit: preemption (upstream ``framework.PostFilterPlugin``)."""
    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: Any) -> PostFilterOutcome | Awaitable[PostFilterOutcome]:
        """Given every node's Filter status, try to make the pod schedulable; a nominating result
        records where (upstream ``framework.PostFilterPlugin.PostFilter``). An awaitable answer
        lets a plugin wait on outside services (preemption asking extenders)."""
        raise NotImplementedError


# --- scoring --------------------------------------------------------------------------------
class PreScorePlugin(Plugin):
    """Runs once before Score, on the feasible nodes (upstream ``framework.PreScorePlugin``)."""
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        """Precompute what Score needs into ``state``; Skip leaves this plugin's Score out of the cycle
        (upstream ``framework.PreScorePlugin.PreScore``)."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    """Classic, per-node score (upstream ``framework.ScorePlugin``). May return an int or
    ``(int, Status)``."""

    def score(self, state: CycleState, pod: PodInfo, node_name: str) -> int | tuple[int, Status | None]:
        """The node's raw score (upstream ``framework.ScorePlugin.Score``)."""
        raise NotImplementedError

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: list[NodeScore]) -> Status | None:
        """Optional: rewrite ``scores`` in place into [MIN_NODE_SCORE, MAX_NODE_SCORE] (upstream
        ``framework.ScoreExtensions.NormalizeScore``)."""
        return None


class BatchScorePlugin(Plugin):
    """Vectorised score: an int64 array aligned with the batch (kubesched's columnar
    ``framework.ScorePlugin``)."""

    #: Whether ``normalize_scores`` gives each node a function of its raw score, the lowest and the
    #: highest raw score among the nodes normalised together and the cycle's state alone, as
    #: upstream's DefaultNormalizeScore does. A batched cycle that samples nodes then reuses the
    #: scores normalised over every feasible node wherever the nodes it visits have the same lowest
    #: and highest raw score.
    normalizes_by_extremes: ClassVar[bool] = False

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        """Raw scores of every node of ``nodes`` (kubesched's columnar form of upstream
        ``framework.ScorePlugin.Score``)."""
        raise NotImplementedError

    def score_row(self, state: CycleState, pod: PodInfo, table: NodeTable, row: int) -> int:
        """The raw score of the node of one row of ``table`` (as ``filter_row``: the default runs
        ``score_nodes`` on that row)."""
        return int(self.score_nodes(state, pod, table.batch(np.array([row], dtype=np.int64)))[0])

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        """Optional: return normalised scores (or None to keep them); upstream
        ``framework.ScoreExtensions.NormalizeScore``."""
        return None


# --- reserve, permit, bind ------------------------------------------------------------------
class ReservePlugin(Plugin):
    """Claims, and on failure releases, what the pod will use once a node is chosen, before binding
    (upstream ``framework.ReservePlugin``)."""
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Take what the pod will use on ``node_name``; a failure aborts the cycle (upstream
        ``framework.ReservePlugin.Reserve``)."""
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Undo ``reserve`` after a later failure; must be idempotent and may run without a prior
        reserve (upstream ``framework.ReservePlugin.Unreserve``)."""
        raise NotImplementedError


class PermitPlugin(Plugin):
    """Approves, rejects or delays binding (upstream ``framework.PermitPlugin``)."""
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """(status, timeout in seconds). A Wait status parks the pod until allowed, rejected or
        timed out (upstream ``framework.PermitPlugin.Permit``)."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    """Prepares the binding (volumes, device claims) before Bind (upstream
    ``framework.PreBindPlugin``)."""
    def pre_bind_pre_flight(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Whether pre_bind will do anything (Success) or not (Skip); upstream
        ``framework.PreBindPlugin.PreBindPreFlight``."""
        return None

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | Awaitable[Status | None] | None:
        """Do the API work binding needs; may be ``async`` (upstream
        ``framework.PreBindPlugin.PreBind``)."""
        raise NotImplementedError


class BindPlugin(Plugin):
    """Binds the pod to its node; the first Bind plugin that does not Skip wins (upstream
    ``framework.BindPlugin``)."""
    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | Awaitable[Status | None] | None:
        """Bind the pod, or return Skip to leave it to the next Bind plugin; may be ``async`` (upstream
        ``framework.BindPlugin.Bind``)."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    """Informational hook after a successful bind (upstream ``framework.PostBindPlugin``)."""
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Called once the pod is bound (upstream ``framework.PostBindPlugin.PostBind``)."""
        raise NotImplementedError


#: The plugin base classes a configuration's extension point accepts.
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
    """Whether a Score plugin overrides its normalisation hook (upstream ``ScoreExtensions() != nil``);
    False for a plugin that does not score."""
    if isinstance(plugin, BatchScorePlugin):
        return type(plugin).normalize_scores is not BatchScorePlugin.normalize_scores
    if isinstance(plugin, ScorePlugin):
        return type(plugin).normalize_score is not ScorePlugin.normalize_score
    return False
