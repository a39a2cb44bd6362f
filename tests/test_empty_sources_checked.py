"""A source holding columns and no rows has its columns checked as the same source with rows
would, whatever its kind (pandas, polars, Arrow, a dict of lists, a stream, a DuckDB relation,
a file) and whatever the write: a column the table lacks is refused with UnknownColumnError,
and upsert, update and delete refuse a source without the key columns with MissingKeyError,
as they refuse one with rows. A source naming the table's columns with no rows is empty data,
and an empty list of dicts names no column: both write nothing."""

from __future__ import annotations

import decimal
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(10,2)"}
VALUES: dict[str, Any] = {"id": 1, "name": "x", "amount": decimal.Decimal("2.50")}
KINDS = ["pandas", "polars", "arrow", "batch", "reader", "dict", "relation", "parquet", "csv"]
OPERATIONS = ["insert", "upsert", "update", "delete", "check"]


def _table(root: Path) -> ledger.Table:
    return ledger.connect(str(root / "wh")).create_table("t", SCHEMA, primary_key="id")


def _source(kind: str, names: list[str], rows: int, folder: Path) -> Any:
    """A source of ``kind`` with columns ``names`` and ``rows`` rows (0 or 1) of fitting
    values (1 in a column the table lacks)."""
    values = {name: [VALUES.get(name, 1)] * rows for name in names}
    arrow = pa.table(
        {
            name: pa.array(column, pa.decimal128(10, 2) if name == "amount" else None)
            if rows
            else pa.array([], pa.table({name: [VALUES.get(name, 1)]}).column(0).type)
            for name, column in values.items()
        }
    )
    if kind == "pandas":
        return arrow.to_pandas()
    if kind == "polars":
        return pl.from_arrow(arrow)
    if kind == "arrow":
        return arrow
    if kind == "batch":
        return arrow.combine_chunks().to_batches()[0] if rows else arrow.schema.empty_table()
    if kind == "reader":
        return pa.RecordBatchReader.from_batches(arrow.schema, arrow.to_batches())
    if kind == "dict":
        return values
    if kind == "relation":
        return duckdb.connect().from_arrow(arrow)
    path = folder / f"source{rows}.{kind}"
    if kind == "parquet":
        pq.write_table(arrow, path)
    else:
        row = ",".join(str(VALUES.get(name, 1)) for name in names)
        path.write_text(",".join(names) + "\n" + (row + "\n" if rows else ""))
    return str(path)


def _outcome(table: ledger.Table, operation: str, source: Any) -> tuple[str, str]:
    try:
        info = getattr(table, operation)(source)
    except ledger.KeyNotFoundError:  # an update of a key the table lacks: about its rows
        return "written", ""
    except ledger.LedgerError as e:
        return type(e).__name__, ""
    return "written", "" if info is None or info.version is None else str(info.version)


_NAMES = st.lists(
    st.sampled_from(["id", "name", "amount", "ident", "nope", "Name"]),
    min_size=1,
    max_size=3,
    unique=True,
)


@settings(max_examples=examples(25), deadline=None)
@given(names=_NAMES, kind=st.sampled_from(KINDS), operation=st.sampled_from(OPERATIONS))
def test_a_source_without_rows_is_checked_as_the_same_source_with_a_row(
    names: list[str], kind: str, operation: str
) -> None:
    """Oracle: the same source with one row. Refused alike when it names a column the table
    lacks or a name twice (and, for keyed operations, when it lacks a key column); otherwise
    the source without rows writes nothing."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        table = _table(root)
        empty = _outcome(table, operation, _source(kind, names, 0, root))
        with_row = _outcome(table, operation, _source(kind, names, 1, root))
        keyed = operation in ("upsert", "update", "delete")
        if with_row[0] == "written" or (not keyed and with_row[0] == "MissingKeyError"):
            assert empty == ("written", ""), (kind, names)
        else:
            assert empty == with_row, (kind, names)
        assert table.refresh().version == (1 if with_row == ("written", "1") else 0)


@pytest.mark.parametrize(
    "source",
    [
        pd.DataFrame({"nope": pd.Series([], dtype="int64")}),
        {"idd": []},
        pl.DataFrame({"nope": pl.Series([], dtype=pl.Int64)}),
        pa.table({"nope": pa.array([], pa.int64())}),
    ],
    ids=["pandas", "dict", "polars", "arrow"],
)
def test_an_empty_source_naming_an_unknown_column_is_refused(tmp_path: Path, source: Any) -> None:
    table = _table(tmp_path)
    for write in (table.insert, table.upsert, table.update, table.check):
        with pytest.raises(ledger.UnknownColumnError):
            write(source)
    with table.transaction() as tx, pytest.raises(ledger.UnknownColumnError):
        tx.append_entries(source)
    with table.writer() as writer, pytest.raises(ledger.UnknownColumnError):
        writer.write(source)
    assert table.refresh().version == 0


def test_an_empty_list_and_empty_sources_of_the_tables_columns_write_nothing(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path)
    empty_frame = pd.DataFrame({"id": pd.Series([], dtype="int64")})
    for source in ([], empty_frame, {"id": [], "name": []}):
        for write in (table.insert, table.upsert, table.update, table.delete):
            assert write(source).version is None
    assert table.refresh().version == 0


@pytest.mark.parametrize("operation", ["insert", "upsert", "delete", "check"])
@pytest.mark.parametrize(
    "source",
    [
        pd.DataFrame({"id": [], "name": [], "amount": []}),  # float64 / object by pandas' choice
        pd.DataFrame({"id": pd.Series([], dtype="float64"), "name": pd.Series([], dtype=object)}),
        pa.table({"id": pa.array([], pa.float64()), "name": pa.array([], pa.null())}),
        {"id": [], "name": [], "amount": []},
    ],
    ids=["pandas-empty-lists", "pandas-dtypes", "arrow-float-and-null", "dict"],
)
def test_empty_columns_of_any_type_hold_no_wrong_value(
    tmp_path: Path, source: Any, operation: str
) -> None:
    """``pd.DataFrame({"id": [], "v": []})`` gives its columns float64: with no value in them,
    no value is of the wrong type, so the frame is empty data, as a float or null column of
    missing values alone goes into a column of any type (an empty column of another type is
    checked as one with values: a transform's output is checked so when it is set)."""
    table = _table(tmp_path)
    info = getattr(table, operation)(source)
    assert info is None or info.version is None
    assert table.refresh().version == 0
