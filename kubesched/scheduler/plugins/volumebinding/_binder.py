"""The scheduler's volume binder (upstream ``volumebinding/binder.go`` and its assume caches),
with FindPodVolumes evaluated for a whole batch of nodes at once.

For one pod, ``find`` answers per node: whether its bound PVs' node affinity fits, which available
PV each unbound WaitForFirstConsumer claim would take (the smallest fitting one, never one an
earlier claim of the pod took on that node), and whether the remaining claims can be provisioned
there (StorageClass provisioner and allowedTopologies, CSIStorageCapacity). The answer is kept as
arrays (``Evaluation``) and turned into a ``PodVolumes`` plan only for the node Reserve picks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.volume import (
    ANN_SELECTED_NODE,
    NOT_SUPPORTED_PROVISIONER,
    ClaimMatcher,
    annotations_of,
    claim_class,
    csi_migration_on,
    meta,
    name_of,
    node_selector_of,
    pv_facts,
    pv_node_selector,
    pv_plugin,
    quantity,
    quantity_value,
    requested_storage,
    resource_version,
    spec,
    translate_pv,
    translation_error,
    volume_limit,
)
from kubesched.scheduler.nodetable.table import NodeBatch, NodeTable
from kubesched.scheduler.plugins.volumeutil.batch import (
    CSINodeView,
    names_mask,
    node_topology_mask,
    pv_affinity_mask,
    topology_terms_mask,
)

ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

#: Reason bits, in the order upstream appends the reasons.
NODE_CONFLICT, BIND_CONFLICT, NOT_ENOUGH_SPACE, PV_NOT_EXIST = 1, 2, 4, 8
REASONS = ((NODE_CONFLICT, ERR_REASON_NODE_CONFLICT), (BIND_CONFLICT, ERR_REASON_BIND_CONFLICT),
           (NOT_ENOUGH_SPACE, ERR_REASON_NOT_ENOUGH_SPACE), (PV_NOT_EXIST, ERR_REASON_PV_NOT_EXIST))

NOT_PROVISIONED = -2  # a provisioning slot of a claim that got a static PV on that node


class AssumeError(Exception):
    pass


class AssumeCache:
    """Informer objects overlaid with the scheduler's assumed versions (upstream ``AssumeCache``).

    An assumed object wins until the informer delivers a strictly newer resourceVersion of it (the
    API write that makes the assumption true, or anything else that supersedes it) or it is deleted.
    """

    def __init__(self, source: Callable[[], Mapping[str, dict]], description: str) -> None:
        self._source = source
        self.description = description
        self._assumed: dict[str, dict] = {}

    def get_api(self, key: str) -> dict | None:
        return self._source().get(key)

    def not_found(self, key: str) -> str:
        """The assume cache's NotFoundError message."""
        return f'could not find {self.description} "{key}"'

    def get(self, key: str) -> dict | None:
        api = self._source().get(key)
        assumed = self._assumed.get(key)
        if assumed is None:
            return api
        if api is None or resource_version(api) > resource_version(assumed):
            del self._assumed[key]
            return api
        return assumed

    def assume(self, key: str, obj: dict) -> None:
        current = self.get(key)
        if current is None:
            raise AssumeError(self.not_found(key))
        if resource_version(obj) < resource_version(current):
            raise AssumeError(f'{self.description} "{key}" is out of sync (stored: {resource_version(current)}, assume: {resource_version(obj)})')
        self._assumed[key] = obj

    def restore(self, key: str) -> None:
        self._assumed.pop(key, None)


def pvc_key(pvc: Mapping) -> str:
    return f"{meta(pvc).get('namespace', '')}/{name_of(pvc)}"


# --- the plan for one node -------------------------------------------------------------------------
@dataclass
class Binding:
    pvc: dict
    pv: dict


@dataclass
class Provision:
    pvc: dict
    capacity: dict | None = None


@dataclass
class PodVolumes:
    """Upstream ``PodVolumes``: static PV bindings and claims to provision on the chosen node."""

    static_bindings: list[Binding] = field(default_factory=list)
    dynamic_provisions: list[Provision] = field(default_factory=list)


@dataclass
class PodClaims:
    """Upstream ``PodVolumeClaims``, with the bound claims' PVs looked up once."""

    bound: list[tuple[dict, dict | None]] = field(default_factory=list)
    unbound_delay: list[dict] = field(default_factory=list)
    unbound_immediate: list[dict] = field(default_factory=list)
    unbound_volumes: dict[str, list[dict]] = field(default_factory=dict)


@dataclass
class Evaluation:
    """FindPodVolumes for one batch: reason bits per node and the plan arrays behind them."""

    table: NodeTable
    rows: np.ndarray
    reasons: np.ndarray
    match_claims: list[dict] = field(default_factory=list)
    pvs: list[dict] = field(default_factory=list)
    choices: np.ndarray | None = None
    provision_claims: list[dict] = field(default_factory=list)
    provision_capacity: np.ndarray | None = None
    capacities: list[dict] = field(default_factory=list)

    def position(self, node_name: str) -> int | None:
        """The node's position in this evaluation when it passed there (None otherwise)."""
        row = self.table.row_of.get(node_name)
        if row is None:
            return None
        hits = np.flatnonzero(self.rows == row)
        if not len(hits) or self.reasons[hits[0]] != 0:
            return None
        return int(hits[0])

    def plan(self, position: int) -> PodVolumes:
        out = PodVolumes()
        if self.choices is not None:
            for i, pvc in enumerate(self.match_claims):
                choice = int(self.choices[i, position])
                if choice >= 0:
                    out.static_bindings.append(Binding(pvc, self.pvs[choice]))
        if self.provision_capacity is not None:
            for i, pvc in enumerate(self.provision_claims):
                cap = int(self.provision_capacity[i, position])
                if cap != NOT_PROVISIONED:
                    out.dynamic_provisions.append(Provision(pvc, self.capacities[cap] if cap >= 0 else None))
        return out

    def has_static(self) -> bool:
        if self.choices is None or not len(self.choices):
            return False
        return bool(((self.choices >= 0) & (self.reasons == 0)).any())


class FindError(Exception):
    """An error (not a rejection) while evaluating the pod's volumes on some node."""


@dataclass
class Lookups:
    """The objects FindPodVolumes reads, as of this cycle."""

    classes: Mapping[str, Mapping]
    csidrivers: Mapping[str, Mapping]
    capacities: list[dict[str, Any]]
    csinodes: CSINodeView | None
    vac_enabled: bool = True


# --- FindPodVolumes over a batch -------------------------------------------------------------------
def find(claims: PodClaims, batch: NodeBatch, lookups: Lookups) -> Evaluation:
    """``FindPodVolumes`` for every node of ``batch``. Raises FindError like upstream returns an error."""
    n = len(batch)
    ev = Evaluation(batch.table, batch.row_ids().copy(), np.zeros(n, dtype=np.int64))
    if claims.bound:
        _check_bound(claims, batch, lookups, ev)
    if claims.unbound_delay:
        _check_unbound(claims, batch, lookups, ev)
    return ev


def _check_bound(claims: PodClaims, batch: NodeBatch, lookups: Lookups, ev: Evaluation) -> None:
    """``checkBoundClaims``: the first claim whose PV misses a node decides; a missing PV stops."""
    still = np.ones(len(batch), dtype=bool)
    for _, pv in claims.bound:
        if pv is None:
            ev.reasons[still] |= PV_NOT_EXIST
            return
        mask = translated_affinity_mask(batch, pv, lookups, still)
        ev.reasons[still & ~mask] |= NODE_CONFLICT
        still &= mask


def translated_affinity_mask(batch: NodeBatch, pv: dict, lookups: Lookups, where: np.ndarray | None = None) -> np.ndarray:
    """PV node affinity per node, using the CSI-translated PV on nodes that migrated its plugin
    (``tryTranslatePVToCSI``)."""
    mask = pv_affinity_mask(batch, pv_node_selector(pv))
    plugin = pv_plugin(pv)
    if plugin is None or lookups.csinodes is None or not csi_migration_on(plugin.name):
        return mask
    migrated = lookups.csinodes.migrated_mask(batch, plugin.name)
    if where is not None:
        migrated &= where
    if not migrated.any():
        return mask
    translated = translate_pv(pv)
    if translated is None:
        raise FindError(f"could not translate pv: {translation_error(spec(pv)[plugin.source])}")
    return np.where(migrated, pv_affinity_mask(batch, node_selector_of(translated)), mask)


def _check_unbound(claims: PodClaims, batch: NodeBatch, lookups: Lookups, ev: Evaluation) -> None:
    n = len(batch)
    active = np.ones(n, dtype=bool)
    annotated = [c for c in claims.unbound_delay if ANN_SELECTED_NODE in annotations_of(c)]
    to_match = [c for c in claims.unbound_delay if ANN_SELECTED_NODE not in annotations_of(c)]
    for claim in annotated:
        mismatch = active & ~names_mask(batch, annotations_of(claim)[ANN_SELECTED_NODE])
        ev.reasons[mismatch] |= BIND_CONFLICT
        active &= ~mismatch
    to_match.sort(key=lambda c: quantity(requested_storage(c)))
    ev.match_claims = to_match
    ev.provision_claims = annotated + to_match
    k = len(to_match)
    choices = ev.choices = np.full((k, n), -1, dtype=np.int64)
    if k:
        _find_matching(to_match, claims, batch, lookups, ev, choices, active)
    slots = np.full((len(ev.provision_claims), n), NOT_PROVISIONED, dtype=np.int64)
    ev.provision_capacity = slots
    ev.capacities = list(lookups.capacities)
    where = np.flatnonzero(active)
    if not len(where):
        return
    # Nodes leaving the same claims without a PV are checked together, in the order of the bitmask
    # of those claims (claim i as bit i): rows reversed, so the last claim sorts most significant.
    patterns, inverse = np.unique((choices[::-1, where] < 0).T, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    for g, reversed_unmatched in enumerate(patterns):
        members = np.zeros(n, dtype=bool)
        members[where[inverse == g]] = True
        unmatched = np.flatnonzero(reversed_unmatched[::-1])
        positions = list(range(len(annotated))) + [len(annotated) + int(i) for i in unmatched]
        if positions:
            _check_provisions(ev, slots, positions, batch, lookups, members)


def _find_matching(to_match: list[dict], claims: PodClaims, batch: NodeBatch, lookups: Lookups, ev: Evaluation,
                   choices: np.ndarray, active: np.ndarray) -> None:
    """``findMatchingVolumes``: per node, each claim (smallest first) takes the smallest available PV
    that fits the node and that no earlier claim took there; a PV pre-bound to the claim is the
    only candidate. Claims left without a PV are provisioned instead."""
    index: dict[str, int] = {}
    masks: dict[str, np.ndarray] = {}

    def pv_index(pv: dict) -> int:
        name = pv_facts(pv).name
        if name not in index:
            index[name] = len(ev.pvs)
            ev.pvs.append(pv)
        return index[name]

    def affinity(pv: dict) -> np.ndarray:
        name = name_of(pv)
        if name not in masks:
            masks[name] = pv_affinity_mask(batch, pv_node_selector(pv))
        return masks[name]

    for i, claim in enumerate(to_match):
        prebound, candidates = _candidates(claim, claims.unbound_volumes.get(claim_class(claim), []), lookups)
        if prebound is not None:
            choices[i][active & affinity(prebound)] = pv_index(prebound)
            continue
        earlier = choices[:i]
        simple = _simple_candidates(candidates)
        if simple is not None:
            _choose_simple(i, candidates, simple, batch, choices, active, earlier, pv_index)
            continue
        unresolved = active.copy()
        for pv in candidates:
            if not unresolved.any():
                break
            idx = pv_index(pv)
            ok = unresolved & affinity(pv)
            if len(earlier):
                ok &= (earlier != idx).all(axis=0)
            choices[i][ok] = idx
            unresolved &= ~ok


def _candidates(claim: dict, pvs: list[dict], lookups: Lookups) -> tuple[dict | None, list[dict]]:
    """The node-independent part of FindMatchingVolume: the pre-bound PV if any, else the available
    PVs that fit the claim, smallest first (list order among equals)."""
    try:
        matcher = ClaimMatcher(claim, lookups.vac_enabled)
    except ValueError as e:
        raise FindError(str(e)) from e
    out: list[tuple[Any, dict]] = []
    for pv in pvs:
        f = pv_facts(pv)
        if not matcher.usable(pv, f):
            continue
        if f.claim_ref is not None:
            return pv, []
        if matcher.available(f) and matcher.modes <= f.modes:
            out.append((f.capacity, pv))
    out.sort(key=lambda item: item[0])
    return None, [pv for _, pv in out]


def _simple_candidates(candidates: list[dict]) -> tuple[str, list[frozenset[str]]] | None:
    """The common label key and each candidate's allowed values when every candidate is a
    single-``In`` PV on that key (local PVs by hostname)."""
    if len(candidates) < 8:
        return None
    key = None
    allowed: list[frozenset[str]] = []
    for pv in candidates:
        simple = pv_facts(pv).simple
        if simple is None or (key is not None and simple[0] != key):
            return None
        key = simple[0]
        allowed.append(simple[1])
    return None if key is None else (key, allowed)


def _choose_simple(i: int, candidates: list[dict], simple: tuple[str, list[frozenset[str]]], batch: NodeBatch,
                   choices: np.ndarray, active: np.ndarray, earlier: np.ndarray, pv_index: Callable[[dict], int]) -> None:
    """The same choice as the general loop, for PVs that each allow a set of values of one label:
    per label value, the PVs allowing it in preference order; each node takes the first one no
    earlier claim took (at most i + 1 look-ups per node)."""
    key, allowed = simple
    column = batch.table.label_column(key)
    if column is None:
        return
    depth = i + 1
    table = np.full((len(column.values) + 1, depth), -1, dtype=np.int64)
    filled = np.zeros(len(column.values) + 1, dtype=np.int64)
    for pv, values in zip(candidates, allowed, strict=True):
        idx = -1
        for value in values:
            code = column.vocab.get(value)
            if code is None or filled[code] >= depth:
                continue
            if idx < 0:
                idx = pv_index(pv)
            table[code, filled[code]] = idx
            filled[code] += 1
    codes = batch.labels(key)
    usable = active & (codes >= 0)
    rows = np.where(usable, codes, len(column.values))
    chosen = np.full(len(codes), -1, dtype=np.int64)
    for t in range(depth):
        cand = table[rows, t]
        ok = (chosen < 0) & (cand >= 0) & usable
        if len(earlier):
            ok &= (earlier != cand).all(axis=0)
        chosen[ok] = cand[ok]
    choices[i] = chosen


def _check_provisions(ev: Evaluation, slots: np.ndarray, positions: list[int], batch: NodeBatch, lookups: Lookups,
                      members: np.ndarray) -> None:
    """``checkVolumeProvisions`` for nodes sharing the same claims to provision; it decides
    whether the unbound claims are satisfied (overriding the matching result). ``slots`` is
    ``ev.provision_capacity``: per claim and node, the capacity object a provision would use."""
    alive = members.copy()
    for pos in positions:
        claim = ev.provision_claims[pos]
        class_name = claim_class(claim)
        if not class_name:
            raise FindError(f'no class for claim "{pvc_key(claim)}"')
        sc = lookups.classes.get(class_name)
        if sc is None:
            raise FindError(f'failed to find storage class "{class_name}"')
        provisioner = sc.get("provisioner") or ""
        if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
            ev.reasons[alive] |= BIND_CONFLICT
            return
        topo = topology_terms_mask(batch, sc.get("allowedTopologies"))
        ev.reasons[alive & ~topo] |= BIND_CONFLICT
        alive &= topo
        enough, capacity = _has_enough_capacity(provisioner, claim, sc, batch, lookups)
        ev.reasons[alive & ~enough] |= NOT_ENOUGH_SPACE
        alive &= enough
        slots[pos][alive] = capacity[alive]
        if not alive.any():
            return
    # nodes whose claims all got a PV or a provisioning slot: nothing more to record


def _has_enough_capacity(provisioner: str, claim: dict, sc: Mapping, batch: NodeBatch,
                         lookups: Lookups) -> tuple[np.ndarray, np.ndarray]:
    """``hasEnoughCapacity``: only CSI drivers that opted into storage capacity tracking are checked;
    then some CSIStorageCapacity of the class, large enough and accessible from the node, must exist.
    Returns which nodes have one and the index of the first such object (-1 for none)."""
    n = len(batch)
    none = np.full(n, -1, dtype=np.int64)
    raw = requested_storage(claim)
    if raw is None:
        return np.ones(n, dtype=bool), none
    driver = lookups.csidrivers.get(provisioner)
    if driver is None or not spec(driver).get("storageCapacity"):
        return np.ones(n, dtype=bool), none
    size = quantity_value(raw)
    found = np.zeros(n, dtype=bool)
    chosen = none.copy()
    for idx, capacity in enumerate(lookups.capacities):
        if capacity.get("storageClassName") != name_of(sc):
            continue
        limit = volume_limit(capacity)
        if limit is None or quantity_value(limit) < size:
            continue
        hit = ~found & node_topology_mask(batch, capacity.get("nodeTopology"))
        chosen[hit] = idx
        found |= hit
        if found.all():
            break
    return found, chosen


def pv_class_name(pv: Mapping) -> str:
    """``BindingInfo.StorageClassName``: the PV's ``spec.storageClassName``."""
    return spec(pv).get("storageClassName") or ""
