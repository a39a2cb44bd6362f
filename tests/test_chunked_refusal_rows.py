"""A value refused in a DataFrame, an Arrow table of several record batches or a stream of
batches names its row in the whole input (counting from 0), whichever chunk it was written in:
large inputs are written in chunks, and a row numbered within its chunk would point elsewhere.
The chunk size is made small here, so a few rows make several chunks."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any
from unittest import mock

import pandas as pd
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
import ledger.transaction
from tests.conftest import Location, examples

SCHEMA = {"id": "BIGINT", "amount": "DECIMAL(10,2)"}
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.decimal128(12, 4))])
# In-memory data is cut into chunks of four times this, streams gathered into chunks of it.
CHUNK_ROWS = 2
TABLE_NUMBERS = itertools.count()


def _source(rows: list[dict[str, Any]], kind: str, batch_rows: int) -> Any:
    arrow = pa.Table.from_pylist(rows, ARROW_SCHEMA)
    batches = arrow.to_batches(max_chunksize=batch_rows)
    if kind == "pandas":
        return pd.DataFrame(rows)
    if kind == "arrow batches":
        return pa.Table.from_batches(batches, ARROW_SCHEMA)
    return pa.RecordBatchReader.from_batches(ARROW_SCHEMA, batches)


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    size=st.integers(1, 30),
    data=st.data(),
    kind=st.sampled_from(["pandas", "arrow batches", "batch stream"]),
    batch_rows=st.integers(1, 7),
    entries=st.booleans(),
)
def test_a_refused_value_names_its_row_in_the_whole_input(
    local_location: Location,
    size: int,
    data: st.DataObject,
    kind: str,
    batch_rows: int,
    entries: bool,
) -> None:
    at = data.draw(st.integers(0, size - 1))
    rows: list[dict[str, Any]] = [{"id": i, "amount": Decimal("1.25")} for i in range(size)]
    rows[at]["amount"] = Decimal("1.234")  # more decimal places than the column keeps
    table = local_location.connect().create_table(
        f"t{next(TABLE_NUMBERS)}", SCHEMA, primary_key="id"
    )
    source = _source(rows, kind, batch_rows)
    if entries:
        source = _with_signs(source)
    write = table.append_entries if entries else table.insert
    with mock.patch.object(ledger.transaction, "STREAM_CHUNK_ROWS", CHUNK_ROWS):
        try:
            write(source)
        except ledger.TypeMismatchError as refused:
            message = str(refused)
        else:
            raise AssertionError("the value was not refused")
    named = (
        f"row {at} of the DataFrame (counting from 0)"
        if kind == "pandas"
        else f"row {at} (counted from 0)"
    )
    assert named in message, message
    assert "has more than 2 decimal place(s)" in message, message
    assert table.version == 0


def _with_signs(source: Any) -> Any:
    """The same rows as insertions carrying their dml_type (+1)."""
    if isinstance(source, pd.DataFrame):
        return source.assign(dml_type=1)
    if isinstance(source, pa.Table):
        return source.append_column("dml_type", pa.array([1] * source.num_rows, pa.int8()))
    batches = [
        pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array([1] * batch.num_rows, pa.int8())],
            names=[*batch.schema.names, "dml_type"],
        )
        for batch in source
    ]
    schema = ARROW_SCHEMA.append(pa.field("dml_type", pa.int8()))
    return pa.RecordBatchReader.from_batches(schema, batches)
