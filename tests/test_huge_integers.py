"""A Python int outside the 64-bit range, given in a list of dicts or a dict of lists, is
refused with TypeMismatchError naming its column, the column's declared type and the value,
before anything is written."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError

TYPES = ["BIGINT", "INTEGER", "SMALLINT", "TINYINT"]
HUGE = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))


@given(value=HUGE, declared=st.sampled_from(TYPES), as_columns=st.booleans())
def test_an_int_beyond_64_bits_is_named_with_its_declared_type(
    tmp_path_factory: pytest.TempPathFactory, value: int, declared: str, as_columns: bool
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("w")))
    table = warehouse.create_table("t", {"id": "BIGINT", "u": declared}, primary_key="id")
    rows: object = {"id": [1], "u": [value]} if as_columns else [{"id": 1, "u": value}]
    with pytest.raises(TypeMismatchError) as refused:
        table.insert(rows)
    assert f"column 'u' ({declared})" in str(refused.value)
    assert str(value) in str(refused.value)
    assert table.count() == 0
