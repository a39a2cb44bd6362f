"""A decimal goes into an integer column when it is a whole number in the column's range (JSON
read with ``parse_float=decimal.Decimal`` gives ``2.0`` as a decimal), and is refused otherwise,
naming the value; Spark's conversion already takes decimals so."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.schema import TableSchema, conform
from tests.conftest import examples

RANGES = {"TINYINT": 2**7, "SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}


@settings(max_examples=examples(100), deadline=None)
@given(
    column_type=st.sampled_from(sorted(RANGES)),
    whole=st.integers(min_value=-(2**64), max_value=2**64),
    places=st.integers(min_value=0, max_value=4),
    fraction=st.integers(min_value=0, max_value=9999),
)
def test_a_decimal_goes_into_an_integer_column_only_when_whole_and_in_range(
    column_type: str, whole: int, places: int, fraction: int
) -> None:
    fraction %= 10**places
    value = Decimal(whole) + Decimal(fraction).scaleb(-places)
    fits = (
        value == value.to_integral_value() and -RANGES[column_type] <= value < RANGES[column_type]
    )
    data = pa.table({"v": pa.array([value], pa.decimal128(38, places))})
    if fits:
        got, _ = conform(data, TableSchema.parse({"v": column_type}))
        assert got.column("v").to_pylist() == [int(value)]
    else:
        with pytest.raises(ledger.TypeMismatchError, match=rf"column 'v' \({column_type}\)"):
            conform(data, TableSchema.parse({"v": column_type}))


def test_whole_decimals_from_dicts_go_into_integer_columns(tmp_path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "VARCHAR", "n": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": "a", "n": Decimal("2.0")}, {"id": "b", "n": Decimal("-1E+3")}])
    assert sorted(table.scan().select("id, n").fetchall()) == [("a", 2), ("b", -1000)]
    with pytest.raises(ledger.TypeMismatchError, match=r"2\.5"):
        table.insert([{"id": "c", "n": Decimal("2.5")}])
    assert table.refresh().version == 1
