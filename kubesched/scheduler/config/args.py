"""Typed args of the in-tree plugins (``kubescheduler.config.k8s.io/v1`` ``*Args`` kinds, 1.35).

Each class is a dataclass whose fields are snake_case versions of the v1 JSON names. A freshly
constructed object carries upstream's unconditional v1 defaults; ``set_defaults(gates)`` applies
the rest of ``SetDefaults_*Args`` (feature-gated defaults, weights of 0 meaning 1, ...), and
``validate(path, gates)`` returns upstream's ``Validate*Args`` errors with full field paths.

Pod-spec shaped values (``NodeAffinityArgs.added_affinity``, ``PodTopologySpreadArgs.
default_constraints``) stay plain camelCase dicts, strictly decoded, so plugins can hand them to
the same parsers they use for pods.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from kubesched.api import golang as _go
from kubesched.api.errors import FieldError, go_strings, invalid, required, unsupported
from kubesched.api.golang import GoRepr, child, duplicate, forbidden, validate_label_name
from kubesched.api.selectors import NODE_SELECTOR_OPERATORS, requirement_errors
from kubesched.scheduler.config._decode import (
    Bool,
    Duration,
    Field,
    GoType,
    Int,
    List,
    Map,
    Str,
    Struct,
    encode_fields,
    to_json_field,
)
from kubesched.scheduler.features import DEFAULT_GATES, FeatureGates

GROUP = "kubescheduler.config.k8s.io"
API_VERSION = f"{GROUP}/v1"
#: Score values of shape points are in [0, MAX_CUSTOM_PRIORITY_SCORE] (upstream config.MaxCustomPriorityScore).
MAX_CUSTOM_PRIORITY_SCORE = 10

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT = 10.0
DYNAMIC_RESOURCES_BINDING_TIMEOUT_DEFAULT = 600.0


class ModelType(GoType):
    """A nested v1 struct represented by a ``Model`` dataclass."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        self.go = model.GO

    def zero(self) -> Any:
        return self.model()

    def decode(self, value: Any, ctx: Any, path: str, struct: str, stack: list[str]) -> Any:
        return self.model.from_decoded(self.model.schema().decode(value, ctx, path, struct, stack))


class Model:
    """A dataclass mirrored by a Go struct: ``FIELDS`` map JSON names to attributes and types."""

    GO: ClassVar[str] = ""
    FIELDS: ClassVar[tuple[Field, ...]] = ()
    _schema: ClassVar[Struct | None] = None

    @classmethod
    def schema(cls) -> Struct:
        schema: Struct | None = cls.__dict__.get("_schema")
        if schema is None:
            schema = cls._schema = Struct(cls.GO, list(cls.FIELDS), inline_type_meta=issubclass(cls, PluginArgs))
        return schema

    @classmethod
    def from_decoded(cls, doc: Mapping[str, Any]) -> Self:
        """An object from a strictly decoded JSON object; absent fields keep their defaults."""
        return cls(**{f.attr: doc[f.json] for f in cls.FIELDS if f.json in doc})

    def to_v1(self) -> dict:
        """The v1 JSON form, with Go's ``omitempty`` rules."""
        return encode_fields(self.schema().fields, lambda f: getattr(self, f.attr), to_json_field)


# --- pod-spec shaped structs (k8s.io/api/core/v1), decoded strictly but kept as dicts -------------

_OPERATOR = Str("v1.NodeSelectorOperator")
_NODE_SELECTOR_REQUIREMENT = Struct("v1.NodeSelectorRequirement", [
    Field("key", Str(), emit="always"),
    Field("operator", _OPERATOR, emit="always"),
    Field("values", List(Str())),
])
_NODE_SELECTOR_TERM = Struct("v1.NodeSelectorTerm", [
    Field("matchExpressions", List(_NODE_SELECTOR_REQUIREMENT)),
    Field("matchFields", List(_NODE_SELECTOR_REQUIREMENT)),
])
_NODE_SELECTOR = Struct("v1.NodeSelector", [Field("nodeSelectorTerms", List(_NODE_SELECTOR_TERM), emit="always")])
_PREFERRED_TERM = Struct("v1.PreferredSchedulingTerm", [
    Field("weight", Int(32), emit="always"),
    Field("preference", _NODE_SELECTOR_TERM, emit="always"),
])
NODE_AFFINITY = Struct("v1.NodeAffinity", [
    Field("requiredDuringSchedulingIgnoredDuringExecution", _NODE_SELECTOR, emit="omitnil"),
    Field("preferredDuringSchedulingIgnoredDuringExecution", List(_PREFERRED_TERM)),
])
_LABEL_SELECTOR = Struct("v1.LabelSelector", [
    Field("matchLabels", Map(Str())),
    Field("matchExpressions", List(Struct("v1.LabelSelectorRequirement", [
        Field("key", Str(), emit="always"),
        Field("operator", Str("v1.LabelSelectorOperator"), emit="always"),
        Field("values", List(Str())),
    ]))),
])
TOPOLOGY_SPREAD_CONSTRAINT = Struct("v1.TopologySpreadConstraint", [
    Field("maxSkew", Int(32), emit="always"),
    Field("topologyKey", Str(), emit="always"),
    Field("whenUnsatisfiable", Str("v1.UnsatisfiableConstraintAction"), emit="always"),
    Field("labelSelector", _LABEL_SELECTOR, emit="omitnil"),
    Field("minDomains", Int(32), emit="omitnil"),
    Field("nodeAffinityPolicy", Str("v1.NodeInclusionPolicy"), emit="omitnil"),
    Field("nodeTaintsPolicy", Str("v1.NodeInclusionPolicy"), emit="omitnil"),
    Field("matchLabelKeys", List(Str())),
])


# --- shared pieces -----------------------------------------------------------------------------


@dataclass
class ResourceSpec(Model):
    """A resource and its weight (``v1.ResourceSpec``)."""

    GO: ClassVar[str] = "v1.ResourceSpec"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", Str(), "name", emit="always"),
        Field("weight", Int(64), "weight"),
    )
    name: str = ""
    weight: int = 0


@dataclass
class UtilizationShapePoint(Model):
    """One point of a scoring function shape (``v1.UtilizationShapePoint``)."""

    GO: ClassVar[str] = "v1.UtilizationShapePoint"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("utilization", Int(32), "utilization", emit="always"),
        Field("score", Int(32), "score", emit="always"),
    )
    utilization: int = 0
    score: int = 0


@dataclass
class RequestedToCapacityRatioParam(Model):
    GO: ClassVar[str] = "v1.RequestedToCapacityRatioParam"
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("shape", List(ModelType(UtilizationShapePoint)), "shape"),)
    shape: list[UtilizationShapePoint] = field(default_factory=list)


@dataclass
class ScoringStrategy(Model):
    """NodeResourcesFit's scoring strategy. An explicit strategy without ``type`` stays ``""``."""

    GO: ClassVar[str] = "v1.ScoringStrategy"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("type", Str("v1.ScoringStrategyType"), "type"),
        Field("resources", List(ModelType(ResourceSpec)), "resources"),
        Field("requestedToCapacityRatio", ModelType(RequestedToCapacityRatioParam), "requested_to_capacity_ratio", emit="omitnil"),
    )
    type: str = ""
    resources: list[ResourceSpec] = field(default_factory=list)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


def default_resources() -> list[ResourceSpec]:
    """cpu and memory with weight 1 (upstream ``defaultResourceSpec``)."""
    return [ResourceSpec("cpu", 1), ResourceSpec("memory", 1)]


def _shape_repr(shape: list[UtilizationShapePoint] | None) -> GoRepr:
    """``%#v`` of an internal ``[]config.UtilizationShapePoint``."""
    if shape is None:
        return GoRepr("[]config.UtilizationShapePoint(nil)")
    items = ", ".join(f"config.UtilizationShapePoint{{Utilization:{p.utilization}, Score:{p.score}}}" for p in shape)
    return GoRepr(f"[]config.UtilizationShapePoint{{{items}}}")


def validate_function_shape(shape: list[UtilizationShapePoint], path: str) -> list[FieldError]:
    """``validateFunctionShape``: sorted utilizations, each point in range."""
    if not shape:
        return [required(path, "at least one point must be specified")]
    errs: list[FieldError] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(invalid(f"{path}[{i}].utilization", shape[i].utilization, "values must be sorted in increasing order"))
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            errs.append(invalid(f"{path}[{i}].utilization", point.utilization, "not in valid range [0, 100]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(invalid(f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
    return errs


def _default_weights(resources: list[ResourceSpec]) -> None:
    for r in resources:
        if r.weight == 0:
            r.weight = 1


# --- the args kinds ----------------------------------------------------------------------------


class PluginArgs(Model):
    """Base of every in-tree args kind. ``KIND`` is the v1 kind, ``PLUGIN`` the plugin's name."""

    KIND: ClassVar[str] = ""
    PLUGIN: ClassVar[str] = ""

    @classmethod
    def defaulted(cls, gates: FeatureGates | None = None) -> Self:
        """Upstream's defaults for this kind, as appended to profiles that leave the args out."""
        args = cls()
        args.set_defaults(gates or DEFAULT_GATES)
        return args

    def set_defaults(self, gates: FeatureGates) -> None:
        """Upstream ``SetDefaults_<Kind>``; the constructor already holds the unconditional ones."""

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        """Upstream ``Validate<Kind>``: every error, with field paths under ``path``."""
        return []

    def to_v1(self) -> dict:
        """The v1 object as ``--write-config-to`` prints it, ``apiVersion`` and ``kind`` included."""
        return {"apiVersion": API_VERSION, "kind": self.KIND, **super().to_v1()}


@dataclass
class DefaultPreemptionArgs(PluginArgs):
    KIND: ClassVar[str] = "DefaultPreemptionArgs"
    PLUGIN: ClassVar[str] = "DefaultPreemption"
    GO: ClassVar[str] = "v1.DefaultPreemptionArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("minCandidateNodesPercentage", Int(32), "min_candidate_nodes_percentage", emit="always"),
        Field("minCandidateNodesAbsolute", Int(32), "min_candidate_nodes_absolute", emit="always"),
    )
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        pct_path = child(path, "minCandidateNodesPercentage")
        abs_path = child(path, "minCandidateNodesAbsolute")
        errs = []
        if not 0 <= self.min_candidate_nodes_percentage <= 100:
            errs.append(invalid(pct_path, self.min_candidate_nodes_percentage, "not in valid range [0, 100]"))
        if self.min_candidate_nodes_absolute < 0:
            errs.append(invalid(abs_path, self.min_candidate_nodes_absolute, "not in valid range [0, inf)"))
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            errs.append(invalid(pct_path, 0, "cannot be zero at the same time as minCandidateNodesAbsolute"))
            errs.append(invalid(abs_path, 0, "cannot be zero at the same time as minCandidateNodesPercentage"))
        return errs


@dataclass
class InterPodAffinityArgs(PluginArgs):
    KIND: ClassVar[str] = "InterPodAffinityArgs"
    PLUGIN: ClassVar[str] = "InterPodAffinity"
    GO: ClassVar[str] = "v1.InterPodAffinityArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("hardPodAffinityWeight", Int(32), "hard_pod_affinity_weight", emit="always"),
        Field("ignorePreferredTermsOfExistingPods", Bool(), "ignore_preferred_terms_of_existing_pods", emit="always"),
    )
    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            return [invalid(child(path, "hardPodAffinityWeight"), self.hard_pod_affinity_weight, "not in valid range [0, 100]")]
        return []


@dataclass
class NodeResourcesFitArgs(PluginArgs):
    KIND: ClassVar[str] = "NodeResourcesFitArgs"
    PLUGIN: ClassVar[str] = "NodeResourcesFit"
    GO: ClassVar[str] = "v1.NodeResourcesFitArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("ignoredResources", List(Str()), "ignored_resources"),
        Field("ignoredResourceGroups", List(Str()), "ignored_resource_groups"),
        Field("scoringStrategy", ModelType(ScoringStrategy), "scoring_strategy", emit="omitnil"),
    )
    ignored_resources: list[str] = field(default_factory=list)
    ignored_resource_groups: list[str] = field(default_factory=list)
    scoring_strategy: ScoringStrategy | None = None

    def set_defaults(self, gates: FeatureGates) -> None:
        if self.scoring_strategy is None:
            self.scoring_strategy = ScoringStrategy(type=LEAST_ALLOCATED, resources=default_resources())
        if not self.scoring_strategy.resources:
            self.scoring_strategy.resources = default_resources()
        _default_weights(self.scoring_strategy.resources)

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, name in enumerate(self.ignored_resources):
            errs += validate_label_name(name, f"{child(path, 'ignoredResources')}[{i}]")
        for i, group in enumerate(self.ignored_resource_groups):
            p = f"{child(path, 'ignoredResourceGroups')}[{i}]"
            if "/" in group:
                errs.append(invalid(p, group, "resource group name can't contain '/'"))
            errs += validate_label_name(group, p)
        strategy = self.scoring_strategy
        if strategy is not None:
            sp = child(path, "scoringStrategy")
            if strategy.type not in SCORING_STRATEGY_TYPES:
                errs.append(unsupported(f"{sp}.type", strategy.type, sorted(SCORING_STRATEGY_TYPES)))
            for i, r in enumerate(strategy.resources):
                if not 0 < r.weight <= 100:
                    errs.append(invalid(f"{sp}.resources[{i}].weight", r.weight, f"resource weight of {r.name} not in valid range (0, 100]"))
            ratio, ratio_path = strategy.requested_to_capacity_ratio, f"{sp}.requestedToCapacityRatio"
            if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
                if ratio is None:
                    errs.append(required(ratio_path, "must be specified when type is RequestedToCapacityRatio"))
                else:
                    errs += validate_function_shape(ratio.shape, f"{ratio_path}.shape")
            elif ratio is not None:
                errs.append(forbidden(ratio_path, "must be nil when type is not RequestedToCapacityRatio"))
        else:
            errs.append(required(child(path, "scoringStrategy"), "ScoringStrategy field is required"))
        return errs


@dataclass
class NodeResourcesBalancedAllocationArgs(PluginArgs):
    KIND: ClassVar[str] = "NodeResourcesBalancedAllocationArgs"
    PLUGIN: ClassVar[str] = "NodeResourcesBalancedAllocation"
    GO: ClassVar[str] = "v1.NodeResourcesBalancedAllocationArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("resources", List(ModelType(ResourceSpec)), "resources"),)
    resources: list[ResourceSpec] = field(default_factory=list)

    def set_defaults(self, gates: FeatureGates) -> None:
        if not self.resources:
            self.resources = default_resources()
            return
        _default_weights(self.resources)

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        errs: list[FieldError] = []
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            p = f"{child(path, 'resources')}[{i}]"
            if r.name in seen:
                errs.append(duplicate(f"{p}.name", r.name))
            else:
                seen.add(r.name)
            if r.weight != 1:
                errs.append(invalid(f"{p}.weight", r.weight, "must be 1"))
        return errs


@dataclass
class PodTopologySpreadArgs(PluginArgs):
    KIND: ClassVar[str] = "PodTopologySpreadArgs"
    PLUGIN: ClassVar[str] = "PodTopologySpread"
    GO: ClassVar[str] = "v1.PodTopologySpreadArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("defaultConstraints", List(TOPOLOGY_SPREAD_CONSTRAINT), "default_constraints"),
        Field("defaultingType", Str("v1.PodTopologySpreadConstraintsDefaulting"), "defaulting_type"),
    )
    #: ``v1.TopologySpreadConstraint`` objects as camelCase dicts (no labelSelector: it is deduced per pod).
    default_constraints: list[dict] = field(default_factory=list)
    defaulting_type: str = ""

    def set_defaults(self, gates: FeatureGates) -> None:
        if not self.defaulting_type:
            self.defaulting_type = SYSTEM_DEFAULTING

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        errs: list[FieldError] = []
        dtype_path = child(path, "defaultingType")
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            errs.append(unsupported(dtype_path, self.defaulting_type, [SYSTEM_DEFAULTING, LIST_DEFAULTING]))
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            errs.append(invalid(dtype_path, self.defaulting_type, "when .defaultConstraints are not empty"))
        base = child(path, "defaultConstraints")
        for i, c in enumerate(self.default_constraints):
            errs += self._constraint_errors(c, f"{base}[{i}]")
            if _repeats(self.default_constraints, i):
                errs.append(duplicate(f"{base}[{i}]", f"{{{c.get('topologyKey', '')}, {c.get('whenUnsatisfiable', '')}}}"))
        return errs

    @staticmethod
    def _constraint_errors(c: Mapping[str, Any], p: str) -> list[FieldError]:
        errs: list[FieldError] = []
        if c.get("maxSkew", 0) <= 0:
            errs.append(invalid(f"{p}.maxSkew", c.get("maxSkew", 0), "not in valid range (0, inf)"))
        key = c.get("topologyKey", "")
        if not key:
            errs.append(required(f"{p}.topologyKey", "can not be empty"))
        else:
            errs += validate_label_name(key, f"{p}.topologyKey")
        action = c.get("whenUnsatisfiable", "")
        if not action:
            errs.append(required(f"{p}.whenUnsatisfiable", "can not be empty"))
        elif action not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.append(unsupported(f"{p}.whenUnsatisfiable", action, ["DoNotSchedule", "ScheduleAnyway"]))
        if c.get("labelSelector") is not None:
            errs.append(forbidden(f"{p}.labelSelector", "constraint must not define a selector, as they deduced for each pod"))
        return errs


def _repeats(constraints: list[dict], idx: int) -> bool:
    c = constraints[idx]
    return any(o.get("topologyKey", "") == c.get("topologyKey", "") and o.get("whenUnsatisfiable", "") == c.get("whenUnsatisfiable", "")
               for o in constraints[:idx])


@dataclass
class VolumeBindingArgs(PluginArgs):
    KIND: ClassVar[str] = "VolumeBindingArgs"
    PLUGIN: ClassVar[str] = "VolumeBinding"
    GO: ClassVar[str] = "v1.VolumeBindingArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("bindTimeoutSeconds", Int(64), "bind_timeout_seconds", emit="always"),
        Field("shape", List(ModelType(UtilizationShapePoint)), "shape"),
    )
    bind_timeout_seconds: int = 600
    #: None unless set or defaulted (StorageCapacityScoring); ``[]`` is kept apart from None, as Go does.
    shape: list[UtilizationShapePoint] | None = None

    def set_defaults(self, gates: FeatureGates) -> None:
        if not self.shape and gates.enabled("StorageCapacityScoring"):
            self.shape = [UtilizationShapePoint(0, MAX_CUSTOM_PRIORITY_SCORE), UtilizationShapePoint(100, 0)]

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        gates = gates or DEFAULT_GATES
        errs: list[FieldError] = []
        if self.bind_timeout_seconds < 0:
            errs.append(invalid(child(path, "bindTimeoutSeconds"), self.bind_timeout_seconds,
                                "invalid BindTimeoutSeconds, should not be a negative value"))
        if gates.enabled("StorageCapacityScoring"):
            errs += validate_function_shape(self.shape or [], child(path, "shape"))
        elif self.shape is not None:
            errs.append(invalid(child(path, "shape"), _shape_repr(self.shape),
                                "unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring"))
        return errs


@dataclass
class NodeAffinityArgs(PluginArgs):
    KIND: ClassVar[str] = "NodeAffinityArgs"
    PLUGIN: ClassVar[str] = "NodeAffinity"
    GO: ClassVar[str] = "v1.NodeAffinityArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("addedAffinity", NODE_AFFINITY, "added_affinity", emit="omitnil"),)
    #: A ``v1.NodeAffinity`` as a camelCase dict, ANDed with every pod's own node affinity.
    added_affinity: dict | None = None

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        affinity = self.added_affinity
        if affinity is None:
            return []
        base = child(path, "addedAffinity")
        errs: list[FieldError] = []
        required_selector = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required_selector is not None:
            terms_path = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            for i, term in enumerate(required_selector.get("nodeSelectorTerms") or []):
                errs += _node_selector_term_errors(term, f"{terms_path}[{i}]")
        for i, term in enumerate(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
            if term.get("weight", 0) == 0:
                continue
            # Upstream indexes the preferred term itself, without ".preference".
            errs += _node_selector_term_errors(term.get("preference") or {},
                                               f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]")
        return errs


_FIELD_SELECTOR_OPERATORS = ["In", "NotIn"]


def _node_selector_term_errors(term: Mapping[str, Any], path: str) -> list[FieldError]:
    """component-helpers ``newNodeSelectorTerm``'s parse errors (an empty term has none)."""
    errs: list[FieldError] = []
    for i, expr in enumerate(term.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op = expr.get("operator", "")
        if op not in NODE_SELECTOR_OPERATORS:
            errs.append(unsupported(f"{p}.operator", op, list(NODE_SELECTOR_OPERATORS)))
            continue
        errs += requirement_errors(expr.get("key", ""), op, expr.get("values"), p)
    for i, expr in enumerate(term.get("matchFields") or []):
        p = f"{path}.matchFields[{i}]"
        op = expr.get("operator", "")
        if op not in _FIELD_SELECTOR_OPERATORS:
            errs.append(unsupported(f"{p}.operator", op, _FIELD_SELECTOR_OPERATORS))
        elif len(expr.get("values") or []) != 1:
            errs.append(invalid(f"{p}.values", go_strings(expr.get("values")), "must have one element"))
    return errs


@dataclass
class DynamicResourcesArgs(PluginArgs):
    KIND: ClassVar[str] = "DynamicResourcesArgs"
    PLUGIN: ClassVar[str] = "DynamicResources"
    GO: ClassVar[str] = "v1.DynamicResourcesArgs"
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("filterTimeout", Duration(), "filter_timeout", emit="always"),
        Field("bindingTimeout", Duration(), "binding_timeout", emit="omitnil"),
    )
    #: Seconds; None when DRASchedulerFilterTimeout is off (printed as ``null``, as upstream does).
    filter_timeout: float | None = None
    #: Seconds; only with DRADeviceBindingConditions and DRAResourceClaimDeviceStatus.
    binding_timeout: float | None = None

    def set_defaults(self, gates: FeatureGates) -> None:
        if self.filter_timeout is None and gates.enabled("DRASchedulerFilterTimeout"):
            self.filter_timeout = DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT
        if self.binding_timeout is None and _binding_conditions(gates):
            self.binding_timeout = DYNAMIC_RESOURCES_BINDING_TIMEOUT_DEFAULT

    def validate(self, path: str = "", gates: FeatureGates | None = None) -> list[FieldError]:
        gates = gates or DEFAULT_GATES
        errs: list[FieldError] = []
        if gates.enabled("DRASchedulerFilterTimeout"):
            if self.filter_timeout is not None and self.filter_timeout < 0:
                errs.append(invalid(child(path, "filterTimeout"), _duration_repr(self.filter_timeout), "must be zero or positive"))
        elif self.filter_timeout is not None:
            # "DRASchedulingFilterTimeout" is upstream's spelling in this message.
            errs.append(forbidden(child(path, "filterTimeout"), "DRASchedulingFilterTimeout feature gate is disabled"))
        if _binding_conditions(gates):
            if self.binding_timeout is not None and self.binding_timeout < 1:
                errs.append(invalid(child(path, "bindingTimeout"), _duration_repr(self.binding_timeout), "must be at least 1 second"))
        elif self.binding_timeout is not None:
            errs.append(forbidden(child(path, "bindingTimeout"),
                                  "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"))
        return errs


def _binding_conditions(gates: FeatureGates) -> bool:
    return gates.enabled("DRADeviceBindingConditions") and gates.enabled("DRAResourceClaimDeviceStatus")


def _duration_repr(seconds: float) -> GoRepr:
    return GoRepr(_go.format_duration(_go.seconds_to_ns(seconds)))


#: Every in-tree plugin that takes args in 1.35, by plugin name.
ARGS_BY_PLUGIN: dict[str, type[PluginArgs]] = {
    cls.PLUGIN: cls
    for cls in (
        DefaultPreemptionArgs,
        DynamicResourcesArgs,
        InterPodAffinityArgs,
        NodeAffinityArgs,
        NodeResourcesBalancedAllocationArgs,
        NodeResourcesFitArgs,
        PodTopologySpreadArgs,
        VolumeBindingArgs,
    )
}
#: The same classes by v1 kind (``DefaultPreemptionArgs``...), as the scheme registers them.
ARGS_BY_KIND: dict[str, type[PluginArgs]] = {cls.KIND: cls for cls in ARGS_BY_PLUGIN.values()}


def args_to_v1(args: Any) -> Any:
    """The v1 (camelCase) form of any plugin's args, for printing.

    In-tree args and ``Model`` subclasses print themselves; pydantic models are dumped by alias;
    other dataclasses become dicts; plain dicts (untyped out-of-tree args) are returned as they are.
    """
    if args is None:
        return None
    if hasattr(args, "to_v1"):
        return args.to_v1()
    if hasattr(args, "model_dump"):
        return args.model_dump(by_alias=True, mode="json", exclude_none=True)
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        return dataclasses.asdict(args)
    return copy.deepcopy(args)
