"""A buffered writer checks plain rows against the schema it saw last: a column another writer
widened meanwhile still commits every row accepted under the narrower type, and takes values
only the wider type holds once the writer has seen the change."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ledger
import views
from tests.conftest import Location

INT_MAX = 2**31 - 1


def test_a_column_widened_by_another_writer_takes_wider_values(location: Location) -> None:
    table = location.connect().create_table(
        "events", {"event_id": "BIGINT", "count": "INTEGER", "note": "VARCHAR"}, "event_id"
    )
    with table.writer(max_seconds=None) as writer:
        writer.write({"event_id": 1, "count": INT_MAX, "note": "a"})
        with pytest.raises(ledger.LedgerError):  # too large for INTEGER: refused at write()
            writer.write({"event_id": 2, "count": INT_MAX + 1, "note": "b"})
        wider = pa.table({"event_id": [3], "count": pa.array([INT_MAX + 3], pa.int64())})
        location.connect().table("events").insert(wider, evolve_schema=True)
        writer.write({"event_id": 4, "count": INT_MAX, "note": "d"})  # accepted under INTEGER
        writer.flush()  # commits rows accepted under INTEGER into the BIGINT column
        writer.write({"event_id": 5, "count": INT_MAX + 5, "note": "é"})  # BIGINT now
        writer.write({"event_id": 6, "count": -1, "note": "f"})
    assert table.refresh().schema["count"] == "BIGINT"
    rows = table.scan().project("event_id, count").order("event_id").fetchall()
    assert rows == [
        (1, INT_MAX),
        (3, INT_MAX + 3),
        (4, INT_MAX),
        (5, INT_MAX + 5),
        (6, -1),
    ]


def test_rows_converted_before_and_after_a_widening_commit_together(tmp_path: Path) -> None:
    # A row converted at write() (int into VARCHAR is not a plain row) holds INTEGER; after
    # another writer widens the column to BIGINT, a plain row converted at flush holds BIGINT.
    warehouse = ledger.connect(str(tmp_path))
    table = warehouse.create_table(
        "t", {"k": "BIGINT", "i": "INTEGER", "s": "VARCHAR"}, primary_key="k"
    )
    other = ledger.connect(str(tmp_path)).table("t")
    with table.writer(max_seconds=None) as writer:
        writer.write({"k": 1, "i": 1, "s": 7})
        other.insert([{"k": 2, "i": 2**40}], evolve_schema=True)
        table.insert([{"k": 4, "i": 4}])  # the writer's table sees the wider schema
        writer.write({"k": 3, "i": 3, "s": "x"})
        writer.flush()
        assert writer.pending_rows == 0
    got = sorted(tuple(r.values()) for r in views.rows(table).to_pylist())
    assert got == [(1, 1, "7"), (2, 2**40, None), (3, 3, "x"), (4, 4, None)]
