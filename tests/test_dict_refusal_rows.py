"""A value of a list of dicts that its column refuses is named by its row: the index of its dict
in the list, counting from 0, as a CSV or JSON-lines refusal names its line. The row is looked
for only once the whole conversion has refused, so appends of good rows cost nothing more."""

from __future__ import annotations

import decimal
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import Location, examples

SCHEMA = {"id": "BIGINT", "n": "BIGINT", "d": "DECIMAL(10,2)", "i": "INTEGER", "day": "DATE"}
GOOD = {"n": 5, "d": decimal.Decimal("1.25"), "i": 7, "day": "2026-01-05"}
BAD = [
    ("n", "abc"),
    ("n", "1.5"),
    ("n", 2**70),
    ("d", 1.234),
    ("d", decimal.Decimal("1.234")),
    ("d", "abc"),
    ("i", 2**40),
    ("i", 1.5),
    ("day", "2026-13-01"),
]


@pytest.fixture
def table(local_location: Location) -> ledger.Table:
    return local_location.connect().create_table("t", SCHEMA, "id")


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(bad=st.sampled_from(BAD), size=st.integers(1, 40), data=st.data())
def test_a_refused_dict_value_names_its_row(
    table: ledger.Table, bad: tuple[str, Any], size: int, data: st.DataObject
) -> None:
    column, value = bad
    at = data.draw(st.integers(0, size - 1))
    rows = [{"id": k, **GOOD} for k in range(size)]
    rows[at] = {**rows[at], column: value}
    for write in (table.insert, table.upsert):
        with pytest.raises(ledger.TypeMismatchError) as refused:
            write(rows)
        message = str(refused.value)
        assert f"row {at} of the list" in message, message
        assert "counting from 0" in message
        assert re.search(rf"column {column!r}", message), message
    assert table.count() == 0


def test_a_refused_entry_names_its_row(table: ledger.Table) -> None:
    rows = [{"id": k, **GOOD, "dml_type": 1} for k in range(10)]
    rows[7] = {**rows[7], "n": "abc"}
    with pytest.raises(ledger.TypeMismatchError, match="row 7 of the list"):
        table.append_entries(rows)
