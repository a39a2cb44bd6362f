"""Partial rows through an insert transform: an upsert or update of a key that exists is
transformed as the row will be (its visible row overlaid by the columns given), so columns the
transform derives are derived from the real values; a new key's row is transformed as an
insert's (its absent columns NULL to the transform, every output column kept)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples

COLUMNS = {
    "id": "BIGINT",
    "name": "VARCHAR",
    "score": "BIGINT",
    "region": "VARCHAR",
    "name_upper": "VARCHAR",
    "double_score": "BIGINT",
}
DERIVING = (
    "select * replace (lower(region) as region), upper(name) as name_upper, "
    "score * 2 as double_score from rows"
)

# Rewrites `region` in place with a default, so a new key's left-out region is the
# transform's output, not NULL.
DEFAULTING = (
    "select * replace (coalesce(lower(region), 'none') as region), upper(name) as name_upper, "
    "score * 2 as double_score from rows"
)


def _visible(table: ledger.Table) -> dict[int, dict[str, Any]]:
    relation = views.visible(table)
    return {row["id"]: row for row in relation.to_arrow_table().to_pylist()}


def _players(warehouse: ledger.Warehouse, transform: str = DERIVING) -> ledger.Table:
    return warehouse.create_table("players", COLUMNS, primary_key="id", insert_transform=transform)


def test_an_update_naming_other_columns_keeps_what_the_transform_derives(warehouse):
    table = _players(warehouse)
    table.insert([{"id": 1, "name": "ann", "score": 1, "region": "EU"}])
    table.update([{"id": 1, "score": 5}])
    assert _visible(table)[1] == {
        "id": 1,
        "name": "ann",
        "score": 5,
        "region": "eu",
        "name_upper": "ANN",
        "double_score": 10,
    }


def test_rows_of_different_shapes_are_each_derived_from_the_row_as_it_will_be(local_location):
    table = _players(local_location.connect())
    table.insert(
        [
            {"id": 1, "name": "ann", "score": 1, "region": "EU"},
            {"id": 2, "name": "bo", "score": 2, "region": "US"},
        ]
    )
    table.upsert(
        [
            {"id": 1, "score": 7},
            {"id": 2, "name": "bob", "region": None},
            {"id": 3, "name": "cy"},  # a new key: what it leaves out is NULL
        ]
    )
    assert _visible(table) == {
        1: {"id": 1, "name": "ann", "score": 7, "region": "eu", "name_upper": "ANN",
            "double_score": 14},
        2: {"id": 2, "name": "bob", "score": 2, "region": None, "name_upper": "BOB",
            "double_score": 4},
        3: {"id": 3, "name": "cy", "score": None, "region": None, "name_upper": "CY",
            "double_score": None},
    }  # fmt: skip


def test_a_column_the_transform_rewrites_in_place_is_kept_when_the_row_leaves_it_out(
    local_location,
):
    # The stored score already is the transform's output: it is not doubled again.
    table = local_location.connect().create_table(
        "t",
        {"id": "BIGINT", "name": "VARCHAR", "score": "BIGINT"},
        primary_key="id",
        insert_transform="select * replace (score * 2 as score) from rows",
    )
    table.insert([{"id": 1, "name": "a", "score": 3}])
    table.update([{"id": 1, "name": "b"}])
    with table.transaction() as tx:
        tx.upsert([{"id": 1, "name": "c"}, {"id": 2, "name": "d"}])
    assert _visible(table) == {
        1: {"id": 1, "name": "c", "score": 6},
        2: {"id": 2, "name": "d", "score": None},
    }


@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_an_upsert_of_a_new_key_stores_what_an_insert_stores(local_location, operation):
    """A column the transform rewrites in place and the row leaves out: an existing key keeps
    its stored value, a new key has none and takes the transform's output, as an insert does."""
    table = local_location.connect().create_table(
        "t",
        {"id": "BIGINT", "status": "VARCHAR", "note": "VARCHAR"},
        primary_key="id",
        insert_transform="select * replace (coalesce(status, 'new') as status) from rows",
    )
    table.insert([{"id": 1, "status": "paid", "note": "a"}])
    getattr(table, operation)([{"id": 2, "note": "b"}])
    table.upsert([{"id": 1, "note": "c"}, {"id": 3, "note": "d"}])
    assert _visible(table) == {
        1: {"id": 1, "status": "paid", "note": "c"},
        2: {"id": 2, "status": "new", "note": "b"},
        3: {"id": 3, "status": "new", "note": "d"},
    }


@pytest.mark.parametrize("operation", ["insert", "upsert"])
@pytest.mark.parametrize(
    "transform",
    [
        "select * replace (upper(s) as u) from rows",
        "select * exclude (u), upper(s) as u from rows",
    ],
)
def test_a_column_a_star_replaces_or_excludes_may_be_left_out(local_location, operation, transform):
    """A star's REPLACE or EXCLUDE list names a column the star must find: a row leaving it
    out gives it as NULL to the transform, as any column the transform reads."""
    table = local_location.connect().create_table(
        "t",
        {"id": "BIGINT", "s": "VARCHAR", "u": "VARCHAR"},
        primary_key="id",
        insert_transform=transform,
    )
    getattr(table, operation)([{"id": 1, "s": "a"}])
    assert _visible(table) == {1: {"id": 1, "s": "a", "u": "A"}}


def test_an_explicit_select_list_also_sees_the_current_values(local_location):
    table = local_location.connect().create_table(
        "t",
        {"id": "BIGINT", "name": "VARCHAR", "label": "VARCHAR"},
        primary_key="id",
        insert_transform="select id, name, concat(name, '#', id) as label from rows",
    )
    table.insert([{"id": 1, "name": "a"}])
    table.update([{"id": 1}])
    assert _visible(table) == {1: {"id": 1, "name": "a", "label": "a#1"}}


# --- the family: random partial writes against an in-place oracle -----------------------------

NAMES = st.one_of(st.none(), st.text(alphabet="abXY", max_size=3))
VALUES = {
    "name": NAMES,
    "score": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
    "region": st.one_of(st.none(), st.sampled_from(["EU", "us", "Ap"])),
}


@st.composite
def _partial_row(draw: st.DrawFn, key: int) -> dict[str, Any]:
    named = draw(st.lists(st.sampled_from(sorted(VALUES)), unique=True))
    return {"id": key, **{column: draw(VALUES[column]) for column in named}}


@st.composite
def _step(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    operation = draw(st.sampled_from(["upsert", "update", "delete", "insert"]))
    keys = draw(st.lists(st.integers(0, 5), unique=True, min_size=1, max_size=4))
    if operation == "insert":  # new rows: every column named (an explicit None is NULL)
        return operation, [{"id": k, **{c: draw(v) for c, v in VALUES.items()}} for k in keys]
    return operation, [draw(_partial_row(key)) for key in keys]


def _derived(row: dict[str, Any]) -> dict[str, Any]:
    region = row["region"]
    return {
        **row,
        "region": "none" if region is None else region.lower(),
        "name_upper": None if row["name"] is None else row["name"].upper(),
        "double_score": None if row["score"] is None else row["score"] * 2,
    }


def _apply_in_place(
    state: dict[int, dict[str, Any]], operation: str, rows: list[dict[str, Any]]
) -> None:
    """The oracle: each row becomes the current row overlaid by what it names (a new key's
    other columns NULL), then the transform derives its columns from that row. A column the
    transform rewrites in place (region) is only rewritten where the row names it or the key
    is new (an insert's row)."""
    for row in rows:
        key = row["id"]
        if operation == "delete":
            state.pop(key, None)
            continue
        current = state.get(key)
        base = {c: None for c in VALUES} if current is None else current
        overlaid = {**base, **row}
        new = _derived(overlaid)
        if current is not None and "region" not in row:
            new["region"] = current["region"]
        state[key] = new


def _runnable(state: dict[int, Any], operation: str, rows: list[dict[str, Any]]) -> bool:
    if operation == "update":
        return all(r["id"] in state for r in rows)
    if operation == "insert":
        return not any(r["id"] in state for r in rows)
    return True


@settings(max_examples=examples(30), deadline=None)
@given(steps=st.lists(_step(), min_size=1, max_size=6))
def test_partial_writes_through_a_transform_match_the_in_place_oracle(steps, tmp_path_factory):
    table = _players(ledger.connect(str(tmp_path_factory.mktemp("wh"))), DEFAULTING)
    state: dict[int, dict[str, Any]] = {}
    for operation, rows in steps:
        if not _runnable(state, operation, rows):
            continue
        if operation == "delete":
            table.delete([r["id"] for r in rows])
        else:
            getattr(table, operation)(rows)
        _apply_in_place(state, operation, rows)
    assert _visible(table) == state


@pytest.mark.parametrize("operation", ["update", "upsert"])
def test_a_transform_computing_the_key_from_a_source_column_overlays_that_key(
    local_location, operation
):
    table = local_location.connect().create_table(
        "t",
        {"id": "BIGINT", "name": "VARCHAR", "shout": "VARCHAR"},
        primary_key="id",
        insert_transform=(
            "select (payload->>'$.id')::BIGINT as id, name, upper(name) as shout from rows"
        ),
    )
    table.insert([{"payload": '{"id": 1}', "name": "ann"}])
    getattr(table, operation)([{"payload": '{"id": 1}'}])
    assert _visible(table) == {1: {"id": 1, "name": "ann", "shout": "ANN"}}


# --- Spark: a DataFrame that leaves columns out, transformed as on the embedded engine ------------


@pytest.mark.spark
def test_spark_partial_writes_derive_from_the_row_as_it_will_be(spark, local_location):
    import pandas as pd

    import ledger.spark as ls

    warehouse = local_location.connect()
    by_spark, embedded = (
        warehouse.create_table(name, COLUMNS, primary_key="id", insert_transform=DEFAULTING)
        for name in ("by_spark", "embedded")
    )
    first = pd.DataFrame(
        {"id": [1, 2], "name": ["ann", "bo"], "score": [1, 2], "region": ["EU", "US"]}
    )
    # 3 is new: its name is NULL, its region the transform's default
    scores = pd.DataFrame({"id": [1, 3], "score": [7, 9]})
    names = pd.DataFrame({"id": [2], "name": ["bob"]})
    ls.insert(by_spark, spark.createDataFrame(first))
    ls.upsert(by_spark, spark.createDataFrame(scores))
    ls.update(by_spark, spark.createDataFrame(names))
    embedded.insert(first)
    embedded.upsert(scores)
    embedded.update(names)
    assert (
        _visible(by_spark)
        == _visible(embedded)
        == {
            1: {"id": 1, "name": "ann", "score": 7, "region": "eu", "name_upper": "ANN",
                "double_score": 14},
            2: {"id": 2, "name": "bob", "score": 2, "region": "us", "name_upper": "BOB",
                "double_score": 4},
            3: {"id": 3, "name": None, "score": 9, "region": "none", "name_upper": None,
                "double_score": 18},
        }
    )  # fmt: skip


def test_a_transform_where_is_decided_on_the_row_as_it_will_be(local_location):
    """A WHERE over a column the row leaves out sees the current value: a partial update of a
    row the WHERE keeps is written; one that makes the row fail it, or a new key whose left-out
    column is NULL, writes nothing."""
    table = local_location.connect().create_table(
        "t",
        {"id": "VARCHAR", "amount": "BIGINT", "note": "VARCHAR"},
        primary_key="id",
        insert_transform="select * from rows where amount >= 0",
    )
    table.insert([{"id": "a", "amount": 5, "note": "old"}, {"id": "b", "amount": 6, "note": "x"}])
    assert table.update([{"id": "a", "note": "new"}]).inserted == 1
    assert table.upsert([{"id": "b", "note": "y"}]).inserted == 1
    assert table.update([{"id": "a", "amount": -1}]).version is None
    assert table.upsert([{"id": "c", "note": "z"}]).version is None
    assert sorted(views.visible(table).fetchall()) == [("a", 5, "new"), ("b", 6, "y")]


@pytest.mark.spark
@pytest.mark.parametrize("operation", ["upsert", "update"])
def test_spark_partial_rows_the_where_drops_keep_their_key_as_on_the_embedded_engine(
    spark, local_location, operation
):
    """A frame leaving a column out, through a transform whose WHERE drops one of its rows as
    it will be: that key keeps its row on both engines (no mark without its insertion)."""
    import pandas as pd

    import ledger.spark as ls

    warehouse = local_location.connect()
    by_spark, embedded = (
        warehouse.create_table(
            name,
            {"id": "BIGINT", "v": "BIGINT", "w": "BIGINT"},
            primary_key="id",
            insert_transform="select * from rows where v >= 0",
        )
        for name in ("by_spark", "embedded")
    )
    for table in (by_spark, embedded):
        table.insert([{"id": 1, "v": 5, "w": 1}, {"id": 2, "v": 6, "w": 2}])
    changes = pd.DataFrame({"id": [1, 2], "v": [-1, 7]})  # leaves w out; 1 fails the WHERE
    written = getattr(ls, operation)(by_spark, spark.createDataFrame(changes))
    getattr(embedded, operation)(changes)
    assert written.inserted == 1 and written.deleted == 1
    assert (
        sorted(views.visible(by_spark).fetchall())
        == sorted(views.visible(embedded).fetchall())
        == [(1, 5, 1), (2, 7, 2)]
    )
