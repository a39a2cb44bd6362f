"""``delete`` (and ``lookup``) take the keys of a one-column key as one array of values (a pandas
Series, Index or ExtensionArray, a polars Series, a numpy array, an Arrow array) as they take a
list of them, and
a key of several columns as a 2-D numpy array of its rows: the rows deleted are those a list
deletes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

FORMS = {
    "list": list,
    "series": pd.Series,
    "index": pd.Index,
    "numpy": np.array,
    "arrow": pa.array,
    "chunked": lambda keys: pa.chunked_array([keys], pa.int64()),
    "polars": lambda keys: pl.Series("id", keys, dtype=pl.Int64),
    # pandas ExtensionArrays, what ``frame["id"].array`` gives.
    "nullable": lambda keys: pd.array(keys, dtype="Int64"),
    "frame_array": lambda keys: pd.DataFrame({"id": pd.Series(keys, dtype="int64")})["id"].array,
    "pyarrow_backed": lambda keys: pd.array(keys, dtype="int64[pyarrow]"),
    "nullable_index": lambda keys: pd.Index(keys, dtype="Int64"),
}


def _ids(table: ledger.Table) -> list[Any]:
    return sorted(table.to_arrow().column("id").to_pylist())


@settings(max_examples=examples(20))
@given(
    deleted=st.lists(st.integers(0, 12), max_size=8),
    form=st.sampled_from(sorted(FORMS)),
)
def test_an_array_of_keys_deletes_what_a_list_of_them_deletes(tmp_path_factory, deleted, form):
    wh = ledger.connect(str(tmp_path_factory.mktemp("k")))
    table = wh.create_table("t", {"id": "INTEGER", "v": "VARCHAR"}, primary_key="id")
    table.insert([{"id": i, "v": str(i)} for i in range(10)])
    table.delete(FORMS[form](deleted))
    assert _ids(table) == sorted(set(range(10)) - set(deleted))


def test_a_series_of_text_or_timestamp_keys_and_a_2d_array_of_compound_keys(tmp_path):
    wh = ledger.connect(str(tmp_path))
    names = wh.create_table("names", {"id": "VARCHAR"}, primary_key="id")
    names.insert([{"id": k} for k in ("a", "b", "c")])
    names.delete(pd.Series(["a", "c"], name="whatever"))
    assert _ids(names) == ["b"]

    times = wh.create_table("times", {"id": "TIMESTAMP"}, primary_key="id")
    days = [dt.datetime(2024, 1, d) for d in (1, 2, 3)]
    times.insert([{"id": d} for d in days])
    times.delete(pd.Series(pd.to_datetime(days[:2])))
    assert _ids(times) == days[2:]

    pairs = wh.create_table(
        "pairs", {"id": "BIGINT", "region": "VARCHAR"}, primary_key=["id", "region"]
    )
    pairs.insert([{"id": i, "region": r} for i in (1, 2) for r in ("eu", "us")])
    pairs.delete(np.array([[1, "eu"], [2, "us"]], dtype=object))
    assert sorted(pairs.to_arrow().to_pylist(), key=str) == [
        {"id": 1, "region": "us"},
        {"id": 2, "region": "eu"},
    ]


def test_pandas_extension_arrays_of_text_and_timestamps_delete_their_keys(tmp_path):
    wh = ledger.connect(str(tmp_path))
    names = wh.create_table("names", {"id": "VARCHAR"}, primary_key="id")
    names.insert([{"id": k} for k in ("a", "b", "c")])
    names.delete(pd.array(["a", "c"], dtype="string"))
    assert _ids(names) == ["b"]

    times = wh.create_table("times", {"id": "TIMESTAMPTZ"}, primary_key="id")
    days = [dt.datetime(2024, 1, d, tzinfo=dt.UTC) for d in (1, 2, 3)]
    times.insert([{"id": d} for d in days])
    times.delete(pd.Series(pd.to_datetime(days[:2])).array)  # a DatetimeArray with its zone
    assert _ids(times) == days[2:]
    with times.transaction() as tx:
        assert tx.lookup(pd.Series(pd.to_datetime(days)).array).num_rows == 1


def test_lookup_takes_a_polars_series_of_keys(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": i} for i in range(5)])
    with table.transaction() as tx:
        found = tx.lookup(pl.Series("whatever", [3, 9, 1]))
    assert sorted(found.column("id").to_pylist()) == [1, 3]


def test_keys_in_a_form_delete_does_not_take_are_refused_naming_the_key_forms(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    with pytest.raises(ledger.InvalidArgumentError) as raised:
        table.delete(np.int64(1))
    message = str(raised.value)
    assert "keys" in message and "list of key values" in message and "Series" in message
    assert "RecordBatchReader" not in message and "JSON-lines" not in message
    assert table.count() == 1


def test_keys_that_do_not_fit_the_key_column_are_refused(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "INTEGER"}, primary_key="id")
    table.insert([{"id": 1}])
    with pytest.raises(ledger.TypeMismatchError):
        table.delete(np.array([1.5]))
    assert table.count() == 1


def test_delete_takes_the_multiindex_of_a_frame_keyed_by_its_key_columns(tmp_path):

    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "region": "VARCHAR", "qty": "INTEGER"}, ["id", "region"]
    )
    frame = pd.DataFrame(
        {"id": [1, 2, 3], "region": ["eu", "us", "eu"], "qty": [1, 2, 3]}
    ).set_index(["id", "region"])
    table.insert(frame)
    assert table.delete(frame.index[:2]).deleted == 2
    assert table.to_arrow().select(["id", "region"]).to_pylist() == [{"id": 3, "region": "eu"}]
    unnamed = frame.index[2:].set_names([None, None])
    assert table.delete(unnamed).deleted == 1
    assert table.count() == 0
