"""The buffered writer under threads: random rows of good and bad values, written one call each
from several threads while flushes run, end up exactly as the good rows inserted at once.

The oracle is a plain list of the good rows, inserted with one ``insert`` into a twin table;
every bad row must raise at its own ``write`` and leave no trace.
"""

from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {
    "event_id": "BIGINT",
    "n": "INTEGER",
    "s": "VARCHAR",
    "x": "DOUBLE",
    "d": "DECIMAL(12,2)",
    "on_day": "DATE",
    "seen_at": "TIMESTAMPTZ",
}
THREADS = 4
ZONES = [
    dt.UTC,
    dt.timezone(dt.timedelta(hours=5, minutes=30)),
    dt.timezone(-dt.timedelta(hours=8)),
]

# Values each column takes (plainly or through a conversion), and values it refuses.
GOOD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "n": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
    "s": st.one_of(st.none(), st.text(max_size=6)),
    "x": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 5)),
    "d": st.one_of(
        st.none(),
        st.decimals(-(10**9), 10**9, places=2, allow_nan=False, allow_infinity=False),
        st.decimals(-(10**9), 10**9, places=0, allow_nan=False, allow_infinity=False),
        st.integers(-(10**9), 10**9),
        st.sampled_from([0.5, 1.25, -3.1, 12.0]),
    ),
    "on_day": st.one_of(st.none(), st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))),
    "seen_at": st.one_of(
        st.none(),
        st.datetimes(
            dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1), timezones=st.sampled_from(ZONES)
        ),
        st.sampled_from(["2026-01-01T10:30:15.25+05:30", "2026-02-28 23:59Z"]),
    ),
}
BAD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "event_id": st.sampled_from([None, "x-1", 2**63, {"k": 1}]),
    "n": st.sampled_from([2**31, -(2**31) - 1, "many", {"a": 1}]),
    "s": st.sampled_from([["a"], {"b": 2}]),
    "x": st.sampled_from(["fast", [1.5]]),
    "d": st.sampled_from([Decimal("1e10"), 10**10, "cheap", Decimal("-12345678901")]),
    "on_day": st.sampled_from(["someday", 3.5]),
    "seen_at": st.sampled_from(["2026-13-01T00:00Z", "noon", 7.5]),
}


@st.composite
def calls(draw: st.DrawFn) -> list[tuple[bool, dict[str, Any]]]:
    """Rows with distinct event ids, each marked good or bad; a bad row holds one bad value (or
    names a column the table lacks), its other values are good."""
    count = draw(st.integers(0, 30))
    made: list[tuple[bool, dict[str, Any]]] = []
    for event_id in range(count):
        columns = draw(st.lists(st.sampled_from(list(GOOD_VALUES)), unique=True))
        row: dict[str, Any] = {"event_id": event_id}
        row.update({column: draw(GOOD_VALUES[column]) for column in columns})
        good = draw(st.booleans())
        if not good:
            broken = draw(st.sampled_from([*BAD_VALUES, "unknown"]))
            if broken == "unknown":
                row["colour"] = "red"
            else:
                row[broken] = draw(BAD_VALUES[broken])
        made.append((good, row))
    return made


def _entries(table: ledger.Table) -> list[tuple[Any, ...]]:
    query = "event_id, n, s, x, d, on_day, seen_at, dml_type"
    return sorted(table.refresh().scan().project(query).fetchall(), key=repr)


@settings(max_examples=examples(15), deadline=None)
@given(calls(), st.integers(2, 9))
def test_threads_keep_exactly_the_good_rows(
    tmp_path_factory: pytest.TempPathFactory,
    written: list[tuple[bool, dict[str, Any]]],
    max_rows: int,
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    buffered = warehouse.create_table("buffered", SCHEMA, primary_key="event_id")
    oracle = warehouse.create_table("oracle", SCHEMA, primary_key="event_id")
    outcomes: dict[int, BaseException | int] = {}

    def write_share(first: int) -> None:
        for index in range(first, len(written), THREADS):
            try:
                outcomes[index] = writer.write(written[index][1])
            except ledger.LedgerError as e:
                outcomes[index] = e

    with buffered.writer(max_rows=max_rows, max_seconds=None) as writer:
        workers = [threading.Thread(target=write_share, args=(t,)) for t in range(THREADS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    for index, (good, row) in enumerate(written):
        if good:
            assert isinstance(outcomes[index], int), (row, outcomes[index])
        else:
            assert isinstance(outcomes[index], ledger.LedgerError), (row, outcomes[index])
    good_rows = [row for good, row in written if good]
    if good_rows:
        oracle.insert(good_rows)
    assert writer.committed_rows == writer.accepted_rows == len(good_rows)
    assert _entries(buffered) == _entries(oracle)


def test_positions_of_concurrent_writes_are_distinct_and_all_committed(tmp_path: Path) -> None:
    """Every write() from every thread gets its own position; waiting for the highest one
    waits for every row."""
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="event_id")
    positions: list[list[int]] = [[] for _ in range(THREADS)]
    with table.writer(max_rows=97, max_seconds=None) as writer:

        def write_share(thread: int) -> None:
            for event_id in range(thread, 2000, THREADS):
                positions[thread].append(writer.write({"event_id": event_id, "s": "x"}))

        workers = [threading.Thread(target=write_share, args=(t,)) for t in range(THREADS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        every = sorted(p for share in positions for p in share)
        assert every == list(range(1, 2001))
        writer.wait(every[-1], timeout=60)
        assert writer.committed_rows == 2000
    assert table.count() == 2000
