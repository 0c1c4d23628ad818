"""ImageLocality: nodes that already have the pod's images score higher, in proportion to the
images' sizes and how widely they have spread (upstream ``imagelocality``).

A table extension indexes ``status.images`` as upstream's cache does: per image name, the size
reported by the first node that brought the name in and the set of nodes having it. Like the
scheduler snapshot, each node carries the node count of its images *as of the last time the node
changed* (a node, or a pod on it, added, updated or removed): upstream's ``ImageStateSummary.
NumNodes`` is only recomputed when a node's NodeInfo is cloned into the snapshot, so unchanged
nodes keep stale counts, and so do we.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import MAX_NODE_SCORE, BatchScorePlugin, SignFragment, SignPlugin
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._resource_allocation import go_div, pod_memo

MB = 1024 * 1024
#: Bounds of the summed image score; sizes of 90% of the images on Docker Hub fall in this range.
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
EXTENSION_KEY = names.ImageLocality


def normalized_image_name(name: str) -> str:
    """``normalizedImageName``: an image without a tag gets ``:latest``."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def pod_image_names(pod: PodInfo) -> list[str]:
    """Normalised images of init containers then containers (one entry per container)."""
    return pod_memo(pod, "_il_images", lambda: [normalized_image_name(i) for i in pod.images])


def node_image_sizes(node: Mapping | None) -> dict[str, int]:
    """Each name in ``status.images`` with its image's size, first occurrence winning."""
    out: dict[str, int] = {}
    for image in ((node or {}).get("status") or {}).get("images") or []:
        for name in image.get("names") or []:
            out.setdefault(name, int(image.get("sizeBytes") or 0))
    return out


def calculate_priority(sum_scores: np.ndarray, num_containers: int) -> np.ndarray:
    """``calculatePriority``: the summed image scores clamped to [23MB, 1000MB x containers], scaled to 0-100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.where(sum_scores < MIN_THRESHOLD, MIN_THRESHOLD, np.where(sum_scores > max_threshold, max_threshold, sum_scores))
    return go_div(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


class ImageIndex:
    """Image names -> (size, number of nodes), and per row the node counts frozen at the row's
    last change; dense per-row count arrays are kept for the image names pods have asked about."""

    def __init__(self, table: NodeTable) -> None:
        self.capacity = table.capacity
        self.states: dict[str, list[int]] = {}  # name -> [size, number of nodes]
        self.row_images: dict[int, dict[str, int]] = {}  # row -> name -> frozen number of nodes
        self.rows_with: dict[str, set[int]] = {}
        self.dense: dict[str, np.ndarray] = {}
        self.dirty: set[int] = set()

    # --- Extension protocol --------------------------------------------------------------------
    def grow(self, capacity: int) -> None:
        for name, arr in self.dense.items():
            wider = np.zeros(capacity, dtype=np.int32)
            wider[: len(arr)] = arr
            self.dense[name] = wider
        self.capacity = capacity

    def node_set(self, row: int, info: NodeInfo) -> None:
        images: dict[str, int] = {}
        for name, size in node_image_sizes(info.node).items():
            state = self.states.get(name)
            if state is None:
                state = self.states[name] = [size, 0]
            state[1] += 1
            images[name] = 0
            self.rows_with.setdefault(name, set()).add(row)
        self.row_images[row] = images
        self.dirty.add(row)

    def node_removed(self, row: int, info: NodeInfo) -> None:
        for name in self.row_images.pop(row, {}):
            state = self.states[name]
            state[1] -= 1
            rows = self.rows_with[name]
            rows.discard(row)
            if state[1] <= 0:
                del self.states[name]
            if not rows:
                del self.rows_with[name]
                self.dense.pop(name, None)
            elif name in self.dense:
                self.dense[name][row] = 0
        self.dirty.discard(row)

    def pod_added(self, row: int, pod: PodInfo) -> None:
        self.dirty.add(row)

    def pod_removed(self, row: int, pod: PodInfo) -> None:
        self.dirty.add(row)

    def move_row(self, src: int, dst: int) -> None:
        images = self.row_images.pop(src, None)
        if images is not None:
            self.row_images[dst] = images
            for name in images:
                rows = self.rows_with[name]
                rows.discard(src)
                rows.add(dst)
                arr = self.dense.get(name)
                if arr is not None:
                    arr[dst], arr[src] = arr[src], 0
        if src in self.dirty:
            self.dirty.discard(src)
            self.dirty.add(dst)

    # --- snapshot ------------------------------------------------------------------------------
    def snapshot_taken(self) -> None:
        """Refresh the frozen counts of the rows changed since the last snapshot (what cloning
        their NodeInfos into upstream's snapshot does)."""
        for row in self.dirty:
            images = self.row_images.get(row)
            if not images:
                continue
            for name in images:
                count = self.states[name][1]
                images[name] = count
                arr = self.dense.get(name)
                if arr is not None:
                    arr[row] = count
        self.dirty.clear()

    def counts(self, name: str) -> np.ndarray | None:
        """Per row, the frozen number of nodes having ``name`` (0 where the row lacks it)."""
        arr = self.dense.get(name)
        if arr is None:
            rows = self.rows_with.get(name)
            if not rows:
                return None
            arr = self.dense[name] = np.zeros(self.capacity, dtype=np.int32)
            for row in rows:
                arr[row] = self.row_images[row][name]
        return arr

    def size(self, name: str) -> int:
        state = self.states.get(name)
        return 0 if state is None else state[0]


class ImageLocality(SignPlugin, BatchScorePlugin):
    name = names.ImageLocality
    reads_node_pods = False

    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        return [signers.images(pod)]

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        index: ImageIndex = nodes.table.extension(EXTENSION_KEY, ImageIndex)
        index.snapshot_taken()
        images = pod_image_names(pod)
        known = [(name, counts) for name in images if (counts := index.counts(name)) is not None]
        if not known:
            return np.zeros(len(nodes), dtype=np.int64)  # no node has any of them: every sum clamps to 0
        total_nodes = float(nodes.table.n)
        sums = np.zeros(len(nodes), dtype=np.int64)
        for name, counts in known:
            spread = nodes.col(counts).astype(np.float64) / total_nodes
            sums += (float(index.size(name)) * spread).astype(np.int64)
        return calculate_priority(sums, len(images))
