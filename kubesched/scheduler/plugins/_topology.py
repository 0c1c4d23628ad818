"""Counts per topology domain (the values of one node label key), shared by InterPodAffinity and
PodTopologySpread, with their Filter verdicts and AddPod / RemovePod extensions.

A ``DomainCounts`` is indexed by the label column codes of the node table PreFilter/PreScore saw,
so on that table a Filter or Score is one fancy-indexing operation. Scratch tables (preemption,
nominated pods) have their own vocabularies: their codes are translated through the values,
which is cheap because such tables hold a node or two. Values never seen in the column (a pod
added by AddPod on a node the table does not know) live in ``extra``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.batch import NO_ROWS, union_of_rows
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import FilterVerdict, PreFilterExtensions
from kubesched.scheduler.framework.memo import FEW_ROWS
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.nodetable.table import LabelColumn, NodeBatch, NodeTable

MAX_INT32 = 2**31 - 1


def row_sums_by_code(codes: np.ndarray, counts: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray | None:
    """Σ counts per label code over a few ``rows`` (``counts[i]`` belongs to row ``rows[i]``; rows
    without the label ignored), or None when nothing counted. Counts over every row are kept and
    corrected instead (``DomainSums``)."""
    if len(rows) == 0:
        return None
    sums = _bincount(codes[rows], counts, size)
    return sums if sums.any() else None


#: Sums kept per table (distinct count sources and layouts in use); the least recently used go first.
MAX_KEPT_SUMS = 32
#: Past this share of the rows changed, the sums are computed again rather than corrected.
_RECOUNT_SHARE = 8


class _KeptSums:
    __slots__ = ("anchors", "counts", "generation", "sums", "version")

    def __init__(self, anchors: tuple[object, ...], counts: np.ndarray, sums: np.ndarray, table: NodeTable) -> None:
        self.anchors = anchors
        self.counts = counts
        self.sums = sums
        self.generation = table.generation
        self.version = table.version


class DomainSums:
    """Per-domain sums of per-row counts, carried from one cycle to the next.

    Replicas of one workload ask for the same sums on every cycle (the pods matching a term, per
    zone), and between two cycles only the rows that got or lost a pod change. While the table's
    nodes are unchanged (its ``generation``: the rows' domain codes are fixed), the sums are
    corrected by the count deltas of the rows changed since (``changed_rows``) instead of being
    summed over every row again; the results are exactly those of ``np.bincount``.

    Sums are kept by ``anchors``, the objects that identify what is counted and how rows map to
    domains (a pod-index view and a label column, say); they are held, so an identity that matches
    is the same object. Kept on the table as ``table.memos[DOMAIN_SUMS]``: see ``domain_sums``.
    """

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self._kept: OrderedDict[tuple[int, ...], _KeptSums] = OrderedDict()

    def sums(self, anchors: tuple[object, ...], codes: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
        """Σ ``counts`` per code of ``codes`` (both by row; code -1 is counted nowhere), as int64 of
        length ``size``; read only. ``codes`` must be fixed while the table's generation is."""
        table = self.table
        key = tuple(id(a) for a in anchors)
        kept = self._kept.pop(key, None)
        if kept is None or not self._still_valid(kept, anchors, counts, size):
            kept = _KeptSums(anchors, counts.copy(), _bincount(codes, counts, size), table)
        else:
            self._correct(kept, codes, counts)
        self._kept[key] = kept
        if len(self._kept) > MAX_KEPT_SUMS:
            self._kept.popitem(last=False)
        out = kept.sums.view()
        out.flags.writeable = False
        return out

    def _still_valid(self, kept: _KeptSums, anchors: tuple[object, ...], counts: np.ndarray, size: int) -> bool:
        table = self.table
        if kept.generation != table.generation or len(kept.counts) != len(counts) or len(kept.sums) != size:
            return False
        return all(a is b for a, b in zip(kept.anchors, anchors, strict=True))

    def _correct(self, kept: _KeptSums, codes: np.ndarray, counts: np.ndarray) -> None:
        table = self.table
        rows = table.changed_rows(kept.version)
        kept.version = table.version
        if len(rows) * _RECOUNT_SHARE > len(counts):
            kept.counts[:] = counts
            kept.sums = _bincount(codes, counts, len(kept.sums))
            return
        if not len(rows):
            return
        if len(rows) <= FEW_ROWS:  # the common case, a pod placed: scalars cost less than numpy calls
            sums, old = kept.sums, kept.counts
            for row in rows.tolist():
                delta, code = int(counts[row] - old[row]), int(codes[row])
                if delta:
                    old[row] += delta
                    if code >= 0:
                        sums[code] += delta
            return
        delta = counts[rows] - kept.counts[rows]
        moved = np.flatnonzero(delta)
        if not len(moved):
            return
        rows, delta = rows[moved], delta[moved]
        kept.counts[rows] = counts[rows]
        domain = codes[rows]
        counted = domain >= 0
        np.add.at(kept.sums, domain[counted], delta[counted])


DOMAIN_SUMS = "DomainSums"


def domain_sums(table: NodeTable) -> DomainSums:
    """The table's ``DomainSums`` (created on first use; it reads versions, it is not an extension)."""
    kept = table.memos.get(DOMAIN_SUMS)
    if kept is None:
        kept = table.memos[DOMAIN_SUMS] = DomainSums(table)
    return kept


def _bincount(codes: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    counted = codes >= 0
    return np.bincount(codes[counted], weights=counts[counted], minlength=size)[:size].astype(np.int64)


class VerdictBuilder:
    """Builds a FilterVerdict from failure masks marked in reverse order of precedence: a later
    mark overrides an earlier one on the nodes both cover. One Status per reason, built on first use."""

    __slots__ = ("codes", "index", "size", "statuses", "templates")

    def __init__(self, size: int, templates: Mapping[int, Callable[[], Status]]) -> None:
        self.size = size
        self.templates = templates
        self.codes: np.ndarray | None = None
        self.statuses: list[Status] = []
        self.index: dict[int, int] = {}

    def mark(self, failed: np.ndarray, reason: int) -> None:
        if not failed.any():
            return
        if self.codes is None:
            self.codes = np.full(self.size, -1, dtype=np.int32)
        idx = self.index.get(reason)
        if idx is None:
            idx = self.index[reason] = len(self.statuses)
            self.statuses.append(self.templates[reason]())
        self.codes[failed] = idx

    def verdict(self) -> FilterVerdict | None:
        if self.codes is None:
            return None
        return FilterVerdict(self.codes, self.statuses)


class DomainCounts:
    """An int64 per value of label ``key``; with ``present`` it also says which values are domains.

    ``counts`` has one slot per column code plus a trailing sentinel slot (always 0, absent) that
    absent labels and unknown values index.
    """

    __slots__ = ("column", "counts", "extra", "key", "present")

    def __init__(self, key: str, column: LabelColumn | None, counts: np.ndarray, present: np.ndarray | None = None) -> None:
        self.key = key
        self.column = column
        self.counts = counts
        self.present = present
        self.extra: dict[str, int] = {}

    @classmethod
    def zeros(cls, table: NodeTable, key: str, with_presence: bool = False) -> DomainCounts:
        column = table.label_column(key)
        size = (len(column.values) if column is not None else 0) + 1
        present = np.zeros(size, dtype=bool) if with_presence else None
        return cls(key, column, np.zeros(size, dtype=np.int64), present)

    @classmethod
    def from_sums(cls, table: NodeTable, key: str, sums: np.ndarray | None, present: np.ndarray | None = None) -> DomainCounts:
        """Wrap per-code sums (``row_sums_by_code`` output, possibly None) for ``key`` of ``table``."""
        out = cls.zeros(table, key, with_presence=present is not None)
        if sums is not None:
            out.counts[: len(sums)] = sums
        if present is not None and out.present is not None:  # zeros() made it: with_presence
            out.present[: len(present)] = present
        return out

    # --- reading ------------------------------------------------------------------------------
    def _code(self, value: str) -> int | None:
        if self.column is None:
            return None
        code = self.column.vocab.get(value)
        return code if code is not None and code < len(self.counts) - 1 else None

    def get(self, value: str) -> int:
        code = self._code(value)
        if code is not None:
            return int(self.counts[code])
        return self.extra.get(value, 0)

    def is_domain(self, value: str) -> bool:
        code = self._code(value)
        if code is not None:
            return bool(self.present[code]) if self.present is not None else bool(self.counts[code])
        return value in self.extra if self.present is not None else bool(self.extra.get(value))

    def any_nonzero(self) -> bool:
        return bool(self.counts.any()) or any(self.extra.values())

    def domain_values(self) -> np.ndarray:
        """Counts of the domains (present values), for minimum and domain-number computations."""
        assert self.present is not None
        values = self.counts[self.present]
        if self.extra:
            values = np.concatenate([values, np.fromiter(self.extra.values(), dtype=np.int64, count=len(self.extra))])
        return values

    def as_dict(self) -> dict[str, int]:
        """Domains (or non-zero values without presence) and their counts; for tests and explanations."""
        out: dict[str, int] = {}
        values = self.column.values if self.column is not None else []
        for code in range(len(self.counts) - 1):
            keep = self.present[code] if self.present is not None else self.counts[code] != 0
            if keep:
                out[values[code]] = int(self.counts[code])
        for value, count in self.extra.items():
            if self.present is not None or count:
                out[value] = count
        return out

    def lookup(self, batch: NodeBatch) -> tuple[np.ndarray, np.ndarray]:
        """Per node of ``batch``: (has the label, count of its value; 0 without the label)."""
        codes = batch.labels(self.key)
        if self.indexes(batch.table):
            return codes >= 0, self.counts.take(codes)  # code -1 reads the trailing 0; take: int32 codes
        counts, _ = self._extended()
        return codes >= 0, counts.take(self._indices(batch, codes))

    def slots_of(self, batch: NodeBatch) -> np.ndarray | None:
        """Per node of ``batch``, its slot in ``counts`` (its label's code; -1, the trailing slot,
        without the label), when ``counts`` covers every value of the batch's label column: then a
        value per slot computed once gives every node's with one ``take``. None otherwise."""
        return batch.labels(self.key) if self.indexes(batch.table) else None

    def indexes(self, table: NodeTable) -> bool:
        """Whether ``counts`` has a slot for every code of ``table``'s label column and no other
        value (a row's slot is then its code)."""
        column = table.label_column(self.key)
        return column is not None and column is self.column and not self.extra and len(column.values) == len(self.counts) - 1

    def _extended(self) -> tuple[np.ndarray, np.ndarray]:
        present = self.present if self.present is not None else self.counts != 0
        if not self.extra:
            return self.counts, present
        extra_counts = np.fromiter(self.extra.values(), dtype=np.int64, count=len(self.extra))
        extra_present = np.ones(len(self.extra), dtype=bool) if self.present is not None else extra_counts != 0
        # Keep the sentinel last so that index -1 still means "absent".
        return (np.concatenate([self.counts[:-1], extra_counts, self.counts[-1:]]),
                np.concatenate([present[:-1], extra_present, present[-1:]]))

    def _indices(self, batch: NodeBatch, codes: np.ndarray) -> np.ndarray:
        """Indices into the extended arrays; -1 (the sentinel) for absent labels and unknown values."""
        column = batch.table.label_column(self.key)
        known = len(self.counts) - 1
        if column is not None and column is self.column and not self.extra:
            beyond = codes >= known
            if not beyond.any():
                return codes
            return np.where(beyond, -1, codes)
        if column is None:
            return np.full(len(codes), -1, dtype=np.int64)
        positions = {value: known + i for i, value in enumerate(self.extra)}
        trans = np.fromiter((self._position(v, positions) for v in column.values), dtype=np.int64, count=len(column.values))
        trans = np.append(trans, -1)  # code -1 -> sentinel
        return trans.take(codes)

    def _position(self, value: str, extra_positions: dict[str, int]) -> int:
        code = self._code(value)
        if code is not None:
            return code
        return extra_positions.get(value, -1)

    # --- writing ------------------------------------------------------------------------------
    def add(self, value: str, delta: int) -> None:
        """Add ``delta`` to ``value``'s count; with presence, the value becomes a domain."""
        code = self._code(value)
        if code is not None:
            self.counts[code] += delta
            if self.present is not None:
                self.present[code] = True
            return
        self.extra[value] = self.extra.get(value, 0) + delta

    def _comparable(self, other: DomainCounts) -> bool:
        """Whether ``other`` can be compared slot by slot: the same key, label column and size,
        presence kept by both or neither, no values outside the column."""
        return other.key == self.key and other.column is self.column and not self.extra and not other.extra \
            and len(other.counts) == len(self.counts) and (self.present is None) == (other.present is None)

    def same_as(self, other: DomainCounts) -> bool:
        """Whether ``other`` holds the same counts and presence slot by slot (for few slots: it
        compares their bytes, cheaper than numpy's comparisons)."""
        return self._comparable(other) and self.counts.tobytes() == other.counts.tobytes() \
            and (self.present is None or other.present is None or self.present.tobytes() == other.present.tobytes())

    def moved_slots(self, other: DomainCounts) -> np.ndarray | None:
        """The slots (label value codes) whose count or presence differs in ``other``, ascending;
        None when the two cannot be compared slot by slot (another key, label column or size,
        values outside the column) or nodes without the label (the trailing slot) moved."""
        if not self._comparable(other):
            return None
        differs = self.counts != other.counts
        if self.present is not None and other.present is not None:
            differs |= self.present != other.present
        slots = np.flatnonzero(differs)
        if len(slots) and slots[-1] == len(self.counts) - 1:
            return None
        return slots

    def clone(self) -> DomainCounts:
        copy = DomainCounts(self.key, self.column, self.counts.copy(), None if self.present is None else self.present.copy())
        copy.extra = dict(self.extra)
        return copy


def moved_domain_rows(pairs: Iterable[tuple[DomainCounts, DomainCounts]], table: NodeTable,
                      limit: int) -> np.ndarray | None:
    """The rows of ``table`` in a domain whose count differs between the two counts of a pair (a
    PreFilter state's counts before and after pods landed), ascending; None when a pair cannot be
    compared domain by domain (counts that no longer follow the table's label columns) or more
    than ``limit`` rows are in such domains."""
    found: list[np.ndarray] = []
    for old, new in pairs:
        if table.label_column(new.key) is not new.column:
            return None
        if table.n > limit * len(new.counts):  # values hold more than ``limit`` nodes on average (zones)
            if old.same_as(new):
                continue
            return None
        slots = old.moved_slots(new)
        if slots is None:
            return None
        found.append(rows_in_slots(table, new.key, slots))
        if sum(len(r) for r in found) > limit:
            return None
    return union_of_rows(found)


def rows_in_slots(table: NodeTable, key: str, slots: np.ndarray) -> np.ndarray:
    """The rows whose label ``key`` has a code in ``slots`` (label value codes), ascending."""
    codes = table.label_codes(key)
    if not len(slots) or codes is None:
        return NO_ROWS
    return np.flatnonzero(codes == slots[0] if len(slots) == 1 else np.isin(codes, slots))


class StateUpdates(PreFilterExtensions):
    """AddPod / RemovePod for a PreFilter state kept under ``key`` whose ``update_with_pod(pod,
    node_info, delta)`` accounts a pod added (+1) or removed (-1); ``missing`` is the error message
    when PreFilter stored no state."""

    __slots__ = ("key", "missing")

    def __init__(self, key: str, missing: str) -> None:
        self.key = key
        self.missing = missing

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod_to_add, node_info, 1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update(state, pod_to_remove, node_info, -1)

    def _update(self, state: CycleState, other: PodInfo, node_info: NodeInfo, delta: int) -> Status | None:
        s = state.get(self.key)
        if s is None:
            return Status.from_error(RuntimeError(self.missing))
        s.update_with_pod(other, node_info, delta)
        return None
