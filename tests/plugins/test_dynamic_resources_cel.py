"""The DRA CEL subset: device attribute and capacity lookups, comparisons, macros, the Kubernetes
quantity and semver libraries, and cel-go's error texts."""

from __future__ import annotations

import pytest

from kubesched.scheduler.plugins.dynamicresources._cel import CelError, CompiledExpression, Semver, capacity_value, device_input

DEVICE = device_input(
    "gpu.example.com",
    {"model": "a100", "cores": 8, "healthy": True, "other.example.com/rack": "r1", "version": Semver.parse("1.2.3")},
    {"memory": capacity_value({"value": "40Gi"})},
)


def evaluate(expression: str) -> bool:
    compiled = CompiledExpression(expression)
    assert compiled.error is None, compiled.error
    return compiled.matches(DEVICE)


@pytest.mark.parametrize(("expression", "want"), [
    ('device.driver == "gpu.example.com"', True),
    ('device.attributes["gpu.example.com"].model == "a100"', True),
    ('device.attributes["gpu.example.com"]["cores"] > 4 && device.attributes["gpu.example.com"].healthy', True),
    ('device.attributes["other.example.com"].rack == "r1"', True),
    ('"model" in device.attributes["gpu.example.com"]', True),
    ('"gpu.example.com" in device.attributes', True),
    ('"nothing.example.com" in device.attributes', False),
    ('has(device.attributes["gpu.example.com"].model)', True),
    ('has(device.attributes["unknown.example.com"].model)', False),
    ('device.attributes["gpu.example.com"].model in ["t4", "a100"]', True),
    ('device.attributes["gpu.example.com"].model.startsWith("a") && device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")', True),
    ('device.attributes["gpu.example.com"].cores == 8.0 && 8 == 8u', True),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) > 0', True),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))', False),
    ('quantity("1Gi").asInteger() == 1073741824 && !quantity("500m").isInteger()', True),
    ('device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.2.0"))', True),
    ('device.attributes["gpu.example.com"].version == semver("1.2.3") && semver("1.2.3-rc.1").isLessThan(semver("1.2.3"))', True),
    ('cel.bind(gpu, device.attributes["gpu.example.com"], gpu.cores >= 8 && gpu.model == "a100")', True),
    ('[1, 2, 3].all(x, x > 0) && [1, 2].exists(x, x == 2) && [1, 2, 3].map(x, x * 2)[2] == 6', True),
    ('device.attributes["gpu.example.com"].missing == 1 || true', True),
    ('device.attributes["gpu.example.com"].missing == 1 && false', False),
    ("-7 / 2 == -3 && -7 % 3 == -1 && 1.5 < 2", True),
    ('size("ab") == 2 && "a" + "b" == "ab" ? true : false', True),
])
def test_selector_evaluation(expression, want):
    assert evaluate(expression) is want


@pytest.mark.parametrize(("expression", "message"), [
    ('device.attributes["gpu.example.com"].healthyx', "no such key: healthyx"),
    ('device.attributes["unknown.example.com"].x == 1', "no such key: x"),
    ('device.attributes["gpu.example.com"].model', "CEL result of type string could not be converted to bool"),
    ('device.attributes["gpu.example.com"].model < 1', "no such overload: _<_(string, int)"),
    ("1 / 0 == 1", "division by zero"),
])
def test_runtime_errors(expression, message):
    with pytest.raises(CelError) as err:
        evaluate(expression)
    assert str(err.value) == message


@pytest.mark.parametrize(("expression", "message"), [
    ("device.driver", "compilation failed: must evaluate to bool or the unknown type, not string"),
    ("nosuchvar == 1", "compilation failed: undeclared reference to 'nosuchvar' (in container '')"),
    ('nosuchfunction("x")', "compilation failed: undeclared reference to 'nosuchfunction' (in container '')"),
])
def test_compile_errors(expression, message):
    assert CompiledExpression(expression).error == message


def test_syntax_error_is_a_compile_error():
    assert CompiledExpression("device.driver ==").error.startswith("compilation failed: Syntax error")
