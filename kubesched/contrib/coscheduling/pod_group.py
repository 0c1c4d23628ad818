"""The PodGroup custom resource (``scheduling.x-k8s.io/v1alpha1``) as the plugin reads it, and
how a pod names its group (scheduler-plugins ``apis/scheduling/v1alpha1`` and ``pkg/util``).

A pod joins the group named by its ``scheduling.x-k8s.io/pod-group`` label, in its own
namespace. The API server validates PodGroups against the CRD's schema; a PodGroup that reaches
the plugin with a field it cannot use anyway (written before its CRD, or by a server that does
not validate) is reported naming the object and the field, never guessed at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import parse_quantity
from kubesched.api.timeutil import parse_time

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
PLURAL = "podgroups"
#: The label a pod names its PodGroup with (upstream ``v1alpha1.PodGroupLabel``).
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"

# Phases of a PodGroup (upstream ``v1alpha1.PodGroupPhase``).
PENDING = "Pending"
SCHEDULING = "Scheduling"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"


class InvalidPodGroup(ValueError):
    """A PodGroup whose spec the plugin cannot use; the message names the object and the field."""


def pod_group_label(pod: Mapping[str, Any]) -> str:
    """The name of the PodGroup the pod belongs to ("" for none; upstream ``GetPodGroupLabel``)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(POD_GROUP_LABEL) or "")


def pod_group_full_name(pod: Mapping[str, Any]) -> str:
    """``namespace/group`` of the pod's PodGroup, "" for none (upstream ``GetPodGroupFullName``)."""
    name = pod_group_label(pod)
    if not name:
        return ""
    return f"{(pod.get('metadata') or {}).get('namespace') or 'default'}/{name}"


@dataclass(frozen=True)
class PodGroup:
    """What the scheduler uses of a PodGroup: its identity, ``spec`` and creation time."""

    namespace: str
    name: str
    min_member: int
    #: ``spec.minResources`` as exact amounts; None when the spec has none.
    min_resources: dict[str, Fraction] | None
    #: ``spec.scheduleTimeoutSeconds``; None when unset.
    schedule_timeout_seconds: int | None
    #: ``metadata.creationTimestamp`` as seconds since the epoch.
    created: float
    raw: Mapping[str, Any]

    @property
    def full_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> PodGroup:
        """The PodGroup ``obj``; InvalidPodGroup names the first field that cannot be used."""
        meta = obj.get("metadata") or {}
        where = f'PodGroup "{meta.get("namespace") or "default"}/{meta.get("name", "")}"'
        spec = obj.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise InvalidPodGroup(f"{where}: spec: must be an object")
        min_member = _int_field(where, "spec.minMember", spec.get("minMember", 0))
        if min_member < 0:
            raise InvalidPodGroup(f"{where}: spec.minMember: must be greater than or equal to 0, got {min_member}")
        timeout = spec.get("scheduleTimeoutSeconds")
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name", "")),
            min_member=min_member,
            min_resources=_resource_list(where, "spec.minResources", spec.get("minResources")),
            schedule_timeout_seconds=None if timeout is None else _int_field(where, "spec.scheduleTimeoutSeconds", timeout),
            created=parse_time(meta.get("creationTimestamp")),
            raw=obj,
        )


def _int_field(where: str, path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidPodGroup(f"{where}: {path}: must be an integer, got {value!r}")
    return value


def _resource_list(where: str, path: str, raw: Any) -> dict[str, Fraction] | None:
    """A ResourceList as exact amounts; None stays None (no minimum), an empty map is empty."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InvalidPodGroup(f"{where}: {path}: must be a map of resource names to quantities")
    out: dict[str, Fraction] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = parse_quantity(value)
        except ValueError as e:
            raise InvalidPodGroup(f"{where}: {path}[{name}]: {e}") from e
    return out


__all__ = [
    "FAILED",
    "FINISHED",
    "GROUP",
    "PENDING",
    "PLURAL",
    "POD_GROUP_LABEL",
    "RUNNING",
    "SCHEDULING",
    "VERSION",
    "InvalidPodGroup",
    "PodGroup",
    "pod_group_full_name",
    "pod_group_label",
]
