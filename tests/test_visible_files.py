"""Visible rows read with each file in its role (ledger/reads/files.py: isolated, lonely, other)
against the plain tree over every entry (ledger/sql/visible.py with no file told apart), on
random ledgers spread over several files: key ranges disjoint and overlapping, delete marks,
blind duplicate insertions of a key, repeated loads, partitions, every built-in policy, and
keys of one integer, text, date or two columns (the repeated-key check differs by key type).
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations, connect
from ledger.reads import visible as visible_reads
from ledger.reads.files import file_roles
from ledger.sql.dialects import DIALECTS
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, render
from ledger.sql.visible import visible as visible_tree
from ledger.writer import file_schema
from tests.conftest import examples

DUCKDB = DIALECTS["duckdb"]
POLICIES: dict[str, Any] = {
    "collapsing": "collapsing",
    "dedup": {"name": "dedup"},
    "replacing": {"name": "replacing"},
    "aggregating": {"name": "aggregating", "measures": {"v": "sum", "n": "count", "p": "sum"}},
    "custom": {
        "name": "custom",
        "sql": "SELECT * FROM entries QUALIFY row_number() OVER "
        "(PARTITION BY k, trx_id, trx_seq ORDER BY trx_id) = 1",
    },
}
DAY = dt.date(2026, 1, 1)
# Per key kind: the key columns' types, and a key from a number (so ranges can be drawn).
KEYS: dict[str, tuple[dict[str, str], Any]] = {
    "bigint": ({"k": "BIGINT"}, lambda i: {"k": i}),
    "text": ({"k": "VARCHAR"}, lambda i: {"k": f"key-{i:03d}"}),
    "date": ({"k": "DATE"}, lambda i: {"k": DAY + dt.timedelta(days=i)}),
    "pair": ({"k": "BIGINT", "j": "VARCHAR"}, lambda i: {"k": i // 3, "j": "abc"[i % 3]}),
}
VALUES = {"v": "DOUBLE", "n": "BIGINT", "p": "INTEGER"}
# Examples per case in the everyday run (each case of the family is drawn afresh); `make
# test-deep` runs hundreds.
SETTINGS = settings(max_examples=examples(5), deadline=None)


def plain_visible(snap: ledger.Snapshot, system_columns: bool) -> list[tuple[Any, ...]]:
    """The tree over every entry, no file read apart: the answer before files had roles."""
    spec = TableSpec.of(snap.state)
    schema = file_schema(snap.state.schema, snap.state.config)
    with closing(connect()) as con:
        entries = scan_files(con, snap.store, snap.prefix, snap.markers(), schema)
        names = bind_relations(con, {"entries": entries})
        query = visible_tree(
            spec, DUCKDB, Sources(entries=names["entries"]), system_columns=system_columns
        )
        return _sorted(con.sql(render(query, DUCKDB)).fetchall())


def read_visible(snap: ledger.Snapshot, system_columns: bool) -> list[tuple[Any, ...]]:
    with closing(connect()) as con:
        relation = visible_reads.visible(snap, con, system_columns=system_columns)
        return _sorted(relation.fetchall())


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


def _rows(data: st.DataObject, key_of: Any, label: str) -> list[dict[str, Any]]:
    """A batch of rows whose keys lie in a random range (narrow ranges make files whose key
    ranges are disjoint; repeated keys in one batch make a file of repeated keys)."""
    low = data.draw(st.integers(0, 40), label=f"{label} low")
    width = data.draw(st.integers(0, 12), label=f"{label} width")
    numbers = st.integers(low, low + width)
    values = st.fixed_dictionaries(
        {
            "v": st.sampled_from([0.0, -0.0, 1.5, -2.0]),
            "n": st.integers(0, 2),
            "p": st.integers(0, 1),
        }
    )
    drawn = data.draw(st.lists(st.tuples(numbers, values), min_size=1, max_size=6), label=label)
    return [{**key_of(i), **v} for i, v in drawn]


def _write(table: ledger.Table, data: st.DataObject, key_of: Any, loads: list[Any]) -> None:
    kind = data.draw(st.sampled_from(["insert", "insert", "load again", "upsert", "delete"]))
    if kind == "insert" or (kind == "load again" and not loads):
        rows = _rows(data, key_of, "insert")
        table.insert(rows)
        loads.append(rows)
    elif kind == "load again":
        table.insert(loads[data.draw(st.integers(0, len(loads) - 1), label="load")])
    else:
        rows = _rows(data, key_of, kind)
        keys = list(table.primary_key)
        unique = list({tuple(r[k] for k in keys): r for r in rows}.values())
        if kind == "upsert":
            table.upsert(unique)
        else:
            table.delete([tuple(r[k] for k in keys) for r in unique])


@pytest.mark.parametrize("key_kind", list(KEYS))
@pytest.mark.parametrize("policy", list(POLICIES))
@SETTINGS
@given(data=st.data())
def test_visible_rows_with_files_in_roles_match_the_plain_tree(
    policy: str, key_kind: str, data: st.DataObject
) -> None:
    key_types, key_of = KEYS[key_kind]
    partitioned = data.draw(st.booleans(), label="partitioned")
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t",
            {**key_types, **VALUES},
            primary_key=list(key_types),
            policy=POLICIES[policy],
            partition_by=["p"] if partitioned else None,
        )
        loads: list[Any] = []
        for _ in range(data.draw(st.integers(2, 7), label="writes")):
            _write(table, data, key_of, loads)
        snap = table.snapshot()
        system_columns = data.draw(st.booleans(), label="system columns")
        assert read_visible(snap, system_columns) == plain_visible(snap, system_columns)


def test_lonely_files_whose_ranges_meet_repeat_no_key_twice() -> None:
    """Two loads of unique keys whose ranges meet share a key: the key's two rows are one
    visible row (the later), whether the repeated-key check sorts numbers or groups text."""
    for key_kind in ("bigint", "text", "date", "pair"):
        key_types, key_of = KEYS[key_kind]
        with tempfile.TemporaryDirectory() as root:
            table = ledger.connect(root).create_table(
                "t", {**key_types, **VALUES}, primary_key=list(key_types)
            )
            table.insert([{**key_of(i), "v": 1.0, "n": 1, "p": 0} for i in range(0, 10)])
            table.insert([{**key_of(i), "v": 2.0, "n": 2, "p": 0} for i in range(9, 20)])
            table.insert([{**key_of(i), "v": 3.0, "n": 3, "p": 0} for i in range(30, 40)])
            snap = table.snapshot()
            schema = file_schema(snap.state.schema, snap.state.config)
            roles = file_roles(snap.markers(), [schema.field(k).type for k in key_types])
            assert (len(roles.isolated), len(roles.lonely), roles.lonely_overlap) == (1, 2, True)
            rows = read_visible(snap, False)
            assert rows == plain_visible(snap, False)
            assert len(rows) == 30
            [shared] = [r for r in rows if r[: len(key_types)] == tuple(key_of(9).values())]
            assert shared[len(key_types)] == 2.0


def test_a_mark_in_another_file_cancels_a_lonely_row() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", {"k": "BIGINT", **VALUES}, primary_key="k")
        table.insert([{"k": i, "v": float(i), "n": i, "p": 0} for i in range(10)])
        table.insert([{"k": i, "v": float(i), "n": i, "p": 0} for i in range(20, 30)])
        table.update([{"k": 3, "v": -3.0}])
        table.delete([25])
        snap = table.snapshot()
        schema = file_schema(snap.state.schema, snap.state.config)
        roles = file_roles(snap.markers(), [schema.field("k").type])
        assert (len(roles.lonely), len(roles.others)) == (2, 2)
        assert read_visible(snap, True) == plain_visible(snap, True)
        rows = read_visible(snap, False)
        assert len(rows) == 19
        assert (3, -3.0, 3, 0) in rows
        assert not [r for r in rows if r[0] == 25]


def test_after_a_full_merge_the_view_is_a_plain_scan() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", {"k": "BIGINT", **VALUES}, primary_key="k")
        table.insert([{"k": i, "v": float(i), "n": i, "p": 0} for i in range(10)])
        table.update([{"k": 3, "v": -3.0}])
        table.merge(min_files=1)
        snap = table.snapshot()
        with closing(connect()) as con:
            relation = visible_reads.visible(snap, con)
            plan = str(relation.explain())
        assert "JOIN" not in plan.upper() and "GROUP" not in plan.upper()
        assert read_visible(snap, False) == plain_visible(snap, False)
        assert read_visible(snap, True) == plain_visible(snap, True)


def test_repeated_keys_keep_every_key_type_exact() -> None:
    """The sorted-number check turns keys back into their own type (dates, timestamps with and
    without a zone) and finds exactly the repeated ones."""
    for sql_type, values in (
        ("BIGINT", [5, 1, 5, 2]),
        ("DATE", [DAY, DAY + dt.timedelta(days=1), DAY]),
        ("TIMESTAMP", [dt.datetime(2026, 1, 1, 1), dt.datetime(2026, 1, 1, 1)]),
        ("TIMESTAMPTZ", [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * 2),
    ):
        with tempfile.TemporaryDirectory() as root:
            table = ledger.connect(root).create_table("t", {"k": sql_type}, primary_key="k")
            snap = table.snapshot()
            spec = TableSpec.of(snap.state)
            schema = file_schema(snap.state.schema, snap.state.config)
            key_type = schema.field("k").type
            with closing(connect()) as con:
                lonely = con.from_arrow(pa.table({"k": pa.array(values, type=key_type)}))
                found = visible_reads.repeated_keys(con, lonely, spec, schema).fetchall()
            assert [r[0] for r in found] == [values[0]], sql_type


@pytest.fixture(autouse=True, scope="module")
def _plans_of_large_tables() -> Iterator[None]:
    """These ledgers are small: read them with the plans of large tables (lonely files apart),
    which this file checks; tests/test_visible_small_tables.py checks the small-table plan."""
    kept = visible_reads.SMALL_TABLE_ENTRIES
    visible_reads.SMALL_TABLE_ENTRIES = 0
    yield
    visible_reads.SMALL_TABLE_ENTRIES = kept
