"""A JSON-lines file gives a VARCHAR column a number or boolean: it is stored as its JSON text as
written (``1.50`` stays ``"1.50"``, ``true`` is ``"true"``), as a list of dicts stores such a
value and as Spark's and DuckDB's JSON readers do; an object or array is refused with
TypeMismatchError naming the file, line, column, value and the column's type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError
from tests.conftest import examples

SCHEMA = {"id": "BIGINT", "note": "VARCHAR"}
NOTES = st.one_of(
    st.none(),
    st.text(max_size=5),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)


def _table(tmp: Path) -> ledger.Table:
    return ledger.connect(str(tmp / "wh")).create_table("t", SCHEMA, primary_key="id")


def _stored(table: ledger.Table) -> dict[int, str | None]:
    stored = table.to_arrow()
    return dict(zip(stored["id"].to_pylist(), stored["note"].to_pylist(), strict=True))


@settings(max_examples=examples(25))
@given(
    notes=st.lists(NOTES, min_size=1, max_size=8),
    operation=st.sampled_from(["insert", "upsert"]),
)
def test_numbers_and_booleans_are_stored_as_a_list_of_dicts_stores_them(
    tmp_path_factory, notes, operation
):
    tmp = tmp_path_factory.mktemp("j")
    rows = [{"id": i, "note": note} for i, note in enumerate(notes)]
    path = tmp / "in.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    from_file, from_dicts = _table(tmp / "a"), _table(tmp / "b")
    getattr(from_file, operation)(str(path))
    from_dicts.insert(rows)
    assert _stored(from_file) == _stored(from_dicts)


def test_a_number_keeps_the_digits_it_is_written_with(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "note": "a"}\n{"id": 2, "note": 1.50}\n{"id": 3, "note": 1e3}\n')
    table = _table(tmp_path)
    table.insert(str(path))
    assert _stored(table) == {1: "a", 2: "1.50", 3: "1e3"}


def test_a_number_past_the_first_block_is_stored_as_text(tmp_path):
    lines = [json.dumps({"id": i, "note": f"n{i}"}) for i in range(30_000)]
    lines[25_000] = '{"id": 25000, "note": 7}'
    path = tmp_path / "late.jsonl"
    path.write_text("\n".join(lines) + "\n")
    table = _table(tmp_path)
    table.insert(str(path))
    stored = _stored(table)
    assert len(stored) == 30_000
    assert stored[25_000] == "7" and stored[24_999] == "n24999" and stored[29_999] == "n29999"


@pytest.mark.parametrize("value", ['{"a": 1}', "[1, 2]"])
@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_an_object_or_array_is_refused_naming_file_line_column_and_value(
    tmp_path, value, operation
):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "note": "a"}\n\n' + f'{{"id": 2, "note": {value}}}\n')
    table = _table(tmp_path)
    with pytest.raises(TypeMismatchError) as refused:
        getattr(table, operation)(str(path))
    message = str(refused.value)
    assert str(path) in message
    assert "column 'note' (VARCHAR)" in message
    assert json.dumps(json.loads(value), separators=(",", ":")) in message
    assert "(line 3: " in message
    assert table.version == 0
