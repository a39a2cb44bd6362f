"""One rule per family of input values, whatever the source and engine: text is parsed into
number, boolean, date and timestamp columns exactly as a CSV file's text is (refused when it does
not parse or would change), and NaN is missing only where the source says so (pandas)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import SchemaError, TypeMismatchError
from tests.conftest import examples

SCHEMA = {
    "id": "BIGINT",
    "price": "DECIMAL(18,2)",
    "qty": "INTEGER",
    "ratio": "DOUBLE",
    "day": "DATE",
    "booked_at": "TIMESTAMP",
    "ok": "BOOLEAN",
}
TEXT_COLUMNS = ["price", "qty", "ratio", "day", "booked_at", "ok"]


def _write_source(kind: str, rows: list[dict[str, str]], folder: Path) -> Any:
    """The same text rows as each source a write takes."""
    if kind == "dicts":
        return rows
    if kind == "pandas":
        return pd.DataFrame(rows, dtype=object)
    if kind in ("arrow", "duckdb"):
        table = pa.Table.from_pylist(rows, pa.schema([(c, pa.string()) for c in rows[0]]))
        return table if kind == "arrow" else duckdb.from_arrow(table)
    if kind == "polars":
        import polars as pl

        return pl.DataFrame(rows, schema={c: pl.String for c in rows[0]})
    if kind == "csv":
        path = folder / "rows.csv"
        columns = list(rows[0])
        lines = [",".join(columns)] + [",".join(f'"{r[c]}"' for c in columns) for r in rows]
        path.write_text("\n".join(lines) + "\n")
        return str(path)
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


SOURCES = ["dicts", "pandas", "arrow", "duckdb", "polars", "csv", "json"]
CENTS = st.integers(-(10**12), 10**12)


def _price_text(cents: int, pad: str) -> str:
    sign = "-" if cents < 0 else ""
    return f"{pad}{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}{pad}"


@settings(max_examples=examples(30))
@given(
    cents=st.lists(CENTS, min_size=1, max_size=6),
    pad=st.sampled_from(["", " "]),
    source=st.sampled_from(SOURCES),
)
def test_text_is_parsed_exactly_from_every_source(cents, pad, source, tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    table = ledger.connect(str(folder / "wh")).create_table("t", SCHEMA, primary_key="id")
    rows = [
        {
            "id": str(i),
            "price": _price_text(c, pad),
            "qty": str(c % 1000),
            "ratio": f"{c / 100}",
            "day": (dt.date(2000, 1, 1) + dt.timedelta(days=c % 3000)).isoformat(),
            "booked_at": f"2024-02-29 {c % 24:02d}:30:00",
            "ok": "true" if c % 2 else "false",
        }
        for i, c in enumerate(cents)
    ]
    table.insert(_write_source(source, rows, folder))
    stored = sorted(table.scan().select(", ".join(["id", *TEXT_COLUMNS])).fetchall())
    assert stored == [
        (
            i,
            decimal.Decimal(c) / 100,
            c % 1000,
            c / 100,
            dt.date(2000, 1, 1) + dt.timedelta(days=c % 3000),
            dt.datetime(2024, 2, 29, c % 24, 30),
            bool(c % 2),
        )
        for i, c in enumerate(cents)
    ]


UNPARSED = [
    ("price", "19.999"),  # would be rounded to the column's scale
    ("price", "12,50"),
    ("qty", "1.5"),
    ("qty", "3000000000"),  # beyond INTEGER
    ("day", "01/02/2026"),
    ("booked_at", "2024-02-29T10:00:00+02:00"),  # an offset into a TIMESTAMP without zone
    ("ok", "maybe"),
]


@pytest.mark.parametrize(("column", "text"), UNPARSED)
@pytest.mark.parametrize("source", SOURCES)
def test_text_that_does_not_parse_exactly_is_refused_from_every_source(
    column, text, source, tmp_path
):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    with pytest.raises(SchemaError, match=None if source == "csv" else column):
        table.insert(_write_source(source, [{"id": "1", column: text}], tmp_path))
    assert table.version == 0


def test_a_refused_text_names_its_column_and_value(local_location):
    table = local_location.connect().create_table("t", SCHEMA, primary_key="id")
    with pytest.raises(TypeMismatchError, match=r"'price' \(DECIMAL\(18,2\)\): value '19.999'"):
        table.upsert([{"id": 1, "price": "19.99"}, {"id": 2, "price": "19.999"}])
    assert table.version == 0


# --- NaN ------------------------------------------------------------------------------------------

FLOATS = st.lists(
    st.one_of(st.just(math.nan), st.integers(-(10**6), 10**6).map(lambda c: c / 100)),
    min_size=1,
    max_size=8,
)


def _ratios(table: ledger.Table) -> list[Any]:
    values = [v for _, v in sorted(table.scan().select("id, ratio").fetchall())]
    return ["nan" if isinstance(v, float) and math.isnan(v) else v for v in values]


@settings(max_examples=examples(20))
@given(values=FLOATS, source=st.sampled_from(["dicts", "arrow", "polars", "pandas"]))
def test_nan_is_a_value_except_where_pandas_marks_missing(values, source, tmp_path_factory):
    folder = tmp_path_factory.mktemp("nan")
    table = ledger.connect(str(folder / "wh")).create_table("t", SCHEMA, primary_key="id")
    rows = [{"id": i, "ratio": v} for i, v in enumerate(values)]
    data: Any = rows
    if source == "arrow":
        data = pa.Table.from_pylist(rows)
    elif source == "polars":
        import polars as pl

        data = pl.DataFrame(rows)
    elif source == "pandas":
        data = pd.DataFrame(rows)
    table.insert(data)
    missing = None if source == "pandas" else "nan"
    assert _ratios(table) == [missing if math.isnan(v) else v for v in values]


def test_pandas_nan_is_null_in_every_column_type_and_elsewhere_nan_is_refused_by_decimals(
    local_location,
):
    table = local_location.connect().create_table("t", SCHEMA, primary_key="id")
    table.insert(pd.DataFrame({"id": [1, 2], "price": [1.5, math.nan], "qty": [3, math.nan]}))
    assert sorted(table.scan().select("id, price, qty").fetchall()) == [
        (1, decimal.Decimal("1.50"), 3),
        (2, None, None),
    ]
    with pytest.raises(TypeMismatchError, match="price"):
        table.insert([{"id": 3, "price": math.nan}])
    with pytest.raises(TypeMismatchError, match="qty"):
        table.insert(pa.table({"id": [4], "qty": [math.nan]}))
    assert table.version == 1


# --- Spark: the same rules ------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_parses_text_and_keeps_nan_as_the_embedded_engine(spark, local_location):
    import ledger.spark as ls

    warehouse = local_location.connect()
    by_spark, embedded = (
        warehouse.create_table(name, SCHEMA, primary_key="id") for name in ("by_spark", "embedded")
    )
    rows = [
        {"id": "1", "price": "19.99", "qty": "7", "ratio": "NaN", "day": "2024-02-29"},
        {"id": "2", "price": " 0.1 ", "qty": "-3", "ratio": "2.5", "day": "1999-12-31"},
    ]
    frame = spark.createDataFrame(pd.DataFrame(rows, dtype=object))
    ls.insert(by_spark, frame)
    embedded.insert(rows)
    columns = "id, price, qty, CAST(ratio AS VARCHAR), day"
    assert (
        sorted(by_spark.scan().select(columns).fetchall())
        == sorted(embedded.scan().select(columns).fetchall())
        == [
            (1, decimal.Decimal("19.99"), 7, "nan", dt.date(2024, 2, 29)),
            (2, decimal.Decimal("0.10"), -3, "2.5", dt.date(1999, 12, 31)),
        ]
    )
    bad = spark.createDataFrame(pd.DataFrame({"id": ["3"], "price": ["19.999"]}))
    with pytest.raises(TypeMismatchError, match=r"19\.999"):
        ls.insert(by_spark, bad)
    assert by_spark.version == 1


# --- a column holding no value at all --------------------------------------------------------

EMPTY_COLUMN_TYPES = [
    "VARCHAR",
    "BIGINT",
    "INTEGER",
    "DECIMAL(18,2)",
    "DOUBLE",
    "FLOAT",
    "BOOLEAN",
    "DATE",
    "TIMESTAMP",
    "TIMESTAMPTZ",
    "BLOB",
]


def _all_missing(kind: str) -> Any:
    """Two rows whose ``note`` holds no value, as each source has such a column."""
    ids = [1, 2]
    if kind == "pandas NaN":
        return pd.DataFrame({"id": ids, "note": [math.nan, math.nan]})  # float64
    if kind == "pandas None":
        return pd.DataFrame({"id": ids, "note": pd.Series([None, None], dtype=object)})
    if kind == "arrow null":
        return pa.table({"id": ids, "note": pa.nulls(2)})
    if kind == "arrow float nulls":
        return pa.table({"id": ids, "note": pa.nulls(2, pa.float64())})
    if kind == "polars":
        import polars as pl

        return pl.DataFrame({"id": ids, "note": [None, None]})
    return {"id": ids, "note": [None, None]}  # a dict of lists


@pytest.mark.parametrize("column_type", EMPTY_COLUMN_TYPES)
@pytest.mark.parametrize(
    "kind",
    ["pandas NaN", "pandas None", "arrow null", "arrow float nulls", "polars", "dict of lists"],
)
def test_a_column_without_any_value_goes_into_every_type_as_nulls(
    local_location, kind, column_type
):
    table = local_location.connect().create_table(
        "notes", {"id": "BIGINT", "note": column_type}, primary_key="id"
    )
    table.insert(_all_missing(kind))
    assert table.scan().select("id, note").order("id").fetchall() == [(1, None), (2, None)]
    assert table.schema["note"] == column_type  # the column keeps its type


def test_an_empty_text_column_read_by_pandas_read_csv_is_written_as_nulls(local_location, tmp_path):
    (tmp_path / "notes.csv").write_text("id,note\n1,\n2,\n")
    frame = pd.read_csv(tmp_path / "notes.csv")
    assert str(frame["note"].dtype) == "float64"  # how pandas reads a column of empty fields
    table = local_location.connect().create_table(
        "notes", {"id": "BIGINT", "note": "VARCHAR"}, primary_key="id"
    )
    table.insert([{"id": 1, "note": "kept"}])
    table.upsert(frame)  # the column is given for every row: it sets NULL
    assert views.visible(table).order("id").fetchall() == [(1, None), (2, None)]


def test_arrow_nan_stays_a_value_and_is_refused_by_a_text_column(local_location):
    table = local_location.connect().create_table(
        "notes", {"id": "BIGINT", "note": "VARCHAR"}, primary_key="id"
    )
    with pytest.raises(TypeMismatchError, match="'note' is VARCHAR but the data holds double"):
        table.insert(pa.table({"id": [1], "note": [math.nan]}))
    assert table.version == 0


PANDAS_MISSING = {
    "naive NaT": lambda: pd.Series([pd.NaT, pd.NaT], dtype="datetime64[ns]"),
    "zoned NaT": lambda: pd.Series([pd.NaT, pd.NaT], dtype="datetime64[ns, Europe/Paris]"),
    "timedelta NaT": lambda: pd.Series([pd.NaT, pd.NaT], dtype="timedelta64[ns]"),
    "Int64 NA": lambda: pd.Series([pd.NA, pd.NA], dtype="Int64"),
    "Float64 NA": lambda: pd.Series([pd.NA, pd.NA], dtype="Float64"),
    "boolean NA": lambda: pd.Series([pd.NA, pd.NA], dtype="boolean"),
    "string NA": lambda: pd.Series([pd.NA, pd.NA], dtype="string"),
    "category NaN": lambda: pd.Series([None, None], dtype="category"),
}


@pytest.mark.parametrize("dtype", list(PANDAS_MISSING))
def test_a_pandas_column_without_any_value_goes_in_as_nulls_whatever_its_dtype(
    local_location, dtype
):
    """A column of missing values carries no value that could be of the wrong type: it goes into
    every nullable column as NULLs, whatever its pandas dtype (a naive NaT column into
    TIMESTAMPTZ included)."""
    columns = {f"c{i}": kind for i, kind in enumerate(EMPTY_COLUMN_TYPES)}
    table = local_location.connect().create_table(
        "notes", {"id": "BIGINT", **columns}, primary_key="id"
    )
    frame = pd.DataFrame({"id": [1, 2], **{name: PANDAS_MISSING[dtype]() for name in columns}})
    table.insert(frame)
    rows = table.scan().select(", ".join(["id", *columns])).order("id").fetchall()
    assert rows == [(1, *[None] * len(columns)), (2, *[None] * len(columns))]
    assert dict(table.schema) == {"id": "BIGINT", **columns}  # the columns keep their types


def test_a_key_column_without_any_value_is_still_refused(local_location):
    table = local_location.connect().create_table(
        "events", {"at": "TIMESTAMPTZ", "note": "VARCHAR"}, primary_key="at"
    )
    frame = pd.DataFrame({"at": PANDAS_MISSING["naive NaT"](), "note": ["a", "b"]})
    with pytest.raises(ledger.MissingKeyError, match="'at' holds NULL"):
        table.insert(frame)
    assert table.version == 0
