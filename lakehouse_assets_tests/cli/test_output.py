"""How values and tables are printed for people, and encoded for scripts."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pytest

from lakehouse_assets.cli.output import format_value, render_table, to_json

UTC = dt.UTC


@pytest.mark.parametrize(("value", "text"), [
    (None, "NULL"),
    (True, "true"),
    (3, "3"),
    (72.5, "72.5"),
    (decimal.Decimal("1.10"), "1.10"),
    ("plain", "plain"),
    ("two\nlines\tand tab", "two\\nlines\\tand tab"),
    ("héllo", "héllo"),
    (dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), "2020-01-02 03:04:05 UTC"),
    (dt.datetime(2020, 1, 2, 3, 4, 5, 250000, tzinfo=UTC), "2020-01-02 03:04:05.250000 UTC"),
    (dt.datetime(2020, 1, 2, 3, 4, 5), "2020-01-02 03:04:05"),
    (dt.date(2020, 1, 2), "2020-01-02"),
    (b"\x01\xff", "0x01ff"),
    ({"mode": "Append"}, '{"mode": "Append"}'),
    ([1, None], "[1, null]"),
])
def test_format_value(value: object, text: str) -> None:
    assert format_value(value) == text


def test_long_values_are_cut_with_an_ellipsis() -> None:
    assert format_value("x" * 100, max_width=10) == "x" * 9 + "…"
    assert format_value("x" * 100, max_width=None) == "x" * 100


def test_render_table_aligns_columns_and_right_aligns_numbers() -> None:
    text = render_table(["NAME", "N", "NOTE"], [["a", 1, None], ["long name", 1234, "x"]])
    assert text.splitlines() == [
        "NAME          N  NOTE",
        "---------  ----  ----",
        "a             1  NULL",
        "long name  1234  x",
    ]


def test_render_table_with_no_rows_still_has_a_header() -> None:
    assert render_table(["A", "B"], []).splitlines() == ["A  B", "-  -"]


def test_json_keeps_times_decimals_and_bytes_without_loss() -> None:
    document = json.loads(to_json({
        "t": dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), "d": decimal.Decimal("0.10"),
        "b": b"\x00\x01", "n": None}))
    assert document == {"t": "2020-01-02T03:04:05+00:00", "d": "0.10", "b": "AAE=", "n": None}
