"""Reads reuse what does not change between calls: one DuckDB database per warehouse (a child
connection per read), the SQL text of each query shape, the NaN probe per set of files, and the
table's state while its log has no new commit. Every answer equals a fresh read's and a plain
in-place oracle's, whoever committed in between (another handle, thread or process)."""

from __future__ import annotations

import math
import multiprocessing
import subprocess
import sys
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.engines.duckdb.session import ReadSessions, connect, read_sessions
from tests.conftest import examples
from tests.support.scratch import scratch_dir
from tests.support.view_oracle import InPlaceTable, assert_same_rows

SCHEMA = {"k": "BIGINT", "g": "INTEGER", "x": "DOUBLE", "d": "DECIMAL(10,2)"}
FLOATS = st.none() | st.sampled_from([0.5, -2.25, 3.0, -0.0, math.nan, math.inf, -math.inf, 1024.0])
DECIMALS = st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("7.25")])
ROWS = st.lists(
    st.fixed_dictionaries(
        {"k": st.integers(0, 5), "g": st.integers(0, 1), "x": FLOATS, "d": DECIMALS}
    ),
    min_size=1,
    max_size=4,
)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), ROWS),  # blind: a key may get a second live row
        st.tuples(st.just("upsert"), ROWS.map(lambda rs: list({r["k"]: r for r in rs}.values()))),
        st.tuples(st.just("delete"), st.lists(st.integers(0, 6), min_size=1, max_size=3)),
    ),
    min_size=1,
    max_size=6,
)
TOTALS = {"by": ["g"], "sum": ["x", "d"], "avg": ["x", "d"]}


def _apply(table: ledger.Table, oracle: InPlaceTable, operation: tuple[str, Any]) -> None:
    kind, payload = operation
    if kind == "insert":
        table.insert(payload)
        oracle.insert(payload)
    elif kind == "upsert":
        table.upsert(payload)
        oracle.replace(payload)
    else:
        keys = sorted(set(payload))
        table.delete([{"k": k} for k in keys])
        oracle.delete([(k,) for k in keys])


def _totals(table: Any, con: duckdb.DuckDBPyConnection | None = None) -> list[tuple[Any, ...]]:
    return views.totals(table, **TOTALS, con=con).fetchall()  # type: ignore[arg-type]


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(OPERATIONS)
def test_kept_reads_answer_as_fresh_reads_and_the_oracle(operations: list[Any]) -> None:
    """A reader holding its table handle (its state, database and texts cached) answers as a
    fresh handle on a fresh connection and as the oracle after each commit of another
    warehouse handle."""
    with scratch_dir("read_sessions") as root:
        writer = ledger.connect(root).create_table(
            "t", SCHEMA, primary_key=["k"], partition_by=["g"]
        )
        reader = ledger.connect(root).table("t")
        oracle = InPlaceTable(writer.arrow_schema, ["k"])
        for operation in operations:
            _apply(writer, oracle, operation)
            kept = _totals(reader)
            with duckdb.connect() as own:
                fresh = _totals(ledger.connect(root).table("t"), con=own)
            want = oracle.totals(by=["g"], sums=["x", "d"], avgs=["x", "d"])
            assert_same_rows(kept, want, 1, "kept reader vs oracle")
            assert_same_rows(fresh, want, 1, "fresh reader vs oracle")
            assert reader.snapshot().version == writer.version
            visible = [tuple(r) for r in views.visible(reader).fetchall()]
            assert_same_rows(visible, oracle.visible(), 0, "kept reader's visible rows")
        reader.close()


def test_commits_of_another_process_are_seen(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    table.insert([{"k": 1, "g": 0, "x": 1.5, "d": None}])
    assert _totals(table) == [(0, 1, 1.5, None, 1.5, None)]
    code = (
        "import math, sys, ledger; t = ledger.connect(sys.argv[1]).table('t'); "
        "t.upsert([{'k': 1, 'g': 0, 'x': 4.0}, {'k': 2, 'g': 1, 'x': math.nan}])"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, cwd=Path.cwd())
    got = sorted(_totals(table), key=lambda r: r[0])
    assert got[0] == (0, 1, 4.0, None, 4.0, None)
    assert got[1][:2] == (1, 1) and math.isnan(got[1][2])
    assert table.version == 2


def test_reads_in_threads_while_another_thread_writes(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    batches, rows_per_batch = 12, 25
    failures: list[str] = []
    done = threading.Event()

    def write() -> None:
        try:
            for batch in range(batches):
                start = batch * rows_per_batch
                table.insert(
                    [{"k": k, "g": k % 2, "x": 1.0, "d": None} for k in range(start, start + 25)]
                )
        finally:
            done.set()

    def read() -> None:
        seen = 0
        while not done.is_set() or seen < batches * rows_per_batch:
            snap = table.snapshot()
            [(count, total)] = views.totals(snap, sum=["x"]).fetchall()
            if count != snap.count() or (count and total != float(count)) or count < seen:
                failures.append(f"version {snap.version}: count {count}, sum {total}")
                return
            seen = count

    threads = [threading.Thread(target=read) for _ in range(4)]
    threads.append(threading.Thread(target=write))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not failures
    assert views.totals(table, sum=["x"]).fetchall() == [(300, 300.0)]


def test_connections_keep_their_settings_and_leave_no_views(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    table.insert([{"k": 1, "g": 0, "x": 1.0, "d": None}])
    for _ in range(3):
        assert views.totals(table, sum=["x"]).fetchall() == [(1, 1.0)]
        assert len(views.visible(table).fetchall()) == 1
    child = read_sessions(table.store).cursor()
    settings_now = child.sql(
        "SELECT current_setting('TimeZone'), current_setting('autoload_known_extensions'), "
        "current_setting('autoinstall_known_extensions')"
    ).fetchall()
    assert settings_now == [("UTC", False, False)]
    # Per-call views are temporary views of each read's own child: none stays in the database.
    assert child.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall() == [(0,)]


def test_relations_on_a_callers_connection_never_share_a_view(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    table.insert([{"k": 1, "g": 0, "x": 1.0, "d": None}])
    with connect() as con:
        first = views.totals(table, sum=["x"], con=con)
        table.insert([{"k": 2, "g": 0, "x": 2.0, "d": None}])
        second = views.totals(table, sum=["x"], con=con)
        assert second.fetchall() == [(2, 3.0)]
        assert first.fetchall() == [(1, 1.0)]  # still its own snapshot's files


def test_closing_lets_the_database_go_and_later_reads_open_another(tmp_path: Path) -> None:
    with ledger.connect(str(tmp_path)) as warehouse:
        table = warehouse.create_table("t", SCHEMA, primary_key=["k"])
        table.insert([{"k": 1, "g": 0, "x": 1.0, "d": None}])
        before = read_sessions(table.store)._database
        pending = views.totals(table, sum=["x"])
    assert pending.fetchall() == [(1, 1.0)]  # a relation made before the close still runs
    assert read_sessions(table.store)._database is None
    assert views.totals(table, sum=["x"]).fetchall() == [(1, 1.0)]
    assert read_sessions(table.store)._database not in (None, before)  # a new one was opened
    with table:
        assert views.totals(table, sum=["x"]).fetchall() == [(1, 1.0)]
    assert views.totals(table, sum=["x"]).fetchall() == [(1, 1.0)]


def _totals_in_forked_child(table: ledger.Table) -> list[tuple[Any, ...]]:
    context = multiprocessing.get_context("fork")
    answers = context.Queue()

    def child() -> None:
        answers.put(_totals(table))

    process = context.Process(target=child)
    process.start()
    got: list[tuple[Any, ...]] = answers.get(timeout=120)
    process.join(timeout=120)
    assert process.exitcode == 0
    return got


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_process_opens_its_own_database(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    table.insert([{"k": 1, "g": 0, "x": 1.0, "d": None}])
    want = _totals(table)  # the parent's database exists before the fork
    assert _totals_in_forked_child(table) == want
    assert _totals(table) == want  # the parent's database is untouched by the child


def test_a_read_session_reopens_after_close() -> None:
    sessions = ReadSessions()
    assert sessions.cursor().sql("SELECT 1").fetchall() == [(1,)]
    sessions.close()
    assert sessions.cursor().sql("SELECT 2").fetchall() == [(2,)]
    sessions.close()


def test_threads_read_on_connections_of_their_own() -> None:
    sessions = ReadSessions()
    parents: list[Any] = []

    def note() -> None:
        sessions.cursor()
        parents.append(sessions._threads.parent)

    threads = [threading.Thread(target=note) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(p) for p in parents}) == 3
    sessions.close()


def test_totals_shapes_are_rendered_once(tmp_path: Path) -> None:
    from ledger.reads.totals import totals_text

    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    table.insert([{"k": 1, "g": 0, "x": 1.0, "d": None}])
    _totals(table)
    before = totals_text.cache_info()
    for _ in range(3):
        _totals(table)
    # The statement is kept per table state: an unchanged table's text is not even looked up.
    assert totals_text.cache_info() == before
    # A commit makes a new state and its statement anew, whose shape was rendered already.
    table.insert([{"k": 2, "g": 0, "x": 2.0, "d": None}])
    _totals(table)
    after = totals_text.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 1
    assert pa.types.is_decimal(views.totals(table, sum=["d"]).arrow().schema.field("sum_d").type)


def test_a_read_database_keeps_parquet_footers_and_still_reads_new_files(tmp_path: Path) -> None:
    """Data files are never rewritten under their name: footers are kept between reads, and a
    file written after the first read is read all the same."""
    sessions = ReadSessions()
    con = sessions.cursor()
    [(kept,)] = con.sql("SELECT current_setting('parquet_metadata_cache')").fetchall()
    assert kept is True
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key=["k"])
    table.insert([{"k": 1, "g": 0, "x": 1.0, "d": None}])
    assert views.visible(table).fetchall() == [(1, 0, 1.0, None)]
    table.insert([{"k": 2, "g": 0, "x": 2.0, "d": None}])
    assert sorted(views.visible(table).fetchall()) == [(1, 0, 1.0, None), (2, 0, 2.0, None)]
    sessions.close()
