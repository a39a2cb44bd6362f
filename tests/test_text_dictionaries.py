"""Text columns with a moderate number of distinct values are written with a dictionary (a
dictionary page holds each string once and readers need not copy every value); text with
mostly distinct values, and numbers as distinct, stay plain."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import ledger
from ledger.writer import dictionary_columns


def _rows(n: int, distinct: int) -> pa.Table:
    notes = pa.array([f"note-{i:05d}" for i in range(distinct)])
    positions = pa.array([(i * 7919) % distinct for i in range(n)])
    return pa.table(
        {
            "k": pa.array(range(n), pa.int64()),
            "s": notes.take(positions),
            "u": pa.array([f"id-{i}" for i in range(n)]),
            "a": pa.array([(i * 7919) % distinct for i in range(n)], pa.int64()),
        }
    )


def test_text_of_moderate_cardinality_gets_a_dictionary() -> None:
    """A sample 40% distinct: the text column gets a dictionary, the number as distinct and the
    unique text do not."""
    chosen = dictionary_columns(_rows(10_000, 4_000))
    assert "s" in chosen
    assert "a" not in chosen and "u" not in chosen and "k" not in chosen


def test_dictionary_text_reads_back_the_same(tmp_path: Path) -> None:
    """Rows written with the text dictionary read back exactly, in the file and through a view."""
    rows = _rows(10_000, 4_000)
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "s": "VARCHAR", "u": "VARCHAR", "a": "BIGINT"}, primary_key="k"
    )
    table.insert(rows)
    [marker] = table.snapshot().markers()
    parquet = pq.ParquetFile(tmp_path / "t" / marker.path)
    leaf = parquet.schema_arrow.names.index("s")
    assert "RLE_DICTIONARY" in parquet.metadata.row_group(0).column(leaf).encodings
    read = table.to_arrow().sort_by("k")
    assert read.select(["k", "s", "u", "a"]).to_pylist() == rows.to_pylist()
    table.update([{"k": 3, "s": "changed"}])
    assert [r["s"] for r in table.to_arrow().to_pylist() if r["k"] == 3] == ["changed"]
