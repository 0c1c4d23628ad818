"""Label selectors and node selectors with apimachinery's semantics.

A selector is compiled once into immutable requirements. Each requirement can be evaluated on one
label map (``matches``) and, through ``kubesched.nodetable``, on a whole column of node labels at
once; both read the same fields (``key``, ``op``, ``values``, ``number``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubesched.api.errors import FieldError, invalid, required, unsupported

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, EQUALS, NOT_EQUALS = (
    "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "=", "!=",
)

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class InvalidSelector(ValueError):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


def qualified_name_errors(name: str) -> list[str]:
    """``validation.IsQualifiedName``: an optional DNS subdomain prefix and a name of <= 63 chars."""
    parts = name.split("/")
    if len(parts) == 1:
        prefix, short = "", parts[0]
    elif len(parts) == 2:
        prefix, short = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            return ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric character"]
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
                "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional "
                "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not short:
        return ["name part must be non-empty"]
    if len(short) > 63:
        return ["name part must be no more than 63 characters"]
    if not _QUALIFIED_NAME.match(short):
        return ["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
    return []


def label_value_errors(value: str) -> list[str]:
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if not _LABEL_VALUE.match(value):
        return ["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
    return []


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


def new_requirement(key: str, op: str, values: Iterable[str], path: str) -> tuple[Requirement | None, list[FieldError]]:
    """``labels.NewRequirement`` with its validation messages."""
    values = list(values or [])
    errors: list[FieldError] = []
    for msg in qualified_name_errors(key) if isinstance(key, str) else ["must be a string"]:
        errors.append(invalid(f"{path}.key", key, msg))
    number = 0
    if op in (IN, NOT_IN, EQUALS, NOT_EQUALS):
        if op in (IN, NOT_IN) and not values:
            errors.append(invalid(f"{path}.values", "[]string{}", "for 'in', 'notin' operators, values set can't be empty"))
        if op in (EQUALS, NOT_EQUALS) and len(values) != 1:
            errors.append(invalid(f"{path}.values", values, "exact-match compatibility requires one single value"))
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.append(invalid(f"{path}.values", values, "values set must be empty for exists and does not exist"))
    elif op in (GT, LT):
        if len(values) != 1:
            errors.append(invalid(f"{path}.values", values, "for 'Gt', 'Lt' operators, exactly one value is required"))
        else:
            parsed = parse_int64(values[0])
            if parsed is None:
                errors.append(invalid(f"{path}.values[0]", values[0], "for 'Gt', 'Lt' operators, the value must be an integer"))
            else:
                number = parsed
    else:
        errors.append(unsupported(f"{path}.operator", op, [IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT]))
    for i, value in enumerate(values):
        if op in (GT, LT):
            continue
        for msg in label_value_errors(value) if isinstance(value, str) else ["must be a string"]:
            errors.append(invalid(f"{path}.values[{i}]", value, msg))
    if errors:
        return None, errors
    return Requirement(key, op, frozenset(values), number), []


_LABEL_SELECTOR_OPS = {IN, NOT_IN, EXISTS, DOES_NOT_EXIST}


def parse_label_selector(spec: Mapping | None, path: str = "labelSelector") -> LabelSelector:
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
        req, errs = new_requirement(expr.get("key", ""), op, expr.get("values") or [], p)
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


def parse_node_selector_term(term: Mapping, path: str) -> NodeSelectorTerm:
    label_reqs: list[Requirement] = []
    field_reqs: list[Requirement] = []
    errors: list[FieldError] = []
    for i, expr in enumerate(term.get("matchExpressions") or []):
        p = f"{path}.matchExpressions[{i}]"
        req, errs = new_requirement(expr.get("key", ""), expr.get("operator"), expr.get("values") or [], p)
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


def _empty_term(term: Mapping | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


def parse_node_selector(spec: Mapping | None, path: str = "nodeSelectorTerms") -> NodeSelector:
    """A ``v1.NodeSelector``; empty terms select nothing and are dropped, as upstream does."""
    terms = []
    for i, term in enumerate((spec or {}).get("nodeSelectorTerms") or []):
        if _empty_term(term):
            continue
        terms.append(parse_node_selector_term(term, f"{path}[{i}]"))
    return NodeSelector(tuple(terms))
