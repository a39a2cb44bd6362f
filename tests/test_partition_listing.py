"""table.partitions() lists partitions from the log; rewrite_partitions chooses them as
drop_partitions does (values or where=), and with neither rewrites every file."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal

import pytest

import ledger
from tests.conftest import Location

SCHEMA = {"id": "BIGINT", "user_id": "BIGINT", "ts": "TIMESTAMP", "amount": "DECIMAL(12,2)"}


def _events(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("events", SCHEMA, "id", partition_by="day(ts)")
    rows = [
        {
            "id": i,
            "user_id": i % 3,
            "ts": dt.datetime(2026, 11, 20 + i % 3, 10),
            "amount": Decimal(i).scaleb(-2),
        }
        for i in range(12)
    ]
    table.insert(rows[:6])
    table.insert(rows[6:])
    table.delete([0, 3])  # delete marks in the 2026-11-20 partition
    return table


def _days(table: ledger.Table, **read: object) -> Counter[str]:
    return Counter(
        r["ts"].date().isoformat() for r in table.to_arrow(columns="ts", **read).to_pylist()
    )


def test_partitions_list_files_entries_and_rows_from_the_log(location: Location) -> None:
    table = _events(location.connect())
    listed = {p.values["ts_day"]: p for p in table.partitions()}
    assert sorted(listed) == ["2026-11-20", "2026-11-21", "2026-11-22"]
    visible = _days(table)
    for day, info in listed.items():
        assert info.rows == visible[day]
        assert info.bytes > 0
    assert (listed["2026-11-20"].files, listed["2026-11-20"].entries) == (3, 4 + 2)
    assert (listed["2026-11-21"].files, listed["2026-11-21"].entries) == (2, 4)
    assert sum(p.rows for p in table.partitions()) == table.count()
    first = table.partitions(version=1)
    assert [(p.values["ts_day"], p.files, p.rows) for p in first] == [
        ("2026-11-20", 1, 2),
        ("2026-11-21", 1, 2),
        ("2026-11-22", 1, 2),
    ]
    table.drop_partitions({"ts_day": "2026-11-22"})
    assert [p.values["ts_day"] for p in table.partitions()] == ["2026-11-20", "2026-11-21"]


def test_partitions_of_unpartitioned_and_empty_tables(local_location: Location) -> None:
    warehouse = local_location.connect()
    plain = warehouse.create_table("plain", {"id": "BIGINT"}, "id")
    assert plain.partitions() == []
    plain.insert([{"id": 1}, {"id": 2}])
    (only,) = plain.partitions()
    assert (dict(only.values), only.files, only.entries, only.rows) == ({}, 1, 2, 2)


def test_rewrite_partitions_takes_where_like_drop_partitions(location: Location) -> None:
    table = _events(location.connect())
    before = _days(table)
    change = table.rewrite_partitions(
        sql="SELECT * FROM entries WHERE user_id <> 1", where="ts_day >= '2026-11-21'"
    )
    assert change.version is not None
    after = _days(table)
    assert after["2026-11-20"] == before["2026-11-20"]  # outside where=: untouched
    # ids 1, 4, 7, 10 have user_id 1 and fall on 2026-11-21
    assert after["2026-11-21"] == before["2026-11-21"] - 4
    assert after["2026-11-22"] == before["2026-11-22"]
    assert sum(p.rows for p in table.partitions()) == table.count() == sum(after.values())


def test_rewrite_without_a_choice_rewrites_every_partition(location: Location) -> None:
    table = _events(location.connect())
    table.rewrite_partitions(None, "SELECT * FROM entries WHERE user_id <> 2")
    remaining = sorted(r["user_id"] for r in table.to_arrow(columns="user_id").to_pylist())
    assert set(remaining) == {0, 1} and table.count() == len(remaining)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"partitions": {"ts_day": "2026-11-20"}, "where": "ts_day = 'x'"}, "not both"),
        ({"where": "no_such_field = 'x'"}, "not one of the table's partition fields"),
        ({"where": 3}, "predicate string"),
    ],
)
def test_bad_rewrite_choices_write_nothing(
    local_location: Location, arguments: dict[str, object], error: str
) -> None:
    table = _events(local_location.connect())
    version = table.version
    with pytest.raises(
        ledger.InvalidArgumentError if error == "not both" else ledger.InvalidPredicateError,
        match=error,
    ):
        table.rewrite_partitions(sql="SELECT * FROM entries", **arguments)
    assert table.refresh().version == version
