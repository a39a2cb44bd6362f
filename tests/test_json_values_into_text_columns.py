"""A JSON-lines file gives a VARCHAR column a number or boolean: it is stored as its JSON text as
written (``1.50`` stays ``"1.50"``, ``true`` is ``"true"``), as a list of dicts stores such a
value and as Spark's and DuckDB's JSON readers do; an object or array is refused with
TypeMismatchError naming the file, line, column, value and the column's type."""

from __future__ import annotations

import json
from decimal import Decimal
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


_DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
    lambda d: abs(d.adjusted()) < 400  # a JSON reader's double holds its exponent
)


@settings(max_examples=examples(25))
@given(
    values=st.lists(
        st.one_of(st.none(), _DECIMALS, st.text(max_size=3), st.integers(-99, 99)),
        min_size=1,
        max_size=6,
    ).filter(lambda vs: any(isinstance(v, Decimal) for v in vs)),
    through_writer=st.booleans(),
)
def test_decimals_are_stored_as_the_text_json_lines_store(tmp_path_factory, values, through_writer):
    """A Decimal from a dict (or the buffered writer) into a VARCHAR column is its text,
    ``str(Decimal("1.50"))`` = ``"1.50"``: what a JSON-lines file writing the number so stores."""
    tmp = tmp_path_factory.mktemp("d")
    rows = [{"id": i, "note": v} for i, v in enumerate(values)]
    path = tmp / "in.jsonl"
    lines = [
        f'{{"id": {i}, "note": {v}}}' if isinstance(v, Decimal) else json.dumps(row)
        for i, (v, row) in enumerate(zip(values, rows, strict=True))
    ]
    path.write_text("".join(line + "\n" for line in lines))
    from_file, from_dicts = _table(tmp / "a"), _table(tmp / "b")
    from_file.insert(str(path))
    if through_writer:
        with from_dicts.writer() as writer:
            writer.write(rows)
    else:
        from_dicts.insert(rows)
    assert _stored(from_dicts) == _stored(from_file)
    decimals = {i: str(v) for i, v in enumerate(values) if isinstance(v, Decimal)}
    assert {i: _stored(from_dicts)[i] for i in decimals} == decimals


def test_a_decimal_alone_is_its_text(tmp_path):
    table = _table(tmp_path)
    table.insert([{"id": 1, "note": Decimal("1.50")}, {"id": 2, "note": Decimal("-2E+3")}])
    assert _stored(table) == {1: "1.50", 2: "-2E+3"}
