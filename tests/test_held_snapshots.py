"""Blind inserts on a held snapshot: a handle whose state was confirmed the latest (by a listing
or by its own commit) less than half the transaction timeout ago commits without listing the
log (docs/format.md 6.1). Older held states list as before, so a vacuum that trimmed the log
behind a checkpoint can never free the version a writer aims at; a config or schema change
made since the held state is never missed.

Time is moved by a fake clock (``time.time`` and the clocks a handle's states are confirmed on,
advanced together), so the races against vacuum are exact and the property test runs fast.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
from ledger.log.table_log import TableLog
from ledger.trx_ids import reservation_key
from tests.conftest import Location, examples
from tests.support.maintenance import set_clock_skew

SCHEMA = {"id": "BIGINT", "v": "BIGINT"}
# The window of a held state is half of it: long enough for the slow steps of a test on a
# loaded machine (S3 through moto) to stay inside it.
TIMEOUT_S = 60.0
MODEL_TIMEOUT_S = 10.0


class FakeClock:
    """Moves ``time.time``, ``time.monotonic`` and ``time.clock_gettime`` (the boot time clock
    held states are confirmed on) forward together by :meth:`advance`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        real_time, real_monotonic = time.time, time.monotonic
        real_clock_gettime = time.clock_gettime
        monkeypatch.setattr(time, "time", lambda: real_time() + self.offset)
        monkeypatch.setattr(time, "monotonic", lambda: real_monotonic() + self.offset)
        monkeypatch.setattr(time, "clock_gettime", lambda c: real_clock_gettime(c) + self.offset)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    set_clock_skew(monkeypatch)  # vacuum trims the log as soon as the timeout allows
    yield FakeClock(monkeypatch)


def _create(warehouse: ledger.Warehouse, timeout_s: float = TIMEOUT_S) -> ledger.Table:
    return warehouse.create_table(
        "events", SCHEMA, primary_key="id", checkpoint_interval=2, transaction_timeout=timeout_s
    )


def _rows(*ids: int) -> list[dict[str, Any]]:
    return [{"id": i, "v": i} for i in ids]


class LogReads:
    """Counts the listings of the log a handle makes to refresh its state."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, table: ledger.Table) -> None:
        self.count = 0
        real = TableLog.refresh
        log = table.handle.log

        def counted(state: Any) -> Any:
            self.count += 1
            return real(log, state)

        monkeypatch.setattr(log, "refresh", counted)


def _check_table(location: Location, ids: list[int]) -> None:
    """Every inserted row exactly once (invariants 1 and 2), and, as ``ids`` were inserted one
    after another in this order, each one's trx_id above every earlier one's (invariant 3)."""
    rows = location.connect().table("events").scan().select("id", "trx_id").fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids)
    trx_id_of = dict(rows)
    trx_ids = [trx_id_of[i] for i in ids]
    assert trx_ids == sorted(set(trx_ids))


def test_a_recently_confirmed_state_commits_without_listing_the_log(
    location: Location, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _create(location.connect())
    writer.insert(_rows(1))  # its own commit confirms version 1
    reads = LogReads(monkeypatch, writer)
    clock.advance(2)  # within the window
    info = writer.insert(_rows(2))
    assert (info.version, reads.count) == (2, 0)
    clock.advance(TIMEOUT_S / 2)  # past the window: the log is read first
    info = writer.insert(_rows(3))
    assert (info.version, reads.count) == (3, 1)
    _check_table(location, [1, 2, 3])


def test_a_held_state_older_than_the_window_is_not_overtaken_by_a_log_trimming_vacuum(
    location: Location, clock: FakeClock
) -> None:
    """Vacuum deleted the commits after the held version behind a checkpoint, so the next
    version's name is free again: a commit aimed at it unseen would be lost, and the id reserved
    above the held maximum could repeat one whose reservation vacuum deleted."""
    writer = _create(location.connect())
    writer.insert(_rows(1))  # holds version 1, trx_id 1
    other = location.connect().table("events")
    for i in (2, 3, 4):
        other.insert(_rows(i))  # versions 2-4, checkpoints at 2 and 4
    clock.advance(TIMEOUT_S + 1)
    trimmed = other.vacuum(0)
    assert trimmed.log_files_deleted > 0 and trimmed.reservations_deleted > 0
    with pytest.raises(FileNotFoundError):  # the name of version 2 is free again
        other.store.size(other.handle.log.commit_key(2))
    info = writer.insert(_rows(5))
    assert info.version == 5 and info.trx_id == 5
    _check_table(location, [1, 2, 3, 4, 5])


def test_vacuum_within_the_window_cannot_trim_the_log_after_a_held_state(
    location: Location, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _create(location.connect())
    writer.insert(_rows(1))
    other = location.connect().table("events")
    for i in (2, 3, 4):
        other.insert(_rows(i))
    clock.advance(2)  # the held state is still within its window
    assert other.vacuum(0).log_files_deleted == 0
    reads = LogReads(monkeypatch, writer)
    info = writer.insert(_rows(5))  # loses version 2, reads the commits since, lands at 5
    assert (info.version, info.trx_id, reads.count) == (5, 5, 0)
    _check_table(location, [1, 2, 3, 4, 5])


def test_a_dropped_lifes_log_is_kept_for_its_own_timeout(
    location: Location, clock: FakeClock
) -> None:
    """A writer of a dropped life counts its window by that life's timeout, so vacuum of a new
    life with a shorter one keeps the dropped life's log as long as the longer timeout."""
    warehouse = location.connect()
    writer = _create(warehouse)
    writer.insert(_rows(1))  # holds version 1 of the first life, timeout 10 s
    warehouse.drop_table("events")
    again = warehouse.create_table(
        "events", SCHEMA, primary_key="id", checkpoint_interval=2, transaction_timeout=0.5
    )
    for i in (10, 11, 12):
        again.insert(_rows(i))
    clock.advance(1)  # past the new life's timeout, within the writer's window
    assert again.vacuum(0).log_files_deleted == 0
    with pytest.raises(ledger.TableDroppedError):
        writer.insert(_rows(2))
    assert sorted(r[0] for r in location.connect().table("events").scan().fetchall()) == [
        10,
        11,
        12,
    ]
    clock.advance(TIMEOUT_S)
    assert again.vacuum(0).log_files_deleted > 0  # once the longer timeout has passed too


def test_an_id_repeated_on_a_held_state_is_caught_at_commit(
    location: Location, clock: FakeClock
) -> None:
    """Reservations of committed ids deleted by hand (as a vacuum misled by a clock would):
    the id reserved on the held state repeats one a commit since carries. The commit that
    carries it is not taken for this insert's own (its files differ), and the insert is done
    again on the latest state."""
    writer = _create(location.connect())
    writer.insert(_rows(1))
    other = location.connect().table("events")
    for i in (2, 3, 4):
        other.insert(_rows(i))
    for trx_id in (2, 3, 4):
        other.store.delete(reservation_key(other.prefix, trx_id))
    info = writer.insert(_rows(5))
    assert (info.version, info.trx_id) == (5, 5)
    _check_table(location, [1, 2, 3, 4, 5])


def test_an_insert_transform_set_since_the_held_state_shapes_the_rows(
    location: Location, clock: FakeClock
) -> None:
    writer = _create(location.connect())
    writer.insert(_rows(1))
    location.connect().table("events").set_insert_transform("SELECT id, v * 100 AS v FROM rows")
    writer.insert(_rows(2))
    fresh = location.connect().table("events")
    assert sorted(fresh.scan().select("id", "v").fetchall()) == [(1, 1), (2, 200)]


def test_a_column_added_since_the_held_state_is_accepted(
    location: Location, clock: FakeClock
) -> None:
    writer = _create(location.connect())
    writer.insert(_rows(1))
    location.connect().table("events").insert([{"id": 2, "v": 2, "note": "x"}], evolve_schema=True)
    writer.insert([{"id": 3, "v": 3, "note": "y"}])  # no evolve_schema: the column exists now
    fresh = location.connect().table("events")
    assert sorted(fresh.scan().select("id", "note").fetchall()) == [
        (1, None),
        (2, "x"),
        (3, "y"),
    ]


def test_bad_rows_on_a_held_state_raise_the_same_typed_error(
    location: Location, clock: FakeClock
) -> None:
    writer = _create(location.connect())
    writer.insert(_rows(1))
    with pytest.raises(ledger.UnknownColumnError, match="nope"):
        writer.insert([{"id": 2, "v": 2, "nope": 1}])
    assert writer.refresh().version == 1
    _check_table(location, [1])


# --- interleavings against a model ----------------------------------------------------------------

# One round: one of three handles inserts a row, another inserts some more (checkpoints come
# every second version), the clock moves on (within a held state's window, past the table's
# timeout, or past the window), and vacuum may trim the log.
_rounds = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(0, 3),
        st.sampled_from([0.5, 3.0, 6.0, 11.0]),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rounds=_rounds)
def test_interleavings_of_held_writers_and_vacuum_keep_every_commit(
    clock: FakeClock, rounds: list[tuple[int, int, float, bool]]
) -> None:
    """Every acknowledged row is in the table exactly once, and each commit's trx_id is above
    every id committed before it (the model: the acknowledged inserts, in order)."""
    with tempfile.TemporaryDirectory(prefix="held-") as root:
        _run_rounds(Location("local", root + "/warehouse"), clock, rounds)


def _run_rounds(
    location: Location, clock: FakeClock, rounds: list[tuple[int, int, float, bool]]
) -> None:
    tables = [_create(location.connect(), MODEL_TIMEOUT_S)]
    tables += [location.connect().table("events") for _ in range(2)]
    acknowledged: list[int] = []
    committed_ids: list[int] = []

    def insert(table: ledger.Table) -> None:
        info = table.insert(_rows(len(acknowledged) + 1))
        assert info.trx_id is not None and all(info.trx_id > i for i in committed_ids)
        committed_ids.append(info.trx_id)
        acknowledged.append(len(acknowledged) + 1)

    for writer, others, seconds, vacuum in rounds:
        insert(tables[writer])
        for _ in range(others):
            insert(tables[(writer + 1) % 3])
        clock.advance(seconds)
        if vacuum:
            tables[(writer + 2) % 3].vacuum(0)
    _check_table(location, acknowledged)


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="no boot time clock here")
def test_a_state_confirmed_before_a_suspend_is_not_recent_after_it(
    local_location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``time.monotonic`` stands still while the machine sleeps; the boot time clock does not,
    and vacuum elsewhere kept running: a held state must not look recent after a long sleep."""
    from ledger.log.handle import is_recent

    table = local_location.connect().create_table("t", {"k": "BIGINT"}, primary_key="k")
    state, confirmed_at = table.handle.confirmed_state()
    assert is_recent(state, confirmed_at)
    slept = state.config.transaction_timeout_ms / 1000  # the whole window, asleep
    real_clock_gettime = time.clock_gettime
    monkeypatch.setattr(time, "clock_gettime", lambda c: real_clock_gettime(c) + slept)
    assert not is_recent(state, confirmed_at)
