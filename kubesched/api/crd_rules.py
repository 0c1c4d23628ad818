"""CEL validation rules of CustomResourceDefinitions (``x-kubernetes-validations``), as
apiextensions-apiserver's ``schema/cel`` validator checks them: each rule compiled when the CRD is
written (a rule that does not compile refuses the CRD, naming it), then evaluated on every create
and update of a custom object with ``self`` bound to the value of the field the rule sits on.

A rule that refers to ``oldSelf`` is a transition rule: it is evaluated on updates only, where the
field had a value before (object properties and map values correlate by key, ``map`` lists by
their keys; other list items have no old value, so a transition rule may not sit under them). A
rule that is false answers with its ``message`` (or ``messageExpression``'s value, or
``failed rule: <rule>``), at the field, or at ``fieldPath`` under it, as the error type ``reason``
names. As upstream's ratcheting does, a rule without ``oldSelf`` is not held against a value an
update leaves unchanged.

The expressions run on :mod:`kubesched.api.cel`; what it does not implement (timestamps,
durations, optional types, hence ``optionalOldSelf``) refuses the CRD at its creation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kubesched.api import cel
from kubesched.api.errors import OMIT_VALUE, FieldError, forbidden, invalid, required, unsupported

REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"]
_ROOT_META = ("name", "generateName")
_VARIABLES = frozenset({"self", "oldSelf"})


@dataclass(frozen=True)
class CompiledRule:
    """One rule of a schema node, ready to evaluate."""

    rule: str
    program: cel.Fn
    transition: bool
    message: str
    message_program: cel.Fn | None
    field_path: tuple[str, ...]
    reason: str

    def shown(self) -> str:
        """``ruleErrorString``: the message when there is one, else the rule."""
        return self.message.strip() or self.rule.strip()


# --- at the CRD's write -------------------------------------------------------------------------
def schema_rule_errors(schema: Any, path: str) -> list[FieldError]:
    """Why the rules of ``schema`` (a version's ``openAPIV3Schema`` at ``path``) cannot be served."""
    errors: list[FieldError] = []
    for node, at, correlatable in _nodes(schema, path, True):
        for i, rule in enumerate(node.get("x-kubernetes-validations") or ()):
            errors += _rule_errors(node, rule, f"{at}.x-kubernetes-validations[{i}]", correlatable)
    return errors


def _nodes(schema: Any, path: str, correlatable: bool) -> Iterator[tuple[Mapping[str, Any], str, bool]]:
    """Every schema node under ``schema`` with its path and whether its values have old values."""
    if not isinstance(schema, Mapping):
        return
    yield schema, path, correlatable
    for name, child in (schema.get("properties") or {}).items():
        yield from _nodes(child, f"{path}.properties[{name}]", correlatable)
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _nodes(schema["additionalProperties"], f"{path}.additionalProperties", correlatable)
    if isinstance(schema.get("items"), Mapping):
        keyed = schema.get("x-kubernetes-list-type") == "map"
        yield from _nodes(schema["items"], f"{path}.items", correlatable and keyed)


def _rule_errors(node: Mapping[str, Any], rule: Any, path: str, correlatable: bool) -> list[FieldError]:
    if not isinstance(rule, Mapping):
        return [invalid(path, rule, "must be an object")]
    text = rule.get("rule")
    if not isinstance(text, str) or not text.strip():
        return [required(f"{path}.rule")]
    errors: list[FieldError] = []
    try:
        tree = _compile(text)[0]
        undefined = _undefined_field(tree, node)
        if undefined:
            errors.append(invalid(f"{path}.rule", text, f"compilation failed: undefined field '{undefined}'"))
        elif cel.static_type(tree) not in ("bool", "dyn"):
            errors.append(invalid(f"{path}.rule", text, "compilation failed: cel expression must evaluate to a bool"))
        uses_old = cel.references(tree, "oldSelf")
        if uses_old and not correlatable:
            errors.append(invalid(f"{path}.rule", text, "oldSelf cannot be used on the uncorrelatable portion of the schema "
                                  "(under the items of a list whose x-kubernetes-list-type is not map)"))
        if rule.get("optionalOldSelf"):
            errors.append(invalid(f"{path}.optionalOldSelf", True, "may not be set if oldSelf is not used in rule" if not uses_old
                                  else "optional types are not supported by kubesched's CEL interpreter"))
    except (cel.CelCompileError, RecursionError) as e:
        errors.append(invalid(f"{path}.rule", text, f"compilation failed: {e or 'expression nesting too deep'}"))
    errors += _message_errors(rule, path)
    reason = rule.get("reason")
    if reason is not None and reason not in REASONS:
        errors.append(unsupported(f"{path}.reason", reason, REASONS))
    field_path = rule.get("fieldPath")
    if field_path:
        try:
            _field_path(node, str(field_path))
        except ValueError as e:
            errors.append(invalid(f"{path}.fieldPath", field_path, f"fieldPath must be a valid path: {e}"))
    return errors


def _undefined_field(tree: Any, schema: Mapping[str, Any]) -> str:
    """The first field a selection from ``self`` or ``oldSelf`` names that the schema does not
    declare ("" when none): what cel-go's type checker refuses as an undefined field. Values whose
    schema declares no properties (maps, preserved unknown fields) may have any field."""
    if isinstance(tree, tuple) and tree and tree[0] == "select":
        parent = _schema_of(tree[1], schema)
        if parent is not None and _declares_fields(parent) and tree[2] not in parent["properties"]:
            return str(tree[2])
    if isinstance(tree, (tuple, list)):
        for part in tree:
            found = _undefined_field(part, schema)
            if found:
                return found
    return ""


def _schema_of(node: Any, schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema of the value an expression node selects from ``self``/``oldSelf``, if it does."""
    if node in (("ident", "self"), ("ident", "oldSelf")):
        return schema
    if not isinstance(node, tuple) or not node or node[0] not in ("select", "index"):
        return None
    parent = _schema_of(node[1], schema)
    if parent is None:
        return None
    if node[0] == "select":
        child = (parent.get("properties") or {}).get(node[2])
    else:
        child = parent.get("items") if parent.get("type") == "array" else parent.get("additionalProperties")
    return child if isinstance(child, Mapping) else None


def _declares_fields(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("properties")) and not schema.get("x-kubernetes-preserve-unknown-fields") and \
        not schema.get("additionalProperties")


def _message_errors(rule: Mapping[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    message = rule.get("message")
    if message is not None:
        if not str(message).strip():
            errors.append(invalid(f"{path}.message", message, "message must be non-empty if specified"))
        elif "\n" in str(message):
            errors.append(invalid(f"{path}.message", message, "message must not contain line breaks"))
    expression = rule.get("messageExpression")
    if expression is not None:
        if not str(expression).strip():
            errors.append(required(f"{path}.messageExpression", "messageExpression must be non-empty if specified"))
            return errors
        try:
            tree = _compile(str(expression))[0]
            if cel.static_type(tree) not in ("string", "dyn"):
                errors.append(invalid(f"{path}.messageExpression", expression,
                                      "messageExpression compilation failed: must evaluate to a string"))
        except (cel.CelCompileError, RecursionError) as e:
            errors.append(invalid(f"{path}.messageExpression", expression, f"messageExpression compilation failed: {e}"))
    return errors


@lru_cache(maxsize=1024)
def _compile(expression: str) -> tuple[cel.Node, cel.Fn]:
    """Tree and program of an expression over ``self`` and ``oldSelf`` (CelCompileError)."""
    tree = cel.parse(expression)
    return tree, cel.compile_tree(tree, _VARIABLES)


_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]")


def _field_path(node: Mapping[str, Any], text: str) -> tuple[str, ...]:
    """``ValidFieldPath``: the fields ``.a.b`` or ``['a']`` name, each specified by the schema."""
    parts: list[str] = []
    at, schema = 0, node
    while at < len(text):
        match = _PATH_TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"unexpected {text[at:]!r}")
        name = match.group(1) if match.group(1) is not None else re.sub(r"\\(.)", r"\1", match.group(2))
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        child = props.get(name) if name in props else (extra if isinstance(extra, Mapping) and not props else None)
        if not isinstance(child, Mapping):
            raise ValueError("does not refer to a valid field")
        parts.append(name)
        schema, at = child, match.end()
    return tuple(parts)


def compiled_rules(node: Mapping[str, Any]) -> list[CompiledRule]:
    """The rules of one schema node (a CRD that was accepted compiles)."""
    out = []
    for rule in node.get("x-kubernetes-validations") or ():
        tree, program = _compile(rule["rule"])
        expression = rule.get("messageExpression")
        out.append(CompiledRule(
            rule["rule"], program, cel.references(tree, "oldSelf"), str(rule.get("message") or ""),
            _compile(expression)[1] if expression else None,
            _field_path(node, rule["fieldPath"]) if rule.get("fieldPath") else (), rule.get("reason") or "FieldValueInvalid"))
    return out


# --- on a custom object's write ---------------------------------------------------------------------
_MISSING = object()
#: How an error at the object itself names its field (a nil ``field.Path``).
_ROOT_PATH = "<nil>"


def object_rule_errors(schema: Mapping[str, Any] | None, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """Every rule of ``schema`` that ``obj`` (replacing ``old`` on an update) breaks."""
    if schema is None or not _has_rules(schema):
        return []
    errors: list[FieldError] = []
    _walk(schema, _root_value(schema, obj), _root_value(schema, old) if old is not None else _MISSING, "", errors.append)
    return errors


def _has_rules(schema: Any) -> bool:
    return any(node.get("x-kubernetes-validations") for node, _, _ in _nodes(schema, "", True))


def _root_value(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> Any:
    """The object as the root rule sees it: ``metadata`` reduced to name and generateName, numbers
    of ``number`` fields as doubles."""
    meta = obj.get("metadata") or {}
    root = {**obj, "metadata": {k: meta[k] for k in _ROOT_META if k in meta}}
    return _typed(schema, root)


def _typed(schema: Any, value: Any) -> Any:
    if not isinstance(schema, Mapping):
        return value
    if schema.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        return {k: _typed(props.get(k) if k in props else extra, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(schema.get("items"), v) for v in value]
    return value


def _walk(schema: Mapping[str, Any], value: Any, old: Any, path: str, report: Callable[[FieldError], None]) -> None:
    if value is None:
        return  # null values are not validated; a rule on the parent may look at them
    if schema.get("x-kubernetes-validations"):
        _evaluate(schema, value, old, path, report)
    if isinstance(value, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        prefix = f"{path}." if path else ""
        for key, item in value.items():
            child = props.get(key) if key in props else (extra if isinstance(extra, Mapping) else None)
            if isinstance(child, Mapping):
                before = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                _walk(child, item, before, f"{prefix}{key}" if key in props else f"{path}[{key}]", report)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        olds = _old_items(schema, value, old)
        for i, item in enumerate(value):
            _walk(schema["items"], item, olds[i], f"{path}[{i}]", report)


def _old_items(schema: Mapping[str, Any], value: list[Any], old: Any) -> list[Any]:
    """The old value of each item: the old item with the same keys in a ``map`` list, none else."""
    keys = schema.get("x-kubernetes-list-map-keys") or ()
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not keys:
        return [_MISSING] * len(value)
    by_key = {tuple(o.get(k) for k in keys): o for o in old if isinstance(o, dict)}
    return [by_key.get(tuple(v.get(k) for k in keys), _MISSING) if isinstance(v, dict) else _MISSING for v in value]


def _evaluate(schema: Mapping[str, Any], value: Any, old: Any, path: str, report: Callable[[FieldError], None]) -> None:
    unchanged = old is not _MISSING and old == value
    where = path or _ROOT_PATH
    kind = str(schema.get("type") or "")  # evaluation errors show the schema's type as the value
    for rule in compiled_rules(schema):
        if (rule.transition and old is _MISSING) or (unchanged and not rule.transition):
            continue
        env = {"self": value, "oldSelf": None if old is _MISSING else old}
        try:
            result = rule.program(env)
        except cel.CelError as e:
            report(invalid(where, kind, f"{e} evaluating rule: {rule.shown()}"))
            continue
        except RecursionError:
            report(invalid(where, kind, f"expression nesting too deep evaluating rule: {rule.shown()}"))
            continue
        if result is True:
            continue
        if result is not False:
            report(invalid(where, kind, f"rule did not evaluate to a bool evaluating rule: {rule.shown()}"))
            continue
        at = ".".join(p for p in (path, *rule.field_path) if p) or _ROOT_PATH
        report(_reason_error(rule.reason, at, value, _message(rule, env)))


def _shown(value: Any) -> Any:
    """What a failed rule's error shows of the value: nothing for an object or a list."""
    return OMIT_VALUE if isinstance(value, (dict, list)) else value


def _message(rule: CompiledRule, env: Mapping[str, Any]) -> str:
    """The messageExpression's value when it yields a usable string, else the message, else
    ``failed rule: <rule>``."""
    if rule.message_program is not None:
        try:
            text = rule.message_program(dict(env))
        except (cel.CelError, RecursionError):
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text.strip()
    return rule.message.strip() or f"failed rule: {rule.rule.strip()}"


def _reason_error(reason: str, path: str, value: Any, detail: str) -> FieldError:
    """``fieldErrorForReason``: the error type the rule's ``reason`` names."""
    if reason == "FieldValueForbidden":
        return forbidden(path, detail)
    if reason == "FieldValueRequired":
        return required(path, detail)
    if reason == "FieldValueDuplicate":
        return FieldError(path, "Duplicate value", "", value)
    return invalid(path, _shown(value), detail)
