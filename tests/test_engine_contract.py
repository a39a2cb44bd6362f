"""The engine contract (``ledger.engines.base.Engine``) as every engine keeps it: engines are
picked by name, and each of the five operations gives the rows its documentation promises
(local and S3 tables), on DuckDB and on Spark (where PySpark and the jars are installed)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from sqlglot import exp, select

import ledger
from ledger.changes import change_set
from ledger.engines import ENGINES, engine_named
from ledger.engines.base import Engine, RewriteJob, WriteTarget
from ledger.engines.duckdb.session import connect
from ledger.sql.names import COMMIT_VERSION, DML_TYPE, ENTRIES, TRX_ID
from ledger.writer import file_schema


@pytest.fixture(
    params=["duckdb", pytest.param("spark", marks=pytest.mark.spark)], ids=lambda n: str(n)
)
def engine_and_session(request: pytest.FixtureRequest) -> Iterator[tuple[Engine[Any, Any], Any]]:
    """An engine of the registry and a session of it (Spark's is the run's one session)."""
    if request.param == "spark":
        pytest.importorskip("pyspark")
        yield engine_named("spark"), request.getfixturevalue("spark")
        return
    with closing(connect()) as con:
        yield engine_named("duckdb"), con


def _arrow(relation: Any) -> Any:
    """A DuckDB relation's or a DataFrame's rows as an Arrow table."""
    if hasattr(relation, "to_arrow_table"):
        return relation.to_arrow_table()
    from ledger.engines.spark.session import to_arrow

    return to_arrow(relation)


def _name(relation: Any, name: str) -> None:
    """Make ``relation`` readable as ``name`` in its session's SQL."""
    if hasattr(relation, "create_view"):
        relation.create_view(name)
    else:
        relation.createOrReplaceTempView(name)


@pytest.fixture
def table(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("t", {"k": "BIGINT", "v": "VARCHAR"}, primary_key="k")
    table.insert([{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])  # version 1
    table.update([{"k": 1, "v": "c"}])  # version 2: a delete mark and an insertion
    return table


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    """The (k, v, dml_type) of a relation's rows, sorted."""
    rows = _arrow(relation).select(["k", "v", DML_TYPE]).to_pylist()
    return sorted(tuple(row.values()) for row in rows)


ENTRIES_OF_TABLE = [(1, "a", -1), (1, "a", 1), (1, "c", 1), (2, "b", 1)]


def test_engines_are_picked_by_name() -> None:
    assert {"duckdb", "spark"} <= set(ENGINES)
    assert engine_named("duckdb").name == "duckdb"
    with pytest.raises(ledger.InvalidArgumentError, match="unknown engine 'oracle'"):
        engine_named("oracle")


def test_scan_gives_every_entry_of_the_files_with_the_schema(
    table: ledger.Table, engine_and_session: tuple[Engine[Any, Any], Any]
) -> None:
    engine, session = engine_and_session
    snap = table.snapshot()
    schema = file_schema(snap.state.schema, snap.state.config)
    scanned = engine.scan(session, snap.store, snap.prefix, snap.markers(), schema)
    assert _arrow(scanned).schema == schema
    assert _rows(scanned) == ENTRIES_OF_TABLE
    empty = _arrow(engine.scan(session, snap.store, snap.prefix, [], schema))
    assert empty.num_rows == 0
    assert empty.schema == schema


def test_run_renders_a_tree_in_the_engines_dialect(
    table: ledger.Table, engine_and_session: tuple[Engine[Any, Any], Any]
) -> None:
    engine, session = engine_and_session
    snap = table.snapshot()
    schema = file_schema(snap.state.schema, snap.state.config)
    _name(engine.scan(session, snap.store, snap.prefix, snap.markers(), schema), "seen")
    tree = (
        select(exp.alias_(exp.func("sum", exp.column(DML_TYPE, quoted=True)), "net"))
        .from_("seen")
        .where(exp.column("k").eq(1))
    )
    assert _arrow(engine.run(session, tree)).to_pylist() == [{"net": 1}]


def _rewrite_job(table: ledger.Table, sql: str) -> RewriteJob:
    snap = table.snapshot()
    state = snap.state
    return RewriteJob(
        target=WriteTarget(snap.store, snap.prefix, state.schema, state.config),
        partition={},
        files=tuple(snap.markers()),
        sql=sql,
        group_columns=tuple(state.config.key_columns),
        file_rows=1 << 20,
        row_group_rows=1 << 16,
    )


def test_rewrite_files_writes_the_query_result_sorted_without_committing(
    table: ledger.Table, engine_and_session: tuple[Engine[Any, Any], Any]
) -> None:
    engine, session = engine_and_session
    snap = table.snapshot()
    schema = file_schema(snap.state.schema, snap.state.config)
    markers = engine.rewrite_files(
        session, _rewrite_job(table, f"SELECT * FROM {ENTRIES} WHERE v <> 'a'")
    )
    assert sum(m.rows for m in markers) == 2
    written = _arrow(engine.scan(session, snap.store, snap.prefix, markers, schema))
    assert written.schema == schema
    assert sorted(written.select(["k", "v"]).to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "c"},
        {"k": 2, "v": "b"},
    ]
    assert table.refresh().version == snap.version  # nothing committed
    with pytest.raises((*engine.query_errors, ledger.LedgerError)):
        engine.rewrite_files(session, _rewrite_job(table, "SELECT nope FROM entries"))


def test_write_entries_writes_files_without_committing(
    table: ledger.Table, engine_and_session: tuple[Engine[Any, Any], Any]
) -> None:
    engine, session = engine_and_session
    snap = table.snapshot()
    state = snap.state
    schema = file_schema(state.schema, state.config)
    target = WriteTarget(snap.store, snap.prefix, state.schema, state.config)
    entries = engine.scan(session, snap.store, snap.prefix, snap.markers(), schema)
    markers = engine.write_entries(session, entries, target)
    assert sum(m.rows for m in markers) == len(ENTRIES_OF_TABLE)
    assert _rows(engine.scan(session, snap.store, snap.prefix, markers, schema)) == (
        ENTRIES_OF_TABLE
    )
    assert table.refresh().version == snap.version  # nothing committed


def test_change_entries_stamp_each_entry_with_its_commit(
    table: ledger.Table, engine_and_session: tuple[Engine[Any, Any], Any]
) -> None:
    engine, session = engine_and_session
    found = change_set(table, 1)
    snap = table.snapshot(found.until)
    schema = file_schema(snap.state.schema, snap.state.config)
    rows = _arrow(engine.change_entries(session, snap.store, snap.prefix, found, schema))
    assert sorted(zip(rows["v"].to_pylist(), rows[DML_TYPE].to_pylist(), strict=True)) == [
        ("a", -1),
        ("c", 1),
    ]
    assert set(rows[COMMIT_VERSION].to_pylist()) == {2}
    assert len(set(rows[TRX_ID].to_pylist())) == 1
