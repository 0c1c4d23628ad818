"""SchedulingGates: a pod with ``spec.schedulingGates`` never enters activeQ until they are all removed."""

from __future__ import annotations

from typing import Any

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import EnqueueExtensions, PreEnqueuePlugin
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._hints import is_same_pod


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = names.SchedulingGates

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        gates = pod.scheduling_gates
        if not gates:
            return None
        return Status(Code.UnschedulableAndUnresolvable, f"waiting for scheduling gates: [{' '.join(gates)}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        event = ClusterEvent(Resource.Pod, ActionType.UpdatePodSchedulingGatesEliminated)
        return [ClusterEventWithHint(event, self._gates_eliminated)]

    @staticmethod
    def _gates_eliminated(pod: dict, _old: Any, new: Any) -> QueueingHint:
        return QueueingHint.Queue if is_same_pod(pod, new) else QueueingHint.QueueSkip
