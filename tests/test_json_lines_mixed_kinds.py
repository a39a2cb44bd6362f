"""JSON lines whose column mixes numbers, booleans and text (an event feed's ``1.5`` beside
``"1.50"``) are stored as the same rows given as dicts: each value converted by the rule for
its own kind, whichever block of the file the mix starts in; a refused value names its line."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import ledger.inputs
import views
from tests.conftest import examples

SCHEMA = {
    "id": "BIGINT",
    "amount": "DECIMAL(10,2)",
    "n": "INTEGER",
    "ratio": "DOUBLE",
    "ok": "BOOLEAN",
}
TABLE_NUMBERS = itertools.count()


def _as_text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_VALUES = {
    "amount": st.decimals(-(10**6), 10**6, places=2).map(lambda d: d.normalize() or Decimal(0)),
    "n": st.integers(-(2**31), 2**31 - 1),
    "ratio": st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: round(f, 3)),
    "ok": st.booleans(),
}


@st.composite
def _rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 12))
    rows = []
    for key in range(count):
        row: dict[str, Any] = {"id": key}
        for name, values in _VALUES.items():
            form = draw(st.sampled_from(["number", "text", "null", "absent"]))
            if form == "absent":
                continue
            value = None if form == "null" else draw(values)
            if isinstance(value, Decimal):
                value = float(value) if form == "number" else value
            row[name] = _as_text(value) if form == "text" and value is not None else value
        rows.append(row)
    return rows


def _visible(table: ledger.Table) -> list[dict[str, Any]]:
    return sorted(views.visible(table).to_arrow_table().to_pylist(), key=lambda r: r["id"])


@given(rows=_rows(), block_bytes=st.sampled_from([256, 1 << 18]), upsert=st.booleans())
@settings(max_examples=examples(10), deadline=None)
def test_a_column_mixing_numbers_and_text_is_stored_as_dicts_store_it(
    local_location, rows, block_bytes, upsert
):
    warehouse = local_location.connect()
    number = next(TABLE_NUMBERS)
    from_file = warehouse.create_table(f"file{number}", SCHEMA, primary_key="id")
    from_dicts = warehouse.create_table(f"dicts{number}", SCHEMA, primary_key="id")
    path = Path(local_location.uri) / f"mixed{number}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    saved = ledger.inputs.TEXT_BLOCK_BYTES
    ledger.inputs.TEXT_BLOCK_BYTES = block_bytes  # small blocks: the mix starts in a later one
    try:
        (from_file.upsert if upsert else from_file.insert)(str(path))
    finally:
        ledger.inputs.TEXT_BLOCK_BYTES = saved
    (from_dicts.upsert if upsert else from_dicts.insert)(rows)
    assert _visible(from_file) == _visible(from_dicts)


@pytest.mark.parametrize("block_bytes", [64, 1 << 18])
@pytest.mark.parametrize(
    ("value", "says"),
    [('"1.001"', "more than 2 decimal place(s)"), ("1.001", "more than 2 decimal place(s)")],
)
def test_a_refused_value_in_a_mixed_column_names_its_line_once(
    local_location, block_bytes, value, says
):
    table = local_location.connect().create_table(
        f"t{next(TABLE_NUMBERS)}", SCHEMA, primary_key="id"
    )
    lines = [
        f'{{"id": {i}, "amount": {"1" if i % 2 else chr(34) + "2.25" + chr(34)}}}' for i in range(9)
    ]
    lines.append(f'{{"id": 9, "amount": {value}}}')
    path = Path(local_location.uri) / f"bad{next(TABLE_NUMBERS)}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    saved = ledger.inputs.TEXT_BLOCK_BYTES
    ledger.inputs.TEXT_BLOCK_BYTES = block_bytes
    try:
        with pytest.raises(ledger.TypeMismatchError) as raised:
            table.insert(str(path))
    finally:
        ledger.inputs.TEXT_BLOCK_BYTES = saved
    message = str(raised.value)
    assert says in message and "(line 10:" in message, message
    assert message.count(str(path)) == 1, message
    assert "changed from" not in message
    assert table.version == 0
