"""IceDB's hazards as regressions, on local disk and on S3.

IceDB names commits by timestamp and host, rewrites the list of alive files on drops, and needs
an external lock around merges and tombstone cleanup; without one it loses or duplicates files.
Here each race is made deterministic: the operation under test is paused at a precise point
(between writing its data and committing, or inside vacuum) by a monkeypatched hook, the rival
operation runs from another connection, and then the first one carries on.

Every test ends by checking the table from a fresh connection: its rows (or its exact multiset
of entries), and that every alive file exists while no data file is left that the log does not
know. Besides IceDB's four hazards, (c) also covers a writer whose snapshot predates a vacuum
that trimmed the log (its commit must not land on a version the checkpoint already covers).

Every test runs on local disk. The races are staged by hooks in the library, not in the store,
so on S3 one test of each hazard suffices: (a), the merge racing a drop in (b), in (c) the
vacuum committing inside a merge and the transaction too old to commit onto a trimmed log, and
(d), whose commits really collide in S3's conditional writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import ledger
import ledger.log.commit
import ledger.transaction
import ledger.writer
from ledger.maintenance import merge as merging
from ledger.maintenance import partitions as partition_ops
from ledger.maintenance import vacuum as vacuuming
from tests.conftest import Location
from tests.support.ledger_reads import visible_rows
from tests.support.maintenance import set_clock_skew, vacuum_now

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "v": "INTEGER"}


def _table(location: Location, **options: Any) -> ledger.Table:
    return location.connect().create_table(
        "events", SCHEMA, primary_key="id", partition_by="region", **options
    )


def _add(table: ledger.Table, region: str, ids: list[int]) -> None:
    table.insert([{"id": i, "region": region, "v": i} for i in ids])


def _other_handle(location: Location) -> ledger.Table:
    """The table as another process sees it."""
    return location.connect().table("events")


def _entries(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(table.scan().fetchall(), key=repr)


def _data_keys(table: ledger.Table) -> set[str]:
    return {info.key for info in table.store.list(table.prefix + "_data/")}


def _assert_files_consistent(location: Location, *, tombstones_allowed: bool = True) -> None:
    """Every alive file exists; every data file is known to the log (alive, or tombstoned and
    waiting for vacuum when allowed)."""
    fresh = _other_handle(location)
    state = fresh.snapshot().state
    alive = {fresh.prefix + m.path for m in state.alive_files}
    known = {fresh.prefix + p for p in state.files} if tombstones_allowed else alive
    present = _data_keys(fresh)
    assert alive <= present, f"alive files missing from the store: {sorted(alive - present)}"
    assert present <= known, f"data files the log does not know: {sorted(present - known)}"


# The hazards whose S3 run the module docstring leaves out.
LOCAL_ONLY = pytest.mark.parametrize("location", ["local"], indirect=True)


def _run_once_before(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, rival: Callable[[], Any]
) -> list[Any]:
    """Patch ``module.name`` so that its first call runs ``rival()`` first; return the list the
    rival's result is appended to."""
    real = getattr(module, name)
    results: list[Any] = []

    def paused(*args: Any, **kwargs: Any) -> Any:
        if not results:
            results.append(rival())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, paused)
    return results


# --- (a) a drop of one partition, then vacuum, keeps every other partition -----------------------


def test_dropping_one_partition_then_vacuum_keeps_every_other_partition(location, monkeypatch):
    table = _table(location)
    for region, first in (("eu", 0), ("us", 10), ("ap", 20)):
        _add(table, region, [first, first + 1])
        _add(table, region, [first + 2])
    table.merge({"region": "us"})  # us: one alive file, two tombstoned ones for vacuum
    other = _other_handle(location)
    # IceDB's drop rewrote the alive list it had read, losing files committed meanwhile: an
    # append to another partition lands between this drop's read and its commit.
    racing = _run_once_before(
        monkeypatch,
        partition_ops,
        "commit_entry",
        lambda: other.insert([{"id": 30, "region": "ap", "v": 30}]),
    )

    dropped = table.drop_partitions({"region": "eu"})
    assert dropped.version == racing[0].version + 1  # the drop committed after the append
    assert (dropped.files_removed, dropped.entries_removed) == (2, 3)
    vacuumed = vacuum_now(table)
    assert vacuumed.data_files_deleted == 4  # eu's two files and us's merged inputs

    fresh = _other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [10, 11, 12, 20, 21, 22, 30]
    assert {m.partition["region"] for m in fresh.snapshot().markers()} == {"us", "ap"}
    assert fresh.count() == 7
    _assert_files_consistent(location, tombstones_allowed=False)


# --- (b) a merge after a drop does not resurrect dropped files -----------------------------------


@LOCAL_ONLY
def test_a_merge_after_a_drop_does_not_resurrect_dropped_files(location):
    table = _table(location)
    for region, first in (("eu", 0), ("us", 10)):
        _add(table, region, [first])
        _add(table, region, [first + 1])
    table.drop_partitions({"region": "eu"})

    merged = table.merge()
    assert [p.partition for p in merged.merged] == [{"region": "us"}]
    vacuum_now(table)
    assert table.merge(min_files=1).files_in == 1  # only us's merged file is left to pick
    fresh = _other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [10, 11]
    assert fresh.count() == 2
    _assert_files_consistent(location)


def test_a_merge_racing_a_drop_gives_the_dropped_partition_up(location, monkeypatch):
    table = _table(location)
    for region, first in (("eu", 0), ("us", 10)):
        _add(table, region, [first])
        _add(table, region, [first + 1])
    other = _other_handle(location)
    # The merge has read both partitions and written their new files when the drop commits.
    dropped = _run_once_before(
        monkeypatch, merging, "_commit", lambda: other.drop_partitions({"region": "eu"})
    )

    result = table.merge()
    assert dropped[0].files_removed == 2
    assert result.version == dropped[0].version + 1
    assert [p.partition for p in result.merged] == [{"region": "us"}]
    assert result.conflicts == ({"region": "eu"},)
    fresh = _other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [10, 11]
    assert {m.partition["region"] for m in fresh.snapshot().markers()} == {"us"}
    _assert_files_consistent(location)  # eu's merged output was deleted, not left behind
    vacuum_now(fresh)
    assert fresh.count() == 2
    _assert_files_consistent(location, tombstones_allowed=False)


# --- (c) a merge committing while vacuum runs: no duplicate, no lost file ------------------------


GRACE_S = 0.2


def _table_with_tombstones(location: Location) -> ledger.Table:
    """eu merged once (two tombstoned files for vacuum), us with two files to merge; quiet for
    longer than GRACE_S, so a vacuum with that grace expunges eu's inputs but keeps the log."""
    table = _table(location)
    _add(table, "eu", [0])
    _add(table, "eu", [1])
    table.merge({"region": "eu"})
    _add(table, "us", [10, 11])
    _add(table, "us", [12])
    time.sleep(GRACE_S + 0.1)
    return table


def test_a_vacuum_committing_between_a_merges_write_and_commit(location, monkeypatch):
    table = _table_with_tombstones(location)
    entries = _entries(table)
    other = _other_handle(location)
    vacuumed = _run_once_before(monkeypatch, merging, "_commit", lambda: other.vacuum(GRACE_S))

    result = table.merge()
    assert vacuumed[0].data_files_deleted == 2 and vacuumed[0].orphans_deleted == 0
    assert result.version == vacuumed[0].version + 1
    assert result.merged[0].partition == {"region": "us"} and result.conflicts == ()
    fresh = _other_handle(location)
    assert _entries(fresh) == entries  # each entry exactly once
    assert len(fresh.snapshot().markers({"region": "us"})) == 1
    _assert_files_consistent(location)
    vacuum_now(fresh)
    assert _entries(_other_handle(location)) == entries
    _assert_files_consistent(location, tombstones_allowed=False)


@LOCAL_ONLY
def test_a_merge_committing_while_vacuum_is_between_its_listing_and_its_commit(
    location, monkeypatch
):
    table = _table_with_tombstones(location)
    entries = _entries(table)
    vacuum_handle = _other_handle(location)
    # Vacuum has listed the data folder and read the state; the merge commits before vacuum's
    # own commit (which then has to land on top of it).
    merged = _run_once_before(monkeypatch, vacuuming, "commit_entry", lambda: table.merge())

    result = vacuum_handle.vacuum(GRACE_S)
    assert merged[0].merged[0].partition == {"region": "us"}
    assert result.version == merged[0].version + 1
    assert (result.data_files_deleted, result.orphans_deleted) == (2, 0)
    fresh = _other_handle(location)
    assert len(fresh.snapshot().markers({"region": "us"})) == 1
    assert _entries(fresh) == entries
    _assert_files_consistent(location)


@LOCAL_ONLY
def test_a_merge_whose_snapshot_predates_a_log_trimming_vacuum_is_not_lost(location, monkeypatch):
    table = _table_with_tombstones(location)
    entries = _entries(table)
    other = _other_handle(location)

    def vacuum_and_trim_the_log() -> int:
        first = vacuum_now(other)  # expunges eu's inputs and writes a checkpoint at its commit
        second = vacuum_now(other)  # deletes every commit up to that checkpoint (if not done)
        return first.log_files_deleted + second.log_files_deleted

    log_files_deleted = _run_once_before(monkeypatch, merging, "_commit", vacuum_and_trim_the_log)
    result = table.merge()
    # The log names a merge that can still commit may aim at are younger than the transaction
    # timeout, and vacuum keeps them (deleting one would let the merge's put-if-absent land on a
    # freed name that no reader replays).
    assert log_files_deleted[0] == 0
    assert result.version is not None
    fresh = _other_handle(location)
    assert _entries(fresh) == entries
    assert fresh.version == result.version
    assert len(fresh.snapshot().markers({"region": "us"})) == 1
    _assert_files_consistent(location)


@LOCAL_ONLY
def test_an_append_whose_snapshot_predates_a_log_trimming_vacuum_is_not_lost(location):
    table = _table(location)
    _add(table, "us", [1])
    _add(table, "us", [2])
    slow = _other_handle(location).transaction()  # its snapshot: version 2
    slow.insert([{"id": 3, "region": "us", "v": 3}])
    table.merge()
    first = vacuum_now(table)
    second = vacuum_now(table)
    # slow may still commit, so the log names after its snapshot are kept.
    assert first.log_files_deleted + second.log_files_deleted == 0

    info = slow.commit()
    fresh = _other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [1, 2, 3]
    assert fresh.version == info.version
    _assert_files_consistent(location)


def test_a_transaction_older_than_the_timeout_cannot_commit_onto_a_trimmed_log(
    location, monkeypatch
):
    set_clock_skew(monkeypatch)
    table = _table(location, transaction_timeout=1.5, checkpoint_interval=2)
    _add(table, "us", [1])
    _add(table, "us", [2])
    slow = _other_handle(location).transaction()  # its snapshot: version 2
    slow.insert([{"id": 3, "region": "us", "v": 3}])
    _add(table, "us", [4])
    time.sleep(1.7)  # slow is now past the timeout
    trimmed = vacuum_now(table)
    assert trimmed.log_files_deleted > 0  # the name slow would aim at is gone

    with pytest.raises(ledger.TransactionTimeoutError):
        slow.commit()
    fresh = _other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [1, 2, 4]
    _assert_files_consistent(location)


@LOCAL_ONLY
def test_a_merge_paused_past_the_timeout_cannot_commit_files_vacuum_took_for_orphans(
    location, monkeypatch
):
    set_clock_skew(monkeypatch)
    table = _table(location, transaction_timeout=1.5)
    _add(table, "us", [10, 11])
    _add(table, "us", [12])
    entries = _entries(table)
    version = table.version
    other = _other_handle(location)

    def vacuum_after_the_timeout() -> vacuuming.VacuumResult:
        time.sleep(1.6)  # the merge's new file is now older than the transaction timeout
        return vacuum_now(other)

    vacuumed = _run_once_before(monkeypatch, merging, "_commit", vacuum_after_the_timeout)
    with pytest.raises(ledger.TransactionTimeoutError):
        table.merge()
    assert vacuumed[0].orphans_deleted == 1  # the merge's output, never committed
    fresh = _other_handle(location)
    assert fresh.version == version
    assert _entries(fresh) == entries
    _assert_files_consistent(location, tombstones_allowed=False)


# --- (d) two appends at the same instant both survive --------------------------------------------


class _FrozenTime:
    """The ``time`` module with its clock stopped."""

    def __init__(self, at: float) -> None:
        self.at = at

    def time(self) -> float:
        return self.at

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_two_appends_at_the_same_instant_both_survive(location, monkeypatch):
    table = location.connect().create_table(
        "events", {"id": "BIGINT", "src": "VARCHAR"}, primary_key="id"
    )
    table.insert([{"id": 0, "src": "seed"}])
    frozen = _FrozenTime(time.time())
    for module in (ledger.log.commit, ledger.writer, ledger.transaction):
        monkeypatch.setattr(module, "time", frozen)

    barrier = threading.Barrier(2, timeout=30)
    lost: list[str] = []
    handles = [_other_handle(location) for _ in range(2)]
    for handle in handles:
        store = handle.store
        real = store.put_if_absent
        waited: set[str] = set()

        def racing_put(key: str, data: bytes, real: Any = real, waited: set[str] = waited) -> bool:
            # Both writers reserve a trx_id, then write a commit, at the same moment, having
            # read the same state: each pair of first attempts collides.
            kind = "_trx/" if "/_trx/" in key else "_log/" if "/_log/" in key else None
            if kind is not None and kind not in waited:
                waited.add(kind)
                barrier.wait()
            created = bool(real(key, data))
            if not created and kind is not None:
                lost.append(kind)
            return created

        monkeypatch.setattr(store, "put_if_absent", racing_put)

    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            results[writer] = handles[writer - 1].insert([{"id": writer, "src": f"w{writer}"}])
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=append, args=(w,)) for w in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(lost) == ["_log/", "_trx/"]  # the race really happened, once each

    assert sorted(r.version for r in results.values()) == [2, 3]
    assert len({r.trx_id for r in results.values()}) == 2
    fresh = _other_handle(location)
    assert visible_rows(fresh) == [(0, "seed"), (1, "w1"), (2, "w2")]
    history = fresh.history()
    assert [h.operation for h in history] == ["create_table", "insert", "insert", "insert"]
    stamps = [h.timestamp for h in history]
    assert stamps == sorted(set(stamps))  # strictly increasing although the clock stood still
    assert {h.trx_id for h in history[2:]} == {r.trx_id for r in results.values()}
