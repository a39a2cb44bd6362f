"""Vacuum keeps what work still in flight needs, and cleans up what dead work left behind.

- A transaction that can still commit (open for less than the table's transaction timeout)
  keeps every data file it may read (its snapshot's) or check for conflicts (those committed
  after its snapshot), whatever merges and vacuums with a shorter grace run meanwhile: its reads
  answer, its conflict check raises ConflictError (which retries), never a storage error.
- Counter increments racing a loop of merge + vacuum(0) each land exactly once.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import ledger
from ledger.maintenance import merge as merging
from ledger.maintenance import vacuum as vacuuming
from tests.conftest import Location
from tests.support.ledger_reads import visible_rows
from tests.support.maintenance import (
    LOCAL_ONLY,
    add_rows,
    assert_files_consistent,
    data_keys,
    other_handle,
    region_table,
    run_once_before,
    set_clock_skew,
    sorted_entries,
    vacuum_now,
)

SCHEMA = {"k": "BIGINT", "v": "BIGINT"}
COUNTER = 0


def _counter_table(warehouse: ledger.Warehouse, name: str = "counter") -> ledger.Table:
    table = warehouse.create_table(name, SCHEMA, primary_key="k")
    table.insert([{"k": COUNTER, "v": 0}])
    return table


def _lookup(table: ledger.Table, keys: list[int]) -> dict[int, int]:
    reader = table.transaction()
    try:
        return {int(r["k"]): int(r["v"]) for r in reader.lookup(keys).to_pylist()}
    finally:
        reader.abort()


def _value(table: ledger.Table, key: int = COUNTER) -> int | None:
    return _lookup(table.refresh(), [key]).get(key)


def _merge_and_vacuum(table: ledger.Table) -> ledger.maintenance.vacuum.VacuumResult:
    table.merge(min_files=1)
    return vacuum_now(table)


def test_an_open_transaction_reads_its_snapshot_after_a_merge_and_vacuum_0(
    location: Location,
) -> None:
    warehouse = location.connect()
    table = _counter_table(warehouse)
    table.upsert([{"k": COUNTER, "v": 1}])
    running = table.transaction()
    other = location.connect().table("counter")
    other.upsert([{"k": COUNTER, "v": 2}])
    result = _merge_and_vacuum(other)
    assert result.data_files_deleted == 0  # all three tombstoned files are still needed

    assert running.lookup([COUNTER]).to_pylist() == [{"k": COUNTER, "v": 1}]
    running.upsert([{"k": COUNTER, "v": 10}])
    with pytest.raises(ledger.ConflictError):  # the other upsert wrote the key it read
        running.commit()
    assert _value(other) == 2

    # Once the transaction is over, nothing needs the tombstoned files any more.
    assert vacuum_now(other).data_files_deleted == 3
    assert data_keys(other) == {other.prefix + m.path for m in other.snapshot().state.alive_files}
    assert _value(location.connect().table("counter")) == 2


def test_a_commit_checks_conflicts_against_files_merged_and_vacuumed_since_its_snapshot(
    location: Location,
) -> None:
    warehouse = location.connect()
    table = _counter_table(warehouse)
    running = table.transaction()
    assert running.lookup([COUNTER]).to_pylist() == [{"k": COUNTER, "v": 0}]
    running.upsert([{"k": COUNTER, "v": 1}])
    other = location.connect().table("counter")
    other.upsert([{"k": COUNTER, "v": 5}])
    _merge_and_vacuum(other)
    with pytest.raises(ledger.ConflictError):
        running.commit()
    assert _value(other) == 5


def test_a_blind_insert_commits_across_a_merge_and_vacuum_0(location: Location) -> None:
    warehouse = location.connect()
    table = _counter_table(warehouse)
    running = table.transaction()
    running.insert([{"k": 7, "v": 7}])
    other = location.connect().table("counter")
    other.upsert([{"k": COUNTER, "v": 3}])
    _merge_and_vacuum(other)
    assert running.commit().version is not None
    assert _lookup(other.refresh(), [COUNTER, 7]) == {COUNTER: 3, 7: 7}


def test_a_timed_out_transaction_no_longer_holds_files(
    local_location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_clock_skew(monkeypatch)
    warehouse = local_location.connect()
    # Long enough for the upsert and merge below on a loaded machine.
    table = warehouse.create_table("counter", SCHEMA, primary_key="k", transaction_timeout=2.0)
    table.insert([{"k": COUNTER, "v": 0}])
    running = table.transaction()
    table.upsert([{"k": COUNTER, "v": 1}])
    table.merge(min_files=1)
    assert vacuum_now(table).data_files_deleted == 0
    time.sleep(2.1)  # past the timeout: the transaction can no longer commit
    assert vacuum_now(table).data_files_deleted == 2
    running.insert([{"k": 5, "v": 5}])
    with pytest.raises(ledger.TransactionTimeoutError):
        running.commit()
    assert _value(table) == 1 and table.count() == 1


def _increment(tx: ledger.Transaction, marker_key: int) -> None:
    current = tx.lookup([COUNTER]).to_pylist()[0]["v"]
    # The value each increment read is kept under its own key: serializable increments read
    # 0, 1, 2, ... each exactly once.
    tx.upsert([{"k": COUNTER, "v": current + 1}, {"k": marker_key, "v": current}])


def _run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * count
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as e:  # reported, never swallowed
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_increments_racing_merge_and_vacuum_0_each_land_exactly_once(location: Location) -> None:
    warehouse = location.connect()
    _counter_table(warehouse)
    writers, increments = 3, 6 if location.backend == "local" else 4
    finished: list[int] = []  # writers done (list.append is atomic)

    def write(writer: int) -> list[Any]:
        table = location.connect().table("counter")
        outcomes: list[Any] = []
        try:
            for n in range(increments):
                marker = 1000 * (writer + 1) + n
                try:
                    table.retrying(lambda tx, m=marker: _increment(tx, m), retries=50)
                    outcomes.append(marker)
                except ledger.ConflictError as e:
                    outcomes.append(e)
        finally:
            finished.append(writer)
        return outcomes

    def maintain() -> int:
        table = location.connect().table("counter")
        rounds = 0
        while len(finished) < writers:
            _merge_and_vacuum(table)
            rounds += 1
        return rounds

    def role(i: int) -> Any:
        return maintain() if i == writers else write(i)

    results = _run_threads(writers + 1, role)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors  # no StorageError (nor anything else) escaped
    outcomes = [o for r in results[:writers] for o in r]
    landed = [o for o in outcomes if isinstance(o, int)]
    assert results[writers] >= 1
    assert len(landed) >= 1

    table = location.connect().table("counter")
    assert _value(table) == len(landed)
    markers = _lookup(table, landed)
    assert set(markers) == set(landed)
    assert sorted(markers.values()) == list(range(len(landed)))
    assert table.count() == 1 + len(landed)
    # Nothing any alive marker names is missing.
    assert {table.prefix + m.path for m in table.snapshot().state.alive_files} <= data_keys(table)


def test_a_spark_upsert_in_an_open_transaction_reads_files_merged_and_vacuumed(
    spark: Any, tmp_path: Any
) -> None:
    import ledger.spark as ls

    location = Location("local", str(tmp_path / "warehouse"))
    table = _counter_table(location.connect())
    running = table.transaction()
    other = location.connect().table("counter")
    other.upsert([{"k": COUNTER, "v": 4}])
    assert _merge_and_vacuum(other).data_files_deleted == 0
    # The Spark join reads the visible rows of the transaction's snapshot: still there.
    ls.upsert(running, spark.createDataFrame([{"k": COUNTER, "v": 9}], "k BIGINT, v BIGINT"))
    with pytest.raises(ledger.ConflictError):
        running.commit()
    assert _value(other) == 4
    assert vacuum_now(other).data_files_deleted == 2


def increment_in_process(uri: str, writer: int, increments: int) -> list[int | str]:
    """A spawned writer: ``increments`` retried increments; the marker key of each that landed,
    or the name of the error that stopped it."""
    table = ledger.connect(uri).table("counter")
    outcomes: list[int | str] = []
    for n in range(increments):
        marker = 1000 * (writer + 1) + n
        try:
            table.retrying(lambda tx, m=marker: _increment(tx, m), retries=50)
            outcomes.append(marker)
        except Exception as e:  # reported to the parent, which fails on anything but conflicts
            outcomes.append(type(e).__name__)
    return outcomes


def test_increments_from_processes_racing_merge_and_vacuum_0_land_once(
    local_location: Location,
) -> None:
    _counter_table(local_location.connect())
    writers, increments = 3, 5
    context = multiprocessing.get_context("spawn")
    maintenance = local_location.connect().table("counter")
    rounds = 0
    with context.Pool(writers) as pool:
        pending = pool.starmap_async(
            increment_in_process, [(local_location.uri, w, increments) for w in range(writers)]
        )
        while not pending.ready():
            _merge_and_vacuum(maintenance)
            rounds += 1
        results = pending.get(timeout=300)
    outcomes = [o for r in results for o in r]
    assert all(isinstance(o, int) or o == "ConflictError" for o in outcomes), outcomes
    landed = [o for o in outcomes if isinstance(o, int)]
    assert rounds >= 1 and landed
    table = local_location.connect().table("counter")
    assert _value(table) == len(landed)
    markers = _lookup(table, landed)
    assert set(markers) == set(landed)
    assert sorted(markers.values()) == list(range(len(landed)))
    assert table.count() == 1 + len(landed)


# --- a merge or append committing while vacuum runs: no duplicate, no lost file (IceDB's hazard
# (c): it needed an external lock around merges and tombstone cleanup); a writer whose snapshot
# predates a vacuum that trimmed the log must not land on a version the checkpoint covers ------


GRACE_S = 0.2


def _table_with_tombstones(location: Location) -> ledger.Table:
    """eu merged once (two tombstoned files for vacuum), us with two files to merge; quiet for
    longer than GRACE_S, so a vacuum with that grace expunges eu's inputs but keeps the log."""
    table = region_table(location)
    add_rows(table, "eu", [0])
    add_rows(table, "eu", [1])
    table.merge({"region": "eu"})
    add_rows(table, "us", [10, 11])
    add_rows(table, "us", [12])
    time.sleep(GRACE_S + 0.1)
    return table


def test_a_vacuum_committing_between_a_merges_write_and_commit(location, monkeypatch):
    table = _table_with_tombstones(location)
    entries = sorted_entries(table)
    other = other_handle(location)
    vacuumed = run_once_before(monkeypatch, merging, "_commit", lambda: other.vacuum(GRACE_S))

    result = table.merge()
    assert vacuumed[0].data_files_deleted == 2 and vacuumed[0].orphans_deleted == 0
    assert result.version == vacuumed[0].version + 1
    assert result.merged[0].partition == {"region": "us"} and result.conflicts == ()
    fresh = other_handle(location)
    assert sorted_entries(fresh) == entries  # each entry exactly once
    assert len(fresh.snapshot().markers({"region": "us"})) == 1
    assert_files_consistent(location)
    vacuum_now(fresh)
    assert sorted_entries(other_handle(location)) == entries
    assert_files_consistent(location, tombstones_allowed=False)


@LOCAL_ONLY
def test_a_merge_committing_while_vacuum_is_between_its_listing_and_its_commit(
    location, monkeypatch
):
    table = _table_with_tombstones(location)
    entries = sorted_entries(table)
    vacuum_handle = other_handle(location)
    # Vacuum has listed the data folder and read the state; the merge commits before vacuum's
    # own commit (which then has to land on top of it).
    merged = run_once_before(monkeypatch, vacuum_handle.handle, "commit", lambda: table.merge())

    result = vacuum_handle.vacuum(GRACE_S)
    assert merged[0].merged[0].partition == {"region": "us"}
    assert result.version == merged[0].version + 1
    assert (result.data_files_deleted, result.orphans_deleted) == (2, 0)
    fresh = other_handle(location)
    assert len(fresh.snapshot().markers({"region": "us"})) == 1
    assert sorted_entries(fresh) == entries
    assert_files_consistent(location)


@LOCAL_ONLY
def test_a_merge_whose_snapshot_predates_a_log_trimming_vacuum_is_not_lost(location, monkeypatch):
    table = _table_with_tombstones(location)
    entries = sorted_entries(table)
    other = other_handle(location)

    def vacuum_and_trim_the_log() -> int:
        first = vacuum_now(other)  # expunges eu's inputs and writes a checkpoint at its commit
        second = vacuum_now(other)  # deletes every commit up to that checkpoint (if not done)
        return first.log_files_deleted + second.log_files_deleted

    log_files_deleted = run_once_before(monkeypatch, merging, "_commit", vacuum_and_trim_the_log)
    result = table.merge()
    # The log names a merge that can still commit may aim at are younger than the transaction
    # timeout, and vacuum keeps them (deleting one would let the merge's put-if-absent land on a
    # freed name that no reader replays).
    assert log_files_deleted[0] == 0
    assert result.version is not None
    fresh = other_handle(location)
    assert sorted_entries(fresh) == entries
    assert fresh.version == result.version
    assert len(fresh.snapshot().markers({"region": "us"})) == 1
    assert_files_consistent(location)


@LOCAL_ONLY
def test_an_append_whose_snapshot_predates_a_log_trimming_vacuum_is_not_lost(location):
    table = region_table(location)
    add_rows(table, "us", [1])
    add_rows(table, "us", [2])
    slow = other_handle(location).transaction()  # its snapshot: version 2
    slow.insert([{"id": 3, "region": "us", "v": 3}])
    table.merge()
    first = vacuum_now(table)
    second = vacuum_now(table)
    # slow may still commit, so the log names after its snapshot are kept.
    assert first.log_files_deleted + second.log_files_deleted == 0

    info = slow.commit()
    fresh = other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [1, 2, 3]
    assert fresh.version == info.version
    assert_files_consistent(location)


def test_a_transaction_older_than_the_timeout_cannot_commit_onto_a_trimmed_log(
    location, monkeypatch
):
    set_clock_skew(monkeypatch)
    table = region_table(location, transaction_timeout=1.5, checkpoint_interval=2)
    add_rows(table, "us", [1])
    add_rows(table, "us", [2])
    slow = other_handle(location).transaction()  # its snapshot: version 2
    slow.insert([{"id": 3, "region": "us", "v": 3}])
    add_rows(table, "us", [4])
    time.sleep(1.7)  # slow is now past the timeout
    trimmed = vacuum_now(table)
    assert trimmed.log_files_deleted > 0  # the name slow would aim at is gone

    with pytest.raises(ledger.TransactionTimeoutError):
        slow.commit()
    fresh = other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [1, 2, 4]
    assert_files_consistent(location)


@LOCAL_ONLY
def test_a_merge_paused_past_the_timeout_cannot_commit_files_vacuum_took_for_orphans(
    location, monkeypatch
):
    set_clock_skew(monkeypatch)
    table = region_table(location, transaction_timeout=1.5)
    add_rows(table, "us", [10, 11])
    add_rows(table, "us", [12])
    entries = sorted_entries(table)
    version = table.version
    other = other_handle(location)

    def vacuum_after_the_timeout() -> vacuuming.VacuumResult:
        time.sleep(1.6)  # the merge's new file is now older than the transaction timeout
        return vacuum_now(other)

    vacuumed = run_once_before(monkeypatch, merging, "_commit", vacuum_after_the_timeout)
    with pytest.raises(ledger.TransactionTimeoutError):
        table.merge()
    assert vacuumed[0].orphans_deleted == 1  # the merge's output, never committed
    fresh = other_handle(location)
    assert fresh.version == version
    assert sorted_entries(fresh) == entries
    assert_files_consistent(location, tombstones_allowed=False)
