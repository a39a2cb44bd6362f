"""Visible rows settled by each key's latest insertion (ledger/sql/visible.py,
``_live_rows_after_lonely``: lonely files older than every file of marks) against the plain
tree over every entry, on random ledgers: insert batches of overlapping and disjoint key
ranges, blind duplicate insertions, hand-written marks (of the latest insertion's values,
twice the same mark, NaN and signed zeros), read-modify-writes, a column
added later, partitions and every built-in policy.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.engines.duckdb.session import connect
from ledger.errors import UnmatchedDeleteMarkError
from ledger.reads import visible as visible_reads
from tests.conftest import examples
from tests.test_visible_files import POLICIES, plain_visible

# Examples per case in the everyday run (each case of the family is drawn afresh); `make
# test-deep` runs hundreds.
SETTINGS = settings(max_examples=examples(6), deadline=None)
VALUES = st.fixed_dictionaries(
    {
        "v": st.sampled_from([0.0, -0.0, 1.5, math.nan, None]),
        "n": st.sampled_from([0, 1, None]),
        "p": st.integers(0, 1),
    }
)


def _comparable(rows: list[tuple[Any, ...]]) -> list[str]:
    """Rows as text (NaN equals NaN, -0.0 differs from 0.0), sorted."""
    return sorted(repr(row) for row in rows)


def read_visible(snap: ledger.Snapshot, system_columns: bool) -> list[tuple[Any, ...]]:
    with closing(connect()) as con:
        return visible_reads.visible(snap, con, system_columns=system_columns).fetchall()


def _batch(data: st.DataObject, label: str, repeats: bool) -> list[dict[str, Any]]:
    low = data.draw(st.integers(0, 30), label=f"{label} low")
    width = data.draw(st.integers(0, 10), label=f"{label} width")
    keys = st.integers(low, low + width)
    drawn = data.draw(
        st.lists(st.tuples(keys, VALUES), min_size=1, max_size=6, unique_by=lambda t: t[0])
        if not repeats
        else st.lists(st.tuples(keys, VALUES), min_size=1, max_size=6),
        label=label,
    )
    return [{"k": k, **values} for k, values in drawn]


def _marks(data: st.DataObject, table: ledger.Table, columns: list[str]) -> list[dict[str, Any]]:
    """Hand-written entries: marks copying visible rows (maybe twice the same), beside
    insertions (maybe of the values a mark cancels)."""
    visible = [dict(zip(columns, row, strict=True)) for row in views.visible(table).fetchall()]
    entries = []
    for _ in range(data.draw(st.integers(1, 5), label="marks")):
        kind = data.draw(st.sampled_from(["mark", "mark", "insertion"]), label="kind")
        if visible and data.draw(st.booleans(), label="copy"):
            row = dict(data.draw(st.sampled_from(visible), label="copied"))
        else:
            row = {"k": data.draw(st.integers(0, 45), label="key"), **data.draw(VALUES)}
        row = {c: row.get(c) for c in columns}
        entries.append({**row, "dml_type": 1 if kind == "insertion" else -1})
    return entries


@pytest.mark.parametrize("policy", list(POLICIES))
@SETTINGS
@given(data=st.data())
def test_visible_rows_settled_by_latest_insertions_match_the_plain_tree(
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
        snap = table.snapshot()
        system_columns = data.draw(st.booleans(), label="system columns")
        got = _comparable(read_visible(snap, system_columns))
        assert got == _comparable(plain_visible(snap, system_columns))


def _two_lonely_files_then_an_update(root: str) -> ledger.Table:
    """Keys 0 to 9 inserted in two files of interleaved keys, then keys 3 and 4 updated to 2.0."""
    table = ledger.connect(root).create_table(
        "t", {"k": "BIGINT", "v": "DOUBLE"}, primary_key=["k"]
    )
    table.insert([{"k": k, "v": 1.0} for k in range(0, 10, 2)])
    table.insert([{"k": k, "v": 1.0} for k in range(1, 10, 2)])
    table.update([{"k": 3, "v": 2.0}, {"k": 4, "v": 2.0}])
    return table


def test_the_latest_insertion_settles_keys_when_lonely_files_are_older() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = _two_lonely_files_then_an_update(root)
        table.delete([(5,)])
        relation = views.visible(table)
        assert "__ledger_latest_insertions" in relation.sql_query()
        want = [(k, 2.0 if k in (3, 4) else 1.0) for k in range(10) if k != 5]
        assert sorted(relation.fetchall()) == want


def test_keys_inserted_once_with_the_marks_are_taken_without_grouping() -> None:
    """While no key is inserted twice in the files holding marks, each key's insertion there
    is its latest and the statement does not group them by key; once a key is, it does."""
    with tempfile.TemporaryDirectory() as root:
        table = _two_lonely_files_then_an_update(root)
        relation = views.visible(table)
        assert "__ledger_latest_insertions" in relation.sql_query()
        assert "__ledger_latest_order" not in relation.sql_query()
        want = {k: 2.0 if k in (3, 4) else 1.0 for k in range(10)}
        assert sorted(relation.fetchall()) == sorted(want.items())
        table.update([{"k": 3, "v": 3.0}])
        relation = views.visible(table)
        assert "__ledger_latest_order" in relation.sql_query()
        assert sorted(relation.fetchall()) == sorted({**want, 3: 3.0}.items())


def test_a_mark_carrying_the_latest_insertions_values_cancels_it() -> None:
    """Keys whose latest insertion carries a mark's values (a zero of the other sign, a
    reinsertion of the values just marked, a hand-written delete) are cancelled per tuple."""
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t", {"k": "BIGINT", "v": "DOUBLE"}, primary_key=["k"]
        )
        table.insert([{"k": 1, "v": 1.0}, {"k": 2, "v": 0.0}, {"k": 3, "v": 1.0}])
        table.upsert([{"k": 1, "v": 2.0}, {"k": 2, "v": -0.0}, {"k": 3, "v": 3.0}])
        table.append_entries(
            [
                {"k": 1, "v": 2.0, "dml_type": -1},
                {"k": 1, "v": 2.0, "dml_type": 1},
                {"k": 3, "v": 3.0, "dml_type": -1},
            ]
        )
        snap = table.snapshot()
        assert "__ledger_latest_insertions" in views.visible(table).sql_query()
        assert _comparable(read_visible(snap, False)) == _comparable([(1, 2.0), (2, -0.0)])
        assert _comparable(read_visible(snap, True)) == _comparable(plain_visible(snap, True))


@pytest.fixture(autouse=True, scope="module")
def _plans_of_large_tables() -> Iterator[None]:
    """These ledgers are small: read them with the plans of large tables (lonely files apart),
    which this file checks; tests/test_visible_small_tables.py checks the small-table plan."""
    kept = visible_reads.SMALL_TABLE_ENTRIES
    visible_reads.SMALL_TABLE_ENTRIES = 0
    yield
    visible_reads.SMALL_TABLE_ENTRIES = kept
