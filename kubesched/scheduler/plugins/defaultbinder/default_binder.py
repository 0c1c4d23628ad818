"""DefaultBinder: binds through the API's ``pods/binding`` subresource."""

from __future__ import annotations

from kubesched.api.types import PodInfo
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import BindPlugin
from kubesched.scheduler.framework.status import Status
from kubesched.scheduler.plugins import names


class DefaultBinder(BindPlugin):
    name = names.DefaultBinder

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        try:
            await self.framework.client.bind(pod.pod, node_name)
        except Exception as e:
            return Status.from_error(e)
        return None
