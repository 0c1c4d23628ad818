"""Builders shared by the volume plugin tests, and tests of the storage helpers they rely on
(upstream component-helpers ``FindMatchingVolume``, ``GetBindVolumeToClaim``, ``LabelZonesToSet``,
``MatchTopologySelectorTerms`` and csi-translation-lib's handles and topology)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.api.kinds import object_key
from kubesched.api.selectors import parse_node_selector
from kubesched.api.types import NodeInfo, PodInfo
from kubesched.api.volume import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    PLUGIN_BY_NAME,
    bind_volume_to_claim,
    csinode_limits,
    find_matching_volume,
    label_zones_to_set,
    node_selector_matches,
    translate_pv,
    volume_handle,
)
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.scheduler.plugins.volumeutil.batch import ChangeFeed, CSINodeViews, pv_affinity_mask, topology_terms_mask
from tests.helpers import make_node, make_pod

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


# --- builders -------------------------------------------------------------------------------------------
def make_sc(name: str, mode: str | None = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
            allowed: list | None = None, unset_mode: bool = False) -> dict:
    sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                          "provisioner": provisioner}
    if not unset_mode:
        sc["volumeBindingMode"] = mode
    if allowed is not None:
        sc["allowedTopologies"] = allowed
    return sc


def make_pvc(name: str, sc: str | None = None, namespace: str = "default", volume: str = "", bound: bool = False,
             request: str | None = None, modes: list | None = None, phase: str | None = None,
             annotations: dict | None = None, uid: str | None = None, owner_uid: str | None = None,
             deleting: bool = False, rv: str = "1") -> dict:
    pvc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-pvc-{name}", "resourceVersion": rv},
        "spec": {"accessModes": modes or ["ReadWriteOnce"]},
        "status": {"phase": phase or ("Bound" if volume else "Pending")},
    }
    if sc is not None:
        pvc["spec"]["storageClassName"] = sc
    if volume:
        pvc["spec"]["volumeName"] = volume
    if request:
        pvc["spec"]["resources"] = {"requests": {"storage": request}}
    ann = dict(annotations or {})
    if bound:
        ann[ANN_BIND_COMPLETED] = "yes"
    if ann:
        pvc["metadata"]["annotations"] = ann
    if owner_uid:
        pvc["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "owner", "uid": owner_uid, "controller": True}]
    if deleting:
        pvc["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return pvc


def make_pv(name: str, sc: str = "", capacity: str | None = "1Gi", phase: str | None = "Available",
            affinity: dict[str, list[str]] | None = None, claim: dict | None = None, labels: dict | None = None,
            csi: tuple[str, str] | None = None, source: dict | None = None, modes: list | None = None, rv: str = "1") -> dict:
    pv: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": rv, "labels": dict(labels or {})},
        "spec": {"storageClassName": sc, "accessModes": modes or ["ReadWriteOnce"]},
        "status": {},
    }
    if capacity is not None:
        pv["spec"]["capacity"] = {"storage": capacity}
    if phase is not None:
        pv["status"]["phase"] = phase
    if affinity is not None:
        pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in affinity.items()]}]}}
    if claim is not None:
        pv["spec"]["claimRef"] = claim
    if csi is not None:
        pv["spec"]["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    if source is not None:
        pv["spec"].update(source)
    return pv


def make_capacity(name: str, sc: str, capacity: str | None, topology: dict | None = None,
                  max_size: str | None = None, namespace: str = "kube-system") -> dict:
    cap: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                           "metadata": {"name": name, "namespace": namespace}, "storageClassName": sc}
    if capacity is not None:
        cap["capacity"] = capacity
    if max_size is not None:
        cap["maximumVolumeSize"] = max_size
    if topology is not None:
        cap["nodeTopology"] = {"matchLabels": topology}
    return cap


def make_csidriver(name: str, storage_capacity: bool) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"storageCapacity": storage_capacity}}


def make_csinode(node: str, limits: dict[str, int | None] | None = None, migrated: list[str] | None = None) -> dict:
    drivers = []
    for driver, count in (limits or {}).items():
        entry: dict[str, Any] = {"name": driver, "nodeID": node}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    obj: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
                           "spec": {"drivers": drivers}}
    if migrated:
        obj["metadata"]["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated)}
    return obj


def pvc_volume(claim: str, name: str | None = None) -> dict:
    return {"name": name or f"vol-{claim}", "persistentVolumeClaim": {"claimName": claim}}


def pod_with(name: str, *volumes: dict, node: str | None = None, namespace: str = "default", uid: str | None = None) -> dict:
    pod = make_pod(name, namespace=namespace, node=node, uid=uid)
    if volumes:
        pod["spec"]["volumes"] = list(volumes)
    return pod


def pod_with_claims(name: str, *claims: str, node: str | None = None, namespace: str = "default") -> dict:
    return pod_with(name, *(pvc_volume(c) for c in claims), node=node, namespace=namespace)


class FakeInformer:
    def __init__(self) -> None:
        self.handlers: list = []

    def add_handler(self, handler: Any) -> None:
        self.handlers.append(handler)


class FakeInformers:
    """Enough of InformerFactory for plugins that subscribe to changes (ChangeFeed)."""

    def __init__(self) -> None:
        self.informers: dict[str, FakeInformer] = {}

    def informer(self, kind: str) -> FakeInformer:
        return self.informers.setdefault(kind, FakeInformer())


class FakeContext:
    def __init__(self, informers: FakeInformers | None) -> None:
        self.informers = informers


class FakeHandle:
    """The parts of the Framework handle the volume plugins use: informer caches, gates, client."""

    def __init__(self, *objects: dict, gates: FeatureGates | None = None, client: Any = None, live: bool = False) -> None:
        self.store: dict[str, dict[str, dict]] = {}
        self.feature_gates = gates or DEFAULT_GATES
        self.client = client
        self.ctx = FakeContext(FakeInformers() if live else None)
        for obj in objects:
            self.put(obj)

    def objects(self, kind: str) -> dict[str, dict]:
        return self.store.setdefault(kind, {})

    def put(self, obj: dict) -> None:
        """Add or replace an object, telling subscribed handlers as an informer would."""
        kind = obj["kind"]
        key = object_key(obj)
        old = self.objects(kind).get(key)
        self.objects(kind)[key] = obj
        for h in self._handlers(kind):
            if old is None:
                h.on_add(obj, False)
            else:
                h.on_update(old, obj)

    def remove(self, kind: str, key: str) -> None:
        old = self.objects(kind).pop(key, None)
        if old is not None:
            for h in self._handlers(kind):
                h.on_delete(old)

    def _handlers(self, kind: str) -> list:
        informers = self.ctx.informers
        if informers is None or kind not in informers.informers:
            return []
        return informers.informers[kind].handlers


def table_of(nodes: list[dict], pods: list[dict] = ()) -> NodeTable:  # type: ignore[assignment]
    table = NodeTable()
    infos = {}
    for node in nodes:
        info = NodeInfo(node)
        infos[info.name] = info
        table.set_node(info)
    for raw in pods:
        pod = PodInfo(raw)
        info = infos[pod.node_name]
        info.add_pod(pod)
        table.pod_added(info, pod)
    return table


def nodes(*names: str, labels: dict | None = None) -> list[dict]:
    return [make_node(n, labels=labels) for n in names]


# --- tests of the helpers --------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [
    ("us-east-1a", frozenset({"us-east-1a"})),
    ("a__b", frozenset({"a", "b"})),
    ("a__", None),
    (" a __ b ", frozenset({"a", "b"})),
])
def test_label_zones_to_set_splits_on_double_underscore(value, expected):
    assert label_zones_to_set(value) == expected


def test_find_matching_volume_prefers_the_smallest_fitting_available_pv():
    claim = make_pvc("c", "sc", request="5Gi")
    small = make_pv("small", "sc", "1Gi")
    exact = make_pv("exact", "sc", "5Gi")
    large = make_pv("large", "sc", "10Gi")
    other_class = make_pv("other", "other", "5Gi")
    assert find_matching_volume(claim, [large, small, exact, other_class], {}, set(), False, True) is exact
    assert find_matching_volume(claim, [large, exact], {}, {"exact"}, False, True) is large


def test_find_matching_volume_returns_the_prebound_pv_or_nothing_when_it_does_not_fit_the_node():
    claim = make_pvc("c", "sc")
    prebound = make_pv("pre", "sc", "1Gi", affinity={HOSTNAME: ["n1"]},
                       claim={"namespace": "default", "name": "c"})
    free = make_pv("free", "sc", "1Gi")
    assert find_matching_volume(claim, [free, prebound], {HOSTNAME: "n1"}, set(), False, True) is prebound
    assert find_matching_volume(claim, [free, prebound], {HOSTNAME: "n2"}, set(), False, True) is None
    # the PV controller path with delayed binding only takes pre-bound PVs
    assert find_matching_volume(claim, [free], None, set(), True, True) is None
    assert find_matching_volume(claim, [free], None, set(), False, True) is free


def test_find_matching_volume_skips_volumes_of_another_mode_access_or_attributes_class():
    claim = make_pvc("c", "sc", modes=["ReadWriteMany"])
    rwo = make_pv("rwo", "sc")
    block = make_pv("block", "sc", modes=["ReadWriteMany"])
    block["spec"]["volumeMode"] = "Block"
    vac = make_pv("vac", "sc", modes=["ReadWriteMany"])
    vac["spec"]["volumeAttributesClassName"] = "gold"
    assert find_matching_volume(claim, [rwo, block, vac], {}, set(), False, True) is None
    claim["spec"]["volumeAttributesClassName"] = "gold"
    assert find_matching_volume(claim, [rwo, block, vac], {}, set(), False, True) is vac
    with pytest.raises(ValueError, match="feature-gate VolumeAttributesClass is disabled"):
        find_matching_volume(claim, [vac], {}, set(), False, False)


def test_bind_volume_to_claim_sets_the_claim_ref_and_bound_by_controller_once():
    claim = make_pvc("c", "sc")
    pv = make_pv("pv", "sc")
    bound, dirty = bind_volume_to_claim(pv, claim)
    assert dirty and bound["spec"]["claimRef"]["uid"] == "uid-pvc-c"
    assert bound["metadata"]["annotations"][ANN_BOUND_BY_CONTROLLER] == "yes"
    assert "claimRef" not in pv["spec"]
    again, dirty = bind_volume_to_claim(bound, claim)
    assert not dirty and again == bound


def test_node_affinity_of_a_pv_is_matched_against_labels_only():
    selector = parse_node_selector({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]})
    assert not node_selector_matches(selector, {HOSTNAME: "n1"})
    table = table_of(nodes("n1"))
    assert not pv_affinity_mask(table.all_rows(), selector).any()


def test_topology_terms_match_like_upstream_match_topology_selector_terms():
    """No terms match every node; an empty term matches none; a term needs every expression."""
    terms = [{"matchLabelExpressions": [{"key": ZONE, "values": ["a", "b"]}]}, {"matchLabelExpressions": []}]
    labelled = [make_node("n1", labels={ZONE: "a"}), make_node("n2", labels={ZONE: "c"}), make_node("n3")]
    table = table_of(labelled)
    assert list(topology_terms_mask(table.all_rows(), terms)) == [True, False, False]
    assert np.all(topology_terms_mask(table.all_rows(), []))


def test_in_tree_volumes_translate_to_csi_handles_and_topology():
    ebs = PLUGIN_BY_NAME["kubernetes.io/aws-ebs"]
    assert volume_handle(ebs, {"volumeID": "aws://us-east-1a/vol-123"}) == "vol-123"
    assert volume_handle(ebs, {"volumeID": "vol-9"}) == "vol-9"
    gce = PLUGIN_BY_NAME["kubernetes.io/gce-pd"]
    assert volume_handle(gce, {"pdName": "d"}) == "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d"
    pv = make_pv("pd", source={"gcePersistentDisk": {"pdName": "d"}}, labels={ZONE: "z1"},
                 affinity={ZONE: ["z1"]})
    translated = translate_pv(pv)
    assert translated["spec"]["csi"] == {"driver": "pd.csi.storage.gke.io", "volumeHandle": "projects/UNSPECIFIED/zones/z1/disks/d"}
    expr = translated["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert expr["key"] == "topology.gke.io/zone" and "gcePersistentDisk" not in translated["spec"]


def test_csinode_views_are_kept_per_table_until_nodes_or_csinodes_change():
    """Preemption alternates between the live table and scratch tables: each keeps its own view."""
    handle = FakeHandle(make_csinode("n1", {"d": 2}), live=True)
    views = CSINodeViews(ChangeFeed(handle, ("CSINode",), window=0))
    live, scratch = table_of(nodes("n1", "n2")), table_of(nodes("n1"))
    first = views.view(live, handle.objects("CSINode"))
    assert views.view(scratch, handle.objects("CSINode")) is not first
    assert views.view(live, handle.objects("CSINode")) is first
    handle.put(make_csinode("n2", {"d": 1}))
    changed = views.view(live, handle.objects("CSINode"))
    assert changed is not first and changed.limits["d"].tolist()[:2] == [2, 1]


def test_malformed_csinode_count_is_no_limit():
    assert csinode_limits(make_csinode("n", {"a": 3, "b": "three"})) == {"a": 3}
