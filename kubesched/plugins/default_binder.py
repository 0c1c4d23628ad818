"""DefaultBinder: binds through the API's ``pods/binding`` subresource."""

from __future__ import annotations

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import BindPlugin
from kubesched.framework.status import Status
from kubesched.framework.types import PodInfo
from kubesched.plugins import names


class DefaultBinder(BindPlugin):
    name = names.DefaultBinder

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        try:
            await self.handle.client.bind(pod.pod, node_name)  # type: ignore[union-attr]
        except Exception as e:
            return Status.from_error(e)
        return None
