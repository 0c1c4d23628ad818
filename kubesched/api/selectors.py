"""Label selectors and node selectors with apimachinery's semantics.

A selector is compiled once into immutable requirements. Each requirement can be evaluated on one
label map (``matches``) and, through ``kubesched.scheduler.nodetable``, on a whole column of node labels at
once; both read the same fields (``key``, ``op``, ``values``, ``number``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.api.errors import FieldError, go_strings, invalid, required, unsupported
from kubesched.api.names import label_value_errors, qualified_name_errors

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, EQUALS, NOT_EQUALS = (
    "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "=", "!=",
)


class InvalidSelector(ValueError):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key op values`` clause. ``number`` holds the integer operand of Gt/Lt."""

    key: str
    op: str
    values: frozenset[str]
    number: int = 0

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op in (IN, EQUALS):
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op in (NOT_IN, NOT_EQUALS):
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        parsed = parse_int64(value)
        if parsed is None:
            return False
        return parsed > self.number if op == GT else parsed < self.number


def parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: optional sign, decimal digits, 64-bit range."""
    if not text or not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Requirements ANDed. ``nothing`` is the nil selector, which selects no object."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(req.matches(labels) for req in self.requirements)

    @property
    def empty(self) -> bool:
        """True for ``{}``, which selects everything."""
        return not self.nothing and not self.requirements


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def requirement_errors(key: str, op: str, values: Sequence[str] | None, path: str = "") -> list[FieldError]:
    """``labels.NewRequirement``'s checks: every error it aggregates, in its order.

    ``op`` is an operator the caller has already accepted (callers reject the others with their own
    message, as upstream's do). ``values`` None is Go's nil slice, printed ``[]string(nil)``. Paths
    are under ``path``; ``""`` gives upstream's bare ``key``/``values[0][key]`` of a selector parsed
    without a path (``LabelSelectorAsSelector``).
    """
    vals = list(values or [])
    values_path = _child(path, "values")
    errors: list[FieldError] = []
    key_errs = qualified_name_errors(key) if isinstance(key, str) else ["must be a string"]
    if key_errs:
        errors.append(invalid(_child(path, "key"), key, "; ".join(key_errs)))
    errors += _operator_errors(op, values, values_path)
    for i, value in enumerate(vals):
        value_errs = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
        if value_errs:
            errors.append(invalid(f"{values_path}[{i}][{key}]", value, "; ".join(value_errs)))
    return errors


def _operator_errors(op: str, values: Sequence[str] | None, values_path: str) -> list[FieldError]:
    """NewRequirement's switch on the operator: how many values it takes, and integers for Gt/Lt."""
    vals = list(values or [])
    if op in (IN, NOT_IN) and not vals:
        return [invalid(values_path, go_strings(values), "for 'in', 'notin' operators, values set can't be empty")]
    if op in (EQUALS, NOT_EQUALS) and len(vals) != 1:
        return [invalid(values_path, go_strings(values), "exact-match compatibility requires one single value")]
    if op in (EXISTS, DOES_NOT_EXIST) and vals:
        return [invalid(values_path, go_strings(values), "values set must be empty for exists and does not exist")]
    if op not in (GT, LT):
        return []
    errors = []
    if len(vals) != 1:
        errors.append(invalid(values_path, go_strings(values), "for 'Gt', 'Lt' operators, exactly one value is required"))
    for i, value in enumerate(vals):
        if not isinstance(value, str) or parse_int64(value) is None:
            errors.append(invalid(f"{values_path}[{i}]", value, "for 'Gt', 'Lt' operators, the value must be an integer"))
    return errors


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def new_requirement(key: str, op: str, values: Sequence[str] | None, path: str) -> tuple[Requirement | None, list[FieldError]]:
    """``labels.NewRequirement``: the requirement, or None and its errors."""
    errors = requirement_errors(key, op, values, path)
    if errors:
        return None, errors
    vals = list(values or [])
    number = int(vals[0]) if op in (GT, LT) else 0
    return Requirement(key, op, frozenset(vals), number), []


_LABEL_SELECTOR_OPS = {IN, NOT_IN, EXISTS, DOES_NOT_EXIST}
#: ``validSelectorOperators`` of component-helpers' node affinity, in upstream's order.
NODE_SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)


def parse_label_selector(spec: Mapping[str, Any] | None, path: str = "labelSelector") -> LabelSelector:
    """``metav1.LabelSelectorAsSelector``: nil selects nothing, ``{}`` selects everything."""
    if spec is None:
        return NOTHING
    reqs: list[Requirement] = []
    errors: list[FieldError] = []
    for key in sorted(spec.get("matchLabels") or {}):
        value = spec["matchLabels"][key]
        req, errs = new_requirement(key, IN, [value], f"{path}.matchLabels")
        errors += errs
        if req:
            reqs.append(req)
    for i, expr in enumerate(spec.get("matchExpressions") or []):
        op = expr.get("operator")
        p = f"{path}.matchExpressions[{i}]"
        if op not in _LABEL_SELECTOR_OPS:
            errors.append(invalid(f"{p}.operator", op, "is not a valid label selector operator"))
            continue
        # Upstream copies the values with append([]string(nil), ...): no values is a nil slice.
        req, errs = new_requirement(expr.get("key", ""), op, expr.get("values") or None, p)
        errors += errs
        if req:
            reqs.append(req)
    if errors:
        raise InvalidSelector(errors)
    return LabelSelector(tuple(reqs))


def selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """``labels.SelectorFromSet``: every key must equal its value; an empty set selects everything."""
    if not labels:
        return EVERYTHING
    return LabelSelector(tuple(Requirement(k, IN, frozenset([v])) for k, v in sorted(labels.items())))


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Label requirements ANDed with ``metadata.name`` field requirements."""

    labels: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]
    errors: tuple[FieldError, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.errors:
            return False
        for req in self.labels:
            if not req.matches(labels):
                return False
        if self.fields and node_name:
            name = {"metadata.name": node_name}
            for req in self.fields:
                if not req.matches(name):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """Terms ORed (``v1.NodeSelector``); terms that failed to parse never match, as the lazy selector does."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(term.matches(labels, node_name) for term in self.terms)

    @property
    def errors(self) -> list[FieldError]:
        return [e for term in self.terms for e in term.errors]


def parse_node_selector_term(term: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    """component-helpers ``newNodeSelectorTerm``; its ``matchFields`` checks are still apiserver's."""
    label_reqs: list[Requirement] = []
    field_reqs: list[Requirement] = []
    errors: list[FieldError] = []
    for i, expr in enumerate(term.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        op = expr.get("operator", "")
        if op not in NODE_SELECTOR_OPERATORS:
            errors.append(unsupported(f"{p}.operator", op, list(NODE_SELECTOR_OPERATORS)))
            continue
        req, errs = new_requirement(expr.get("key", ""), op, expr.get("values"), p)
        errors += errs
        if req:
            label_reqs.append(req)
    for i, expr in enumerate(term.get("matchFields") or []):
        p = f"{path}.matchFields[{i}]"
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if key != "metadata.name":
            errors.append(invalid(f"{p}.key", key, "not a valid field selector key"))
            continue
        if op not in (IN, NOT_IN):
            errors.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
            continue
        if len(values) != 1:
            errors.append(required(f"{p}.values", "must have one element"))
            continue
        field_reqs.append(Requirement(key, op, frozenset(values)))
    return NodeSelectorTerm(tuple(label_reqs), tuple(field_reqs), tuple(errors))


def _empty_term(term: Mapping[str, Any] | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


def parse_node_selector(spec: Mapping[str, Any] | None, path: str = "nodeSelectorTerms") -> NodeSelector:
    """A ``v1.NodeSelector``; empty terms select nothing and are dropped, as upstream does."""
    terms = []
    for i, term in enumerate((spec or {}).get("nodeSelectorTerms") or []):
        if _empty_term(term):
            continue
        terms.append(parse_node_selector_term(term, f"{path}[{i}]"))
    return NodeSelector(tuple(terms))
