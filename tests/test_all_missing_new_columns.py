"""A new column holding only missing values names no type, whatever its dtype says: under
evolve_schema it is refused with SchemaError before anything is written, from pandas (an empty
CSV text column read as NaN floats, Int64, string, NaT, boolean) as from a CSV file or a list
of dicts, so an empty column never fixes a type (DOUBLE for a text column) that later values
would be refused by."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import ledger
from ledger.errors import SchemaError

MISSING = {
    "nan_floats": lambda: pd.read_csv(io.StringIO("id,note\n1,\n2,\n")),
    "int64": lambda: pd.DataFrame({"id": [1, 2], "note": pd.array([None, None], "Int64")}),
    "string": lambda: pd.DataFrame({"id": [1, 2], "note": pd.array([None, None], "string")}),
    "nat": lambda: pd.DataFrame({"id": [1, 2], "note": [pd.NaT, pd.NaT]}),
    "boolean": lambda: pd.DataFrame({"id": [1, 2], "note": pd.array([None, None], "boolean")}),
    "arrow_int": lambda: pa.table({"id": [1, 2], "note": pa.array([None, None], pa.int64())}),
    "dicts": lambda: [{"id": 1, "note": None}, {"id": 2, "note": None}],
}


@pytest.mark.parametrize("source", sorted(MISSING))
def test_a_new_column_of_missing_values_is_refused_and_a_later_value_sets_its_type(
    tmp_path: Path, source: str
) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    with pytest.raises(SchemaError, match="'note' holds only NULLs"):
        table.insert(MISSING[source](), evolve_schema=True)
    assert table.schema == {"id": "BIGINT"}
    assert table.count() == 0
    table.insert([{"id": 3, "note": "hello"}], evolve_schema=True)
    assert table.schema == {"id": "BIGINT", "note": "VARCHAR"}


def test_missing_values_of_an_existing_column_go_in_as_nulls(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "note": "VARCHAR"}, primary_key="id"
    )
    table.insert(pd.read_csv(io.StringIO("id,note\n1,\n")), evolve_schema=True)
    assert table.to_arrow().to_pylist() == [{"id": 1, "note": None}]
