"""A buffered writer checks plain rows against the schema it saw last: a column another writer
widened meanwhile still commits every row accepted under the narrower type, and takes values
only the wider type holds once the writer has seen the change."""

from __future__ import annotations

import pyarrow as pa
import pytest

import ledger
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
