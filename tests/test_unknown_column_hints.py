"""An unknown column that is a table column spelt with other case or surrounding spaces (a CSV
header written ``id, amount``), or a column without a name (pandas' ``to_csv`` row numbers), is
named for what it is; evolve_schema is advised only for columns that would really be new."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"order_id": "BIGINT", "amount": "DECIMAL(10,2)"}


def _table(tmp_path: Path) -> ledger.Table:
    return ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="order_id")


@settings(max_examples=examples(30), deadline=None)
@given(
    column=st.sampled_from(["order_id", "amount"]),
    left=st.sampled_from(["", " ", "  ", "\t"]),
    right=st.sampled_from(["", " ", "\t"]),
    upper=st.booleans(),
)
def test_a_column_spelt_with_spaces_or_case_is_pointed_to_and_not_offered_as_new(
    tmp_path_factory: pytest.TempPathFactory, column: str, left: str, right: str, upper: bool
) -> None:
    given_name = left + (column.upper() if upper else column) + right
    if given_name == column:
        return
    table = _table(tmp_path_factory.mktemp("w"))
    other = "amount" if column == "order_id" else "order_id"
    row = {given_name: 1, other: 2}
    with pytest.raises(ledger.UnknownColumnError) as caught:
        table.insert([row])
    message = str(caught.value)
    assert f"{given_name!r} -> {column!r}" in message
    assert "evolve_schema" not in message
    assert table.refresh().version == 0


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("order_id, amount\n1, 2.50\n", r"' amount' -> 'amount'"),  # a header with spaces
        (",order_id,amount\n0,1,2.5\n", r"no name.*index=False"),  # pandas to_csv row numbers
    ],
)
def test_a_csv_header_names_what_is_wrong_with_it(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "orders.csv"
    path.write_text(text)
    table = _table(tmp_path / "wh")
    with pytest.raises(ledger.UnknownColumnError, match=says):
        table.insert(str(path))


def test_a_really_new_column_is_still_offered_to_evolve_schema(tmp_path: Path) -> None:
    table = _table(tmp_path)
    with pytest.raises(ledger.UnknownColumnError, match=r"evolve_schema=True to add \['extra'\]"):
        table.insert([{"order_id": 1, "amount": 2, "extra": "x", " AMOUNT": 3}])
