"""ImageLocality: upstream's score cases (thresholds, spread, init containers), image name
normalisation, the snapshot-like staleness of node counts, and the index against a per-node
reference across node and pod changes."""

from __future__ import annotations

import hashlib
import random

import pytest

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.imagelocality.image_locality import (
    MAX_CONTAINER_THRESHOLD,
    MB,
    MIN_THRESHOLD,
    ImageLocality,
    normalized_image_name,
)
from tests.helpers import make_node, make_pod


def image(size_mb: int, *names: str) -> dict:
    return {"names": list(names), "sizeBytes": size_mb * MB}


NODE_40_300_2000 = [image(40, "gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"), image(300, "gcr.io/300:latest", "gcr.io/300:v1"),
                    image(2000, "gcr.io/2000:latest")]
NODE_250_10 = [image(250, "gcr.io/250:latest"), image(10, "gcr.io/10:latest", "gcr.io/10:v1")]
NODE_600_40_900 = [image(600, "gcr.io/600:latest"), image(40, "gcr.io/40:latest"), image(900, "gcr.io/900:latest")]
NODE_300_600_900 = [image(300, "gcr.io/300:latest"), image(600, "gcr.io/600:latest"), image(900, "gcr.io/900:latest")]
NODE_4000_30 = [image(4000, "gcr.io/4000:latest"), image(30, "gcr.io/30:latest")]
NODE_20_30_40 = [image(20, "gcr.io/20:latest"), image(30, "gcr.io/30:latest"), image(40, "gcr.io/40:latest")]
NO_IMAGES: list[dict] = []


def image_pod(*images: str, init: tuple[str, ...] = (), name: str = "p", node: str | None = None) -> PodInfo:
    pod = make_pod(name, node=node)
    pod["spec"]["containers"] = [{"name": f"c{i}", "image": img} for i, img in enumerate(images)]
    if init:
        pod["spec"]["initContainers"] = [{"name": f"i{i}", "image": img} for i, img in enumerate(init)]
    return PodInfo(pod)


def table_of(*statuses: list[dict]) -> NodeTable:
    table = NodeTable()
    for i, images in enumerate(statuses):
        table.set_node(NodeInfo(make_node(f"node{i + 1}", images=images)))
    return table


CASES = [
    # node2: 100 * (250M/2 - 23M) / (1000M*2 - 23M) = 5
    ("two images spread on two nodes, prefer the larger image one", ("gcr.io/40", "gcr.io/250"), (),
     [NODE_40_300_2000, NODE_250_10], [0, 5]),
    # node1: 100 * ((40M + 300M)/2 - 23M) / (1000M*2 - 23M) = 7
    ("two images on one node, prefer this node", ("gcr.io/40", "gcr.io/300"), (), [NODE_40_300_2000, NODE_250_10], [7, 0]),
    ("if exceed limit, use limit", ("gcr.io/10", "gcr.io/4000"), (), [NODE_4000_30, NODE_250_10], [100, 0]),
    # node1: 100 * (4000M/3 - 23M) / (1000M*2 - 23M) = 66
    ("if exceed limit, use limit (with a node without images)", ("gcr.io/10", "gcr.io/4000"), (),
     [NODE_4000_30, NODE_250_10, NO_IMAGES], [66, 0, 0]),
    ("pod with multiple large images, node2 is preferred", ("gcr.io/300", "gcr.io/600", "gcr.io/900"), (),
     [NODE_600_40_900, NODE_300_600_900, NO_IMAGES], [32, 36, 0]),
    ("pod with multiple small images", ("gcr.io/30", "gcr.io/40"), (), [NODE_20_30_40, NODE_4000_30], [1, 0]),
    ("init containers count: two images spread on two nodes, prefer the larger image one", ("gcr.io/30",), ("gcr.io/300",),
     [NODE_40_300_2000, NODE_20_30_40], [6, 0]),
]


@pytest.mark.parametrize("name,images,init,nodes,expected", CASES, ids=[c[0] for c in CASES])
def test_score(name, images, init, nodes, expected):
    table = table_of(*nodes)
    scores = ImageLocality().score_nodes(CycleState(), image_pod(*images, init=init), table.all_rows())
    assert list(scores) == expected


DIGEST = "sha256:" + hashlib.sha256(b"root").hexdigest()


@pytest.mark.parametrize("raw,normalized", [
    ("root", "root:latest"), ("gcr.io:5000/root", "gcr.io:5000/root:latest"), ("root:tag", "root:tag"),
    ("root@" + DIGEST, "root@" + DIGEST),
], ids=["add latest 1", "add latest 2", "keep tag", "keep digest"])
def test_normalized_image_name(raw, normalized):
    assert normalized_image_name(raw) == normalized


def test_node_counts_are_frozen_until_the_node_changes():
    """Upstream refreshes ImageStateSummary.NumNodes only when a node's NodeInfo is re-snapshotted."""
    table = table_of([image(500, "big:latest")], NO_IMAGES)
    pl, pod = ImageLocality(), image_pod("big")
    # node1: 500M * 1/2 = 250M -> 100 * (250M - 23M) / (1000M - 23M) = 23
    assert list(pl.score_nodes(CycleState(), pod, table.all_rows())) == [23, 0]
    table.set_node(NodeInfo(make_node("node3", images=[image(500, "big:latest")])))
    # node1 did not change: it still counts 1 node of 3 (500M/3 = 166M -> 14); node3 counts 2 of 3 (333M -> 31).
    assert list(pl.score_nodes(CycleState(), pod, table.all_rows())) == [14, 0, 31]
    info = table.infos[0]
    added = image_pod("x", name="filler", node="node1")
    info.add_pod(added)
    table.pod_added(info, added)
    assert list(pl.score_nodes(CycleState(), pod, table.all_rows())) == [31, 0, 31]


def test_size_comes_from_the_first_node_reporting_the_name():
    table = table_of([image(100, "app:latest")], [image(900, "app:latest")])
    # both nodes: 100M * 2/2 = 100M -> 100 * (100M - 23M) / (1000M - 23M) = 7
    assert list(ImageLocality().score_nodes(CycleState(), image_pod("app"), table.all_rows())) == [7, 7]


# --- index vs per-node reference ----------------------------------------------------------------------
NAMES = ["a:latest", "b:latest", "c:v1", "d:latest"]


def random_images(rng: random.Random) -> list[dict]:
    return [image(rng.choice([10, 50, 200, 900]), name) for name in rng.sample(NAMES, rng.randint(0, 3))]


class ReferenceCache:
    """Upstream's cache in miniature: image name -> (size, node names), and per node the counts
    frozen when the node was last re-snapshotted."""

    def __init__(self) -> None:
        self.states: dict[str, tuple[int, set[str]]] = {}
        self.images: dict[str, list[str]] = {}
        self.frozen: dict[str, dict[str, int]] = {}
        self.dirty: set[str] = set()

    def add_node(self, name: str, images: list[dict]) -> None:
        names: list[str] = []
        for img in images:
            for n in img["names"]:
                _, nodes = self.states.setdefault(n, (img["sizeBytes"], set()))
                nodes.add(name)
                if n not in names:
                    names.append(n)
        self.images[name] = names
        self.dirty.add(name)

    def remove_node(self, name: str) -> None:
        for n in self.images.pop(name):
            self.states[n][1].discard(name)
            if not self.states[n][1]:
                del self.states[n]
        self.frozen.pop(name, None)
        self.dirty.discard(name)

    def snapshot(self) -> None:
        for name in self.dirty:
            self.frozen[name] = {n: len(self.states[n][1]) for n in self.images[name]}
        self.dirty.clear()

    def score(self, node: str, pod: PodInfo, total: int) -> int:
        s = 0
        for img in pod.images:
            name = normalized_image_name(img)
            if name in self.frozen[node]:
                s += int(float(self.states[name][0]) * (self.frozen[node][name] / total))
        maximum = MAX_CONTAINER_THRESHOLD * len(pod.images)
        s = min(max(s, MIN_THRESHOLD), maximum)
        return 100 * (s - MIN_THRESHOLD) // (maximum - MIN_THRESHOLD)


@pytest.mark.parametrize("seed", range(5))
def test_scores_match_reference_cache_across_changes(seed):
    rng = random.Random(seed)
    table, ref, pl = NodeTable(), ReferenceCache(), ImageLocality()
    infos: dict[str, NodeInfo] = {}

    def add(name: str) -> None:
        images = random_images(rng)
        infos[name] = NodeInfo(make_node(name, images=images))
        table.set_node(infos[name])
        ref.add_node(name, images)

    for i in range(16):
        add(f"n{i}")
    next_id = 16
    for _ in range(12):
        action = rng.random()
        if action < 0.3 and table.n > 4:
            name = rng.choice(table.names[: table.n])
            table.remove_node(name)
            ref.remove_node(name)
        elif action < 0.6:
            add(f"n{next_id}")
            next_id += 1
        else:
            name = rng.choice(table.names[: table.n])
            pod = image_pod("a", name=f"filler{next_id}", node=name)
            next_id += 1
            infos[name].add_pod(pod)
            table.pod_added(infos[name], pod)
            ref.dirty.add(name)
        pod = image_pod(*rng.sample(["a", "b", "c:v1", "d", "e"], rng.randint(1, 3)))
        scores = pl.score_nodes(CycleState(), pod, table.all_rows())
        ref.snapshot()
        assert list(scores) == [ref.score(name, pod, table.n) for name in table.names[: table.n]]
