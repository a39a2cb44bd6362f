"""SQL a user wrote that binds but fails on the rows it runs over (a cast of text that is no
number, a bad regular expression, a division by zero) raises a typed error naming what was
written, with the engine's reason inside, and writes nothing: predicates of every read, delete,
drop and rewrite, and the queries of custom merges and rewrites (docs/concepts.md). ``error()``,
which fails on purpose, is refused before it runs, as Spark's ``raise_error``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import (
    InsertTransformError,
    InvalidArgumentError,
    InvalidPredicateError,
    LedgerError,
    SchemaError,
    TypeMismatchError,
)
from tests.conftest import Location, examples
from tests.support.scratch import scratch_dir

# Each binds over the table's columns and fails on its rows (reason as DuckDB words it).
FAILING_PREDICATES = {
    "s::INTEGER = 10": "Could not convert string",
    "regexp_matches(s, '(')": "missing \\)",
    "k // 0 = 1": "Division by zero",
    "(k + 9223372036854775807) % 7 = 1": "Overflow",
}
# The same failures over the partition fields (their values are text).
FAILING_PARTITION_PREDICATES = {
    "d::INTEGER = 10": "Could not convert string",
    "regexp_matches(d, '(')": "missing \\)",
}
ROWS = [{"k": 1, "s": "a", "d": "x"}, {"k": 2, "s": "10", "d": "y"}]
SCHEMA = {"k": "BIGINT", "s": "VARCHAR", "d": "VARCHAR"}


def _table(warehouse: ledger.Warehouse, name: str, **options: Any) -> ledger.Table:
    table = warehouse.create_table(name, SCHEMA, primary_key="k", partition_by="d", **options)
    table.insert(ROWS[:1])
    table.insert(ROWS[1:])
    return table


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*.parquet")}


ROW_READS = {
    "to_arrow": lambda t, w: t.to_arrow(where=w),
    "to_pandas": lambda t, w: t.to_pandas(where=w),
    "to_polars": lambda t, w: t.to_polars(where=w),
    "views.rows": lambda t, w: views.rows(t, where=w),
    "views.rows by partition": lambda t, w: views.rows(t, where=w, partitions={"d": "x"}),
    "delete_where": lambda t, w: t.delete_where(w),
    "transaction delete_where": lambda t, w: _in_transaction(t, w),
}


def _in_transaction(table: ledger.Table, predicate: str) -> None:
    with table.transaction() as trx:
        trx.delete_where(predicate)


PARTITION_CHOICES = {
    "drop_partitions": lambda t, w: t.drop_partitions(where=w),
    "rewrite_partitions": lambda t, w: t.rewrite_partitions(
        where=w, sql="SELECT * FROM entries WHERE k <> 1"
    ),
}


@settings(max_examples=examples(12))
@given(
    read=st.sampled_from(sorted(ROW_READS)),
    predicate=st.sampled_from(sorted(FAILING_PREDICATES)),
)
def test_a_predicate_failing_on_the_rows_is_an_invalid_predicate(read: str, predicate: str) -> None:
    with scratch_dir("sql-failures-") as folder:
        root = Path(folder)
        table = _table(ledger.connect(folder), "t")
        before = (table.refresh().version, _files(root))
        with pytest.raises(InvalidPredicateError, match=FAILING_PREDICATES[predicate]) as raised:
            ROW_READS[read](table, predicate)
        assert repr(predicate) in str(raised.value) or predicate in str(raised.value)
        assert isinstance(raised.value.__cause__, duckdb.Error)  # the engine's error inside
        assert (table.refresh().version, _files(root)) == before
        assert sorted(table.to_arrow().column("k").to_pylist()) == [1, 2]


@settings(max_examples=examples(6))
@given(
    operation=st.sampled_from(sorted(PARTITION_CHOICES)),
    predicate=st.sampled_from(sorted(FAILING_PARTITION_PREDICATES)),
)
def test_a_partition_predicate_failing_on_the_values_is_an_invalid_predicate(
    operation: str, predicate: str
) -> None:
    with scratch_dir("sql-failures-") as folder:
        root = Path(folder)
        table = _table(ledger.connect(folder), "t")
        before = (table.refresh().version, _files(root))
        with pytest.raises(InvalidPredicateError, match=FAILING_PARTITION_PREDICATES[predicate]):
            PARTITION_CHOICES[operation](table, predicate)
        assert (table.refresh().version, _files(root)) == before


def test_totals_with_a_failing_predicate_fail_when_fetched(local_location: Location) -> None:
    """``views.totals`` hands back a lazy relation: the engine raises its own error when it is
    fetched (docs/views.md), never a wrong total."""
    table = _table(local_location.connect(), "t")
    relation = views.totals(table, where="s::INTEGER = 10")
    with pytest.raises(duckdb.Error, match="Could not convert string"):
        relation.fetchall()


# Queries binding over `entries` that fail on them, with the error they raise.
FAILING_QUERIES: dict[str, tuple[type[LedgerError], str]] = {
    "SELECT * REPLACE (k // 0 AS k) FROM entries": (InvalidArgumentError, "Division by zero"),
    "SELECT * REPLACE (CAST(s AS INTEGER)::VARCHAR AS s) FROM entries": (
        TypeMismatchError,
        "column 's'.*Could not convert string",
    ),
    "SELECT * REPLACE (k + 9223372036854775807 AS k) FROM entries": (
        TypeMismatchError,
        "cannot hold.*Overflow",
    ),
    "SELECT * FROM entries WHERE regexp_matches(s, '(')": (InvalidArgumentError, "missing"),
}


@pytest.mark.parametrize("sql", sorted(FAILING_QUERIES))
@pytest.mark.parametrize("operation", ["merge", "rewrite"])
def test_a_query_failing_on_the_entries_is_a_typed_error(
    local_location: Location, sql: str, operation: str
) -> None:
    warehouse = local_location.connect()
    error, reason = FAILING_QUERIES[sql]
    if operation == "merge":
        table = _table(warehouse, "t", policy={"name": "custom", "sql": sql})
        table.insert([{"k": 3, "s": "b", "d": "x"}])
        run = table.merge
    else:
        table = _table(warehouse, "t")
        run = lambda: table.rewrite_partitions(where="d = 'x'", sql=sql)  # noqa: E731
    root = Path(local_location.uri)
    before = (table.refresh().version, _files(root))
    with pytest.raises(error, match=reason) as raised:
        run()
    assert "nothing was committed" in str(raised.value)
    assert (table.refresh().version, _files(root)) == before


# Custom merge queries: some keep, cancel or drop entries, others repeat, add or negate them.
MERGE_QUERIES = [
    "SELECT * FROM entries",
    "SELECT * FROM entries UNION ALL SELECT * FROM entries",
    "SELECT * FROM entries UNION ALL SELECT * FROM entries WHERE k % 2 = 0",
    "SELECT * FROM entries WHERE k % 3 <> 0",
    "SELECT * REPLACE (upper(s) AS s) FROM entries",
    "SELECT * REPLACE (-dml_type AS dml_type) FROM entries WHERE k % 2 = 0",
    "SELECT * REPLACE (CASE WHEN k = 1 THEN -1 ELSE dml_type END AS dml_type) FROM entries",
    # the latest entry of each key: cancels insertions with their marks, drops repeated ones
    "SELECT * FROM entries QUALIFY row_number() OVER "
    "(PARTITION BY k ORDER BY trx_id DESC, trx_seq DESC) = 1",
]


@settings(max_examples=examples(10))
@given(
    sql=st.sampled_from(MERGE_QUERIES),
    writes=st.lists(
        st.tuples(st.sampled_from(["insert", "upsert", "delete"]), st.integers(0, 4)),
        min_size=2,
        max_size=6,
    ),
)
def test_a_custom_merge_adding_entries_is_refused(sql: str, writes: list[tuple[str, int]]) -> None:
    """The oracle runs the query over the raw entries: a merge whose result holds more
    insertions or more delete marks than its input is refused and commits nothing."""
    with scratch_dir("sign-sums-") as folder:
        root = Path(folder)
        table = ledger.connect(folder).create_table(
            "t", SCHEMA, primary_key="k", policy={"name": "custom", "sql": sql}
        )
        for kind, key in writes:
            if kind == "delete":
                table.delete([key])
            else:
                getattr(table, kind)([{"k": key, "s": f"v{key}", "d": "x"}])
        if len(table.files()) < 2:
            return  # nothing to merge
        signs = (
            "SELECT coalesce(count_if(dml_type = 1), 0), coalesce(count_if(dml_type = -1), 0) FROM"
        )
        with duckdb.connect() as con:
            con.register("entries", table.scan().to_arrow_table())
            before = con.sql(f"{signs} entries").fetchall()[0]
            after = con.sql(f"{signs} ({sql})").fetchall()[0]
        count, version, files = table.count(), table.refresh().version, _files(root)
        if after[0] <= before[0] and after[1] <= before[1]:
            table.merge()
            if after == before:
                assert table.count() == count
        else:
            with pytest.raises(SchemaError, match="never repeat, add or negate"):
                table.merge()
            assert (table.count(), table.refresh().version, _files(root)) == (
                count,
                version,
                files,
            )


@pytest.mark.parametrize("predicate", sorted(FAILING_PREDICATES))
def test_the_cli_names_a_predicate_failing_on_the_rows(tmp_path: Path, predicate: str) -> None:
    from tests.test_cli import run_ledger

    _table(ledger.connect(str(tmp_path / "wh")), "t")
    shown = run_ledger("-w", "wh", "show", "t", "--where", predicate, cwd=tmp_path, expect=1)
    assert "InvalidPredicateError" in shown.stderr and predicate in shown.stderr


@pytest.mark.parametrize(
    "transform",
    [
        "SELECT * REPLACE (CAST(s AS INTEGER)::VARCHAR AS s) FROM rows",
        "SELECT * REPLACE (k // 0 AS k) FROM rows",
    ],
)
def test_an_insert_transform_failing_on_the_rows_is_an_insert_transform_error(
    local_location: Location, transform: str
) -> None:
    table = local_location.connect().create_table(
        "t", SCHEMA, primary_key="k", insert_transform=transform
    )
    with pytest.raises(InsertTransformError, match="failed on the rows written") as raised:
        table.insert(ROWS)
    assert isinstance(raised.value.__cause__, duckdb.Error)
    assert table.refresh().version == 0


def test_error_which_fails_on_purpose_is_refused_before_it_runs(local_location: Location) -> None:
    warehouse = local_location.connect()
    table = _table(warehouse, "t")
    with pytest.raises(ledger.UnsafeSqlError, match=r"error\(\)"):
        views.rows(table, where="error('boom') IS NULL")
    with pytest.raises(ledger.UnsafeSqlError, match=r"error\(\)"):
        table.set_insert_transform("SELECT * FROM rows WHERE error('x') IS NULL")
    with pytest.raises(ledger.UnsafeSqlError, match=r"error\(\)"):
        _table(
            warehouse,
            "u",
            policy={"name": "custom", "sql": "SELECT * FROM entries WHERE error('x') IS NULL"},
        )
    assert table.refresh().version == 2  # its two inserts, nothing more
