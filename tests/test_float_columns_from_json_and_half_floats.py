"""A JSON-lines number too large for a FLOAT column is refused as from dicts and CSV (Arrow's
JSON reader would make it a FLOAT infinity), and half floats go into integer columns under the
rules of other floats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import ledger
from ledger.schema import TableSchema, conform


@pytest.mark.parametrize("text", ["1e39", "-1e39", "3.5e38", "1e300"])
def test_a_json_number_beyond_a_float_is_refused_and_nothing_written(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(f'{{"id": 1, "x": 1.5}}\n{{"id": 2, "x": {text}}}\n')
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "x": "FLOAT"}, primary_key="id"
    )
    with pytest.raises(ledger.TypeMismatchError, match=r"column 'x' \(FLOAT\)"):
        table.insert(str(path))
    assert table.refresh().version == 0


def test_json_numbers_within_a_float_are_stored_as_floats(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "x": 0.1}\n{"id": 2, "x": 3e38}\n{"id": 3, "x": -0.0}\n')
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "x": "FLOAT"}, primary_key="id"
    )
    table.insert(str(path))
    got = dict(table.scan().select("id, x").fetchall())
    assert got[1] == pytest.approx(0.1) and got[2] == pytest.approx(3e38, rel=1e-7)
    assert str(got[3]) == "-0.0"


@pytest.mark.parametrize(("value", "stored"), [(7.0, 7), (-2047.0, -2047), (2048.0, None)])
def test_half_floats_go_into_integer_columns_like_other_floats(
    value: float, stored: int | None
) -> None:
    data = pa.table({"v": pa.array([np.float16(value)], pa.float16())})
    if stored is None:
        with pytest.raises(ledger.TypeMismatchError, match="rounded"):
            conform(data, TableSchema.parse({"v": "BIGINT"}))
    else:
        got, _ = conform(data, TableSchema.parse({"v": "BIGINT"}))
        assert got.column("v").to_pylist() == [stored]
