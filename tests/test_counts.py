"""``count()`` is the row count the table's totals give, before and after any merges.

Where the file markers' ``dml_sum`` stays exact through merges (policies whose signs are
consistent: every mark cancels an insertion carrying its values) it is read from the log
alone; elsewhere (replacing, aggregating, dedup) merges drop entries without their marks, or
repeats, so the signs of the remaining entries no longer add up to the rows, and the rows are
counted from the data.
"""

from __future__ import annotations

import os
import tempfile

import ledger
import views


def _replacing_table() -> ledger.Table:
    warehouse = ledger.connect(tempfile.mkdtemp())
    return warehouse.create_table(
        "t", {"k": "BIGINT", "v": "BIGINT"}, primary_key="k", policy="replacing"
    )


def _files_oldest_first(table: ledger.Table) -> list[str]:
    return [m.path for m in sorted(table.snapshot().markers(), key=lambda m: m.trx_min)]


def test_replacing_count_stays_zero_after_partial_merges_of_a_deleted_key() -> None:
    table = _replacing_table()
    table.insert([{"k": 1, "v": 1}])
    table.update([{"k": 1, "v": 2}])
    table.delete([1])
    assert table.count() == 0
    _, update, delete = _files_oldest_first(table)
    table.merge(files=[update, delete])  # keeps the delete mark only: the key's latest entry
    assert table.count() == 0 and views.visible(table).fetchall() == []
    table.merge(min_files=2)
    assert views.visible(table).fetchall() == [] and views.totals(table).fetchall() == [(0,)]
    assert table.count() == 0
    assert table.count(version=3) == 0 and table.count(version=1) == 1


def test_replacing_count_counts_a_blindly_reinserted_key_once() -> None:
    table = _replacing_table()
    table.insert([{"k": 1, "v": 1}, {"k": 2, "v": 1}])
    table.insert([{"k": 1, "v": 2}])  # the newer entry replaces the older
    assert table.count() == 2 == len(table.to_arrow())
    table.merge(min_files=2)
    assert table.count() == 2 == len(table.to_arrow())
    assert table.count(version=2) == 2


def test_aggregating_count_is_its_groups() -> None:
    warehouse = ledger.connect(tempfile.mkdtemp())
    table = warehouse.create_table(
        "sums",
        {"k": "VARCHAR", "n": "BIGINT", "c": "BIGINT"},
        primary_key="k",
        policy={"name": "aggregating", "measures": {"n": "sum", "c": "count"}},
    )
    table.insert([{"k": k, "n": 1, "c": 1} for k in "abcd"])
    table.insert([{"k": "a", "n": 1, "c": 1}])  # a second entry of group a
    assert table.count() == 4 == len(table.to_arrow())
    table.delete(["b"])
    assert table.count() == 3 == views.totals(table).fetchall()[0][0]
    table.merge(min_files=2)
    assert table.count() == 3 and table.count(version=2) == 4


def test_dedup_count_leaves_out_repeats_before_a_merge_drops_them() -> None:
    warehouse = ledger.connect(tempfile.mkdtemp())
    table = warehouse.create_table(
        "events",
        {"k": "BIGINT", "event_id": "VARCHAR"},
        primary_key="k",
        policy={"name": "dedup", "dedup_key": ["event_id"]},
    )
    table.insert([{"k": 1, "event_id": "e1"}, {"k": 2, "event_id": "e2"}])
    table.insert([{"k": 3, "event_id": "e1"}])  # the same event loaded again
    assert table.count() == 2 == views.totals(table).fetchall()[0][0]
    table.merge(min_files=2)
    assert table.count() == 2 and table.count(version=2) == 2


def test_collapsing_count_stays_from_the_log() -> None:
    warehouse = ledger.connect(tempfile.mkdtemp())
    table = warehouse.create_table("t", {"k": "BIGINT", "v": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1, "v": 1}, {"k": 2, "v": 1}])
    table.update([{"k": 1, "v": 2}])
    table.delete([2])
    table.merge(files=_files_oldest_first(table)[1:])
    _delete_data_files(table)  # the count must not need them
    assert table.count() == 1 and table.count(version=3) == 1


def test_a_fully_merged_replacing_table_counts_from_the_log() -> None:
    table = _replacing_table()
    table.insert([{"k": k, "v": 1} for k in range(10)])
    table.insert([{"k": k, "v": 2} for k in range(5, 15)])
    table.merge(min_files=1)
    _delete_data_files(table)  # every file holds the only entry of its keys: no need to read
    assert table.count() == 15


def _delete_data_files(table: ledger.Table) -> None:
    for path in table.files():
        os.remove(path)
