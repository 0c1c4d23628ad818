"""NodeAffinity: a node must match the pod's ``nodeSelector`` and required node affinity (and the
scheduler-enforced ``addedAffinity``); nodes score the summed weights of the preferred terms they
match (upstream ``nodeaffinity``).

Selectors are evaluated over the whole batch through the table's label columns: each requirement
is one or two array comparisons, whatever the number of nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kubesched.api.errors import FieldError
from kubesched.api.selectors import LabelSelector, NodeSelector, NodeSelectorTerm, parse_node_selector, parse_node_selector_term
from kubesched.api.types import PodInfo
from kubesched.scheduler.config.args import NodeAffinityArgs
from kubesched.scheduler.framework.cycle_state import CycleState
from kubesched.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kubesched.scheduler.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    EnqueueExtensions,
    FilterVerdict,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    SignFragment,
    SignPlugin,
)
from kubesched.scheduler.framework.status import Code, Status, StatusError
from kubesched.scheduler.nodetable.selectors import label_selector_mask, node_selector_mask, node_selector_term_mask
from kubesched.scheduler.nodetable.table import NodeBatch
from kubesched.scheduler.plugins import _signers as signers
from kubesched.scheduler.plugins import names
from kubesched.scheduler.plugins._affinity_terms import aggregate
from kubesched.scheduler.plugins._resource_allocation import default_normalize, pod_memo

PRE_FILTER_KEY = "PreFilter" + names.NodeAffinity
PRE_SCORE_KEY = "PreScore" + names.NodeAffinity
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
OBJECT_NAME_FIELD = "metadata.name"

PreferredTerms = list[tuple[int, NodeSelectorTerm]]


# --- pod-derived selectors ---------------------------------------------------------------------
def _node_affinity(pod: PodInfo) -> Mapping:
    return (pod.spec.get("affinity") or {}).get("nodeAffinity") or {}


def _required_raw(pod: PodInfo) -> Mapping | None:
    """``requiredDuringSchedulingIgnoredDuringExecution`` as written, None when unset."""
    return _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")


class RequiredNodeAffinity:
    """``nodeaffinity.GetRequiredNodeAffinity``: the pod's nodeSelector ANDed with its required
    node affinity terms (ORed); terms that fail to parse never match."""

    __slots__ = ("labels", "selector")

    def __init__(self, labels: LabelSelector, selector: NodeSelector | None) -> None:
        self.labels = labels
        self.selector = selector

    @classmethod
    def of(cls, pod: PodInfo) -> RequiredNodeAffinity:
        return pod_memo(pod, "_na_required", lambda: cls(pod.node_selector_labels, pod.required_node_affinity))

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return self.match(labels, node_name)[0]

    def match(self, labels: Mapping[str, str], node_name: str) -> tuple[bool, bool]:
        """(matched, failed with parse errors), as ``RequiredNodeAffinity.Match`` returns an error
        only when no term matched and some term did not parse."""
        if not self.labels.matches(labels):
            return False, False
        if self.selector is None:
            return True, False
        matched = self.selector.matches(labels, node_name)
        return matched, not matched and bool(self.selector.errors)

    def mask(self, nodes: NodeBatch) -> np.ndarray:
        mask = label_selector_mask(nodes, self.labels)
        if self.selector is not None and mask.any():
            mask &= node_selector_mask(nodes, self.selector)
        return mask

    def clone(self) -> RequiredNodeAffinity:
        return self


def _node_labels_and_name(node: Mapping) -> tuple[Mapping[str, str], str]:
    meta = node.get("metadata") or {}
    return meta.get("labels") or {}, meta.get("name") or ""


def pod_matches_node_selector_and_affinity(pod: PodInfo, node: Mapping) -> bool:
    """``PodMatchesNodeSelectorAndAffinityTerms``: what the kubelet admits and Filter requires
    (parsing errors count as no match)."""
    labels, name = _node_labels_and_name(node)
    return RequiredNodeAffinity.of(pod).matches(labels, name)


def parse_preferred_terms(raw: Sequence[Mapping] | None, path: str = "") -> tuple[PreferredTerms, list[FieldError]]:
    """``NewPreferredSchedulingTerms``: weighted terms, skipping weight 0 and empty terms."""
    terms: PreferredTerms = []
    errors: list[FieldError] = []
    for i, pref in enumerate(raw or []):
        weight = pref.get("weight", 0) or 0
        preference = pref.get("preference") or {}
        if weight == 0 or not (preference.get("matchExpressions") or preference.get("matchFields")):
            continue
        term = parse_node_selector_term(preference, f"{path}[{i}]")
        if term.errors:
            errors.extend(term.errors)
        else:
            terms.append((weight, term))
    return terms, errors


def _pod_preferred(pod: PodInfo) -> tuple[PreferredTerms, list[FieldError]] | None:
    """The pod's preferred terms, None when the field is unset."""
    raw = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
    if raw is None:
        return None
    return pod_memo(pod, "_na_preferred", lambda: parse_preferred_terms(raw))


def preferred_score(nodes: NodeBatch, terms: PreferredTerms) -> np.ndarray:
    """Sum of the weights of the terms each node matches."""
    total = np.zeros(len(nodes), dtype=np.int64)
    for weight, term in terms:
        total += np.where(node_selector_term_mask(nodes, term), weight, 0)
    return total


def name_restriction(required: Mapping) -> set[str] | None:
    """Node names the required terms allow through ``matchFields`` ``metadata.name In``: terms ORed,
    requirements of a term intersected; None when some term names no node."""
    allowed: set[str] | None = None
    for term in required.get("nodeSelectorTerms") or []:
        term_names: set[str] | None = None
        for req in term.get("matchFields") or []:
            if req.get("key") == OBJECT_NAME_FIELD and req.get("operator") == "In":
                values = set(req.get("values") or [])
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        allowed = term_names if allowed is None else allowed | term_names
    return allowed


class _PreScoreState:
    __slots__ = ("terms",)

    def __init__(self, terms: PreferredTerms | None) -> None:
        self.terms = terms

    def clone(self) -> _PreScoreState:
        return self


class NodeAffinity(SignPlugin, PreFilterPlugin, BatchFilterPlugin, PreScorePlugin, BatchScorePlugin, EnqueueExtensions):
    name = names.NodeAffinity
    normalizes_by_extremes = True  # DefaultNormalizeScore
    reads_node_pods = False
    Args = NodeAffinityArgs

    def __init__(self, args: NodeAffinityArgs | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        added = (args.added_affinity if args is not None else None) or {}
        self.added_selector: NodeSelector | None = None
        self.added_preferred: PreferredTerms | None = None
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            self.added_selector = parse_node_selector(required)
            if self.added_selector.errors:
                raise ValueError("parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                                 + aggregate(self.added_selector.errors))
        preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if preferred:
            self.added_preferred, errors = parse_preferred_terms(preferred)
            if errors:
                raise ValueError("parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: " + aggregate(errors))
        self._enforced = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_ENFORCED)
        self._pod_mismatch = Status(Code.UnschedulableAndUnresolvable, ERR_REASON_POD)

    # --- PreFilter / Filter --------------------------------------------------------------------------
    def sign_pod(self, pod: PodInfo) -> list[SignFragment] | Status:
        """The node selector and node affinity (the profile's added affinity is the same for every pod)."""
        return [signers.node_affinity(pod)]

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        required = _required_raw(pod)
        if required is None and self.added_selector is None and pod.spec.get("nodeSelector") is None:
            return None, Status(Code.Skip)
        state.write(PRE_FILTER_KEY, RequiredNodeAffinity.of(pod))
        if required is None or not required.get("nodeSelectorTerms"):
            return None, None
        allowed = name_restriction(required)
        if allowed is None:
            return None, None
        if not allowed:
            return None, Status(Code.UnschedulableAndUnresolvable, ERR_REASON_CONFLICT)
        return PreFilterResult(allowed), None

    def filter_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterVerdict | None:
        keys = np.zeros(len(nodes), dtype=np.int8)
        if self.added_selector is not None:
            keys[~node_selector_mask(nodes, self.added_selector)] = 1
        required: RequiredNodeAffinity = state.get(PRE_FILTER_KEY) or RequiredNodeAffinity.of(pod)
        pending = keys == 0
        if pending.any():
            checked = nodes if pending.all() else nodes.subset(np.flatnonzero(pending))
            mismatch = ~required.mask(checked)
            keys[np.flatnonzero(pending)[mismatch]] = 2
        return FilterVerdict.from_keys(keys, {1: self._enforced, 2: self._pod_mismatch})

    # --- Score -------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        preferred = _pod_preferred(pod)
        if preferred is not None and preferred[1]:
            return Status.from_error(ValueError(aggregate(preferred[1])))
        if preferred is None and self.added_preferred is None:
            return Status(Code.Skip)
        state.write(PRE_SCORE_KEY, _PreScoreState(None if preferred is None else preferred[0]))
        return None

    def score_nodes(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> np.ndarray:
        total = np.zeros(len(nodes), dtype=np.int64)
        if self.added_preferred:
            total += preferred_score(nodes, self.added_preferred)
        s: _PreScoreState | None = state.get(PRE_SCORE_KEY)
        if s is None:
            preferred = _pod_preferred(pod)
            if preferred is not None and preferred[1]:
                raise StatusError(Status.from_error(ValueError(aggregate(preferred[1]))))
            s = _PreScoreState(None if preferred is None else preferred[0])
        if s.terms:
            total += preferred_score(nodes, s.terms)
        return total

    def normalize_scores(self, state: CycleState, pod: PodInfo, nodes: NodeBatch, scores: np.ndarray) -> np.ndarray | None:
        return default_normalize(scores, reverse=False)

    # --- requeueing ----------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        event = ClusterEvent(Resource.Node, ActionType.Add | ActionType.UpdateNodeLabel)
        return [ClusterEventWithHint(event, self._after_node_change)]

    def _after_node_change(self, pod: dict, old: Any, new: Any) -> QueueingHint:
        """Queue when a node that matches (added affinity and the pod's) appears, or starts matching."""
        labels, name = _node_labels_and_name(new)
        if self.added_selector is not None and not self.added_selector.matches(labels, name):
            return QueueingHint.QueueSkip
        required = RequiredNodeAffinity.of(PodInfo(pod))
        matched, failed = required.match(labels, name)
        if failed:
            return QueueingHint.Queue  # upstream's hint returns the parse error, and an erring hint queues
        if not matched:
            return QueueingHint.QueueSkip
        if old is None:
            return QueueingHint.Queue
        was_matched, failed = required.match(*_node_labels_and_name(old))
        return QueueingHint.Queue if failed or not was_matched else QueueingHint.QueueSkip
