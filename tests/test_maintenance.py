"""Maintenance behaviour: merge planning and execution, vacuum, partition drops and rewrites,
and what each merge policy writes, on small hand-written ledgers with exact expected entries.

Most tests run on local disk; the ones whose behaviour depends on how files are read and written
(output layout, rewrites) run on S3 as well. Races live in test_maintenance_concurrency.py and
test_vacuum_running_work.py, bad input in test_maintenance_bad_input.py.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import logging
import random
import sys
import time
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq
import pytest

import ledger
import views
from ledger.maintenance import merge as merging
from ledger.maintenance import vacuum as vacuuming
from ledger.maintenance.merge import PartitionMerge
from ledger.maintenance.partitions import PartitionChange
from tests.conftest import Location
from tests.support.ledger_reads import entry_count, visible_rows
from tests.support.maintenance import ShiftedClock, set_clock_skew, vacuum_now

EVENTS = {"id": "BIGINT", "ts": "TIMESTAMP", "user_id": "INTEGER", "v": "INTEGER"}
FILE_COLUMNS = ["id", "ts", "user_id", "v", "trx_id", "trx_seq", "dml_type"]
DAY = {n: f"2026-01-0{n}" for n in range(1, 10)}


@pytest.fixture
def local_warehouse(local_location: Location) -> ledger.Warehouse:
    return local_location.connect()


def _events(warehouse: ledger.Warehouse, **options: Any) -> ledger.Table:
    return warehouse.create_table(
        "events", EVENTS, primary_key="id", partition_by="day(ts)", **options
    )


def _add(table: ledger.Table, day: int, ids: range | list[int], user: int = 1) -> int:
    """Insert one file of rows on 2026-01-<day>; return its trx_id."""
    rows = [
        {"id": i, "ts": dt.datetime(2026, 1, day, i % 24), "user_id": user, "v": i} for i in ids
    ]
    return table.insert(rows).trx_id


def _day(marker: Any) -> str:
    return str(marker.partition["ts_day"])


def _files_per_day(table: ledger.Table) -> dict[str, int]:
    out: dict[str, int] = {}
    for marker in table.snapshot().markers():
        out[_day(marker)] = out.get(_day(marker), 0) + 1
    return out


def _keys(table: ledger.Table, under: str = "") -> set[str]:
    return {info.key for info in table.store.list(table.prefix + under)}


def _alive_keys(table: ledger.Table) -> set[str]:
    return {table.prefix + m.path for m in table.snapshot().markers()}


def _entries(table: ledger.Table, version: int | None = None) -> list[tuple[Any, ...]]:
    return sorted(table.scan(version=version).fetchall(), key=repr)


def _read_data_file(table: ledger.Table, marker: Any) -> pq.ParquetFile:
    # Opened as one file, never as a dataset: a dataset would add hive columns from the path.
    source = table.store.filesystem.open_input_file(table.store.fs_path(table.prefix + marker.path))
    return pq.ParquetFile(source)


# --- merge: choosing files ---------------------------------------------------------------------


def test_merge_takes_only_files_smaller_than_max_file_size(local_warehouse):
    table = local_warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    table.insert([{"id": i, "v": i} for i in range(5000)])
    for i in range(3):
        table.insert([{"id": 10_000 + i, "v": i}])
    markers = table.snapshot().markers()
    big = max(markers, key=lambda m: m.size)
    before = visible_rows(table)

    result = table.merge(max_file_size=big.size)  # strictly smaller: the three one-row files
    assert result.merged == (PartitionMerge({}, 3, 1, 3, 3),)
    after = table.snapshot().markers()
    assert len(after) == 2 and big in after  # the big file is untouched, marker and all
    assert visible_rows(table) == before

    smallest = min(m.size for m in after)
    assert table.merge(max_file_size=smallest) == merging.MergeResult(None, ())
    assert table.merge(max_file_size=smallest + 1).version is None  # one candidate < min_files


def test_max_files_merges_the_smallest_files_first_and_min_files_skips_small_partitions(
    local_warehouse,
):
    table = local_warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    start = 0
    for rows in (40, 1, 400, 7):
        table.insert([{"id": start + i, "v": i} for i in range(rows)])
        start += rows
    markers = table.snapshot().markers()
    expected = sorted(markers, key=lambda m: (m.size, m.path))[:2]

    result = table.merge(max_files=2)
    assert result.files_in == 2 and result.files_out == 1
    assert result.entries_in == result.entries_out == sum(m.rows for m in expected)
    alive = {m.path for m in table.snapshot().markers()}
    assert not alive & {m.path for m in expected}
    assert {m.path for m in markers} - {m.path for m in expected} <= alive

    version = table.version
    assert table.merge(min_files=4).version is None  # three files left
    assert table.version == version
    assert table.merge(min_files=3).files_in == 3
    assert len(table.files()) == 1 and table.count() == 448


def test_partitions_are_merged_in_order_up_to_max_partitions_in_one_commit(local_warehouse):
    table = _events(local_warehouse)
    for day in (1, 2, 3):
        _add(table, day, [day * 10])
        _add(table, day, [day * 10 + 1])
    before = visible_rows(table)
    version = table.version

    newest = table.merge(order="descending", max_partitions=2)
    assert [p.partition for p in newest.merged] == [{"ts_day": DAY[3]}, {"ts_day": DAY[2]}]
    assert newest.version == version + 1
    assert _files_per_day(table) == {DAY[1]: 2, DAY[2]: 1, DAY[3]: 1}
    last = table.history()[-1]
    assert (last.version, last.operation, last.files_removed, last.files_added) == (
        version + 1,
        "merge",
        4,
        2,
    )

    oldest = table.merge(max_partitions=1)  # ascending by default
    assert [p.partition for p in oldest.merged] == [{"ts_day": DAY[1]}]
    assert table.merge().version is None  # every partition is down to one file
    assert [h.operation for h in table.history()].count("merge") == 2
    assert visible_rows(table) == before
    assert visible_rows(table, version) == before  # time travel before the merges still works


def test_merge_can_be_limited_to_given_partitions(local_warehouse):
    table = _events(local_warehouse)
    for day in (1, 2, 3):
        for i in range(2):
            _add(table, day, [day * 10 + i])

    result = table.merge({"ts_day": [dt.date(2026, 1, 1), DAY[3]]})
    assert [p.partition for p in result.merged] == [{"ts_day": DAY[1]}, {"ts_day": DAY[3]}]
    assert _files_per_day(table) == {DAY[1]: 1, DAY[2]: 2, DAY[3]: 1}
    assert table.merge([{"ts_day": DAY[1]}, {"ts_day": DAY[3]}]).version is None
    assert table.merge(partitions=[{"ts_day": DAY[2]}]).files_in == 2


def test_files_merges_exactly_the_given_alive_files(local_warehouse):
    table = _events(local_warehouse)
    for i in range(3):
        _add(table, 1, [i])
    _add(table, 2, [100])
    first_day = table.snapshot().markers({"ts_day": DAY[1]})
    (second_day,) = table.snapshot().markers({"ts_day": DAY[2]})
    chosen = [first_day[0].path, first_day[2].path, second_day.path]

    result = table.merge(files=chosen)
    assert {(p.partition["ts_day"], p.files_in, p.files_out) for p in result.merged} == {
        (DAY[1], 2, 1),
        (DAY[2], 1, 1),  # a single file is rewritten alone when named
    }
    alive = {m.path for m in table.snapshot().markers()}
    assert first_day[1].path in alive
    assert not alive & set(chosen)
    assert table.count() == 4


# --- merge: what it writes -----------------------------------------------------------------------


def test_merge_output_is_sorted_by_the_sort_order_and_holds_no_partition_columns(warehouse):
    table = warehouse.create_table(
        "events", EVENTS, primary_key="id", partition_by="day(ts)", sort_by="v"
    )
    values = list(range(30))
    random.Random(7).shuffle(values)
    for chunk in range(3):
        rows = [
            {"id": 100 + v, "ts": dt.datetime(2026, 1, 1, v % 24), "user_id": 1, "v": v}
            for v in values[chunk * 10 : chunk * 10 + 10]
        ]
        table.insert(rows)
    table.update([{"id": 105, "v": -5}])  # a second entry order inside one key
    before = _entries(table)

    result = table.merge()
    assert result.merged == (PartitionMerge({"ts_day": DAY[1]}, 4, 1, 32, 30),)
    (marker,) = table.snapshot().markers()
    assert marker.path.startswith("_data/ts_day=2026-01-01/")
    data = _read_data_file(table, marker).read()
    assert data.column_names == FILE_COLUMNS  # no ts_day: partition values live in the path
    order = [(r["v"], r["trx_id"], r["trx_seq"]) for r in data.to_pylist()]
    assert order == sorted(order)
    assert data.num_rows == 30 and table.scan().columns == FILE_COLUMNS
    assert {r for r in before if r[-1] == 1 and r[0] != 105} <= set(_entries(table))
    assert table.count() == 30


def test_merge_sizes_row_groups_and_files_for_the_data(local_warehouse, monkeypatch):
    monkeypatch.setattr(merging, "ROW_GROUP_ROWS", 1)
    monkeypatch.setattr(merging, "_TARGET_ROW_GROUP_BYTES", 3_000)
    monkeypatch.setattr(merging, "_TARGET_FILE_BYTES", 15_000)
    narrow = local_warehouse.create_table("narrow", {"id": "BIGINT"}, primary_key="id")
    wide = local_warehouse.create_table(
        "wide", {"id": "BIGINT", "text": "VARCHAR"}, primary_key="id"
    )
    noise = random.Random(3)
    # Keys spread apart: consecutive ones would delta-encode to almost nothing per row.
    ids = noise.sample(range(10**12), 8000)
    for start in range(0, 8000, 2000):
        narrow.insert([{"id": i} for i in ids[start : start + 2000]])
    for start in range(0, 1200, 300):
        wide.insert(
            [
                {"id": i, "text": "".join(noise.choices("abcdefghijklmnop", k=200))}
                for i in range(start, start + 300)
            ]
        )

    group_rows = {}
    for table in (narrow, wide):
        inputs = table.snapshot().markers()
        rows = sum(m.rows for m in inputs)
        bytes_per_row = sum(m.size for m in inputs) / rows
        expected_group = int(3_000 / bytes_per_row)
        expected_file = int(max(expected_group, 15_000 / bytes_per_row))
        table.merge()
        outputs = sorted(table.snapshot().markers(), key=lambda m: m.key_min)
        sizes = [[g.num_rows for g in _groups(table, m)] for m in outputs]
        assert max(max(s) for s in sizes) == expected_group
        assert all(sum(s) == expected_file for s in sizes[:-1])  # full files but the last
        assert sum(map(sum, sizes)) == rows
        assert len(outputs) == -(-rows // expected_file) > 1
        for before, after in itertools.pairwise(outputs):
            assert before.key_max < after.key_min  # contiguous runs of the sort order
        group_rows[table.name] = expected_group
    assert group_rows["narrow"] > 10 * group_rows["wide"] > 0


def _groups(table: ledger.Table, marker: Any) -> list[Any]:
    metadata = _read_data_file(table, marker).metadata
    return [metadata.row_group(i) for i in range(metadata.num_row_groups)]


# --- merge: progress -----------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress_table(warehouse: ledger.Warehouse) -> ledger.Table:
    table = _events(warehouse)
    for day in (1, 2):
        _add(table, day, [day * 10, day * 10 + 1])
        _add(table, day, [day * 10 + 2])
    return table


def _progress_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "ledger" and r.levelno == logging.INFO and r.getMessage().startswith("merge")
    ]


def test_merge_logs_progress_at_info_when_stderr_is_not_a_terminal(
    local_warehouse, caplog, monkeypatch
):
    table = _progress_table(local_warehouse)
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    caplog.set_level(logging.INFO, logger="ledger")
    table.merge()
    assert _progress_lines(caplog) == ["merge events: 3/6 entries", "merge events: 6/6 entries"]
    assert stderr.getvalue() == ""


def test_merge_shows_a_progress_bar_on_a_terminal_and_can_be_told_not_to(
    local_warehouse, caplog, monkeypatch
):
    table = _progress_table(local_warehouse)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    caplog.set_level(logging.INFO, logger="ledger")
    table.merge(partitions={"ts_day": DAY[1]})  # progress=None: a bar, since stderr is a tty
    assert "merge events" in terminal.getvalue() and "100%" in terminal.getvalue()
    assert _progress_lines(caplog) == []

    terminal.seek(0)
    terminal.truncate()
    table.merge(partitions={"ts_day": DAY[2]}, progress=False)
    assert terminal.getvalue() == ""
    assert _progress_lines(caplog) == ["merge events: 3/3 entries"]


def test_progress_true_forces_a_bar(local_warehouse, monkeypatch, caplog):
    table = _progress_table(local_warehouse)
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    caplog.set_level(logging.INFO, logger="ledger")
    table.merge(progress=True)
    assert "merge events" in stderr.getvalue() and "100%" in stderr.getvalue()
    assert _progress_lines(caplog) == []


# --- vacuum ---------------------------------------------------------------------------------------


def test_vacuum_deletes_files_tombstoned_longer_ago_than_grace_and_keeps_recent_ones(
    local_warehouse,
):
    table = _events(local_warehouse)
    for day in (1, 2):
        _add(table, day, [day * 10])
        _add(table, day, [day * 10 + 1])
    old = table.snapshot().markers({"ts_day": DAY[1]})
    recent = table.snapshot().markers({"ts_day": DAY[2]})
    rows = visible_rows(table)
    table.merge({"ts_day": DAY[1]})
    data_before = _keys(table, "_data/")
    nothing = table.vacuum(dt.timedelta(hours=1))
    assert (nothing.version, nothing.data_files_deleted, nothing.orphans_deleted) == (None, 0, 0)
    assert _keys(table, "_data/") == data_before
    time.sleep(0.8)
    table.merge({"ts_day": DAY[2]})
    data_before = _keys(table, "_data/")

    result = table.vacuum(0.4)  # day 1's inputs were tombstoned 0.8 s ago, day 2's just now
    assert (result.version, result.data_files_deleted, result.orphans_deleted) == (
        table.version,
        2,
        0,
    )
    assert table.history()[-1].operation == "vacuum"
    assert _keys(table, "_data/") == data_before - {table.prefix + m.path for m in old}
    state_files = table.snapshot().state.files
    assert not {m.path for m in old} & set(state_files)  # markers gone from the state too
    assert all(not state_files[m.path].alive for m in recent)
    assert visible_rows(table) == rows

    assert vacuum_now(table).data_files_deleted == 2
    assert _keys(table, "_data/") == _alive_keys(table)
    assert visible_rows(table) == rows and table.count() == 4


def test_snapshots_newer_than_the_grace_period_stay_readable(local_warehouse):
    table = _events(local_warehouse)
    _add(table, 1, [1])
    _add(table, 1, [2])
    merged = table.merge().version
    time.sleep(0.5)
    _add(table, 1, [3])
    answers = {v: visible_rows(table, v) for v in (merged, merged + 1)}

    result = table.vacuum(0.3)
    assert result.data_files_deleted == 2
    for version, rows in answers.items():  # the version current at the cutoff, and newer ones
        assert visible_rows(table, version) == rows
        assert visible_rows(local_warehouse.table("events"), version) == rows
    assert visible_rows(table, result.version) == answers[merged + 1]


def test_a_snapshot_older_than_the_grace_period_whose_files_were_vacuumed_is_not_found(
    local_warehouse,
):
    table = _events(local_warehouse)
    _add(table, 1, [1])
    superseded = table.version
    _add(table, 1, [2])
    table.merge()
    time.sleep(0.4)
    table.vacuum(0.2)  # deletes the files version `superseded` reads
    with pytest.raises(ledger.SnapshotNotFoundError):
        entry_count(table, superseded)


def test_vacuum_trims_the_log_and_the_table_opens_fresh_and_from_a_stale_handle(
    local_location, monkeypatch
):
    # Log names younger than the transaction timeout are kept (a writer may aim at them).
    set_clock_skew(monkeypatch)
    warehouse = local_location.connect()
    table = _events(warehouse, checkpoint_interval=4, transaction_timeout=1.5)
    stale = local_location.connect().table("events")  # opened at version 0, before any vacuum
    for i in range(6):
        _add(table, 1 + i % 2, [i])
    table.merge()
    rows = visible_rows(table)
    old_versions = [h.version for h in table.history()]

    vacuum_now(table)  # expunges the merged files and writes a checkpoint at its version
    monkeypatch.setattr(vacuuming, "time", ShiftedClock(1.6))  # past the transaction timeout
    vacuum_now(table)  # every snapshot within grace starts from that checkpoint now
    checkpoint = table.version
    log_keys = {k.rsplit("/", 1)[1] for k in _keys(table, "_log/")}
    assert log_keys == {f"{checkpoint:020d}.checkpoint.jsonl", "_last_checkpoint"}
    assert table.history() == []
    for version in old_versions:
        with pytest.raises(ledger.SnapshotNotFoundError):
            table.snapshot(version=version)

    fresh = local_location.connect().table("events")
    assert (fresh.version, visible_rows(fresh)) == (checkpoint, rows)
    assert stale.refresh().version == checkpoint
    assert visible_rows(stale) == rows
    info = stale.insert([{"id": 99, "ts": dt.datetime(2026, 1, 5), "user_id": 1, "v": 99}])
    assert info.version == checkpoint + 1
    assert table.refresh().count() == 7 and entry_count(fresh.refresh()) == 7


def test_vacuum_deletes_orphans_of_a_crashed_transaction_only_once_old_enough(
    local_warehouse, monkeypatch
):
    set_clock_skew(monkeypatch)
    table = _events(local_warehouse, transaction_timeout=2)
    _add(table, 1, [1, 2])
    crashed = table.transaction()
    crashed.insert([{"id": 3, "ts": dt.datetime(2026, 1, 1), "user_id": 1, "v": 3}])
    # ... and the process dies: neither commit nor abort runs.
    (orphan,) = _keys(table, "_data/") - _alive_keys(table)
    committed = _alive_keys(table)

    def vacuum_at(seconds_later: float, grace: float) -> int:
        monkeypatch.setattr(vacuuming, "time", ShiftedClock(seconds_later))
        return table.vacuum(grace).orphans_deleted

    assert vacuum_at(0, grace=0) == 0
    assert vacuum_at(1.5, grace=0) == 0  # younger than the transaction timeout
    assert vacuum_at(5, grace=10) == 0  # older than the timeout, younger than grace
    assert orphan in _keys(table, "_data/")
    assert vacuum_at(10.5, grace=10) == 1
    assert _keys(table, "_data/") == committed
    assert visible_rows(local_warehouse.table("events")) == visible_rows(table)
    assert table.count() == 2


def test_vacuum_orphan_rule_uses_the_clock_skew_margin_of_the_merge_module(
    local_warehouse, monkeypatch
):
    # The documented knob (and the one tests turn off) is ledger.maintenance.merge.CLOCK_SKEW_MS.
    monkeypatch.setattr(merging, "CLOCK_SKEW_MS", 0)
    table = _events(local_warehouse, transaction_timeout=1)
    crashed = table.transaction()
    crashed.insert([{"id": 3, "ts": dt.datetime(2026, 1, 1), "user_id": 1, "v": 3}])
    monkeypatch.setattr(vacuuming, "time", ShiftedClock(5))
    assert vacuum_now(table).orphans_deleted == 1
    assert _keys(table, "_data/") == set()


def test_vacuum_deletes_reservations_every_running_transaction_is_past(
    local_warehouse, monkeypatch
):
    set_clock_skew(monkeypatch)
    table = _events(local_warehouse, transaction_timeout=1.5, checkpoint_interval=2)
    ids = [_add(table, 1, [i]) for i in range(3)]  # versions 1-3, a checkpoint at 2
    time.sleep(1.6)  # every transaction that began before now has committed or timed out
    running = table.transaction()
    running.insert([{"id": 10, "ts": dt.datetime(2026, 1, 2), "user_id": 1, "v": 10}])
    assert running.trx_id > max(ids)
    assert len(_keys(table, "_trx/")) == 4

    result = table.vacuum(0)
    # Ids committed by the checkpoint every snapshot now starts from (versions 1 and 2) go;
    # the third stays (a transaction could still hold a snapshot without it), and so does
    # the running transaction's.
    assert result.reservations_deleted == 2
    assert _keys(table, "_trx/") == {
        f"{table.prefix}_trx/{ids[2]:020d}",
        f"{table.prefix}_trx/{running.trx_id:020d}",
    }
    assert running.commit().trx_id == running.trx_id  # the running transaction still commits
    later = _add(table, 1, [20])
    assert later > running.trx_id
    assert table.count() == 5


# --- drop_partitions ------------------------------------------------------------------------------


def test_drop_partitions_by_value_list_and_predicate_is_log_only_until_vacuum(local_warehouse):
    table = _events(local_warehouse)
    for day in (1, 2, 3, 4, 5):
        _add(table, day, [day * 10, day * 10 + 1, day * 10 + 2])
    table.update([{"id": 10, "v": -1}])  # day 1: two files, five entries, three rows
    start = table.snapshot()
    data = _keys(table, "_data/")

    dropped = table.drop_partitions({"ts_day": DAY[1]})
    assert dropped == PartitionChange(start.version + 1, 2, 0, 5)
    assert table.count() == 12
    dropped = table.drop_partitions([{"ts_day": dt.date(2026, 1, 2)}, {"ts_day": DAY[3]}])
    assert dropped == PartitionChange(start.version + 2, 2, 0, 6)
    dropped = table.drop_partitions(where="ts_day >= '2026-01-05'")
    assert dropped == PartitionChange(start.version + 3, 1, 0, 3)
    assert table.drop_partitions({"ts_day": DAY[1]}) == PartitionChange(None, 0, 0, 0)

    assert [r[0] for r in visible_rows(table)] == [40, 41, 42]
    assert table.count() == 3 and _files_per_day(table) == {DAY[4]: 1}
    assert [h.operation for h in table.history()][-3:] == ["drop_partitions"] * 3
    assert _keys(table, "_data/") == data  # log-only: every file is still there
    assert entry_count(table, start.version) == 17  # and time travel before the drop reads it

    assert vacuum_now(table).data_files_deleted == 5
    assert _keys(table, "_data/") == _alive_keys(table)
    assert [r[0] for r in visible_rows(local_warehouse.table("events"))] == [40, 41, 42]


# --- rewrite_partitions ---------------------------------------------------------------------------


def test_rewrite_purges_one_users_rows_and_keeps_untouched_files(warehouse):
    table = _events(warehouse)
    _add(table, 1, [1, 2], user=7)
    _add(table, 1, [3, 4], user=8)
    _add(table, 2, [5], user=7)
    _add(table, 2, [6], user=8)
    _add(table, 3, [7], user=9)
    table.update([{"id": 5, "v": 50}])  # user 7's update: a mark and a new row, in day 2
    untouched = [m for m in table.snapshot().markers() if m.key_min in ((3,), (6,), (7,))]
    schema = table.schema
    kept_entries = [e for e in _entries(table) if e[2] != 7]
    purged = len(_entries(table)) - len(kept_entries)

    result = table.rewrite_partitions(
        {"ts_day": [DAY[1], DAY[2], DAY[3]]}, "SELECT * FROM entries WHERE user_id <> 7"
    )
    assert result == PartitionChange(table.version, 3, 0, purged)
    assert _entries(table) == kept_entries  # the same entries, trx_id and trx_seq kept
    alive = table.snapshot().markers()
    assert sorted(alive, key=lambda m: m.path) == sorted(untouched, key=lambda m: m.path)
    assert table.schema == schema
    assert table.history()[-1].operation == "rewrite_partitions"

    result = table.rewrite_partitions({"ts_day": DAY[1]}, "SELECT * FROM entries WHERE id <> 3")
    assert (result.files_removed, result.files_added, result.entries_removed) == (1, 1, 1)
    assert [r[0] for r in visible_rows(table)] == [4, 6, 7]
    (rewritten,) = table.snapshot().markers({"ts_day": DAY[1]})
    assert _read_data_file(table, rewritten).read().column_names == FILE_COLUMNS


# --- what each policy writes ---------------------------------------------------------------------


def test_collapsing_merge_cancels_marks_against_the_insertions_they_undo(local_warehouse):
    table = local_warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    first = table.insert([{"id": 1, "v": 1}, {"id": 2, "v": 2}]).trx_id
    update = table.update([{"id": 1, "v": 10}]).trx_id
    table.delete([2])
    last = table.insert([{"id": 3, "v": 3}]).trx_id
    assert entry_count(table) == 6

    result = table.merge()
    assert (result.entries_in, result.entries_out) == (6, 2)
    assert table.scan().order("id, trx_id, trx_seq").fetchall() == [
        (1, 10, update, 1, 1),
        (3, 3, last, 0, 1),
    ]
    assert first < update < last


@pytest.mark.parametrize("version_column", ["ver", None])
def test_replacing_merge_keeps_the_latest_entry_and_drops_marks_once_settled(
    local_warehouse, monkeypatch, version_column
):
    """Without a version column a settled mark is dropped; with one it stays, so that an older
    version arriving after the delete stays hidden."""
    set_clock_skew(monkeypatch)
    table = local_warehouse.create_table(
        "dim",
        {"id": "BIGINT", "name": "VARCHAR", "ver": "INTEGER"},
        primary_key="id",
        policy={"name": "replacing", "version_column": version_column},
        transaction_timeout=1.5,
    )
    first = table.insert([{"id": 1, "name": "a", "ver": 1}, {"id": 2, "name": "b", "ver": 1}])
    newer = table.insert([{"id": 1, "name": "a3", "ver": 3}])
    stale = table.insert([{"id": 1, "name": "stale", "ver": 2}])  # arrives last, older version
    table.insert([{"id": 3, "name": "c", "ver": 1}])
    deleted = table.delete([3])
    latest_of_1 = (
        (1, "a3", 3, newer.trx_id, 0, 1) if version_column else (1, "stale", 2, stale.trx_id, 0, 1)
    )
    mark = (3, "c", 1, deleted.trx_id, 0, -1)

    table.merge()  # every file is younger than the timeout: the mark must stay
    assert table.scan().order("id").fetchall() == [
        latest_of_1,
        (2, "b", 1, first.trx_id, 1, 1),
        mark,
    ]
    monkeypatch.setattr(merging, "time", ShiftedClock(1.6))  # the merge's clock, past the timeout
    (merged,) = table.snapshot().markers()
    table.merge(files=[merged.path], min_files=1)  # now no older transaction can still commit
    kept_mark = [mark] if version_column else []
    assert table.scan().order("id").fetchall() == [
        latest_of_1,
        (2, "b", 1, first.trx_id, 1, 1),
        *kept_mark,
    ]
    assert visible_rows(table) == [latest_of_1[:3], (2, "b", 1)]
    if version_column:  # the delete of version 1 still hides an older version arriving late
        table.insert([{"id": 3, "name": "late", "ver": 0}])
        shown = views.visible(table).order("id").fetchall()
        assert shown == [latest_of_1[:3], (2, "b", 1)]


def test_dedup_merge_drops_a_second_load_of_the_same_events(local_warehouse):
    table = local_warehouse.create_table(
        "clicks",
        {"event_id": "VARCHAR", "n": "INTEGER"},
        policy={"name": "dedup", "dedup_key": ["event_id"]},
    )
    first = table.insert([{"event_id": "e1", "n": 1}, {"event_id": "e2", "n": 2}]).trx_id
    again = table.insert([{"event_id": "e2", "n": 2}, {"event_id": "e3", "n": 3}]).trx_id
    kept = sorted(e for e in table.scan().fetchall() if (e[0], e[3]) != ("e2", again))

    table.merge()
    assert sorted(table.scan().fetchall()) == kept
    assert [(e[0], e[3], e[5]) for e in kept] == [
        ("e1", first, 1),
        ("e2", first, 1),
        ("e3", again, 1),
    ]


def test_aggregating_merge_rolls_each_group_up_into_one_entry(local_warehouse):
    table = local_warehouse.create_table(
        "totals",
        {"g": "VARCHAR", "amount": "DECIMAL(18,2)", "events": "BIGINT"},
        primary_key="g",
        policy={"name": "aggregating", "measures": {"amount": "sum", "events": "count"}},
    )
    table.insert([{"g": "x", "amount": 10, "events": 1}, {"g": "y", "amount": 5, "events": 1}])
    second = table.insert([{"g": "x", "amount": 2.5, "events": 1}]).trx_id
    table.append_entries([{"g": "y", "amount": 5, "events": 1, "dml_type": -1}])

    table.merge()
    assert table.scan().fetchall() == [("x", Decimal("12.50"), 2, second, 0, 1)]  # y held no rows

    sums = local_warehouse.create_table(
        "sums",
        {"g": "VARCHAR", "amount": "BIGINT"},
        primary_key="g",
        policy={"name": "aggregating", "measures": {"amount": "sum"}},
    )
    sums.insert([{"g": "z", "amount": 4}])
    cancel = sums.append_entries([{"g": "z", "amount": 4, "dml_type": -1}]).trx_id
    sums.merge()
    assert sums.scan().fetchall() == [("z", 0, cancel, 0, 1)]  # no count measure: kept at zero

    extremes = local_warehouse.create_table(
        "extremes",
        {"g": "VARCHAR", "lo": "INTEGER", "hi": "INTEGER"},
        primary_key="g",
        policy={"name": "aggregating", "measures": {"lo": "min", "hi": "max"}, "insert_only": True},
    )
    extremes.insert([{"g": "x", "lo": 3, "hi": 3}])
    latest = extremes.insert([{"g": "x", "lo": 1, "hi": 2}, {"g": "w", "lo": 9, "hi": 9}]).trx_id
    extremes.merge()
    assert extremes.scan().order("g").fetchall() == [
        ("w", 9, 9, latest, 1, 1),
        ("x", 1, 3, latest, 0, 1),
    ]


def test_custom_merge_runs_the_users_query(local_warehouse):
    table = local_warehouse.create_table(
        "latest",
        {"id": "BIGINT", "v": "INTEGER"},
        primary_key="id",
        policy={
            "name": "custom",
            "sql": "SELECT * FROM entries QUALIFY row_number() OVER "
            "(PARTITION BY id ORDER BY trx_id DESC, trx_seq DESC) = 1",
        },
    )
    first = table.insert([{"id": 1, "v": 1}, {"id": 2, "v": 2}]).trx_id
    second = table.insert([{"id": 1, "v": 5}]).trx_id

    result = table.merge()
    assert (result.entries_in, result.entries_out) == (3, 2)
    assert table.scan().order("id").fetchall() == [(1, 5, second, 0, 1), (2, 2, first, 1, 1)]
