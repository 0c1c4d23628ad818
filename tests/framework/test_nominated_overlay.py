"""The nominated-pod overlay agrees with a from-scratch computation (each node's nominees asked from
the queue, the node copied and the nominees added) after any sequence of nominations, bindings,
deletions, pod updates, pops and requeues, and node changes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.backend.queue.scheduling_queue import SchedulingQueue
from kubesched.scheduler.backend.queue.testing import new_test_queue
from kubesched.scheduler.framework.interface import NominatingInfo, NominatingMode
from kubesched.scheduler.framework.nominated import NominatedOverlay, nominated_overlay
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.nodetable.table import NodeTable
from tests.helpers import make_node, make_pod

PRIORITIES = (0, 10, 100)


class World:
    """A node table, a queue and the pods in flight, changed at random."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.table = NodeTable()
        self.queue: SchedulingQueue = new_test_queue()
        self.pending: dict[str, PodInfo] = {}
        self.in_flight: dict[str, QueuedPodInfo] = {}
        self.bound: dict[str, tuple[str, PodInfo]] = {}
        self.serial = 0
        for _ in range(6):
            self.add_node()

    def new_pod(self, name: str | None = None) -> PodInfo:
        self.serial += 1
        name = name or f"p{self.serial}"
        return PodInfo(make_pod(name, cpu=f"{self.rng.choice((100, 500, 900))}m", memory="1Gi",
                                priority=self.rng.choice(PRIORITIES), uid=f"{name}-{self.serial}"))

    def add_node(self) -> None:
        self.serial += 1
        self.table.set_node(NodeInfo(make_node(f"n{self.serial}", cpu=self.rng.choice(("4", "8")))))

    def node_names(self) -> list[str]:
        return self.table.names[: self.table.n]

    # --- steps ---------------------------------------------------------------------------------
    def step(self) -> None:
        rng = self.rng
        action = rng.choice([self.create, self.create, self.nominate, self.nominate, self.pop, self.requeue, self.bind,
                             self.delete, self.update, self.unbind, self.node_change])
        action()

    def create(self) -> None:
        pod = self.new_pod()
        self.pending[pod.key] = pod
        self.queue.add(pod)

    def nominate(self) -> None:
        if self.pending:
            pod = self.pending[self.rng.choice(sorted(self.pending))]
            node = self.rng.choice([*self.node_names(), ""])
            self.queue.add_nominated_pod(pod, NominatingInfo(node, NominatingMode.Override))

    def pop(self) -> None:
        qpi = self.queue.pop_nowait()
        if qpi is not None:
            self.in_flight[qpi.key] = qpi

    def requeue(self) -> None:
        if self.in_flight:
            qpi = self.in_flight.pop(self.rng.choice(sorted(self.in_flight)))
            qpi.unschedulable_plugins = {"NodeResourcesFit"}
            self.queue.add_unschedulable_if_not_present(qpi, self.queue.scheduling_cycle)
            if self.rng.random() < 0.5:
                self.queue.add_nominated_pod(qpi.pod_info, NominatingInfo(self.rng.choice(self.node_names()), NominatingMode.Override))

    def bind(self) -> None:
        """Assume an in-flight pod: out of the nominator, onto a node."""
        if self.in_flight and self.table.n:
            qpi = self.in_flight.pop(self.rng.choice(sorted(self.in_flight)))
            self.queue.delete_nominated_pod_if_exists(qpi.pod_info)
            self.queue.done(qpi.uid)
            self.pending.pop(qpi.key, None)
            name = self.rng.choice(self.node_names())
            self._add_to_node(name, qpi.pod_info)
            self.bound[qpi.key] = (name, qpi.pod_info)

    def _add_to_node(self, name: str, pod: PodInfo) -> None:
        info = self.table.get(name)
        assert info is not None
        info.add_pod(pod)
        self.table.pod_added(info, pod)

    def delete(self) -> None:
        if self.pending:
            pod = self.pending.pop(self.rng.choice(sorted(self.pending)))
            qpi = self.in_flight.pop(pod.key, None)
            self.queue.delete(pod)
            if qpi is not None:
                self.queue.done(qpi.uid)

    def update(self) -> None:
        """A pod update: new labels (the queue's PodInfo is replaced), sometimes the status' nomination."""
        if self.pending:
            old = self.pending[self.rng.choice(sorted(self.pending))]
            obj = dict(old.pod)
            obj["metadata"] = {**old.pod["metadata"], "labels": {"v": str(self.rng.random())}}
            if self.rng.random() < 0.3:
                obj["status"] = {"nominatedNodeName": self.rng.choice([*self.node_names(), ""])}
            new = PodInfo(obj)
            self.pending[new.key] = new
            self.queue.update(old, new)

    def unbind(self) -> None:
        if self.bound:
            name, pod = self.bound.pop(self.rng.choice(sorted(self.bound)))
            info = self.table.get(name)
            if info is not None and info.remove_pod(pod.uid) is not None:
                self.table.pod_removed(info, pod)

    def node_change(self) -> None:
        roll = self.rng.random()
        if roll < 0.4:
            self.add_node()
        elif roll < 0.7 and self.table.n > 2:
            self.table.remove_node(self.rng.choice(self.node_names()))
        elif self.table.n:
            old = self.table.get(self.rng.choice(self.node_names()))
            assert old is not None
            info = NodeInfo(make_node(old.name, cpu=self.rng.choice(("4", "8")), labels={"gen": str(self.serial)}))
            for pod in old.pods.values():
                info.add_pod(pod)
            self.table.set_node(info)


def expected(world: World, pod: PodInfo) -> dict[str, list[str]]:
    """Node name -> uids of the nominees that count for ``pod``, asked from the queue node by node."""
    out = {}
    for name in world.node_names():
        uids = [p.uid for p in world.queue.nominated_pods_for_node(name) if p.priority >= pod.priority and p.uid != pod.uid]
        if uids:
            out[name] = uids
    return out


def check(world: World, overlay: NominatedOverlay, pod: PodInfo) -> None:
    checks = overlay.checks_for(pod)
    got = {name: [p.uid for p in pods] for name, pods in checks.mixed.items()}
    table, view = world.table, overlay.view
    for row, view_row in zip(checks.rows.tolist(), checks.view_rows.tolist(), strict=True):
        name = table.names[row]
        assert view.names[view_row] == name
        assert name not in got
        got[name] = [p.uid for p in overlay.nominees_for(name, pod)]
        # The view row is the node as the table has it, plus every nominee.
        nominees = world.queue.nominated_pods_for_node(name)
        assert [p.uid for p in nominees] == got[name]
        scratch = table.infos[row].clone()
        for nominee in nominees:
            scratch.add_pod(nominee)
        assert list(view.infos[view_row].pods) == list(scratch.pods)
        assert view.infos[view_row].requested == scratch.requested
        reference = NodeTable.from_infos([scratch])
        for resource, index in reference.resource_index.items():
            assert view.requested[view.resource_index[resource], view_row] == reference.requested[index, 0]
            assert view.allocatable[view.resource_index[resource], view_row] == reference.allocatable[index, 0]
        assert view.pod_count[view_row] == reference.pod_count[0]
    assert got == expected(world, pod)
    # The nominees' totals per node, from the view's columns.
    rows = np.arange(table.n)
    world.rng.shuffle(rows)
    count, requests = overlay.totals(pod, rows, ["cpu", "memory", "example.com/gpu"])
    for position, row in enumerate(rows.tolist()):
        pods = [p for p in world.queue.nominated_pods_for_node(table.names[row]) if p.priority >= pod.priority and p.uid != pod.uid]
        assert count[position] == len(pods)
        for resource, column in requests.items():
            assert column[position] == sum(p.requests.get(resource, 0) for p in pods)


@pytest.mark.parametrize("seed", range(12))
def test_overlay_matches_a_fresh_computation(seed: int) -> None:
    world = World(random.Random(seed))
    overlay = None
    for i in range(400):
        world.step()
        if i % 3 == 0 or world.rng.random() < 0.2:
            overlay = nominated_overlay(world.table, world.queue)
            assert overlay is not None
            probes = [world.new_pod("probe"), *world.pending.values()]
            for pod in world.rng.sample(probes, min(4, len(probes))):
                check(world, overlay, pod)
    assert overlay is not None and overlay.view.n == len({n for n in world.queue.nominated_node_names() if n in world.table.row_of})


def test_a_fresh_overlay_sees_the_nominations_made_before_it() -> None:
    world = World(random.Random(99))
    for _ in range(30):
        world.create()
    for _ in range(20):
        world.nominate()
    overlay = nominated_overlay(world.table, world.queue)
    assert overlay is not None
    for pod in world.pending.values():
        check(world, overlay, pod)


def test_no_overlay_without_a_journal() -> None:
    class Plain:
        def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
            return []

    assert nominated_overlay(NodeTable(), Plain()) is None
    assert nominated_overlay(NodeTable(), None) is None
