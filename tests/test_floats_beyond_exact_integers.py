"""A float of 2**53 or more no longer tells neighbouring integers apart: pandas reads an integer
column with a gap as float64, and 9007199254740993 arrives as 9007199254740992.0. Such a float is
refused by an integer column from every source rather than stored as an integer the source never
held; below 2**53 every whole float is stored exactly (the Spark side is compared value by value
in tests/test_conversion.py)."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.schema import TableSchema, conform
from tests.conftest import examples

LIMIT = 2**53


def _conformed(values: list[float], column_type: str = "BIGINT") -> list[Any]:
    got, _ = conform(
        pa.table({"v": pa.array(values, pa.float64())}), TableSchema.parse({"v": column_type})
    )
    return got.column("v").to_pylist()


@settings(max_examples=examples(100))
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_a_whole_float_goes_into_bigint_exactly_below_2_53_and_is_refused_from_there(
    whole: int,
) -> None:
    value = float(whole)
    if abs(value) < LIMIT:
        assert _conformed([value]) == [int(value)]
    else:
        with pytest.raises(ledger.TypeMismatchError, match=r"column 'v' \(BIGINT\).*rounded"):
            _conformed([value])


@pytest.mark.parametrize("column_type", ["TINYINT", "SMALLINT", "INTEGER", "BIGINT"])
def test_float32_wholes_are_refused_from_2_24_by_every_integer_type(column_type: str) -> None:
    wide = {"TINYINT": False, "SMALLINT": False, "INTEGER": True, "BIGINT": True}[column_type]
    exact = pa.table({"v": pa.array([2.0**24 - 1], pa.float32())})
    if wide:
        got, _ = conform(exact, TableSchema.parse({"v": column_type}))
        assert got.column("v").to_pylist() == [2**24 - 1]
    with pytest.raises(ledger.TypeMismatchError):
        conform(
            pa.table({"v": pa.array([2.0**24], pa.float32())}),
            TableSchema.parse({"v": column_type}),
        )


def test_big_ids_with_gaps_read_by_pandas_are_refused_and_nothing_is_written(tmp_path: Any) -> None:
    """The case as users meet it: ``pd.read_csv`` of big ids with an empty field."""
    text = "order_id,qty\n1,9007199254740993\n2,\n3,12\n"
    frame = pd.read_csv(io.StringIO(text))
    assert frame["qty"].dtype == "float64"  # pandas already rounded 9007199254740993
    table = ledger.connect(str(tmp_path)).create_table(
        "orders", {"order_id": "BIGINT", "qty": "BIGINT"}, primary_key="order_id"
    )
    with pytest.raises(ledger.TypeMismatchError, match=r"9007199254740992\.0.*Int64"):
        table.insert(frame)
    assert table.refresh().version == 0
    # Read as pandas' nullable integers, the same text goes in exactly.
    table.insert(pd.read_csv(io.StringIO(text), dtype={"qty": "Int64"}))
    assert sorted(table.scan().select("order_id, qty").fetchall()) == [
        (1, 9007199254740993),
        (2, None),
        (3, 12),
    ]


def test_whole_floats_below_the_limit_and_missing_values_still_go_in(tmp_path: Any) -> None:
    frame = pd.DataFrame({"id": [1, 2, 3], "n": [float(LIMIT - 1), None, -float(LIMIT - 1)]})
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "n": "BIGINT"}, primary_key="id"
    )
    table.insert(frame)
    assert sorted(table.scan().select("id, n").fetchall()) == [
        (1, LIMIT - 1),
        (2, None),
        (3, -(LIMIT - 1)),
    ]
