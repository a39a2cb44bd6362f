"""Parquet files written by pandas carry the frame's index beside the data: ``to_parquet`` of a
filtered frame stores its row numbers as ``__index_level_0__``. Loading such a file writes what
loading the frame itself writes: row numbering is left out, an index named like a table column is
that column."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

import ledger
import views

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "amount": "DECIMAL(10,2)"}


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"id": [1, 2, 3, 4], "region": ["eu", "us", "eu", "apac"], "amount": [1.5, 2.25, 3.0, 4.1]}
    )


@pytest.mark.parametrize(
    "shape",
    ["filtered", "named row numbers", "indexed by key", "range index"],
)
def test_a_parquet_file_from_pandas_loads_as_its_frame_does(tmp_path: Path, shape: str) -> None:
    frame = _frame()
    if shape == "filtered":
        frame = frame[frame.id > 1]  # row numbers 1..3, stored as __index_level_0__
    elif shape == "named row numbers":
        frame = frame.rename_axis("line")
    elif shape == "indexed by key":
        frame = frame.set_index("id")
    path = tmp_path / "orders.parquet"
    frame.to_parquet(path)
    warehouse = ledger.connect(str(tmp_path / "wh"))
    from_file = warehouse.create_table("from_file", SCHEMA, primary_key="id")
    from_frame = warehouse.create_table("from_frame", SCHEMA, primary_key="id")
    from_file.insert(str(path))
    from_frame.insert(frame)
    assert from_file.schema == from_frame.schema
    assert sorted(views.visible(from_file).fetchall()) == sorted(
        views.visible(from_frame).fetchall()
    )
    assert sorted(views.visible(from_file).fetchall())[-1][:3] == (4, "apac", Decimal("4.10"))


def test_a_file_column_named_like_pandas_numbering_is_kept_when_the_table_has_it(
    tmp_path: Path,
) -> None:
    frame = _frame()[lambda f: f.id > 2]
    path = tmp_path / "orders.parquet"
    frame.to_parquet(path)
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {**SCHEMA, "__index_level_0__": "BIGINT"}, primary_key="id"
    )
    table.insert(str(path))
    assert sorted(table.scan().select('id, "__index_level_0__"').fetchall()) == [(3, 2), (4, 3)]


def test_a_plain_parquet_file_with_an_unknown_column_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "orders.parquet"
    _frame().assign(extra=1).to_parquet(path, index=False)
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    with pytest.raises(ledger.UnknownColumnError, match="extra"):
        table.insert(str(path))
    assert table.refresh().version == 0
