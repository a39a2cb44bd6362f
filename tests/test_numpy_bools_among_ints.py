"""numpy's bools among ints in a list of dicts: Arrow reads ``np.True_`` beside Python ints as 1,
while alone it is refused by a number column; every row must store what it would alone, so the
insert is refused naming the bool, and numpy ints keep going in as ints."""

from __future__ import annotations

import tempfile
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

VALUES = st.one_of(
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([np.True_, np.False_]),
    st.integers(min_value=-3, max_value=3).map(np.int64),
)


@settings(max_examples=examples(40), deadline=None)
@given(
    values=st.lists(VALUES, min_size=1, max_size=6),
    column_type=st.sampled_from(["BIGINT", "DOUBLE"]),
)
def test_a_numpy_bool_among_ints_is_refused_as_alone(values: list[Any], column_type: str) -> None:
    table = ledger.connect(tempfile.mkdtemp()).create_table(
        "t", {"id": "BIGINT", "x": column_type}, primary_key="id"
    )
    rows = [{"id": i, "x": v} for i, v in enumerate(values)]
    if any(isinstance(v, np.bool_) for v in values):
        with pytest.raises(ledger.TypeMismatchError, match=r"BIGINT|DOUBLE"):
            table.insert(rows)
        assert table.refresh().version == 0
    else:
        table.insert(rows)
        assert sorted(table.scan().select("id, x").fetchall()) == [
            (i, int(v)) for i, v in enumerate(values)
        ]
