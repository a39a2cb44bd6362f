"""A snapshot held while vacuum deletes its files answers SnapshotNotFoundError when read, as a
version vacuumed away does; a table handle reads its newest version."""

from __future__ import annotations

import time

import pytest

import ledger
import views


@pytest.mark.parametrize("partitions", [None, {"p": "a"}])
def test_a_held_snapshot_whose_files_were_vacuumed_is_not_found(tmp_path, partitions):
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "v": "BIGINT", "p": "VARCHAR"},
        "k",
        partition_by="p",
        policy="replacing",
    )
    for i in range(3):
        table.insert([{"k": i, "v": i, "p": "a"}])
    held = table.snapshot()
    table.merge(min_files=1)
    # Commit times never repeat, so quick commits may run a few milliseconds ahead of the
    # clock, and vacuum(0) keeps what was tombstoned at or after its own start: wait them out.
    time.sleep(0.05)
    assert table.vacuum(0).data_files_deleted == 3
    with pytest.raises(ledger.SnapshotNotFoundError, match="vacuum"):
        views.visible(held, partitions=partitions).fetchall()
    assert sorted(views.visible(table).fetchall()) == [(0, 0, "a"), (1, 1, "a"), (2, 2, "a")]


def test_views_connect_takes_a_warehouse_path(tmp_path):
    ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT"}, "k").insert([{"k": 1}])
    assert views.connect(str(tmp_path)).sql("SELECT k FROM t").fetchall() == [(1,)]
