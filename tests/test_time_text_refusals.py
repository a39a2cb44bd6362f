"""Text that is no timestamp or date, and values with no zone for a TIMESTAMPTZ column, from a
list of dicts and from JSON lines: a TypeMismatchError naming the column, its SQL type and the
value in the product's words (never Arrow's type names or its advice for its own API)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"eid": "VARCHAR", "ts": "TIMESTAMPTZ", "d": "DATE"}
ARROW_WORDS = ("assume_timezone", "timestamp[", "date32", "int64", "scalar of type")


@pytest.fixture
def table(local_location) -> ledger.Table:
    return local_location.connect().create_table("events", SCHEMA, primary_key="eid")


def _no_arrow_words(message: str) -> None:
    for word in ARROW_WORDS:
        assert word not in message, message


# Texts shaped like a timestamp with an offset but no real instant: month 13 and beyond, a day
# the month lacks, slashes for dashes.
invalid_instants = st.one_of(
    st.builds("2024-{:02d}-01T10:00:00Z".format, st.integers(13, 99)),
    st.builds("2023-02-{:02d} 10:00:00+00:00".format, st.integers(29, 31)),
    st.builds("2024/{:02d}/01 10:00:00+01:00".format, st.integers(1, 12)),
)


@given(text=invalid_instants)
@settings(max_examples=examples(10))
def test_an_invalid_timestamp_with_an_offset_from_dicts_is_named(table, text):
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert([{"eid": "a", "ts": text}])
    message = str(raised.value)
    assert f"column 'ts' (TIMESTAMPTZ): value {text!r} is not a valid timestamp" in message
    _no_arrow_words(message)
    assert table.version == 0


def test_an_invalid_timestamp_with_an_offset_from_json_lines_names_its_line(table, tmp_path):
    path = tmp_path / "events.jsonl"
    rows = [{"eid": "a", "ts": "2024-01-01T10:00:00Z"}, {"eid": "b", "ts": "2024-13-01T10:00:00Z"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert(str(path))
    message = str(raised.value)
    assert "column 'ts' (TIMESTAMPTZ): value '2024-13-01T10:00:00Z' is not a valid timestamp" in (
        message
    )
    assert "(line 2:" in message
    _no_arrow_words(message)
    assert table.version == 0


@pytest.mark.parametrize("text", ["2024-02-30", "2023-02-29", "2024-13-01", "2024/01/02"])
def test_an_invalid_date_is_named_as_a_date(table, tmp_path, text):
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert([{"eid": "a", "d": text}])
    assert f"column 'd' (DATE): value {text!r} is not a valid date" in str(raised.value)
    _no_arrow_words(str(raised.value))
    path = tmp_path / "days.jsonl"
    path.write_text(json.dumps({"eid": "a", "d": text}) + "\n")
    with pytest.raises(ledger.TypeMismatchError, match=r"is not a valid date.*\(line 1:"):
        table.insert(str(path))
    assert table.version == 0


def test_timestamp_text_without_an_offset_says_a_timestamptz_needs_one(table):
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert([{"eid": "a", "ts": "2024-01-01 10:00:00"}])
    message = str(raised.value)
    assert "column 'ts' (TIMESTAMPTZ): value '2024-01-01 10:00:00' has no UTC offset" in message
    _no_arrow_words(message)


@pytest.mark.parametrize("value", [dt.datetime(2024, 1, 1, 10), dt.date(2024, 1, 1), 1_700_000_000])
@pytest.mark.parametrize("beside", [None, "2024-01-01T00:00:00Z"])
def test_a_value_without_a_zone_for_a_timestamptz_column_says_to_attach_one(table, value, beside):
    rows = [{"eid": "a", "ts": value}]
    if beside is not None:  # among text, each kind of value is converted on its own
        rows.insert(0, {"eid": "b", "ts": beside})
    with pytest.raises(ledger.TypeMismatchError) as raised:
        table.insert(rows)
    message = str(raised.value)
    assert "column 'ts' is TIMESTAMPTZ" in message
    assert "zone" in message and "tzinfo" in message
    _no_arrow_words(message)
    assert table.version == 0
