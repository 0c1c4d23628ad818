"""A live cluster's scheduling-relevant state as manifests that ``simulate``, ``capacity`` and
``compare`` read back unchanged: bound pods stay on their nodes, pending ones get scheduled, and
objects keep their uids (a simulation keeps the uids it is given), so PersistentVolume claimRefs,
ResourceClaims' reservedFor and owner references still point at the right objects.

What is written: every kind the scheduler or the simulated controllers read, plus the workload
controllers kubesched knows (Deployments, ReplicaSets, StatefulSets, DaemonSets,
ReplicationControllers; a Job's pods are written, the Job is not). Never Secrets (nor ConfigMaps, Events or Leases: nothing in scheduling reads them).
What the server sets per write (resourceVersion, managedFields) is dropped; status is kept, since
a bound claim, a Bound volume and a running pod are state the scheduler reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import yaml

from kubesched.api import apierrors
from kubesched.api.errors import KubeschedError
from kubesched.api.kinds import Kind, kind_named
from kubesched.apiserver.admission import SYSTEM_PRIORITY_CLASSES
from kubesched.apiserver.store import DEFAULT_NAMESPACES
from kubesched.client.interface import ClusterClient

#: Kinds written, in the order a simulation creates them (what others refer to first, pods last).
SNAPSHOT_KINDS = (
    "Namespace", "PriorityClass", "StorageClass", "CSIDriver", "PersistentVolume", "Node", "CSINode",
    "CSIStorageCapacity", "DeviceClass", "ResourceSlice", "PersistentVolumeClaim", "ResourceClaimTemplate",
    "ResourceClaim", "Service", "PodDisruptionBudget", "ReplicationController", "ReplicaSet", "StatefulSet",
    "Deployment", "DaemonSet", "Workload", "Pod",
)
#: Metadata the server sets on every write; a store reading the manifests sets its own.
_PER_WRITE = ("resourceVersion", "managedFields", "selfLink")
#: PriorityClasses every API server creates for itself.
SYSTEM_PRIORITY_CLASS_NAMES = frozenset(cast(dict, pc)["metadata"]["name"] for pc in SYSTEM_PRIORITY_CLASSES)


def created_by_the_server(obj: dict) -> bool:
    """The default namespaces and system PriorityClasses: every store starts with them, so
    manifests holding them again could not be read back."""
    name = (obj.get("metadata") or {}).get("name")
    return (obj.get("kind") == "Namespace" and name in DEFAULT_NAMESPACES) or \
        (obj.get("kind") == "PriorityClass" and name in SYSTEM_PRIORITY_CLASS_NAMES)


@dataclass
class Snapshot:
    """Objects by kind, in ``SNAPSHOT_KINDS`` order, and the kinds the server does not serve."""

    objects: dict[str, list[dict]] = field(default_factory=dict)
    unserved: list[str] = field(default_factory=list)

    def count(self) -> int:
        return sum(len(items) for items in self.objects.values())

    def write(self, directory: Path) -> list[Path]:
        """One ``kind: List`` file per kind with objects, numbered in creation order."""
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for index, (kind, items) in enumerate(self.objects.items()):
            if not items:
                continue
            path = directory / f"{index:02d}-{kind.lower()}s.yaml"
            path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False))
            written.append(path)
        return written


async def take(client: ClusterClient) -> Snapshot:
    """List every snapshot kind through ``client`` (kinds the server does not serve are noted, not fatal)."""
    out = Snapshot()
    for name in SNAPSHOT_KINDS:
        kind = cast(Kind, kind_named(name))
        try:
            items, _ = await client.list(kind)
        except apierrors.NotFound:
            out.unserved.append(name)
            continue
        except apierrors.APIError as e:
            raise KubeschedError(f"listing {kind.resource}: {e}") from e
        out.objects[name] = [cleaned(item, kind) for item in sorted(items, key=_order_key)
                             if not created_by_the_server(cleaned(item, kind))]
    return out


def cleaned(obj: dict, kind: Kind) -> dict:
    """``obj`` as a manifest: apiVersion and kind set, per-write metadata dropped, uid kept."""
    out = {"apiVersion": kind.api_version, "kind": kind.kind, **{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}}
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _PER_WRITE}
    return out


def _order_key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))
