"""``table.to_pandas()`` gives the dtypes DuckDB's ``relation.df()`` gives for the same rows
(the oracle), DECIMAL aside (Python ``Decimal`` values, never floats): nullable integers of the
column's width and ``boolean`` where a column holds NULL, ``datetime64[us]`` for DATE; the values
are the rows' own, and the frame writes back into a table of the same schema unchanged."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import duckdb
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples
from tests.support.scratch import scratch_dir

VALUES: dict[str, st.SearchStrategy[Any]] = {
    "BOOLEAN": st.booleans(),
    "TINYINT": st.integers(-(2**7), 2**7 - 1),
    "SMALLINT": st.integers(-(2**15), 2**15 - 1),
    "INTEGER": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),
    "DECIMAL(12,2)": st.decimals(-(10**9), 10**9, places=2, allow_nan=False),
    "VARCHAR": st.text(max_size=5),
    "DATE": st.dates(dt.date(1900, 1, 1), dt.date(2200, 12, 31)),
    "TIMESTAMP": st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)),
}


@st.composite
def tables(draw: st.DrawFn) -> tuple[dict[str, str], list[dict[str, Any]]]:
    kinds = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=4))
    schema = {"id": "BIGINT", **{f"c{i}": kind for i, kind in enumerate(kinds)}}
    # each column holds NULL or not (the dtype depends on it)
    nulls = {f"c{i}": draw(st.booleans()) for i in range(len(kinds))}
    rows = []
    for row_id in range(draw(st.integers(1, 4))):
        row: dict[str, Any] = {"id": row_id}
        for i, kind in enumerate(kinds):
            name = f"c{i}"
            value = draw(VALUES[kind])
            row[name] = None if nulls[name] and row_id == 0 else value
        rows.append(row)
    return schema, rows


def _cell(value: Any) -> Any:
    """A frame's value as a comparable Python value (NULL as None)."""
    if value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value.item() if hasattr(value, "item") else value


@settings(max_examples=examples(15))
@given(tables())
def test_to_pandas_gives_duckdbs_dtypes_and_the_rows_values(
    drawn: tuple[dict[str, str], list[dict[str, Any]]],
) -> None:
    schema, rows = drawn
    with scratch_dir("pandas-dtypes-") as folder:
        warehouse = ledger.connect(folder)
        table = warehouse.create_table("t", schema, primary_key="id")
        table.insert(rows)
        frame = table.to_pandas().sort_values("id", ignore_index=True)
        with duckdb.connect() as con:
            oracle = con.from_arrow(table.to_arrow()).order("id").df()
        for name, kind in schema.items():
            if kind.startswith("DECIMAL"):
                assert frame[name].dtype == object
                assert all(v is None or isinstance(v, Decimal) for v in frame[name])
            else:
                assert frame[name].dtype == oracle[name].dtype, (name, kind)
            expected = [r[name] for r in sorted(rows, key=lambda r: r["id"])]
            if kind == "DATE":
                expected = [
                    None if d is None else dt.datetime.combine(d, dt.time()) for d in expected
                ]
            assert [_cell(v) for v in frame[name]] == expected, (name, kind)

        again = warehouse.create_table("again", schema, primary_key="id")
        again.insert(frame)
        assert again.to_arrow().sort_by("id").equals(table.to_arrow().sort_by("id"))
