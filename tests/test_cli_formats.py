"""What the ``ledger`` command reads from and writes to text, over the whole space of values:
inline schemas, CSV and JSON output, durations. Run in-process: these are the command's own
parsers and printers (tests/test_cli.py runs the command itself)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
from decimal import Decimal

import click
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.cli import output
from ledger.cli.parsing import Duration, duration, duration_text, schema_text

TYPES = ["BIGINT", "VARCHAR", "DOUBLE", "DECIMAL(18,2)", "DECIMAL(38, 10)", "TIMESTAMPTZ", "DATE"]
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@given(st.lists(st.tuples(names, st.sampled_from(TYPES)), min_size=1, max_size=6))
def test_any_column_names_survive_an_inline_schema(columns: list[tuple[str, str]]) -> None:
    text = ", ".join(f"{quoted(name)} {kind}" for name, kind in columns)
    assert schema_text(text) == columns


@pytest.mark.parametrize(
    "text",
    ["id", "id BIGINT, amount", '"unterminated BIGINT', ", ,", '{"id": 1}', "{not json"],
)
def test_schema_text_that_is_not_name_type_is_a_usage_error(text: str) -> None:
    with pytest.raises(click.BadParameter):
        schema_text(text)


def printed(rows: pa.Table, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    output.print_rows(rows, fmt)
    return capsys.readouterr().out


texts = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
decimals = st.one_of(
    st.none(), st.decimals(min_value=-(10**27), max_value=10**27, places=10, allow_nan=False)
)
floats = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@given(st.lists(st.tuples(texts, decimals, floats), max_size=8))
def test_csv_and_json_output_read_back_to_the_values(
    capsys: pytest.CaptureFixture[str], rows: list[tuple[str | None, Decimal | None, float | None]]
) -> None:
    table = pa.table(
        {
            "label": pa.array([r[0] for r in rows], pa.string()),
            "amount": pa.array([r[1] for r in rows], pa.decimal128(38, 10)),
            "reading": pa.array([r[2] for r in rows], pa.float64()),
        }
    )
    read = list(csv.reader(io.StringIO(printed(table, output.CSV, capsys), newline="")))
    assert read[0] == ["label", "amount", "reading"]
    decoded = json.loads(printed(table, output.JSON, capsys))
    assert len(read) - 1 == len(decoded) == len(rows)
    for (label, amount, reading), line, record in zip(rows, read[1:], decoded, strict=True):
        assert line[0] == (label or "") and record["label"] == label
        if amount is None:
            assert line[1] == "" and record["amount"] is None
        else:
            # Exact, positional, at the column's scale.
            assert Decimal(line[1]) == amount == Decimal(record["amount"])
            assert "E" not in record["amount"] and len(record["amount"].split(".")[1]) == 10
        if reading is None:
            assert line[2] == "" and record["reading"] is None
        elif math.isnan(reading):
            assert line[2] == record["reading"] == "NaN"
        else:
            assert float(line[2]) == reading and float(record["reading"]) == reading


def test_json_output_of_times_dates_and_binary(capsys: pytest.CaptureFixture[str]) -> None:
    zone = dt.timezone(dt.timedelta(hours=2))
    table = pa.table(
        {
            "at": pa.array(
                [dt.datetime(2026, 1, 31, 12, 0, tzinfo=zone)], pa.timestamp("us", "UTC")
            ),
            "day": pa.array([dt.date(2026, 2, 28)], pa.date32()),
            "raw": pa.array([b"\x00\xff"], pa.binary()),
            "flag": pa.array([True]),
        }
    )
    assert json.loads(printed(table, output.JSON, capsys)) == [
        {"at": "2026-01-31T10:00:00+00:00", "day": "2026-02-28", "raw": "00ff", "flag": True}
    ]
    assert printed(table, output.CSV, capsys).splitlines()[1] == (
        "2026-01-31T10:00:00+00:00,2026-02-28,00ff,true"
    )


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["s", "m", "h", "d", "w"]))
def test_durations(amount: int, unit: str) -> None:
    factor = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[unit]
    parsed = duration(f"{amount}{unit}")
    assert parsed == dt.timedelta(seconds=amount * factor)
    assert duration(duration_text(parsed)) == parsed  # printed as it can be written back


@pytest.mark.parametrize("text", ["", "7", "0", "7 days", "-1d", "1y", "d"])
def test_durations_that_are_not_durations(text: str) -> None:
    with pytest.raises(ValueError, match="s \\(seconds\\)"):
        duration(text)
    with pytest.raises(click.BadParameter):
        Duration().convert(text, None, None)
