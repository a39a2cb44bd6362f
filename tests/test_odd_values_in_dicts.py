"""Values a list of dicts holds when it comes from pandas or numpy: pandas' and numpy's marks of
a missing value are NULL (as from a DataFrame), numpy datetimes of any unit convert as the
instant they hold, and decimals no DECIMAL holds are refused naming the column's SQL type."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pandas as pd
import pytest

import ledger

SCHEMA = {"k": "BIGINT", "ts": "TIMESTAMP", "d": "DATE", "s": "VARCHAR", "a": "DECIMAL(18,2)"}


@pytest.mark.parametrize(
    "missing", [pd.NaT, pd.NA, np.datetime64("NaT"), np.datetime64("NaT", "us")], ids=repr
)
@pytest.mark.parametrize("column", ["ts", "d", "s", "a"])
def test_a_missing_mark_is_null(tmp_path, missing, column):
    if column == "s" and isinstance(missing, np.datetime64) and missing.dtype != "<M8":
        pytest.skip("a typed datetime64 NaT is a timestamp column, refused in VARCHAR as such")
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, "k")
    table.insert([{"k": 1, column: missing}, {"k": 2, column: None}])
    assert table.to_arrow().column(column).to_pylist() == [None, None]


def test_numpy_datetimes_of_minutes_and_hours_are_their_instants(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, "k")
    table.insert(
        [
            {
                "k": 1,
                "ts": np.datetime64("2024-01-01T10:30"),
                "d": np.datetime64("2024-03-01T00", "h"),
            },
            {"k": 2, "ts": dt.datetime(2024, 1, 2), "d": dt.date(2024, 3, 2)},
        ]
    )
    rows = table.to_arrow().sort_by("k").to_pylist()
    assert [(r["ts"], r["d"]) for r in rows] == [
        (dt.datetime(2024, 1, 1, 10, 30), dt.date(2024, 3, 1)),
        (dt.datetime(2024, 1, 2), dt.date(2024, 3, 2)),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [("NaN", "no NaN or infinity"), ("-Infinity", "no NaN or infinity"), ("1E+400", "401 digits")],
)
def test_a_decimal_no_decimal_column_holds_is_refused_by_its_sql_type(tmp_path, text, says):
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, "k")
    with pytest.raises(ledger.TypeMismatchError) as refused:
        table.insert([{"k": 1, "a": decimal.Decimal(text)}])
    assert "(DECIMAL(18,2))" in str(refused.value) and says in str(refused.value)
    assert "decimal128" not in str(refused.value)
    assert table.version == 0
