"""A JSON number in an integer column is refused in the table's words whatever its size: the
column, its SQL type, the value as written and its line; a number beyond the column's range
says the range (never the reader's DECIMAL(38,0) or a double's limit, which are how the file is
read, not what the column holds)."""

from __future__ import annotations

import decimal
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
from ledger.schema import an
from tests.conftest import Location, examples

RANGES = {"SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}

_NUMBER = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.builds(
        lambda digit, exponent, sign: f"{sign}{digit}e{exponent}",
        st.integers(1, 9),
        st.integers(0, 420),
        st.sampled_from(["", "-"]),
    ),
    st.sampled_from(["1e40", "1e400", "-1e400", "1E39", "9.5e18", "1.0e20"]),
)


@pytest.fixture
def table(local_location: Location) -> ledger.Table:
    return local_location.connect().create_table(
        "t", {"id": "BIGINT", "s": "SMALLINT", "i": "INTEGER", "n": "BIGINT"}, "id"
    )


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=_NUMBER, column=st.sampled_from(["s", "i", "n"]))
def test_a_json_number_in_an_integer_column_is_taken_or_refused_in_the_tables_words(
    table: ledger.Table, tmp_path: Path, text: str, column: str
) -> None:
    sql = {"s": "SMALLINT", "i": "INTEGER", "n": "BIGINT"}[column]
    path = tmp_path / "rows.json"
    path.write_text(f'{{"id": 1, "{column}": 1}}\n{{"id": 2, "{column}": {text}}}\n')
    value = decimal.Decimal(text)
    in_range = -RANGES[sql] <= value < RANGES[sql]
    plain = re.fullmatch(r"-?[0-9]+", text) is not None
    before = table.count()
    if in_range and (plain or abs(value) < 2**53):
        table.insert(str(path))
        assert table.count() == before + 2
        return
    with pytest.raises(ledger.TypeMismatchError) as refused:
        table.insert(str(path))
    message = str(refused.value)
    assert f"column {column!r} ({sql})" in message, message
    assert text in message and "line 2" in message, message
    assert "decimal128" not in message and "double" not in message, message
    assert "1.8e308" not in message, message
    if not in_range:
        low, high = -RANGES[sql], RANGES[sql] - 1
        assert (
            f"is out of its range ({an(sql)} holds whole numbers from {low} to {high})" in message
        )
    assert table.count() == before
