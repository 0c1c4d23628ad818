"""Every function the DRA selector interpreter offers, checked against Kubernetes' CEL semantics.

Cases come from upstream's own tables where they exist: ``k8s.io/apiserver/pkg/cel/library``
(``quantity_test.go``, ``semver_test.go``), ``k8s.io/dynamic-resource-allocation/cel``
(``compile_test.go``) and cel-go's ``ext`` string library (the behaviour of ``ext/strings.go``,
which the Kubernetes base environment declares). Each case is named after the function it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubesched.scheduler.plugins.dynamicresources._cel import (
    CelCompileError,
    CelError,
    CompiledExpression,
    Quantity,
    Semver,
    UInt,
    evaluate,
)
from kubesched.scheduler.plugins.dynamicresources._cel import device_input as build_device


@dataclass(frozen=True)
class Err:
    """The evaluation fails with this message (upstream's text, matched in full)."""

    message: str


@dataclass(frozen=True)
class CompileErr:
    """The expression does not compile; the message contains this."""

    message: str


def q(text: str) -> Quantity:
    return evaluate(f'quantity("{text}")')


#: (function, case, expression, result)
CASES: list[tuple[str, str, str, Any]] = [
    # --- quantity library (quantity_test.go) ------------------------------------------------------
    ("quantity", "parse", 'quantity("12Mi") == quantity("12582912")', True),
    ("quantity", "parseInvalidSuffix", 'quantity("10Mo")',
     Err("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")),
    ("quantity", "parseInvalidSuffixPassesRegex", 'quantity("10Mm")', Err("unable to parse quantity's suffix")),
    ("quantity", "noOverload", "quantity(1)", Err("no such overload: quantity(int)")),
    ("isQuantity", "isQuantity", 'isQuantity("20")', True),
    ("isQuantity", "megabytes", 'isQuantity("20M")', True),
    ("isQuantity", "mebibytes", 'isQuantity("20Mi")', True),
    ("isQuantity", "invalidSuffix", 'isQuantity("20Mo")', False),
    ("isQuantity", "passingRegex", 'isQuantity("10Mm")', False),
    ("isQuantity", "noOverload", "isQuantity([1, 2, 3])", Err("no such overload: isQuantity(list)")),
    ("quantity ==", "equality_reflexivity", 'quantity("200M") == quantity("200M")', True),
    ("quantity ==", "equality_symmetry", 'quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    ("quantity ==", "equality_transitivity",
     'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")', True),
    ("quantity ==", "inequality", 'quantity("200M") == quantity("0.3G")', False),
    ("isLessThan", "quantity_less", 'quantity("50M").isLessThan(quantity("50Mi"))', True),
    ("isLessThan", "quantity_less_obvious", 'quantity("50M").isLessThan(quantity("100M"))', True),
    ("isLessThan", "quantity_less_false", 'quantity("100M").isLessThan(quantity("50M"))', False),
    ("isGreaterThan", "quantity_greater", 'quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ("isGreaterThan", "quantity_greater_obvious", 'quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ("isGreaterThan", "quantity_greater_false", 'quantity("50M").isGreaterThan(quantity("100M"))', False),
    ("compareTo", "quantity_equal", 'quantity("200M").compareTo(quantity("0.2G"))', 0),
    ("compareTo", "quantity_less", 'quantity("50M").compareTo(quantity("50Mi"))', -1),
    ("compareTo", "quantity_greater", 'quantity("50Mi").compareTo(quantity("50M"))', 1),
    ("compareTo", "quantity_with_semver", 'quantity("1").compareTo(semver("1.0.0"))', Err("no such overload: compareTo(kubernetes.Quantity, kubernetes.Semver)")),
    ("add", "add_quantity", 'quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ("add", "add_int", 'quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ("sub", "sub_quantity", 'quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ("sub", "sub_int", 'quantity("50k").sub(20) == quantity("49980")', True),
    ("sub", "arith_chain_1", 'quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980),
    ("sub", "arith_chain", 'quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()', 20),
    ("asInteger", "as_integer", 'quantity("50k").asInteger()', 50000),
    ("asInteger", "as_integer_error", 'quantity("9999999999999999999999999999999999999G").asInteger()',
     Err("cannot convert value to integer")),
    ("asInteger", "fraction", 'quantity("500m").asInteger()', Err("cannot convert value to integer")),
    ("isInteger", "too_large", 'quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ("isInteger", "is_integer", 'quantity("50").isInteger()', True),
    ("isInteger", "fraction", 'quantity("500m").isInteger()', False),
    ("asApproximateFloat", "as_float", 'quantity("50.703k").asApproximateFloat()', 50703.0),
    ("sign", "positive", 'quantity("5Gi").sign()', 1),
    ("sign", "zero", 'quantity("0").sign()', 0),
    ("sign", "negative", 'quantity("-1m").sign()', -1),
    # --- semver library (semver_test.go) ----------------------------------------------------------
    ("semver", "parse", 'semver("1.2.3") == semver("1.2.3")', True),
    ("semver", "parseInvalidVersion", 'semver("v1.0")', Err("No Major.Minor.Patch elements found")),
    ("semver", "parseLeadingZero", 'semver("01.0.0")', Err('Major number must not contain leading zeroes "01"')),
    ("semver", "parseInvalidPatch", 'semver("1.0.x")', Err('Invalid character(s) found in patch number "x"')),
    ("semver", "parseEmpty", 'semver("")', Err("Version string empty")),
    ("semver", "equality_normalize", 'semver("v01.01", true) == semver("1.1.0")', True),
    ("semver", "equality_reflexivity", 'semver("1.2.3") == semver("1.2.3")', True),
    ("semver", "inequality", 'semver("1.2.3") == semver("1.0.0")', False),
    ("semver", "build_metadata_ignored_in_order", 'semver("1.2.3+build.5").compareTo(semver("1.2.3"))', 0),
    ("isSemver", "isSemver", 'isSemver("1.2.3-beta.1+build.1")', True),
    ("isSemver", "empty_false", 'isSemver("")', False),
    ("isSemver", "v_prefix_false", 'isSemver("v1.0.0")', False),
    ("isSemver", "leading_whitespace_false", 'isSemver(" 1.0.0")', False),
    ("isSemver", "contains_whitespace_false", 'isSemver("1. 0.0")', False),
    ("isSemver", "trailing_whitespace_false", 'isSemver("1.0.0 ")', False),
    ("isSemver", "leading_zeros_false", 'isSemver("01.01.01")', False),
    ("isSemver", "major_only_false", 'isSemver("1")', False),
    ("isSemver", "major_minor_only_false", 'isSemver("1.1")', False),
    ("isSemver", "empty_normalize_false", 'isSemver("", true)', False),
    ("isSemver", "leading_whitespace_normalize_false", 'isSemver(" 1.0.0", true)', False),
    ("isSemver", "contains_whitespace_normalize_false", 'isSemver("1. 0.0", true)', False),
    ("isSemver", "trailing_whitespace_normalize_false", 'isSemver("1.0.0 ", true)', False),
    ("isSemver", "v_prefix_normalize_true", 'isSemver("v1.0.0", true)', True),
    ("isSemver", "leading_zeros_normalize_true", 'isSemver("01.01.01", true)', True),
    ("isSemver", "major_only_normalize_true", 'isSemver("1", true)', True),
    ("isSemver", "major_minor_only_normalize_true", 'isSemver("1.1", true)', True),
    ("isSemver", "noOverload", "isSemver([1, 2, 3])", Err("no such overload: isSemver(list)")),
    ("isLessThan", "semver_less", 'semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ("isLessThan", "semver_less_false", 'semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ("isLessThan", "semver_prerelease_first", 'semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))', True),
    ("isGreaterThan", "semver_greater", 'semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ("isGreaterThan", "semver_greater_false", 'semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ("compareTo", "semver_equal", 'semver("1.2.3").compareTo(semver("1.2.3"))', 0),
    ("compareTo", "semver_less", 'semver("1.0.0").compareTo(semver("1.2.3"))', -1),
    ("compareTo", "semver_greater", 'semver("1.2.3").compareTo(semver("1.0.0"))', 1),
    ("major", "major", 'semver("1.2.3").major()', 1),
    ("minor", "minor", 'semver("1.2.3").minor()', 2),
    ("patch", "patch", 'semver("1.2.3").patch()', 3),
    # --- string extensions (cel-go ext/strings.go) ------------------------------------------------
    ("charAt", "middle", '"tacocat".charAt(3)', "o"),
    ("charAt", "at_size_is_empty", '"tacocat".charAt(7)', ""),
    ("charAt", "beyond_size", '"tacocat".charAt(8)', Err("index out of range: 8")),
    ("charAt", "negative", '"tacocat".charAt(-1)', Err("index out of range: -1")),
    ("charAt", "code_points", '"©ñT".charAt(1)', "ñ"),
    ("indexOf", "found", '"tacocat".indexOf("ac")', 1),
    ("indexOf", "missing", '"tacocat".indexOf("none")', -1),
    ("indexOf", "empty_sub_is_offset", '"tacocat".indexOf("", 3)', 3),
    ("indexOf", "from_offset", '"tacocat".indexOf("a", 3)', 5),
    ("indexOf", "offset_beyond", '"tacocat".indexOf("a", 30)', Err("index out of range: 30")),
    ("indexOf", "code_points", '"ta©o©ñT".indexOf("©ñ", 1)', 4),
    ("indexOf", "wrong_type", '"tacocat".indexOf(1)', Err("no such overload: indexOf(string, int)")),
    ("lastIndexOf", "found", '"tacocat".lastIndexOf("at")', 5),
    ("lastIndexOf", "missing", '"tacocat".lastIndexOf("none")', -1),
    ("lastIndexOf", "empty_sub_is_size", '"tacocat".lastIndexOf("")', 7),
    ("lastIndexOf", "up_to_offset", '"tacocat".lastIndexOf("a", 3)', 1),
    ("lastIndexOf", "offset_clamped", '"tacocat".lastIndexOf("cat", 6)', 4),
    ("lastIndexOf", "offset_beyond", '"tacocat".lastIndexOf("a", 30)', Err("index out of range: 30")),
    ("lastIndexOf", "empty_string", '"".lastIndexOf("@@")', Err("index out of range: -1")),
    ("lowerAscii", "ascii", '"TacoCat".lowerAscii()', "tacocat"),
    ("lowerAscii", "non_ascii_untouched", '"TacoCÆt Xii".lowerAscii()', "tacocÆt xii"),
    ("upperAscii", "ascii", '"tacoCat".upperAscii()', "TACOCAT"),
    ("upperAscii", "non_ascii_untouched", '"tacoCñt".upperAscii()', "TACOCñT"),
    ("replace", "all", '"12 days 12 hours".replace("{0}", "2")', "12 days 12 hours"),
    ("replace", "every_occurrence", '"{0} days {0} hours".replace("{0}", "2")', "2 days 2 hours"),
    ("replace", "at_most_n", '"{0} days {0} hours".replace("{0}", "2", 1)', "2 days {0} hours"),
    ("replace", "zero_times", '"{0} days {0} hours".replace("{0}", "2", 0)', "{0} days {0} hours"),
    ("replace", "negative_n_is_all", '"{0} days {0} hours".replace("{0}", "2", -1)', "2 days 2 hours"),
    ("replace", "code_points", '"ta©o©ñT".replace("©ñ", "©")', "ta©o©T"),
    ("replace", "empty_old_between_every_char", '"ab".replace("", "-")', "-a-b-"),
    ("split", "separator", '"hello world".split(" ")', ["hello", "world"]),
    ("split", "at_most_n", '"hello world event".split(" ", 2)', ["hello", "world event"]),
    ("split", "zero_parts", '"hello world".split(" ", 0)', []),
    ("split", "negative_n_is_all", '"a b c".split(" ", -1)', ["a", "b", "c"]),
    ("split", "empty_separator", '"hello".split("")', ["h", "e", "l", "l", "o"]),
    ("split", "empty_separator_at_most_n", '"hello".split("", 2)', ["h", "ello"]),
    ("split", "empty_input", '"".split(",")', [""]),
    ("substring", "from", '"tacocat".substring(4)', "cat"),
    ("substring", "from_size", '"tacocat".substring(7)', ""),
    ("substring", "range", '"tacocat".substring(0, 4)', "taco"),
    ("substring", "empty_range", '"tacocat".substring(4, 4)', ""),
    ("substring", "code_points", '"ta©o©ñT".substring(2, 6)', "©o©ñ"),
    ("substring", "start_beyond", '"tacocat".substring(40)', Err("index out of range: 40")),
    ("substring", "negative_start", '"tacocat".substring(-1)', Err("index out of range: -1")),
    ("substring", "end_beyond", '"tacocat".substring(1, 40)', Err("index out of range: 40")),
    ("substring", "start_after_end", '"tacocat".substring(3, 2)', Err("invalid substring range. start: 3, end: 2")),
    ("trim", "blanks", '"  \\ttrim\\n    ".trim()', "trim"),
    ("trim", "unicode_space", '"\\u2002trim\\u3000".trim()', "trim"),
    ("trim", "separators_are_not_space", '"\\u001ctrim".trim()', "\x1ctrim"),
    ("join", "no_separator", '["x", "y"].join()', "xy"),
    ("join", "separator", '["x", "y"].join("-")', "x-y"),
    ("join", "empty_list", "[].join()", ""),
    ("join", "not_strings", '[1, 2].join("-")', Err("no such overload: join(list, string)")),
    ("contains", "found", '"tacocat".contains("coca")', True),
    ("contains", "missing", '"tacocat".contains("dog")', False),
    ("startsWith", "prefix", '"tacocat".startsWith("taco")', True),
    ("endsWith", "suffix", '"tacocat".endsWith("cat")', True),
    ("endsWith", "wrong_type", '"tacocat".endsWith(1)', Err("no such overload: endsWith(string, int)")),
    ("matches", "anywhere", '"tacocat".matches("oca")', True),
    ("matches", "anchored", '"tacocat".matches("^cat")', False),
    ("matches", "global_form", 'matches("tacocat", "t.c")', True),
    ("size", "code_points", 'size("ta©o")', 4),
    ("size", "method", '"abc".size()', 3),
    ("size", "list", "[1, 2].size()", 2),
    ("size", "map", '{"a": 1}.size()', 1),
    # --- Kubernetes list library (the examples of library/lists.go) --------------------------------
    ("isSorted", "ints", "[1, 2, 3].isSorted()", True),
    ("isSorted", "strings_with_repeats", "['a', 'b', 'b', 'c'].isSorted()", True),
    ("isSorted", "doubles_descending", "[2.0, 1.0].isSorted()", False),
    ("isSorted", "single", "[1].isSorted()", True),
    ("isSorted", "empty", "[].isSorted()", True),
    ("sum", "ints", "[1, 3].sum()", 4),
    ("sum", "doubles", "[1.0, 3.0].sum()", 4.0),
    ("sum", "uints", "[1u, 3u].sum()", UInt(4)),
    ("sum", "empty", "[].sum()", 0),
    ("sum", "overflow", "[9223372036854775807, 1].sum()", Err("integer overflow")),
    ("min", "ints", "[1, 3].min()", 1),
    ("min", "single", "[1].min()", 1),
    ("min", "concatenated", "([0] + []).min()", 0),
    ("min", "strings", "['b', 'a'].min()", "a"),
    ("min", "empty", "[].min()", Err("min called on empty list")),
    ("max", "ints", "[1, 3].max()", 3),
    ("max", "empty", "[].max()", Err("max called on empty list")),
    ("indexOf", "list", "[1, 2, 2, 3].indexOf(2)", 1),
    ("indexOf", "list_missing", "[1.0].indexOf(1.1)", -1),
    ("indexOf", "empty_list", "[].indexOf('string')", -1),
    ("lastIndexOf", "list", "['a', 'b', 'b', 'c'].lastIndexOf('b')", 2),
    ("lastIndexOf", "list_missing", "[1, 2].lastIndexOf(3)", -1),
    # --- macros ------------------------------------------------------------------------------------
    ("all", "true", "[1, 2, 3].all(x, x > 0)", True),
    ("all", "error_absorbed_by_false", "[0, 1].all(x, 1 / x > 1)", False),
    ("exists", "true", "[1, 2, 3].exists(x, x == 2)", True),
    ("exists", "on_map_keys", '{"a": 1}.exists(k, k == "a")', True),
    ("exists_one", "exactly_one", "[1, 2, 3].exists_one(x, x > 2)", True),
    ("exists_one", "two", "[1, 2, 3].exists_one(x, x > 1)", False),
    ("exists_one", "none", "[1, 2, 3].exists_one(x, x > 5)", False),
    ("map", "doubled", "[1, 2, 3].map(x, x * 2)", [2, 4, 6]),
    ("filter", "kept", "[1, 2, 3].filter(x, x != 2)", [1, 3]),
    ("cel.bind", "binds", "cel.bind(x, 2, x * x) == 4", True),
    ("has", "present", 'has({"a": 1}.a)', True),
    ("has", "absent", 'has({"a": 1}.b)', False),
    # --- conversions -------------------------------------------------------------------------------
    ("int", "from_string", 'int("-42")', -42),
    ("int", "from_string_with_blank", 'int(" 42")', Err("type conversion error from 'string' to 'int'")),
    ("int", "from_string_with_separator", 'int("1_000")', Err("type conversion error from 'string' to 'int'")),
    ("int", "from_double_truncates", "int(-2.7)", -2),
    ("int", "from_uint", "int(3u)", 3),
    ("int", "overflow", "int(18446744073709551615u)", Err("integer overflow")),
    ("uint", "from_string", 'uint("42")', UInt(42)),
    ("uint", "negative", "uint(-1)", Err("unsigned integer overflow")),
    ("double", "from_string", 'double("2.5")', 2.5),
    ("double", "from_string_exponent", 'double("1e3")', 1000.0),
    ("double", "from_string_with_blank", 'double(" 2.5")', Err("type conversion error from 'string' to 'double'")),
    ("double", "from_int", "double(2)", 2.0),
    ("string", "from_int", "string(-7)", "-7"),
    ("string", "from_uint", "string(7u)", "7"),
    ("string", "from_double", "string(2.5)", "2.5"),
    ("string", "from_whole_double", "string(100.0)", "100"),
    ("string", "from_large_double", "string(1e6)", "1e+06"),
    ("string", "from_small_double", "string(0.00001)", "1e-05"),
    ("string", "from_bool", "string(true)", "true"),
    ("string", "from_bytes", 'string(b"abc")', "abc"),
    ("string", "from_invalid_bytes", 'string(b"\\xff")', Err("invalid UTF-8 in bytes, cannot convert to string")),
    ("bool", "from_string", 'bool("true")', True),
    ("bool", "from_short_string", 'bool("T") && !bool("F")', True),
    ("bool", "from_bad_string", 'bool("yes")', Err("type conversion error from 'string' to 'bool'")),
    ("dyn", "identity", "dyn(1) == 1", True),
    ("type", "of_int", "type(1) == int", True),
    ("type", "of_string", 'type("a") == string', True),
    # --- operators -----------------------------------------------------------------------------------
    ("_==_", "heterogeneous_numbers", "1 == 1.0 && 1u == 1", True),
    ("_<_", "cross_type_numbers", "1 < 1.5 && 2u > 1", True),
    ("_/_", "integer_division_truncates", "-7 / 2", -3),
    ("_%_", "remainder_sign_of_dividend", "-7 % 3", -1),
    ("_/_", "division_by_zero", "1 / 0", Err("division by zero")),
    ("_%_", "modulus_by_zero", "1 % 0", Err("modulus by zero")),
    ("_+_", "int_overflow", "9223372036854775807 + 1", Err("integer overflow")),
    ("_+_", "concatenates_lists", "[1] + [2]", [1, 2]),
    ("_in_", "list", "2 in [1, 2]", True),
    ("_&&_", "error_absorbed_by_false", "1 / 0 == 1 && false", False),
    ("_||_", "error_absorbed_by_true", "1 / 0 == 1 || true", True),
    ("_?_:_", "picks", "true ? 1 : 2", 1),
    ("undeclared", "function", 'nosuchfunction("x")', CompileErr("undeclared reference to 'nosuchfunction'")),
]


def _id(case: tuple[str, str, str, Any]) -> str:
    return f"{case[0]}-{case[1]}"


@pytest.mark.parametrize(("function", "name", "expression", "want"), CASES, ids=[_id(c) for c in CASES])
def test_function_agrees_with_kubernetes_cel(function, name, expression, want):
    if isinstance(want, CompileErr):
        with pytest.raises(CelCompileError) as compile_err:
            evaluate(expression)
        assert want.message in str(compile_err.value)
        return
    if isinstance(want, Err):
        with pytest.raises(CelError) as err:
            evaluate(expression)
        assert str(err.value) == want.message
        return
    got = evaluate(expression)
    assert got == want and type(got) is type(want)


def test_every_function_the_interpreter_offers_has_a_case():
    """A function added to the interpreter without a case here fails this test."""
    from kubesched.scheduler.plugins.dynamicresources._cel import FUNCTIONS

    covered = {function for function, *_ in CASES}
    assert set(FUNCTIONS) - covered == set()


# --- DRA selectors (dynamic-resource-allocation/cel compile_test.go) ------------------------------------
DRIVER = "dra.example.com"


def dra_device(attributes: dict[str, Any] | None = None, capacity: dict[str, Any] | None = None, driver: str = DRIVER) -> dict:
    return build_device(driver, attributes or {}, {name: q(value) for name, value in (capacity or {}).items()})


#: (case, expression, device, result: bool, Err or CompileErr)
SELECTOR_CASES: list[tuple[str, str, dict, Any]] = [
    ("true", "true", dra_device(), True),
    ("false", "false", dra_device(), False),
    ("syntax-error", "?!", dra_device(), CompileErr("Syntax error")),
    ("type-error", "1", dra_device(), CompileErr("must evaluate to bool or the unknown type, not int")),
    ("runtime-error-lookup-identifier", 'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
     dra_device(), Err("no such key: noSuchAttr")),
    ("runtime-error-lookup-map", 'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
     dra_device(), Err("no such key: noSuchAttr")),
    ("domain-check-negative", '"no-such-domain" in device.attributes', dra_device(), False),
    ("domain-check-positive", '"dra.example.com" in device.attributes', dra_device({"dra.example.com/something": True}), True),
    ("empty-driver-name", 'device.driver == ""', dra_device(driver=""), True),
    ("real-driver-name", 'device.driver == "dra.example.com"', dra_device(), True),
    ("driver-name-qualifier", 'device.attributes["dra.example.com"].name', dra_device({"name": True}), True),
    ("driver-name-qualifier-map-lookup", 'device.attributes["dra.example.com"]["name"]', dra_device({"name": True}), True),
    ("bind", 'cel.bind(dra, device.attributes["dra.example.com"], dra.name)', dra_device({"name": True}), True),
    ("qualified-attribute-name", 'device.attributes["other.example.com"].name', dra_device({"other.example.com/name": True}), True),
    ("int", 'device.attributes["dra.example.com"].name > 0', dra_device({"name": 1}), True),
    ("string", 'device.attributes["dra.example.com"].name == "fish"', dra_device({"name": "fish"}), True),
    ("version", 'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
     dra_device({"name": Semver.parse("1.0.0")}), True),
    ("quantity", 'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))', dra_device(capacity={"name": "1Mi"}), True),
    ("check-positive", 'device.attributes["dra.example.com"].name.compareTo(semver("1.0.0")) == 0',
     dra_device({"name": Semver.parse("1.0.0")}), True),
    ("missing-attribute", 'device.attributes["dra.example.com"].name', dra_device(), Err("no such key: name")),
    ("non-bool-result", 'device.attributes["dra.example.com"].name', dra_device({"name": "fish"}),
     Err("CEL result of type string could not be converted to bool")),
    ("typical-selector", 'device.driver == "dra.example.com" && '
     'device.capacity["dra.example.com"].memory.compareTo(quantity("10Gi")) >= 0', dra_device(capacity={"memory": "40Gi"}), True),
]


@pytest.mark.parametrize(("expression", "device", "want"), [c[1:] for c in SELECTOR_CASES], ids=[c[0] for c in SELECTOR_CASES])
def test_selector_agrees_with_dra(expression, device, want):
    compiled = CompiledExpression(expression)
    if isinstance(want, CompileErr):
        assert compiled.error is not None and want.message in compiled.error
        return
    assert compiled.error is None, compiled.error
    if isinstance(want, Err):
        with pytest.raises(CelError) as err:
            compiled.matches(device)
        assert str(err.value) == want.message
        return
    assert compiled.matches(device) is want
