"""RowMemo serves exactly what a full recomputation gives, recomputing only the rows that changed."""

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.interface import FilterVerdict
from kubesched.scheduler.framework.memo import RowMemo
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import CPU, NodeBatch, NodeTable
from tests.helpers import make_node, make_pod


def table_of(count: int) -> tuple[NodeTable, list[NodeInfo]]:
    table = NodeTable()
    infos = [NodeInfo(make_node(f"n{i}", cpu=str(1 + i % 3))) for i in range(count)]
    for info in infos:
        table.set_node(info)
    return table, infos


def add_pod(table: NodeTable, info: NodeInfo, name: str, cpu: str) -> None:
    pod = PodInfo(make_pod(name, cpu=cpu, node=info.name))
    info.add_pod(pod)
    table.pod_added(info, pod)


class FreeCpu:
    """A per-row computation that records which rows it was asked for."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def __call__(self, batch: NodeBatch) -> np.ndarray:
        self.asked.append(len(batch))
        table = batch.table
        return batch.col(table.allocatable[CPU]) - batch.col(table.requested[CPU])


def test_values_recompute_only_changed_rows_and_match_a_full_computation():
    table, infos = table_of(50)
    memo, compute = RowMemo(table), FreeCpu()
    memo.values("k", compute, table.all_rows())
    add_pod(table, infos[7], "a", "500m")
    add_pod(table, infos[31], "b", "250m")
    served = memo.values("k", compute, table.all_rows())
    assert compute.asked == [50, 2]
    assert np.array_equal(served, FreeCpu()(table.all_rows()))


def test_values_for_a_subset_read_the_same_rows():
    table, infos = table_of(10)
    memo = RowMemo(table)
    rows = np.array([9, 2, 5])
    add_pod(table, infos[5], "a", "1")
    assert np.array_equal(memo.values("k", FreeCpu(), table.batch(rows)), FreeCpu()(table.batch(rows)))


def test_removing_a_node_rebuilds_the_entry():
    table, _ = table_of(10)
    memo, compute = RowMemo(table), FreeCpu()
    memo.values("k", compute, table.all_rows())
    table.remove_node("n3")
    served = memo.values("k", compute, table.all_rows())
    assert compute.asked == [10, 9]
    assert np.array_equal(served, FreeCpu()(table.all_rows()))


def test_changed_rows_agree_between_the_touch_log_and_a_full_scan():
    table, infos = table_of(200)
    since = table.version
    for i in range(150):  # more changes than the log is read for: falls back to scanning
        add_pod(table, infos[(i * 7) % 200], f"p{i}", "10m")
        if i in (3, 40, 149):
            expected = np.flatnonzero(table.row_version[: table.n] > since)
            assert np.array_equal(table.changed_rows(since), expected)
    assert len(table.changed_rows(table.version)) == 0


def keys_of(batch: NodeBatch) -> np.ndarray:
    """0 where the node has 2 or more free cpus, +1 where short, -1 where its allocatable is short."""
    free = FreeCpu()(batch)
    alloc = batch.col(batch.table.allocatable[CPU])
    return np.where(free >= 2000, 0, np.where(alloc < 2000, -1, 1))


def status_of(key: int) -> Status:
    return Status(Code.UnschedulableAndUnresolvable if key < 0 else Code.Unschedulable, f"key {key}")


def verdict_messages(verdict: FilterVerdict | None, size: int) -> list[str | None]:
    if verdict is None:
        return [None] * size
    return [None if s is None else s.message() for s in map(verdict.status_at, range(size))]


def test_verdicts_match_one_built_from_fresh_keys_including_negative_ones():
    table, infos = table_of(30)
    memo = RowMemo(table)
    memo.verdict("k", keys_of, status_of, table.all_rows())
    add_pod(table, infos[2], "a", "1500m")
    add_pod(table, infos[5], "b", "2500m")
    batch = table.batch(np.array([5, 2, 0, 1, 3]))
    for nodes in (table.all_rows(), batch):
        served = memo.verdict("k", keys_of, status_of, nodes)
        fresh = FilterVerdict.from_keys(keys_of(nodes), {k: status_of(k) for k in (-1, 1)})
        assert verdict_messages(served, len(nodes)) == verdict_messages(fresh, len(nodes))
    assert verdict_messages(memo.verdict("k", keys_of, status_of, batch), 5) == ["key 1", "key 1", "key -1", None, "key -1"]


def test_a_verdict_with_no_failures_is_none():
    table, _ = table_of(5)
    assert RowMemo(table).verdict("k", lambda b: np.zeros(len(b), dtype=np.int64), status_of, table.all_rows()) is None
