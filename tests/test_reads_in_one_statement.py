"""Views that name their data files inside one statement (ledger/engines/duckdb/scan.py:
``read_parquet`` of a parameter per group of files, texts rendered once per shape, the keys
lonely files share found once per set of files) against the same trees over relations of the
files bound one by one, on random ledgers: every built-in policy, blind duplicate insertions,
delete marks, several files, partitions, and schemas that evolved between files (a column added
after some files were written, a column widened). Every read runs twice, so the second one
reads through what the first kept.
"""

from __future__ import annotations

import math
import tempfile
from contextlib import closing, suppress
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations, connect
from ledger.sql.dialects import DIALECTS
from ledger.sql.spec import TableSpec
from ledger.sql.totals import check_totals_request
from ledger.sql.totals import totals as totals_tree
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
SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "v": "DOUBLE", "n": "BIGINT", "p": "INTEGER"}
# Examples per case in the everyday run (each case of the family is drawn afresh); `make
# test-deep` runs hundreds.
SETTINGS = settings(max_examples=examples(5), deadline=None)


def bound_one_by_one(snap: ledger.Snapshot) -> tuple[list[dict[str, Any]], list[Any]]:
    """The visible rows and the totals (count, sums of n, p and v) through relations of the
    files bound as views (the read path before files were named inside the statement), over
    every entry, no file read apart and no file summed without weighting."""
    spec = TableSpec.of(snap.state)
    schema = file_schema(snap.state.schema, snap.state.config)
    request = check_totals_request(spec, None, ["n", "p", "v"], True, None, None)
    with closing(connect()) as con:
        entries = scan_files(con, snap.store, snap.prefix, snap.markers(), schema)
        sources = Sources(entries=bind_relations(con, {"entries": entries})["entries"])
        rows = con.sql(render(visible_tree(spec, DUCKDB, sources), DUCKDB))
        totals = con.sql(render(totals_tree(spec, DUCKDB, sources, request), DUCKDB))
        return rows.to_arrow_table().to_pylist(), list(totals.fetchall()[0])


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=repr)


def _rows(data: st.DataObject, label: str, columns: set[str]) -> list[dict[str, Any]]:
    low = data.draw(st.integers(0, 30), label=f"{label} low")
    width = data.draw(st.integers(0, 10), label=f"{label} width")
    row = {
        "k": st.integers(low, low + width),
        "g": st.sampled_from(["a", "b", None]),
        "v": st.sampled_from([0.0, -0.0, 1.5, -2.0, None]),
        "n": st.integers(0, 2),
        "p": st.sampled_from([0, 1, None]),
        "x": st.sampled_from([None, 7, 8]),
    }
    row = {c: values for c, values in row.items() if c in columns}
    return data.draw(st.lists(st.fixed_dictionaries(row), min_size=1, max_size=6), label=label)


def _evolve(table: ledger.Table, data: st.DataObject) -> None:
    """An insertion adding the column ``x`` and widening ``p`` to BIGINT (refused where the
    policy cannot take it: then nothing is written)."""
    columns = _columns(table)
    if "g" in columns:  # an aggregating table (no g) takes no column without a merge function
        columns.add("x")
    rows = _rows(data, "evolving insert", columns)
    types = {"k": pa.int64(), "g": pa.string(), "v": pa.float64(), "n": pa.int64()}
    types |= {"p": pa.int64(), "x": pa.int64()}
    schema = pa.schema([(c, t) for c, t in types.items() if c in columns])
    arrow = pa.Table.from_pylist(rows, schema=schema)
    with suppress(ledger.LedgerError):
        table.insert(arrow, evolve_schema=True)


def _columns(table: ledger.Table) -> set[str]:
    return set(TableSpec.of(table.snapshot().state).columns)


def _write(table: ledger.Table, data: st.DataObject, loads: list[Any]) -> None:
    kind = data.draw(
        st.sampled_from(["insert", "insert", "load again", "upsert", "delete", "evolve"])
    )
    columns = _columns(table)
    if kind == "evolve":
        _evolve(table, data)
    elif kind == "insert" or (kind == "load again" and not loads):
        rows = _rows(data, "insert", columns)
        table.insert(rows)
        loads.append(rows)
    elif kind == "load again":
        table.insert(loads[data.draw(st.integers(0, len(loads) - 1), label="load")])
    else:
        rows = _rows(data, kind, columns)
        unique = list({r["k"]: r for r in rows}.values())
        if kind == "upsert":
            table.upsert(unique)
        else:
            table.delete([r["k"] for r in unique])


@pytest.mark.parametrize("policy", list(POLICIES))
@SETTINGS
@given(data=st.data())
def test_views_reading_files_in_one_statement_match_relations_bound_one_by_one(
    policy: str, data: st.DataObject
) -> None:
    partitioned = policy != "aggregating" and data.draw(st.booleans(), label="partitioned")
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t",
            {c: t for c, t in SCHEMA.items() if policy != "aggregating" or c != "g"},
            primary_key="k",
            policy=POLICIES[policy],
            partition_by="n" if partitioned else None,
        )
        loads: list[Any] = []
        for _ in range(data.draw(st.integers(1, 6), label="writes")):
            _write(table, data, loads)
            if data.draw(st.integers(0, 5), label="merge now") == 0:
                table.merge(min_files=1)
            expected, (count, sum_n, sum_p, sum_v) = bound_one_by_one(table.snapshot())
            for _ in range(2):  # the second read goes through the kept texts and keys
                got = views.visible(table).to_arrow_table().to_pylist()
                assert _sorted(got) == _sorted(expected)
                [row] = views.totals(table, sum=["n", "p", "v"]).fetchall()
                assert row[:3] == (count, sum_n, sum_p)
                assert (row[3] is None) == (sum_v is None)
                if sum_v is not None:
                    assert math.isclose(row[3], sum_v, abs_tol=1e-9)
        table.close()
