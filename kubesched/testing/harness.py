"""PluginHarness: run one plugin's extension points against a handful of manifests, no cluster.

Inputs go through the same admission and defaulting as objects created in a cluster (pods get
their priority, default tolerations and requests-from-limits; nodes their allocatable), except that
what a test sets on purpose is kept: ``metadata.uid``, ``metadata.creationTimestamp`` and a
``spec.priority`` given without a PriorityClass (upstream's plugin tests build pods that way, and
the harness judges the plugin, not admission). With ``admission=False`` objects are used exactly as
written, as upstream's fake listers hold them (a StorageClass without ``volumeBindingMode``, say).
The plugin gets a real handle: the node table, the informer caches (``handle.objects(kind)``),
feature gates and a client on an embedded store. What comes back is plain data: codes are the status
names, so a test reads like upstream's table tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.kinds import NODE, POD, Kind, custom_resource_kind, kind_named
from kubesched.api.meta import json_copy
from kubesched.api.types import PodInfo
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.scheduler import config as config_module
from kubesched.scheduler.backend.cache import Cache
from kubesched.scheduler.config.types import PluginRef, Plugins, PluginSet, Profile
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework import status as st
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    BindPlugin,
    FilterPlugin,
    Plugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ScorePlugin,
)
from kubesched.scheduler.framework.queued_pod_info import QueuedPodInfo
from kubesched.scheduler.framework.runtime import Framework, HandleContext
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.utils.clock import ManualClock

__all__ = ["HarnessResult", "PluginHarness", "Status"]


@dataclass(frozen=True)
class Status:
    """A plugin's answer as data (upstream's ``framework.Status`` as a test compares it): ``code``
    is one of Success, Error, Unschedulable, UnschedulableAndUnresolvable, Wait, Skip, Pending.
    ``node_names`` is the PreFilterResult."""

    code: str = "Success"
    reasons: list[str] = field(default_factory=list)
    node_names: set[str] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, status: st.Status | None, node_names: set[str] | None = None) -> Status:
        """The data form of a framework Status (None is Success), with a PreFilter result's node
        names."""
        if status is None:
            return cls("Success", [], node_names)
        return cls(status.code.name, list(status.reasons), node_names)

    @property
    def is_success(self) -> bool:
        """Whether the code is Success (upstream ``Status.IsSuccess``)."""
        return self.code == "Success"


SUCCESS = Status()


@dataclass
class HarnessResult:
    """What ``PluginHarness.run`` observed at each extension point: the PreFilter status, each node's
    Filter status, the PreScore status, and raw and normalised scores by node name (the values
    upstream's plugin tests compare).

    ``filter`` is the plugin's own Filter verdict on every node, even after PreFilter rejected the
    pod (upstream's plugin tests check both); the scheduler would record ``pre_filter`` for every
    node then, which ``scheduler_view`` gives."""
    pre_filter: Status
    filter: dict[str, Status]
    pre_score: Status
    raw_scores: dict[str, int]
    scores: dict[str, int]

    def scheduler_view(self) -> dict[str, Status]:
        """Each node's status as the scheduler records it: PreFilter's rejection for every node,
        else the Filter verdict."""
        if self.pre_filter.is_success or self.pre_filter.code == "Skip":
            return dict(self.filter)
        return {name: self.pre_filter for name in self.filter}


class _Informer:
    """A fixed informer cache: plugins may subscribe, nothing ever changes."""

    def __init__(self, store: dict[str, dict]) -> None:
        self.store = store

    def add_handler(self, _handler: Any) -> None:
        return None


class _Informers:
    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def store(self, kind_name: str) -> dict[str, dict]:
        kind = kind_named(kind_name) or _custom_kind(kind_name)
        if kind is None:
            return {}
        return {_key(obj): obj for obj in self._store.iter_all(kind)}

    def informer(self, kind_name: str) -> _Informer:
        return _Informer(self.store(kind_name))


def _custom_kind(kind_name: str) -> Kind | None:
    """A custom resource's kind from the name the scheduler's informers give it,
    ``<plural>.<version>.<group>``; None for any other name."""
    plural, _, rest = kind_name.partition(".")
    version, _, group = rest.partition(".")
    return custom_resource_kind(group, version, plural) if plural and version and group else None


def _key(obj: Mapping) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


class PluginHarness:
    """Run ``plugin`` (an in-tree plugin name, or a Plugin class) against a small cluster.

    ``args`` is the plugin's v1 args (camelCase dict) — upstream's defaults are applied and the
    args are validated exactly as in a configuration file. ``nodes``, ``pods`` (bound ones have
    ``spec.nodeName``), ``namespaces`` and ``objects`` (PVCs, Services, PriorityClasses, CustomResourceDefinitions and
    their custom resources, ...) are
    manifest dicts. ``admission`` (default True) defaults and admits them as a cluster would, keeping
    the uid, creation time and pod priority a test set; False stores them exactly as written.

    Upstream has no such harness: its plugin tests build a framework with
    ``frameworkruntime.NewFramework`` over fake informers and a snapshot; this does the same once
    for plugin authors.
    """

    def __init__(self, plugin: str | type[Plugin], args: Mapping[str, Any] | None = None, *,
                 nodes: Iterable[Mapping] = (), pods: Iterable[Mapping] = (), namespaces: Iterable[Mapping] = (),
                 objects: Iterable[Mapping] = (), feature_gates: Mapping[str, bool] | None = None,
                 admission: bool = True) -> None:
        self.admission = admission
        self.gates = FeatureGates(dict(feature_gates or {}))
        self.registry = in_tree_registry()
        if isinstance(plugin, str):
            if plugin not in self.registry:
                raise ValueError(f'plugin "{plugin}" does not exist; known plugins: {", ".join(sorted(self.registry))}')
            self.plugin_name = plugin
        else:
            self.plugin_name = plugin.name
            self.registry = {**self.registry, plugin.name: plugin}
        clock = ManualClock()
        self.store = ObjectStore(clock, seed=0, auto_create_namespaces=True, feature_gates=self.gates)
        self._load([*namespaces, *objects, *nodes, *pods])
        self.cache = Cache(clock)
        for node in self.store.iter_all(NODE):
            self.cache.add_node(node)
        for pod in self.store.iter_all(POD):
            if (pod.get("spec") or {}).get("nodeName"):
                self.cache.add_pod(PodInfo(pod))
        self.table = self.cache.update_snapshot()
        self.framework = self._framework(args, clock)
        self.plugin = self.framework.plugins[self.plugin_name]

    # --- public API ----------------------------------------------------------------------------------
    def run(self, pod: Mapping, candidates: Iterable[str] | None = None) -> HarnessResult:
        """PreFilter, Filter on every node, then PreScore and Score on ``candidates`` (default: all)."""
        info = PodInfo(self._admitted(pod))
        state = CycleState()
        pre_filter, skipped = self._pre_filter(state, info)
        filtered = {name: SUCCESS for name in self._names()} if skipped else self._filter(state, info)
        batch = self._candidates(candidates)
        pre_score, score_skipped = self._pre_score(state, info, batch)
        raw: dict[str, int] = {}
        scores: dict[str, int] = {}
        if not score_skipped and pre_score.is_success and isinstance(self.plugin, (ScorePlugin, BatchScorePlugin)):
            raw, scores = self._score(state, info, batch)
        return HarnessResult(pre_filter, filtered, pre_score, raw, scores)

    def pre_enqueue(self, pod: Mapping) -> Status:
        """The plugin's PreEnqueue verdict for ``pod`` (upstream
        ``framework.PreEnqueuePlugin.PreEnqueue``)."""
        if not isinstance(self.plugin, PreEnqueuePlugin):
            raise TypeError(f"plugin {self.plugin_name} is not a PreEnqueue plugin")
        return Status.of(self.plugin.pre_enqueue(PodInfo(self._admitted(pod))))

    def less(self, pod1: Mapping, pod2: Mapping, queued_at1: float | None = None, queued_at2: float | None = None) -> bool:
        """Whether the plugin sorts ``pod1`` before ``pod2``, each queued at the given time (upstream
        ``framework.QueueSortPlugin.Less``)."""
        if not isinstance(self.plugin, QueueSortPlugin):
            raise TypeError(f"plugin {self.plugin_name} is not a QueueSort plugin")
        a = QueuedPodInfo(PodInfo(self._admitted(pod1)), queued_at1 or 0.0)
        b = QueuedPodInfo(PodInfo(self._admitted(pod2)), queued_at2 or 0.0)
        return self.plugin.less(a, b)

    # --- setup ---------------------------------------------------------------------------------------
    def _load(self, manifests: list[Mapping]) -> None:
        """Store the inputs: through admission, then with the caller's identities put back (a
        uid an ephemeral claim's owner reference names, a start time preemption compares, a
        priority without its class); or, without admission, exactly as written."""
        created = [self._create(obj) for obj in manifests]
        if self.admission and all(self._given_identity(kind, json_copy(obj), given) == obj for kind, obj, given in created):
            return
        stored = {(kind.kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]): (kind, obj, given)
                  for kind, obj, given in created}
        objects = []
        for kind in list(self.store.kinds()):
            for obj in self.store.iter_all(kind):
                entry = stored.get((kind.kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
                objects.append((kind, obj if entry is None else self._as_given(kind, obj, entry[2])))
        self.store.restore(objects, self.store.rv)

    def _create(self, obj: Mapping) -> tuple[Any, dict, dict]:
        """Store ``obj`` through admission; returns its kind, the stored object and what was given."""
        kind = self.store.custom.resolve(obj.get("apiVersion", ""), obj.get("kind", ""))
        if kind is None:
            raise ValueError(f"kind {obj.get('kind')!r} ({obj.get('apiVersion')}) is not served by kubesched")
        return kind, self.store.create(kind, self._without_priority(kind, obj)), dict(obj)

    @staticmethod
    def _without_priority(kind: Any, obj: Mapping) -> dict:
        """A copy for admission without a pod's explicit priority when it names no PriorityClass
        (admission would refuse it; ``_given_identity`` puts it back)."""
        copy = json_copy(dict(obj))
        spec = copy.get("spec")
        if kind == POD and isinstance(spec, dict) and not spec.get("priorityClassName"):
            spec.pop("priority", None)
        return copy

    @staticmethod
    def _given_identity(kind: Any, admitted: dict, given: Mapping) -> dict:
        """``admitted`` with the uid, creation time and pod priority the caller set."""
        meta, given_meta = admitted["metadata"], given.get("metadata") or {}
        for name in ("uid", "creationTimestamp"):
            if given_meta.get(name):
                meta[name] = given_meta[name]
        given_spec = given.get("spec") or {}
        if kind == POD and isinstance(given_spec, Mapping) and given_spec.get("priority") is not None:
            admitted["spec"]["priority"] = given_spec["priority"]
        return admitted

    def _as_given(self, kind: Any, admitted: dict, given: Mapping) -> dict:
        """The stored form of one input: admitted with the caller's identity, or (without
        admission) the manifest itself with the admitted object's names, uid and version."""
        if self.admission:
            return self._given_identity(kind, json_copy(admitted), given)
        raw = json_copy(dict(given))
        raw.setdefault("apiVersion", admitted.get("apiVersion"))
        raw.setdefault("kind", admitted.get("kind"))
        meta = raw.setdefault("metadata", {})
        for name in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
            if admitted["metadata"].get(name) is not None:
                meta.setdefault(name, admitted["metadata"][name])
        return raw

    def _admitted(self, pod: Mapping) -> dict:
        """The pod as the API server would store it (not stored: it is the pod being scheduled)."""
        copy = self._without_priority(POD, pod)
        copy.setdefault("apiVersion", "v1")
        copy.setdefault("kind", "Pod")
        admitted = self.store.create(POD, copy, dry_run=True)
        result = self._as_given(POD, admitted, pod)
        result["metadata"].setdefault("uid", f"harness-{result['metadata'].get('name', '')}")
        return result

    def _framework(self, args: Mapping[str, Any] | None, clock: ManualClock) -> Framework:
        plugin_args = self._decoded_args(args)
        refs = [PluginRef(self.plugin_name, 1)]
        cls = self.registry[self.plugin_name]
        if not (isinstance(cls, type) and issubclass(cls, QueueSortPlugin)):
            refs.insert(0, PluginRef("PrioritySort"))
        if not (isinstance(cls, type) and issubclass(cls, BindPlugin)):
            refs.append(PluginRef("DefaultBinder"))
        profile = Profile(plugins=Plugins(multi_point=PluginSet(refs)), plugin_config=plugin_args)
        ctx = HandleContext(clock=clock, snapshot=lambda: self.table, client=MemoryClient(self.store),
                            informers=_Informers(self.store), feature_gates=self.gates)
        return Framework(self.registry, profile, ctx)

    def _decoded_args(self, args: Mapping[str, Any] | None) -> dict[str, Any]:
        """Decode, default and validate ``args`` exactly as a configuration file's pluginConfig."""
        doc: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "harness", "plugins": {"multiPoint": {"enabled": [{"name": self.plugin_name}]}}}],
        }
        if args is not None:
            doc["profiles"][0]["pluginConfig"] = [{"name": self.plugin_name, "args": dict(args)}]
        cfg = config_module.load_dict(doc, registry=self.registry, feature_gates=self.gates, source="PluginHarness")
        value = cfg.profiles[0].plugin_config.get(self.plugin_name)
        return {} if value is None else {self.plugin_name: value}

    # --- extension points ------------------------------------------------------------------------------
    def _names(self) -> list[str]:
        return list(self.table.names[: self.table.n])

    def _pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[Status, bool]:
        if not isinstance(self.plugin, PreFilterPlugin):
            return SUCCESS, False
        result, status = self.plugin.pre_filter(state, pod, self.table.all_rows())
        node_names = None if result is None or result.all_nodes() else set(result.node_names or ())
        if status is not None and status.code == st.Code.Skip:
            state.skip_filter_plugins.add(self.plugin_name)
            return Status("Skip", list(status.reasons), node_names), True
        return Status.of(status, node_names), False

    def _filter(self, state: CycleState, pod: PodInfo) -> dict[str, Status]:
        names = self._names()
        if isinstance(self.plugin, BatchFilterPlugin):
            verdict = self.plugin.filter_nodes(state, pod, self.table.all_rows())
            if verdict is None:
                return {name: SUCCESS for name in names}
            return {name: Status.of(verdict.status_at(i)) for i, name in enumerate(names)}
        if isinstance(self.plugin, FilterPlugin):
            return {name: Status.of(self.plugin.filter(state, pod, self.table.infos[i])) for i, name in enumerate(names)}
        return {}

    def _candidates(self, candidates: Iterable[str] | None) -> NodeBatch:
        if candidates is None:
            return self.table.all_rows()
        names = list(candidates)
        unknown = [n for n in names if n not in self.table.row_of]
        if unknown:
            raise ValueError(f"unknown candidate node(s): {', '.join(unknown)}")
        return self.table.batch(np.array([self.table.row_of[n] for n in names], dtype=np.int64))

    def _pre_score(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> tuple[Status, bool]:
        if not isinstance(self.plugin, PreScorePlugin):
            return SUCCESS, False
        status = self.plugin.pre_score(state, pod, batch)
        if status is not None and status.code == st.Code.Skip:
            return Status("Skip", list(status.reasons)), True
        return Status.of(status), False

    def _score(self, state: CycleState, pod: PodInfo, batch: NodeBatch) -> tuple[dict[str, int], dict[str, int]]:
        names = batch.names()
        raw, normalized = self.framework.score_one(self.plugin, state, pod, batch)
        return dict(zip(names, map(int, raw))), dict(zip(names, map(int, normalized)))
