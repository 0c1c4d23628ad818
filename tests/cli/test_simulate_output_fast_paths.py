"""``kubesched simulate`` prints large clusters without rich's table layout or json's pure-Python
indenting; the text must be exactly what those give, whatever the cells and values hold."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from kubesched.cli.simulate import indented_json, table_lines

HEADER = ["NAMESPACE", "NAME", "STATUS", "NODE"]


def rich_lines(console: Console, rows: list[list[str]]) -> list[str]:
    """The table as rich lays it out (what ``simulate`` printed before it had a plain path)."""
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="none")
    for column in rows[0]:
        table.add_column(column, no_wrap=True)
    for row in rows[1:]:
        table.add_row(*row)
    with console.capture() as captured:
        console.print(table)
    return [line.rstrip() for line in captured.get().splitlines()]


@pytest.mark.parametrize(("name", "rows", "width"), [
    ("plain cells", [HEADER, ["default", "web-1", "Running", "node-a"], ["shop", "db-0", "Pending", "<none>"]], 250),
    ("no pods: the header alone", [HEADER], 250),
    ("empty cells and short columns", [["A", "B", ""], ["", "x", ""], ["yy", "", "z"]], 250),
    ("markup-like text", [HEADER, ["default", "web-1", "[bold]Running[/bold]", "node-a"]], 250),
    ("an emoji code", [HEADER, ["default", "web-1", ":smile:", "node-a"]], 250),
    ("IPv6 addresses", [["IP"], ["fd00::1"], ["10.0.0.1"]], 250),
    ("wide characters", [HEADER, ["default", "ウェブ", "Running", "node-a"]], 250),
    ("a tab", [HEADER, ["default", "web\t1", "Running", "node-a"]], 250),
    ("a console too narrow: columns shrink", [HEADER, ["default", "web-" + "x" * 60, "Running", "node-" + "y" * 40]], 60),
    ("exactly as wide as the console", [["AAAA", "BB"], ["aaaa", "bb"]], 8),
])
def test_table_reads_as_rich_prints_it(name, rows, width):
    console = Console(highlight=False, soft_wrap=True, width=width)
    assert table_lines(console, rows) == rich_lines(console, rows), name


_cell = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=5).flatmap(
    lambda n: st.lists(st.lists(_cell, min_size=n, max_size=n), min_size=1, max_size=6)), st.integers(10, 80))
def test_any_ascii_table_reads_as_rich_prints_it(rows, width):
    console = Console(highlight=False, soft_wrap=True, width=width)
    assert table_lines(console, rows) == rich_lines(console, rows)


@pytest.mark.parametrize(("name", "doc"), [
    ("objects, lists, scalars", {"a": [1, 2.5, True, None, "x"], "b": {}, "c": [], "d": {"e": [{}]}}),
    ("floats json spells with an exponent", [1e-05, 2.5e-07, -3e-9, 1e16, 1.5e300, 5e-324, 0.0001, 4.0118e-05]),
    ("numbers orjson cannot hold", [2**70, -(2**70)]),
    ("NaN and infinities, written as json writes them", [math.nan, math.inf, -math.inf]),
    ("non-ASCII and control characters", {"name": "café ウェブ", "c": "\x00\x1f\x7f\u2028", "q": "\"\\/"}),
    ("keys that are not strings", {1: "one", False: "f", None: "n", 2.5: "x"}),
    ("strings that look like small numbers", {"m": "used: 0.00001 of 2e-5", "uid": "12345678e-5e-1"}),
    ("tuples", {"t": (1, "2")}),
])
def test_json_reads_as_json_dumps_writes_it(name, doc):
    assert indented_json(doc) == json.dumps(doc, indent=2), name


def test_json_refuses_what_json_dumps_refuses():
    with pytest.raises(TypeError):
        indented_json({"s": {1, 2}})


_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
_json = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                     max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(_json)
@example(1e-05)  # a small float that is the whole document, with no space before it
@example([-2.5e-07, {"x": 0.00001}])
def test_any_json_document_reads_as_json_dumps_writes_it(doc):
    assert indented_json(doc) == json.dumps(doc, indent=2)
