"""Appends written by Spark's own Parquet writer (ledger/engines/spark/native_write.py).

The files must be what the shared writer would write (docs/format.md section 7): the same
Parquet schema (physical and logical types, every column optional), row groups of at most
131,072 rows, rows sorted by key then ``trx_seq``, one partition per file, markers equal to
their rows' statistics, ``trx_seq`` 0..n-1 and generated ``_row_id`` (trx_id << 32) + 0..n-1.
The answers must be those of the embedded engine given the same rows. A failure part-way
leaves nothing visible and no file behind.
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import ledger
import ledger.spark as ls
import views
from ledger.engines.spark import native_write
from ledger.log.entries import json_value
from ledger.partitioning import PartitionSpec
from tests.conftest import examples

pytestmark = pytest.mark.spark

SCHEMA = {
    "k": "BIGINT",
    "s": "VARCHAR",
    "amount": "DECIMAL(12,2)",
    "at": "TIMESTAMPTZ",
    "day": "DATE",
    "x": "DOUBLE",
    "flag": "BOOLEAN",
    "small": "TINYINT",
}
ARROW = pa.schema(
    [
        ("k", pa.int64()),
        ("s", pa.string()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("x", pa.float64()),
        ("flag", pa.bool_()),
        ("small", pa.int8()),
    ]
)
PARTITIONS = ["s", "month(at)"]


def _row(i: int, key: int | None = None) -> dict[str, Any]:
    return {
        "k": i if key is None else key,
        "s": ["a", "", None, "é/x"][i % 4],
        "amount": Decimal(i) / 4,
        "at": None if i % 5 == 4 else dt.datetime(2026, 1 + i % 3, 1, 23, tzinfo=dt.UTC),
        "day": dt.date(2026, 1, 1 + i % 28),
        "x": float("nan") if i % 7 == 6 else i / 3,
        "flag": i % 2 == 0,
        "small": i % 100,
    }


def _frame(spark: Any, rows: list[dict[str, Any]], partitions: int) -> Any:
    data = pa.Table.from_pylist(rows, schema=ARROW)
    return spark.createDataFrame(data).repartition(partitions)


def _parquet_columns(path: str) -> list[tuple[Any, ...]]:
    schema = pq.ParquetFile(path).schema
    return [
        (c.name, c.physical_type, str(c.logical_type), c.max_definition_level, c.length)
        for c in (schema.column(i) for i in range(len(schema)))
    ]


def _visible(table: ledger.Table) -> list[str]:
    return sorted(map(repr, views.visible(table).fetchall()))  # NaN equals itself as text


def _check_files(table: ledger.Table) -> pa.Table:
    """Every alive file as the format requires; returns all entries."""
    state = table.handle.latest_state()
    spec = PartitionSpec.parse(list(state.config.partition_by), state.schema)
    keys = list(state.config.key_columns)
    pieces = []
    for marker in table.snapshot().markers():
        path = os.path.join(table.store.local_path(table.prefix) or "", marker.path)
        assert os.path.basename(path)[:-8].isalnum() and len(os.path.basename(path)) == 40
        parquet = pq.ParquetFile(path)
        assert all(
            parquet.metadata.row_group(i).num_rows <= 131_072
            for i in range(parquet.metadata.num_row_groups)
        )
        rows = parquet.read()
        order = [*keys, "trx_seq"]
        in_order = pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in order])
        assert in_order.to_pylist() == list(range(rows.num_rows))
        for field in spec.fields:
            assert set(field.values(rows).to_pylist()) == {marker.partition[field.name]}
        assert spec.path(marker.partition) in marker.path
        assert marker.rows == rows.num_rows
        assert marker.dml_sum == pc.sum(rows.column("dml_type")).as_py()
        trx = rows.column("trx_id")
        assert (marker.trx_min, marker.trx_max) == (pc.min(trx).as_py(), pc.max(trx).as_py())
        assert marker.trx_min == marker.trx_max
        assert marker.key_min == tuple(json_value(pc.min(rows.column(k)).as_py()) for k in keys)
        assert marker.key_max == tuple(json_value(pc.max(rows.column(k)).as_py()) for k in keys)
        key_tuples = list(zip(*(rows.column(k).to_pylist() for k in keys), strict=True))
        assert marker.unique_keys == (len(set(key_tuples)) == len(key_tuples))
        pieces.append(rows)
    return pa.concat_tables(pieces) if pieces else pa.table({})


def test_spark_files_have_the_embedded_writers_format(spark: Any, tmp_path: Any) -> None:
    wh = ledger.connect(str(tmp_path))
    rows = [_row(i) for i in range(300)]
    embedded = wh.create_table("embedded", SCHEMA, primary_key="k", partition_by=PARTITIONS)
    on_spark = wh.create_table("on_spark", SCHEMA, primary_key="k", partition_by=PARTITIONS)
    embedded.insert(pa.Table.from_pylist(rows, schema=ARROW))
    conf = {k: spark.conf.get(k, None) for k in native_write._SESSION_SETTINGS}
    info = ls.insert(on_spark, _frame(spark, rows, 3))
    assert {k: spark.conf.get(k, None) for k in native_write._SESSION_SETTINGS} == conf
    assert (info.inserted, info.deleted, on_spark.count()) == (300, 0, 300)

    entries = _check_files(on_spark)
    assert sorted(entries.column("trx_seq").to_pylist()) == list(range(300))
    spark_file = on_spark.files()[0]
    embedded_file = embedded.files()[0]
    assert _parquet_columns(spark_file) == _parquet_columns(embedded_file)
    # Nothing but the table's files is left in its data folder.
    data = os.path.join(on_spark.store.local_path(on_spark.prefix) or "", "_data")
    left = {os.path.relpath(os.path.join(d, f), data) for d, _, fs in os.walk(data) for f in fs}
    assert left == {m.path.removeprefix("_data/") for m in on_spark.snapshot().markers()}
    assert _visible(on_spark) == _visible(embedded)


def test_large_spark_files_keep_row_groups_and_file_sizes(spark: Any, tmp_path: Any) -> None:
    """600,000 rows in one Spark partition: two files of consecutive key ranges (at most
    524,288 rows each), row groups of at most 131,072 rows; generated row ids 0..n-1."""
    from pyspark.sql import functions as F

    table = ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT", "v": "BIGINT"})
    n = 600_000
    frame = spark.range(0, n, numPartitions=1).select(
        F.pmod(F.col("id") * F.lit(7919), F.lit(n)).alias("k"), F.col("id").alias("v")
    )
    assert ls.insert(table, frame).inserted == n
    markers = sorted(table.snapshot().markers(), key=lambda m: m.key_min)
    assert [m.rows for m in markers] == [524_288, n - 524_288]
    entries = _check_files(table)
    assert markers[0].key_max < markers[1].key_min
    assert sorted(entries.column("_row_id").to_pylist()) == [(1 << 32) + i for i in range(n)]
    assert sorted(entries.column("trx_seq").to_pylist()) == list(range(n))


row_strategy = st.builds(
    lambda i, key: _row(i, key), st.integers(0, 50), st.one_of(st.none(), st.integers(0, 5))
)


@settings(
    max_examples=examples(5),
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(
    batches=st.lists(st.lists(row_strategy, min_size=1, max_size=12), min_size=1, max_size=2),
    partitions=st.integers(1, 3),
    keyed=st.booleans(),
)
def test_spark_appends_equal_the_embedded_engines(
    spark: Any, tmp_path_factory: Any, batches: Any, partitions: int, keyed: bool
) -> None:
    """Duplicate keys, NULL partition values, several Spark partitions and files, tables with
    and without a key: the same raw entries (but for their order) and the same answers."""
    wh = ledger.connect(str(tmp_path_factory.mktemp("native")))
    key = {"primary_key": "k"} if keyed else {}
    embedded = wh.create_table("embedded", SCHEMA, partition_by=PARTITIONS, **key)
    on_spark = wh.create_table("on_spark", SCHEMA, partition_by=PARTITIONS, **key)
    for batch in batches:
        embedded.insert(pa.Table.from_pylist(batch, schema=ARROW))
        ls.insert(on_spark, _frame(spark, batch, partitions))
    assert on_spark.count() == embedded.count()
    _check_files(on_spark)
    system = ["trx_seq", "_row_id"]

    def entries(table: ledger.Table) -> list[str]:
        raw = table.scan().to_arrow_table()
        raw = raw.drop_columns([c for c in system if c in raw.column_names])
        return sorted(map(repr, raw.to_pylist()))

    assert entries(on_spark) == entries(embedded)
    for trx in range(1, len(batches) + 1):
        raw = on_spark.scan().to_arrow_table().filter(pc.field("trx_id") == trx)
        assert sorted(raw.column("trx_seq").to_pylist()) == list(range(raw.num_rows))
        if not keyed:
            ids = sorted(raw.column("_row_id").to_pylist())
            assert ids == [(trx << 32) + i for i in range(raw.num_rows)]
    assert _visible(on_spark) == _visible(embedded)


def test_a_failure_after_spark_wrote_leaves_nothing(
    spark: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    """The second file's marker fails: the first file, already moved into place, is deleted,
    the staging folder is gone, nothing is committed; the next insert works."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t", SCHEMA, primary_key="k", partition_by=PARTITIONS
    )
    real_marker = native_write._marker
    calls: list[int] = []

    def failing_marker(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk gone")
        return real_marker(*args, **kwargs)

    monkeypatch.setattr(native_write, "_marker", failing_marker)
    rows = [_row(i) for i in range(40)]
    with pytest.raises(OSError, match="disk gone"):
        ls.insert(table, _frame(spark, rows, 2))
    assert table.refresh().version == 0 and table.count() == 0
    data = os.path.join(table.store.local_path(table.prefix) or "", "_data")
    assert [f for _, _, fs in os.walk(data) for f in fs] == []
    monkeypatch.setattr(native_write, "_marker", real_marker)
    assert ls.insert(table, _frame(spark, rows, 2)).inserted == 40


def test_only_partition_local_numbering_is_written_by_spark() -> None:
    """Spark's writer numbers rows by position in their Spark partition: a partition holding
    marks and insertions, or rows with and without a ``_row_id``, goes to the shared writer."""
    one_kind = native_write.numbering({(0, 1): 3, (1, 0): 2}, {}, {(0, 1): 2, (1, 0): 0}, {})
    assert one_kind == native_write.Numbering(
        expected={0: 3, 1: 2}, kind={0: 1, 1: 0}, first_seq={0: 2, 1: 0}, first_row={}
    )
    assert native_write.numbering({(0, 0): 1, (0, 1): 1}, {}, {(0, 0): 0, (0, 1): 1}, {}) is None
    assert native_write.numbering({(0, 1): 3}, {0: 2}, {(0, 1): 0}, {0: 0}) is None
    all_new = native_write.numbering({(0, 1): 3}, {0: 3}, {(0, 1): 0}, {0: 7})
    assert all_new is not None and all_new.first_row == {0: 7}
