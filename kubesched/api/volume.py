"""Storage object helpers shared by the volume plugins and the embedded PV controller
(upstream ``component-helpers/storage/volume``, ``component-helpers/storage/ephemeral``,
``cloud-provider/volume/helpers`` and the parts of ``csi-translation-lib`` the scheduler uses).

Everything here works on plain API dicts (as informers and the object store hold them) and is
per object, never per node: the plugins evaluate node-dependent parts with numpy elsewhere.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.api.errors import InvalidQuantity
from kubesched.api.quantity import parse_quantity
from kubesched.api.selectors import NodeSelector, Requirement, parse_label_selector, parse_node_selector
from kubesched.api.types import PodInfo

log = logging.getLogger(__name__)

# --- annotations and well-known names ---------------------------------------------------------
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
BETA_STORAGE_CLASS_ANN = "volume.beta.kubernetes.io/storage-class"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
VOLUME_AVAILABLE = "Available"
CLAIM_LOST = "Lost"

LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_HOSTNAME = "kubernetes.io/hostname"
MULTI_ZONE_DELIMITER = "__"


def not_found(resource: str, name: str) -> str:
    """The message of a lister's NotFound error (``persistentvolumeclaim "x" not found``)."""
    return f'{resource} "{name}" not found'


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return meta(obj).get("annotations") or {}


def name_of(obj: Mapping[str, Any]) -> str:
    name: str = meta(obj).get("name", "")
    return name


def resource_version(obj: Mapping[str, Any]) -> int:
    """An object's resourceVersion as a number (etcd revisions compare numerically; 0 if unset or not one)."""
    try:
        return int(meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


# --- pod volumes ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A pod volume backed by a PVC: a ``persistentVolumeClaim`` or a generic ephemeral volume."""

    claim: str
    ephemeral: bool
    volume: Mapping[str, Any]


def pod_volumes(pod: PodInfo) -> list[Mapping[str, Any]]:
    return pod.spec.get("volumes") or []


def ephemeral_claim_name(pod_name: str, volume: Mapping[str, Any]) -> str:
    """``ephemeral.VolumeClaimName``: ``<pod>-<volume>``."""
    return f"{pod_name}-{volume.get('name', '')}"


def volume_claim(pod_name: str, volume: Mapping[str, Any]) -> ClaimRef | None:
    """The claim behind one pod volume (None for volumes without one)."""
    pvc = volume.get("persistentVolumeClaim")
    if pvc is not None:
        return ClaimRef(pvc.get("claimName", "") or "", False, volume)
    if volume.get("ephemeral") is not None:
        return ClaimRef(ephemeral_claim_name(pod_name, volume), True, volume)
    return None


def raw_pod_claims(pod: Mapping[str, Any]) -> tuple[ClaimRef, ...]:
    """The PVC-backed volumes of a raw pod dict (queueing hints get raw objects), in spec order."""
    name = meta(pod).get("name", "")
    return tuple(ref for ref in (volume_claim(name, vol) for vol in spec(pod).get("volumes") or []) if ref is not None)


def volume_is_for_pod(pod_namespace: str, pod_name: str, pod_uid: str, pvc: Mapping[str, Any]) -> str | None:
    """``ephemeral.VolumeIsForPod``: the PVC of a generic ephemeral volume must be controlled by the pod."""
    for ref in meta(pvc).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("uid") == pod_uid:
            return None
    return f"PVC {meta(pvc).get('namespace', '')}/{name_of(pvc)} was not created for pod {pod_namespace}/{pod_name} (pod is not owner)"


# --- claims, volumes, classes ---------------------------------------------------------------------
def claim_class(pvc: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation wins over ``spec.storageClassName``."""
    ann = annotations_of(pvc)
    name: str = ann[BETA_STORAGE_CLASS_ANN] if BETA_STORAGE_CLASS_ANN in ann else spec(pvc).get("storageClassName") or ""
    return name


def volume_class(pv: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClass``."""
    ann = annotations_of(pv)
    name: str = ann[BETA_STORAGE_CLASS_ANN] if BETA_STORAGE_CLASS_ANN in ann else spec(pv).get("storageClassName") or ""
    return name


def binding_mode(sc: Mapping[str, Any]) -> str | None:
    """The class's ``volumeBindingMode``, None when unset (upstream's nil pointer, which its plugins
    report as an error). The API server defaults it to ``Immediate`` on create, so only objects
    that skipped admission (``PluginHarness(admission=False)``, as upstream's listers) lack it."""
    mode: str | None = sc.get("volumeBindingMode")
    return mode


def quantity(raw: Any) -> Fraction:
    if raw is None:
        return Fraction(0)
    try:
        return parse_quantity(raw)
    except InvalidQuantity:
        return Fraction(0)


def quantity_value(raw: Any) -> int:
    """``Quantity.Value()``: rounded up to an integer."""
    q = quantity(raw)
    return -((-q.numerator) // q.denominator)


def requested_storage(pvc: Mapping[str, Any]) -> Any:
    """The claim's raw ``resources.requests.storage`` (None when absent)."""
    return ((spec(pvc).get("resources") or {}).get("requests") or {}).get("storage")


def pv_capacity(pv: Mapping[str, Any]) -> Any:
    return (spec(pv).get("capacity") or {}).get("storage")


def is_pvc_fully_bound(pvc: Mapping[str, Any]) -> bool:
    return bool(spec(pvc).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(pvc)


def is_volume_bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """``IsVolumeBoundToClaim``: name and namespace match, and the UID too when the ref carries one."""
    ref = spec(pv).get("claimRef")
    if not ref:
        return False
    if name_of(pvc) != ref.get("name") or meta(pvc).get("namespace", "") != ref.get("namespace", ""):
        return False
    uid = ref.get("uid") or ""
    return not uid or uid == meta(pvc).get("uid", "")


def claim_reference(pvc: Mapping[str, Any]) -> dict[str, Any]:
    """``reference.GetReference`` of a claim, as the PV's ``claimRef``."""
    m = meta(pvc)
    ref = {"kind": "PersistentVolumeClaim", "namespace": m.get("namespace", ""), "name": m.get("name", ""),
           "uid": m.get("uid", ""), "apiVersion": "v1"}
    if m.get("resourceVersion"):
        ref["resourceVersion"] = m["resourceVersion"]
    return ref


def bind_volume_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """``GetBindVolumeToClaim``: a copy of the PV bound to the claim, and whether anything changed."""
    should_set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    clone = _deep_copy(pv)
    dirty = False
    ref = spec(pv).get("claimRef") or None
    m = meta(pvc)
    if (ref is None or ref.get("name") != m.get("name") or ref.get("namespace", "") != m.get("namespace", "")
            or (ref.get("uid") or "") != (m.get("uid") or "")):
        clone.setdefault("spec", {})["claimRef"] = claim_reference(pvc)
        dirty = True
    ann = clone.setdefault("metadata", {}).setdefault("annotations", {})
    if should_set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in ann:
        ann[ANN_BOUND_BY_CONTROLLER] = "yes"
        dirty = True
    if not ann:
        clone["metadata"].pop("annotations")
    return clone, dirty


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def volume_mode_mismatch(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """``CheckVolumeModeMismatches``: an unset mode means Filesystem on both sides."""
    return (spec(pvc).get("volumeMode") or "Filesystem") != (spec(pv).get("volumeMode") or "Filesystem")


def access_modes_satisfied(pvc: Mapping[str, Any], pv: Mapping[str, Any]) -> bool:
    """``CheckAccessModes``: the PV offers every mode the claim asks for."""
    offered = set(spec(pv).get("accessModes") or [])
    return all(mode in offered for mode in spec(pvc).get("accessModes") or [])


def has_access_mode(pvc: Mapping[str, Any], mode: str) -> bool:
    return mode in (spec(pvc).get("accessModes") or [])


# --- node affinity of volumes -----------------------------------------------------------------------
class PVFacts:
    """What matching reads from a PV, extracted once per PV object: informers replace an object on
    every change, so the object's identity stands for its version."""

    __slots__ = ("capacity", "claim_ref", "cls", "deleting", "labels", "modes", "name", "phase", "selector", "simple",
                 "vac", "volume_mode")

    def __init__(self, pv: Mapping[str, Any]) -> None:
        m, s = meta(pv), spec(pv)
        self.name: str = m.get("name", "")
        self.cls = volume_class(pv)
        self.capacity = quantity(pv_capacity(pv))
        self.claim_ref: Mapping[str, Any] | None = s.get("claimRef") or None
        self.phase = (pv.get("status") or {}).get("phase")
        self.modes = frozenset(s.get("accessModes") or ())
        self.volume_mode = s.get("volumeMode") or "Filesystem"
        self.vac = s.get("volumeAttributesClassName") or ""
        self.deleting = bool(m.get("deletionTimestamp"))
        self.labels: Mapping[str, Any] = m.get("labels") or {}
        self.selector = node_selector_of(pv)
        self.simple = _single_in(self.selector)


def _single_in(selector: NodeSelector | None) -> tuple[str, frozenset[str]] | None:
    """(key, values) when the affinity is a single ``key In values`` requirement (local PVs)."""
    if selector is None or len(selector.terms) != 1:
        return None
    term = selector.terms[0]
    if term.errors or term.fields or len(term.labels) != 1 or term.labels[0].op != "In":
        return None
    return term.labels[0].key, term.labels[0].values


_facts_cache: dict[int, tuple[Mapping[str, Any], PVFacts]] = {}


def pv_facts(pv: Mapping[str, Any]) -> PVFacts:
    cached = _facts_cache.get(id(pv))
    if cached is not None and cached[0] is pv:
        return cached[1]
    facts = PVFacts(pv)
    if len(_facts_cache) > 200_000:
        _facts_cache.clear()
    _facts_cache[id(pv)] = (pv, facts)
    return facts


def pv_node_selector(pv: Mapping[str, Any]) -> NodeSelector | None:
    """The PV's required node affinity (None: no constraint), parsed once per PV object."""
    return pv_facts(pv).selector


def node_selector_of(pv: Mapping[str, Any]) -> NodeSelector | None:
    affinity = spec(pv).get("nodeAffinity") or {}
    required = affinity.get("required")
    if required is None:
        return None
    return parse_node_selector(required)


def node_selector_matches(selector: NodeSelector | None, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: upstream matches against a node that carries only labels, so field
    requirements on ``metadata.name`` see an empty name."""
    if selector is None:
        return True
    for term in selector.terms:
        if term.errors:
            continue
        if all(req.matches(labels) for req in term.labels) and all(_empty_name_matches(req) for req in term.fields):
            return True
    return False


def _empty_name_matches(req: Requirement) -> bool:
    return ("" in req.values) == (req.op == "In")


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: ``a__b`` is {a, b}; an empty element makes the label unusable (None)."""
    zones = set()
    for zone in value.split(MULTI_ZONE_DELIMITER):
        zone = zone.strip()
        if not zone:
            return None
        zones.add(zone)
    return frozenset(zones)


# --- matching PVs to claims -----------------------------------------------------------------------
class ClaimMatcher:
    """What ``FindMatchingVolume`` asks of a PV for one claim without looking at a node, on the PV's
    ``PVFacts``. Raises ValueError for a claim with an attributes class while the gate is off."""

    __slots__ = ("claim", "cls", "mode", "modes", "requested", "selector", "vac", "vac_enabled")

    def __init__(self, claim: Mapping[str, Any], vac_enabled: bool) -> None:
        s = spec(claim)
        self.claim = claim
        self.vac_enabled = vac_enabled
        self.vac = s.get("volumeAttributesClassName") or ""
        if not vac_enabled and self.vac:
            raise ValueError(f"unsupported volumeAttributesClassName is set on claim {meta(claim).get('namespace', '')}/"
                             f"{name_of(claim)} when the feature-gate VolumeAttributesClass is disabled")
        self.requested = quantity(requested_storage(claim))
        self.cls = claim_class(claim)
        raw = s.get("selector")
        self.selector = None if raw is None else parse_label_selector(raw)
        self.mode = s.get("volumeMode") or "Filesystem"
        self.modes = frozenset(s.get("accessModes") or ())

    def usable(self, pv: Mapping[str, Any], f: PVFacts) -> bool:
        """Not bound to another claim, large enough, of the claim's volume mode and attributes class,
        not being deleted. A usable PV with a ``claimRef`` is pre-bound to the claim."""
        if f.claim_ref is not None and not is_volume_bound_to_claim(pv, self.claim):
            return False
        if f.capacity < self.requested or f.volume_mode != self.mode or f.deleting:
            return False
        return f.vac == self.vac if self.vac_enabled else not f.vac

    def available(self, f: PVFacts) -> bool:
        """Phase Available, labels matching the claim's selector, and the claim's class."""
        if f.phase != VOLUME_AVAILABLE or f.cls != self.cls:
            return False
        return self.selector is None or self.selector.matches(f.labels)


def find_matching_volume(claim: Mapping[str, Any], volumes: Iterable[Mapping[str, Any]], node_labels: Mapping[str, str] | None,
                         excluded: set[str] | frozenset[str], delay_binding: bool, vac_enabled: bool) -> Mapping[str, Any] | None:
    """``FindMatchingVolume`` for one node (or for the PV controller, ``node_labels`` None): the
    pre-bound PV if any, else the smallest available one (the first among equals)."""
    matcher = ClaimMatcher(claim, vac_enabled)
    smallest: Mapping[str, Any] | None = None
    smallest_qty = Fraction(0)
    for pv in volumes:
        f = pv_facts(pv)
        if f.name in excluded or not matcher.usable(pv, f):
            continue
        affinity_ok = node_labels is None or node_selector_matches(f.selector, node_labels)
        if f.claim_ref is not None:
            return pv if affinity_ok else None
        if node_labels is None and delay_binding:
            continue
        if not matcher.available(f) or not affinity_ok:
            continue
        if node_labels is not None and not matcher.modes <= f.modes:
            continue
        if smallest is None or smallest_qty > f.capacity:
            smallest, smallest_qty = pv, f.capacity
    return smallest


# --- CSIStorageCapacity ----------------------------------------------------------------------------
def volume_limit(capacity: Mapping[str, Any]) -> Any:
    """``volumeLimit``: maximumVolumeSize when set (more precise), else capacity."""
    if capacity.get("maximumVolumeSize") is not None:
        return capacity["maximumVolumeSize"]
    return capacity.get("capacity")


# --- CSI migration ----------------------------------------------------------------------------------
AWS_EBS = "kubernetes.io/aws-ebs"
GCE_PD = "kubernetes.io/gce-pd"
AZURE_DISK = "kubernetes.io/azure-disk"
AZURE_FILE = "kubernetes.io/azure-file"
CINDER = "kubernetes.io/cinder"
VSPHERE = "kubernetes.io/vsphere-volume"
PORTWORX = "kubernetes.io/portworx-volume"


@dataclass(frozen=True)
class InTreePlugin:
    """One in-tree volume plugin csi-translation-lib can translate."""

    name: str
    driver: str
    source: str  # the volume / PV source field
    topology_key: str = ""


IN_TREE_PLUGINS: tuple[InTreePlugin, ...] = (
    InTreePlugin(GCE_PD, "pd.csi.storage.gke.io", "gcePersistentDisk", "topology.gke.io/zone"),
    InTreePlugin(AWS_EBS, "ebs.csi.aws.com", "awsElasticBlockStore", "topology.ebs.csi.aws.com/zone"),
    InTreePlugin(CINDER, "cinder.csi.openstack.org", "cinder", "topology.cinder.csi.openstack.org/zone"),
    InTreePlugin(AZURE_DISK, "disk.csi.azure.com", "azureDisk", "topology.disk.csi.azure.com/zone"),
    InTreePlugin(AZURE_FILE, "file.csi.azure.com", "azureFile"),
    InTreePlugin(VSPHERE, "csi.vsphere.vmware.com", "vsphereVolume"),
    InTreePlugin(PORTWORX, "pxd.portworx.com", "portworxVolume"),
)
PLUGIN_BY_NAME = {p.name: p for p in IN_TREE_PLUGINS}
_PLUGIN_BY_SOURCE = {p.source: p for p in IN_TREE_PLUGINS}
_AWS_VOLUME_ID = re.compile(r"^vol-[^/]*$")


def inline_plugin(volume: Mapping[str, Any]) -> InTreePlugin | None:
    """``IsInlineMigratable`` (with the plugin it names)."""
    for key, plugin in _PLUGIN_BY_SOURCE.items():
        if volume.get(key) is not None:
            return plugin
    return None


def pv_plugin(pv: Mapping[str, Any]) -> InTreePlugin | None:
    """``IsPVMigratable`` (with the plugin it names)."""
    s = spec(pv)
    for key, plugin in _PLUGIN_BY_SOURCE.items():
        if s.get(key) is not None:
            return plugin
    return None


#: ``isCSIMigrationOnForPlugin``: the in-tree plugins whose migration the scheduler honours
#: (CSIMigrationPortworx is GA and locked on in 1.35).
_MIGRATION_ON = frozenset({AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX})


def csi_migration_on(plugin: str) -> bool:
    """Whether the scheduler treats the in-tree plugin's volumes as migrated to CSI."""
    return plugin in _MIGRATION_ON


def migratable_provisioner(provisioner: str) -> InTreePlugin | None:
    """``IsMigratableIntreePluginByName``."""
    return PLUGIN_BY_NAME.get(provisioner)


def migrated_plugins(csinode: Mapping[str, Any] | None) -> frozenset[str]:
    """In-tree plugins the node's CSINode says are migrated to CSI (its migrated-plugins annotation)."""
    if csinode is None:
        return frozenset()
    value = annotations_of(csinode).get(ANN_MIGRATED_PLUGINS, "")
    return frozenset(value.split(",")) if value else frozenset()


def csinode_limits(csinode: Mapping[str, Any]) -> dict[str, int]:
    """Attach limit per driver (``spec.drivers[].allocatable.count``); a driver without a count, or
    with one that is not an integer, has no limit."""
    out: dict[str, int] = {}
    for driver in spec(csinode).get("drivers") or []:
        count = (driver.get("allocatable") or {}).get("count")
        if count is None:
            continue
        try:
            out[driver.get("name", "")] = int(count)
        except (TypeError, ValueError):
            log.warning("CSINode %s: ignoring driver %s's malformed allocatable count %r",
                        name_of(csinode), driver.get("name", ""), count)
    return out


def _ebs_volume_id(kubernetes_id: str) -> str | None:
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    path = kubernetes_id[len("aws://"):]
    _, _, rest = path.partition("/")
    aws_id = rest.strip("/")
    return aws_id if _AWS_VOLUME_ID.match(aws_id) else None


def _gce_handle(source: Mapping[str, Any], zones: list[str]) -> str:
    pd = source.get("pdName", "")
    if len(zones) == 1 and zones[0]:
        return f"projects/UNSPECIFIED/zones/{zones[0]}/disks/{pd}"
    if len(zones) > 1:
        region = zones[0].rsplit("-", 1)[0]
        return f"projects/UNSPECIFIED/regions/{region}/disks/{pd}"
    return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd}"


def volume_handle(plugin: InTreePlugin, source: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> str | None:
    """The CSI volume handle an in-tree source translates to (None when it cannot be translated)."""
    if plugin.name == GCE_PD:
        zone_label = (labels or {}).get(LABEL_ZONE_BETA) or (labels or {}).get(LABEL_ZONE) or ""
        return _gce_handle(source, zone_label.split(MULTI_ZONE_DELIMITER) if zone_label else [])
    if plugin.name == AWS_EBS:
        return _ebs_volume_id(source.get("volumeID", ""))
    if plugin.name == AZURE_FILE:
        return f"#{source.get('secretName', '')}#{source.get('shareName', '')}#"
    field = {AZURE_DISK: "diskURI", VSPHERE: "volumePath"}.get(plugin.name, "volumeID")
    handle: str | None = source.get(field, "")
    return handle


def translation_error(source: Mapping[str, Any]) -> str:
    """csi-translation-lib's error for an in-tree source whose volume ID cannot be translated (only an
    AWS EBS ID can be malformed)."""
    return f"failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume ({source.get('volumeID', '')})"


def translate_pv(pv: Mapping[str, Any]) -> dict[str, Any] | None:
    """``TranslateInTreePVToCSI``: a copy of the PV with a ``csi`` source and CSI topology in its node
    affinity (None when the PV is not an in-tree one, or its ID cannot be translated)."""
    plugin = pv_plugin(pv)
    if plugin is None:
        return None
    source = spec(pv)[plugin.source]
    handle = volume_handle(plugin, source, meta(pv).get("labels") or {})
    if handle is None:
        return None
    out: dict[str, Any] = _deep_copy(pv)
    out_spec = out["spec"]
    del out_spec[plugin.source]
    csi: dict[str, Any] = {"driver": plugin.driver, "volumeHandle": handle}
    if source.get("fsType"):
        csi["fsType"] = source["fsType"]
    if source.get("readOnly"):
        csi["readOnly"] = True
    out_spec["csi"] = csi
    if plugin.topology_key:
        _translate_topology(out, plugin.topology_key)
    return out


def _translate_topology(pv: dict[str, Any], csi_key: str) -> None:
    """``translateTopologyFromInTreeToCSI``: zone requirements move to the driver's topology key (taken
    from the zone label when the PV has no zone affinity); beta region requirements become GA ones."""
    labels = meta(pv).get("labels") or {}
    terms = (((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    zone_keys = (LABEL_ZONE, LABEL_ZONE_BETA)
    has_zone = any(e.get("key") in zone_keys for t in terms for e in t.get("matchExpressions") or [])
    if has_zone:
        for term in terms:
            for expr in term.get("matchExpressions") or []:
                if expr.get("key") in zone_keys:
                    expr["key"] = csi_key
    else:
        label = labels.get(LABEL_ZONE) or labels.get(LABEL_ZONE_BETA)
        if label:
            zones = label.split(MULTI_ZONE_DELIMITER)
            req = {"key": csi_key, "operator": "In", "values": zones}
            affinity = pv["spec"].setdefault("nodeAffinity", {})
            required = affinity.setdefault("required", {"nodeSelectorTerms": []})
            if required.get("nodeSelectorTerms"):
                for term in required["nodeSelectorTerms"]:
                    term.setdefault("matchExpressions", []).append(dict(req))
            else:
                required["nodeSelectorTerms"] = [{"matchExpressions": [req]}]
    for term in terms:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == LABEL_REGION_BETA:
                expr["key"] = LABEL_REGION
