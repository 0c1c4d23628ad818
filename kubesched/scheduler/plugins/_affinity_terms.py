"""Pod (anti-)affinity terms as InterPodAffinity uses them.

* ``parse_pod_terms``: the four term lists of a pod, or the message upstream's ``NewPodInfo``
  gives when a selector does not parse (``requiredAffinityTerms: values[0][k]: Invalid value...``);
* ``IncomingTerm``: a term of the pod being scheduled with its namespaceSelector merged into its
  namespaces (upstream ``mergeAffinityTermNamespacesIfNotEmpty``), so matching existing pods never
  needs their namespace's labels;
* ``namespace_labels``: the labels of a namespace from the informer cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubesched.api.errors import aggregate
from kubesched.api.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    IN,
    NOT_IN,
    InvalidSelector,
    LabelSelector,
    requirement_errors,
)
from kubesched.api.types import AffinityTerm, PodInfo
from kubesched.scheduler.plugins._pod_groups import Clause

_KINDS = (
    ("requiredAffinityTerms", "required_affinity_terms", "podAffinity", False),
    ("requiredAntiAffinityTerms", "required_anti_affinity_terms", "podAntiAffinity", False),
    ("preferredAffinityTerms", "preferred_affinity_terms", "podAffinity", True),
    ("preferredAntiAffinityTerms", "preferred_anti_affinity_terms", "podAntiAffinity", True),
)


@dataclass(frozen=True, slots=True)
class PodTerms:
    required_affinity: list[AffinityTerm]
    required_anti_affinity: list[AffinityTerm]
    preferred_affinity: list[AffinityTerm]
    preferred_anti_affinity: list[AffinityTerm]


def parse_pod_terms(pod: PodInfo) -> tuple[PodTerms | None, str]:
    """The pod's terms, or (None, upstream's aggregated parse error message)."""
    lists: list[list[AffinityTerm]] = []
    errors: list[str] = []
    for label, attr, section, preferred in _KINDS:
        try:
            lists.append(getattr(pod, attr))
        except InvalidSelector as e:
            lists.append([])
            detail = _first_term_error(pod.spec, section, preferred) or str(e)
            errors.append(f"{label}: {detail}")
    if errors:
        return None, aggregate(errors)
    return PodTerms(*lists), ""


def _first_term_error(spec: Mapping, section: str, preferred: bool) -> str | None:
    part = (spec.get("affinity") or {}).get(section) or {}
    if preferred:
        raw = [(w or {}).get("podAffinityTerm") or {} for w in part.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
    else:
        raw = part.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    for term in raw:
        err = selector_error(term.get("labelSelector")) or selector_error(term.get("namespaceSelector"))
        if err:
            return err
    return None


def selector_error(spec: Mapping | None) -> str | None:
    """The error ``metav1.LabelSelectorAsSelector`` returns for ``spec``, None when it parses: the
    first requirement that fails, with ``NewRequirement``'s path-less messages aggregated."""
    if not spec:
        return None
    match_labels = spec.get("matchLabels") or {}
    for key in sorted(match_labels):
        errs = requirement_errors(key, IN, [match_labels[key]])
        if errs:
            return aggregate(errs)
    for expr in spec.get("matchExpressions") or []:
        op = expr.get("operator")
        if op not in (IN, NOT_IN, EXISTS, DOES_NOT_EXIST):
            return f'"{op}" is not a valid label selector operator'
        # append([]string(nil), expr.Values...) upstream: no values is a nil slice.
        errs = requirement_errors(expr.get("key", ""), op, expr.get("values") or None)
        if errs:
            return aggregate(errs)
    return None


@dataclass(frozen=True, slots=True)
class IncomingTerm:
    """A term of the pod being scheduled; ``namespaces`` None matches every namespace."""

    namespaces: frozenset[str] | None
    selector: LabelSelector
    topology_key: str
    weight: int = 0

    @property
    def clause(self) -> Clause:
        return Clause(self.namespaces, self.selector)

    def matches(self, pod: PodInfo) -> bool:
        """``AffinityTerm.Matches(pod, nil)`` once the namespaceSelector has been merged."""
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        return self.selector.matches(pod.labels)


def merge_namespaces(term: AffinityTerm, namespaces: Mapping[str, dict]) -> IncomingTerm:
    """Upstream ``mergeAffinityTermNamespacesIfNotEmpty``: an empty namespaceSelector selects every
    namespace; any other one is replaced by the names of the namespaces it selects now."""
    if term.namespace_selector.empty:
        return IncomingTerm(None, term.selector, term.topology_key, term.weight)
    names = set(term.namespaces)
    if not term.namespace_selector.nothing:
        for obj in namespaces.values():
            meta = obj.get("metadata") or {}
            if term.namespace_selector.matches(meta.get("labels") or {}):
                names.add(meta.get("name", ""))
    return IncomingTerm(frozenset(names), term.selector, term.topology_key, term.weight)


def namespace_labels(namespaces: Mapping[str, dict], namespace: str) -> dict[str, str] | None:
    """``GetNamespaceLabelsSnapshot``: the namespace's labels, None when it is not known."""
    obj = namespaces.get(namespace)
    if obj is None:
        return None
    return dict((obj.get("metadata") or {}).get("labels") or {})


def matches_all(terms: Sequence[AffinityTerm] | Sequence[IncomingTerm], pod: PodInfo) -> bool:
    """``podMatchesAllAffinityTerms``: False for no terms; terms matched with nil namespace labels."""
    if not terms:
        return False
    for t in terms:
        ok = t.matches(pod) if isinstance(t, IncomingTerm) else t.matches(pod, None)
        if not ok:
            return False
    return True
