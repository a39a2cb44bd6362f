"""The visible view of small tables (ledger/reads/visible.py, below ``SMALL_TABLE_ENTRIES``:
every file not read as it is goes through the plain tree, its entries read once into memory;
below ``GROUPED_TABLE_ENTRIES`` every entry goes through the per-tuple cancellation, single
keys too) against each other, the plans of large tables (lonely files apart) and the plain
tree over every entry, on
random ledgers: overlapping and disjoint key ranges, blind duplicate insertions, hand-written
marks (of the latest insertion's values, of absent rows, NaN and signed zeros), NULL values,
read-modify-writes, a column added later, partitions and every built-in policy. ``rows`` (one
statement with its columns and filter) is checked against the relation filtered in Python.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.engines.duckdb.session import connect
from ledger.errors import UnmatchedDeleteMarkError
from ledger.reads import visible as visible_reads
from tests.conftest import examples
from tests.test_visible_files import POLICIES, plain_visible
from tests.test_visible_latest_insertions import _batch, _comparable, _marks

# Examples per case in the everyday run (each case of the family is drawn afresh); `make
# test-deep` runs hundreds.
SETTINGS = settings(max_examples=examples(6), deadline=None)


@contextmanager
def _small_below(entries: int) -> Iterator[None]:
    kept = visible_reads.SMALL_TABLE_ENTRIES
    visible_reads.SMALL_TABLE_ENTRIES = entries
    try:
        yield
    finally:
        visible_reads.SMALL_TABLE_ENTRIES = kept


@contextmanager
def _grouped_below(entries: int) -> Iterator[None]:
    kept = visible_reads.GROUPED_TABLE_ENTRIES
    visible_reads.GROUPED_TABLE_ENTRIES = entries
    try:
        yield
    finally:
        visible_reads.GROUPED_TABLE_ENTRIES = kept


def _read(snap: ledger.Snapshot, system_columns: bool) -> list[tuple[Any, ...]]:
    with closing(connect()) as con:
        return visible_reads.visible(snap, con, system_columns=system_columns).fetchall()


def _write(data: st.DataObject, table: ledger.Table, policy: str, columns: list[str]) -> None:
    kind = data.draw(
        st.sampled_from(["insert", "blind", "marks", "upsert", "delete", "add column"]),
        label="write",
    )
    if kind in ("insert", "blind", "add column"):
        rows = _batch(data, kind, repeats=kind == "blind")
        # Aggregating tables refuse a column without a merge function.
        adding = kind == "add column" and "w" not in columns and policy != "aggregating"
        if adding:
            rows = [{**r, "w": i} for i, r in enumerate(rows)]
            columns.append("w")
        table.insert(rows, evolve_schema=adding)
    elif kind == "marks" and policy != "aggregating":
        with contextlib.suppress(UnmatchedDeleteMarkError):  # refused, nothing written
            table.append_entries(_marks(data, table, columns))
    elif kind == "upsert":
        table.upsert(_batch(data, kind, repeats=False))
    elif kind == "delete":
        table.delete([(r["k"],) for r in _batch(data, kind, repeats=False)])


@pytest.mark.parametrize("policy", list(POLICIES))
@SETTINGS
@given(data=st.data())
def test_small_tables_read_as_large_ones_and_as_the_plain_tree(
    policy: str, data: st.DataObject
) -> None:
    partitioned = data.draw(st.booleans(), label="partitioned")
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t",
            {"k": "BIGINT", "v": "DOUBLE", "n": "BIGINT", "p": "INTEGER"},
            primary_key=["k"],
            policy=POLICIES[policy],
            partition_by=["p"] if partitioned else None,
        )
        columns = ["k", "v", "n", "p"]
        for _ in range(data.draw(st.integers(2, 7), label="writes")):
            _write(data, table, policy, columns)
        snap = table.snapshot()
        system_columns = data.draw(st.booleans(), label="system columns")
        grouped = _comparable(_read(snap, system_columns))
        with _grouped_below(0):
            small = _comparable(_read(snap, system_columns))
        with _small_below(0):
            large = _comparable(_read(snap, system_columns))
        assert grouped == small == large
        assert small == _comparable(plain_visible(snap, system_columns))

        # rows: the columns and the filter inside the one statement.
        chosen = data.draw(st.permutations(columns), label="columns")[
            : data.draw(st.integers(1, len(columns)), label="how many")
        ]
        everything = views_rows(snap, None, None)
        assert _comparable(everything) == _comparable(_read(snap, False))
        condition = "v > 0 OR n IS NULL"
        with closing(connect()) as con:
            relation = visible_reads.visible(snap, con).filter(condition)
            want = relation.project(", ".join(f'"{c}"' for c in chosen)).fetchall()
        assert _comparable(views_rows(snap, condition, chosen)) == _comparable(want)


def views_rows(
    snap: ledger.Snapshot, where: str | None, columns: list[str] | None
) -> list[tuple[Any, ...]]:
    table = visible_reads.rows(snap, where=where, columns=columns)
    return [tuple(row.values()) for row in table.to_pylist()]


def test_a_small_table_reads_every_file_once_with_its_marks() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t", {"k": "BIGINT", "v": "DOUBLE"}, primary_key=["k"]
        )
        table.insert([{"k": k, "v": 1.0} for k in range(0, 10, 2)])
        table.insert([{"k": k, "v": 1.0} for k in range(1, 10, 2)])
        table.update([{"k": 3, "v": 2.0}, {"k": 4, "v": -0.0}])
        table.delete([(5,)])
        snap = table.snapshot()
        with closing(connect()) as con:
            text = visible_reads.visible(snap, con).sql_query()
        # Every entry grouped at once: no crowded keys found first, the files named once.
        assert "__ledger_lonely" not in text and "__ledger_crowded" not in text
        assert "AS NOT MATERIALIZED" in text
        with _grouped_below(0), closing(connect()) as con:
            text = visible_reads.visible(snap, con).sql_query()
        assert "__ledger_lonely" not in text and "AS MATERIALIZED" in text
        want = [(k, 2.0 if k == 3 else -0.0 if k == 4 else 1.0) for k in range(10) if k != 5]
        assert _comparable(_read(snap, False)) == _comparable(want)
        with _grouped_below(0):
            assert _comparable(_read(snap, False)) == _comparable(want)
        with _small_below(0):
            assert _comparable(_read(snap, False)) == _comparable(want)
