"""The collapsing policy's merge query against the plan it replaced.

The query's plan changes for speed (how a group's insertions and marks are put in order), never
its answer: over random entries (repeated keys, identical entries, marks of absent rows, NULL
keys and values, NaN and -0.0, re-inserted values), the current query must return exactly the
entries the reference plan below returns, as a multiset of rows. Merges on local disk run on
child connections of one database per store, so merges at once must keep their entries apart.
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.engines.duckdb.session import connect, read_sessions
from ledger.log.entries import TableConfig
from ledger.schema import TableSchema
from ledger.sql import ident, idents
from ledger.sql.live import negative_zero_flags
from ledger.sql.names import (
    ENTRIES,
    ENTRIES_OF_INSERTION_FILES,
    ENTRIES_OF_MARK_FILES,
    ORDER_SHIFT,
)
from merge_policies import load_policy
from merge_policies.base import ENTRY_ORDER, MergeContext
from tests.conftest import examples

ENTRY_SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("v", pa.int64()),
        ("x", pa.float64()),
        ("trx_id", pa.int64()),
        ("trx_seq", pa.int32()),
        ("dml_type", pa.int8()),
    ]
)
VALUES = ("k", "v", "x")
CONTEXT = MergeContext(
    source=ENTRIES,
    columns=tuple(ENTRY_SCHEMA.names),
    key_columns=("k",),
    value_columns=VALUES,
    covers_every_entry_of_its_keys=True,
    settled_trx_id=None,
)


def reference_sql() -> str:
    """The plan before: each group's entry orders gathered by ordered aggregates."""
    keys, values, columns = ident("k"), idents(list(VALUES)), idents(ENTRY_SCHEMA.names)
    grouped = ", ".join([values, *negative_zero_flags(["x"])])
    dml, trx, seq = ident("dml_type"), ident("trx_id"), ident("trx_seq")
    return f"""
WITH marked_keys AS (SELECT DISTINCT {keys} FROM {ENTRIES} WHERE {dml} = -1),
groups AS (
    SELECT {grouped}, sum({dml}) AS __net,
        list({ENTRY_ORDER} ORDER BY {ENTRY_ORDER} DESC) FILTER (WHERE {dml} = 1) AS __inserts,
        list({ENTRY_ORDER} ORDER BY {ENTRY_ORDER} DESC) FILTER (WHERE {dml} = -1) AS __marks
    FROM (SELECT * FROM {ENTRIES} SEMI JOIN marked_keys USING ({keys}))
    GROUP BY ALL
),
kept AS (
    SELECT {values}, unnest(CASE
        WHEN __net > 0 THEN list_transform(__inserts[1:__net], lambda o: {{'o': o, 'd': 1}})
        WHEN coalesce(__inserts[1] > __marks[1], false) THEN list_concat(
            list_transform(__inserts[1:1], lambda o: {{'o': o, 'd': 1}}),
            list_transform(__marks[1:1 - __net], lambda o: {{'o': o, 'd': -1}}))
        ELSE list_transform(__marks[1:-__net], lambda o: {{'o': o, 'd': -1}})
    END) AS __entry
    FROM groups
    WHERE __net <> 0 OR coalesce(__inserts[1] > __marks[1], false)
)
SELECT {columns} FROM {ENTRIES} ANTI JOIN marked_keys USING ({keys})
UNION ALL
SELECT {values},
    CAST(__entry.o // {ORDER_SHIFT} AS BIGINT) AS {trx},
    CAST(__entry.o % {ORDER_SHIFT} AS INTEGER) AS {seq},
    CAST(__entry.d AS TINYINT) AS {dml}
FROM kept
"""


def current_sql(context: MergeContext = CONTEXT) -> str:
    schema = TableSchema.from_json({"k": "BIGINT", "v": "BIGINT", "x": "DOUBLE"})
    config = TableConfig(table_uuid="plan", primary_key=("k",))
    return load_policy({"name": "collapsing"}, schema, config).merge_sql(context)


# The entries split by file, as the embedded engine offers them (rewrite.register_entries).
SPLIT_CONTEXT = dataclasses.replace(
    CONTEXT, split_sources=(ENTRIES_OF_INSERTION_FILES, ENTRIES_OF_MARK_FILES)
)


def comparable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row with NaN and the sign of zero spelled out (NaN != NaN; -0.0 == 0.0)."""
    return tuple(
        ("nan",)
        if isinstance(value, float) and math.isnan(value)
        else (value, math.copysign(1.0, value))
        if isinstance(value, float)
        else value
        for value in row
    )


def run(
    entries: pa.Table, sql: str, relations: dict[str, pa.Table] | None = None
) -> list[tuple[Any, ...]]:
    with closing(connect()) as con:
        con.register(ENTRIES, entries)
        for name, relation in (relations or {}).items():
            con.register(name, relation)
        return sorted((comparable(r) for r in con.sql(sql).fetchall()), key=repr)


# Few keys and values, so groups of equal values hold several insertions and marks.
entry = st.tuples(
    st.sampled_from([0, 0, 1, None]),  # k (NULL keys too)
    st.sampled_from([0, 0, 1, None]),  # v
    st.sampled_from([0.0, 0.0, -0.0, math.nan, None]),  # x
    st.integers(1, 5),  # trx_id: few, so identical entries occur
    st.integers(0, 2),  # trx_seq
    st.sampled_from([1, 1, -1]),
)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(entry, max_size=40))
def test_collapsing_query_returns_what_the_reference_plan_returns(
    rows: list[tuple[Any, ...]],
) -> None:
    entries = pa.Table.from_pylist(
        [dict(zip(ENTRY_SCHEMA.names, row, strict=True)) for row in rows], schema=ENTRY_SCHEMA
    )
    assert run(entries, current_sql()) == run(entries, reference_sql())


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.tuples(entry, st.integers(0, 3)), max_size=40))
def test_collapsing_query_over_entries_split_by_file_returns_what_the_reference_returns(
    rows_in_files: list[tuple[tuple[Any, ...], int]],
) -> None:
    """Entries spread over up to four files; the files holding delete marks only are read
    apart from the others (read once, no join), the rest as before."""
    files: dict[int, list[dict[str, Any]]] = {}
    for row, file in rows_in_files:
        files.setdefault(file, []).append(dict(zip(ENTRY_SCHEMA.names, row, strict=True)))
    marks_only = [r for f in files.values() if all(e["dml_type"] == -1 for e in f) for r in f]
    with_insertions = [r for f in files.values() if any(e["dml_type"] == 1 for e in f) for r in f]
    everything = pa.Table.from_pylist(with_insertions + marks_only, schema=ENTRY_SCHEMA)
    split = {
        ENTRIES_OF_INSERTION_FILES: pa.Table.from_pylist(with_insertions, schema=ENTRY_SCHEMA),
        ENTRIES_OF_MARK_FILES: pa.Table.from_pylist(marks_only, schema=ENTRY_SCHEMA),
    }
    assert run(everything, current_sql(SPLIT_CONTEXT), split) == run(everything, reference_sql())


def test_the_split_query_reads_the_split_relations() -> None:
    """The property above runs the query reading files apart, not the one reading entries."""
    split = current_sql(SPLIT_CONTEXT)
    assert ENTRIES_OF_MARK_FILES in split and f"FROM {ENTRIES} " not in split


def test_the_reference_plan_differs_from_the_current_one() -> None:
    """The property above compares two plans, not one plan with itself."""
    assert "ORDER BY" in reference_sql() and "ORDER BY" not in current_sql()


def test_merges_of_one_warehouse_in_threads_keep_their_entries_apart(tmp_path: Path) -> None:
    """Merges run on child connections of their store's database: two merges at once, of two
    tables of one warehouse, each read only their own files and leave no view behind."""
    warehouse = ledger.connect(str(tmp_path))
    tables = []
    for number in range(2):
        table = warehouse.create_table(f"t{number}", {"k": "BIGINT", "v": "BIGINT"}, "k")
        for part in range(3):
            table.insert([{"k": k, "v": number} for k in range(part * 50, part * 50 + 50)])
        table.delete([{"k": k} for k in range(0, 150, 3)])
        tables.append(table)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda t: t.merge(min_files=1), tables))
    for number, (table, result) in enumerate(zip(tables, results, strict=True)):
        assert result.entries_out == 100 and len(table.files()) == 1
        assert sorted(views.visible(table).fetchall()) == [(k, number) for k in range(150) if k % 3]
    child = read_sessions(tables[0].store).cursor()
    assert child.sql("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchall() == [(0,)]
