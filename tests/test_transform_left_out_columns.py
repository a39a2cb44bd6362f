"""An insert that leaves out a column of the table its insert transform reads: the column is
NULL to the transform, as if given as NULL (and as to an upsert of a new key); and a
transform's failure names the transform and the columns the caller gave, never the columns a
write adds to run it."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.errors import InsertTransformError
from tests.conftest import examples

COLUMNS = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(10,2)", "ts": "TIMESTAMPTZ"}
TRANSFORMS = [
    "select id, trim(name) as name, amount, ts from rows",
    "select id, upper(name) as name, amount * 2 as amount, ts + interval 1 hour as ts from rows",
    "select id, name, amount, ts from rows where amount is null or amount > 0",
    "select id, coalesce(name, 'none') as name, amount, ts from rows",
    "select id, payload.name as name, amount, ts from rows",
]
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "name": st.none() | st.sampled_from([" a ", "b", ""]),
    "amount": st.none() | st.integers(-5, 5),
    "ts": st.none() | st.just(dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.UTC)),
}


@st.composite
def written_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows of new keys, all leaving out the same columns (as a file or a frame does)."""
    given = draw(st.sets(st.sampled_from(sorted(VALUES))))
    ids = draw(st.lists(st.integers(0, 100), min_size=1, max_size=4, unique=True))
    rows = [{"id": i, **{name: draw(VALUES[name]) for name in sorted(given)}} for i in ids]
    for row in rows:
        row["payload"] = {"name": row.get("name")}
    return rows


def _stored(table: ledger.Table) -> list[dict[str, Any]]:
    return sorted(table.to_arrow().to_pylist(), key=lambda row: row["id"])


@settings(max_examples=examples(10), deadline=None)
@given(transform=st.sampled_from(TRANSFORMS), rows=written_rows())
def test_an_insert_leaving_columns_out_stores_what_one_giving_them_as_null_stores(
    transform: str, rows: list[dict[str, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        warehouse = ledger.connect(str(Path(scratch) / "wh"))
        left_out, given_null = (
            warehouse.create_table(name, COLUMNS, primary_key="id", insert_transform=transform)
            for name in ("left_out", "given_null")
        )
        given_null.insert([{**dict.fromkeys(VALUES), **row} for row in rows])
        left_out.check(rows)
        left_out.insert(rows)
        assert _stored(left_out) == _stored(given_null)
        if "where" not in transform:
            assert len(_stored(left_out)) == len(rows)
        if "coalesce" not in transform:
            # An upsert of new keys leaves them NULL too (an output column named like one the
            # row left out is not given: it keeps the stored value, none for a new key).
            upserted = warehouse.create_table(
                "upserted", COLUMNS, primary_key="id", insert_transform=transform
            )
            upserted.upsert(rows)
            assert _stored(upserted) == _stored(left_out)


def test_the_reported_insert_stores_null(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t",
        {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(10,2)"},
        primary_key="id",
        insert_transform="select id, trim(name) as name, amount from rows",
    )
    table.insert([{"id": 21, "amount": 1}])
    table.insert(pa.table({"id": [22], "amount": [2]}))
    assert [row["name"] for row in _stored(table)] == [None, None]


@pytest.mark.parametrize("operation", ["insert", "upsert", "update"])
def test_a_failing_transform_names_only_the_callers_columns(tmp_path: Path, operation: str) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t",
        {"id": "BIGINT", "name": "VARCHAR", "ts": "TIMESTAMPTZ"},
        primary_key="id",
        insert_transform="select id, payload.name as name, ts from rows",
    )
    table.insert([{"id": 1, "payload": {"name": "x"}}])
    with pytest.raises(InsertTransformError) as refused:
        getattr(table, operation)([{"id": 1}])
    message = str(refused.value)
    assert "'SELECT id, payload.name AS name, ts FROM rows'" in message
    assert "they have ['id'])" in message
    assert "ordinal" not in message
    assert table.refresh().version == 1


@pytest.mark.spark
def test_a_spark_insert_leaving_columns_out_stores_null_as_the_embedded_one(
    spark: Any, local_location: Any
) -> None:
    import ledger.spark as ls

    warehouse = local_location.connect()
    tables = [
        warehouse.create_table(
            name,
            COLUMNS,
            primary_key="id",
            insert_transform="select id, trim(name) as name, amount, ts + interval 1 hour as ts "
            "from rows",
        )
        for name in ("by_spark", "embedded")
    ]
    rows = pa.table({"id": [1, 2], "amount": [1, None]})
    ls.insert(tables[0], spark.createDataFrame(rows.to_pandas()))
    tables[1].insert(rows)
    assert _stored(tables[0]) == _stored(tables[1])
    assert [row["name"] for row in _stored(tables[0])] == [None, None]
