"""Why a pod did not fit: per-node statuses and the FitError text (upstream ``framework.Diagnosis``,
``NodeToStatus`` and ``FitError``).

Statuses are kept columnar: one status id per node row, pointing into a short list of distinct
statuses, so recording the outcome for 5000 nodes costs one array write.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from kubesched.scheduler.framework.status import Code, Status

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


class NodeToStatus:
    """Statuses of nodes that failed filtering; nodes not recorded get ``absent`` (default
    UnschedulableAndUnresolvable with no reason, as ``NewDefaultNodeToStatus``)."""

    def __init__(self, names: list[str], size: int | None = None) -> None:
        """``names[:size]`` are the nodes (the table's own list, not copied: a diagnosis lives for
        one cycle, during which nodes do not change)."""
        self.names = names
        self.size = len(names) if size is None else size
        self._ids: np.ndarray | None = None
        self.statuses: list[Status] = []
        self.absent = Status(Code.UnschedulableAndUnresolvable)

    @property
    def ids(self) -> np.ndarray:
        """Per node, an index into ``statuses`` or -1 (allocated on first use: most cycles succeed)."""
        if self._ids is None:
            self._ids = np.full(self.size, -1, dtype=np.int32)
        return self._ids

    def set_rows(self, rows: np.ndarray, status_ids: np.ndarray, statuses: list[Status]) -> None:
        """Record ``statuses[status_ids[i]]`` for each row ``rows[i]``."""
        base = len(self.statuses)
        self.statuses.extend(statuses)
        self.ids[rows] = status_ids + base

    def _row(self, name: str) -> int:
        row = self.names.index(name)
        if row >= self.size:
            raise ValueError(name)
        return row

    def set(self, name: str, status: Status) -> None:
        row = self._row(name)
        self.statuses.append(status)
        self.ids[row] = len(self.statuses) - 1

    def get(self, name: str) -> Status:
        try:
            row = self._row(name)
        except ValueError:
            return self.absent
        sid = int(self.ids[row])
        return self.absent if sid < 0 else self.statuses[sid]

    def status_at(self, row: int) -> Status:
        sid = int(self.ids[row])
        return self.absent if sid < 0 else self.statuses[sid]

    def __len__(self) -> int:
        return 0 if self._ids is None else int(np.count_nonzero(self._ids >= 0))

    def items(self) -> Iterator[tuple[str, Status]]:
        for row in np.flatnonzero(self.ids >= 0):
            yield self.names[row], self.statuses[self.ids[row]]

    def codes(self) -> np.ndarray:
        """The status code of every row (absent rows get the absent status's code)."""
        lookup = np.array([int(s.code) for s in self.statuses] + [int(self.absent.code)], dtype=np.int32)
        return lookup.take(np.where(self.ids >= 0, self.ids, len(self.statuses)))

    def reason_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        if not self.statuses:
            return counts
        per_status = np.bincount(self.ids[self.ids >= 0], minlength=len(self.statuses))
        for sid, count in enumerate(per_status):
            if count:
                for reason in self.statuses[sid].reasons:
                    counts[reason] = counts.get(reason, 0) + int(count)
        return counts


class Diagnosis:
    def __init__(self, names: list[str], size: int | None = None) -> None:
        self.node_to_status = NodeToStatus(names, size)
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""

    def add_plugin_status(self, status: Status) -> None:
        if not status.plugin:
            return
        if status.is_rejected():
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.Pending:
            self.pending_plugins.add(status.plugin)


class FitError(Exception):
    """No node fits the pod. ``str()`` is upstream's message, reasons counted and sorted."""

    def __init__(self, pod_key: str, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod_key = pod_key
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            counts = d.node_to_status.reason_counts()
            recorded = len(d.node_to_status)
            if recorded < self.num_all_nodes:
                for reason in d.node_to_status.absent.reasons:
                    counts[reason] = counts.get(reason, 0) + self.num_all_nodes - recorded
            histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
            if histogram:
                msg += f" {', '.join(histogram)}."
        if d.post_filter_msg:
            msg += f" {d.post_filter_msg}"  # PostFilter messages carry their own full stop
        return msg


class NoNodesAvailable(Exception):
    """``ErrNoNodesAvailable``: the cluster has no nodes at all."""

    def __init__(self) -> None:
        super().__init__("no nodes available to schedule pods")
