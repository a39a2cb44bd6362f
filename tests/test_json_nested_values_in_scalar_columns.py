"""A JSON object or array in a JSON-lines column the table holds as a number, boolean, date or
timestamp is refused as any value of the wrong kind is: ``TypeMismatchError`` naming the
column, the value, its JSON kind and its line, wherever in the file it is and whatever the
lines before it hold; nothing is written."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError
from tests.conftest import examples

SCALARS = {
    "BIGINT": [3, "4"],
    "DECIMAL(10,2)": [1.5, "2.25"],
    "BOOLEAN": [True, "false"],
    "DOUBLE": [0.5, "1e3"],
    "DATE": ["2024-01-02"],
    "TIMESTAMPTZ": ["2024-01-02T03:04:05Z"],
}
NESTED = st.one_of(
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2),
    st.lists(st.integers(0, 9), max_size=3),
)


@settings(max_examples=examples(20), deadline=None)
@given(
    sql=st.sampled_from(sorted(SCALARS)),
    data=st.data(),
    nested=NESTED,
    operation=st.sampled_from(["insert", "upsert"]),
)
def test_an_object_or_array_in_a_scalar_column_is_refused_naming_it(
    sql: str, data: st.DataObject, nested: Any, operation: str
) -> None:
    before = data.draw(st.lists(st.sampled_from([*SCALARS[sql], None]), max_size=3))
    blank = data.draw(st.booleans())
    lines = [json.dumps({"id": i, "v": value}) for i, value in enumerate(before)]
    lines.append(json.dumps({"id": len(before), "v": nested}))
    if blank:
        lines.insert(0, "")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        table = ledger.connect(str(root / "wh")).create_table(
            "t", {"id": "BIGINT", "v": sql}, primary_key="id"
        )
        path = root / "rows.jsonl"
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(TypeMismatchError) as refused:
            getattr(table, operation)(str(path))
        message = str(refused.value)
        kind = "object" if isinstance(nested, dict) else "array"
        written = json.dumps(nested, separators=(",", ":"))
        assert f"column 'v' ({sql}): value {written} is a JSON {kind}" in message
        assert f"(line {len(lines)}: " in message
        assert table.refresh().version == 0
