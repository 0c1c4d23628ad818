"""unschedulablePods (upstream ``unschedulable_pods.go``): pods waiting for a cluster event.

It holds both pods rejected by plugins and pods gated by a PreEnqueue plugin; the two are counted
apart (pending_pods{queue="unschedulable"} and {queue="gated"}). Which count a pod is in follows
its gating state each time it is stored, so a pod gated or un-gated in place stays counted right.
"""

from __future__ import annotations

from collections.abc import Iterator

from kubesched.scheduler.backend.queue.recorder import QueueRecorder
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo


class UnschedulablePods:
    def __init__(self, recorder: QueueRecorder) -> None:
        self.pods: dict[str, QueuedPodInfo] = {}
        self._gated: set[str] = set()
        self._recorder = recorder

    def __len__(self) -> int:
        return len(self.pods)

    def __contains__(self, key: str) -> bool:
        return key in self.pods

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        return iter(self.pods.values())

    @property
    def gated_count(self) -> int:
        return len(self._gated)

    def get(self, key: str) -> QueuedPodInfo | None:
        return self.pods.get(key)

    def add_or_update(self, qpi: QueuedPodInfo, event: str) -> None:
        """Store ``qpi``; only a pod new to the pool counts as incoming (queue="unschedulable", as upstream)."""
        key = qpi.key
        if key not in self.pods:
            self._recorder.incoming("unschedulable", event)
        self.pods[key] = qpi
        if qpi.gating_plugin:
            self._gated.add(key)
        else:
            self._gated.discard(key)

    def delete(self, key: str) -> QueuedPodInfo | None:
        self._gated.discard(key)
        return self.pods.pop(key, None)
