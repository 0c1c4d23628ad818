"""``JSONMemo``: one computation per distinct section, bounded, only the values worth keeping."""

from __future__ import annotations

from kubesched.api.jsonmemo import JSONMemo


def counting(memo: JSONMemo[int], calls: list[object]):
    def get(section: object) -> int:
        return memo.get(section, lambda: calls.append(section) or len(calls))
    return get


def test_equal_sections_are_computed_once_whatever_their_key_order() -> None:
    calls: list[object] = []
    get = counting(JSONMemo(), calls)
    assert get({"a": 1, "b": 2}) == get({"b": 2, "a": 1}) == 1
    assert get({"a": 2}) == 2
    assert len(calls) == 2


def test_values_the_memo_need_not_keep_are_computed_every_time() -> None:
    calls: list[object] = []
    get = counting(JSONMemo(keep=lambda value: value > 1), calls)
    get("first"), get("first"), get("second"), get("second")
    assert calls == ["first", "first", "second"]


def test_a_full_memo_starts_again_and_unencodable_sections_are_computed_each_time() -> None:
    calls: list[object] = []
    get = counting(JSONMemo(size=2), calls)
    get(1), get(2), get(3), get(1)
    assert calls == [1, 2, 3, 1]
    unencodable = {1j}
    get(unencodable), get(unencodable)
    assert calls[-2:] == [unencodable, unencodable]
