"""A value a JSON-lines file gives as text that its column refuses (a timestamp finer than
microseconds, text that is no timestamp, date or number) keeps its TypeMismatchError and names
the file and its line as an editor counts it (blank lines included), before anything is
written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError

SCHEMA = {"id": "BIGINT", "ts": "TIMESTAMP", "day": "DATE", "price": "DECIMAL(10,2)"}
GOOD = '{"id": %d, "ts": "2024-01-01 00:00:00", "day": "2024-01-02", "price": "1.50"}'
BAD = {
    "ts": '{"id": %d, "ts": "2024-01-01 00:00:00.123456789"}',
    "day": '{"id": %d, "day": "oops"}',
    "price": '{"id": %d, "price": "2.505"}',
}


def _refusal(tmp: Path, lines: list[str], operation: str) -> tuple[str, int]:
    table = ledger.connect(str(tmp / "wh")).create_table("t", SCHEMA, primary_key="id")
    path = tmp / "n2.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TypeMismatchError) as refused:
        getattr(table, operation)(str(path))
    assert table.count() == 0  # nothing written
    return str(refused.value), len(lines)


@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_a_nanosecond_timestamp_after_a_blank_line_names_file_and_line(tmp_path, operation):
    lines = [GOOD % 1, "", BAD["ts"] % 2]
    message, _ = _refusal(tmp_path, lines, operation)
    assert str(tmp_path / "n2.jsonl") in message
    assert "column 'ts' (TIMESTAMP)" in message
    assert re.search(r"\(line 3: .*123456789", message)


@given(
    before=st.lists(st.sampled_from(["good", "blank"]), max_size=6),
    column=st.sampled_from(sorted(BAD)),
)
def test_the_line_named_is_the_line_of_the_refused_value(tmp_path_factory, before, column):
    lines = [GOOD % (i + 1) if kind == "good" else "" for i, kind in enumerate(before)]
    lines.append(BAD[column] % 99)
    message, bad_line = _refusal(tmp_path_factory.mktemp("j"), lines, "insert")
    assert f"column {column!r}" in message
    assert f"(line {bad_line}: " in message


def test_a_csv_row_counts_data_rows_not_lines(tmp_path):
    """As the docs say: a quoted value over two lines is one row, a blank line is skipped."""
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id"
    )
    path = tmp_path / "a.csv"
    path.write_text('id,s\n1,"a\nb"\n\nx16,c\n')
    with pytest.raises(ledger.errors.MalformedSourceError, match=r"column 'id', row 2: 'x16'"):
        table.insert(str(path))
    nanoseconds = tmp_path / "b.csv"
    nanoseconds.write_text("id,ts\n1,2024-01-01 00:00:00.123456789\n")
    timed = ledger.connect(str(tmp_path / "wh")).create_table(
        "u", {"id": "BIGINT", "ts": "TIMESTAMP"}, primary_key="id"
    )
    with pytest.raises(TypeMismatchError, match=r"row 1: value"):
        timed.insert(str(nanoseconds))
