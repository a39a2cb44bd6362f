"""A pandas object column whose values mix Python kinds that Arrow's own conversion refuses
(``Decimal`` beside ``float``) converts as the same values in a list of dicts do: a DECIMAL
column stores each value exactly, and a value that does not fit is refused naming its column,
its row of the frame and the value."""

from __future__ import annotations

import decimal
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"id": "BIGINT", "d": "DECIMAL(10,2)", "x": "DOUBLE"}
NUMBERS = st.one_of(
    st.decimals(-1000, 1000, places=2).map(lambda d: decimal.Decimal(str(d))),
    st.sampled_from([2.5, -0.25, 0.1, 7.0, 1e3]),
    st.integers(-50, 50),
    st.none(),
)


def _stored(root: Path, data: Any) -> list[dict[str, Any]]:
    table = ledger.connect(str(root)).create_table("t", SCHEMA, primary_key="id")
    table.insert(data)
    return sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])


@settings(max_examples=examples(15), deadline=None)
@given(values=st.lists(st.tuples(NUMBERS, NUMBERS), min_size=1, max_size=6))
def test_a_frame_of_mixed_objects_stores_what_a_list_of_dicts_stores(
    values: list[tuple[Any, Any]],
) -> None:
    rows = [{"id": i, "d": d, "x": x} for i, (d, x) in enumerate(values)]
    frame = pd.DataFrame(rows, dtype=object).astype({"id": "int64"})
    with tempfile.TemporaryDirectory() as scratch:
        expected = _stored(Path(scratch) / "dicts", rows)
        assert _stored(Path(scratch) / "frame", frame) == expected


@pytest.mark.parametrize(
    ("values", "row", "shown"),
    [
        ([2.5, decimal.Decimal("1.255")], 1, "1.255"),
        ([decimal.Decimal("1.25"), 2.505], 1, "2.505"),
        ([decimal.Decimal("1.25"), 2.5, "abc"], 2, "abc"),
    ],
)
def test_a_value_of_a_mixed_object_column_that_does_not_fit_is_named_with_its_row(
    tmp_path: Path, values: list[Any], row: int, shown: str
) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="id")
    frame = pd.DataFrame({"id": range(len(values)), "d": pd.Series(values, dtype=object)})
    with pytest.raises(ledger.TypeMismatchError) as refused:
        table.upsert(frame)
    message = str(refused.value)
    assert f"row {row} of the DataFrame" in message and "'d'" in message and shown in message
    assert table.refresh().version == 0
