"""NaN, Infinity and -Infinity in JSON lines (not JSON, but what Python's ``json.dumps``
writes): a float column stores them; any other column refuses them with a typed error naming
the column, never a crash of the reader's refusal."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import ledger

COLUMNS = {
    "id": "BIGINT",
    "n": "INTEGER",
    "d": "DECIMAL(10,2)",
    "ts": "TIMESTAMPTZ",
    "dt": "DATE",
    "b": "BOOLEAN",
    "s": "VARCHAR",
    "f": "DOUBLE",
}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("column", sorted(COLUMNS))
def test_a_json_constant_is_stored_by_a_float_column_and_refused_by_others(
    tmp_path: Path, column: str, constant: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", COLUMNS, primary_key="id")
    source = tmp_path / "rows.jsonl"
    key = constant if column == "id" else "1"
    value = f', "{column}": {constant}' if column != "id" else ""
    source.write_text(f'{{"id": 2}}\n{{"id": {key}{value}}}\n')
    if column == "f":
        table.insert(str(source))
        stored = dict(table.scan().select("id, f").fetchall())
        assert math.isnan(stored[1]) if constant == "NaN" else stored[1] == float(constant)
        return
    with pytest.raises(ledger.LedgerError) as refused:
        table.insert(str(source))
    assert f"'{column}'" in str(refused.value) or f"/{column})" in str(refused.value)
    assert "line 2" in str(refused.value)
    assert table.refresh().version == 0
