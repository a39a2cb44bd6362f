"""Splitting a write by partition: the ranked partition values, computed from a column's
distinct values, equal the per-row transform, and the files a partitioned write makes hold
exactly the rows of their partition, in the table's sort order."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.partitioning import PartitionSpec
from ledger.schema import TableSchema
from tests.conftest import examples
from tests.support.scratch import scratch_dir

SCHEMA = {"id": "BIGINT", "p": "VARCHAR", "d": "DECIMAL(10,2)", "ts": "TIMESTAMP"}
SPECS = [
    ["p"],
    ["bucket(4, id)"],
    ["bucket(3, p)", "day(ts)"],
    ["d"],
    ["bucket(5, d)"],
    ["bucket(16, id)"],  # buckets 10 to 15 sort as text between 1 and 2
    ["month(ts)", "p"],
]

texts = st.one_of(st.none(), st.sampled_from(["", "a", "ü", "☃ x", "../", "__null__"]), st.text())
decimals = st.one_of(
    st.none(),
    st.integers(-(10**6), 10**6).map(lambda c: Decimal(c).scaleb(-2).quantize(Decimal("0.01"))),
)
times = st.one_of(
    st.none(),
    st.datetimes(min_value=dt.datetime(1999, 12, 30), max_value=dt.datetime(2001, 1, 2)),
)
rows_strategy = st.lists(
    st.fixed_dictionaries({"id": st.integers(-50, 50), "p": texts, "d": decimals, "ts": times}),
    min_size=1,
    max_size=60,
)


@settings(max_examples=examples(30), deadline=None)
@given(rows=rows_strategy, spec=st.sampled_from(SPECS))
def test_ranked_values_equal_each_rows_partition_value(rows, spec):
    table = pa.Table.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("id", pa.int64()),
                ("p", pa.string()),
                ("d", pa.decimal128(10, 2)),
                ("ts", pa.timestamp("us")),
            ]
        ),
    )
    fields = PartitionSpec.parse(spec, _table_schema()).fields
    for field in fields:
        distinct, codes = field.ranked_values(table)
        expected = field.values(table).to_pylist()
        listed = distinct.to_pylist()
        assert [listed[c] for c in codes.to_pylist()] == expected
        assert len(set(listed)) == len(listed)  # each value once
        present = [v for v in listed if v is not None]
        assert present == sorted(present) and listed[: len(present)] == present  # NULL last


def _table_schema() -> TableSchema:
    return TableSchema.parse(SCHEMA)


@settings(max_examples=examples(12), deadline=None)
@given(rows=rows_strategy, spec=st.sampled_from(SPECS))
def test_each_file_holds_exactly_its_partitions_rows_in_key_order(rows, spec):
    with scratch_dir("split") as folder:
        _check_files(folder, rows, spec)


def _check_files(folder: str, rows: list[dict[str, Any]], spec: list[str]) -> None:
    warehouse = ledger.connect(folder)
    table = warehouse.create_table("t", SCHEMA, primary_key="id", partition_by=spec)
    unique = list({row["id"]: row for row in rows}.values())
    table.insert(unique)
    fields = PartitionSpec.parse(spec, _table_schema()).fields
    seen = 0
    markers = table.snapshot().markers()
    assert len({tuple(sorted(m.partition.items(), key=str)) for m in markers}) == len(markers)
    for marker in markers:
        part = pq.read_table(os.path.join(folder, "t", *marker.path.split("/")))
        seen += part.num_rows
        for field in fields:
            assert set(field.values(part).to_pylist()) == {marker.partition[field.name]}
        ids = part.column("id").to_pylist()
        assert ids == sorted(ids)
        assert marker.rows == part.num_rows
        assert marker.key_min == (min(ids),) and marker.key_max == (max(ids),)
        assert marker.unique_keys
    assert seen == len(unique)
    got = sorted(table.scan().select("id").fetchall())
    assert got == sorted((row["id"],) for row in unique)
