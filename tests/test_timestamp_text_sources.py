"""Timestamps written as text follow one rule whatever source carries them (CSV, JSON lines,
dicts, pandas, Spark): a column keeps microseconds, so digits beyond them that are zeros are
dropped and nonzero ones are refused with ``TypeMismatchError`` naming the value, before
anything is written; the value stored is the one an Arrow timestamp of the same instant
stores."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples
from tests.test_csv_nanosecond_timestamps import written_timestamps

Written = tuple[int, str, int | None]


def _outcome(table: ledger.Table, data: Any) -> object:
    """The rows a write stores, or the type of the error it raises (nothing written)."""
    try:
        table.insert(data)
    except ledger.LedgerError as e:
        assert table.version == 0
        return type(e)
    return sorted(views.visible(table).fetchall())


def _as_arrow(written: list[Written], zoned: bool) -> pa.Table:
    """The same values as an Arrow nanosecond timestamp column (instants in UTC when zoned)."""
    values = [nanos - (offset or 0) * 60 * 10**9 for nanos, _, offset in written]
    kind = pa.timestamp("ns", tz="UTC" if zoned else None)
    return pa.table({"id": list(range(len(written))), "at": pa.array(values, kind)})


def _sources(folder: Path, written: list[Written]) -> dict[str, Any]:
    """The texts of ``written`` as every source that carries text."""
    rows = [{"id": i, "at": text} for i, (_, text, _) in enumerate(written)]
    csv, lines = folder / "at.csv", folder / "at.jsonl"
    csv.write_text("id,at\n" + "".join(f"{row['id']},{row['at']}\n" for row in rows))
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {
        "dicts": rows,
        "dict of lists": {"id": [r["id"] for r in rows], "at": [r["at"] for r in rows]},
        "pandas": pd.DataFrame(rows),
        "csv": str(csv),
        "json lines": str(lines),
    }


@settings(max_examples=examples(30), deadline=None)
@given(
    column=st.sampled_from(["TIMESTAMP", "TIMESTAMPTZ"]),
    written=st.lists(written_timestamps(), min_size=1, max_size=5),
)
def test_every_text_source_stores_what_arrow_stores(tmp_path_factory, column, written):
    zoned = column == "TIMESTAMPTZ"
    # Text whose offset does not suit the column is refused by each source in its own words.
    written = [w for w in written if (w[2] is not None) == zoned] or [
        (0, "1970-01-01 00:00:00" + ("Z" if zoned else ""), 0 if zoned else None)
    ]
    folder = tmp_path_factory.mktemp("sources")
    warehouse = ledger.connect(folder / "wh")
    schema = {"id": "BIGINT", "at": column}
    arrow = _as_arrow(written, zoned)
    expected = _outcome(warehouse.create_table("arrow", schema, primary_key="id"), arrow)
    lossy = any(nanos % 1000 for nanos, _, _ in written)
    assert expected is ledger.TypeMismatchError if lossy else isinstance(expected, list)
    for number, (source, data) in enumerate(_sources(folder, written).items()):
        table = warehouse.create_table(f"t{number}", schema, primary_key="id")
        assert _outcome(table, data) == expected, source


@pytest.mark.parametrize(
    ("column", "text", "stored"),
    [
        ("TIMESTAMP", "2024-01-02 03:04:05.123456000", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
        ("TIMESTAMP", " 2024-01-02T03:04:05.10000000 ", dt.datetime(2024, 1, 2, 3, 4, 5, 100000)),
        (
            "TIMESTAMPTZ",
            "2024-01-02 03:04:05.123456000+01:00",
            dt.datetime(2024, 1, 2, 2, 4, 5, 123456, tzinfo=dt.UTC),
        ),
        (
            "TIMESTAMPTZ",
            "9999-12-31T23:59:59.999999000Z",
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
        ),
    ],
)
@pytest.mark.parametrize("source", ["dicts", "json lines", "upsert json lines"])
def test_zero_nanosecond_digits_are_dropped(tmp_path: Path, source, column, text, stored):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "at": column}, primary_key="id"
    )
    row = {"id": 1, "at": text}
    path = tmp_path / "at.jsonl"
    path.write_text(json.dumps(row) + "\n")
    if source == "dicts":
        table.insert([row])
    elif source == "json lines":
        table.insert(str(path))
    else:
        table.upsert(str(path))
    assert [r[:2] for r in views.visible(table).fetchall()] == [(1, stored)]


@pytest.mark.parametrize(
    ("column", "text"),
    [
        ("TIMESTAMP", "2024-01-02 03:04:05.123456789"),
        ("TIMESTAMP", "2024-01-02 03:04:05.1234561"),
        ("TIMESTAMPTZ", "2024-01-02 03:04:05.123456700-0530"),
    ],
)
@pytest.mark.parametrize("source", ["dicts", "json lines"])
def test_nonzero_nanosecond_digits_are_refused_naming_the_value(
    tmp_path: Path, source, column, text
):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "at": column}, primary_key="id"
    )
    good = "2024-01-01 00:00:00" + ("Z" if column == "TIMESTAMPTZ" else "")
    rows = [{"id": 1, "at": good}, {"id": 2, "at": text}]
    path = tmp_path / "at.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(
        ledger.TypeMismatchError,
        match=rf"column 'at' \({column}\): value '{text}' does not fit: a {column} keeps "
        "microseconds",
    ):
        table.insert(rows if source == "dicts" else str(path))
    assert table.version == 0
    assert not list(table.store.list(table.prefix + "_data/"))


@pytest.mark.spark
def test_spark_text_columns_follow_the_same_rule(spark: Any, tmp_path: Path) -> None:
    import ledger.spark as ls

    warehouse = ledger.connect(tmp_path / "wh")
    schema = {"id": "BIGINT", "at": "TIMESTAMP", "zoned": "TIMESTAMPTZ"}
    rows = [
        {"id": 1, "at": "2024-01-02 03:04:05.123456000", "zoned": "2024-01-02T03:04:05.5000Z"},
        {"id": 2, "at": "2024-01-02 03:04:05.1", "zoned": "2024-01-02 03:04:05.123456000+01:00"},
    ]
    embedded = warehouse.create_table("embedded", schema, primary_key="id")
    embedded.insert(rows)
    on_spark = warehouse.create_table("on_spark", schema, primary_key="id")
    frame = spark.createDataFrame(pd.DataFrame(rows))
    ls.insert(on_spark, frame)
    assert views.visible(on_spark).order("id").fetchall() == (
        views.visible(embedded).order("id").fetchall()
    )
    refused = pd.DataFrame([{"id": 3, "at": "2024-01-02 03:04:05.123456789", "zoned": None}])
    with pytest.raises(ledger.TypeMismatchError, match=r"value '2024-01-02 03:04:05\.123456789'"):
        ls.insert(on_spark, spark.createDataFrame(refused))
    assert on_spark.version == 1
