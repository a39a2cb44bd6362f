"""Partial upserts and updates: a column a row does not name keeps the key's current value.

A list of dicts names columns row by row (an explicit None sets NULL); pandas and Arrow input
names a column for every row it has. Checked against a plain in-place oracle: a dict of
key -> row, updated in place.
"""

from __future__ import annotations

import tempfile
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples
from tests.support.partial_rows import VALUE_COLUMNS, partial_row

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "score": "BIGINT", "region": "VARCHAR"}


def _visible(table: ledger.Table) -> dict[int, dict[str, Any]]:
    rows = views.visible(table).to_arrow_table().to_pylist()
    return {row["id"]: row for row in rows}


def _regions_of_entries(table: ledger.Table) -> dict[tuple[int, str | None], int]:
    """sum(dml_type) per (key, region): a row that moved partition leaves entries behind."""
    sums: dict[tuple[int, str | None], int] = {}
    for key, region, sign in table.scan().select("id, region, dml_type").fetchall():
        sums[(key, region)] = sums.get((key, region), 0) + sign
    return {k: v for k, v in sums.items() if v}


@pytest.fixture
def players(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("players", SCHEMA, primary_key="id", partition_by="region")
    table.insert(
        [
            {"id": 1, "name": "A", "score": 10, "region": "eu"},
            {"id": 2, "name": "B", "score": 20, "region": "us"},
        ]
    )
    return table


def test_upsert_of_dicts_naming_different_columns_keeps_each_rows_absent_values(players):
    players.upsert([{"id": 1, "name": "AA"}, {"id": 2, "score": 21}, {"id": 3, "score": 5}])
    assert _visible(players) == {
        1: {"id": 1, "name": "AA", "score": 10, "region": "eu"},
        2: {"id": 2, "name": "B", "score": 21, "region": "us"},
        3: {"id": 3, "name": None, "score": 5, "region": None},
    }


def test_update_of_dicts_naming_different_columns_and_explicit_none(players):
    players.update([{"id": 1, "score": None}, {"id": 2, "name": "BB"}])
    assert _visible(players) == {
        1: {"id": 1, "name": "A", "score": None, "region": "eu"},
        2: {"id": 2, "name": "BB", "score": 20, "region": "us"},
    }


def test_rows_that_omit_the_partition_column_stay_in_their_partition(players):
    players.update([{"id": 1, "region": "us"}, {"id": 2, "score": 22}])
    assert _visible(players)[2]["region"] == "us"
    assert _regions_of_entries(players) == {(1, "us"): 1, (2, "us"): 1}
    paths = players.files()
    assert not any("region=__HIVE_DEFAULT" in p or "region=null" in p.lower() for p in paths)


def test_a_pandas_column_is_given_for_every_row_and_none_sets_null(players):
    frame = pd.DataFrame({"id": [1, 2], "name": ["AA", None]})
    players.upsert(frame)
    rows = _visible(players)
    assert (rows[1]["name"], rows[2]["name"]) == ("AA", None)
    assert (rows[1]["score"], rows[2]["score"]) == (10, 20)


def test_an_arrow_column_is_given_for_every_row(players):
    players.update(pa.table({"id": [2, 1], "score": pa.array([None, 11], pa.int64())}))
    rows = _visible(players)
    assert (rows[1]["score"], rows[2]["score"]) == (11, None)
    assert (rows[1]["name"], rows[2]["name"]) == ("A", "B")


def test_partial_rows_in_a_transaction_see_its_own_insert(players):
    with players.transaction() as tx:
        tx.insert([{"id": 5, "name": "E", "score": 50, "region": "eu"}])
        tx.upsert([{"id": 5, "score": 51}, {"id": 1, "name": "A1"}])
    rows = _visible(players)
    assert rows[5] == {"id": 5, "name": "E", "score": 51, "region": "eu"}
    assert rows[1] == {"id": 1, "name": "A1", "score": 10, "region": "eu"}


def test_partial_update_by_row_id_on_a_table_without_a_key(local_location):
    table = local_location.connect().create_table(
        "events", {"name": "VARCHAR", "score": "BIGINT"}, primary_key=None
    )
    table.insert([{"name": "a", "score": 1}, {"name": "b", "score": 2}])
    ids = dict(views.visible(table, system_columns=True).select("name, _row_id").fetchall())
    table.update([{"_row_id": ids["a"], "score": 10}, {"_row_id": ids["b"], "name": "bb"}])
    assert sorted(views.visible(table).fetchall()) == [("a", 10), ("bb", 2)]


def test_a_failed_partial_update_writes_nothing(players):
    before = players.version
    with pytest.raises(ledger.KeyNotFoundError):
        players.update([{"id": 1, "name": "x"}, {"id": 9, "score": 1}])
    assert players.version == before
    assert _visible(players)[1]["name"] == "A"


# --- the model: random partial writes against an in-place oracle ------------------------------


@st.composite
def _step(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    keys = draw(st.lists(st.integers(0, 5), min_size=1, max_size=5, unique=True))
    return draw(st.sampled_from(["upsert", "update"])), [draw(partial_row(k)) for k in keys]


def _apply_to_oracle(
    oracle: dict[int, dict[str, Any]], operation: str, rows: list[dict[str, Any]]
) -> bool:
    """Apply one write in place; False (and no change) when an update names a missing key."""
    if operation == "update" and any(row["id"] not in oracle for row in rows):
        return False
    for row in rows:
        current = oracle.setdefault(row["id"], {"id": row["id"], **dict.fromkeys(VALUE_COLUMNS)})
        current.update(row)
    return True


@settings(max_examples=examples(15))
@given(steps=st.lists(_step(), min_size=1, max_size=5))
def test_random_partial_writes_match_an_in_place_oracle(steps):
    with tempfile.TemporaryDirectory() as folder:
        table = ledger.connect(folder).create_table(
            "model", SCHEMA, primary_key="id", partition_by="region"
        )
        oracle: dict[int, dict[str, Any]] = {}
        for operation, rows in steps:
            applies = _apply_to_oracle(oracle, operation, rows)
            if applies:
                getattr(table, operation)(rows)
            else:
                with pytest.raises(ledger.KeyNotFoundError):
                    getattr(table, operation)(rows)
            assert _visible(table) == oracle
            assert _regions_of_entries(table) == {
                (key, row["region"]): 1 for key, row in oracle.items()
            }


# --- Spark: a DataFrame has fixed columns, like pandas ----------------------------------------


@pytest.mark.spark
def test_a_spark_dataframe_keeps_columns_it_lacks_and_its_partition(spark, local_location):
    import ledger.spark as ls

    wh = local_location.connect()
    by_spark, embedded = (
        wh.create_table(name, SCHEMA, primary_key="id", partition_by="region")
        for name in ("by_spark", "embedded")
    )
    first = [
        {"id": 1, "name": "A", "score": 10, "region": "eu"},
        {"id": 2, "name": "B", "score": 20, "region": "us"},
    ]
    by_spark.insert(first)
    embedded.insert(first)
    change = pd.DataFrame({"id": [1, 2, 3], "name": ["AA", None, "C"]})
    ls.upsert(by_spark, spark.createDataFrame(change))
    embedded.upsert(change)
    expected = {
        1: {"id": 1, "name": "AA", "score": 10, "region": "eu"},
        2: {"id": 2, "name": None, "score": 20, "region": "us"},
        3: {"id": 3, "name": "C", "score": None, "region": None},
    }
    assert _visible(by_spark) == _visible(embedded) == expected
    assert (
        _regions_of_entries(by_spark)
        == _regions_of_entries(embedded)
        == {
            (1, "eu"): 1,
            (2, "us"): 1,
            (3, None): 1,
        }
    )
