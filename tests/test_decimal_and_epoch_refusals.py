"""A value a DECIMAL column cannot hold, or an epoch number for a TIMESTAMPTZ column, from CSV
and JSON-lines files: refused naming the column, its SQL type, the value and its row or line,
as a list of dicts names them (never Arrow's type names)."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"eid": "VARCHAR", "amt": "DECIMAL(10,2)", "ts": "TIMESTAMPTZ"}


@pytest.fixture
def table(local_location) -> ledger.Table:
    return local_location.connect().create_table("payments", SCHEMA, primary_key="eid")


def _no_arrow_words(message: str) -> None:
    for word in ("decimal128", "Column(/", "changed from", "precision not supported"):
        assert word not in message, message


@given(
    whole=st.integers(0, 10**8 - 1),
    places=st.integers(3, 6),
    last=st.integers(1, 9),
    quoted=st.booleans(),
)
@settings(max_examples=examples(10))
def test_a_json_number_with_more_decimal_places_than_the_scale_is_named(
    table, tmp_path_factory, whole, places, last, quoted
):
    text = f"{whole}.{'0' * (places - 1)}{last}"
    path = tmp_path_factory.mktemp("j") / "p.jsonl"
    value, fitting = (json.dumps(text), '"1.25"') if quoted else (text, "1.25")
    path.write_text(f'{{"eid":"a","amt":{fitting}}}\n{{"eid":"b","amt":{value}}}\n')
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert(str(path))
    message = str(raised.value)
    assert "column 'amt' (DECIMAL(10,2))" in message
    assert text in message and "more than 2 decimal place(s)" in message
    assert "(line 2:" in message
    _no_arrow_words(message)
    assert table.version == 0


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("123456789012.00", "more than 8 whole digit(s)"),
        ('"2,50"', "is not a valid number"),
        ("1.2.3", "is not a valid number"),
    ],
)
def test_a_csv_value_a_decimal_column_cannot_hold_is_named_with_its_row(
    table, tmp_path, value, says
):
    path = tmp_path / "p.csv"
    path.write_text(f"eid,amt\nA,1.25\nZ,{value}\n")
    with pytest.raises(ledger.LedgerError) as raised:
        table.insert(str(path))
    message = str(raised.value)
    assert "column 'amt', row 2 (DECIMAL(10,2))" in message and says in message
    _no_arrow_words(message)
    assert table.version == 0


@pytest.mark.parametrize("lines", [1, 3])
def test_an_epoch_number_for_a_timestamptz_column_asks_for_timestamp_text(table, tmp_path, lines):
    path = tmp_path / "e.jsonl"
    rows = [{"eid": f"e{i}", "ts": "2024-01-01T00:00:00Z"} for i in range(lines - 1)]
    rows.append({"eid": "last", "ts": 1_700_000_000})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ledger.LedgerError) as raised:
        table.insert(str(path))
    message = str(raised.value)
    assert "column 'ts' (TIMESTAMPTZ)" in message and "1700000000" in message
    assert "timestamp text" in message and f"(line {lines}:" in message
    _no_arrow_words(message)
    assert table.version == 0


@given(
    digits=st.integers(0, 10**10 - 1),
    places=st.integers(0, 4),
    rows_before=st.integers(0, 3),
    source=st.sampled_from(["dicts", "pandas", "arrow"]),
)
@settings(max_examples=examples(8), deadline=None)
def test_a_decimal_with_more_places_than_the_scale_gets_the_text_forms_refusal(
    local_location, digits, places, rows_before, source
):
    """A ``Decimal`` (or an Arrow decimal of a wider scale) goes in when the scale holds it
    exactly, and is otherwise refused as its text would be, naming column, type, value and row;
    never with Arrow's words."""
    value = Decimal(digits).scaleb(-places)
    if value.adjusted() >= 8:  # more whole digits than DECIMAL(10,2) holds: another refusal
        value = value.scaleb(-2)
    table = local_location.connect().create_table(
        f"p{next(TABLE_NUMBERS)}", SCHEMA, primary_key="eid"
    )
    fits = value == value.quantize(Decimal("0.01"))
    rows = [{"eid": f"r{i}", "amt": Decimal("1.25")} for i in range(rows_before)]
    rows.append({"eid": "bad", "amt": value})
    data: object = rows
    if source == "pandas":
        data = pd.DataFrame(rows)
    elif source == "arrow":
        data = pa.Table.from_pylist(rows, pa.schema([("eid", pa.string()), ("amt", WIDE)]))
    if fits:
        table.insert(data)
        assert table.scan().filter("eid = 'bad'").project("amt").fetchall() == [(value,)]
        return
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert(data)
    message = str(raised.value)
    assert "column 'amt' (DECIMAL(10,2))" in message, message
    shown = value.quantize(Decimal("0.0001")) if source == "arrow" else value
    assert f"value '{shown:f}' has more than 2 decimal place(s)" in message, message
    if source in ("dicts", "pandas"):  # named by its index in the list or frame, and only so
        where = "the list" if source == "dicts" else "the DataFrame"
        assert f"row {rows_before} of {where} (counting from 0)" in message, message
        assert "counted from" not in message, message
    else:
        assert f"row {rows_before} (counted from 0)" in message, message
    assert "Rescaling" not in message
    _no_arrow_words(message)
    assert table.version == 0


WIDE = pa.decimal128(14, 4)
TABLE_NUMBERS = itertools.count()
