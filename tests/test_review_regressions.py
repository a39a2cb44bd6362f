"""Regressions found in review: each test failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import ledger
import ledger.log.commit as commit
from ledger.storage.local import LocalStore
from tests.support.ledger_reads import sign_sums, visible_rows


class LosesLogResponses(LocalStore):
    """Log commits land, but the store answers 'exists' (a retried request answered 412)."""

    armed = False

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = super().put_if_absent(key, data)
        lost = self.armed and "/_log/" in key and ".checkpoint." not in key
        return False if lost else created


def test_a_lost_response_on_the_last_attempt_still_counts_as_committed(tmp_path, monkeypatch):
    store = LosesLogResponses(str(tmp_path))
    table = ledger.Warehouse(store).create_table("t", {"id": "BIGINT"}, primary_key="id")
    monkeypatch.setattr(commit, "MAX_ATTEMPTS", 1)  # the last attempt is the one that lands
    store.armed = True
    info = table.insert([{"id": 1}])
    store.armed = False
    assert info.version == 1
    reopened = ledger.Warehouse(store).table("t")
    assert visible_rows(reopened) == [(1,)]  # its data files were kept


def test_a_lost_response_on_create_returns_the_created_table(tmp_path):
    store = LosesLogResponses(str(tmp_path))
    store.armed = True
    table = ledger.Warehouse(store).create_table("t", {"id": "BIGINT"}, primary_key="id")
    assert table.version == 0


def test_a_replayed_batch_in_a_transaction_is_a_no_op_even_after_concurrent_writes(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}], app_id="job", batch=1)
    other = ledger.connect(str(tmp_path)).table("t")
    with table.transaction(app_id="job", batch=2) as tx:
        tx.upsert([{"id": 1}])
        other.upsert([{"id": 1}], app_id="job", batch=2)  # the same batch lands first
    assert tx.commit_info is not None and tx.commit_info.version is None
    assert sign_sums(table) == {(1,): 1}


def test_conflicts_on_timestamptz_keys_do_not_depend_on_the_machine_time_zone(tmp_path):
    script = textwrap.dedent(
        f"""
        import datetime as dt, ledger
        wh = ledger.connect({str(tmp_path)!r})
        t = wh.create_table("ev", {{"at": "TIMESTAMPTZ", "v": "BIGINT"}}, primary_key="at")
        k = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        t.insert([{{"at": k, "v": 0}}])
        tx = t.transaction()
        tx.delete_where("v = 0")
        tx.delete([k])
        t.update([{{"at": k, "v": 5}}])
        try:
            tx.commit()
        except ledger.ConflictError:
            print("conflict")
        """
    )
    env = {**os.environ, "TZ": "America/New_York"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "conflict"


def test_append_entries_delete_marks_conflict_with_a_concurrent_change_of_the_key(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "amount": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": 1, "amount": 10}])
    tx = table.transaction()
    tx.append_entries(
        [{"id": 1, "amount": 10, "dml_type": -1}, {"id": 1, "amount": 30, "dml_type": 1}]
    )
    table.update([{"id": 1, "amount": 20}])
    with pytest.raises(ledger.ConflictError):
        tx.commit()
    assert visible_rows(table) == [(1, 20)]
    assert sign_sums(table) == {(1,): 1}
    blind = table.transaction()
    blind.append_entries([{"id": 2, "amount": 1, "dml_type": 1}])
    table.update([{"id": 1, "amount": 21}])
    assert blind.commit().version is not None  # insertions alone stay blind


def test_evolving_the_schema_widens_only_columns_whose_values_need_it(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "INTEGER", "qty": "SMALLINT", "price": "FLOAT"}, primary_key="id"
    )
    table.insert([{"id": 1, "qty": 2, "price": 1.5, "note": "n"}], evolve_schema=True)
    assert table.schema == {"id": "INTEGER", "qty": "SMALLINT", "price": "FLOAT", "note": "VARCHAR"}
    table.insert([{"id": 2, "qty": 2**20, "price": 1.5}], evolve_schema=True)
    assert table.schema["qty"] == "BIGINT" and table.schema["id"] == "INTEGER"


def test_partition_values_that_join_alike_stay_apart(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "a": "VARCHAR", "b": "VARCHAR"},
        primary_key="id",
        partition_by=["a", "b"],
    )
    table.insert([{"id": 1, "a": "x\x1fvy", "b": "z"}, {"id": 2, "a": "x", "b": "y\x1fvz"}])
    assert table.count(partitions={"a": "x"}) == 1
    assert table.count(partitions={"a": "x\x1fvy"}) == 1
    assert len(table.files()) == 2


def test_dates_beyond_year_9999_are_refused_before_writing(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"day": "DATE", "v": "INTEGER"}, primary_key="day"
    )
    far = pa.table({"day": pa.array([3_000_000], pa.int32()).cast(pa.date32()), "v": [1]})
    with pytest.raises(ledger.TypeMismatchError, match="day"):
        table.insert(far)
    assert not list(tmp_path.rglob("*.parquet"))


def test_empty_writes_are_no_ops(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    assert table.insert([]).version is None
    assert table.upsert([]).version is None
    assert table.update([]).version is None
    assert table.delete([]).version is None
    assert table.version == 0


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


def test_committed_local_data_files_are_fsynced(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    (data_file,) = table.files()
    assert data_file in synced
    commit_sync = max(i for i, path in enumerate(synced) if "/_log/" in path)
    assert synced.index(data_file) < commit_sync
