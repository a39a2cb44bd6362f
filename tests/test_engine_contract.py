"""The engine contract (``ledger.engines.base.Engine``) as the DuckDB engine keeps it: engines
are picked by name, and each of the five operations gives the rows its documentation promises
(local and S3 tables)."""

from __future__ import annotations

from contextlib import closing
from typing import Any

import pytest
from sqlglot import exp, select

import ledger
from ledger.changes import change_set
from ledger.engines import ENGINES, engine_named
from ledger.engines.duckdb.session import connect
from ledger.partitioning import PartitionSpec
from ledger.sql.names import COMMIT_VERSION, DML_TYPE, ENTRIES, TRX_ID
from ledger.writer import DataWriter, file_schema, sort_columns


@pytest.fixture
def table(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("t", {"k": "BIGINT", "v": "VARCHAR"}, primary_key="k")
    table.insert([{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])  # version 1
    table.update([{"k": 1, "v": "c"}])  # version 2: a delete mark and an insertion
    return table


def _rows(relation: Any) -> list[tuple[Any, ...]]:
    """The (k, v, dml_type) of a relation's rows, sorted."""
    rows = relation.to_arrow_table().select(["k", "v", DML_TYPE]).to_pylist()
    return sorted(tuple(row.values()) for row in rows)


ENTRIES_OF_TABLE = [(1, "a", -1), (1, "a", 1), (1, "c", 1), (2, "b", 1)]


def test_engines_are_picked_by_name() -> None:
    assert "duckdb" in ENGINES
    assert engine_named("duckdb").name == "duckdb"
    with pytest.raises(ledger.InvalidArgumentError, match="unknown engine 'oracle'"):
        engine_named("oracle")


def test_scan_gives_every_entry_of_the_files_with_the_schema(table: ledger.Table) -> None:
    engine = engine_named("duckdb")
    snap = table.snapshot()
    schema = file_schema(snap.state.schema, snap.state.config)
    with closing(connect()) as con:
        scanned = engine.scan(con, snap.store, snap.prefix, snap.markers(), schema)
        assert scanned.to_arrow_table().schema == schema
        assert _rows(scanned) == ENTRIES_OF_TABLE
        empty = engine.scan(con, snap.store, snap.prefix, [], schema).to_arrow_table()
        assert empty.num_rows == 0
        assert empty.schema == schema


def test_run_renders_a_tree_in_the_engines_dialect(table: ledger.Table) -> None:
    engine = engine_named("duckdb")
    snap = table.snapshot()
    schema = file_schema(snap.state.schema, snap.state.config)
    with closing(connect()) as con:
        engine.scan(con, snap.store, snap.prefix, snap.markers(), schema).create_view("seen")
        tree = (
            select(exp.alias_(exp.func("sum", exp.column(DML_TYPE, quoted=True)), "net"))
            .from_("seen")
            .where(exp.column("k").eq(1))
        )
        assert engine.run(con, tree).fetchall() == [(1,)]


def test_rewrite_files_streams_the_query_result_sorted(table: ledger.Table) -> None:
    engine = engine_named("duckdb")
    snap = table.snapshot()
    schema = file_schema(snap.state.schema, snap.state.config)
    sql = f"SELECT * FROM {ENTRIES} WHERE v <> 'a'"
    order = sort_columns(snap.state.config)
    with engine.rewrite_files(snap.store, snap.prefix, snap.markers(), schema, sql, order, 1) as r:
        result = r.read_all()
    assert result.schema == schema
    assert result.select(["k", "v"]).to_pylist() == [{"k": 1, "v": "c"}, {"k": 2, "v": "b"}]
    with (
        pytest.raises(engine.query_errors),
        engine.rewrite_files(
            snap.store, snap.prefix, snap.markers(), schema, "SELECT nope FROM entries", order, 1
        ),
    ):
        pass


def test_write_entries_writes_files_without_committing(table: ledger.Table) -> None:
    engine = engine_named("duckdb")
    snap = table.snapshot()
    state = snap.state
    schema = file_schema(state.schema, state.config)
    spec = PartitionSpec.parse(list(state.config.partition_by), state.schema)
    writer = DataWriter(snap.store, snap.prefix, state.schema, state.config, spec)
    with closing(connect()) as con:
        entries = engine.scan(con, snap.store, snap.prefix, snap.markers(), schema)
        markers = engine.write_entries(entries, writer)
        assert sum(m.rows for m in markers) == len(ENTRIES_OF_TABLE)
        assert _rows(engine.scan(con, snap.store, snap.prefix, markers, schema)) == (
            ENTRIES_OF_TABLE
        )
    assert table.refresh().version == snap.version  # nothing committed


def test_change_entries_stamp_each_entry_with_its_commit(table: ledger.Table) -> None:
    engine = engine_named("duckdb")
    found = change_set(table, 1)
    snap = table.snapshot(found.until)
    schema = file_schema(snap.state.schema, snap.state.config)
    with closing(connect()) as con:
        changed = engine.change_entries(con, snap.store, snap.prefix, found, schema)
        rows = changed.to_arrow_table()
    assert sorted(zip(rows["v"].to_pylist(), rows[DML_TYPE].to_pylist(), strict=True)) == [
        ("a", -1),
        ("c", 1),
    ]
    assert set(rows[COMMIT_VERSION].to_pylist()) == {2}
    assert len(set(rows[TRX_ID].to_pylist())) == 1
