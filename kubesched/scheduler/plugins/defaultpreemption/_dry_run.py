"""Victim selection on many nodes at once: upstream's ``SelectVictimsOnNode`` for a chunk of nodes.

Per node, as upstream: remove every pod the preemptor may evict, check the preemptor fits (with
higher-or-equal priority nominated pods added, then without), then put victims back one by one,
PDB-violating ones first and most important first within each group, keeping those without which
the preemptor still fits.

Nodes where even evicting every potential victim leaves too few resources (by NodeResourcesFit's
own test on the node's totals) are answered ``DEFERRED`` without a dry run unless the caller
needs their status. For the scheduler's own nodes that test reads columns (the table's requested
and allocatable, and the ``_levels`` index of requests per priority), for a whole chunk at once: in a full cluster most nodes visited are such, typically because an earlier
preemptor is nominated there.

What makes the rest fast is that all nodes of the chunk live in one scratch node table (plus a
second one holding the nodes with nominated pods added), changed incrementally as pods are
removed and put back, and that each step runs the Filter plugins once over every node still in
play. That is
only equivalent to upstream's per-node dry runs when no PreFilter extension updates the cycle
state on AddPod/RemovePod (the common case: InterPodAffinity, PodTopologySpread and
VolumeRestrictions skip for pods that do not use them). Otherwise each node gets its own clone of
the cycle state, updated through the extensions exactly as upstream does, and is filtered alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.nominated import nominated_overlay
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.table import PODS, NodeTable
from kubesched.scheduler.plugins.defaultpreemption._levels import PriorityLevels, priority_levels
from kubesched.scheduler.plugins.defaultpreemption.preemption import (
    DEFERRED,
    ParsedPDB,
    VictimSelection,
    filter_pods_with_pdb_violation,
)

if TYPE_CHECKING:
    from kubesched.scheduler.framework.runtime import Framework

NO_VICTIMS = "No preemption victims found for incoming pod"
_EMPTY = NodeTable()

#: May ``victim`` (of lower priority) on ``node`` be evicted for the preemptor? (the plugin's IsEligiblePod)
Allowed = Callable[[NodeInfo, PodInfo], bool]
#: Orders pods most important first (the plugin's MoreImportantPod, as a sort).
Sorter = Callable[[list[PodInfo]], list[PodInfo]]


def filter_rows(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, rows: list[int]) -> list[Status | None]:
    """Every Filter plugin on the given rows of a scratch table, in configured order (upstream
    ``RunFilterPlugins`` per node). A plugin error only fails the node it happened on."""
    try:
        return _filter_batch(fw, state, pod, table, rows)
    except StatusError as e:
        if len(rows) == 1:
            return [e.status]
    out: list[Status | None] = []
    for row in rows:
        try:
            out.extend(_filter_batch(fw, state, pod, table, [row]))
        except StatusError as e:
            out.append(e.status)
    return out


def _filter_batch(fw: Framework, state: CycleState, pod: PodInfo, table: NodeTable, rows: list[int]) -> list[Status | None]:
    batch = table.batch(np.asarray(rows, dtype=np.int64))
    first_pos, ids, statuses = fw.run_batch_filters(state, pod, batch)
    if not fw.has_classic_filters:
        return [None if i < 0 else statuses[i] for i in ids.tolist()]
    out: list[Status | None] = []
    for position, info in enumerate(batch.infos()):
        status = None
        for _, plugin in fw.classic_filters_before(int(first_pos[position]), state):
            status = fw.run_classic_filter(plugin, state, pod, info)
            if status is not None:
                break
        if status is None and ids[position] >= 0:
            status = statuses[ids[position]]
        out.append(status)
    return out


def copy_without(info: NodeInfo, victims: list[PodInfo]) -> NodeInfo:
    """A copy of ``info`` without ``victims``: a clone minus the victims, or, when most pods go,
    an empty copy of the node plus the pods that stay (cheaper)."""
    if 2 * len(victims) <= len(info.pods):
        clone = info.clone()
        for victim in victims:
            clone.remove_pod(victim.uid)
        return clone
    gone = {v.uid for v in victims}
    copy = NodeInfo()
    copy.node, copy.name, copy.allocatable = info.node, info.name, info.allocatable
    copy.generation = info.generation
    for uid, pod in info.pods.items():
        if uid not in gone:
            copy.add_pod(pod)
    return copy


class ResourceCheck:
    """NodeResourcesFit's test on a node's totals with the victims gone and the nominated pods
    added: when it fails, the dry run would fail the node too (NodeResourcesFit is one of the
    filters it runs), so the node can be answered without one."""

    def __init__(self, checked: list[tuple[str, int]]) -> None:
        self.checked = checked

    @classmethod
    def of(cls, fw: Framework, state: CycleState, pod: PodInfo) -> ResourceCheck | None:
        """The check for the profile's NodeResourcesFit, if it filters in this cycle."""
        from kubesched.scheduler.plugins import names
        from kubesched.scheduler.plugins.noderesources.fit import NodeResourcesFit, checked_resources, pod_fit_request

        plugin = fw.plugins.get(names.NodeResourcesFit)
        if not isinstance(plugin, NodeResourcesFit) or plugin.name in state.skip_filter_plugins \
                or plugin not in fw.points["filter"]:
            return None
        request = pod_fit_request(pod, plugin.pod_level)
        return cls(checked_resources(request, plugin.ignored, plugin.ignored_groups))

    def hopeless(self, info: NodeInfo, num_victims: int, victim_requests: dict[str, int], nominees: list[PodInfo]) -> bool:
        """The test with ``num_victims`` pods requesting ``victim_requests`` gone and ``nominees`` added."""
        allocatable, requested = info.allocatable, info.requested
        if len(info.pods) - num_victims + len(nominees) + 1 > allocatable.get("pods", 0):
            return True
        for name, amount in self.checked:
            used = requested.get(name, 0) - victim_requests.get(name, 0)
            for nominee in nominees:
                used += nominee.requests.get(name, 0)
            if amount > allocatable.get(name, 0) - used:
                return True
        return False

    def hopeless_rows(self, table: NodeTable, rows: np.ndarray, num_victims: np.ndarray,
                      victim_requests: dict[str, np.ndarray], nominees: Nominees) -> np.ndarray:
        """``hopeless`` for many rows of the scheduler's table at once, from its columns."""
        used_pods = table.pod_count[rows] - num_victims + nominees.count + 1
        out: np.ndarray = used_pods > table.allocatable[PODS, rows]
        for name, amount in self.checked:
            index = table.resource_index.get(name)
            if index is None:
                out |= amount > -nominees.requests.get(name, 0)
                continue
            used = table.requested[index, rows] - victim_requests.get(name, 0) + nominees.requests.get(name, 0)
            out |= amount > table.allocatable[index, rows] - used
        return out

    def reprieve(self, info: NodeInfo, potential: list[PodInfo], nominees: list[PodInfo],
                 order: list[PodInfo]) -> list[int] | None:
        """The dry run of a node where NodeResourcesFit is the only Filter plugin that reads the
        pods on it (the others pass): the positions in ``order`` of the pods that stay victims,
        putting them back one by one on the node without ``potential`` and with ``nominees``; None
        when the preemptor does not fit even with every potential victim gone."""
        allocatable = info.allocatable
        count = len(info.pods) - len(potential) + len(nominees)
        free = {}
        for name, _ in self.checked:
            used = info.requested.get(name, 0)
            for victim in potential:
                used -= victim.requests.get(name, 0)
            for nominee in nominees:
                used += nominee.requests.get(name, 0)
            free[name] = allocatable.get(name, 0) - used
        pods_allowed = allocatable.get("pods", 0)
        checked = self.checked
        if count + 1 > pods_allowed or any(amount > free[name] for name, amount in checked):
            return None
        victims = []
        for position, pod in enumerate(order):
            requests = pod.requests
            if count + 2 > pods_allowed or any(amount > free[name] - requests.get(name, 0) for name, amount in checked):
                victims.append(position)
                continue
            count += 1
            for name, _ in checked:
                free[name] -= requests.get(name, 0)
        return victims

    def rejects(self, info: NodeInfo, pod: PodInfo) -> bool:
        """Whether the preemptor fails the test on ``info`` once ``pod`` is added to it."""
        allocatable, requested, extra = info.allocatable, info.requested, pod.requests
        if len(info.pods) + 2 > allocatable.get("pods", 0):
            return True
        return any(amount > allocatable.get(name, 0) - requested.get(name, 0) - extra.get(name, 0)
                   for name, amount in self.checked)


@dataclass
class Nominees:
    """The nominated pods a dry run adds, summed per node of a chunk: count and requests."""

    count: np.ndarray
    requests: dict[str, np.ndarray]

    @classmethod
    def of(cls, per_node: list[list[PodInfo]]) -> Nominees:
        count = np.zeros(len(per_node), dtype=np.int64)
        requests: dict[str, np.ndarray] = {}
        for position, pods in enumerate(per_node):
            if not pods:
                continue
            count[position] = len(pods)
            for pod in pods:
                for name, amount in pod.requests.items():
                    column = requests.get(name)
                    if column is None:
                        column = requests[name] = np.zeros(len(per_node), dtype=np.int64)
                    column[position] += amount
        return cls(count, requests)


class KeptSelections:
    """Arithmetic dry-run answers per row of the scheduler's table, for the next preemptor of the
    same shape: a row's answer stands while the row is unchanged (its version in the table), none
    of its pods started since (a start moves no version: ``NodeTable.pod_started``) and the row has
    no nominees. Only answers that do not depend on the time are kept: the victims' order reads the
    current time for pods that have not started, so either all or none of a node's potential
    victims must have a start time."""

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._key: tuple[object, ...] | None = None
        self._pdbs: list[ParsedPDB] = []  # keeps the budgets the key names by id alive
        #: Per row: its version and its node's pod starts when the answer was kept, the answer.
        self._answers: dict[int, tuple[int, int, VictimSelection]] = {}

    def begin(self, table: NodeTable, key: tuple[object, ...], pdbs: list[ParsedPDB]) -> None:
        """Start serving a preemptor with ``key``: answers kept for another key are dropped."""
        if table is not self._table or key != self._key:
            self._table, self._key, self._pdbs = table, key, pdbs
            self._answers = {}

    def serve(self, screened: list[tuple[int, NodeInfo, list[PodInfo], int]],
              results: list[VictimSelection | None]) -> list[tuple[int, NodeInfo, list[PodInfo], int]]:
        """Put the valid kept answers of the screened nodes (index, node, nominees, row) in
        ``results``; the nodes left without one."""
        table, answers = self._table, self._answers
        if table is None or not answers:
            return screened
        rows = np.array([item[3] for item in screened], dtype=np.int64)
        versions = table.row_version[rows].tolist()
        started = bool(table.pod_starts)  # pods start only where a kubelet runs: most often none did
        rest = []
        for item, version in zip(screened, versions, strict=True):
            answer = answers.get(item[3])
            if answer is None or item[2] or answer[0] != version or (started and answer[1] != _starts(table, item[3])):
                rest.append(item)
            else:
                results[item[0]] = answer[2]  # an immutable tuple; its victims are only read
        return rest

    def keep(self, row: int, potential: list[PodInfo], selection: VictimSelection) -> None:
        started = sum(1 for pod in potential if pod.start_time is not None)
        table = self._table
        if table is not None and started in (0, len(potential)):
            self._answers[row] = (int(table.row_version[row]), _starts(table, row), selection)


def _starts(table: NodeTable, row: int) -> int:
    """How many pods of the row's node started so far (``NodeTable.pod_starts``)."""
    return table.pod_starts.get(table.names[row], 0) if table.pod_starts else 0


@dataclass(eq=False)
class _Node:
    """One node's dry run."""

    index: int
    info: NodeInfo  # the clone the victims are removed from (row ``row`` of the main table)
    state: CycleState | None  # its own cycle state, when extensions are active
    potential: list[PodInfo]
    nominees: list[PodInfo]
    with_nominees: NodeInfo | None  # ``info`` plus the nominated pods (row ``row1`` of the second table)
    source_row: int = -1  # the node's row in the scheduler's table, when it is the table's own
    row: int = -1
    row1: int = -1
    order: list[PodInfo] = field(default_factory=list)
    num_violating_candidates: int = 0
    victims: list[PodInfo] = field(default_factory=list)
    num_violating: int = 0
    mixed: bool = False
    failed: bool = False


class VictimSelector:
    """Dry runs of one preemptor, in the scheduling cycle's state (which it never modifies)."""

    def __init__(self, fw: Framework, state: CycleState, pod: PodInfo, allowed: Allowed | None, sort: Sorter,
                 pdbs: list[ParsedPDB], thorough: bool = True, kept: KeptSelections | None = None) -> None:
        self.fw = fw
        #: Answers kept across preemptors (only with upstream's victim order and eligibility).
        self.kept = kept
        self.state = state
        self.pod = pod
        self.allowed = allowed
        self.sort = sort
        self.pdbs = pdbs
        self.shared = not fw.has_active_pre_filter_extensions(state)
        self.thorough = thorough
        self.table: NodeTable = fw.snapshot
        #: Victims counted from columns; only when every lower-priority pod may be a victim.
        self.levels: PriorityLevels | None = priority_levels(self.table) if allowed is None else None
        self.resource_check = ResourceCheck.of(fw, state, pod)
        nominator = fw.ctx.nominator
        #: The nominated pods of every node, kept incrementally (None: ask the nominator per node).
        self.overlay = nominated_overlay(self.table, nominator)
        names = getattr(nominator, "nominated_node_names", None)
        #: Nodes with nominated pods (None: ask for every node).
        self.nominated_nodes: set[str] | None = set(names()) if names is not None and self.overlay is None else None
        #: Whether the dry run is NodeResourcesFit's arithmetic (``ResourceCheck.reprieve``).
        self.arithmetic = self.shared and self.resource_check is not None and _resources_only(fw, state)
        self.no_victims = Status(Code.UnschedulableAndUnresolvable, NO_VICTIMS)
        self.main: NodeTable = _EMPTY
        self.nominated: NodeTable = _EMPTY

    def select(self, nodes: list[NodeInfo]) -> list[VictimSelection]:
        results: list[VictimSelection | None] = [None] * len(nodes)
        work = []
        for index, info, nominees, source_row in self._by_arithmetic(self._screen(nodes, results), results):
            node = self._prepare(index, info, nominees, results)
            if node is not None:
                node.source_row = source_row
                work.append(node)
        if work:
            self._build_tables(work)
            alive = []
            for node, status in zip(work, self._evaluate(work), strict=True):
                if status is None:
                    alive.append(node)
                else:
                    results[node.index] = VictimSelection([], 0, status)
            self._reprieve(alive, results)
        selected = [r for r in results if r is not None]
        assert len(selected) == len(nodes), "every node is skipped, rejected or reprieved"
        return selected

    # --- preparation ------------------------------------------------------------------------
    def _screen(self, nodes: list[NodeInfo],
                results: list[VictimSelection | None]) -> list[tuple[int, NodeInfo, list[PodInfo], int]]:
        """The nodes that need a dry run, with their nominees; the others are answered "no
        victims", or (unless thorough) DEFERRED when NodeResourcesFit's test fails even with every
        potential victim gone. From the table's columns when the nodes are the scheduler's own."""
        rows = self._rows(nodes)
        if rows is None or self.levels is None:
            nominees = [self._nominees(info.name) for info in nodes]
            return [(i, info, nominees[i], -1) for i, info in enumerate(nodes)
                    if self._shortcut(i, info, nominees[i], results)]
        count, requests = self.levels.below(self.pod.priority, rows)
        answered = count == 0
        check = self.resource_check
        hopeless = None
        if not self.thorough and check is not None:
            hopeless = check.hopeless_rows(self.table, rows, count, requests, self._nominee_totals(nodes, rows, check))
            answered = answered | hopeless
        # One answer object each for every node so answered: the evaluator only reads them.
        no_victims, deferred = VictimSelection([], 0, self.no_victims), VictimSelection([], 0, DEFERRED)
        answered_rows = np.flatnonzero(answered)
        if hopeless is None:
            for i in answered_rows.tolist():
                results[i] = no_victims
        else:
            for i, has_victims in zip(answered_rows.tolist(), (count[answered_rows] > 0).tolist(), strict=True):
                results[i] = deferred if has_victims else no_victims
        return [(i, nodes[i], self._nominees(nodes[i].name), int(rows[i])) for i in np.flatnonzero(~answered).tolist()]

    def _nominee_totals(self, nodes: list[NodeInfo], rows: np.ndarray, check: ResourceCheck) -> Nominees:
        """The nominees' count and requests per node, from the overlay's columns when there is one."""
        if self.overlay is None:
            return Nominees.of([self._nominees(info.name) for info in nodes])
        count, requests = self.overlay.totals(self.pod, rows, [name for name, _ in check.checked])
        return Nominees(count, requests)

    def _rows(self, nodes: list[NodeInfo]) -> np.ndarray | None:
        """The nodes' rows in the scheduler's table; None unless every node is the table's own."""
        table = self.table
        row_of, infos = table.row_of, table.infos
        rows = [row_of.get(info.name, -1) for info in nodes]
        if any(row < 0 or infos[row] is not info for row, info in zip(rows, nodes, strict=True)):
            return None
        return np.array(rows, dtype=np.int64)

    def _by_arithmetic(self, screened: list[tuple[int, NodeInfo, list[PodInfo], int]],
                       results: list[VictimSelection | None]) -> list[tuple[int, NodeInfo, list[PodInfo], int]]:
        """Answer the screened nodes whose dry run is arithmetic: the table's own nodes, where the
        filters that do not read pods pass (they pass whatever pods are evicted) and the preemptor
        fits once every potential victim is gone; the others are left for the full dry run.
        Answers kept from an earlier preemptor of the same shape serve the rows unchanged since."""
        if not self.arithmetic or not screened or min(item[3] for item in screened) < 0:
            return screened
        kept = self._kept()
        if kept is not None:
            screened = kept.serve(screened, results)
            if not screened:
                return screened
        rows = np.array([item[3] for item in screened], dtype=np.int64)
        readers = self.fw.pod_readers
        try:
            _, ids, _ = self.fw.run_batch_filters(self.state, self.pod, self.table.batch(rows), lambda name: name not in readers)
        except StatusError:  # a plugin's error belongs to the node it happened on: the full dry run says which
            return screened
        rest = []
        for item, sid in zip(screened, ids.tolist(), strict=True):
            index, info, nominees, row = item
            potential = self._potential_victims(info) if sid < 0 else []
            selection = self._arithmetic(info, potential, nominees) if potential else None
            if selection is None:
                rest.append(item)
                continue
            results[index] = selection
            if kept is not None and not nominees:
                kept.keep(row, potential, selection)
        return rest

    def _arithmetic(self, info: NodeInfo, potential: list[PodInfo], nominees: list[PodInfo]) -> VictimSelection | None:
        """``ResourceCheck.reprieve`` on the victims in upstream's order (PDB-violating first)."""
        check = self.resource_check
        assert check is not None
        ordered = self.sort(potential)
        violating, non_violating = filter_pods_with_pdb_violation(ordered, self.pdbs)
        order = violating + non_violating
        kept = check.reprieve(info, potential, nominees, order)
        if kept is None:
            return None
        victims = [order[k] for k in kept]
        if violating and non_violating:
            victims = self.sort(victims)
        return VictimSelection(victims, sum(1 for k in kept if k < len(violating)), None)

    def _kept(self) -> KeptSelections | None:
        """The kept answers, valid for this preemptor: the same signature fragments of the Filter
        plugins that run (so the same verdicts from those that do not read pods, and the same
        requests), priority, PodDisruptionBudgets and other objects; None when they cannot be kept."""
        from kubesched.scheduler.framework.interface import SignPlugin

        kept, objects_version = self.kept, self.fw.ctx.objects_version
        if kept is None or objects_version is None:
            return None
        skip = self.state.skip_filter_plugins
        fragments: list[object] = []
        for plugin in self.fw.points["filter"]:
            if plugin.name in skip:
                continue
            signed = plugin.sign_pod(self.pod) if isinstance(plugin, SignPlugin) else None
            if signed is None or isinstance(signed, Status):
                return None
            fragments.append((plugin.name, signed))
        kept.begin(self.table, (fragments, self.pod.priority, objects_version(), tuple(map(id, self.pdbs))), self.pdbs)
        return kept

    def _prepare(self, index: int, info: NodeInfo, nominees: list[PodInfo],
                 results: list[VictimSelection | None]) -> _Node | None:
        """The node's copy without its potential victims ("no victims" when it has none)."""
        potential = self._potential_victims(info)
        if potential:
            return self._copy(index, info, potential, nominees, results)
        results[index] = VictimSelection([], 0, self.no_victims)
        return None

    def _potential_victims(self, info: NodeInfo) -> list[PodInfo]:
        priority, allowed = self.pod.priority, self.allowed
        return [p for p in info.pods.values() if p.priority < priority and (allowed is None or allowed(info, p))]

    def _shortcut(self, index: int, info: NodeInfo, nominees: list[PodInfo], results: list[VictimSelection | None]) -> bool:
        """``_screen`` for one node from its pods; True when it needs a dry run."""
        count = 0
        requests: dict[str, int] = {}
        for victim in self._potential_victims(info):
            count += 1
            for name, amount in victim.requests.items():
                requests[name] = requests.get(name, 0) + amount
        check = self.resource_check
        if count == 0:
            results[index] = VictimSelection([], 0, self.no_victims)
        elif not self.thorough and check is not None and check.hopeless(info, count, requests, nominees):
            results[index] = VictimSelection([], 0, DEFERRED)
        else:
            return True
        return False

    def _copy(self, index: int, info: NodeInfo, potential: list[PodInfo], nominees: list[PodInfo],
              results: list[VictimSelection | None]) -> _Node | None:
        """Remove the potential victims (through RemovePod when extensions are active) from a copy."""
        state = None if self.shared else self.state.clone()
        if state is None:
            clone = copy_without(info, potential)
        else:
            clone = info.clone()
            for victim in potential:
                clone.remove_pod(victim.uid)
                status = self.fw.run_pre_filter_extension_remove_pod(state, self.pod, victim, clone)
                if status is not None:
                    results[index] = VictimSelection([], 0, status)
                    return None
        with_nominees = None
        if nominees:
            with_nominees = clone.clone()
            for nominee in nominees:
                with_nominees.add_pod(nominee)
        return _Node(index, clone, state, potential, nominees, with_nominees)

    def _nominees(self, node_name: str) -> list[PodInfo]:
        """Pods nominated to the node with at least the preemptor's priority (other than itself)."""
        if self.overlay is not None:
            return self.overlay.nominees_for(node_name, self.pod)
        if self.nominated_nodes is not None and node_name not in self.nominated_nodes:
            return []
        return [p for p in self.fw.nominated_pods_for_node(node_name)
                if p.priority >= self.pod.priority and p.uid != self.pod.uid]

    def _build_tables(self, work: list[_Node]) -> None:
        self.main = self._scratch(work, [n.info for n in work])
        for row, node in enumerate(work):
            node.row = row
        nominated = [(n, info) for n in work if (info := n.with_nominees) is not None]
        if nominated:
            self.nominated = self._scratch([n for n, _ in nominated], [info for _, info in nominated])
            for row, (node, _) in enumerate(nominated):
                node.row1 = row

    def _scratch(self, nodes: list[_Node], infos: list[NodeInfo]) -> NodeTable:
        """A scratch table of the nodes' copies, from the scheduler's table where they come from it."""
        rows = [n.source_row for n in nodes]
        if min(rows) < 0:
            return NodeTable.from_infos(infos)
        return NodeTable.from_rows(self.table, np.array(rows, dtype=np.int64), infos)

    # --- filtering --------------------------------------------------------------------------
    def _evaluate(self, nodes: list[_Node]) -> list[Status | None]:
        """``RunFilterPluginsWithNominatedPods`` on each node: the failure with nominated pods
        added if any, else the failure without them."""
        if not self.shared:
            return [self._evaluate_alone(n) for n in nodes]
        out = filter_rows(self.fw, self.state, self.pod, self.main, [n.row for n in nodes])
        with_nominees = [k for k, n in enumerate(nodes) if n.with_nominees is not None]
        if with_nominees:
            statuses = filter_rows(self.fw, self.state, self.pod, self.nominated, [nodes[k].row1 for k in with_nominees])
            for k, status in zip(with_nominees, statuses, strict=True):
                if status is not None:
                    out[k] = status
        return out

    def _evaluate_alone(self, node: _Node) -> Status | None:
        assert node.state is not None
        if node.with_nominees is not None:
            state_with = node.state.clone()
            for nominee in node.nominees:
                status = self.fw.run_pre_filter_extension_add_pod(state_with, self.pod, nominee, node.with_nominees)
                if status is not None:
                    return status
            status = filter_rows(self.fw, state_with, self.pod, self.nominated, [node.row1])[0]
            if status is not None:
                return status
        return filter_rows(self.fw, node.state, self.pod, self.main, [node.row])[0]

    # --- reprieve ---------------------------------------------------------------------------
    def _reprieve(self, alive: list[_Node], results: list[VictimSelection | None]) -> None:
        """Put victims back in order on all nodes in step; those without which the preemptor no
        longer fits stay victims."""
        for node in alive:
            ordered = self.sort(node.potential)
            violating, non_violating = filter_pods_with_pdb_violation(ordered, self.pdbs)
            node.order = violating + non_violating
            node.num_violating_candidates = len(violating)
            node.mixed = bool(violating) and bool(non_violating)
        step = 0
        pending = alive
        while pending:
            self._reprieve_step(pending, step, results)
            step += 1
            pending = [n for n in pending if not n.failed and step < len(n.order)]
        for node in alive:
            if not node.failed:
                victims = self.sort(node.victims) if node.mixed else node.victims
                results[node.index] = VictimSelection(victims, node.num_violating, None)

    def _reprieve_step(self, nodes: list[_Node], step: int, results: list[VictimSelection | None]) -> None:
        """Put back each node's next pod. Where NodeResourcesFit's test already says it cannot come
        back, the filters would say so too: it stays a victim without being added and removed."""
        added = []
        check = self.resource_check if self.shared else None  # with extensions, their AddPod/RemovePod run as upstream's
        for node in nodes:
            pod = node.order[step]
            if check is not None and check.rejects(node.with_nominees or node.info, pod):
                self._keep_victim(node, pod, step)
                continue
            status = self._add(node, pod)
            if status is None:
                added.append(node)
            else:
                self._fail(node, status, results)
        for node, status in zip(added, self._evaluate(added), strict=True):
            if status is None:
                continue
            pod = node.order[step]
            error = self._remove(node, pod)
            if error is not None:
                self._fail(node, error, results)
                continue
            self._keep_victim(node, pod, step)

    @staticmethod
    def _keep_victim(node: _Node, pod: PodInfo, step: int) -> None:
        node.victims.append(pod)
        if step < node.num_violating_candidates:
            node.num_violating += 1

    @staticmethod
    def _fail(node: _Node, status: Status, results: list[VictimSelection | None]) -> None:
        node.failed = True
        results[node.index] = VictimSelection([], 0, status)

    def _add(self, node: _Node, pod: PodInfo) -> Status | None:
        node.info.add_pod(pod)
        self.main.pod_added(node.info, pod)
        if node.with_nominees is not None:
            node.with_nominees.add_pod(pod)
            self.nominated.pod_added(node.with_nominees, pod)
        if node.state is None:
            return None
        return self.fw.run_pre_filter_extension_add_pod(node.state, self.pod, pod, node.info)

    def _remove(self, node: _Node, pod: PodInfo) -> Status | None:
        node.info.remove_pod(pod.uid)
        self.main.pod_removed(node.info, pod)
        if node.with_nominees is not None:
            node.with_nominees.remove_pod(pod.uid)
            self.nominated.pod_removed(node.with_nominees, pod)
        if node.state is None:
            return None
        return self.fw.run_pre_filter_extension_remove_pod(node.state, self.pod, pod, node.info)


def _resources_only(fw: Framework, state: CycleState) -> bool:
    """Whether NodeResourcesFit is the only Filter plugin of this cycle whose answer depends on the
    pods on a node: every other one that runs is a batch plugin that signs pods and says it does
    not read them."""
    from kubesched.scheduler.framework.interface import BatchFilterPlugin, SignPlugin
    from kubesched.scheduler.plugins import names

    skip = state.skip_filter_plugins
    for plugin in fw.points["filter"]:
        if plugin.name in skip or plugin.name == names.NodeResourcesFit:
            continue
        if not isinstance(plugin, BatchFilterPlugin) or not isinstance(plugin, SignPlugin) or plugin.reads_node_pods:
            return False
    return True
