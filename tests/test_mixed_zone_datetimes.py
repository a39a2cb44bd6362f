"""Naive and zoned datetimes into one TIMESTAMP column convert each as it would alone (a zoned
one as its UTC time, a naive one as it is), whatever its neighbours: a list of dicts, a pandas
object column and the buffered writer store what inserting each row alone stores. Into a
TIMESTAMPTZ column a naive datetime is refused alone, and so it is among zoned ones."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError

OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
NAIVE = st.datetimes(min_value=dt.datetime(1900, 1, 2), max_value=dt.datetime(2200, 1, 1))
VALUES = st.one_of(st.none(), NAIVE, st.builds(lambda d, z: d.replace(tzinfo=z), NAIVE, OFFSETS))


def _alone(value: dt.datetime | None) -> dt.datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(dt.UTC).replace(tzinfo=None)


@given(
    values=st.lists(VALUES, min_size=1, max_size=8),
    source=st.sampled_from(["dicts", "pandas", "writer"]),
)
def test_each_datetime_into_a_timestamp_column_converts_as_it_would_alone(
    tmp_path_factory: pytest.TempPathFactory, values: list[dt.datetime | None], source: str
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("w")))
    table = warehouse.create_table("t", {"id": "BIGINT", "at": "TIMESTAMP"}, primary_key="id")
    rows = [{"id": i, "at": v} for i, v in enumerate(values)]
    if source == "dicts":
        table.insert(rows)
    elif source == "pandas":
        table.insert(
            pd.DataFrame({"id": range(len(values)), "at": pd.Series(values, dtype=object)})
        )
    else:
        with table.writer(max_seconds=None) as writer:
            for row in rows:
                writer.write(row)
    stored = {r["id"]: r["at"] for r in table.to_arrow().to_pylist()}
    assert stored == {i: _alone(v) for i, v in enumerate(values)}


def test_a_naive_datetime_among_zoned_ones_is_refused_by_a_timestamptz_column(tmp_path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "at": "TIMESTAMPTZ"}, primary_key="id"
    )
    zoned = dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)
    with pytest.raises(TypeMismatchError, match=r"row 1 .*'at'"):
        table.insert([{"id": 1, "at": zoned}, {"id": 2, "at": zoned.replace(tzinfo=None)}])
    assert table.count() == 0
