"""The buffered writer: many small writes, few large commits, and no accepted row lost or doubled.

Every test reads the table back and compares it with the rows the writer accepted (a plain list
kept by the test), on real Parquet and the real log, on local disk and S3.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.buffered_writer import _column_fits, _full_row_check, _row_check
from ledger.schema import TableSchema
from ledger.storage import Store
from tests.conftest import Location, examples
from tests.support.failing import (
    AlwaysFailingCommits,
    CrashingStore,
    FailingStore,
    InjectedFault,
)

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"event_id": "BIGINT", "user": "VARCHAR", "amount": "DECIMAL(18,2)", "note": "VARCHAR"}


def _events(warehouse: ledger.Warehouse, name: str = "events") -> ledger.Table:
    return warehouse.create_table(name, SCHEMA, primary_key="event_id")


def _rows_of(table: ledger.Table) -> list[tuple[Any, ...]]:
    """Every entry of the raw ledger (not only visible rows: a duplicate must show)."""
    return sorted(
        table.refresh().scan().project('event_id, "user", amount, note, dml_type').fetchall()
    )


def _expected(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            r["event_id"],
            r.get("user"),
            None if r.get("amount") is None else Decimal(str(r["amount"])),
            r.get("note"),
            1,
        )
        for r in rows
    )


def _event(i: int) -> dict[str, Any]:
    # Two-decimal floats, unicode, and rows that name different columns.
    row: dict[str, Any] = {"event_id": i, "user": f"usér-{i % 7}", "amount": round(i * 1.01, 2)}
    if i % 3 == 0:
        row["note"] = f"note ✓ {i}"
    return row


def _eventually(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


# --- concurrency ----------------------------------------------------------------------------


def test_threads_writing_at_once_commit_every_row_exactly_once(location: Location) -> None:
    table = _events(location.connect())
    threads, per_thread = 8, 60
    with table.writer(max_rows=50, max_seconds=0.05) as writer:

        def write_events(first: int) -> None:
            for i in range(first, first + per_thread):
                # single rows and small lists, as request handlers would write them
                if i % 5 == 0:
                    writer.write([_event(i)])
                else:
                    writer.write(_event(i))

        workers = [
            threading.Thread(target=write_events, args=(t * per_thread,)) for t in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    accepted = [_event(i) for i in range(threads * per_thread)]
    assert _rows_of(table) == _expected(accepted)
    assert table.count() == len(accepted)
    commits = [c for c in table.history() if c.operation == "insert"]
    assert sum(c.inserted for c in commits) == len(accepted)
    assert len(commits) < len(accepted) / 5  # batched, not one commit per write


# --- flush triggers -------------------------------------------------------------------------


def test_max_rows_flushes_when_the_buffer_is_full_and_not_before(local_location: Location) -> None:
    table = _events(local_location.connect())
    with table.writer(max_rows=10, max_seconds=None) as writer:
        for i in range(9):
            writer.write(_event(i))
        time.sleep(0.3)
        assert writer.committed_rows == 0 and table.refresh().count() == 0
        writer.write(_event(9))
        assert _eventually(lambda: writer.committed_rows == 10)
        assert table.refresh().count() == 10
        writer.write(_event(10))
        time.sleep(0.3)  # no age limit: one row waits for the next trigger
        assert table.refresh().count() == 10
    assert _rows_of(table) == _expected([_event(i) for i in range(11)])
    assert [c.inserted for c in table.history() if c.operation == "insert"] == [10, 1]


def test_max_bytes_flushes_big_rows_early(local_location: Location) -> None:
    table = _events(local_location.connect())
    big = "x" * 5000
    with table.writer(max_rows=1_000_000, max_bytes=12_000, max_seconds=None) as writer:
        writer.write({"event_id": 1, "note": big})
        writer.write({"event_id": 2, "note": big})
        time.sleep(0.3)
        assert table.refresh().count() == 0  # 10 kB < 12 kB
        writer.write({"event_id": 3, "note": big})
        assert _eventually(lambda: table.refresh().count() == 3)
    assert [c.inserted for c in table.history() if c.operation == "insert"] == [3]


def test_max_seconds_flushes_rows_that_wait_too_long(local_location: Location) -> None:
    table = _events(local_location.connect())
    writer = table.writer(max_rows=1_000, max_seconds=0.2)
    try:
        writer.write([_event(1), _event(2)])
        started = time.monotonic()
        assert _eventually(lambda: table.refresh().count() == 2)
        assert time.monotonic() - started >= 0.1  # the age limit, not the write, flushed
        assert _rows_of(table) == _expected([_event(1), _event(2)])
    finally:
        writer.close()


def test_flush_and_wait_make_rows_durable_now(location: Location) -> None:
    table = _events(location.connect())
    with table.writer(max_rows=1_000, max_seconds=None) as writer:
        writer.write(_event(1))
        assert writer.flush() == 1
        assert location.connect().table("events").count() == 1  # another handle sees it
        position = writer.write([_event(2), _event(3)])
        assert position == 3
        writer.wait(position, timeout=30)
        assert writer.committed_rows == 3 and writer.pending_rows == 0
        assert location.connect().table("events").count() == 3
        assert writer.flush() == 0  # nothing left


# --- nothing accepted is lost ---------------------------------------------------------------


def test_an_exception_inside_with_still_commits_what_was_accepted(location: Location) -> None:
    table = _events(location.connect())
    with pytest.raises(RuntimeError, match="handler broke"), table.writer(max_seconds=None) as w:
        w.write([_event(1), _event(2)])
        w.write(_event(3))
        raise RuntimeError("handler broke")
    assert _rows_of(table) == _expected([_event(1), _event(2), _event(3)])
    with pytest.raises(ledger.WriterClosedError):
        w.write(_event(4))
    assert table.refresh().count() == 3


def test_rows_accepted_before_interpreter_exit_are_committed(location: Location) -> None:
    """A writer never closed, in a process that exits (local: sys.exit) or dies of an uncaught
    exception (S3): its rows are committed at exit, on S3 before the S3 client shuts down."""
    ending, returncode = (
        ("raise SystemExit(3)", 3)
        if location.backend == "local"
        else ("raise RuntimeError('crash')", 1)
    )
    warehouse = location.connect()
    _events(warehouse)
    script = textwrap.dedent(
        f"""
        import ledger
        warehouse = ledger.connect({location.uri!r}, **{location.options!r})
        writer = warehouse.table("events").writer(max_rows=1_000_000, max_seconds=None)
        for i in range(50):
            writer.write({{"event_id": i, "user": "ann", "amount": 1.25}})
        print(writer.committed_rows)
        {ending}
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == returncode, done.stderr
    assert done.stdout.strip() == "0"  # nothing was committed before exit
    table = warehouse.table("events")
    assert table.count() == 50
    [(count, total)] = table.scan().aggregate("count(*), sum(amount)").fetchall()
    assert (count, total) == (50, Decimal("62.50"))


# --- bad rows -------------------------------------------------------------------------------

BAD_ROWS: list[tuple[Any, type[Exception]]] = [
    ({"event_id": "not a number", "user": "ann"}, ledger.TypeMismatchError),
    ({"event_id": 1, "colour": "red"}, ledger.UnknownColumnError),
    ({"user": "no key"}, ledger.MissingKeyError),
    ({"event_id": None, "user": "null key"}, ledger.MissingKeyError),
    ({"event_id": 1, "amount": 1.005}, ledger.TypeMismatchError),  # 3 decimals into (18,2)
    ({"event_id": 1, "dml_type": 1}, ledger.SchemaError),
    ({"event_id": 2**63, "user": "too big"}, ledger.TypeMismatchError),
    ({"event_id": 1, "user": "\ud800"}, ledger.TypeMismatchError),  # a lone surrogate
    ({"event_id": True}, ledger.TypeMismatchError),
    ([{"event_id": 1}, 7], ledger.InvalidArgumentError),
    (object(), ledger.TypeMismatchError),
]


@pytest.mark.parametrize(("bad", "error"), BAD_ROWS)
def test_a_bad_write_raises_alone_and_nothing_of_it_is_written(
    local_location: Location, bad: Any, error: type[Exception]
) -> None:
    table = _events(local_location.connect())
    with table.writer(max_seconds=None) as writer:
        writer.write(_event(1))
        with pytest.raises(error):
            writer.write(bad)
        writer.write(_event(2))
        assert writer.accepted_rows == 2
    assert _rows_of(table) == _expected([_event(1), _event(2)])


def test_a_bad_write_alone_writes_nothing(local_location: Location) -> None:
    table = _events(local_location.connect())
    data_folder = Path(local_location.uri) / "events" / "_data"
    with table.writer(max_seconds=None) as writer, pytest.raises(ledger.TypeMismatchError):
        writer.write({"event_id": "x"})
    assert table.refresh().version == 0
    assert not data_folder.exists() or not any(data_folder.rglob("*.parquet"))


def test_bad_rows_among_concurrent_writes_never_poison_the_good_ones(
    local_location: Location,
) -> None:
    """Writes converted together in one group: the bad ones fail, each alone."""
    table = _events(local_location.connect())
    failures: list[tuple[int, BaseException]] = []
    lock = threading.Lock()
    with table.writer(max_rows=100, max_seconds=0.05) as writer:

        def write_events(thread: int) -> None:
            for i in range(thread, 400, 8):
                row: dict[str, Any] = _event(i) if i % 10 else {"event_id": i, "user": [5]}
                try:
                    writer.write(row)
                except ledger.LedgerError as e:
                    with lock:
                        failures.append((i, e))

        workers = [threading.Thread(target=write_events, args=(t,)) for t in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert sorted(i for i, _ in failures) == list(range(0, 400, 10))
    assert all(isinstance(e, ledger.TypeMismatchError) for _, e in failures)
    assert _rows_of(table) == _expected([_event(i) for i in range(400) if i % 10])


GOOD = st.builds(
    dict,
    event_id=st.integers(-(2**63), 2**63 - 1),
    user=st.text(max_size=8),
    amount=st.decimals(-(10**6), 10**6, places=2, allow_nan=False, allow_infinity=False),
)
BAD = st.sampled_from([row for row, _ in BAD_ROWS if isinstance(row, dict)])


@settings(max_examples=examples(10))
@given(st.lists(st.tuples(st.booleans(), st.lists(GOOD, max_size=3), BAD), max_size=12))
def test_writes_match_a_list_of_the_accepted_rows(
    tmp_path_factory: pytest.TempPathFactory, calls: list[tuple[bool, list[Any], Any]]
) -> None:
    """Any sequence of good and bad writes: the table holds exactly the rows of the writes that
    returned, in every flush layout."""
    table = _events(ledger.connect(str(tmp_path_factory.mktemp("wh"))))
    accepted: list[dict[str, Any]] = []
    with table.writer(max_rows=4, max_seconds=None) as writer:
        for bad_first, good_rows, bad_row in calls:
            if bad_first:
                with pytest.raises(ledger.LedgerError):
                    writer.write(bad_row)
            writer.write(good_rows)
            accepted.extend(good_rows)
    assert table.count() == len(accepted)
    assert sorted(table.scan().project('event_id, "user", amount').fetchall()) == sorted(
        (r["event_id"], r["user"], r["amount"]) for r in accepted
    )


PLAIN_SCHEMA = {"id": "BIGINT", "n": "INTEGER", "x": "DOUBLE", "s": "VARCHAR", "b": "BOOLEAN"}
ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.sampled_from(["\ud800", "12", "1.5"]),
)
ROW = st.dictionaries(st.sampled_from([*PLAIN_SCHEMA, "N", "other"]), ANY_VALUE, max_size=6)


@settings(max_examples=examples(15))
@given(st.lists(st.one_of(ROW, st.lists(ROW, max_size=3)), max_size=8))
def test_writes_accept_and_refuse_exactly_what_insert_does(
    tmp_path_factory: pytest.TempPathFactory, calls: list[Any]
) -> None:
    """Model test: each write() against an insert() of the same data into a twin table. A
    write raises exactly when the insert does, and both tables end up with the same rows
    (values that plainly fit their column take the writer's pass-through path, others the
    conversion path)."""
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    buffered = warehouse.create_table("buffered", PLAIN_SCHEMA, primary_key="id")
    oracle = warehouse.create_table("oracle", PLAIN_SCHEMA, primary_key="id")
    with buffered.writer(max_rows=3, max_seconds=None) as writer:
        for data in calls:
            try:
                oracle.insert([data] if isinstance(data, dict) else data)  # insert takes lists
            except ledger.LedgerError as e:
                with pytest.raises(type(e)):
                    writer.write(data)
            else:
                writer.write(data)
            if isinstance(data, dict):
                data.clear()  # the writer kept its own copy

    def read(table: ledger.Table) -> list[tuple[Any, ...]]:
        query = "id, n, x, s, b, isnan(x)"
        return sorted(table.refresh().scan().project(query).fetchall(), key=repr)

    assert read(buffered) == read(oracle)


def test_every_source_insert_takes_is_accepted(tmp_path: Path) -> None:
    import pandas as pd
    import pyarrow as pa

    table = _events(ledger.connect(str(tmp_path / "wh")))
    csv_path = tmp_path / "events.csv"
    csv_path.write_text("event_id,user,amount\n5,eve,0.10\n6,,\n")
    frame = pd.DataFrame({"event_id": [3, 4], "amount": [1.5, float("nan")]})
    with table.writer(max_seconds=None) as writer:
        writer.write({"event_id": 1, "user": "ann"})  # one row
        writer.write({"event_id": [2], "user": ["bob"]})  # a dict of lists
        writer.write(frame)
        writer.write(str(csv_path))
        writer.write(pa.table({"event_id": [7], "note": ["arrow"]}))
        writer.write([])  # empty: nothing
        writer.write(frame.iloc[0:0])
        assert writer.accepted_rows == 7
    assert sorted(table.scan().project('event_id, "user", amount, note').fetchall()) == [
        (1, "ann", None, None),
        (2, "bob", None, None),
        (3, None, Decimal("1.50"), None),
        (4, None, None, None),
        (5, "eve", Decimal("0.10"), None),
        (6, None, None, None),
        (7, None, None, "arrow"),
    ]
    assert [c.inserted for c in table.history() if c.operation == "insert"] == [7]


def test_bad_settings_raise_before_anything_starts(local_location: Location) -> None:
    table = _events(local_location.connect())
    for settings_ in ({"max_rows": 0}, {"max_bytes": -1}, {"max_seconds": 0}, {"app_id": ""}):
        with pytest.raises(ledger.InvalidArgumentError):
            table.writer(**settings_)
    with pytest.raises(ledger.InvalidArgumentError):
        table.writer(max_rows=True)


# --- failing stores and idempotent retries ---------------------------------------------------


class CommitLandsThenFails(FailingStore):
    """The first log commit reaches the store, then the call fails (a lost response)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner, fail_at=None)
        self.lost: str | None = None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = self.inner.put_if_absent(key, data)
        if created and self.lost is None and "/_log/" in key and ".checkpoint." not in key:
            self.lost = key
            raise InjectedFault(f"injected failure after {key} was written")
        return created


def test_a_retried_flush_with_app_id_never_duplicates(location: Location) -> None:
    warehouse = location.connect()
    _events(warehouse)
    store = CommitLandsThenFails(warehouse.store)
    table = ledger.Warehouse(store).table("events")
    writer = table.writer(max_seconds=None, app_id="sink-1")
    writer.write([_event(1), _event(2)])
    with pytest.raises(InjectedFault):
        writer.flush()  # it landed, but the writer cannot know
    assert store.lost is not None
    assert writer.pending_rows == 2
    writer.write(_event(3))  # sealed into the next batch, after the failed one
    writer.close()  # the failed batch again (a no-op), then the new one
    table = warehouse.table("events")
    assert _rows_of(table) == _expected([_event(1), _event(2), _event(3)])
    batches = [(c.app_id, c.batch, c.inserted) for c in table.history() if c.app_id]
    assert batches == [("sink-1", 0, 2), ("sink-1", 1, 1)]


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4, 6, 8])
def test_a_flush_that_failed_keeps_its_rows_for_the_next(
    local_location: Location, fail_at: int
) -> None:
    """The fail_at-th storage call of the flush fails: nothing is lost, nothing doubled."""
    warehouse = local_location.connect()
    _events(warehouse)
    store = FailingStore(warehouse.store, fail_at=None)
    table = ledger.Warehouse(store).table("events")
    writer = table.writer(max_seconds=None, app_id="sink")
    writer.write([_event(i) for i in range(5)])
    store.counter.fail_at = store.counter.calls + fail_at
    try:
        writer.flush()
    except InjectedFault:
        assert writer.pending_rows == 5
    store.counter.fail_at = None  # one fault per run
    writer.write(_event(5))
    writer.close()
    assert _rows_of(warehouse.table("events")) == _expected([_event(i) for i in range(6)])


def test_a_failed_background_flush_surfaces_at_the_next_write(local_location: Location) -> None:
    warehouse = local_location.connect()
    _events(warehouse)
    store = FailingStore(warehouse.store, fail_at=None)
    table = ledger.Warehouse(store).table("events")
    writer = table.writer(max_rows=2, max_seconds=None, app_id="sink")
    store.counter.fail_at = store.counter.calls + 1  # the background flush's first call
    writer.write([_event(1), _event(2)])  # reaches max_rows: the background flush fails
    # the failure is recorded just after the injected fault is raised
    assert _eventually(lambda: store.counter.failed and writer._error is not None)
    with pytest.raises(ledger.FlushError) as raised:
        writer.write(_event(3))
    assert isinstance(raised.value.__cause__, InjectedFault)
    writer.write(_event(3))  # reported once; writes go on
    writer.close()  # retried: nothing lost
    assert _rows_of(warehouse.table("events")) == _expected([_event(i) for i in (1, 2, 3)])


def test_a_second_writer_under_the_same_app_id_is_refused_not_dropped(
    local_location: Location,
) -> None:
    table = _events(local_location.connect())
    first = table.writer(max_seconds=None, app_id="sink")
    second = table.writer(max_seconds=None, app_id="sink")
    first.write(_event(1))
    first.flush()
    second.write(_event(2))
    with pytest.raises(ledger.BatchTakenError, match="one writer at a time") as refused:
        second.flush()
    assert isinstance(refused.value, ledger.FlushError)
    assert type(refused.value).__name__ == "BatchTakenError"  # the name users see is public
    assert second.pending_rows == 1  # kept, not silently dropped as a replay
    first.close()
    with pytest.raises(ledger.FlushError):
        second.close()
    atexit.unregister(second._flush_at_exit)  # its rows can never commit: no retry at exit


def test_wait_reports_a_failed_flush_and_a_full_buffer_refuses_writes(
    local_location: Location,
) -> None:
    warehouse = local_location.connect()
    _events(warehouse)
    store = AlwaysFailingCommits(warehouse.store)
    writer = ledger.Warehouse(store).table("events").writer(max_rows=2, max_seconds=None)
    position = writer.write([_event(1), _event(2)])
    with pytest.raises(ledger.FlushError) as raised:
        writer.wait(position, timeout=30)
    assert isinstance(raised.value.__cause__, InjectedFault)
    with pytest.raises(ledger.InvalidArgumentError):
        writer.wait(position + 1)  # never returned by write()
    accepted = [_event(1), _event(2)]
    refused = 0
    for i in range(3, 40):  # the backlog fills up (4 x max_rows) while commits fail
        try:
            writer.write(_event(i))
            accepted.append(_event(i))
        except ledger.FlushError:
            refused += 1
    assert refused and writer.pending_rows == len(accepted) <= 4 * 2 + 1
    store.healthy = True
    writer.close()
    assert _rows_of(warehouse.table("events")) == _expected(accepted)


def test_a_column_another_writer_added_is_accepted(location: Location) -> None:
    table = _events(location.connect())
    with table.writer(max_seconds=None) as writer:
        writer.write(_event(1))
        location.connect().table("events").insert(
            [{"event_id": 2, "channel": "web"}], evolve_schema=True
        )
        writer.write({"event_id": 3, "channel": "app"})  # the handle learns the new column
        writer.write({"event_id": 4, "channel": "app"})  # and takes the plain path for it
    rows = table.refresh().scan().project("event_id, channel").order("event_id").fetchall()
    assert rows == [(1, None), (2, "web"), (3, "app"), (4, "app")]
    with table.writer() as writer:
        with pytest.raises(ledger.UnknownColumnError) as refused:
            writer.write({"event_id": 5, "colour": "red"})
        # The advice is one the writer's caller can follow (write() takes no evolve_schema).
        message = str(refused.value)
        assert "Pass evolve_schema=True" not in message
        assert "table.insert(rows, evolve_schema=True)" in message
        table.insert([{"event_id": 5, "colour": "red"}], evolve_schema=True)
        writer.write({"event_id": 6, "colour": "blue"})
    colours = table.refresh().scan().project("event_id, colour").order("event_id").fetchall()
    assert colours[-2:] == [(5, "red"), (6, "blue")]


def test_empty_dicts_written_at_once_count_as_insert_counts_them(local_location: Location) -> None:
    """insert([{}]) writes a row of NULLs, as [{}, row] does beside a row: concurrent writes
    converted together or apart count each {} once."""
    warehouse = local_location.connect()
    table = warehouse.create_table("no_key", {"a": "BIGINT", "b": "DOUBLE"})
    with table.writer(max_seconds=None) as writer:

        def write_many(thread: int) -> None:
            for i in range(30):
                writer.write([{}] if i % 2 else [{"a": thread, "b": 1}])  # b: not plain

        workers = [threading.Thread(target=write_many, args=(t,)) for t in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert table.count() == 4 * 30
    assert table.scan().aggregate("count(a)").fetchall() == [(60,)]


@pytest.mark.parametrize("late", [False, True], ids=["fails-before", "fails-after-effect"])
def test_every_storage_call_of_a_flush_may_fail_and_nothing_is_lost_or_doubled(
    local_location: Location, late: bool
) -> None:
    """Fail the n-th storage call of a flush, for every n the flush makes: before the call
    takes effect, or after it (a lost response). The retried flush, with app_id, leaves every
    row exactly once."""
    from tests.support.lost_responses import LateFailingStore

    warehouse = local_location.connect()
    rows = [_event(i) for i in range(4)]

    def flush_with_fault(name: str, fail_after: int | None) -> tuple[FailingStore, int]:
        _events(warehouse, name)
        kind = LateFailingStore if late else FailingStore
        store = kind(warehouse.store, fail_at=None)
        writer = ledger.Warehouse(store).table(name).writer(max_seconds=None, app_id="sink")
        writer.write(rows)
        start = store.counter.calls
        if fail_after is not None:
            store.counter.fail_at = start + fail_after
        with contextlib.suppress(InjectedFault):
            writer.flush()
        store.counter.fail_at = None
        writer.close()  # the retry
        calls = store.counter.calls - start
        assert _rows_of(warehouse.table(name)) == _expected(rows), f"fault at call {fail_after}"
        return store, calls

    _, calls_of_a_flush = flush_with_fault("probe", None)
    assert calls_of_a_flush > 3
    for n in range(1, calls_of_a_flush + 1):
        store, _ = flush_with_fault(f"t{n}", n)
        assert store.counter.failed, f"call {n} was never made"


class SlowCommits(FailingStore):
    """Every log commit takes a while (a slow store)."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if "/_log/" in key:
            time.sleep(0.5)
        return self.inner.put_if_absent(key, data)


def test_wait_gives_up_after_its_timeout_and_the_rows_still_commit(
    local_location: Location,
) -> None:
    warehouse = local_location.connect()
    _events(warehouse)
    store = SlowCommits(warehouse.store, fail_at=None)
    writer = ledger.Warehouse(store).table("events").writer(max_seconds=None)
    position = writer.write([_event(1), _event(2)])
    with pytest.raises(TimeoutError):
        writer.wait(position, timeout=0.05)
    writer.wait(position, timeout=30)
    writer.close()
    assert _rows_of(warehouse.table("events")) == _expected([_event(1), _event(2)])


def test_a_table_with_an_insert_transform_takes_no_buffered_writer(local_location) -> None:
    table = local_location.connect().create_table(
        "t",
        {"id": "BIGINT", "n": "BIGINT"},
        primary_key="id",
        insert_transform="select id, raw::BIGINT as n from rows",
    )
    with pytest.raises(ledger.InvalidArgumentError, match="insert transform"):
        table.writer()
    assert table.refresh().version == 0


# --- decimals, dates and timestamps ---------------------------------------------------------

TIMED_SCHEMA = {
    "id": "BIGINT",
    "amount": "DECIMAL(12,2)",
    "at": "TIMESTAMPTZ",
    "local_at": "TIMESTAMP",
    "day": "DATE",
}
ZONES = st.sampled_from(
    [
        None,
        dt.UTC,
        dt.timezone(dt.timedelta(hours=5, minutes=30)),
        dt.timezone(dt.timedelta(hours=-23, minutes=-59)),
        ZoneInfo("America/New_York"),
    ]
)
DATETIMES = st.builds(
    lambda moment, zone: moment.replace(tzinfo=zone),
    st.one_of(
        st.datetimes(),
        st.sampled_from([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59)]),
    ),
    ZONES,
)
ISO_TEXTS = st.builds(
    lambda year, month, day, hour, minute, second, fraction, zone: (
        f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}{second}{fraction}{zone}"
    ),
    st.sampled_from([1, 2, 2023, 2024, 9998, 9999]),
    st.integers(1, 12),
    st.sampled_from([1, 28, 29, 30, 31]),
    st.sampled_from([0, 23, 24]),
    st.sampled_from([0, 59, 60]),
    st.sampled_from(["", ":00", ":59", ":60"]),
    st.sampled_from(["", ".1", ".123456", ".1234567"]),
    st.sampled_from(["Z", "+05:30", "-23:59", "+24:00", "", "+0530"]),
)
DECIMAL_VALUES = st.one_of(
    st.decimals(places=2, min_value=-(10**10), max_value=10**10),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from([Decimal("1.230"), Decimal("0E+5"), Decimal("1E+9"), Decimal("-0.00")]),
    st.integers(-(10**11), 10**11),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**12), 10**12).map(lambda cents: cents / 100),
    st.sampled_from([24.08, 1.234, 1e-5, 9999999999.99, 1e10, 1e17, -0.0]),
)
TIMED_VALUES = {
    "amount": DECIMAL_VALUES,
    "at": st.one_of(DATETIMES, ISO_TEXTS, st.dates()),
    "local_at": st.one_of(DATETIMES, ISO_TEXTS),
    "day": st.one_of(st.dates(), DATETIMES),
}
TIMED_ROW = st.fixed_dictionaries(
    {"id": st.integers(0, 10)},
    optional={name: st.one_of(st.none(), values) for name, values in TIMED_VALUES.items()},
)


@settings(max_examples=examples(40))
@given(st.lists(st.one_of(TIMED_ROW, st.lists(TIMED_ROW, max_size=3)), max_size=10))
def test_decimals_and_times_accept_and_refuse_exactly_what_insert_does(
    tmp_path_factory: pytest.TempPathFactory, calls: list[Any]
) -> None:
    """Model test: Decimals, ints and floats into a DECIMAL, datetimes with and without zones
    and ISO text into TIMESTAMPTZ and TIMESTAMP, dates into DATE, each write() against an
    insert() of the same data into a twin table: a write raises exactly when the insert does,
    and both tables hold the same values, whichever rows share a flush."""
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    buffered = warehouse.create_table("buffered", TIMED_SCHEMA, primary_key="id")
    oracle = warehouse.create_table("oracle", TIMED_SCHEMA, primary_key="id")
    with buffered.writer(max_rows=4, max_seconds=None) as writer:
        for data in calls:
            try:
                oracle.insert([data] if isinstance(data, dict) else data)
            except ledger.LedgerError as e:
                with pytest.raises(type(e)):
                    writer.write(data)
            else:
                writer.write(data)

    def read(table: ledger.Table) -> list[tuple[Any, ...]]:
        query = 'id, amount, "at", local_at, day'
        return sorted(table.refresh().scan().project(query).fetchall(), key=repr)

    assert read(buffered) == read(oracle)


ZONED_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 10),
            "at": st.one_of(
                st.none(),
                st.datetimes(timezones=ZONES.filter(lambda zone: zone is not None)),
                ISO_TEXTS,
            ),
        }
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=examples(25))
@given(ZONED_ROWS)
def test_rows_of_zoned_datetimes_flushed_together_hold_the_instants_insert_stores(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]]
) -> None:
    """Model test: rows naming the same columns, a TIMESTAMPTZ among them, written one by one
    and flushed together, against an insert() of each row into a twin table: each datetime
    (any zone, any fold, ISO text beside it) is stored as the instant insert stores, and a
    write raises exactly when the insert does."""
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    buffered = warehouse.create_table("buffered", {"id": "BIGINT", "at": "TIMESTAMPTZ"})
    oracle = warehouse.create_table("oracle", {"id": "BIGINT", "at": "TIMESTAMPTZ"})
    with buffered.writer(max_rows=len(rows) + 1, max_seconds=None) as writer:
        for row in rows:
            try:
                oracle.insert([row])
            except ledger.LedgerError as e:
                with pytest.raises(type(e)):
                    writer.write(row)
            else:
                writer.write(row)

    def read(table: ledger.Table) -> list[tuple[Any, ...]]:
        return sorted(table.refresh().scan().project('id, "at"').fetchall(), key=repr)

    assert read(buffered) == read(oracle)


def test_bad_decimals_and_timestamps_raise_at_write_and_good_ones_arrive_exactly(
    local_location: Location,
) -> None:
    table = local_location.connect().create_table("timed", TIMED_SCHEMA, primary_key="id")
    new_york = ZoneInfo("America/New_York")
    good = [
        {
            "id": 1,
            "amount": Decimal("1234567890.12"),
            "at": dt.datetime(2024, 7, 1, tzinfo=new_york),
        },
        {"id": 2, "amount": 24.08, "at": "2024-01-01T10:30:15.123456+05:30"},
        {"id": 3, "amount": -7, "at": "2024-02-29 23:59Z", "day": dt.date(2024, 2, 29)},
        {"id": 4, "amount": Decimal("0.1"), "local_at": dt.datetime(2024, 3, 10, 1, 30)},
        {"id": 5, "amount": None, "at": None, "local_at": None, "day": None},
    ]
    bad = [
        {"id": 10, "amount": Decimal("1.234")},  # three places into scale 2
        {"id": 11, "amount": Decimal("12345678901")},  # eleven whole digits into ten
        {"id": 12, "amount": 1.234},
        {"id": 13, "amount": 1e10},
        {"id": 14, "amount": Decimal("NaN")},
        {"id": 15, "at": dt.datetime(2024, 1, 1)},  # no zone: no instant
        {"id": 16, "at": "2023-02-29T00:00Z"},
        {"id": 17, "at": "2024-01-01T00:00"},  # text without offset
        {"id": 18, "at": dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5)))},
        {"id": 19, "day": dt.datetime(2024, 1, 1, 12)},
    ]
    with table.writer(max_rows=2, max_seconds=None) as writer:
        for good_row, bad_row in zip(good, bad, strict=False):
            writer.write(good_row)
            with pytest.raises(ledger.TypeMismatchError):
                writer.write(bad_row)
        for bad_row in bad[len(good) :]:
            with pytest.raises(ledger.TypeMismatchError):
                writer.write(bad_row)
    utc = dt.UTC
    expected = [
        (1, Decimal("1234567890.12"), dt.datetime(2024, 7, 1, 4, tzinfo=utc), None, None),
        (2, Decimal("24.08"), dt.datetime(2024, 1, 1, 5, 0, 15, 123456, tzinfo=utc), None, None),
        (
            3,
            Decimal("-7.00"),
            dt.datetime(2024, 2, 29, 23, 59, tzinfo=utc),
            None,
            dt.date(2024, 2, 29),
        ),
        (4, Decimal("0.10"), None, dt.datetime(2024, 3, 10, 1, 30), None),
        (5, None, None, None, None),
    ]
    rows = table.refresh().scan().project('id, amount, "at", local_at, day').fetchall()
    assert sorted(rows) == expected
    assert table.count() == len(good)


def test_plain_rows_alone_are_flushed_by_age(local_location: Location) -> None:
    """Rows that take no conversion wake the idle flusher, which then flushes them once the
    oldest is max_seconds old."""
    table = local_location.connect().create_table("plain", PLAIN_SCHEMA, primary_key="id")
    writer = table.writer(max_rows=1_000, max_seconds=0.2)
    try:
        writer.write({"id": 1, "s": "a"})
        writer.write([{"id": 2, "s": "b"}])
        assert _eventually(lambda: table.refresh().count() == 2, seconds=10.0)
    finally:
        writer.close()


FULL_ROW_VALUES = st.one_of(ANY_VALUE, DECIMAL_VALUES, DATETIMES, ISO_TEXTS, st.dates())
# Mostly values of each column's first kind (where a mistake in its test shows), at the edges of
# their range, beside any other value.
FIRST_KIND_VALUES = {
    "BIGINT": st.integers(-(2**64), 2**64),
    "INTEGER": st.integers(-(2**32), 2**32),
    "DOUBLE": st.floats(allow_nan=True, allow_infinity=True),
    "VARCHAR": st.one_of(st.text(max_size=4), st.sampled_from(["\ud800", "ü"])),
    "BOOLEAN": st.booleans(),
    "DECIMAL(12,2)": DECIMAL_VALUES.filter(lambda v: isinstance(v, Decimal)),
    "TIMESTAMPTZ": st.one_of(st.datetimes(timezones=st.just(dt.UTC)), DATETIMES),
    "TIMESTAMP": st.one_of(st.datetimes(), DATETIMES),
    "DATE": st.dates(),
}


def _mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Seven draws in eight from ``usual`` (``one_of`` takes a repeated strategy once)."""
    return st.integers(0, 7).flatmap(lambda k: usual if k else other)


def _column_values(sql_type: str) -> st.SearchStrategy[Any]:
    return _mostly(FIRST_KIND_VALUES[sql_type], FULL_ROW_VALUES)


@settings(max_examples=examples(100))
@given(
    st.sampled_from([PLAIN_SCHEMA, TIMED_SCHEMA]),
    st.data(),
)
def test_the_check_of_full_rows_agrees_with_the_check_of_their_names(
    schema: dict[str, str], data: st.DataObject
) -> None:
    """A row naming every column (in any order) is checked by one compiled check per schema
    before the check of its tuple of names: whatever it accepts, the check of its names
    accepts with the same size, and it accepts every row whose values are of each column's
    first kind and fit. Rows naming other columns, a None, or another kind go to the other."""
    table_schema = TableSchema.parse(schema)
    fits = _column_fits(table_schema)
    keys = frozenset({"id"})
    full = _full_row_check(tuple(table_schema.names), fits, keys)
    names = data.draw(st.permutations(list(schema)))
    names = data.draw(st.sampled_from([names, names, names[1:], [*names, "other"]]))
    row = {
        name: data.draw(_column_values(schema[name]) if name in schema else FULL_ROW_VALUES)
        for name in names
    }
    by_names = _row_check(tuple(row), fits, keys)(row)
    size = full(row)
    assert size is None or size == by_names
    first_kinds = set(names) == set(schema) and all(
        type(row[name]) is next(iter(fits[name])) for name in names
    )
    if first_kinds and by_names is not None:
        assert size == by_names


# Mostly values that fit (so batches of several accepted rows form), sometimes any value.
FITTING_VALUES = {
    name: _mostly(fitting, ANY_VALUE)
    for name, fitting in {
        "id": st.integers(-(2**63), 2**63 - 1),
        "n": st.integers(-(2**31), 2**31 - 1),
        "x": st.floats(allow_nan=False, allow_infinity=False),
        "s": st.text(max_size=4),
        "b": st.booleans(),
    }.items()
}


@settings(max_examples=examples(10))
@given(
    st.lists(
        st.permutations(list(PLAIN_SCHEMA)).flatmap(
            lambda names: st.fixed_dictionaries({name: FITTING_VALUES[name] for name in names})
        ),
        min_size=2,
        max_size=6,
    )
)
def test_rows_naming_every_column_accept_and_refuse_exactly_what_insert_does(
    tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]]
) -> None:
    """Model test of the full-row path: rows naming every column, in any order, written one
    by one against an insert() of each into a twin table."""
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    buffered = warehouse.create_table("buffered", PLAIN_SCHEMA, primary_key="id")
    oracle = warehouse.create_table("oracle", PLAIN_SCHEMA, primary_key="id")
    with buffered.writer(max_rows=3, max_seconds=None) as writer:
        for row in rows:
            try:
                oracle.insert([row])
            except ledger.LedgerError as e:
                with pytest.raises(type(e)):
                    writer.write(row)
            else:
                writer.write(row)
                row.clear()  # the writer kept its own copy

    def read(table: ledger.Table) -> list[tuple[Any, ...]]:
        query = "id, n, x, s, b, isnan(x)"
        return sorted(table.refresh().scan().project(query).fetchall(), key=repr)

    assert read(buffered) == read(oracle)


@pytest.mark.parametrize("late", [False, True], ids=["fails-before", "fails-after-effect"])
def test_a_failed_batch_another_writer_then_takes_is_refused_and_handed_back(
    local_location: Location, late: bool
) -> None:
    """Fail the n-th storage call of a flush with app_id, for every n it makes (and every call
    after it, until a second writer under the same app_id has committed: the first one's
    background retries must not commit first). If the failed attempt's commit landed, the
    second writer is refused and the retry is a replay; if it did not, the retry is refused
    with its rows kept, and close() hands them back. Never a row lost or doubled."""
    from tests.support.lost_responses import LateCrashingStore

    warehouse = local_location.connect()
    ours, theirs = [_event(i) for i in range(3)], [_event(i) for i in range(10, 12)]

    def race(name: str, fail_after: int | None) -> tuple[FailingStore, int, bool]:
        _events(warehouse, name)
        store = (LateCrashingStore if late else CrashingStore)(warehouse.store, fail_at=None)
        first = ledger.Warehouse(store).table(name).writer(max_seconds=None, app_id="feed")
        second = warehouse.table(name).writer(max_seconds=None, app_id="feed")
        first.write(ours)
        start = store.counter.calls
        if fail_after is not None:
            store.counter.fail_at = start + fail_after
        with contextlib.suppress(InjectedFault):
            first.flush()
        calls = store.counter.calls - start
        landed = warehouse.table(name).history()[-1].app_id == "feed"
        second.write(theirs)
        if landed:  # the first writer's commit is there: the second one's batch is taken
            with pytest.raises(ledger.BatchTakenError):
                second.flush()
            store.counter.fail_at = None
            first.flush()  # a replay of its own commit (unless a background retry was first)
            assert (first.committed_rows, first.pending_rows) == (len(ours), 0)
            first.close()
            with pytest.raises(ledger.BatchTakenError) as taken:
                second.close()
            kept, handed_back = ours, theirs
        else:
            assert second.flush() == len(theirs)
            store.counter.fail_at = None
            with pytest.raises(ledger.BatchTakenError, match="one writer at a time"):
                first.flush()
            assert (first.committed_rows, first.pending_rows) == (0, len(ours))
            second.close()
            with pytest.raises(ledger.BatchTakenError) as taken:
                first.close()
            kept, handed_back = theirs, ours
        assert taken.value.rows is not None
        assert sorted(taken.value.rows.column("event_id").to_pylist()) == sorted(
            r["event_id"] for r in handed_back
        )
        assert _rows_of(warehouse.table(name)) == _expected(kept), f"fault at call {fail_after}"
        return store, calls, landed

    _, calls_of_a_flush, landed = race("probe", None)
    assert landed and calls_of_a_flush > 3
    outcomes = set()
    for n in range(1, calls_of_a_flush + 1):
        store, _, landed = race(f"t{n}", n)
        assert store.counter.failed, f"call {n} was never made"
        outcomes.add(landed)
    assert outcomes == ({False, True} if late else {False})


def test_a_batch_taken_by_a_plain_insert_is_refused_and_the_log_holds_each_batch_token(
    local_location: Location,
) -> None:
    """The writer's commits carry a token with their app batch (docs/format.md 5.4); a commit
    of its batch without its token, here an insert naming the app batch, is never taken for
    the writer's own, even after a failed attempt of that batch."""
    warehouse = local_location.connect()
    table = _events(warehouse)
    store = AlwaysFailingCommits(warehouse.store)
    writer = ledger.Warehouse(store).table("events").writer(max_seconds=None, app_id="feed")
    writer.write(_event(1))
    with pytest.raises(InjectedFault):
        writer.flush()
    table.insert([_event(2)], app_id="feed", batch=0)
    store.healthy = True
    with pytest.raises(ledger.BatchTakenError, match="one writer at a time"):
        writer.flush()
    with pytest.raises(ledger.BatchTakenError) as taken:
        writer.close()
    assert taken.value.rows is not None and taken.value.rows.column("event_id").to_pylist() == [1]
    with table.writer(max_seconds=None, app_id="feed-2") as second:
        second.write(_event(3))
    log_lines = [
        json.loads(warehouse.store.get(f"events/_log/{name}").decode().split("\n")[0])
        for name in sorted(
            info.key.rsplit("/", 1)[-1] for info in warehouse.store.list("events/_log/")
        )
        if ".checkpoint." not in name and name.endswith(".jsonl")
    ]
    apps = [meta["app"] for meta in log_lines if "app" in meta]
    assert apps[0] == {"id": "feed", "batch": 0}  # the insert's: no token
    assert set(apps[1]) == {"id", "batch", "token"} and apps[1]["id"] == "feed-2"
    assert re.fullmatch(r"[0-9a-f]{32}", apps[1]["token"])
    assert _rows_of(warehouse.table("events")) == _expected([_event(2), _event(3)])
