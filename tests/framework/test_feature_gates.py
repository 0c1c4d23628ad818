"""``--feature-gates`` parsing as component-base's featureGate.Set does it (strconv.ParseBool values)."""

from __future__ import annotations

import pytest

from kubesched.scheduler.features import FeatureGateError, parse_flag


@pytest.mark.parametrize(("text", "want"), [
    pytest.param("A=true,B=false", {"A": True, "B": False}, id="plain"),
    pytest.param("A= true , B =False", {"A": True, "B": False}, id="spaces around names and values"),
    pytest.param("A=1,B=t,C=T,D=TRUE,E=True", dict.fromkeys("ABCDE", True), id="every true spelling"),
    pytest.param("A=0,B=f,C=F,D=FALSE,E=False", dict.fromkeys("ABCDE", False), id="every false spelling"),
    pytest.param("A=true,,B=false,", {"A": True, "B": False}, id="empty items are skipped"),
    pytest.param("", {}, id="nothing"),
])
def test_feature_gate_flag_values(text, want):
    assert parse_flag(text) == want


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("A=yes", 'invalid value of A=yes, err: strconv.ParseBool: parsing "yes": invalid syntax', id="not a bool"),
    pytest.param("A=tRuE", 'invalid value of A=tRuE, err: strconv.ParseBool: parsing "tRuE": invalid syntax', id="mixed case"),
    pytest.param("A=", 'invalid value of A=, err: strconv.ParseBool: parsing "": invalid syntax', id="empty value"),
    pytest.param(" A ", "missing bool value for A", id="no value: the name is trimmed"),
    pytest.param("A=true, ", "missing bool value for ", id="a blank item is not skipped"),
])
def test_feature_gate_flag_errors(text, message):
    with pytest.raises(FeatureGateError) as error:
        parse_flag(text)
    assert str(error.value) == message
