"""The Kubernetes kinds kubesched knows: their group, version, plural resource name and scope.

One table serves the manifest loader, the object store, the informers and the API server's
discovery documents, so a kind is added in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    resource: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    #: The verbs served when not the full set (review kinds are create-only and never stored).
    verbs: tuple[str, ...] = ()
    #: The feature gate an alpha kind is served behind (off by default); "" for every other kind.
    feature_gate: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names_hash", hash((self.kind, self.group, self.version)))

    def __eq__(self, other: object) -> bool:
        """A dataclass's comparison (every field, same class), after an identity check: kinds are
        the table's constants, compared and hashed at every store write and informer event."""
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Kind)
        return (self.kind == other.kind and self.group == other.group
                and all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self)))

    def __hash__(self) -> int:
        """Of the names alone (equal kinds have equal names), computed once: kinds are hashed at
        every store write and informer event."""
        return self._names_hash  # type: ignore[attr-defined, no-any-return]  # set by __post_init__


@dataclass(frozen=True, eq=False)
class CustomKind(Kind):
    """A kind served from a CustomResourceDefinition, as one of its served versions.

    Every version of one custom resource is one kind to the store: equality and hashing use the
    group and the plural alone, so the objects of all served versions share one bucket and one
    watch history (stored at the CRD's storage version; a version differs from another only by
    its ``apiVersion``, as with the CRD conversion strategy ``None``). A CustomKind built from
    ``(group, version, plural)`` alone (:func:`custom_resource_kind`) therefore names the same
    objects as the server's, which adds the version's schema and printer columns."""

    #: The version's ``openAPIV3Schema`` (None for a kind built without its CRD).
    schema: Mapping[str, Any] | None = None
    #: The version's ``additionalPrinterColumns``.
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    #: The CRD's storage version (the ``apiVersion`` objects are stored with).
    storage_version: str = ""
    #: ``spec.names.singular`` (the kind in lower case when the CRD does not say).
    singular_name: str = ""
    #: The version's ``selectableFields`` as field selector labels (``spec.color``).
    selectable_fields: tuple[str, ...] = ()

    @property
    def singular(self) -> str:
        return self.singular_name or self.kind.lower()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CustomKind) and self.group == other.group and self.resource == other.resource

    def __hash__(self) -> int:
        return hash(("CustomKind", self.group, self.resource))


def custom_resource_kind(group: str, version: str, plural: str) -> CustomKind:
    """The kind of custom resource ``plural`` in ``group/version``, for clients that know no more
    (its ``kind`` is upstream's resource argument, ``<plural>.<version>.<group>``: what the
    scheduler's informers and cluster events call it)."""
    return CustomKind(f"{plural}.{version}.{group}", group, version, plural, True, storage_version=version)


KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "", "v1", "namespaces", False, ("ns",), (), ("status", "finalize")),
    Kind("Node", "", "v1", "nodes", False, ("no",), (), ("status",)),
    Kind("Pod", "", "v1", "pods", True, ("po",), ("all",),
         ("status", "binding", "eviction", "log", "exec", "attach", "portforward", "proxy")),
    Kind("Event", "", "v1", "events", True, ("ev",)),
    Kind("Service", "", "v1", "services", True, ("svc",), ("all",), ("status",)),
    Kind("PersistentVolume", "", "v1", "persistentvolumes", False, ("pv",), (), ("status",)),
    Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, ("pvc",), (), ("status",)),
    Kind("ReplicationController", "", "v1", "replicationcontrollers", True, ("rc",), ("all",), ("status", "scale")),
    Kind("ConfigMap", "", "v1", "configmaps", True, ("cm",)),
    Kind("Secret", "", "v1", "secrets", True),
    Kind("ServiceAccount", "", "v1", "serviceaccounts", True, ("sa",)),
    Kind("ReplicaSet", "apps", "v1", "replicasets", True, ("rs",), ("all",), ("status", "scale")),
    Kind("StatefulSet", "apps", "v1", "statefulsets", True, ("sts",), ("all",), ("status", "scale")),
    Kind("Deployment", "apps", "v1", "deployments", True, ("deploy",), ("all",), ("status", "scale")),
    Kind("DaemonSet", "apps", "v1", "daemonsets", True, ("ds",), ("all",), ("status",)),
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True, ("pdb",), (), ("status",)),
    Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False, ("pc",)),
    Kind("Workload", "scheduling.k8s.io", "v1alpha1", "workloads", True, feature_gate="GenericWorkload"),
    Kind("StorageClass", "storage.k8s.io", "v1", "storageclasses", False, ("sc",)),
    Kind("CSINode", "storage.k8s.io", "v1", "csinodes", False),
    Kind("CSIDriver", "storage.k8s.io", "v1", "csidrivers", False),
    Kind("VolumeAttachment", "storage.k8s.io", "v1", "volumeattachments", False, (), (), ("status",)),
    Kind("CSIStorageCapacity", "storage.k8s.io", "v1", "csistoragecapacities", True),
    Kind("VolumeAttributesClass", "storage.k8s.io", "v1", "volumeattributesclasses", False, ("vac",)),
    Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True, (), (), ("status",)),
    Kind("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True),
    Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False),
    Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False),
    Kind("Lease", "coordination.k8s.io", "v1", "leases", True),
    Kind("Event", "events.k8s.io", "v1", "events", True, ("ev",)),
    Kind("CustomResourceDefinition", "apiextensions.k8s.io", "v1", "customresourcedefinitions", False, ("crd", "crds"),
         ("api-extensions",), ("status",)),
    Kind("ClusterRole", "rbac.authorization.k8s.io", "v1", "clusterroles", False),
    Kind("ClusterRoleBinding", "rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
    Kind("Role", "rbac.authorization.k8s.io", "v1", "roles", True),
    Kind("RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", True),
    Kind("TokenReview", "authentication.k8s.io", "v1", "tokenreviews", False, verbs=("create",)),
    Kind("SelfSubjectReview", "authentication.k8s.io", "v1", "selfsubjectreviews", False, verbs=("create",)),
    Kind("SubjectAccessReview", "authorization.k8s.io", "v1", "subjectaccessreviews", False, verbs=("create",)),
    Kind("SelfSubjectAccessReview", "authorization.k8s.io", "v1", "selfsubjectaccessreviews", False, verbs=("create",)),
    Kind("LocalSubjectAccessReview", "authorization.k8s.io", "v1", "localsubjectaccessreviews", True, verbs=("create",)),
    Kind("SelfSubjectRulesReview", "authorization.k8s.io", "v1", "selfsubjectrulesreviews", False, verbs=("create",)),
)

_BY_GVK: dict[tuple[str, str], Kind] = {}
_BY_KIND: dict[str, Kind] = {}
_BY_RESOURCE: dict[tuple[str, str], Kind] = {}
for _k in KINDS:
    _BY_GVK.setdefault((_k.api_version, _k.kind), _k)
    _BY_RESOURCE.setdefault((_k.group, _k.resource), _k)
    if _k.kind not in _BY_KIND or _k.group == "":
        _BY_KIND.setdefault(_k.kind, _k)


def kind_for(api_version: str, kind: str) -> Kind | None:
    """The Kind of an object's ``apiVersion``/``kind``, or None when kubesched does not serve it."""
    return _BY_GVK.get((api_version, kind))


def kind_named(kind: str) -> Kind | None:
    """The Kind by its name alone (the core group wins for ``Event``)."""
    return _BY_KIND.get(kind)


def known_kind(kind: str) -> Kind:
    """The Kind by its name, for code that names a kind kubesched always serves (``"Pod"``,
    ``"PersistentVolumeClaim"``): unlike :func:`kind_named`, it never answers None, so a caller's
    type is ``Kind``; a name missing from :data:`KINDS` is a programming error and raises."""
    found = _BY_KIND.get(kind)
    if found is None:
        raise LookupError(f"kind {kind!r} is not in kubesched's table of kinds")
    return found


def kind_for_resource(group: str, resource: str) -> Kind | None:
    """The Kind that serves ``resource`` in API group ``group``, or None when kubesched does not."""
    return _BY_RESOURCE.get((group, resource))


def served(kind: Kind, gates: Mapping[str, bool] | None) -> bool:
    """Whether an API server with ``gates`` serves ``kind``: an alpha kind only when its gate is on,
    as kube-apiserver enables alpha APIs."""
    return not kind.feature_gate or bool(gates and gates.get(kind.feature_gate))


def unserved_kinds(gates: Mapping[str, bool] | None) -> frozenset[str]:
    """``group/version`` ``Kind`` of every kind ``gates`` leave unserved (discovery omits them)."""
    return frozenset(f"{k.api_version} {k.kind}" for k in KINDS if not served(k, gates))


def object_key(obj: dict[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


#: The kinds the store, the clients and the controllers name most often.
POD = known_kind("Pod")
NODE = known_kind("Node")
NAMESPACE = known_kind("Namespace")
PRIORITY_CLASS = known_kind("PriorityClass")
EVENT = known_kind("Event")
CRD = known_kind("CustomResourceDefinition")
