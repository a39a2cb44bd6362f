"""Lives of a table name: drop, create again, vacuum.

Each life of a table writes its data files into a folder of its own, so vacuum of a table
created again never takes the files of the dropped life (which snapshots taken before the drop
still read) for orphans. Those files go only once the log no longer names the dropped life.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import ledger
from ledger.maintenance import vacuum as vacuuming
from tests.conftest import Location
from tests.support.maintenance import clock_ahead, set_clock_skew, vacuum_now

SCHEMA = {"id": "BIGINT", "v": "VARCHAR", "region": "VARCHAR"}


def _create(warehouse: ledger.Warehouse, **options: Any) -> ledger.Table:
    return warehouse.create_table("t", SCHEMA, primary_key="id", partition_by="region", **options)


def _rows(snapshot: ledger.Snapshot) -> list[tuple[Any, ...]]:
    return sorted(snapshot.scan().fetchall())


def _data_keys(table: ledger.Table) -> set[str]:
    return {
        info.key
        for name in table.store.list_dirs(table.prefix)
        if name.startswith("_data")
        for info in table.store.list(f"{table.prefix}{name}/")
    }


def test_vacuum_of_a_table_created_again_keeps_the_dropped_lifes_snapshots(
    location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch)
    warehouse = location.connect()
    old = _create(warehouse, transaction_timeout=2)
    old.insert([{"id": 1, "v": "a", "region": "eu"}, {"id": 2, "v": "b", "region": "us"}])
    old.upsert([{"id": 1, "v": "a2", "region": "eu"}])
    old_snapshot = old.snapshot()
    old_rows = _rows(old_snapshot)
    assert len(old_rows) == 4  # two insertions, a delete mark and the new insertion
    old_files = {old.prefix + m.path for m in old_snapshot.state.alive_files}
    warehouse.drop_table("t")

    new = _create(location.connect(), transaction_timeout=2)
    new.insert([{"id": 1, "v": "x", "region": "eu"}])
    new.upsert([{"id": 1, "v": "y", "region": "eu"}, {"id": 3, "v": "z", "region": "us"}])
    new.merge(min_files=1)
    time.sleep(2.1)  # every file is older than the transaction timeout: orphans would go
    result = vacuum_now(new)
    assert result.orphans_deleted == 0
    # The new life's merged inputs only: eu's two files (us's lone file had nothing to merge).
    assert result.data_files_deleted == 2

    assert old_files <= _data_keys(new)
    assert _rows(old_snapshot) == old_rows  # the dropped life's snapshot still reads
    fresh = location.connect().table("t")
    assert fresh.count() == 2
    visible = sorted((row[0], row[1]) for row in fresh.snapshot().scan().fetchall() if row[-1] == 1)
    assert visible == [(1, "y"), (3, "z")]
    new_files = {new.prefix + m.path for m in fresh.snapshot().state.alive_files}
    assert not new_files & old_files
    assert _data_keys(new) == old_files | new_files


def test_a_dropped_lifes_files_go_once_the_log_no_longer_names_it(
    location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch)
    warehouse = location.connect()
    old = _create(warehouse, checkpoint_interval=2, transaction_timeout=3)
    old.insert([{"id": 1, "v": "a", "region": "eu"}])
    old_snapshot = old.snapshot()
    warehouse.drop_table("t")
    new = _create(warehouse, checkpoint_interval=2, transaction_timeout=3)
    for i in range(3):
        new.insert([{"id": 10 + i, "v": "n", "region": "us"}])
    assert vacuum_now(new).orphans_deleted == 0
    assert _rows(old_snapshot) == [(1, "a", "eu", 1, 0, 1)]

    # Vacuum's clock past the transaction timeout: the log is trimmed to the new life.
    clock_ahead(monkeypatch, vacuuming, 3.2)
    deleted = vacuum_now(new).orphans_deleted + vacuum_now(new).orphans_deleted
    assert deleted == 1
    gone = {old.prefix + m.path for m in old_snapshot.state.alive_files}
    assert len(gone) == 1 and not gone & _data_keys(new)
    alive = {new.prefix + m.path for m in new.refresh().snapshot().state.alive_files}
    assert _data_keys(new) == alive  # the dropped life's file is gone
    fresh = location.connect().table("t")
    assert fresh.count() == 3


def test_a_dropped_table_keeps_its_snapshots_unless_purged(tmp_path):
    warehouse = ledger.connect(str(tmp_path))
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    snapshot = table.snapshot()
    warehouse.drop_table("t")
    assert snapshot.scan().fetchall() == [(1, 1, 0, 1)]  # readable until vacuum
    again = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    again.insert([{"id": 2}])
    history = again.history()
    trx_ids = [h.trx_id for h in history if h.trx_id is not None]
    assert len(trx_ids) == len(set(trx_ids)) == 2
    with pytest.raises(ledger.SnapshotNotFoundError, match="before"):
        again.snapshot(version=1)  # a version of the table's earlier life
    kept = set((tmp_path / "t").glob("_data*/**/*.parquet"))  # each life has its own folder
    assert len(kept) == 2
    warehouse.drop_table("t", purge=True)
    left = set((tmp_path / "t").glob("_data*/**/*.parquet"))
    assert len(left) == 1 and left < kept  # the second table's file is gone; vacuum takes the rest
