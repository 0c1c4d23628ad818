"""Toleration operators as the API server validates them: Lt and Gt only with the
TaintTolerationComparisonOperators gate, and then only with a canonical int64 value."""

from __future__ import annotations

import pytest

from kubesched.api.validation import validate
from kubesched.scheduler.features import FeatureGates
from tests.helpers import make_pod

GATE_ON = FeatureGates({"TaintTolerationComparisonOperators": True})


def _pod(operator: str, value: str) -> dict:
    return make_pod("p", tolerations=[{"key": "sla", "operator": operator, "value": value, "effect": "NoSchedule"}])


@pytest.mark.parametrize(("operator", "value", "gates", "want"), [
    pytest.param("Gt", "950", None, 'spec.tolerations[0].operator: Unsupported value: "Gt": supported values: "Equal", "Exists"',
                 id="Gt is refused with the gate off"),
    pytest.param("Lt", "950", {"TaintTolerationComparisonOperators": False},
                 'spec.tolerations[0].operator: Unsupported value: "Lt": supported values: "Equal", "Exists"',
                 id="Lt is refused with the gate explicitly off"),
    pytest.param("Gt", "950", GATE_ON, None, id="Gt with an integer is accepted with the gate on"),
    pytest.param("Lt", "-5", GATE_ON, None, id="a negative integer is canonical"),
    pytest.param("Gt", "0750", GATE_ON,
                 'spec.tolerations[0].value: Invalid value: "0750": must be a valid decimal integer in canonical form',
                 id="a leading zero is refused"),
    pytest.param("Gt", "99999999999999999999", GATE_ON,
                 'spec.tolerations[0].value: Invalid value: "99999999999999999999": must be a valid 64-bit integer',
                 id="a value beyond int64 is refused"),
    pytest.param("Foo", "1", GATE_ON,
                 'spec.tolerations[0].operator: Unsupported value: "Foo": supported values: "Equal", "Exists", "Lt", "Gt"',
                 id="the gate lists the comparison operators among the supported ones"),
])
def test_comparison_operators_follow_the_gate(operator: str, value: str, gates: object, want: str | None) -> None:
    errors = [str(e) for e in validate(_pod(operator, value), gates)]
    assert errors == ([] if want is None else [want])
