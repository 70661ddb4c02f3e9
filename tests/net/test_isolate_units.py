"""The bookkeeping of a node's isolation (``blooml.net._input``, and ``_isolate``'s naming):
which queued input is still live after a failed tick, and taking the rows the runtime names
out of their units."""

from __future__ import annotations

import concurrent.futures
from typing import Any

from blooml.engine._state import Pending
from blooml.net._input import Unit, combine, split_units
from blooml.net._isolate import _named_rows


def _unit(sender: str, rows: list[tuple[Any, ...]], fut: Any = None) -> Unit:
    pend = Pending()
    pend.add("inserts", "msg", rows)
    return Unit(None, pend, fut, None, sender)


def _rows(u: Unit) -> list[Any]:
    return [x for _, _, items in u.lists() for x in items]


class _Named(Exception):
    def __init__(self, rows: list[Any]) -> None:
        super().__init__("poison")
        self.pending_input = {"msg": rows}


def test_units_whose_input_is_all_queued_stay_whole() -> None:
    a, b = _unit("a", [(1,), (2,)]), _unit("b", [(3,)])
    live, gone = split_units(combine([a, b]), [a, b])
    assert live == [a, b] and gone == []
    assert _rows(a) == [(1,), (2,)] and _rows(b) == [(3,)]


def test_input_a_tick_outside_the_node_took_is_gone_and_the_rest_kept() -> None:
    a, b = _unit("a", [(1,), (2,)]), _unit("b", [(3,), (4,)])
    pend = Pending()
    b_rows = _rows(b)
    pend.add("inserts", "msg", [b_rows[1], (9,)])  # a's rows and (3,) were applied; (9,) is new
    live, gone = split_units(pend, [a, b])
    assert gone == [a]
    assert [u.what for u in live] == ["queued input", "datagram from b"]
    assert _rows(live[0]) == [(9,)] and _rows(live[1]) == [(4,)]


def test_equal_rows_are_told_apart_by_identity() -> None:
    one, other = (1,), tuple([1])  # equal, not the same object
    a, b = _unit("a", [one]), _unit("b", [other])
    pend = Pending()
    pend.add("inserts", "msg", [other])
    live, gone = split_units(pend, [a, b])
    assert gone == [a] and live == [b]


def test_named_rows_leave_their_units_together_one_piece_a_unit() -> None:
    a = _unit("a", [(1,), (-1,), (2,), (-2,)])
    b = _unit("b", [(-1,), (3,)])
    found = _named_rows([a, b], _Named([(-1,), (-2,), (-1,)]))
    assert found is not None
    pieces, rest = found
    assert [(p.sender, _rows(p)) for p in pieces] == [("a", [(-1,), (-2,)]), ("b", [(-1,)])]
    assert [(u.sender, _rows(u)) for u in rest] == [("a", [(1,), (2,)]), ("b", [(3,)])]


def test_a_row_named_once_is_taken_once_and_a_call_is_never_cut() -> None:
    call = _unit("c", [(-1,), (5,)], fut=concurrent.futures.Future())
    a = _unit("a", [(-1,), (-1,), (6,)])
    pieces, rest = _named_rows([call, a], _Named([(-1,)])) or ([], [])
    assert [_rows(p) for p in pieces] == [[(-1,)]]
    assert rest[0] is call and _rows(rest[1]) == [(-1,), (6,)]


def test_unhashable_named_rows_are_found_by_equality() -> None:
    a = _unit("a", [(1, [0]), (2, [1])])
    pieces, rest = _named_rows([a], _Named([(2, [1])])) or ([], [])
    assert [_rows(p) for p in pieces] == [[(2, [1])]]
    assert [_rows(u) for u in rest] == [[(1, [0])]]


def test_nothing_named_or_nothing_queued_names_nothing() -> None:
    a = _unit("a", [(1,)])
    assert _named_rows([a], _Named([(7,)])) is None
    assert _named_rows([a], ValueError("no pending_input")) is None


def test_the_log_line_of_a_flood_names_a_few_pieces_and_counts_the_rest() -> None:
    from blooml.net._policy import _describe

    bad: list[tuple[Unit, BaseException]] = [
        (_unit(f"127.0.0.1:{i}", [(i,), (-i,)]), ValueError()) for i in range(500)
    ]
    line = _describe(bad)
    assert line.startswith("datagram from 127.0.0.1:0 (2 items), datagram from 127.0.0.1:1")
    assert line.endswith("and 497 more (1000 items in all)") and len(line) < 200
    assert _describe(bad[:2]).count("datagram from") == 2 and _describe([]) == "nothing"


def test_split_by_tests_each_row_where_it_is_queued() -> None:
    from blooml.net._input import split_by

    call = _unit("c", [(-1,), (5,)], fut=concurrent.futures.Future())
    a, b = _unit("a", [(1,), (-1,), (2,)]), _unit("b", [(3,)])
    pieces, rest = split_by([call, a, b], "msg", lambda r: r[0] < 0) or ([], [])
    assert [(p.sender, _rows(p)) for p in pieces] == [("a", [(-1,)])]
    assert [(u.sender, _rows(u)) for u in rest] == [
        ("c", [(-1,), (5,)]),
        ("a", [(1,), (2,)]),
        ("b", [(3,)]),
    ]
    assert rest[0] is call and rest[2] is b  # untouched units are the same objects
    assert split_by([b], "msg", lambda r: r[0] < 0) is None
    assert split_by([a], "other", lambda r: True) is None
