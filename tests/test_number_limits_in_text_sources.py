"""Numbers beyond their column's range are refused the same way from every source: a list of
dicts, JSON lines and CSV give ``TypeMismatchError`` naming the column (in the table's type),
the value and, for a file, the file and its line or row, before anything is written. A number
too large for a double (``1e400``) is refused, while the words ``inf`` and ``-inf`` keep their
meaning. An integer wider than 64 bits goes into a DECIMAL(38,0) when it fits. CSV messages
speak of the table's types (BIGINT, TIMESTAMP, DECIMAL(10,2)), not Arrow's."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples

SCHEMA = {"id": "BIGINT", "u": "BIGINT", "i": "INTEGER", "d": "DECIMAL(38,0)", "x": "DOUBLE"}
RANGES = {"u": (-(2**63), 2**63 - 1), "i": (-(2**31), 2**31 - 1)}


def _table(tmp_path: Path) -> ledger.Table:
    return ledger.connect(tmp_path / "wh").create_table("t", SCHEMA, primary_key="id")


def _write(tmp_path: Path, form: str, rows: list[dict[str, Any]]) -> Any:
    """``rows`` as a list of dicts, a JSON-lines file or a CSV file (every row naming the same
    columns)."""
    if form == "dicts":
        return rows
    if form == "json":
        path = tmp_path / "in.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return str(path)
    path = tmp_path / "in.csv"
    names = list(rows[0])
    path.write_text(
        ",".join(names) + "\n" + "".join(",".join(str(r[n]) for n in names) + "\n" for r in rows)
    )
    return str(path)


def _assert_nothing_written(table: ledger.Table) -> None:
    assert table.refresh().version == 0
    assert not list(table.store.list(table.prefix + "_data/"))


@settings(max_examples=examples(30), deadline=None)
@given(
    form=st.sampled_from(["dicts", "json", "csv"]),
    column=st.sampled_from(sorted(RANGES)),
    beyond=st.integers(1, 2**80),
    negative=st.booleans(),
    rows=st.integers(1, 4),
    data=st.data(),
)
def test_an_integer_out_of_range_is_the_same_error_from_every_source(
    tmp_path_factory, form, column, beyond, negative, rows, data
):
    tmp_path = tmp_path_factory.mktemp("src")
    table = _table(tmp_path)
    low, high = RANGES[column]
    value = low - beyond if negative else high + beyond
    bad_row = data.draw(st.integers(1, rows), label="bad row")
    given_rows = [{"id": i, column: value if i == bad_row else i} for i in range(1, rows + 1)]
    kind = SCHEMA[column]
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert(_write(tmp_path, form, given_rows))
    message = str(raised.value)
    assert f"column {column!r} ({kind})" in message
    assert f"value {value} " in message
    if form != "dicts" or abs(value) >= 2**63:  # as a dict's int beyond 64 bits says
        assert f"value {value} is out of its range" in message
    if form == "json":
        assert "in.jsonl" in message and f"line {bad_row}:" in message
    if form == "csv":
        assert "in.csv" in message and f"row {bad_row}:" in message
    _assert_nothing_written(table)


@pytest.mark.parametrize("form", ["dicts", "json", "csv"])
def test_an_integer_wider_than_64_bits_goes_into_a_decimal_38_0_when_it_fits(tmp_path, form):
    table = _table(tmp_path)
    wide = 2**70
    table.insert(_write(tmp_path, form, [{"id": 1, "d": wide}, {"id": 2, "d": -(10**37)}]))
    assert [row[3] for row in views.visible(table).order("id").fetchall()] == [
        Decimal(wide),
        Decimal(-(10**37)),
    ]


@pytest.mark.parametrize("form", ["dicts", "json"])
def test_an_integer_beyond_a_decimal_38_0_is_refused(tmp_path, form):
    table = _table(tmp_path)
    with pytest.raises(ledger.TypeMismatchError, match=r"column 'd' \(DECIMAL\(38,0\)\)"):
        table.insert(_write(tmp_path, form, [{"id": 1, "d": 10**38}]))
    _assert_nothing_written(table)


@pytest.mark.parametrize("form", ["dicts", "json", "csv"])
@pytest.mark.parametrize("text", ["1e400", "-1e400", "2e308"])
def test_a_number_too_large_for_a_double_is_refused(tmp_path, form, text):
    table = _table(tmp_path)
    if form == "csv":
        data = _write(tmp_path, form, [{"id": 1, "x": 1.5}, {"id": 2, "x": text}])
    elif form == "json":  # written as a JSON number, not as text
        path = tmp_path / "in.jsonl"
        path.write_text(f'{{"id": 1, "x": 1.5}}\n{{"id": 2, "x": {text}}}\n')
        data = str(path)
    else:
        data = [{"id": 1, "x": 1.5}, {"id": 2, "x": text}]
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert(data)
    message = str(raised.value)
    assert f"column 'x' (DOUBLE): value {text!r} is out of its range" in message or (
        f"column 'x' (DOUBLE), row 2: value {text!r} is out of its range" in message
    )
    if form != "dicts":
        assert re.search(r"(line|row) 2\b", message)
    _assert_nothing_written(table)


def test_text_too_large_for_a_double_in_json_lines_is_refused(tmp_path):
    table = _table(tmp_path)
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "x": "1e400"}\n')
    with pytest.raises(ledger.TypeMismatchError, match=r"column 'x' \(DOUBLE\).*line 1"):
        table.insert(str(path))
    _assert_nothing_written(table)


@pytest.mark.parametrize("form", ["dicts", "json", "csv"])
def test_the_words_inf_and_nan_keep_their_meaning(tmp_path, form):
    table = _table(tmp_path)
    rows = [{"id": 1, "x": "inf"}, {"id": 2, "x": "-inf"}, {"id": 3, "x": "nan"}]
    table.insert(_write(tmp_path, form, rows))
    got = [row[4] for row in views.visible(table).order("id").fetchall()]
    assert got[:2] == [math.inf, -math.inf] and math.isnan(got[2])


@pytest.mark.parametrize(
    ("column", "kind", "text", "shown"),
    [
        ("n", "BIGINT", "x16", "BIGINT"),
        ("ts", "TIMESTAMP", "oops", "TIMESTAMP"),
        ("m", "DECIMAL(10,2)", "1.234", "DECIMAL(10,2)"),
        ("day", "DATE", "oops", "DATE"),
        ("x", "DOUBLE", "oops", "DOUBLE"),
    ],
)
def test_csv_messages_name_the_tables_types(tmp_path, column, kind, text, shown):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", column: kind}, primary_key="id"
    )
    path = tmp_path / "in.csv"
    path.write_text(f"id,{column}\n1,{text}\n")
    with pytest.raises(ledger.SchemaError) as raised:
        table.insert(str(path))
    message = str(raised.value)
    assert shown in message, message
    arrow_names = ["int64", "timestamp[", "decimal128", "date32", "double"]
    assert not any(name in message for name in arrow_names), message
    _assert_nothing_written(table)
