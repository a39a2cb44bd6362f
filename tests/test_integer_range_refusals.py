"""An Arrow or pandas integer column holding a value outside the integer column it goes into
(an unsigned 64-bit value beyond BIGINT, a BIGINT value beyond SMALLINT) is refused with
TypeMismatchError in the product's words: the column, its SQL type, the row, the value and the
range the column holds. Nothing is written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError
from ledger.schema import an

RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
}


@st.composite
def outside(draw: st.DrawFn) -> tuple[str, int, pa.DataType]:
    declared = draw(st.sampled_from(sorted(RANGES)))
    low, high = RANGES[declared]
    candidates = [v for v in (low - 1, high + 1) if -(2**63) <= v < 2**64]
    value = draw(st.sampled_from(candidates))
    source = pa.uint64() if value > 2**63 - 1 else pa.int64()
    return declared, value, source


@given(case=outside(), as_pandas=st.booleans(), row=st.integers(0, 3))
def test_an_integer_outside_the_columns_range_is_refused_with_its_range(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[str, int, pa.DataType],
    as_pandas: bool,
    row: int,
) -> None:
    declared, value, source = case
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("w")))
    table = warehouse.create_table("t", {"id": "BIGINT", "u": declared}, primary_key="id")
    values = [0] * row + [value]
    data: object = pa.table(
        {"id": pa.array(range(len(values)), pa.int64()), "u": pa.array(values, source)}
    )
    if as_pandas:
        data = pd.DataFrame(
            {"id": np.arange(len(values)), "u": np.array(values, dtype=source.to_pandas_dtype())}
        )
    with pytest.raises(TypeMismatchError) as refused:
        table.insert(data)
    message = str(refused.value)
    low, high = RANGES[declared]
    assert f"column 'u' ({declared})" in message
    assert f"value {value} is out of its range ({an(declared)} holds {low} to {high})" in message
    assert f"row {row} " in message
    assert "not in range" not in message  # the engine's own words are not shown
    assert table.count() == 0
    assert table.history()[-1].version == 0
