"""Totals lightened by what the files' statistics prove, checked against an in-place oracle.

Where every file's statistics prove a measured column holds no NULL, ``views.totals`` counts its
non-NULL values as the count itself (no test per entry); where the statistics of every file
holding delete marks prove an integer column never holds its type's smallest value, the column
is weighed by ``dml_type`` in its own type instead of being widened to ``HUGEINT`` first. Both
must give exactly the answer of plain SQL over a table updated in place, whichever plan the
size thresholds pick (each crossed by one entry), with NULLs, NaN and infinities, the smallest
BIGINT and INTEGER, DECIMALs near their limit, blind duplicates of a key, refused marks of
absent rows, partitions, and on every merge policy (tests/test_totals_plans.py compares every
policy's plans with the plan that ignores statistics).
"""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.engines.duckdb import scan
from ledger.errors import UnmatchedDeleteMarkError
from ledger.reads import totals as total_reads
from ledger.reads.files import insertions_only
from tests.conftest import examples
from tests.support.scratch import scratch_dir
from tests.support.view_oracle import InPlaceTable, assert_same_rows

SCHEMA = {
    "k": "BIGINT",
    "g": "VARCHAR",
    "x": "BIGINT",
    "i": "INTEGER",
    "d": "DOUBLE",
    "m": "DECIMAL(18,2)",
}
BIGINT_MIN = -(2**63)
INTEGER_MIN = -(2**31)
DECIMAL_NEAR_LIMIT = Decimal("9999999999999999.99")

# Each example draws the values a column may take from one pool: pools without NULL and without
# the type's smallest value are the ones whose statistics prove something.
POOLS: dict[str, list[list[Any]]] = {
    "g": [["a", "b"], [None, "a"]],
    "x": [[-3, 0, 5], [None, -3, 5], [BIGINT_MIN, 5], [BIGINT_MIN + 1, 2**63 - 1]],
    "i": [[-7, 4], [None, 4], [INTEGER_MIN, 4]],
    "d": [[0.5, -2.25, 1024.0], [None, 0.5], [math.nan, math.inf, -math.inf, 0.5]],
    "m": [[Decimal("0.10"), Decimal("-2.50")], [None, DECIMAL_NEAR_LIMIT, -DECIMAL_NEAR_LIMIT]],
}
REQUESTS = st.fixed_dictionaries(
    {
        "by": st.sampled_from([(), ("g",), ("i",)]),
        "sums": st.lists(st.sampled_from(["x", "i", "d", "m"]), unique=True),
        "avgs": st.lists(st.sampled_from(["x", "i", "d", "m"]), unique=True),
        "where": st.sampled_from([None, "x > 0", "g = 'a'"]),
    }
)


@st.composite
def ledgers(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Writes: blind inserts (keys may repeat), upserts, deletes and marks of absent rows."""
    pools = {column: draw(st.sampled_from(choices)) for column, choices in POOLS.items()}
    row = st.fixed_dictionaries(
        {"k": st.integers(0, 5), **{c: st.sampled_from(pool) for c, pool in pools.items()}}
    )
    rows = st.lists(row, min_size=1, max_size=4)
    operation = st.one_of(
        st.tuples(st.just("insert"), rows),
        st.tuples(st.just("upsert"), rows),
        st.tuples(st.just("delete"), st.lists(st.integers(0, 5), min_size=1, max_size=2)),
        st.tuples(st.just("absent_mark"), row),
    )
    return [("insert", draw(rows)), *draw(st.lists(operation, max_size=5))]


def _apply(table: ledger.Table, oracle: InPlaceTable, operation: tuple[str, Any]) -> None:
    action, argument = operation
    if action == "insert":
        table.insert(argument)
        oracle.insert(argument)
    elif action == "upsert":
        unique = list({row["k"]: row for row in argument}.values())
        table.upsert(unique)
        oracle.replace(unique)
    elif action == "delete":
        keys = list(dict.fromkeys(argument))
        table.delete(keys)
        oracle.delete([(k,) for k in keys])
    else:
        mark = {**argument, "k": 100 + argument["k"]}  # no such key was ever written
        with pytest.raises(UnmatchedDeleteMarkError):
            entries = ARROW.append(pa.field("dml_type", pa.int8()))
            table.append_entries(pa.Table.from_pylist([{**mark, "dml_type": -1}], entries))


ARROW = pa.schema(
    [
        ("k", pa.int64()),
        ("g", pa.string()),
        ("x", pa.int64()),
        ("i", pa.int32()),
        ("d", pa.float64()),
        ("m", pa.decimal128(18, 2)),
    ]
)


def _thresholds(table: ledger.Table) -> list[dict[str, int]]:
    """Every size threshold just below, at and just above what the snapshot holds."""
    markers = table.snapshot().markers()
    plain = sum(m.rows for m in markers if insertions_only(m))
    entries = sum(m.rows for m in markers)
    return [
        {
            "SPLIT_FROM_ENTRIES": plain + step,
            "SIGNS_GROUPED_FROM_ENTRIES": entries + step,
            "GROUPED_BY_NAME_FROM_ENTRIES": entries + step,
        }
        for step in (-1, 0, 1)
    ]


@settings(max_examples=examples(15), deadline=None)
@given(operations=ledgers(), requests=st.lists(REQUESTS, min_size=1, max_size=3))
def test_totals_with_statistics_answer_as_plain_sql_over_rows_updated_in_place(
    operations: list[tuple[str, Any]], requests: list[dict[str, Any]]
) -> None:
    with scratch_dir("totals-statistics-") as folder:
        table = ledger.connect(folder).create_table(
            "t", SCHEMA, primary_key="k", partition_by="bucket(2, k)"
        )
        oracle = InPlaceTable(ARROW, ["k"])
        for operation in operations:
            _apply(table, oracle, operation)
        for request in requests:
            want = oracle.totals(
                request["by"], request["sums"], request["avgs"], where=request["where"]
            )
            for thresholds in _thresholds(table):
                with mock.patch.multiple(total_reads, **thresholds):
                    got = views.totals(
                        table,
                        by=list(request["by"]) or None,
                        sum=request["sums"],
                        avg=request["avgs"],
                        where=request["where"],
                    ).fetchall()
                assert_same_rows(got, want, len(request["by"]), f"{request} {thresholds}")


CANCELLED_REQUESTS = st.fixed_dictionaries(
    {
        "sums": st.lists(st.sampled_from(["x", "i", "d", "m"]), unique=True, min_size=1),
        "avgs": st.lists(st.sampled_from(["x", "i", "d", "m"]), unique=True),
        "where": st.sampled_from([None, "x > 100"]),
    }
)


@pytest.mark.parametrize("by", [(), ("g",)])
@pytest.mark.parametrize("kept", [0, 1])
@settings(max_examples=examples(5), deadline=None)
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "k": st.integers(0, 5),
                "g": st.sampled_from(["a", "b"]),
                "x": st.integers(-3, 5),
                "i": st.integers(-7, 4),
                "d": st.sampled_from([0.5, -2.25, 0.0]),
                "m": st.sampled_from([Decimal("0.10"), Decimal("-2.50")]),
            }
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda row: row["k"],
    ),
    request=CANCELLED_REQUESTS,
)
def test_totals_of_rows_without_nulls_that_all_cancel_answer_as_plain_sql(
    by: tuple[str, ...], kept: int, rows: list[dict[str, Any]], request: dict[str, Any]
) -> None:
    """Columns whose files prove them free of NULL count their values as the rows: the sums of
    a grand total whose every entry cancels (or that ``where`` leaves without a visible row)
    are still NULL, and a group whose entries cancel still holds no row."""
    with scratch_dir("totals-cancelled-") as folder:
        table = ledger.connect(folder).create_table("t", SCHEMA, primary_key="k")
        oracle = InPlaceTable(ARROW, ["k"])
        _apply(table, oracle, ("insert", rows))
        _apply(table, oracle, ("delete", [row["k"] for row in rows[kept:]] or [99]))
        want = oracle.totals(by, request["sums"], request["avgs"], where=request["where"])
        got = views.totals(
            table,
            by=list(by) or None,
            sum=request["sums"],
            avg=request["avgs"],
            where=request["where"],
        ).fetchall()
        assert_same_rows(got, want, len(by), f"{by} {request}")


# --- what a footer proves ------------------------------------------------------------------------


def test_a_footer_proves_no_null_and_no_smallest_value_only_from_statistics(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "f.parquet")
    columns = {
        "full": pa.array([1, 2], pa.int64()),
        "holed": pa.array([1, None], pa.int64()),
        "lowest": pa.array([BIGINT_MIN, 2], pa.int64()),
        "lowest32": pa.array([INTEGER_MIN, 2], pa.int32()),
        "small": pa.array([-5, 2], pa.int16()),
        "empty": pa.array([None, None], pa.int64()),
        "unstated": pa.array([1.5, 2.5], pa.float64()),
        "nested": pa.array([{"y": 1}, {"y": 2}]),
        "after": pa.array([3, 4], pa.int64()),
    }
    pq.write_table(
        pa.table(columns), path, write_statistics=[c for c in columns if c != "unstated"]
    )
    footer = scan.file_footer(path)
    assert footer.null_free == {"full", "lowest", "lowest32", "small", "after"}
    assert footer.negatable == {"full", "holed", "small", "empty", "after"}


def test_facts_of_files_hold_only_where_every_file_proves_them(tmp_path: Path) -> None:
    first, second = str(tmp_path / "1.parquet"), str(tmp_path / "2.parquet")
    pq.write_table(pa.table({"a": [1, 2], "b": [3, 4]}), first)
    pq.write_table(pa.table({"a": [1, None], "b": [BIGINT_MIN, 4]}), second)
    assert scan.column_facts([first]) == scan.ColumnFacts(
        frozenset({"a", "b"}), frozenset({"a", "b"})
    )
    assert scan.column_facts([first, second]) == scan.ColumnFacts(
        frozenset({"b"}), frozenset({"a"})
    )
    assert scan.column_facts([]) == scan.ColumnFacts(frozenset(), frozenset())


# --- the statement ------------------------------------------------------------------------------


def _statement(table: ledger.Table, **request: Any) -> str:
    texts: list[str] = []

    def kept(con: Any, text: str, params: Any = None) -> Any:
        texts.append(text)
        return None

    with (
        mock.patch.object(total_reads, "lazy_sql", kept),
        mock.patch.object(total_reads, "answer_relation", kept),
    ):
        views.totals(table, **request)
    [text] = texts
    return text


def test_proven_columns_are_neither_tested_per_entry_nor_widened(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "x": "BIGINT", "y": "BIGINT"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": 5, "y": None}, {"k": 2, "x": 7, "y": 1}])
    table.update([{"k": 1, "x": 6}])
    text = _statement(table, sum=["x", "y"])
    assert 'CAST("x"' not in text and 'WHERE NOT "x" IS NULL' not in text
    assert 'WHERE NOT "y" IS NULL' in text  # y holds a NULL: tested
    assert views.totals(table, sum=["x", "y"], avg="x").fetchall() == [(2, 13, 1, 6.5)]


def test_the_smallest_bigint_in_a_delete_mark_is_widened_and_cancels_exactly(
    tmp_path: Path,
) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "x": "BIGINT", "i": "INTEGER"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": BIGINT_MIN, "i": INTEGER_MIN}, {"k": 2, "x": 3, "i": 1}])
    table.update([{"k": 1, "x": 4, "i": 2}])
    text = _statement(table, sum=["x", "i"])
    assert 'CAST("x" AS INT128)' in text and 'CAST("i" AS INT128)' in text
    assert views.totals(table, sum=["x", "i"]).fetchall() == [(2, 7, 3)]


def test_the_smallest_bigint_in_an_insertion_only_needs_no_widening(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "x": "BIGINT"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": BIGINT_MIN}, {"k": 2, "x": 3}])
    table.update([{"k": 2, "x": 4}])  # the file holding marks holds no smallest value
    assert 'CAST("x"' not in _statement(table, sum="x")
    assert views.totals(table, sum="x").fetchall() == [(2, BIGINT_MIN + 4)]


def test_a_double_is_counted_without_a_test_until_a_file_holds_its_null(tmp_path: Path) -> None:
    """FLOAT and DOUBLE columns have no statistics: each file is read once for its NULLs."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "d": "DOUBLE"}, primary_key="k"
    )
    table.insert([{"k": 1, "d": 1.5}, {"k": 2, "d": math.nan}])
    table.update([{"k": 1, "d": 2.5}])
    assert 'WHERE NOT "d" IS NULL' not in _statement(table, sum="d", avg="d")
    [(count, total, average)] = views.totals(table, sum="d", avg="d").fetchall()
    assert count == 2 and math.isnan(total) and math.isnan(average)
    table.update([{"k": 2, "d": None}])
    assert 'WHERE NOT "d" IS NULL' in _statement(table, sum="d", avg="d")
    assert views.totals(table, sum="d", avg="d").fetchall() == [(2, 2.5, 2.5)]
    table.delete([1])
    assert views.totals(table, sum="d", avg="d").fetchall() == [(1, None, None)]
