"""Insert transforms: one row-by-row SELECT over ``rows`` that a table runs on the rows of every
insert, upsert and update (never on delete keys or hand-written entries), checked against the
schema when set, recorded in the log, and the same on both engines."""

from __future__ import annotations

import decimal
import json
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import (
    InsertTransformError,
    MissingKeyError,
    TypeMismatchError,
    UnknownColumnError,
    UnsafeSqlError,
)
from tests.conftest import examples

COUNTS = {"k": "VARCHAR", "n": "BIGINT", "cnt": "BIGINT"}
SEED_COUNT = "select *, 1::BIGINT as cnt from rows"

ORDERS = {"id": "BIGINT", "customer": "VARCHAR", "amount": "DECIMAL(18,2)"}
FLATTEN = (
    "select id, payload->>'$.customer' as customer, "
    "(payload->>'$.amount')::DECIMAL(18,2) as amount from rows"
)


def _visible(table: ledger.Table, key: str) -> dict[Any, dict[str, Any]]:
    rows = views.visible(table).to_arrow_table().to_pylist()
    return {row[key]: row for row in rows}


def _entries(table: ledger.Table, columns: str) -> list[tuple[Any, ...]]:
    return sorted(table.scan().select(columns).fetchall(), key=repr)


# --- what a transform does to the rows of each write --------------------------------------------


def test_a_transform_seeds_the_count_of_every_inserted_row(warehouse):
    policy = {"name": "aggregating", "measures": {"n": "sum", "cnt": "sum"}}
    table = warehouse.create_table(
        "counts", COUNTS, primary_key="k", policy=policy, insert_transform=SEED_COUNT
    )
    table.insert([{"k": "a", "n": 5}, {"k": "b", "n": 7}])
    table.insert(pd.DataFrame({"k": ["a"], "n": [1]}))
    assert _entries(table, "k, n, cnt, dml_type") == [
        ("a", 1, 1, 1),
        ("a", 5, 1, 1),
        ("b", 7, 1, 1),
    ]
    table.merge()
    assert _entries(table, "k, n, cnt, dml_type") == [("a", 6, 2, 1), ("b", 7, 1, 1)]


def test_a_transform_flattens_a_json_source_column_the_table_lacks(warehouse, tmp_path):
    table = warehouse.create_table("orders", ORDERS, primary_key="id", insert_transform=FLATTEN)
    table.insert(
        [
            {"id": 1, "payload": json.dumps({"customer": "Zoë", "amount": "19.99"})},
            {"id": 2, "payload": json.dumps({"customer": "李", "amount": 0.1})},
        ]
    )
    source = tmp_path / "orders.csv"
    source.write_text('id,payload\n3,"{""customer"": ""Ann"", ""amount"": 2.50}"\n')
    table.insert(str(source))
    assert _visible(table, "id") == {
        1: {"id": 1, "customer": "Zoë", "amount": decimal.Decimal("19.99")},
        2: {"id": 2, "customer": "李", "amount": decimal.Decimal("0.10")},
        3: {"id": 3, "customer": "Ann", "amount": decimal.Decimal("2.50")},
    }


def test_upsert_and_update_are_transformed_and_partial_rows_keep_what_they_omit(warehouse):
    table = warehouse.create_table(
        "people",
        {"id": "BIGINT", "name": "VARCHAR", "city": "VARCHAR"},
        primary_key="id",
        insert_transform=(
            "select * replace (upper(name) as name) from rows where name is null or name <> 'skip'"
        ),
    )
    table.insert(
        [{"id": 1, "name": "ann", "city": "Oslo"}, {"id": 2, "name": "bo", "city": "Rome"}]
    )
    # Row 1 names only its city: its name is kept. Row 3 is new. Row 4 is filtered out.
    table.upsert([{"id": 1, "city": "Bergen"}, {"id": 3, "name": "cy"}, {"id": 4, "name": "skip"}])
    table.update([{"id": 2, "name": "bob"}])
    assert _visible(table, "id") == {
        1: {"id": 1, "name": "ANN", "city": "Bergen"},
        2: {"id": 2, "name": "BOB", "city": "Rome"},
        3: {"id": 3, "name": "CY", "city": None},
    }


def test_delete_keys_and_hand_written_entries_are_not_transformed(warehouse):
    table = warehouse.create_table("counts", COUNTS, primary_key="k", insert_transform=SEED_COUNT)
    table.insert([{"k": "a", "n": 5}, {"k": "b", "n": 7}])
    table.delete(["a"])  # keys only: a transform adding cnt would not even apply
    table.append_entries(
        [
            {"k": "b", "n": 7, "cnt": 1, "dml_type": -1},
            {"k": "b", "n": 8, "cnt": 40, "dml_type": 1},
        ]
    )
    assert _visible(table, "k") == {"b": {"k": "b", "n": 8, "cnt": 40}}


def test_a_transform_whose_where_keeps_no_row_writes_nothing(warehouse):
    table = warehouse.create_table(
        "events",
        {"id": "BIGINT", "kind": "VARCHAR"},
        insert_transform="select * from rows where kind <> 'test'",
    )
    version = table.version
    info = table.insert([{"id": 1, "kind": "test"}])
    assert info.version is None and table.version == version
    table.insert([{"id": 2, "kind": "click"}, {"id": 3, "kind": "test"}])
    assert _entries(table, "id, kind") == [(2, "click")]


# --- setting, changing and removing it ------------------------------------------------------------


def test_set_insert_transform_is_a_log_commit_that_later_writes_follow(location):
    table = location.connect().create_table("counts", COUNTS, primary_key="k")
    table.insert([{"k": "a", "n": 1}])
    version = table.set_insert_transform(SEED_COUNT)
    assert version == table.version and table.history()[-1].operation == "set_insert_transform"
    reopened = location.connect().table("counts")
    assert reopened.config["insert_transform"] == "SELECT *, CAST(1 AS BIGINT) AS cnt FROM rows"
    reopened.insert([{"k": "b", "n": 2}])
    assert table.set_insert_transform(None) == table.version
    assert "insert_transform" not in location.connect().table("counts").config
    table.insert([{"k": "c", "n": 3}])
    assert _entries(table, "k, cnt") == [("a", None), ("b", 1), ("c", None)]
    # Setting the transform it already has commits nothing.
    before = table.version
    assert table.set_insert_transform(None) == before


def test_a_transaction_keeps_the_transform_of_its_snapshot(warehouse):
    table = warehouse.create_table("counts", COUNTS, primary_key="k")
    with table.transaction() as tx:
        warehouse.table("counts").set_insert_transform(SEED_COUNT)
        tx.insert([{"k": "a", "n": 1}])
    table.insert([{"k": "b", "n": 2}])
    assert _entries(table, "k, cnt") == [("a", None), ("b", 1)]


BAD_TRANSFORMS = [
    ("delete from rows", UnsafeSqlError),
    ("select * from rows; select 1", UnsafeSqlError),
    ("select * from read_csv('/etc/passwd')", UnsafeSqlError),
    ("select *, 1::BIGINT as cnt from other_table", UnsafeSqlError),
    ("select k, n, current_setting('home_directory') as cnt from rows", UnsafeSqlError),
    ("select k, count(*) as cnt from rows", InsertTransformError),
    ("select *, row_number() over () as cnt from rows", InsertTransformError),
    ("select distinct * from rows", InsertTransformError),
    ("select * from rows order by k limit 10", InsertTransformError),
    ("select * from rows where k in (select k from rows)", InsertTransformError),
    ("select *, 1::BIGINT as cnt from rows union all select *, 2 from rows", InsertTransformError),
    ("select * from rows using sample 50%", InsertTransformError),
    ("select * from rows tablesample 1 rows", InsertTransformError),
    ("select * replace (_row_id + 1 as _row_id) from rows", InsertTransformError),
    ("select k, n, 1::BIGINT as cnt, n + 1 as _ROW_ID from rows", InsertTransformError),
    ("select *, 5 as trx_id from rows", InsertTransformError),
    ("select *, 1 as count from rows", UnknownColumnError),
    ("select *, 'one'::BLOB as cnt from rows", TypeMismatchError),
    ("select n, 1::BIGINT as cnt from rows", MissingKeyError),
    ("", UnsafeSqlError),
    # One incoming row gives at most one row.
    ("select k, unnest([n, n]) as n, 1::BIGINT as cnt from rows", InsertTransformError),
    (
        "select unnest(generate_series(k, k + 2)) as k, n, 1::BIGINT as cnt from rows",
        InsertTransformError,
    ),
    ("select k, explode([n]) as n, 1::BIGINT as cnt from rows", InsertTransformError),
    # The same rows at every run over the same rows.
    ("select (random() * 100)::BIGINT as k, n, 1::BIGINT as cnt from rows", InsertTransformError),
    ("select k, n, hash(uuid())::BIGINT as cnt from rows", InsertTransformError),
    ("select k, n, hash(gen_random_uuid())::BIGINT as cnt from rows", InsertTransformError),
    # Session state.
    ("select k, n, getvariable('x')::BIGINT as cnt from rows", UnsafeSqlError),
    ("select k, n, current_connection_id()::BIGINT as cnt from rows", UnsafeSqlError),
    ("select k, n, txid_current()::BIGINT as cnt from rows", UnsafeSqlError),
]


@pytest.mark.parametrize(("sql", "error"), BAD_TRANSFORMS)
def test_a_bad_transform_is_refused_when_set_and_nothing_is_written(local_location, sql, error):
    warehouse = local_location.connect()
    with pytest.raises(error, match="insert transform"):
        warehouse.create_table("counts", COUNTS, primary_key="k", insert_transform=sql)
    assert warehouse.tables() == []
    table = warehouse.create_table("counts", COUNTS, primary_key="k")
    with pytest.raises(error, match="insert transform"):
        table.set_insert_transform(sql)
    assert warehouse.table("counts").version == 0
    assert "insert_transform" not in warehouse.table("counts").config


def test_a_transform_that_fails_on_the_data_writes_nothing(warehouse):
    table = warehouse.create_table(
        "numbers",
        {"id": "BIGINT", "n": "INTEGER"},
        insert_transform="select id, raw::INTEGER as n from rows",
    )
    table.insert([{"id": 1, "raw": "7"}])
    with pytest.raises(InsertTransformError, match="Nothing was written"):
        table.insert([{"id": 2, "raw": "8"}, {"id": 3, "raw": "eight"}])
    with pytest.raises(InsertTransformError, match="raw"):
        table.insert([{"id": 4, "n": 4}])  # the source column the transform reads is missing
    with pytest.raises(InsertTransformError), table.transaction() as tx:
        tx.insert([{"id": 5, "raw": "5"}])
        tx.insert([{"id": 6, "raw": "six"}])
    assert table.version == 1
    assert _entries(table, "id, n") == [(1, 7)]
    assert table.files() == table.snapshot(1).files()


def test_a_transformed_row_that_does_not_fit_the_schema_is_refused_whole(warehouse):
    table = warehouse.create_table(
        "numbers",
        {"id": "BIGINT", "n": "TINYINT"},
        insert_transform="select id, n * 100 as n from rows",
    )
    with pytest.raises(TypeMismatchError, match="'n'"):
        table.insert([{"id": 1, "n": 1}, {"id": 2, "n": 2}])  # 200 does not fit a TINYINT
    assert table.version == 0


def test_a_rollup_table_takes_no_transform(warehouse):
    base = warehouse.create_table("clicks", {"day": "DATE", "n": "BIGINT"})
    base.create_rollup("daily", by=["day"], measures={"n": "sum(n)"})
    with pytest.raises(ledger.errors.InvalidArgumentError, match="rollup"):
        warehouse.table("daily").set_insert_transform("select * from rows")


# --- the same rows from every source, against a plain oracle ------------------------------------

ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(-(2**40), 2**40),
            "amount": st.integers(-(10**8), 10**8).map(lambda c: c / 100),
            "name": st.one_of(st.none(), st.text(max_size=6)),
        }
    ),
    max_size=12,
    unique_by=lambda row: row["id"],
)
SHAPE = (
    "select id, amount::DECIMAL(18,2) as amount, coalesce(name, '') || '!' as name, "
    "1::BIGINT as cnt from rows where id % 3 <> 0"
)


def _shaped(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {
        row["id"]: {
            "id": row["id"],
            "amount": decimal.Decimal(repr(row["amount"])).quantize(decimal.Decimal("0.01")),
            "name": (row["name"] or "") + "!",
            "cnt": 1,
        }
        for row in rows
        if row["id"] % 3 != 0
    }


@settings(max_examples=examples(25))
@given(rows=ROWS, source=st.sampled_from(["dicts", "pandas", "arrow"]))
def test_transformed_rows_match_an_oracle_from_every_source(rows, source, tmp_path_factory):
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    table = warehouse.create_table(
        "t",
        {"id": "BIGINT", "amount": "DECIMAL(18,2)", "name": "VARCHAR", "cnt": "BIGINT"},
        primary_key="id",
        insert_transform=SHAPE,
    )
    data: Any = rows
    if source == "pandas":
        data = pd.DataFrame(rows, columns=["id", "amount", "name"])
    elif source == "arrow":
        data = pa.Table.from_pylist(
            rows, pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("name", pa.string())])
        )
    table.upsert(data)
    assert _visible(table, "id") == _shaped(rows)


# --- Spark: the same query, the same rows ---------------------------------------------------------


@pytest.mark.spark
def test_spark_writes_are_transformed_as_the_embedded_ones(spark, local_location):
    import ledger.spark as ls

    warehouse = local_location.connect()
    tables = [
        warehouse.create_table(name, ORDERS, primary_key="id", insert_transform=FLATTEN)
        for name in ("by_spark", "embedded")
    ]
    first = pd.DataFrame(
        {
            "id": [1, 2],
            "payload": [
                json.dumps({"customer": "Zoë", "amount": "19.99"}),
                json.dumps({"customer": "李", "amount": 0.1}),
            ],
        }
    )
    change = pd.DataFrame({"id": [2, 3], "payload": ['{"customer": "Li"}', '{"amount": 3}']})
    fix = pd.DataFrame({"id": [3], "payload": ['{"customer": "Cy", "amount": "3.5"}']})
    entry = pd.DataFrame(
        {"id": [4], "customer": ["Di"], "amount": [decimal.Decimal("4.00")], "dml_type": [1]}
    )
    ls.insert(tables[0], spark.createDataFrame(first))
    ls.upsert(tables[0], spark.createDataFrame(change))
    ls.delete(tables[0], spark.createDataFrame(pd.DataFrame({"id": [1]})))
    ls.update(tables[0], spark.createDataFrame(fix))
    # Hand-written entries are not transformed: they carry the table's own columns.
    ls.append_entries(tables[0], spark.createDataFrame(entry))
    tables[1].insert(first)
    tables[1].upsert(change)
    tables[1].delete([1])
    tables[1].update(fix)
    tables[1].append_entries(entry)
    assert (
        _visible(tables[0], "id")
        == _visible(tables[1], "id")
        == {
            2: {"id": 2, "customer": "Li", "amount": None},
            3: {"id": 3, "customer": "Cy", "amount": decimal.Decimal("3.50")},
            4: {"id": 4, "customer": "Di", "amount": decimal.Decimal("4.00")},
        }
    )


@pytest.mark.spark
def test_a_transform_failing_on_spark_data_writes_nothing(spark, local_location):
    import ledger.spark as ls

    table = local_location.connect().create_table(
        "numbers",
        {"id": "BIGINT", "n": "INTEGER"},
        insert_transform="select id, raw::INTEGER as n from rows",
    )
    frame = spark.createDataFrame(pd.DataFrame({"id": [1, 2], "raw": ["1", "two"]}))
    with pytest.raises(InsertTransformError, match="two"):
        ls.insert(table, frame)
    assert table.version == 0 and table.scan().fetchall() == []


def test_a_transform_passes_row_ids_through_so_an_update_changes_its_own_row(warehouse):
    table = warehouse.create_table(
        "notes",
        {"note": "VARCHAR", "n": "BIGINT"},
        insert_transform="select * replace (n * 10 as n) from rows",
    )
    table.insert([{"note": "x", "n": 1}, {"note": "y", "n": 2}])
    visible = table.to_arrow(columns=["note", "n"]).to_pylist()
    assert sorted((r["note"], r["n"]) for r in visible) == [("x", 10), ("y", 20)]
    row_x = next(
        r
        for r in views.visible(table, system_columns=True).to_arrow_table().to_pylist()
        if r["note"] == "x"
    )
    table.update([{"_row_id": row_x["_row_id"], "note": "x", "n": 3}])
    visible = table.to_arrow(columns=["note", "n"]).to_pylist()
    assert sorted((r["note"], r["n"]) for r in visible) == [("x", 30), ("y", 20)]


def test_a_transform_giving_a_column_the_table_lacks_advises_what_creation_can_do(
    local_location,
):
    """Neither ``create_table`` nor ``set_insert_transform`` takes ``evolve_schema``: the advice
    names what they can do."""
    warehouse = local_location.connect()
    sql = "select k, n, 1::BIGINT as cnt, 'x' as extra from rows"
    with pytest.raises(UnknownColumnError) as refused:
        warehouse.create_table("counts", COUNTS, primary_key="k", insert_transform=sql)
    message = str(refused.value)
    assert "evolve_schema" not in message
    assert "Declare ['extra'] among the table's columns, or leave them out" in message
    table = warehouse.create_table("counts", COUNTS, primary_key="k")
    with pytest.raises(UnknownColumnError, match="Declare") as refused:
        table.set_insert_transform(sql)
    assert "evolve_schema" not in str(refused.value)
