"""Counting distinct values by sorting numbers (the writer's dictionary choice, the uniqueness
checks of corrections) answers exactly as Arrow's hashing does."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.engines.duckdb.key_scan import distinct_integer_keys
from ledger.writer import count_distinct

_INTEGER_LIKE = st.sampled_from(
    [pa.int8(), pa.uint8(), pa.int32(), pa.int64(), pa.uint64(), pa.date32(), pa.timestamp("us")]
)


def _storage(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.int64()
    if pa.types.is_date32(kind):
        return pa.int32()
    return kind


def _column(data: st.DataObject, kind: pa.DataType, nulls: bool) -> pa.ChunkedArray:
    """Chunks of values with repeats, the type's extremes and (if ``nulls``) NULLs."""
    numbers = _storage(kind)
    info = np.iinfo(numbers.to_pandas_dtype())
    low, high = int(info.min), int(info.max)
    if pa.types.is_date32(kind):
        low, high = -719_162, 2_932_896  # years 1 to 9999
    value: st.SearchStrategy[int | None] = st.one_of(
        st.integers(low, high), st.sampled_from([low, high, 0]), st.integers(-3, 3).map(abs)
    )
    if nulls:
        value = st.one_of(st.none(), value)
    chunks = data.draw(st.lists(st.lists(value, max_size=30), min_size=1, max_size=3))
    return pa.chunked_array([pa.array(c, numbers).cast(kind) for c in chunks], kind)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), kind=_INTEGER_LIKE)
def test_sorted_distinct_counts_equal_arrows(data: st.DataObject, kind: pa.DataType) -> None:
    """The dictionary choice's count of distinct integers, dates and timestamps, NULL counting
    as one value, in one chunk or several."""
    column = _column(data, kind, nulls=True)
    assert count_distinct(column) == pc.count_distinct(column, mode="all").as_py()


@settings(max_examples=40, deadline=None)
@given(data=st.data(), kind=_INTEGER_LIKE, nulls=st.booleans())
def test_integer_keys_are_distinct_exactly_when_no_group_repeats(
    data: st.DataObject, kind: pa.DataType, nulls: bool
) -> None:
    """One integer key column is called distinct exactly when Arrow's grouping finds no key
    twice; keys of other types, several columns or holding a NULL are left to the grouping."""
    keys = pa.table({"k": _column(data, kind, nulls)})
    grouped = keys.group_by(["k"]).aggregate([([], "count_all")])
    answer = distinct_integer_keys(keys)
    if pa.types.is_integer(kind) and not keys.column("k").null_count:
        assert answer == (grouped.num_rows == keys.num_rows)
    else:
        assert answer is None
    assert distinct_integer_keys(keys.append_column("j", keys.column("k"))) is None
