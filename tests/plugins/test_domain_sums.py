"""DomainSums: per-domain sums carried between cycles and corrected from the rows that changed
must always equal a count from scratch, whatever happened to the table in between."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kubesched.api.selectors import parse_label_selector
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins._pod_groups import Clause, MatchView, pod_index
from kubesched.scheduler.plugins._topology import domain_sums
from tests.plugins.test_inter_pod_affinity import add_pod, cluster, node, pod

ZONES = ["z1", "z2", "z3", "z4"]


def _zone_node(rng: random.Random, name: str) -> dict:
    return node(name, {"zone": rng.choice(ZONES)} if rng.random() < 0.85 else {})


def _from_scratch(codes: np.ndarray, counts: np.ndarray, size: int) -> list[int]:
    counted = codes >= 0
    return np.bincount(codes[counted], weights=counts[counted], minlength=size)[:size].astype(np.int64).tolist()


class _Cluster:
    """A table with pods labelled app=web or app=db coming and going, nodes relabelled, added and
    removed; ``step`` makes ``changes`` such changes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.serial = 0
        nodes = [_zone_node(rng, f"n{i}") for i in range(40)]
        self.table, self.infos = cluster(nodes, [])
        self.live: dict[str, PodInfo] = {}
        for _ in range(60):
            self.add_pod()

    def add_pod(self) -> None:
        self.serial += 1
        p = pod(f"p{self.serial}", node=self.rng.choice(sorted(self.infos)), labels={"app": self.rng.choice(["web", "db"])})
        added = add_pod(self.table, self.infos, p)
        if added is not None:
            self.live[added.uid] = added

    def remove_pod(self) -> None:
        uid = self.rng.choice(sorted(self.live))
        gone = self.live.pop(uid)
        info = self.infos[gone.node_name]
        self.table.pod_removed(info, info.remove_pod(uid))

    def relabel_node(self) -> None:
        name = self.rng.choice(sorted(self.infos))
        self.infos[name].set_node(_zone_node(self.rng, name))
        self.table.set_node(self.infos[name])

    def replace_node(self) -> None:
        name = self.rng.choice(sorted(self.infos))
        for uid in [u for u, p in self.live.items() if p.node_name == name]:
            del self.live[uid]
        self.table.remove_node(name)
        del self.infos[name]
        self.serial += 1
        fresh = NodeInfo(_zone_node(self.rng, f"m{self.serial}"))
        self.infos[fresh.name] = fresh
        self.table.set_node(fresh)

    def step(self, changes: int) -> None:
        for _ in range(changes):
            roll = self.rng.random()
            if roll < 0.45 or not self.live:
                self.add_pod()
            elif roll < 0.9:
                self.remove_pod()
            elif roll < 0.95:
                self.relabel_node()
            else:
                self.replace_node()


def _web(table: NodeTable) -> MatchView:
    return pod_index(table).view(frozenset([Clause(None, parse_label_selector({"matchLabels": {"app": "web"}}))]), True)


@pytest.mark.parametrize("seed", range(6))
def test_kept_sums_equal_a_count_from_scratch_after_every_change(seed: int) -> None:
    rng = random.Random(seed)
    c = _Cluster(rng)
    for _ in range(120):
        c.step(rng.choice([0, 1, 1, 2, 3, 7, 12]))  # none, a few (row by row), many (vectorised, recount)
        table = c.table
        column = table.label_column("zone")
        assert column is not None
        view = _web(table)
        codes, counts = column.codes[: table.n], view.counts[: table.n]
        got = domain_sums(table).sums((view, column), codes, counts, len(column.values))
        assert got.tolist() == _from_scratch(codes, counts, len(column.values))
        # A second mapping of rows to domains over the same counts is kept apart: every other row.
        every_other = np.where(np.arange(table.n) % 2 == 0, codes, -1)
        got = domain_sums(table).sums((view, column, "every other"), every_other, counts, len(column.values))
        assert got.tolist() == _from_scratch(every_other, counts, len(column.values))


def test_kept_sums_cannot_be_written_by_the_caller() -> None:
    c = _Cluster(random.Random(7))
    table = c.table
    column = table.label_column("zone")
    assert column is not None
    view = _web(table)
    got = domain_sums(table).sums((view, column), column.codes[: table.n], view.counts[: table.n], len(column.values))
    with pytest.raises(ValueError):
        got[0] += 1
