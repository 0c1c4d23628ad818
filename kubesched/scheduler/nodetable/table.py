"""The columnar node table: every node's scheduling facts as numpy arrays, one row per node.

In-tree plugins filter and score all candidate nodes at once by reading columns (allocatable and
requested per resource, pod counts, label value codes, taint signatures). The table is the
scheduler's snapshot: the cache feeds it node and pod deltas before each cycle and only the rows
that changed are touched. Rows are dense (``0..n-1``); removing a node moves the last row into
the hole, and extensions are told so through ``move_row``.

Plugins keep their own incremental indexes as *extensions*: objects told about every node and pod
change (``node_set``, ``node_removed``, ``pod_added``, ``pod_removed``, ``move_row``, ``grow``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import numpy as np

from kubesched.api.selectors import parse_int64
from kubesched.api.types import NodeInfo, PodInfo, Taint
from kubesched.scheduler.nodetable.tree import NodeTree

CPU, MEMORY, EPHEMERAL, PODS = 0, 1, 2, 3
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
_INITIAL_CAPACITY = 64


class Extension(Protocol):
    """A plugin's per-row index kept in step with the table.

    ``node_removed`` must forget everything the extension knows about the row (it keeps its own
    per-row contributions for that); ``node_set`` is followed by ``pod_added`` for each pod.
    """

    def grow(self, capacity: int) -> None: ...
    def node_set(self, row: int, info: NodeInfo) -> None: ...
    def node_removed(self, row: int, info: NodeInfo) -> None: ...
    def pod_added(self, row: int, pod: PodInfo) -> None: ...
    def pod_removed(self, row: int, pod: PodInfo) -> None: ...
    def move_row(self, src: int, dst: int) -> None: ...


ExtensionFactory = Callable[["NodeTable"], Extension]


class LabelColumn:
    """One label key across nodes: an int32 code per row (-1 = absent) and the value vocabulary.

    A column is never renumbered in place: ``compacted`` returns a new column, so a ``DomainCounts``
    built on this one (it keeps the column and its codes) still reads it consistently.
    """

    __slots__ = ("_integers", "_numbers", "codes", "values", "vocab")

    def __init__(self, capacity: int) -> None:
        self.codes = np.full(capacity, -1, dtype=np.int32)
        self.vocab: dict[str, int] = {}
        self.values: list[str] = []
        self._numbers: np.ndarray | None = None
        self._integers: tuple[np.ndarray, np.ndarray] | None = None

    def code_for(self, value: str) -> int:
        code = self.vocab.get(value)
        if code is None:
            code = len(self.values)
            self.vocab[value] = code
            self.values.append(value)
        return code

    def numbers(self) -> np.ndarray:
        """The value of each code parsed as an integer, as float64 (NaN when not an integer, and
        at the trailing slot code -1 reads); for plugins happy with float comparisons."""
        if self._numbers is None or len(self._numbers) != len(self.values) + 1:
            values, valid = self.integers()
            self._numbers = np.where(valid, values.astype(np.float64), np.nan)
        return self._numbers

    def integers(self) -> tuple[np.ndarray, np.ndarray]:
        """The value of each code as ``strconv.ParseInt`` reads it (int64) and whether it parsed;
        the trailing slot (read by code -1) is invalid. Exact where float64 is not (beyond 2**53)."""
        if self._integers is None or len(self._integers[0]) != len(self.values) + 1:
            parsed = [parse_int64(v) for v in self.values]
            values = np.array([0 if p is None else p for p in parsed] + [0], dtype=np.int64)
            valid = np.array([p is not None for p in parsed] + [False], dtype=bool)
            self._integers = values, valid
        return self._integers

    def compacted(self, n: int) -> LabelColumn:
        """A new column holding only the values rows ``0..n-1`` use (rows beyond hold -1)."""
        live = np.unique(self.codes[:n])
        live = live[live >= 0]
        out = LabelColumn(0)
        out.values = [self.values[code] for code in live.tolist()]
        out.vocab = {value: code for code, value in enumerate(out.values)}
        remap = np.full(len(self.values) + 1, -1, dtype=np.int32)  # the last slot maps code -1 to -1
        remap[live] = np.arange(len(live), dtype=np.int32)
        out.codes = remap[self.codes]
        return out


#: A column is compacted once its vocabulary exceeds twice the rows (and this floor): removed
#: nodes' values (hostnames, mostly) would otherwise pile up and widen every per-value array.
_COMPACT_FLOOR = 64

#: Length of the touch log, and how many recent versions ``changed_rows`` reads from it.
_TOUCH_LOG = 4096
_TOUCH_SCAN = 64
_NO_ROWS = np.empty(0, dtype=np.int64)
_NO_ROWS.flags.writeable = False


class NodeTable:
    """Nodes as rows; see the module docstring for the contract."""

    def __init__(self) -> None:
        self.capacity = _INITIAL_CAPACITY
        self.n = 0
        self.names: list[str] = []
        self.infos: list[NodeInfo] = []
        self.row_of: dict[str, int] = {}
        self.resource_names: list[str] = list(STANDARD_RESOURCES)
        self.resource_index: dict[str, int] = {name: i for i, name in enumerate(STANDARD_RESOURCES)}
        r = len(self.resource_names)
        self.allocatable = np.zeros((r, self.capacity), dtype=np.int64)
        self.requested = np.zeros((r, self.capacity), dtype=np.int64)
        self.non_zero = np.zeros((2, self.capacity), dtype=np.int64)
        self.pod_count = np.zeros(self.capacity, dtype=np.int64)
        self.unschedulable = np.zeros(self.capacity, dtype=bool)
        self.taint_sig = np.zeros(self.capacity, dtype=np.int32)
        self.taint_signatures: list[tuple[Taint, ...]] = [()]
        self._signature_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.labels: dict[str, LabelColumn] = {}
        self._row_label_keys: list[tuple[str, ...]] = []
        self.tree = NodeTree()
        self._order: np.ndarray | None = None
        #: ``names`` as an object array (``names_array``), None once a node was added or removed.
        self._names_array: np.ndarray | None = None
        self.extensions: dict[str, Extension] = {}
        self.generation = 0
        #: A counter bumped by every row change, and per row the value at its last change: what lets
        #: ``RowMemo`` recompute only the rows that changed.
        self.version = 0
        self.row_version = np.zeros(self.capacity, dtype=np.int64)
        #: The rows touched by the last versions, oldest first (``_touched[i]`` got version
        #: ``_touched_base + i + 1``): a few recent changes are found without scanning every row.
        self._touched: list[int] = []
        self._touched_base = 0
        #: The last ``changed_rows`` answer, with what it answered (since, version, row count).
        self._changed: tuple[tuple[int, int, int], np.ndarray] | None = None
        #: Per node, how many of its pods started (``pod_started``).
        self.pod_starts: dict[str, int] = {}
        #: Memoised per-row plugin results (``kubesched.scheduler.framework.memo``), by name.
        self.memos: dict[str, Any] = {}

    # --- reading -----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.n

    def get(self, name: str) -> NodeInfo | None:
        row = self.row_of.get(name)
        return None if row is None else self.infos[row]

    def order(self) -> np.ndarray:
        """Rows in the order the scheduler visits nodes (round-robin over zones)."""
        if self._order is None:
            self._order = np.fromiter((self.row_of[n] for n in self.tree.ordered()), dtype=np.int64, count=self.n)
        return self._order

    def names_array(self) -> np.ndarray:
        """The node names by row as an object array, for taking many names by row in one call
        (``names_array()[rows].tolist()``); kept until a node is added or removed."""
        if self._names_array is None:
            self._names_array = np.array(self.names[: self.n], dtype=object)
        return self._names_array

    def resource_row(self, name: str) -> int | None:
        return self.resource_index.get(name)

    def label_codes(self, key: str) -> np.ndarray | None:
        column = self.labels.get(key)
        return None if column is None else column.codes[: self.n]

    def label_column(self, key: str) -> LabelColumn | None:
        return self.labels.get(key)

    def all_rows(self) -> NodeBatch:
        return NodeBatch(self, None)

    def batch(self, rows: np.ndarray) -> NodeBatch:
        return NodeBatch(self, rows)

    # --- extensions -------------------------------------------------------------------------
    def extension(self, key: str, factory: ExtensionFactory) -> Any:
        """The extension under ``key``, created (and fed every current node and pod) on first use."""
        ext = self.extensions.get(key)
        if ext is None:
            ext = factory(self)
            ext.grow(self.capacity)
            for row, info in enumerate(self.infos):
                ext.node_set(row, info)
                for pod in info.pods.values():
                    ext.pod_added(row, pod)
            self.extensions[key] = ext
        return ext

    # --- writing ----------------------------------------------------------------------------
    def set_node(self, info: NodeInfo) -> int:
        """Add the node or rewrite its row from ``info`` (labels, taints, allocatable, aggregates).

        Extensions forget the row and are fed the node and all its current pods again, so a node
        change (new labels, say) never leaves a stale contribution behind.
        """
        row = self.row_of.get(info.name)
        if row is None:
            row = self._append_row(info)
            self.tree.add(info.name, info.labels)
            self._names_array = None
        else:
            for ext in self.extensions.values():
                ext.node_removed(row, self.infos[row])
            self.infos[row] = info
            self.tree.update(info.name, info.labels)
        self._order = None
        self._write_static(row, info)
        self.write_aggregates(row, info)
        for ext in self.extensions.values():
            ext.node_set(row, info)
            for pod in info.pods.values():
                ext.pod_added(row, pod)
        self.generation += 1
        self._touch(row)
        return row

    def remove_node(self, name: str) -> None:
        self.pod_starts.pop(name, None)
        row = self.row_of.pop(name, None)
        if row is None:
            return
        info = self.infos[row]
        for ext in self.extensions.values():
            ext.node_removed(row, info)
        self._clear_labels(row)
        self.tree.remove(name)
        last = self.n - 1
        if row != last:
            self._move(last, row)
        self.names.pop()
        self.infos.pop()
        self._row_label_keys.pop()
        self.n -= 1
        self._order = None
        self._names_array = None
        self.generation += 1
        if row < self.n:
            self._touch(row)

    def pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        self._pod_changed(info, pod, added=True)

    def pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        self._pod_changed(info, pod, added=False)

    def _pod_changed(self, info: NodeInfo, pod: PodInfo, added: bool) -> None:
        row = self.row_of.get(info.name)
        if row is None:
            return
        self.write_aggregates(row, info)
        self._touch(row)
        for ext in self.extensions.values():
            (ext.pod_added if added else ext.pod_removed)(row, pod)

    def pod_started(self, name: str) -> None:
        """A pod of node ``name`` started (its start time set), and nothing a column holds
        changed: no row version moves, so what the cycles keep per row stays. Preemption orders
        victims by start time, so its dry-run answers are kept by row version and ``pod_starts``."""
        self.pod_starts[name] = self.pod_starts.get(name, 0) + 1

    def write_aggregates(self, row: int, info: NodeInfo) -> None:
        """Copy what the pods on a node add up to (requested, non-zero requested, pod count)."""
        self.requested[:, row] = 0
        for name, amount in info.requested.items():
            idx = self.resource_index.get(name)
            if idx is None:
                idx = self._add_resource(name)
            self.requested[idx, row] = amount
        self.non_zero[0, row] = info.non_zero_requested[0]
        self.non_zero[1, row] = info.non_zero_requested[1]
        self.pod_count[row] = len(info.pods)

    def snapshot_taken(self) -> None:
        """Tell extensions that want it that this cycle's updates are all applied."""
        for ext in self.extensions.values():
            hook = getattr(ext, "snapshot_taken", None)
            if hook is not None:
                hook()

    def _touch(self, row: int) -> None:
        self.version += 1
        self.row_version[row] = self.version
        touched = self._touched
        if len(touched) >= _TOUCH_LOG:
            del touched[: _TOUCH_LOG // 2]
            self._touched_base += _TOUCH_LOG // 2
        touched.append(row)

    def changed_rows(self, since: int) -> np.ndarray:
        """Rows changed after version ``since``, ascending (do not write to the array: the last
        answer is kept, as every memo of a cycle asks the same question)."""
        if since >= self.version:
            return _NO_ROWS
        asked = (since, self.version, self.n)
        last = self._changed
        if last is not None and last[0] == asked:
            return last[1]
        if since >= self._touched_base and self.version - since <= _TOUCH_SCAN:
            rows = np.array(sorted({row for row in self._touched[since - self._touched_base:] if row < self.n}), dtype=np.int64)
        else:
            rows = np.flatnonzero(self.row_version[: self.n] > since)
        self._changed = (asked, rows)
        return rows

    # --- internals --------------------------------------------------------------------------
    def _append_row(self, info: NodeInfo) -> int:
        if self.n == self.capacity:
            self._grow(self.capacity * 2)
        row = self.n
        self.n += 1
        self.names.append(info.name)
        self.infos.append(info)
        self._row_label_keys.append(())
        self.row_of[info.name] = row
        return row

    def _grow(self, capacity: int) -> None:
        def widen(arr: np.ndarray, fill: object = 0) -> np.ndarray:
            shape = (*arr.shape[:-1], capacity)
            out = np.full(shape, fill, dtype=arr.dtype)
            out[..., : arr.shape[-1]] = arr
            return out

        self.allocatable = widen(self.allocatable)
        self.requested = widen(self.requested)
        self.non_zero = widen(self.non_zero)
        self.pod_count = widen(self.pod_count)
        self.unschedulable = widen(self.unschedulable, False)
        self.taint_sig = widen(self.taint_sig)
        self.row_version = widen(self.row_version)
        for column in self.labels.values():
            column.codes = widen(column.codes, -1)
        self.capacity = capacity
        for ext in self.extensions.values():
            ext.grow(capacity)

    def _add_resource(self, name: str) -> int:
        idx = len(self.resource_names)
        self.resource_names.append(name)
        self.resource_index[name] = idx
        zeros = np.zeros((1, self.capacity), dtype=np.int64)
        self.allocatable = np.vstack([self.allocatable, zeros])
        self.requested = np.vstack([self.requested, zeros])
        return idx

    def _write_static(self, row: int, info: NodeInfo) -> None:
        self.allocatable[:, row] = 0
        for name, amount in info.allocatable.items():
            idx = self.resource_index.get(name)
            if idx is None:
                idx = self._add_resource(name)
            self.allocatable[idx, row] = amount
        self.unschedulable[row] = info.unschedulable
        self.taint_sig[row] = self._signature(tuple(info.taints))
        self._write_labels(row, info.labels)

    def _signature(self, taints: tuple[Taint, ...]) -> int:
        sig = self._signature_ids.get(taints)
        if sig is None:
            sig = len(self.taint_signatures)
            self.taint_signatures.append(taints)
            self._signature_ids[taints] = sig
        return sig

    def _write_labels(self, row: int, labels: Mapping[str, str]) -> None:
        old_keys = self._row_label_keys[row]
        for key in old_keys:
            if key not in labels:
                self.labels[key].codes[row] = -1
        for key, value in labels.items():
            column = self.labels.get(key)
            if column is None:
                column = self.labels[key] = LabelColumn(self.capacity)
            elif value not in column.vocab and len(column.values) >= 2 * max(self.n, _COMPACT_FLOOR):
                column = self.labels[key] = column.compacted(self.n)
            column.codes[row] = column.code_for(value)
        self._row_label_keys[row] = tuple(labels)

    def _clear_labels(self, row: int) -> None:
        for key in self._row_label_keys[row]:
            self.labels[key].codes[row] = -1
        self._row_label_keys[row] = ()

    def _move(self, src: int, dst: int) -> None:
        """Move row ``src`` (the last one) into ``dst`` (a hole left by a removed node)."""
        for arr in (self.allocatable, self.requested, self.non_zero):
            arr[:, dst] = arr[:, src]
        for per_node in (self.pod_count, self.unschedulable, self.taint_sig):
            per_node[dst] = per_node[src]
        for key in self._row_label_keys[src]:
            column = self.labels[key]
            column.codes[dst] = column.codes[src]
            column.codes[src] = -1
        self._row_label_keys[dst] = self._row_label_keys[src]
        self._row_label_keys[src] = ()
        self.names[dst] = self.names[src]
        self.infos[dst] = self.infos[src]
        self.row_of[self.names[dst]] = dst
        for ext in self.extensions.values():
            ext.move_row(src, dst)

    # --- scratch tables -----------------------------------------------------------------------
    @classmethod
    def from_infos(cls, infos: Iterable[NodeInfo]) -> NodeTable:
        """A separate table of the given nodes (e.g. a node with victims removed, for preemption).
        Plugins build the extensions they use on it when they first ask for them."""
        table = cls()
        for info in infos:
            table.set_node(info)
        return table

    @classmethod
    def from_rows(cls, source: NodeTable, rows: np.ndarray, infos: list[NodeInfo]) -> NodeTable:
        """``from_infos(infos)`` where each ``infos[i]`` is a copy of ``source``'s node at ``rows[i]``
        with other pods (the same node object): the node's own columns (allocatable, taints,
        labels) are copied from ``source`` rather than rebuilt, the pod aggregates come from
        ``infos``. Preemption's dry runs and the nominated-pod checks build one per cycle."""
        table = cls()
        n = len(infos)
        if n > table.capacity:
            table._grow(n)
        table.resource_names = list(source.resource_names)
        table.resource_index = dict(source.resource_index)
        table.allocatable = np.zeros((len(table.resource_names), table.capacity), dtype=np.int64)
        table.requested = np.zeros_like(table.allocatable)
        table.allocatable[:, :n] = source.allocatable[:, rows]
        table.unschedulable[:n] = source.unschedulable[rows]
        table.taint_sig[:n] = source.taint_sig[rows]
        table.taint_signatures = list(source.taint_signatures)
        table._signature_ids = dict(source._signature_ids)
        for key, column in source.labels.items():
            copy = table.labels[key] = LabelColumn(table.capacity)
            copy.codes[:n] = column.codes[rows]
            copy.vocab, copy.values = dict(column.vocab), list(column.values)
        keys = source._row_label_keys
        for row, info in zip(rows.tolist(), infos, strict=True):
            index = table._append_row(info)
            table._row_label_keys[index] = keys[row]
            table.write_aggregates(index, info)
            table.tree.add_as_in(source.tree, info.name)
        table.generation = n
        return table


class NodeBatch:
    """A set of table rows a plugin evaluates at once: all rows (``rows is None``) or a subset."""

    __slots__ = ("rows", "table")

    def __init__(self, table: NodeTable, rows: np.ndarray | None) -> None:
        self.table = table
        self.rows = rows

    def __len__(self) -> int:
        return self.table.n if self.rows is None else len(self.rows)

    def col(self, column: np.ndarray) -> np.ndarray:
        """``column`` (indexed by row on its last axis) restricted to this batch, in batch order."""
        if self.rows is None:
            return column[..., : self.table.n]
        return column[self.rows] if column.ndim == 1 else column[..., self.rows]

    def row_ids(self) -> np.ndarray:
        return np.arange(self.table.n) if self.rows is None else self.rows

    def names(self) -> list[str]:
        names = self.table.names
        return list(names[: self.table.n]) if self.rows is None else [names[r] for r in self.rows]

    def infos(self) -> list[NodeInfo]:
        infos = self.table.infos
        return list(infos[: self.table.n]) if self.rows is None else [infos[r] for r in self.rows]

    def labels(self, key: str) -> np.ndarray:
        """Label value codes of ``key`` for the batch (-1 where absent)."""
        codes = self.table.label_codes(key)
        if codes is None:
            return np.full(len(self), -1, dtype=np.int32)
        return codes if self.rows is None else self.table.labels[key].codes[self.rows]

    def subset(self, positions: np.ndarray) -> NodeBatch:
        """The batch restricted to ``positions`` (indices into this batch)."""
        return NodeBatch(self.table, self.row_ids()[positions])
