"""A buffered writer whose buffer is full while its flushes fail for good: every write waiting
for room wakes with the error, from any number of threads, and never blocks forever.

Writes run in daemon threads joined with a timeout, so a write that hangs fails its test
instead of hanging the run.
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Any

import pytest

import ledger
from tests.conftest import Location
from tests.support.failing import AlwaysFailingCommits, FailingStore, InjectedFault

MAX_ROWS = 10
THREADS = 3
WRITES_PER_THREAD = 5 * MAX_ROWS  # together, well past the backlog of 4 x MAX_ROWS rows
HANG_SECONDS = 20


def _table(location: Location) -> ledger.Table:
    return location.connect().create_table("t", {"id": "BIGINT"}, primary_key="id")


def _write_from_threads(writer: ledger.BufferedWriter) -> tuple[list[int], list[BaseException]]:
    """Each thread writes its own ids, one call each, until a write raises; returns the ids
    accepted and the error each thread ended with. A thread still blocked fails the test."""
    accepted: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def produce(first: int) -> None:
        for i in range(first, first + WRITES_PER_THREAD):
            try:
                writer.write({"id": i})
            except BaseException as e:
                with lock:
                    errors.append(e)
                return
            with lock:
                accepted.append(i)

    threads = [
        threading.Thread(target=produce, args=(1000 * (n + 1),), daemon=True)
        for n in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_SECONDS)
    assert not any(t.is_alive() for t in threads), "a write waiting for room never returned"
    return accepted, errors


def _ids(table: ledger.Table) -> list[int]:
    return sorted(row[0] for row in table.refresh().scan().project("id").fetchall())


def test_writes_waiting_for_room_wake_with_batch_taken(local_location: Location) -> None:
    table = _table(local_location)
    first = local_location.connect().table("t").writer(app_id="same", max_rows=MAX_ROWS)
    second = (
        local_location.connect()
        .table("t")
        .writer(app_id="same", max_rows=MAX_ROWS, max_seconds=None)
    )
    first.write({"id": 1})
    first.close()  # takes batch 0, the one the second writer numbered its first flush
    accepted, errors = _write_from_threads(second)
    assert len(errors) == THREADS
    assert all(isinstance(e, ledger.BatchTakenError) for e in errors), errors
    assert len(accepted) <= 4 * MAX_ROWS
    with pytest.raises(ledger.BatchTakenError):  # every later write too: nothing can commit
        second.write({"id": 5})
    with pytest.raises(ledger.BatchTakenError):
        second.wait(second.accepted_rows, timeout=HANG_SECONDS)
    # close() hands the rows back; a writer with an app_id of its own commits them.
    with pytest.raises(ledger.BatchTakenError) as taken:
        second.close()
    assert sorted(taken.value.rows.column("id").to_pylist()) == sorted(accepted)
    assert second.pending_rows == 0
    second.close()  # nothing is held any more
    with table.writer(app_id="same-2") as writer:
        writer.write(taken.value.rows)
    assert _ids(table) == sorted([1, *accepted])


def test_a_taken_batch_of_one_row_is_handed_back_not_lost_at_exit(
    local_location: Location, caplog: pytest.LogCaptureFixture
) -> None:
    table = _table(local_location)
    first = local_location.connect().table("t").writer(app_id="same", max_seconds=None)
    second = local_location.connect().table("t").writer(app_id="same", max_seconds=None)
    first.write({"id": 1})
    first.flush()
    second.write({"id": 2})
    for _ in range(2):
        with pytest.raises(ledger.BatchTakenError):
            second.flush()
    assert second.pending_rows == 1
    with pytest.raises(ledger.BatchTakenError, match="app_id of its own") as taken:
        second.close()
    assert taken.value.rows.to_pylist() == [{"id": 2}]
    with caplog.at_level(logging.ERROR):
        second._flush_at_exit()  # what interpreter exit runs: nothing is left to lose
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    first.close()
    table.insert(taken.value.rows)
    assert _ids(table) == [1, 2]


@pytest.mark.parametrize("app_id", [None, "sink"])
def test_writes_waiting_for_room_wake_when_the_store_fails(
    local_location: Location, app_id: str | None
) -> None:
    table = _table(local_location)
    store = AlwaysFailingCommits(table.store)
    writer = (
        ledger.Warehouse(store)
        .table("t")
        .writer(app_id=app_id, max_rows=MAX_ROWS, max_seconds=None)
    )
    accepted, errors = _write_from_threads(writer)
    assert len(errors) == THREADS
    assert all(type(e) is ledger.FlushError for e in errors), errors
    assert all(isinstance(e.__cause__, InjectedFault) for e in errors), errors
    store.healthy = True
    writer.close()  # retried: every accepted row commits once
    assert _ids(table) == sorted(accepted)


def test_writes_waiting_for_room_wake_when_the_table_is_dropped(local_location: Location) -> None:
    table = _table(local_location)
    writer = table.writer(max_rows=MAX_ROWS, max_seconds=None)
    local_location.connect().drop_table("t")
    accepted, errors = _write_from_threads(writer)
    assert len(errors) == THREADS and len(accepted) <= 4 * MAX_ROWS
    assert all(isinstance(e, ledger.FlushError) for e in errors), errors
    with pytest.raises(ledger.LedgerError):
        writer.close()
    atexit.unregister(writer._flush_at_exit)  # its rows can never commit: no retry at exit


def test_writes_waiting_for_room_wake_when_the_writer_is_closed(local_location: Location) -> None:
    table = _table(local_location)
    release = threading.Event()

    class SlowLog(FailingStore):
        def put_if_absent(self, key: str, data: bytes) -> bool:
            if "/_log/" in key:
                release.wait(HANG_SECONDS)
            return self.inner.put_if_absent(key, data)

    writer = (
        ledger.Warehouse(SlowLog(table.store, fail_at=None))
        .table("t")
        .writer(max_rows=MAX_ROWS, max_seconds=None)
    )
    outcome: dict[str, Any] = {}

    def close_soon() -> None:
        while writer.pending_rows < 4 * MAX_ROWS:  # the backlog is full: writers wait
            threading.Event().wait(0.01)
        closing = threading.Thread(target=writer.close, daemon=True)
        closing.start()
        threading.Event().wait(0.2)
        release.set()
        closing.join(HANG_SECONDS)
        outcome["closed"] = not closing.is_alive()

    closer = threading.Thread(target=close_soon, daemon=True)
    closer.start()
    accepted, errors = _write_from_threads(writer)
    release.set()
    closer.join(HANG_SECONDS)
    assert outcome.get("closed")
    assert len(errors) == THREADS
    assert all(isinstance(e, ledger.WriterClosedError) for e in errors), errors
    assert _ids(table) == sorted(accepted)
