"""A pandas object column holds Python values: it stores what the same values store from a list
of dicts (ints beyond 64 bits, Decimal infinities, numbers beside text, numbers into VARCHAR),
its missing values (what ``isna()`` counts: None, NaN, Decimal NaN) as NULL, and a value that
does not convert is a TypeMismatchError naming its column, row and value, never a bare Python
error. A sparse column is written as its dense values."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ledger
from ledger.schema import TableSchema, conform, dicts_to_arrow, to_arrow
from tests.conftest import examples
from tests.support.scratch import scratch_dir

COLUMN_TYPES = [
    "BOOLEAN",
    "BIGINT",
    "DOUBLE",
    "DECIMAL(10,2)",
    "DECIMAL(38,0)",
    "VARCHAR",
    "DATE",
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 7, -3, 2**63 - 1, 2**63, 2**64, -(2**64), 10**40]),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0.0, 1.0, 0.5, -2.25, 24.08, 3e9, math.nan, math.inf]),
    st.sampled_from(["7", "3.30", "abc", "true", "2024-01-02", ""]),
    st.sampled_from(
        [Decimal("0.10"), Decimal("3"), Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity")]
    ),
)


def outcome(convert: Any, schema: TableSchema) -> list[Any] | str:
    try:
        out, _ = conform(convert(), schema)
    except ledger.LedgerError as e:
        assert isinstance(e, ledger.TypeMismatchError), e
        return "refused"
    return out.column("x").to_pylist()


def pandas_missing(value: Any) -> bool:
    return value is not None and not isinstance(value, bool) and bool(pd.isna(value))


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@settings(max_examples=examples(150), deadline=None)
@given(sql_type=st.sampled_from(COLUMN_TYPES), values=st.lists(VALUES, min_size=1, max_size=5))
@example(sql_type="DECIMAL(38,0)", values=[2**64])
@example(sql_type="VARCHAR", values=[Decimal("Infinity")])
@example(sql_type="VARCHAR", values=[1, "a"])
def test_an_object_column_stores_what_the_same_dicts_store(
    sql_type: str, values: list[Any]
) -> None:
    schema = TableSchema.parse({"x": sql_type})
    frame = pd.DataFrame({"x": pd.Series(values, dtype=object)})
    from_pandas = outcome(lambda: to_arrow(frame, schema), schema)
    # pandas' missing values are NULL, as in every pandas column.
    rows = [{"x": None if pandas_missing(v) else v} for v in values]
    from_dicts = outcome(lambda: dicts_to_arrow(rows, schema)[0], schema)
    if isinstance(from_dicts, str) or isinstance(from_pandas, str):
        assert from_pandas == from_dicts, (from_pandas, from_dicts)
        return
    assert all(same(p, d) for p, d in zip(from_pandas, from_dicts, strict=True)), (
        from_pandas,
        from_dicts,
    )


@pytest.mark.parametrize(
    ("sql_type", "values", "shown"),
    [
        ("BIGINT", [1, 2**64], "18446744073709551616"),
        ("DOUBLE", [0.5, 0.25, -(2**64)], "-18446744073709551616"),
        ("DECIMAL(10,2)", [Decimal("1"), Decimal("Infinity")], "Infinity"),
        ("BIGINT", [3, "x"], "'x'"),
    ],
)
def test_a_refused_object_value_names_its_column_and_row(
    sql_type: str, values: list[Any], shown: str
) -> None:
    with scratch_dir("pandas-objects") as d:
        table = ledger.connect(d).create_table("t", {"id": "BIGINT", "x": sql_type}, "id")
        frame = pd.DataFrame({"id": range(len(values)), "x": pd.Series(values, dtype=object)})
        row = len(values) - 1
        for attempt in (table.insert, table.check):
            with pytest.raises(ledger.TypeMismatchError) as refused:
                attempt(frame)
            message = str(refused.value)
            assert message.startswith(f"row {row} of the DataFrame (counting from 0): ")
            assert "column 'x'" in message and shown in message, message
        assert table.count() == 0


def test_object_values_and_a_sparse_column_are_stored() -> None:
    with scratch_dir("pandas-objects") as d:
        wh = ledger.connect(d)
        table = wh.create_table(
            "t", {"id": "BIGINT", "n": "DECIMAL(38,0)", "s": "VARCHAR", "k": "VARCHAR"}, "id"
        )
        table.insert(
            pd.DataFrame(
                {
                    "id": [1, 2],
                    "n": pd.Series([2**64, -(2**64)], dtype=object),
                    "s": pd.Series([Decimal("Infinity"), 7], dtype=object),
                    "k": pd.arrays.SparseArray(["x", None]),
                }
            )
        )
        assert table.to_arrow().sort_by("id").to_pylist() == [
            {"id": 1, "n": Decimal(2**64), "s": "Infinity", "k": "x"},
            {"id": 2, "n": Decimal(-(2**64)), "s": "7", "k": None},
        ]
