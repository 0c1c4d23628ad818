"""Query-string selectors: ``labelSelector`` (apimachinery ``labels.Parse``) and ``fieldSelector``
(``fields.ParseSelector`` plus each kind's supported field labels, as the registry strategies
declare them), and ``metav1.FormatLabelSelector`` for table cells.

A parse failure is a 400 BadRequest with apimachinery's wording, so ``kubectl get -l 'a in b'``
reads the same as against kube-apiserver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from kubesched.api.apierrors import BadRequest
from kubesched.api.crd import field_value
from kubesched.api.kinds import CustomKind, Kind
from kubesched.api.names import label_value_errors, qualified_name_errors
from kubesched.api.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    IN,
    LT,
    NOT_IN,
    LabelSelector,
    Requirement,
    parse_int64,
)

_SPECIAL = set(" \t\n,=!()<>")
_OPERATORS = {"=", "!", "(", ")", ",", "<", ">", "!=", "=="}


# --- label selectors -----------------------------------------------------------------------------
def _tokens(text: str) -> list[str]:
    """Split into identifiers and operators: ``!=``, ``==``, ``=``, ``!``, ``(``, ``)``, ``,``, ``<``, ``>``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith(("!=", "=="), i):
            out.append(text[i:i + 2])
            i += 2
        elif ch in "=!(),<>":
            out.append(ch)
            i += 1
        else:
            j = i
            while j < len(text) and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> str | None:
        tok = self.peek()
        self.pos += 1
        return tok

    def fail(self, found: str | None, expected: str) -> BadRequest:
        shown = "EOS" if found is None else found
        return BadRequest(f"unable to parse requirement: found '{shown}', expected: {expected}")

    def parse(self) -> LabelSelector:
        reqs: list[Requirement] = []
        while self.peek() is not None:
            reqs.append(self.requirement())
            tok = self.take()
            if tok is None:
                break
            if tok != ",":
                raise self.fail(tok, "',' or 'end of string'")
        return LabelSelector(tuple(reqs))

    def requirement(self) -> Requirement:
        tok = self.take()
        if tok == "!":
            return _requirement(self._identifier(self.take()), DOES_NOT_EXIST, [])
        key = self._identifier(tok)
        op = self.peek()
        if op is None or op == ",":
            return _requirement(key, EXISTS, [])
        self.take()
        if op in ("=", "=="):
            return _requirement(key, IN, [self._value()])
        if op == "!=":
            return _requirement(key, NOT_IN, [self._value()])
        if op in (">", "<"):
            return _requirement(key, GT if op == ">" else LT, [self._value()])
        if op in ("in", "notin"):
            return _requirement(key, IN if op == "in" else NOT_IN, self._value_set())
        raise self.fail(op, "'=', '!=', '==', 'in', notin'")

    def _identifier(self, tok: str | None) -> str:
        if tok is None or tok in _OPERATORS:
            raise self.fail(tok, "identifier")
        return tok

    def _value(self) -> str:
        tok = self.peek()
        if tok is None or tok == ",":
            return ""
        if tok in _OPERATORS:
            raise self.fail(tok, "identifier")
        self.take()
        return tok

    def _value_set(self) -> list[str]:
        tok = self.take()
        if tok != "(":
            raise self.fail(tok, "'('")
        values: list[str] = []
        while True:
            tok = self.take()
            if tok == ")":
                if not values:
                    values.append("")
                return values
            if tok == ",":
                if not values:
                    values.append("")
                continue
            if tok is None or tok in _OPERATORS:
                raise self.fail(tok, "',', ')' or identifier")
            values.append(tok)


def _requirement(key: str, op: str, values: list[str]) -> Requirement:
    errors = qualified_name_errors(key)
    if errors:
        raise BadRequest(f"unable to parse requirement: key: Invalid value: \"{key}\": {errors[0]}")
    number = 0
    if op in (GT, LT):
        parsed = parse_int64(values[0]) if values and values[0] else None
        if parsed is None:
            raise BadRequest(f"unable to parse requirement: values[0]: Invalid value: \"{values[0] if values else ''}\": "
                             "for 'Gt', 'Lt' operators, the value must be an integer")
        number = parsed
    else:
        for i, value in enumerate(values):
            bad = label_value_errors(value)
            if bad:
                raise BadRequest(f"unable to parse requirement: values[{i}][{key}]: Invalid value: \"{value}\": {bad[0]}")
    return Requirement(key, op, frozenset(values), number)


def parse_label_selector_string(text: str | None) -> LabelSelector | None:
    """``labels.Parse``; None for an empty selector (everything)."""
    if not text or not text.strip():
        return None
    return _LabelParser(text).parse()


def format_label_selector(selector: Mapping | None) -> str:
    """``metav1.FormatLabelSelector``: ``<none>`` for nil or empty, else the parsed form's string
    (its requirements sorted by key, as ``labels.Selector`` keeps them)."""
    if selector is None:
        return "<none>"
    parts: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        parts.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key", ""), sorted(expr.get("values") or [])
        if op == "In":
            parts.append((key, f"{key} in ({','.join(values)})"))
        elif op == "NotIn":
            parts.append((key, f"{key} notin ({','.join(values)})"))
        elif op == "Exists":
            parts.append((key, key))
        elif op == "DoesNotExist":
            parts.append((key, f"!{key}"))
        else:
            return "<error>"
    if not parts:
        return "<none>"
    return ",".join(text for _, text in sorted(parts, key=lambda part: part[0]))


def format_labels(labels: Mapping | None) -> str:
    """``labels.FormatLabels``: ``k=v`` pairs sorted by key, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


# --- field selectors -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    value: str
    negate: bool


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape(value: str, term: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise BadRequest(f"invalid field selector: invalid escape sequence in '{term}'")
            out.append(value[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(text: str | None) -> list[FieldRequirement]:
    """``fields.ParseSelector``: ``a=b,c!=d`` with ``\\``-escapes in values."""
    if not text:
        return []
    reqs = []
    for term in _split_unescaped(text, ","):
        if not term:
            continue
        for op in ("!=", "==", "="):
            idx = term.find(op)
            if idx >= 0:
                reqs.append(FieldRequirement(term[:idx], _unescape(term[idx + len(op):], term), op == "!="))
                break
        else:
            raise BadRequest(f"invalid field selector: invalid selector: '{text}'; can't understand '{term}'")
    return reqs


FieldGetter = Callable[[dict], str]


def _path(*keys: str) -> FieldGetter:
    def get(obj: dict) -> str:
        cur: object = obj
        for key in keys:
            if not isinstance(cur, dict) and not isinstance(cur, Mapping):  # the common case without the ABC check
                return ""
            cur = cur.get(key)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


def _pod_ip(obj: dict) -> str:
    ips = (obj.get("status") or {}).get("podIPs") or []
    return ips[0].get("ip", "") if ips else ""


def _event_source(obj: dict) -> str:
    return (obj.get("source") or {}).get("component", "") or obj.get("reportingComponent", "")


_COMMON: dict[str, FieldGetter] = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

FIELDS: dict[tuple[str, str], dict[str, FieldGetter]] = {
    ("", "Pod"): {
        "spec.nodeName": _path("spec", "nodeName"), "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"), "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"), "status.podIP": _pod_ip,
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    ("", "Node"): {"spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"},
    ("", "Namespace"): {"status.phase": _path("status", "phase")},
    ("", "Event"): {
        **{f"involvedObject.{f}": _path("involvedObject", f) for f in _INVOLVED},
        "reason": _path("reason"), "reportingComponent": _path("reportingComponent"), "source": _event_source,
        "type": _path("type"),
    },
    ("events.k8s.io", "Event"): {
        **{f"regarding.{f}": _path("regarding", f) for f in _INVOLVED},
        "reason": _path("reason"), "reportingController": _path("reportingController"), "type": _path("type"),
    },
    ("", "ReplicationController"): {"status.replicas": _path("status", "replicas")},
    ("apps", "ReplicaSet"): {"status.replicas": _path("status", "replicas")},
    ("", "Secret"): {"type": _path("type")},
    ("", "PersistentVolumeClaim"): {},
}


def field_predicate(kind: Kind, text: str | None) -> Callable[[dict], bool] | None:
    """A predicate for ``fieldSelector`` on ``kind``; unsupported labels are a 400 as upstream."""
    reqs = parse_field_selector(text)
    if not reqs:
        return None
    fields = {**_COMMON, **FIELDS.get((kind.group, kind.kind), {})}
    if isinstance(kind, CustomKind):  # the CRD version's selectableFields
        fields.update({name: partial(field_value, dotted=name) for name in kind.selectable_fields})
    checks = []
    for req in reqs:
        getter = fields.get(req.field)
        if getter is None:
            raise BadRequest(f'field label not supported: {req.field}')
        checks.append((getter, req.value, req.negate))

    def matches(obj: dict) -> bool:
        for getter, value, negate in checks:  # noqa: SIM110  (all() over a generator costs more: watchers call this on every write)
            if (getter(obj) == value) == negate:
                return False
        return True

    return matches


def single_name(text: str | None) -> str | None:
    """The name a ``metadata.name=X`` field selector pins, for a direct lookup instead of a scan."""
    reqs = parse_field_selector(text)
    names = [r.value for r in reqs if r.field == "metadata.name" and not r.negate]
    return names[0] if names else None


def label_predicate(text: str | None) -> Callable[[dict], bool] | None:
    selector = parse_label_selector_string(text)
    if selector is None:
        return None

    def matches(obj: dict) -> bool:
        return selector.matches((obj.get("metadata") or {}).get("labels") or {})

    return matches


def combine(*predicates: Callable[[dict], bool] | None) -> Callable[[dict], bool] | None:
    active = [p for p in predicates if p is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]
    return lambda obj: all(p(obj) for p in active)
