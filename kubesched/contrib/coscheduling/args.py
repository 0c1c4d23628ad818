"""CoschedulingArgs (scheduler-plugins ``apis/config/v1``): the kind a configuration's
``pluginConfig`` entry for Coscheduling carries, with upstream's defaults and validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kubesched.api.errors import FieldError, invalid
from kubesched.api.golang import child
from kubesched.scheduler.config.args import Field, Int, PluginArgs
from kubesched.scheduler.features import FeatureGates


@dataclass
class CoschedulingArgs(PluginArgs):
    """``permitWaitingTimeSeconds``: how long a group's pods wait at Permit for the rest of the
    group when the PodGroup sets no ``scheduleTimeoutSeconds`` (default 60).
    ``podGroupBackoffSeconds``: how long a group is refused at PreFilter after one of its pods
    failed while the whole group existed (default 0: no backoff)."""

    KIND: ClassVar[str] = "CoschedulingArgs"
    PLUGIN: ClassVar[str] = "Coscheduling"
    GO: ClassVar[str] = "v1.CoschedulingArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("permitWaitingTimeSeconds", Int(64), "permit_waiting_time_seconds", emit="always"),
        Field("podGroupBackoffSeconds", Int(64), "pod_group_backoff_seconds", emit="always"),
    )
    permit_waiting_time_seconds: int = 60
    pod_group_backoff_seconds: int = 0

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        """Upstream ``ValidateCoschedulingArgs``: neither duration may be negative."""
        errs = []
        if self.permit_waiting_time_seconds < 0:
            errs.append(invalid(child(path, "permitWaitingTimeSeconds"), self.permit_waiting_time_seconds, "must be greater than 0"))
        if self.pod_group_backoff_seconds < 0:
            errs.append(invalid(child(path, "podGroupBackoffSeconds"), self.pod_group_backoff_seconds, "must be greater than 0"))
        return errs


__all__ = ["CoschedulingArgs"]
