"""The table log: format, versions, checkpoints, refresh, snapshots and time travel."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

import ledger
from ledger.log.table_log import TableLog
from tests.support.failing import FailingStore
from tests.support.ledger_reads import visible_rows


def _log_keys(location, table) -> list[str]:
    store = location.connect().store
    return [i.key[len(table.prefix) :] for i in store.list(table.prefix + "_log/")]


def test_log_files_are_icedb_style_json_lines_with_ledger_extensions(warehouse, location):
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "day": "DATE"}, primary_key="id", partition_by="day"
    )
    info = table.insert(
        [{"id": 7, "day": dt.date(2026, 11, 21)}, {"id": 3, "day": dt.date(2026, 11, 21)}]
    )
    store = location.connect().store
    lines = [
        json.loads(x)
        for x in store.get(table.prefix + "_log/00000000000000000001.jsonl").splitlines()
    ]
    meta, schema, marker = lines
    assert meta["v"] == 1 and meta["sch"] == 1 and meta["f"] == 2 and "tmb" not in meta
    assert meta["version"] == 1 and meta["op"] == "insert" and meta["trx_id"] == info.trx_id
    assert isinstance(meta["t"], int)
    assert schema == {"id": "BIGINT", "day": "DATE"}
    assert marker["p"].startswith("_data/day=2026-11-21/") and marker["p"].endswith(".parquet")
    assert marker["b"] == store.size(table.prefix + marker["p"])
    assert (marker["rows"], marker["dml_sum"]) == (2, 2)
    assert marker["trx_min"] == marker["trx_max"] == info.trx_id
    assert marker["part"] == {"day": "2026-11-21"}
    assert (marker["key_min"], marker["key_max"]) == ([3], [7])
    first = [
        json.loads(x)
        for x in store.get(table.prefix + "_log/00000000000000000000.jsonl").splitlines()
    ]
    assert first[0]["op"] == "create_table"
    assert first[0]["config"]["primary_key"] == ["id"]
    assert first[0]["config"]["partition_by_key_only"] is False


def test_partition_by_key_columns_only_is_recorded(warehouse):
    keyed = warehouse.create_table(
        "a", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id", partition_by="bucket(8, id)"
    )
    other = warehouse.create_table(
        "b", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id", partition_by="v"
    )
    assert keyed.config["partition_by_key_only"] is True
    assert other.config["partition_by_key_only"] is False


def test_versions_are_gapless_and_timestamps_strictly_increase(warehouse):
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    for i in range(6):
        table.insert([{"id": i}])
    history = table.history()
    assert [h.version for h in history] == list(range(7))
    times = [h.timestamp for h in history]
    assert times == sorted(times) and len(set(times)) == len(times)
    trx_ids = [h.trx_id for h in history[1:]]
    assert trx_ids == sorted(trx_ids) and len(set(trx_ids)) == len(trx_ids)


def test_checkpoints_every_n_commits_and_opening_reads_only_the_tail(warehouse, location):
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "v": "VARCHAR"}, primary_key="id", checkpoint_interval=5
    )
    for i in range(13):
        table.upsert([{"id": i % 4, "v": f"v{i}"}])
    keys = _log_keys(location, table)
    assert "_log/00000000000000000005.checkpoint.jsonl" in keys
    assert "_log/00000000000000000010.checkpoint.jsonl" in keys
    assert json.loads(location.connect().store.get(table.prefix + "_log/_last_checkpoint")) == {
        "version": 10
    }

    counting = FailingStore(location.connect().store, fail_at=None)
    reopened = ledger.Warehouse(counting).table("t")
    reads = [c for c in counting.counter.log if c.startswith("get")]
    assert sorted(r.rsplit("/", 1)[1] for r in reads) == [
        "00000000000000000010.checkpoint.jsonl",
        "00000000000000000011.jsonl",
        "00000000000000000012.jsonl",
        "00000000000000000013.jsonl",
        "_last_checkpoint",
    ]
    assert visible_rows(reopened) == visible_rows(table)
    assert reopened.version == 13


def test_refresh_is_incremental(warehouse, location):
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    reader_store = FailingStore(location.connect().store, fail_at=None)
    reader = ledger.Warehouse(reader_store).table("t")
    table.insert([{"id": 1}])
    table.insert([{"id": 2}])
    reader_store.counter.log.clear()
    reader.refresh()
    assert reader.version == 2 and reader.count() == 2
    gets = [c for c in reader_store.counter.log if c.startswith("get")]
    assert [g.rsplit("/", 1)[1] for g in gets] == [
        "00000000000000000001.jsonl",
        "00000000000000000002.jsonl",
    ]
    lists = [c for c in reader_store.counter.log if c.startswith("list")]
    assert len(lists) <= 2


def test_snapshots_are_repeatable_and_travel_by_version_and_timestamp(warehouse):
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id", checkpoint_interval=3
    )
    table.insert([{"id": 1, "v": 1}])
    middle = table.history()[-1]
    time.sleep(0.01)
    for v in range(2, 8):
        table.update([{"id": 1, "v": v}])
    assert visible_rows(table, version=1) == [(1, 1)]
    assert visible_rows(table, version=4) == [(1, 4)]
    assert visible_rows(table) == [(1, 7)]
    snapshot = table.snapshot(version=3)
    first = snapshot.scan().fetchall()
    table.update([{"id": 1, "v": 100}])
    assert snapshot.scan().fetchall() == first
    assert table.snapshot(timestamp=middle.timestamp).version == 1
    assert table.snapshot(timestamp=int(middle.timestamp.timestamp() * 1000)).version == 1
    with pytest.raises(ledger.SnapshotNotFoundError):
        table.snapshot(version=99)
    with pytest.raises(ledger.SnapshotNotFoundError):
        table.snapshot(timestamp=dt.datetime(2000, 1, 1))


def test_a_truncated_or_corrupt_log_file_is_an_error_naming_it(warehouse, location):
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    store = location.connect().store
    key = table.prefix + "_log/00000000000000000001.jsonl"
    good = store.get(key)
    store.put(key, good[:-10])
    with pytest.raises(ledger.CorruptLogError, match=r"00000000000000000001\.jsonl"):
        location.connect().table("t")
    store.put(key, good.replace(b'"rows"', b'"rowz"'))
    with pytest.raises(ledger.CorruptLogError, match=r"00000000000000000001\.jsonl"):
        location.connect().table("t")
    store.put(key, b"{not json}\n")
    with pytest.raises(ledger.CorruptLogError, match="line 0"):
        location.connect().table("t")


def test_a_missing_version_is_a_gap_not_silently_skipped(warehouse, location):
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    for i in range(3):
        table.insert([{"id": i}])
    location.connect().store.delete(table.prefix + "_log/00000000000000000002.jsonl")
    with pytest.raises(ledger.CorruptLogError, match="missing"):
        location.connect().table("t")


def test_log_files_are_never_rewritten(warehouse, location):
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id", checkpoint_interval=2)
    store = location.connect().store
    seen: dict[str, bytes] = {}
    for i in range(6):
        table.upsert([{"id": i % 2}])
        for info in store.list(table.prefix + "_log/"):
            if info.key.endswith(".jsonl"):
                data = store.get(info.key)
                assert seen.setdefault(info.key, data) == data


def test_table_log_reads_many_files_in_parallel(warehouse, location, monkeypatch):
    import threading

    table = warehouse.create_table(
        "t", {"id": "BIGINT"}, primary_key="id", checkpoint_interval=1000
    )
    for i in range(12):
        table.insert([{"id": i}])
    threads: set[int] = set()
    original = TableLog.read

    def spy(self, key):
        threads.add(threading.get_ident())
        time.sleep(0.005)
        return original(self, key)

    monkeypatch.setattr(TableLog, "read", spy)
    location.connect().table("t")
    assert len(threads) > 1
