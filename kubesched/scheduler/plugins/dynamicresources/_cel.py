"""CEL for DRA device selectors (``k8s.io/dynamic-resource-allocation/cel``): the ``device``
variable, compiled selectors and their cache, over the interpreter of :mod:`kubesched.api.cel`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.cel import (
    FUNCTIONS,
    CelCompileError,
    CelError,
    DefaultMap,
    Fn,
    Quantity,
    Semver,
    UInt,
    compile_tree,
    evaluate,
    parse,
    static_type,
    type_name,
)
from kubesched.api.quantity import parse_quantity

__all__ = ["FUNCTIONS", "CelCache", "CelCompileError", "CelError", "CompiledExpression", "Quantity", "Semver", "UInt",
           "attribute_value", "capacity_value", "device_input", "evaluate", "split_qualified"]

#: ``device.driver`` is a string to the compiler, whatever the device.
_DEVICE_TYPES = {("select", ("ident", "device"), "driver"): "string"}


class CompiledExpression:
    """One compiled selector; ``matches(device)`` evaluates it (``CompilationResult.DeviceMatches``)."""

    __slots__ = ("error", "expression", "program")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.program: Fn | None = None
        self.error: str | None = None
        try:
            ast = parse(expression)
            out = static_type(ast, _DEVICE_TYPES)
            if out not in ("bool", "dyn"):
                raise CelCompileError(f"must evaluate to bool or the unknown type, not {out}")
            self.program = compile_tree(ast, frozenset({"device"}))
        except CelCompileError as e:
            self.error = f"compilation failed: {e}"
        except RecursionError:
            self.error = "compilation failed: expression nesting too deep"

    def matches(self, device: Mapping[str, Any]) -> bool:
        """True/False, or CelError for a runtime error (including a non-bool result)."""
        assert self.program is not None
        try:
            result = self.program({"device": device})
        except RecursionError as e:
            raise CelError("expression nesting too deep") from e
        if not isinstance(result, bool):
            raise CelError(f"CEL result of type {type_name(result)} could not be converted to bool")
        return result


class CelCache:
    """Compiled expressions by text (upstream keeps an LRU of 10; all are kept here, they are small)."""

    def __init__(self) -> None:
        self._compiled: dict[str, CompiledExpression] = {}

    def get_or_compile(self, expression: str) -> CompiledExpression:
        compiled = self._compiled.get(expression)
        if compiled is None:
            if len(self._compiled) > 4096:
                self._compiled.clear()
            compiled = self._compiled[expression] = CompiledExpression(expression)
        return compiled


def device_input(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable: attributes and capacity grouped by domain (bare names take the driver)."""
    attrs: DefaultMap = DefaultMap()
    for name, value in attributes.items():
        domain, ident = split_qualified(name, driver)
        attrs.setdefault(domain, {})[ident] = value
    caps: DefaultMap = DefaultMap()
    for name, value in capacity.items():
        domain, ident = split_qualified(name, driver)
        caps.setdefault(domain, {})[ident] = value
    return {"driver": driver, "attributes": attrs, "capacity": caps}


def split_qualified(name: str, default_domain: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (default_domain, name)


def attribute_value(raw: Mapping[str, Any]) -> Any:
    """A ResourceSlice ``DeviceAttribute`` (``{"int": 1}``, ``{"version": "1.2.3"}``...) as a CEL value."""
    if raw.get("int") is not None:
        return int(raw["int"])
    if raw.get("bool") is not None:
        return bool(raw["bool"])
    if raw.get("string") is not None:
        return str(raw["string"])
    if raw.get("version") is not None:
        try:
            return Semver.parse(str(raw["version"]))
        except ValueError as e:
            raise CelError(f"parse semantic version: {e}") from e
    raise CelError("unsupported attribute value")


def capacity_value(raw: Mapping[str, Any]) -> Quantity:
    return Quantity(parse_quantity(raw.get("value", "0")))
