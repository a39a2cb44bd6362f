"""Bad entries are refused with a typed ledger error, before anything is written: a
``dml_type`` that is not a number, a row whose key is not a column name, a DuckDB relation
that fails while it streams."""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.transaction import STREAM_CHUNK_ROWS
from tests.conftest import examples

SCHEMA = {"id": "BIGINT", "x": "DOUBLE"}


def _stored(table: ledger.Table) -> tuple[int, list[str]]:
    """The table's version and every object under its folder (data, reservations, log)."""
    store = table.store
    return table.refresh().version, sorted(i.key for i in store.list(table.prefix))


@pytest.fixture
def table(tmp_path: Any) -> ledger.Table:
    created = ledger.connect(str(tmp_path / "warehouse")).create_table(
        "t", SCHEMA, primary_key="id"
    )
    created.insert([{"id": 1, "x": 1.0}])
    return created


def _append(table: ledger.Table, entries: list[dict[Any, Any]], how: str) -> None:
    if how == "table":
        table.append_entries(entries)
        return
    with table.transaction() as tx:
        tx.append_entries(entries)


SIGNS_NOT_NUMBERS = st.one_of(
    st.booleans(), st.sampled_from(["1", "-1", "+1", ""]), st.text(max_size=3)
)


@given(
    bad=SIGNS_NOT_NUMBERS,
    good=st.lists(st.sampled_from([1, -1]), max_size=2),
    how=st.sampled_from(["table", "transaction"]),
)
@settings(max_examples=examples(10), deadline=None)
def test_a_dml_type_that_is_not_a_number_is_refused_as_such(table, bad, good, how):
    before = _stored(table)
    entries = [{"id": 1, "x": 1.0, "dml_type": bad}]
    entries += [{"id": 2 + i, "x": 2.0, "dml_type": 1} for i, _ in enumerate(good)]
    with pytest.raises(
        ledger.TypeMismatchError, match="dml_type"
    ):  # or "values do not form one type"
        _append(table, entries, how)
    assert _stored(table) == before
    assert table.count() == 1


@given(bad=st.sampled_from([0, 2, -2, 0.5, math.nan, None]))
@settings(max_examples=examples(6), deadline=None)
def test_a_number_other_than_plus_or_minus_one_is_refused(table, bad):
    before = _stored(table)
    with pytest.raises(ledger.TypeMismatchError, match="dml_type must be"):
        table.append_entries([{"id": 3, "x": 1.0, "dml_type": bad}])
    assert _stored(table) == before


# Keys Arrow cannot take as names (None and bytes it turns into text itself).
NAMES_NOT_TEXT = st.one_of(
    st.integers(),
    st.floats(allow_nan=False),
    st.tuples(st.integers()),
    st.frozensets(st.integers()),
)


@given(
    name=NAMES_NOT_TEXT,
    operation=st.sampled_from(["insert", "append_entries", "upsert"]),
    position=st.integers(0, 2),
)
@settings(max_examples=examples(10), deadline=None)
def test_a_row_keyed_by_something_other_than_text_is_refused(table, name, operation, position):
    before = _stored(table)
    rows: list[dict[Any, Any]] = [{"id": 10 + i, "x": 1.0} for i in range(3)]
    rows[position] = {**rows[position], name: "v"}
    if operation == "append_entries":
        rows = [{**row, "dml_type": 1} for row in rows]
    with pytest.raises(ledger.SchemaError, match="column names must be text"):
        getattr(table, operation)(rows)
    assert _stored(table) == before


@pytest.mark.parametrize("failing_row", [0, 1000, STREAM_CHUNK_ROWS + 10])
def test_a_duckdb_relation_failing_while_it_streams_is_a_malformed_source(table, failing_row):
    """Past the first chunk, that chunk's file was written; the insert aborts and deletes it."""
    before = _stored(table)
    relation = duckdb.sql(
        f"SELECT i + 10 AS id, CASE WHEN i < {failing_row} THEN 1.0 ELSE error('bad row') END "
        f"AS x FROM range({failing_row + 5}) t(i)"
    )
    with pytest.raises(ledger.MalformedSourceError, match="bad row"):
        table.insert(relation)
    assert _stored(table) == before
    assert table.count() == 1


@pytest.mark.spark
@pytest.mark.parametrize("bad", [True, "-1"], ids=["boolean", "text"])
def test_a_spark_dml_type_that_is_not_a_number_is_refused_as_such(spark, tmp_path, bad):
    import ledger.spark as ls

    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="id")
    table.insert([{"id": 1, "x": 1.0}])
    before = _stored(table)
    frame = spark.createDataFrame([(1, 1.0, bad)], ["id", "x", "dml_type"])
    with pytest.raises(ledger.TypeMismatchError, match="dml_type must be"):
        ls.append_entries(table, frame)
    assert _stored(table) == before
    assert table.count() == 1
